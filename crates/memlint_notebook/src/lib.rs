//! Jupyter notebooks (nbformat 4) for memlint: the code cells as one Python program, a map
//! from that program back to cells, and a write-back of fixed code that edits only the
//! changed cells' `source` and leaves every other byte of the file as it was.
//!
//! This crate does no I/O: callers pass the notebook's text and get text back.
//!
//! # Interface
//!
//! - [`Notebook::parse`]`(text)` reads a notebook, or says why it is not one
//!   ([`NotebookError`], whose `Display` gives the reason).
//! - [`Notebook::python_source`] is the program to lint: the code cells in order, each
//!   cell's text followed by one `"\n"` separator. IPython lines become Python-neutral
//!   placeholders on the same line, so line numbers within each cell are unchanged:
//!   line magics, shell escapes, help and automagic (`%time f()`, `!pip install x`,
//!   `files = !ls`, `torch.cuda?`, `pip install x`) become `pass  # ipython magic` at the
//!   line's own indentation (valid even as the only statement of a block); their backslash
//!   continuation lines become comments. A cell magic's `%%` line becomes `pass`; the body
//!   of `%%time`, `%%timeit`, `%%capture`, `%%prun`, `%%debug`, `%%python`, `%%python3`
//!   and `%%pypy` is linted as Python (as ruff does), the body of any other cell magic
//!   (`%%bash`, `%%writefile`, ...) becomes comments. Markdown and raw cells are skipped.
//! - [`Notebook::cell_position`]`(offset)` maps a byte offset of the program to a
//!   [`CellPosition`] `{ cell, row, column }`, all 1-based.
//! - [`Notebook::with_fixed_source`]`(fixed_program)` takes the program after fixes (for
//!   example `memlint_linter::apply_fixes(nb.python_source(), ..).source`) and returns the
//!   notebook text with the changed cells' `source` rewritten.
//!
//! ```
//! use memlint_linter::{apply_fixes, lint, FixMode, LinterSettings};
//! use memlint_notebook::Notebook;
//!
//! let text = r##"{"cells": [
//!   {"cell_type": "markdown", "source": ["# Training"]},
//!   {"cell_type": "code", "source": ["import torch\n", "train_loader = torch.utils.data.DataLoader(data)\n", "for x, y in train_loader:\n", "    !nvidia-smi\n", "    torch.cuda.empty_cache()"]}
//! ], "nbformat": 4}"##;
//! let nb = Notebook::parse(text)?;
//! let settings = LinterSettings::default();
//! let found = lint(nb.python_source(), &settings).diagnostics;
//! let at = nb.cell_position(found[0].range.start).unwrap();
//! assert_eq!((at.cell, at.row, at.column), (2, 5, 5)); // "cell 2, line 5"
//!
//! let fixed = apply_fixes(nb.python_source(), &settings, FixMode::Safe);
//! let new_text = nb.with_fixed_source(&fixed.source)?;
//! // The last line of the cell is gone; the magic is now the last line (no "\n").
//! assert!(new_text.contains(r#""for x, y in train_loader:\n", "    !nvidia-smi"]"#));
//! # Ok::<(), memlint_notebook::NotebookError>(())
//! ```
//!
//! # Cell numbers
//!
//! [`CellPosition::cell`] is the 1-based index of the cell among **all** cells of the
//! notebook, markdown and raw cells included, i.e. the cell the user counts to in Jupyter.
//! This is ruff's convention: ruff's `NotebookIndex` records each code cell's raw index
//! in `notebook.cells` (`OneIndexed::from_zero_indexed(raw_cell_index)`), its text output
//! reads `file.ipynb:cell 3:5:1: ...` and its JSON output carries that number as
//! `"cell": 3` with `location.row`/`column` relative to the cell. Rows are 1-based lines
//! within the cell's source; columns are 1-based and count characters (Unicode scalar
//! values), not bytes.
//!
//! # Write-back
//!
//! The fixed program is compared with [`Notebook::python_source`] line by line (a Myers
//! diff), and every changed run of lines is assigned to the cell it falls in:
//!
//! - a run that replaces or deletes lines of two cells is refused
//!   ([`NotebookError::FixCrossesCells`]);
//! - lines inserted exactly at a cell boundary go to the start of the following cell
//!   (fixes insert before the statement they wrap or import for); lines inserted after
//!   the last line of the program go to the last code cell;
//! - placeholder lines must come through unchanged, except for re-indentation (a fix
//!   that wraps a loop holding `!nvidia-smi` in `with torch.no_grad():`), which is
//!   applied to the original magic line; a fix that deletes or edits a placeholder, or
//!   changes how IPython would read a magic (code inserted before a `%%` line, between
//!   a magic and its continuation), is refused ([`NotebookError::FixTouchesMagic`]).
//!
//! Each changed cell's new text is its lines minus the separator. Its `source` JSON value
//! is written back in the style it had: a string stays a string; a list becomes one
//! element per line (each ending in `"\n"` except the last, like nbformat), with the
//! original element indentation and separators, unchanged lines keeping their original
//! JSON spelling, and non-ASCII escaped as `\uXXXX` only if the file was written that way.
//! Everything outside the changed `source` values (outputs, metadata, ids, key order,
//! indentation, the final newline) is copied byte for byte.
//!
//! # Not handled
//!
//! - nbformat 3 and older (refused with [`NotebookError::UnsupportedFormat`]); the kernel
//!   language is not checked here: see [`Notebook::language`].
//! - Automagic other than `pip`/`conda`/`mamba` package commands (`cd data`, `ls` without
//!   `%`), IPython's stripping of a cell's common leading indentation, and custom input
//!   transformers: such lines reach the linter as they are (a syntax error at worst).
//! - Which side of a cell boundary an inserted or deleted line belongs to is read from the
//!   text alone: where identical lines (typically blank ones) meet at a boundary, such a
//!   change may land in the neighbouring cell. The program the cells spell is the same.
//! - A fix that deletes every line of a cell leaves the cell empty (`""`), which is one
//!   blank line in the program, not zero.
//! - Ranges: an offset just past a cell's separator is the first column of the next
//!   code cell, so a range that ends there ends in the next cell, as with ruff.

mod json;
mod magic;
mod writeback;

use std::fmt;
use std::ops::Range;

use magic::LineKind;

/// Why a text could not be read as a notebook, or a fix could not be written back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotebookError {
    /// The text is not JSON.
    #[error("not valid JSON: {message} (line {line}, column {column})")]
    Json { message: String, line: usize, column: usize },
    /// The text is JSON, but not a Jupyter notebook.
    #[error("not a Jupyter notebook: {0}")]
    NotANotebook(String),
    /// A notebook of a format version other than 4.
    #[error("unsupported notebook format: nbformat {0} (memlint reads nbformat 4)")]
    UnsupportedFormat(String),
    /// One cell is malformed. `cell` is 1-based among all cells.
    #[error("cell {cell}: {reason}")]
    BadCell { cell: usize, reason: String },
    /// A fix changed lines of two cells at once (cells are 1-based among all cells).
    #[error("a fix changes cells {first} and {second} together; cannot write it back into separate cells")]
    FixCrossesCells { first: usize, second: usize },
    /// A fix changed an IPython magic or shell line, or how IPython would read one.
    #[error("a fix changes the IPython magic or shell command in cell {cell}, line {row}; not writing it back")]
    FixTouchesMagic { cell: usize, row: usize },
    /// The fixed program has text but the notebook has no code cell to hold it.
    #[error("the notebook has no code cell to write the fixed code into")]
    NoCodeCell,
}

/// A position in a notebook, all 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct CellPosition {
    /// Index of the cell among all cells (markdown and raw included), as ruff reports it.
    pub cell: usize,
    /// Line within the cell's source.
    pub row: usize,
    /// Character (not byte) within the line.
    pub column: usize,
}

impl fmt::Display for CellPosition {
    /// `cell 3, line 5, column 9`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cell {}, line {}, column {}", self.cell, self.row, self.column)
    }
}

/// A parsed notebook. Owns a copy of the text it was parsed from.
#[derive(Debug, Clone)]
pub struct Notebook {
    text: String,
    cell_count: usize,
    code_cells: Vec<CodeCell>,
    program: String,
    /// Byte offset in `program` where each program line starts.
    line_starts: Vec<usize>,
    /// Index into `code_cells` of each program line.
    line_cell: Vec<usize>,
    language: Option<String>,
    /// The file escapes non-ASCII (`json.dump(ensure_ascii=True)`).
    ensure_ascii: bool,
}

#[derive(Debug, Clone)]
struct CodeCell {
    /// 0-based among all cells.
    index: usize,
    /// Byte range of the `source` JSON value in the notebook text.
    source_range: Range<usize>,
    source: json::SourceValue,
    /// The source as one string.
    text: String,
    /// The cell's lines (`text.split('\n')`).
    kinds: Vec<LineKind>,
    /// First program line of this cell.
    first_line: usize,
}

impl CodeCell {
    fn lines(&self) -> std::str::Split<'_, char> {
        self.text.split('\n')
    }
}

impl Notebook {
    /// Reads an nbformat 4 notebook. Never panics; says what is wrong otherwise.
    pub fn parse(text: &str) -> Result<Notebook, NotebookError> {
        let raw = json::parse(text)?;
        let mut code_cells = Vec::new();
        let mut program = String::new();
        let mut line_starts = Vec::new();
        let mut line_cell = Vec::new();
        for raw_cell in raw.code_cells {
            let kinds = magic::classify(&raw_cell.text);
            let first_line = line_starts.len();
            for (line, kind) in raw_cell.text.split('\n').zip(&kinds) {
                line_starts.push(program.len());
                line_cell.push(code_cells.len());
                if kind.is_magic() {
                    program.push_str(&magic::placeholder(*kind, line));
                } else {
                    program.push_str(line);
                }
                program.push('\n');
            }
            code_cells.push(CodeCell {
                index: raw_cell.index,
                source_range: raw_cell.source_range,
                source: raw_cell.source,
                text: raw_cell.text,
                kinds,
                first_line,
            });
        }
        Ok(Notebook {
            text: text.to_owned(),
            cell_count: raw.cell_count,
            code_cells,
            program,
            line_starts,
            line_cell,
            language: raw.language,
            ensure_ascii: raw.ensure_ascii,
        })
    }

    /// The code cells as one Python program (see the crate docs for magics).
    pub fn python_source(&self) -> &str {
        &self.program
    }

    /// Where byte `offset` of [`Notebook::python_source`] is in the notebook. The end of
    /// the program maps to the end of the last code cell; `None` past the end or when
    /// there is no code cell. An offset inside a character counts as that character.
    pub fn cell_position(&self, offset: usize) -> Option<CellPosition> {
        if offset > self.program.len() || self.line_starts.is_empty() {
            return None;
        }
        let (line, line_start, offset) = if offset == self.program.len() {
            // After the final separator: the end of the last line.
            let line = self.line_starts.len() - 1;
            (line, self.line_starts[line], offset - 1)
        } else {
            let line = self.line_starts.partition_point(|s| *s <= offset) - 1;
            (line, self.line_starts[line], offset)
        };
        let cell = &self.code_cells[self.line_cell[line]];
        let mut end = offset;
        while !self.program.is_char_boundary(end) {
            end -= 1;
        }
        let column = self.program[line_start..end].chars().count() + 1;
        Some(CellPosition { cell: cell.index + 1, row: line - cell.first_line + 1, column })
    }

    /// The notebook text with the code cells rewritten to hold `fixed_program` (the
    /// program from [`Notebook::python_source`] after fixes); only the `source` values of
    /// cells whose text changed differ from the original text. See the crate docs for
    /// how changes are assigned to cells and when this refuses.
    pub fn with_fixed_source(&self, fixed_program: &str) -> Result<String, NotebookError> {
        writeback::with_fixed_source(self, fixed_program)
    }

    /// How many cells the notebook has, of every type.
    pub fn cell_count(&self) -> usize {
        self.cell_count
    }

    /// The kernel's language (`metadata.language_info.name`, else
    /// `metadata.kernelspec.language`), when the notebook says; callers may skip
    /// notebooks that are not Python.
    pub fn language(&self) -> Option<&str> {
        self.language.as_deref()
    }
}
