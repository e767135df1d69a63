//! A file memlint lints: a Python module, or a notebook whose code cells form one program.

use std::path::Path;

use memlint_linter::LineIndex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Python,
}

/// Where something is, for people: 1-based row and character column, and the notebook
/// cell (1-based) with the row counted within the cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub row: usize,
    pub column: usize,
    pub cell: Option<usize>,
}

/// The text of one file and the Python program linted from it.
#[derive(Debug, Clone)]
pub struct SourceFile {
    kind: SourceKind,
    text: String,
    index: LineIndex,
}

impl SourceFile {
    /// Reads `text` as the kind of file `path` names. Errors say why it is not lintable.
    pub fn new(_path: &Path, text: String) -> Result<SourceFile, String> {
        let index = LineIndex::new(&text);
        Ok(SourceFile { kind: SourceKind::Python, text, index })
    }

    pub fn kind(&self) -> SourceKind {
        self.kind
    }

    /// The file's text as it is on disk.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The Python program the rules see.
    pub fn program(&self) -> &str {
        &self.text
    }

    /// The location of a byte offset of the program.
    pub fn location(&self, offset: usize) -> Location {
        let p = self.index.position(offset, &self.text);
        Location { row: p.row, column: p.column, cell: None }
    }

    /// The file with its program replaced by `fixed`.
    pub fn with_fixed_program(&self, fixed: &str) -> Result<SourceFile, String> {
        Ok(SourceFile { kind: self.kind, text: fixed.to_owned(), index: LineIndex::new(fixed) })
    }
}
