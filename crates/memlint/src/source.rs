//! A file memlint lints: a Python module, or a notebook whose code cells form one program.

use std::path::Path;

use memlint_linter::LineIndex;
use memlint_notebook::Notebook;

/// Where something is, for people: 1-based row and character column, and for notebooks
/// the cell (1-based, counting every cell as Jupyter shows them) with the row counted
/// within the cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub row: usize,
    pub column: usize,
    pub cell: Option<usize>,
}

/// The text of one file and the Python program linted from it.
#[derive(Debug, Clone)]
pub struct SourceFile {
    text: String,
    /// Built on first use: most files report nothing.
    index: std::sync::OnceLock<LineIndex>,
    notebook: Option<Notebook>,
    /// A notebook in another language: its program is empty.
    foreign: bool,
}

impl SourceFile {
    /// Reads `text` as the kind of file `path` names (`.ipynb`: a notebook). Errors say
    /// why it is not lintable.
    pub fn new(path: &Path, text: String) -> Result<SourceFile, String> {
        if path.extension().map(|e| e == "ipynb").unwrap_or(false) {
            let notebook = Notebook::parse(&text).map_err(|e| e.to_string())?;
            if notebook.language().map(|l| !l.eq_ignore_ascii_case("python")).unwrap_or(false) {
                // An R or Julia notebook: nothing for memlint to lint.
                return Ok(SourceFile { index: Default::default(), text, notebook: None, foreign: true });
            }
            return Ok(SourceFile { text, index: Default::default(), notebook: Some(notebook), foreign: false });
        }
        Ok(SourceFile { text, index: Default::default(), notebook: None, foreign: false })
    }

    pub fn is_notebook(&self) -> bool {
        self.notebook.is_some()
    }

    /// The file's text as it is on disk.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The Python program the rules see (a notebook's code cells, magics blanked out).
    pub fn program(&self) -> &str {
        match &self.notebook {
            Some(notebook) => notebook.python_source(),
            None if self.foreign => "",
            None => &self.text,
        }
    }

    /// The location of a byte offset of the program.
    pub fn location(&self, offset: usize) -> Location {
        if let Some(notebook) = &self.notebook {
            if let Some(p) = notebook.cell_position(offset) {
                return Location { row: p.row, column: p.column, cell: Some(p.cell) };
            }
        }
        let p = self.line_index().position(offset, self.program());
        Location { row: p.row, column: p.column, cell: None }
    }

    /// The program's line index (built on first use).
    pub fn line_index(&self) -> &LineIndex {
        self.index.get_or_init(|| LineIndex::new(self.program()))
    }

    /// For a notebook, the code cell that byte `offset` of the program is in: its number
    /// (as [`Location::cell`]) and the byte range of the program its lines occupy.
    pub fn cell_range(&self, offset: usize) -> Option<(usize, std::ops::Range<usize>)> {
        let notebook = self.notebook.as_ref()?;
        let program = notebook.python_source();
        let position = notebook.cell_position(offset)?;
        // Back to the start of the cell's first line: row - 1 line breaks before `offset`'s line.
        let line_start = |at: usize| program[..at.min(program.len())].rfind('\n').map(|i| i + 1).unwrap_or(0);
        // The end of the program counts as the end of its last line (as in `cell_position`).
        let mut start = line_start(if offset >= program.len() { program.len().saturating_sub(1) } else { offset });
        for _ in 1..position.row {
            start = line_start(start.saturating_sub(1));
        }
        // Forward, line by line, while the lines are the same cell's.
        let mut end = start;
        while end < program.len() {
            let next = program[end..].find('\n').map(|i| end + i + 1).unwrap_or(program.len());
            if end > start && notebook.cell_position(end).map(|p| p.cell) != Some(position.cell) {
                break;
            }
            end = next;
        }
        Some((position.cell, start..end))
    }

    /// The file with its program replaced by `fixed`: for a notebook, only the changed
    /// cells' sources are rewritten, outputs, metadata and formatting untouched.
    pub fn with_fixed_program(&self, fixed: &str) -> Result<SourceFile, String> {
        match &self.notebook {
            Some(notebook) => {
                let text = notebook.with_fixed_source(fixed).map_err(|e| e.to_string())?;
                SourceFile::new(Path::new("fixed.ipynb"), text)
            }
            None if self.foreign => Ok(self.clone()),
            None => Ok(SourceFile { text: fixed.to_owned(), index: Default::default(), notebook: None, foreign: false }),
        }
    }
}
