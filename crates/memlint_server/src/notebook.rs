//! Notebooks synced with `notebookDocument/*`: the code cells are linted as one program
//! (as `memlint check` lints an `.ipynb`, magics included), and each finding is reported
//! on the cell document it falls in, in that cell's own byte offsets.

use memlint_linter::{Diagnostic, Edit, Fix, LineIndex, LintResult};
use memlint_notebook::Notebook;
use serde_json::json;

/// Lints the code cells' texts as one program with `lint`; returns each cell's findings.
/// A finding that spans cells is cut at its cell's end, and a fix with an edit in another
/// cell is dropped (a quick fix edits one cell document).
pub fn lint_cells(cells: &[&str], lint: impl FnOnce(&str) -> LintResult) -> Result<Vec<Vec<Diagnostic>>, String> {
    // memlint_notebook reads nbformat; the client's cells are rebuilt as one, so magics
    // are turned into placeholders exactly as for files on disk.
    let cells_json: Vec<_> = cells
        .iter()
        .map(|text| json!({"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": text}))
        .collect();
    let nb_json = json!({"cells": cells_json, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).to_string();
    let notebook = Notebook::parse(&nb_json).map_err(|e| e.to_string())?;
    let indexes: Vec<LineIndex> = cells.iter().map(|t| LineIndex::new(t)).collect();
    let locate = |offset: usize| -> Option<(usize, usize)> {
        let position = notebook.cell_position(offset)?;
        let cell = position.cell - 1;
        let text = cells.get(cell)?;
        let (start, end) = indexes[cell].line_range(position.row - 1, text);
        let byte = text[start..end].char_indices().nth(position.column - 1).map(|(i, _)| start + i).unwrap_or(end);
        Some((cell, byte))
    };
    let result = lint(notebook.python_source());
    let mut per_cell = vec![Vec::new(); cells.len()];
    for d in result.diagnostics {
        let Some((cell, start)) = locate(d.range.start) else { continue };
        let end = match locate(d.range.end) {
            Some((c, end)) if c == cell => end.max(start),
            _ => cells[cell].len(),
        };
        let fix = d.fix.as_ref().and_then(|fix| {
            let mut edits = Vec::new();
            for edit in &fix.edits {
                let (c1, s) = locate(edit.range.start)?;
                let (c2, e) = locate(edit.range.end)?;
                if c1 != cell || c2 != cell {
                    return None;
                }
                edits.push(Edit::replace(s..e.max(s), edit.content.clone()));
            }
            Some(Fix::new(fix.applicability, fix.message.clone(), edits))
        });
        per_cell[cell].push(Diagnostic { range: start..end, fix, ..d });
    }
    Ok(per_cell)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlint_linter::{lint, LinterSettings, Rule};

    #[test]
    fn findings_land_in_their_cells_with_cell_offsets() {
        let cells = [
            "import torch\n%matplotlib inline\nmodel = torch.nn.Linear(2, 2).cuda()",
            "for x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    torch.cuda.empty_cache()\n",
        ];
        let settings = LinterSettings::default();
        let per_cell = lint_cells(&cells, |source| lint(source, &settings)).unwrap();
        assert!(per_cell[0].is_empty(), "{:?}", per_cell[0]);
        let found: Vec<_> = per_cell[1].iter().map(|d| (d.rule, &cells[1][d.range.clone()])).collect();
        assert_eq!(found, vec![(Rule::EmptyCacheInLoop, "torch.cuda.empty_cache()")]);
        let fix = per_cell[1][0].fix.as_ref().unwrap();
        let fixed = memlint_linter::fix::apply_edits(cells[1], fix);
        assert!(!fixed.contains("empty_cache"), "{fixed}");
        assert!(fixed.contains("loss.backward()"), "{fixed}");
    }
}
