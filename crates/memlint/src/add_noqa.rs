//! `memlint check --add-noqa`: a `# noqa: MEM00x` comment on the line of every current
//! finding (ruff's `--add-noqa`), so that a team can adopt memlint on a legacy tree and
//! see only new findings. Files are written atomically, and only when the result parses
//! with no more syntax errors than before; notebooks get the comment in the cell's source.

use std::collections::BTreeMap;
use std::io::Write;

use memlint_linter::{lint, DirectiveKind, Directives, LineIndex, Rule};
use memlint_python::tree_sitter::Tree;

use crate::check::{read_text, write_atomically};
use crate::source::SourceFile;
use crate::walk::FileToLint;

/// What adding comments to one file did.
#[derive(Debug, Default)]
pub struct Added {
    /// Lines that got (or extended) a `# noqa` comment.
    pub directives: usize,
    /// Findings no comment could be put beside, as `path:location: CODE why`.
    pub not_suppressed: Vec<String>,
    /// Why the file could not be changed at all.
    pub error: Option<String>,
    /// Findings about suppression comments that suppress nothing (left for `--fix`).
    pub unused_directives: usize,
}

/// Adds the comments to one file.
pub fn add_to_file(file: &FileToLint) -> Added {
    let path = &file.path;
    let display = path.display().to_string();
    let text = match read_text(path) {
        Ok(t) => t,
        Err(reason) => return Added { error: Some(format!("{display}: could not read: {reason}")), ..Added::default() },
    };
    let source = match SourceFile::new(path, text) {
        Ok(s) => s,
        Err(reason) => return Added { error: Some(format!("{display}: could not lint: {reason}")), ..Added::default() },
    };
    let settings = file.settings.linter_for(path);
    let program = source.program();
    let result = lint(program, &settings);
    if result.diagnostics.is_empty() {
        return Added::default();
    }
    let index = LineIndex::new(program);
    let mut by_line: BTreeMap<usize, (usize, Vec<Rule>)> = BTreeMap::new();
    // As ruff does: a finding about a suppression comment itself (`unused-noqa`) is not
    // suppressed with another comment; `memlint check --fix` removes the unused one.
    let (about_comments, findings): (Vec<_>, Vec<_>) = result.diagnostics.iter().partition(|d| d.rule.observes_suppressions());
    let mut added = Added { unused_directives: about_comments.len(), ..Added::default() };
    if findings.is_empty() {
        return added;
    }
    for d in findings {
        let entry = by_line.entry(index.line_of(d.range.start)).or_insert((d.range.start, Vec::new()));
        if !entry.1.contains(&d.rule) {
            entry.1.push(d.rule);
        }
    }
    let tree = memlint_python::parse_with(program, None);
    let mut edits = Vec::new();
    for (line, (offset, mut rules)) in by_line {
        rules.sort();
        match noqa_insertion(program, &tree, &index, line, &rules) {
            Ok(edit) => edits.push(edit),
            Err(why) => {
                let codes: Vec<&str> = rules.iter().map(|r| r.code()).collect();
                let at = crate::report::display_location(&display, source.location(offset));
                added.not_suppressed.push(format!("{at}: {} not suppressed: {why}", codes.join(", ")));
            }
        }
    }
    if edits.is_empty() {
        return added;
    }
    let mut fixed = program.to_owned();
    // Later lines first, so earlier offsets stay valid.
    for (at, insert) in edits.iter().rev() {
        fixed.insert_str(*at, insert);
    }
    // Never a comment that breaks the file: the result must parse as well as before.
    let before = memlint_python::syntax_errors(&tree, program).len();
    let after = memlint_python::syntax_errors(&memlint_python::parse_with(&fixed, None), &fixed).len();
    if after > before {
        added.error = Some(format!("{display}: adding `# noqa` comments would break the syntax; the file is left as it is"));
        return added;
    }
    let written = source.with_fixed_program(&fixed).and_then(|new| write_atomically(path, source.text(), new.text()));
    match written {
        Ok(()) => added.directives = edits.len(),
        Err(reason) => added.error = Some(format!("{display}: could not add `# noqa` comments: {reason}")),
    }
    added
}

/// Where and what to insert so that 0-based `line` suppresses `rules`: codes appended to
/// the line's `# noqa: ...` list, else a new `  # noqa: ...` at the end of the line
/// (after any comment). Err says why no comment can go on the line.
fn noqa_insertion(text: &str, tree: &Tree, index: &LineIndex, line: usize, rules: &[Rule]) -> Result<(usize, String), &'static str> {
    let codes = rules.iter().map(|r| r.code()).collect::<Vec<_>>().join(", ");
    let (start, end) = index.line_range(line, text);
    let content_end = start + text[start..end].trim_end().len();
    if content_end == start {
        return Ok((end, format!("# noqa: {codes}")));
    }
    let root = tree.root_node();
    let node = root.descendant_for_byte_range(content_end - 1, content_end).ok_or("the line is not in the parsed module")?;
    if let Some(comment) = std::iter::successors(Some(node), |n| n.parent()).find(|n| n.kind() == "comment") {
        // A `# noqa: ...` list on the line gets the codes right after its last code (text
        // after the list is not part of it: `# noqa: E501 long URL`), read as the linter
        // reads it.
        let directives = Directives::from_tree(tree, text);
        let listed = directives.on_line(line).find_map(|(_, d)| match (&d.kind, &d.codes) {
            (DirectiveKind::Noqa, Some((listed, range))) => Some((listed.is_empty(), range.end)),
            _ => None,
        });
        if let Some((empty, at)) = listed {
            let separator = if empty { " " } else { ", " };
            return Ok((at, format!("{separator}{codes}")));
        }
        return Ok((comment.end_byte(), format!("  # noqa: {codes}")));
    }
    if text[..content_end].ends_with('\\') {
        return Err("the line ends with a backslash continuation");
    }
    let in_string = std::iter::successors(Some(node), |n| n.parent())
        .any(|n| matches!(n.kind(), "string" | "string_content" | "concatenated_string") && n.end_byte() > end);
    if in_string {
        return Err("the line ends inside a string");
    }
    Ok((content_end, format!("  # noqa: {codes}")))
}

/// `memlint check --add-noqa`: every file, then a summary on standard error. Exit status
/// 0 when every finding is now suppressed, 1 when some could not be (or a file could not
/// be changed).
pub fn run(files: &[FileToLint], walk_errors: Vec<(std::path::PathBuf, String)>) -> u8 {
    use rayon::prelude::*;
    let results: Vec<Added> = files.par_iter().map(add_to_file).collect();
    let mut err = std::io::stderr().lock();
    let mut total = 0;
    let mut failed = walk_errors.len();
    for (path, reason) in walk_errors {
        let _ = writeln!(err, "error: {}: could not lint: {reason}", path.display());
    }
    for added in &results {
        total += added.directives;
        for line in &added.not_suppressed {
            let _ = writeln!(err, "warning: {line}");
        }
        if let Some(e) = &added.error {
            let _ = writeln!(err, "error: {e}");
        }
        failed += added.not_suppressed.len() + usize::from(added.error.is_some());
    }
    let unused: usize = results.iter().map(|a| a.unused_directives).sum();
    if unused > 0 {
        let _ = writeln!(
            err,
            "note: {unused} unused suppression comment{} left as {}: `memlint check --fix` removes {}.",
            if unused == 1 { "" } else { "s" },
            if unused == 1 { "it is" } else { "they are" },
            if unused == 1 { "it" } else { "them" },
        );
    }
    let _ = writeln!(err, "Added {total} noqa directive{}.", if total == 1 { "" } else { "s" });
    if failed > 0 { crate::exit::FINDINGS } else { crate::exit::CLEAN }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insertion(text: &str, line: usize, rules: &[Rule]) -> Result<String, &'static str> {
        let tree = memlint_python::parse_with(text, None);
        let (at, insert) = noqa_insertion(text, &tree, &LineIndex::new(text), line, rules)?;
        let mut out = text.to_owned();
        out.insert_str(at, &insert);
        Ok(out)
    }

    #[test]
    fn comments_are_added_extended_or_refused() {
        let both = [Rule::EvalWithoutNoGrad, Rule::EmptyCacheInLoop];
        assert_eq!(insertion("x = f()\n", 0, &both).unwrap(), "x = f()  # noqa: MEM001, MEM004\n");
        assert_eq!(insertion("x = f()  # why\n", 0, &both[1..]).unwrap(), "x = f()  # why  # noqa: MEM004\n");
        assert_eq!(insertion("x = f()  # noqa: MEM002\n", 0, &both[1..]).unwrap(), "x = f()  # noqa: MEM002, MEM004\n");
        assert_eq!(insertion("x = f()  # NOQA:\n", 0, &both[1..]).unwrap(), "x = f()  # NOQA: MEM004\n");
        assert_eq!(insertion("x = f()  # type: ignore  # noqa: E501\n", 0, &both[..1]).unwrap(), "x = f()  # type: ignore  # noqa: E501, MEM001\n");
        // Text after the list is not part of it: the codes go right after the last code.
        assert_eq!(insertion("x = f()  # noqa: E501 long URL\n", 0, &both[..1]).unwrap(), "x = f()  # noqa: E501, MEM001 long URL\n");
        assert_eq!(insertion("x = f()  # memlint: ignore[MEM002]\n", 0, &both[..1]).unwrap(), "x = f()  # memlint: ignore[MEM002]  # noqa: MEM001\n");
        assert_eq!(insertion("x = f()\r\ny = 2\r\n", 0, &both[..1]).unwrap(), "x = f()  # noqa: MEM001\r\ny = 2\r\n");
        assert_eq!(insertion("x = f(\"\"\"a\nb\"\"\")\n", 0, &both[..1]), Err("the line ends inside a string"));
        assert_eq!(insertion("x = f() + \\\n    g()\n", 0, &both[..1]), Err("the line ends with a backslash continuation"));
    }
}
