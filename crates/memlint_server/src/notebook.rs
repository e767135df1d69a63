//! Notebooks synced with `notebookDocument/*`: the code cells are linted as one program
//! (as `memlint check` lints an `.ipynb`, magics included), and each finding is reported
//! on the cell document it falls in, in that cell's own byte offsets.

use memlint_linter::{Diagnostic, Edit, Fix, LineIndex};
use memlint_notebook::Notebook;
use memlint_python::Fact;
use serde_json::json;

/// One finding of a cell, in that cell's byte offsets.
#[derive(Debug, Clone)]
pub struct CellFinding {
    pub diagnostic: Diagnostic,
    /// Per fact of its evidence: the index (among `cells`) of the cell the fact's range is
    /// in, `None` for a fact with no place. The fact's range counts in that cell's bytes.
    pub fact_cells: Vec<Option<usize>>,
}

/// The notebook the code cells' texts make; its program is what is linted.
pub fn notebook_of(cells: &[&str]) -> Result<Notebook, String> {
    // memlint_notebook reads nbformat; the client's cells are rebuilt as one, so magics
    // are turned into placeholders exactly as for files on disk.
    let cells_json: Vec<_> = cells
        .iter()
        .map(|text| json!({"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": text}))
        .collect();
    let nb_json = json!({"cells": cells_json, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).to_string();
    Notebook::parse(&nb_json).map_err(|e| e.to_string())
}

/// Splits the findings of `notebook`'s program (from [`notebook_of`]`(cells)`) by cell.
/// A finding that spans cells is cut at its cell's end, and a fix with an edit in another
/// cell is dropped (a quick fix edits one cell document); each fact of its evidence is
/// placed in the cell it is in, which may be another one.
pub fn split_cells(notebook: &Notebook, cells: &[&str], diagnostics: Vec<Diagnostic>) -> Vec<Vec<CellFinding>> {
    let indexes: Vec<LineIndex> = cells.iter().map(|t| LineIndex::new(t)).collect();
    let locate = |offset: usize| -> Option<(usize, usize)> {
        let position = notebook.cell_position(offset)?;
        let cell = position.cell - 1;
        let text = cells.get(cell)?;
        let (start, end) = indexes[cell].line_range(position.row - 1, text);
        let byte = text[start..end].char_indices().nth(position.column - 1).map(|(i, _)| start + i).unwrap_or(end);
        Some((cell, byte))
    };
    let mut per_cell = vec![Vec::new(); cells.len()];
    for d in diagnostics {
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
        let mut fact_cells = Vec::new();
        let evidence = d
            .evidence
            .iter()
            .map(|fact| {
                let placed = fact.range.as_ref().and_then(|range| {
                    let (c, s) = locate(range.start)?;
                    let e = match locate(range.end) {
                        Some((c2, e)) if c2 == c => e.max(s),
                        _ => cells[c].len(),
                    };
                    Some((c, s..e))
                });
                fact_cells.push(placed.as_ref().map(|(c, _)| *c));
                Fact { text: fact.text.clone(), range: placed.map(|(_, r)| r) }
            })
            .collect();
        per_cell[cell].push(CellFinding { diagnostic: Diagnostic { range: start..end, fix, evidence, ..d }, fact_cells });
    }
    per_cell
}

/// Lints the code cells' texts as one program with `lint`; returns each cell's findings
/// ([`notebook_of`], then [`split_cells`], as the server does under its panic guard).
#[cfg(test)]
pub fn lint_cells(cells: &[&str], lint: impl FnOnce(&str) -> memlint_linter::LintResult) -> Result<Vec<Vec<CellFinding>>, String> {
    let notebook = notebook_of(cells)?;
    let result = lint(notebook.python_source());
    Ok(split_cells(&notebook, cells, result.diagnostics))
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
        let found: Vec<_> = per_cell[1].iter().map(|f| (f.diagnostic.rule, &cells[1][f.diagnostic.range.clone()])).collect();
        assert_eq!(found, vec![(Rule::EmptyCacheInLoop, "torch.cuda.empty_cache()")]);
        let fix = per_cell[1][0].diagnostic.fix.as_ref().unwrap();
        let fixed = memlint_linter::fix::apply_edits(cells[1], fix);
        assert!(!fixed.contains("empty_cache"), "{fixed}");
        assert!(fixed.contains("loss.backward()"), "{fixed}");
    }

    #[test]
    fn each_fact_is_placed_in_its_own_cell_in_that_cells_offsets() {
        let cells = ["import torch\nnet = torch.nn.Linear(4, 4)", "def evaluate(x):\n    return net(x).argmax(1)"];
        let settings = LinterSettings::default();
        let per_cell = lint_cells(&cells, |source| lint(source, &settings)).unwrap();
        assert!(per_cell[0].is_empty());
        let finding = &per_cell[1][0];
        assert_eq!((finding.diagnostic.rule, &cells[1][finding.diagnostic.range.clone()]), (Rule::EvalWithoutNoGrad, "net(x)"));
        assert_eq!(finding.fact_cells.len(), finding.diagnostic.evidence.len());
        let placed: Vec<(Option<usize>, Option<&str>)> = finding
            .diagnostic
            .evidence
            .iter()
            .zip(&finding.fact_cells)
            .map(|(fact, cell)| (*cell, fact.range.clone().map(|r| &cells[cell.unwrap()][r])))
            .collect();
        assert!(placed.contains(&(Some(0), Some("torch.nn.Linear(4, 4)"))), "{placed:?}");
        assert!(placed.contains(&(Some(1), Some("net"))), "{placed:?}");
        assert!(placed.iter().all(|(cell, text)| cell.is_some() == text.is_some()), "{placed:?}");
    }
}
