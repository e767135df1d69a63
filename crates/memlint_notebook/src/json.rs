//! Reading the notebook JSON with the byte ranges of each code cell's `source` value, and
//! writing a new `source` value in the style of the old one.
//!
//! serde_json parses borrowed [`RawValue`]s: slices of the original text, whose pointer
//! offsets give the byte ranges to splice. Nothing else of the document is re-serialized.

use std::collections::HashMap;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::NotebookError;

pub(crate) struct RawNotebook {
    pub(crate) cell_count: usize,
    pub(crate) code_cells: Vec<RawCodeCell>,
    pub(crate) language: Option<String>,
    pub(crate) ensure_ascii: bool,
}

pub(crate) struct RawCodeCell {
    /// 0-based among all cells.
    pub(crate) index: usize,
    pub(crate) source_range: Range<usize>,
    pub(crate) source: SourceValue,
    pub(crate) text: String,
}

/// How a cell's `source` was written.
#[derive(Debug, Clone)]
pub(crate) enum SourceValue {
    /// One JSON string.
    String,
    /// A list of strings: each element's decoded text and byte range in the document, and
    /// the whitespace and commas around them.
    Array { elements: Vec<(String, Range<usize>)>, style: ArrayStyle },
}

#[derive(Debug, Clone)]
pub(crate) struct ArrayStyle {
    /// Between `[` and the first element.
    open: String,
    /// Between two elements (the comma included).
    sep: String,
    /// Between the last element and `]`.
    close: String,
}

#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow)]
    cells: Option<&'a RawValue>,
    nbformat: Option<serde_json::Value>,
    metadata: Option<serde_json::Value>,
    worksheets: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Cell<'a> {
    cell_type: Option<serde_json::Value>,
    #[serde(borrow)]
    source: Option<&'a RawValue>,
}

/// serde_json's message without its " at line L column C" suffix.
fn message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_owned()
}

fn kind_of(value: &str) -> &'static str {
    match value.trim_start().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "a list",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// Byte offset of `part` (a slice of `doc`) in `doc`.
fn offset_in(doc: &str, part: &str) -> usize {
    let offset = (part.as_ptr() as usize).wrapping_sub(doc.as_ptr() as usize);
    debug_assert!(offset + part.len() <= doc.len(), "a raw value borrows from the document");
    offset
}

pub(crate) fn parse(doc: &str) -> Result<RawNotebook, NotebookError> {
    // A UTF-8 byte order mark is not JSON, but editors write it.
    let body = doc.strip_prefix('\u{feff}').unwrap_or(doc);
    let root: &RawValue = serde_json::from_str(body).map_err(|e| NotebookError::Json {
        message: message(&e),
        line: e.line(),
        column: e.column(),
    })?;
    if !root.get().starts_with('{') {
        return Err(NotebookError::NotANotebook(format!(
            "the document is {}, not an object with `cells`",
            kind_of(root.get())
        )));
    }
    let top: Top<'_> =
        serde_json::from_str(root.get()).map_err(|e| NotebookError::NotANotebook(message(&e)))?;
    match &top.nbformat {
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(4) => {}
        Some(other) => return Err(NotebookError::UnsupportedFormat(other.to_string())),
        None if top.worksheets.is_some() => return Err(NotebookError::UnsupportedFormat("3".to_owned())),
        None => {}
    }
    let Some(cells) = top.cells else {
        return Err(NotebookError::NotANotebook("it has no `cells` list".to_owned()));
    };
    let cells: Vec<&RawValue> = serde_json::from_str(cells.get()).map_err(|_| {
        NotebookError::NotANotebook(format!("`cells` is {}, not a list", kind_of(cells.get())))
    })?;

    let mut code_cells = Vec::new();
    for (index, raw) in cells.iter().enumerate() {
        let bad = |reason: String| NotebookError::BadCell { cell: index + 1, reason };
        if !raw.get().starts_with('{') {
            return Err(bad(format!("a cell must be an object, found {}", kind_of(raw.get()))));
        }
        let cell: Cell<'_> = serde_json::from_str(raw.get()).map_err(|e| bad(message(&e)))?;
        let cell_type = match cell.cell_type {
            Some(serde_json::Value::String(s)) => s,
            Some(other) => return Err(bad(format!("`cell_type` must be a string, found {other}"))),
            None => return Err(bad("no `cell_type`".to_owned())),
        };
        if cell_type != "code" {
            // Markdown, raw (and unknown) cells are not code; their sources are not read.
            continue;
        }
        let Some(source) = cell.source else {
            return Err(bad("a code cell without `source`".to_owned()));
        };
        let not_text = || bad(format!("`source` must be a string or a list of strings, found {}", kind_of(source.get())));
        let start = offset_in(doc, source.get());
        let source_range = start..start + source.get().len();
        let (value, text) = match source.get().as_bytes().first() {
            Some(b'"') => (SourceValue::String, serde_json::from_str::<String>(source.get()).map_err(|_| not_text())?),
            Some(b'[') => {
                let items: Vec<&RawValue> = serde_json::from_str(source.get()).map_err(|_| not_text())?;
                let mut elements = Vec::with_capacity(items.len());
                for item in &items {
                    let text: String = serde_json::from_str(item.get()).map_err(|_| not_text())?;
                    let at = offset_in(doc, item.get());
                    elements.push((text, at..at + item.get().len()));
                }
                let text = elements.iter().map(|(t, _)| t.as_str()).collect();
                let style = ArrayStyle::of(doc, &source_range, &elements);
                (SourceValue::Array { elements, style }, text)
            }
            _ => return Err(not_text()),
        };
        code_cells.push(RawCodeCell { index, source_range, source: value, text });
    }

    let language = top.metadata.as_ref().and_then(|m| {
        m.pointer("/language_info/name")
            .or_else(|| m.pointer("/kernelspec/language"))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    });
    Ok(RawNotebook { cell_count: cells.len(), code_cells, language, ensure_ascii: writes_ascii_escapes(doc) })
}

/// Was the file written with non-ASCII escaped (`\u00e9`) rather than as UTF-8?
fn writes_ascii_escapes(doc: &str) -> bool {
    if !doc.is_ascii() {
        return false;
    }
    let bytes = doc.as_bytes();
    let mut i = 0;
    while i + 5 < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes[i + 1] == b'u' {
                let hex = &doc[i + 2..i + 6];
                if u32::from_str_radix(hex, 16).is_ok_and(|c| c >= 0x80) {
                    return true;
                }
            }
            i += 2; // skip the escaped character, so `\\u` is not read as an escape
            continue;
        }
        i += 1;
    }
    false
}

impl ArrayStyle {
    fn of(doc: &str, array: &Range<usize>, elements: &[(String, Range<usize>)]) -> ArrayStyle {
        let open_at = array.start + 1;
        let close_at = array.end - 1;
        match elements {
            [] => {
                // `[]`: lay elements out like the rest of the document.
                let line_start = doc[..array.start].rfind('\n').map_or(0, |i| i + 1);
                let line = &doc[line_start..array.start];
                let indent = &line[..line.len() - line.trim_start().len()];
                match indent_unit(doc) {
                    Some(unit) => {
                        let open = format!("\n{indent}{unit}");
                        ArrayStyle { sep: format!(",{open}"), open, close: format!("\n{indent}") }
                    }
                    None => ArrayStyle { open: String::new(), sep: ",".to_owned(), close: String::new() },
                }
            }
            [only] => {
                let open = doc[open_at..only.1.start].to_owned();
                let sep = format!(",{open}");
                ArrayStyle { open, sep, close: doc[only.1.end..close_at].to_owned() }
            }
            [first, second, ..] => ArrayStyle {
                open: doc[open_at..first.1.start].to_owned(),
                sep: doc[first.1.end..second.1.start].to_owned(),
                close: doc[elements[elements.len() - 1].1.end..close_at].to_owned(),
            },
        }
    }
}

/// The document's indentation step (nbformat: one space), or `None` for a one-line file.
fn indent_unit(doc: &str) -> Option<&str> {
    let second_line = doc.split('\n').nth(1)?;
    let unit = &second_line[..second_line.len() - second_line.trim_start().len()];
    Some(if unit.is_empty() { " " } else { unit })
}

/// A JSON string literal for `text`, as Python's `json.dumps` writes it (serde_json
/// escapes the same characters), with non-ASCII escaped when `ensure_ascii`.
fn string_literal(text: &str, ensure_ascii: bool) -> String {
    let json = serde_json::to_string(text).expect("a string always serializes");
    if !ensure_ascii || json.is_ascii() {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

impl SourceValue {
    /// The JSON text of a `source` holding `text`, in this value's style.
    pub(crate) fn render(&self, doc: &str, text: &str, ensure_ascii: bool) -> String {
        match self {
            SourceValue::String => string_literal(text, ensure_ascii),
            SourceValue::Array { elements, style } => {
                if text.is_empty() {
                    return "[]".to_owned();
                }
                // Lines that were elements before keep their original spelling.
                let original: HashMap<&str, &str> =
                    elements.iter().rev().map(|(t, range)| (t.as_str(), &doc[range.clone()])).collect();
                let mut out = String::with_capacity(text.len() + 64);
                out.push('[');
                out.push_str(&style.open);
                for (i, line) in text.split_inclusive('\n').enumerate() {
                    if i > 0 {
                        out.push_str(&style.sep);
                    }
                    match original.get(line) {
                        Some(raw) => out.push_str(raw),
                        None => out.push_str(&string_literal(line, ensure_ascii)),
                    }
                }
                out.push_str(&style.close);
                out.push(']');
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_like_python_json() {
        assert_eq!(string_literal("a\"b\\c\n\t\u{1}é", false), "\"a\\\"b\\\\c\\n\\t\\u0001é\"");
        assert_eq!(string_literal("é😀", true), "\"\\u00e9\\ud83d\\ude00\"");
    }

    #[test]
    fn ascii_escape_detection() {
        assert!(writes_ascii_escapes(r#"{"a": "caf\u00e9"}"#));
        assert!(!writes_ascii_escapes(r#"{"a": "\\u00e9 \u0001"}"#));
        assert!(!writes_ascii_escapes("{\"a\": \"café \\u00e9\"}"));
    }
}
