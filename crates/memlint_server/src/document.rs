//! Open documents: text, version, tree-sitter tree and line index, kept in step with the
//! client's incremental edits; and the conversions between LSP positions and byte offsets.

use std::ops::Range;

use memlint_linter::LineIndex;
use memlint_python::tree_sitter::{InputEdit, Point, Tree};
use tower_lsp_server::lsp_types::{Position, PositionEncodingKind, TextDocumentContentChangeEvent, Uri};

/// How LSP columns are counted, as negotiated in `initialize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
}

impl Encoding {
    pub fn kind(self) -> PositionEncodingKind {
        match self {
            Encoding::Utf8 => PositionEncodingKind::UTF8,
            Encoding::Utf16 => PositionEncodingKind::UTF16,
        }
    }
}

/// One open text document (a file, or one cell of a notebook).
pub struct Document {
    pub uri: Uri,
    pub text: String,
    pub version: i32,
    pub tree: Tree,
    pub index: LineIndex,
    /// The notebook this cell belongs to.
    pub notebook: Option<Uri>,
}

impl Document {
    pub fn new(uri: Uri, text: String, version: i32) -> Self {
        let tree = memlint_python::parse_with(&text, None);
        let index = LineIndex::new(&text);
        Document { uri, text, version, tree, index, notebook: None }
    }

    /// Applies the client's changes in order; the tree is edited for each and re-parsed
    /// once at the end, reusing the unchanged subtrees.
    pub fn apply_changes(&mut self, changes: Vec<TextDocumentContentChangeEvent>, version: i32, encoding: Encoding) {
        let mut reparse_from_scratch = false;
        for change in changes {
            match change.range {
                Some(range) => {
                    let start = self.offset(range.start, encoding);
                    let end = self.offset(range.end, encoding).max(start);
                    let start_position = self.point(start);
                    let old_end_position = self.point(end);
                    self.text.replace_range(start..end, &change.text);
                    let new_end_byte = start + change.text.len();
                    let new_end_position = match change.text.rfind('\n') {
                        Some(last) => Point {
                            row: start_position.row + change.text.matches('\n').count(),
                            column: change.text.len() - last - 1,
                        },
                        None => Point { row: start_position.row, column: start_position.column + change.text.len() },
                    };
                    self.tree.edit(&InputEdit {
                        start_byte: start,
                        old_end_byte: end,
                        new_end_byte,
                        start_position,
                        old_end_position,
                        new_end_position,
                    });
                    // The next change's positions refer to the text after this one.
                    self.index = LineIndex::new(&self.text);
                }
                None => {
                    self.text = change.text;
                    self.index = LineIndex::new(&self.text);
                    reparse_from_scratch = true;
                }
            }
        }
        self.tree = if reparse_from_scratch {
            memlint_python::parse_with(&self.text, None)
        } else {
            memlint_python::parse_with(&self.text, Some(&self.tree))
        };
        self.version = version;
    }

    fn point(&self, offset: usize) -> Point {
        let row = self.index.line_of(offset);
        Point { row, column: offset - self.index.line_start(row) }
    }

    /// Byte offset of an LSP position (clamped to the line and the text).
    pub fn offset(&self, position: Position, encoding: Encoding) -> usize {
        offset_of(&self.index, &self.text, position, encoding)
    }

    /// LSP position of a byte offset.
    pub fn position(&self, offset: usize, encoding: Encoding) -> Position {
        position_of(&self.index, &self.text, offset, encoding)
    }

    pub fn range(&self, range: Range<usize>, encoding: Encoding) -> tower_lsp_server::lsp_types::Range {
        tower_lsp_server::lsp_types::Range::new(self.position(range.start, encoding), self.position(range.end, encoding))
    }

    pub fn byte_range(&self, range: tower_lsp_server::lsp_types::Range, encoding: Encoding) -> Range<usize> {
        let start = self.offset(range.start, encoding);
        start..self.offset(range.end, encoding).max(start)
    }
}

pub fn offset_of(index: &LineIndex, text: &str, position: Position, encoding: Encoding) -> usize {
    match encoding {
        Encoding::Utf8 => index.offset_from_utf8(position.line, position.character, text),
        Encoding::Utf16 => index.offset_from_utf16(position.line, position.character, text),
    }
}

pub fn position_of(index: &LineIndex, text: &str, offset: usize, encoding: Encoding) -> Position {
    let offset = offset.min(text.len());
    match encoding {
        Encoding::Utf8 => {
            let line = index.line_of(offset);
            Position::new(line as u32, (offset - index.line_start(line)) as u32)
        }
        Encoding::Utf16 => {
            let (line, character) = index.utf16_position(offset, text);
            Position::new(line, character)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_lsp_server::lsp_types::Range as LspRange;

    fn change(sl: u32, sc: u32, el: u32, ec: u32, text: &str) -> TextDocumentContentChangeEvent {
        TextDocumentContentChangeEvent {
            range: Some(LspRange::new(Position::new(sl, sc), Position::new(el, ec))),
            range_length: None,
            text: text.to_owned(),
        }
    }

    /// The incrementally edited tree must equal a tree parsed from scratch.
    fn assert_same_tree(doc: &Document) {
        let fresh = memlint_python::parse_with(&doc.text, None);
        assert_eq!(doc.tree.root_node().to_sexp(), fresh.root_node().to_sexp());
    }

    #[test]
    fn incremental_edits_match_a_fresh_parse() {
        let uri: Uri = "file:///t.py".parse().unwrap();
        let mut doc = Document::new(uri, "x = 'é😀'\ndef f():\n    return 1\n".into(), 1);
        // Insert a line after the emoji (utf-16: the emoji counts 2 units).
        doc.apply_changes(vec![change(0, 9, 0, 9, "\ny = 2")], 2, Encoding::Utf16);
        assert_eq!(doc.text, "x = 'é😀'\ny = 2\ndef f():\n    return 1\n");
        assert_same_tree(&doc);
        // Two changes in one notification, the second on the first's result.
        doc.apply_changes(vec![change(3, 11, 3, 12, "2"), change(1, 0, 1, 1, "why")], 3, Encoding::Utf8);
        assert_eq!(doc.text, "x = 'é😀'\nwhy = 2\ndef f():\n    return 2\n");
        assert_same_tree(&doc);
        // Delete across lines.
        doc.apply_changes(vec![change(1, 0, 3, 0, "")], 4, Encoding::Utf16);
        assert_eq!(doc.text, "x = 'é😀'\n    return 2\n");
        assert_same_tree(&doc);
        assert_eq!(doc.version, 4);
    }

    #[test]
    fn positions_round_trip_in_both_encodings() {
        let uri: Uri = "file:///t.py".parse().unwrap();
        let doc = Document::new(uri, "é = '😀'; z\n".into(), 1);
        let z = doc.text.find('z').unwrap();
        assert_eq!(doc.position(z, Encoding::Utf16), Position::new(0, 10));
        assert_eq!(doc.position(z, Encoding::Utf8), Position::new(0, z as u32));
        for enc in [Encoding::Utf8, Encoding::Utf16] {
            assert_eq!(doc.offset(doc.position(z, enc), enc), z);
        }
    }
}
