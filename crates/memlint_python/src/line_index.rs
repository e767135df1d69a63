//! Byte offsets to 1-based rows and character columns (and UTF-16 columns for LSP).

/// A position for people: 1-based row and 1-based column counted in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SourcePosition {
    pub row: usize,
    pub column: usize,
}

/// Start offsets of every line of a text.
#[derive(Debug, Clone)]
pub struct LineIndex {
    line_starts: Vec<usize>,
    len: usize,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut line_starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i + 1);
            }
        }
        LineIndex { line_starts, len: text.len() }
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// 0-based line of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset.min(self.len)) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// Byte offset where 0-based `line` starts (the end of the text past the last line).
    pub fn line_start(&self, line: usize) -> usize {
        self.line_starts.get(line).copied().unwrap_or(self.len)
    }

    /// Byte range of 0-based `line`, without its line break.
    pub fn line_range(&self, line: usize, text: &str) -> (usize, usize) {
        let start = self.line_start(line);
        let mut end = self.line_start(line + 1);
        if end > start && text.as_bytes().get(end - 1) == Some(&b'\n') {
            end -= 1;
        }
        if end > start && text.as_bytes().get(end - 1) == Some(&b'\r') {
            end -= 1;
        }
        (start, end)
    }

    /// 1-based row and character column of a byte offset. An offset inside a
    /// multi-byte character counts as that character.
    pub fn position(&self, offset: usize, text: &str) -> SourcePosition {
        let offset = offset.min(text.len());
        let line = self.line_of(offset);
        let start = self.line_start(line);
        let column = text
            .get(start..)
            .map(|rest| rest.char_indices().take_while(|(i, _)| start + i < offset).count())
            .unwrap_or(0);
        SourcePosition { row: line + 1, column: column + 1 }
    }

    /// 0-based line and UTF-16 code-unit column of a byte offset (LSP's default encoding).
    pub fn utf16_position(&self, offset: usize, text: &str) -> (u32, u32) {
        let offset = offset.min(text.len());
        let line = self.line_of(offset);
        let start = self.line_start(line);
        // Most lines of Python are ASCII, where a byte is a UTF-16 unit.
        if text.as_bytes()[start..offset].is_ascii() {
            return (line as u32, (offset - start) as u32);
        }
        let col: usize = text[start..]
            .char_indices()
            .take_while(|(i, _)| start + i < offset)
            .map(|(_, c)| c.len_utf16())
            .sum();
        (line as u32, col as u32)
    }

    /// Byte offset of a 0-based line and a column in UTF-16 code units, clamped to the line.
    pub fn offset_from_utf16(&self, line: u32, col: u32, text: &str) -> usize {
        let line = line as usize;
        if line >= self.line_starts.len() {
            return text.len();
        }
        let (start, end) = self.line_range(line, text);
        let mut units = 0u32;
        for (i, c) in text[start..end].char_indices() {
            if units >= col {
                return start + i;
            }
            units += c.len_utf16() as u32;
        }
        end
    }

    /// Byte offset of a 0-based line and a column in bytes (LSP's utf-8 encoding), clamped.
    pub fn offset_from_utf8(&self, line: u32, col: u32, text: &str) -> usize {
        let line = line as usize;
        if line >= self.line_starts.len() {
            return text.len();
        }
        let (start, end) = self.line_range(line, text);
        let mut offset = (start + col as usize).min(end);
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters() {
        let text = "é = 1\nx = 'ü😀' + y\n";
        let index = LineIndex::new(text);
        let y = text.find('y').unwrap();
        assert_eq!(index.position(y, text), SourcePosition { row: 2, column: 12 });
        assert_eq!(index.utf16_position(y, text), (1, 12));
        assert_eq!(index.offset_from_utf16(1, 12, text), y);
        assert_eq!(index.offset_from_utf8(1, (y - text.find('x').unwrap()) as u32, text), y);
    }

    #[test]
    fn utf16_columns_on_ascii_and_other_lines_count_as_characters_do() {
        let text = "import torch\nx = 'ü😀' + y  # é\n\n  z = 1\r\n😀😀\nlast";
        let index = LineIndex::new(text);
        for offset in 0..=text.len() + 2 {
            // What a column is: the UTF-16 units of the characters that start before it.
            let clamped = offset.min(text.len());
            let line = index.line_of(clamped);
            let start = index.line_start(line);
            let units: usize = text[start..].char_indices().take_while(|(i, _)| start + i < clamped).map(|(_, c)| c.len_utf16()).sum();
            assert_eq!(index.utf16_position(offset, text), (line as u32, units as u32), "offset {offset}");
        }
    }

    #[test]
    fn end_of_text_is_a_position() {
        let text = "a\nb";
        let index = LineIndex::new(text);
        assert_eq!(index.position(3, text), SourcePosition { row: 2, column: 2 });
        assert_eq!(index.position(99, text), SourcePosition { row: 2, column: 2 });
    }
}
