//! Mapping a fixed program back onto the cells it came from (see the crate docs).

use std::time::{Duration, Instant};

use similar::{Algorithm, DiffTag};

use crate::magic::{self, LineKind};
use crate::{Notebook, NotebookError};

/// Past this, the diff settles for a coarser (still correct) answer.
const DIFF_DEADLINE: Duration = Duration::from_secs(2);

pub(crate) fn with_fixed_source(nb: &Notebook, fixed: &str) -> Result<String, NotebookError> {
    if fixed == nb.program {
        return Ok(nb.text.clone());
    }
    if nb.code_cells.is_empty() {
        return Err(NotebookError::NoCodeCell);
    }
    let old: Vec<&str> = nb.program.split_inclusive('\n').collect();
    let new: Vec<&str> = fixed.split_inclusive('\n').collect();
    debug_assert_eq!(old.len(), nb.line_cell.len());
    // The cells' own lines (magics as written), parallel to `old`.
    let originals: Vec<&str> = nb.code_cells.iter().flat_map(|c| c.lines()).collect();
    let kinds: Vec<LineKind> = nb.code_cells.iter().flat_map(|c| c.kinds.iter().copied()).collect();

    let cell_number = |c: usize| nb.code_cells[c].index + 1;
    let row_of = |line: usize| line - nb.code_cells[nb.line_cell[line]].first_line + 1;

    let mut segments: Vec<String> = vec![String::new(); nb.code_cells.len()];
    let mut changed = vec![false; nb.code_cells.len()];
    let ops = similar::capture_diff_slices_deadline(
        Algorithm::Myers,
        &old,
        &new,
        Some(Instant::now() + DIFF_DEADLINE),
    );
    for op in ops {
        let (tag, o, n) = op.as_tag_tuple();
        match tag {
            DiffTag::Equal => {
                for i in o {
                    let segment = &mut segments[nb.line_cell[i]];
                    segment.push_str(originals[i]);
                    segment.push('\n');
                }
            }
            DiffTag::Insert => {
                // At a boundary, `o.start` is the first line of the next cell: insertions
                // go to the start of the cell after them.
                let c = nb.line_cell.get(o.start).copied().unwrap_or(nb.code_cells.len() - 1);
                changed[c] = true;
                for line in &new[n] {
                    segments[c].push_str(line);
                }
            }
            DiffTag::Delete | DiffTag::Replace => {
                let c = nb.line_cell[o.start];
                let last = nb.line_cell[o.end - 1];
                if c != last {
                    return Err(NotebookError::FixCrossesCells { first: cell_number(c), second: cell_number(last) });
                }
                changed[c] = true;
                let segment = &mut segments[c];
                // Placeholders must reappear, in order, at most re-indented.
                let mut next = n.start;
                for i in o.clone().filter(|i| kinds[*i].is_magic()) {
                    let touched = || NotebookError::FixTouchesMagic { cell: cell_number(c), row: row_of(i) };
                    let placeholder = old[i].trim_start();
                    let j = (next..n.end).find(|j| new[*j].trim_start() == placeholder).ok_or_else(touched)?;
                    for line in &new[next..j] {
                        segment.push_str(line);
                    }
                    // A line magic follows its block when a fix re-indents it, and so do
                    // its continuation lines; a cell magic's lines never move.
                    let old_indent = indentation(old[i]);
                    let new_indent = indentation(new[j]);
                    match kinds[i] {
                        LineKind::LineMagic => {
                            segment.push_str(new_indent);
                            segment.push_str(originals[i].trim_start());
                        }
                        LineKind::Continuation if new_indent.starts_with(old_indent) => {
                            segment.push_str(&new_indent[old_indent.len()..]);
                            segment.push_str(originals[i]);
                        }
                        _ if new_indent == old_indent => segment.push_str(originals[i]),
                        _ => return Err(touched()),
                    }
                    segment.push('\n');
                    next = j + 1;
                }
                for line in &new[next..n.end] {
                    segment.push_str(line);
                }
            }
        }
    }

    let mut out = String::with_capacity(nb.text.len() + fixed.len() / 8);
    let mut copied_to = 0;
    for (c, cell) in nb.code_cells.iter().enumerate() {
        if !changed[c] {
            continue;
        }
        let segment = &segments[c];
        let text = segment.strip_suffix('\n').unwrap_or(segment);
        if text == cell.text {
            continue;
        }
        check_magics(cell, text)?;
        out.push_str(&nb.text[copied_to..cell.source_range.start]);
        out.push_str(&cell.source.render(&nb.text, text, nb.ensure_ascii));
        copied_to = cell.source_range.end;
    }
    out.push_str(&nb.text[copied_to..]);
    Ok(out)
}

fn indentation(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// The new text must hold the same IPython lines, read the same way, as the old one.
fn check_magics(cell: &crate::CodeCell, text: &str) -> Result<(), NotebookError> {
    let magics = |text: &str, kinds: &[LineKind]| -> Vec<(usize, LineKind, String)> {
        text.split('\n')
            .zip(kinds)
            .enumerate()
            .filter(|(_, (_, kind))| kind.is_magic())
            .map(|(row, (line, kind))| (row + 1, *kind, line.trim().to_owned()))
            .collect()
    };
    let before = magics(&cell.text, &cell.kinds);
    let after = magics(text, &magic::classify(text));
    let mismatch = before.iter().zip(&after).position(|(b, a)| (b.1, &b.2) != (a.1, &a.2));
    let row = match mismatch {
        Some(k) => before[k].0,
        None if before.len() == after.len() => return Ok(()),
        None if before.len() > after.len() => before[after.len()].0,
        None => after[before.len()].0,
    };
    Err(NotebookError::FixTouchesMagic { cell: cell.index + 1, row })
}
