//! Text edits behind the code actions: a finding's fix, the suppression comment for one
//! line, and the whole-document "fix all" as one minimal edit.

use memlint_linter::{Diagnostic, Edit, FixMode, Rule};

use crate::document::Document;

/// The edit that makes the `# noqa` comment on 0-based `line` also suppress `rule`:
/// merged into an existing `# noqa: ...` list, else appended to the line. `None` where a
/// comment cannot go: the line ends inside a string or with a backslash continuation, or
/// a bare `# noqa` already suppresses everything.
pub fn noqa_edit(doc: &Document, rule: Rule, line: usize) -> Option<Edit> {
    let text = &doc.text;
    let (start, end) = doc.index.line_range(line, text);
    let content_end = start + text[start..end].trim_end().len();
    if content_end == start {
        return Some(Edit::insert(end, format!("# noqa: {}", rule.code())));
    }
    let last = content_end - 1;
    let root = doc.tree.root_node();
    let node = root.descendant_for_byte_range(last, content_end)?;
    let comment = std::iter::successors(Some(node), |n| n.parent()).find(|n| n.kind() == "comment");
    if let Some(comment) = comment {
        let comment_text = &text[comment.byte_range()];
        let lower = comment_text.to_ascii_lowercase();
        // Each `#` part is one directive (`# type: ignore  # noqa: MEM001`).
        let mut part_start = 0;
        for part in lower.split('#') {
            let trimmed = part.trim_start();
            let part_end = part_start + part.len();
            if let Some(rest) = trimmed.strip_prefix("noqa") {
                let rest = rest.trim_start();
                if let Some(codes) = rest.strip_prefix(':') {
                    let at = comment.start_byte() + part_start + part.trim_end().len();
                    let separator = if codes.trim().is_empty() { " " } else { ", " };
                    return Some(Edit::insert(at, format!("{separator}{}", rule.code())));
                }
                if rest.is_empty() {
                    return None;
                }
            }
            part_start = part_end + 1;
        }
        return Some(Edit::insert(comment.end_byte(), format!("  # noqa: {}", rule.code())));
    }
    if text[..content_end].ends_with('\\') {
        return None;
    }
    // A line that ends inside a (multi-line) string: a `#` there would be string text.
    let in_string = std::iter::successors(Some(node), |n| n.parent())
        .any(|n| matches!(n.kind(), "string" | "string_content" | "concatenated_string") && n.end_byte() > end);
    if in_string {
        return None;
    }
    Some(Edit::insert(content_end, format!("  # noqa: {}", rule.code())))
}

/// Applies the stored fixes of one pass (for notebook cells, whose fixes were computed on
/// the whole notebook): later fixes first, skipping any that overlaps one already taken.
pub fn apply_stored_fixes(text: &str, diagnostics: &[Diagnostic], mode: FixMode) -> String {
    let mut fixes: Vec<_> = diagnostics
        .iter()
        .filter_map(|d| d.fix.as_ref())
        .filter(|f| mode.allows(f.applicability) && !f.edits.is_empty())
        .collect();
    fixes.sort_by_key(|f| std::cmp::Reverse(f.span().start));
    let mut current = text.to_owned();
    let mut taken_from = usize::MAX;
    for fix in fixes {
        let span = fix.span();
        if span.end > taken_from {
            continue;
        }
        current = memlint_linter::fix::apply_edits(&current, fix);
        taken_from = span.start;
    }
    current
}

/// The smallest single edit turning `old` into `new`: common prefix and suffix kept, so
/// the client's cursor and undo history stay where nothing changed.
pub fn minimal_edit(old: &str, new: &str) -> Option<Edit> {
    if old == new {
        return None;
    }
    let mut prefix = old.bytes().zip(new.bytes()).take_while(|(a, b)| a == b).count();
    while !old.is_char_boundary(prefix) || !new.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let suffix_for = |prefix: usize| {
        let max_suffix = old.len().min(new.len()) - prefix;
        let mut suffix = old.bytes().rev().zip(new.bytes().rev()).take(max_suffix).take_while(|(a, b)| a == b).count();
        while !old.is_char_boundary(old.len() - suffix) || !new.is_char_boundary(new.len() - suffix) {
            suffix -= 1;
        }
        suffix
    };
    let mut suffix = suffix_for(prefix);
    // An edit of whole lines reads better (and undoes better) starting at a line start
    // than sliding into the shared indentation of the next line.
    if old[prefix..old.len() - suffix].contains('\n') || new[prefix..new.len() - suffix].contains('\n') {
        prefix = old[..prefix].rfind('\n').map(|i| i + 1).unwrap_or(0);
        suffix = suffix_for(prefix);
    }
    Some(Edit::replace(prefix..old.len() - suffix, &new[prefix..new.len() - suffix]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Document {
        Document::new("file:///t.py".parse().unwrap(), text.to_owned(), 1)
    }

    fn applied(text: &str, rule: Rule, line: usize) -> Option<String> {
        let d = doc(text);
        noqa_edit(&d, rule, line).map(|e| {
            let mut out = text.to_owned();
            out.replace_range(e.range, &e.content);
            out
        })
    }

    #[test]
    fn noqa_is_appended_or_merged() {
        let r = Rule::EmptyCacheInLoop;
        assert_eq!(applied("x = 1\ny = f()  \n", r, 1).unwrap(), "x = 1\ny = f()  # noqa: MEM004  \n");
        assert_eq!(applied("y = f()  # noqa: MEM001\n", r, 0).unwrap(), "y = f()  # noqa: MEM001, MEM004\n");
        assert_eq!(applied("y = f()  # NOQA:MEM001 # why\n", r, 0).unwrap(), "y = f()  # NOQA:MEM001, MEM004 # why\n");
        assert_eq!(applied("y = f()  # noqa:\n", r, 0).unwrap(), "y = f()  # noqa: MEM004\n");
        assert_eq!(applied("y = f()  # type: ignore\n", r, 0).unwrap(), "y = f()  # type: ignore  # noqa: MEM004\n");
        assert_eq!(applied("s = 'é😀'; f()\n", r, 0).unwrap(), "s = 'é😀'; f()  # noqa: MEM004\n");
        assert_eq!(applied("y = f()  # noqa\n", r, 0), None);
        assert_eq!(applied("y = f() + \\\n  2\n", r, 0), None);
        assert_eq!(applied("s = f('''a\nb''')\n", r, 0), None);
        // Inside brackets a comment is fine.
        assert_eq!(applied("y = f(\n  2)\n", r, 0).unwrap(), "y = f(  # noqa: MEM004\n  2)\n");
    }

    #[test]
    fn minimal_edit_keeps_common_ends() {
        let e = minimal_edit("a😀b\nc\n", "a😀x\nc\n").unwrap();
        assert_eq!(e.range, 5..6);
        assert_eq!(e.content, "x");
        let e = minimal_edit("aé", "aè").unwrap();
        assert_eq!((e.range, e.content.as_str()), (1..3, "è"));
        assert_eq!(minimal_edit("same", "same"), None);
        // A removed line is removed from its start, not from inside the shared indentation.
        let old = "    for x in y:\n        f()\n    return 1\n";
        let e = minimal_edit(old, "    for x in y:\n    return 1\n").unwrap();
        assert_eq!((&old[e.range.clone()], e.content.as_str()), ("        f()\n", ""));
        let e = minimal_edit("aaa", "aa").unwrap();
        assert_eq!((e.range.len(), e.content.as_str()), (1, ""));
    }
}
