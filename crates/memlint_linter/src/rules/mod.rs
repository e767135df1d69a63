//! One module per rule. Each module's doc comment is the rule's documentation
//! (`memlint rule <name>` prints it); each exports `SUMMARY`, `CAPTURES`, `FIXABLE` and
//! `check`.

pub mod accumulated_loss_tensor;
pub mod empty_cache_in_loop;
pub mod eval_without_no_grad;
pub mod half_without_grad_scaler;

use memlint_python::tree_sitter::Node;
use memlint_python::SemanticModel;

use crate::Edit;

/// The leading whitespace of the line `offset` is on.
pub(crate) fn line_indent(source: &str, offset: usize) -> &str {
    let start = line_start(source, offset);
    let rest = &source[start..];
    let len = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    &rest[..len]
}

/// Byte offset of the start of the line `offset` is on.
pub(crate) fn line_start(source: &str, offset: usize) -> usize {
    source[..offset.min(source.len())].rfind('\n').map(|i| i + 1).unwrap_or(0)
}

/// Byte offset just past the line break of the line `offset` is on (or the end of text).
pub(crate) fn line_end_inclusive(source: &str, offset: usize) -> usize {
    source[offset.min(source.len())..].find('\n').map(|i| offset + i + 1).unwrap_or(source.len())
}

/// The file's indentation unit: the first indented line's leading whitespace, else four spaces.
pub(crate) fn indent_unit(source: &str) -> String {
    let mut previous_indent = 0usize;
    for line in source.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let indent = &line[..line.len() - line.trim_start_matches([' ', '\t']).len()];
        if indent.starts_with('\t') {
            return "\t".to_owned();
        }
        if indent.len() > previous_indent {
            return " ".repeat(indent.len() - previous_indent);
        }
        previous_indent = indent.len();
        if previous_indent == 0 {
            continue;
        }
    }
    "    ".to_owned()
}

/// Does the statement start its line and end it (nothing else shares its lines)?
pub(crate) fn owns_its_lines(source: &str, node: Node<'_>) -> bool {
    let before = &source[line_start(source, node.start_byte())..node.start_byte()];
    let after_end = line_end_inclusive(source, node.end_byte().saturating_sub(1).max(node.start_byte()));
    let after = &source[node.end_byte()..after_end.max(node.end_byte())];
    before.trim().is_empty() && (after.trim().is_empty() || after.trim_start().starts_with('#'))
}

/// Does `node` contain a string literal that spans lines (re-indenting would change it)?
pub(crate) fn has_multiline_string(node: Node<'_>) -> bool {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind() == "string" && n.start_position().row != n.end_position().row {
            return true;
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    false
}

/// Edits that indent every non-blank line of `node`'s lines by `unit`.
pub(crate) fn indent_lines(source: &str, node: Node<'_>, unit: &str) -> Vec<Edit> {
    let mut edits = Vec::new();
    let mut offset = line_start(source, node.start_byte());
    while offset < node.end_byte() {
        let end = line_end_inclusive(source, offset);
        if !source[offset..end].trim().is_empty() {
            edits.push(Edit::insert(offset, unit));
        }
        if end == offset {
            break;
        }
        offset = end;
    }
    edits
}

/// How to spell `torch` here, and an edit that imports it when the module does not.
pub(crate) fn torch_name(model: &SemanticModel<'_>) -> (String, Option<Edit>) {
    if let Some(local) = model.local_name_for("torch") {
        return (local.to_owned(), None);
    }
    // Insert `import torch` before the first top-level import, else at the top (after a
    // docstring and `from __future__` imports, which must stay first).
    let source = model.source();
    let mut insert_at = 0;
    let mut cursor = model.root().walk();
    for child in model.root().named_children(&mut cursor) {
        match child.kind() {
            "import_statement" | "import_from_statement" => {
                let is_future = child
                    .child_by_field_name("module_name")
                    .map(|m| model.text(m) == "__future__")
                    .unwrap_or(false);
                if is_future {
                    insert_at = line_end_inclusive(source, child.end_byte().saturating_sub(1));
                    continue;
                }
                insert_at = line_start(source, child.start_byte());
                break;
            }
            "expression_statement" if insert_at == 0 && child.named_child(0).map(|c| c.kind() == "string").unwrap_or(false) => {
                insert_at = line_end_inclusive(source, child.end_byte().saturating_sub(1));
            }
            "comment" => continue,
            _ => break,
        }
    }
    let mut text = "import torch\n".to_owned();
    if insert_at > 0 && !source[..insert_at].ends_with('\n') {
        text.insert(0, '\n');
    }
    ("torch".to_owned(), Some(Edit::insert(insert_at, text)))
}

/// A short, one-line rendering of a node's text for messages.
pub(crate) fn snippet(model: &SemanticModel<'_>, node: Node<'_>) -> String {
    let text = model.text(node);
    let first = text.lines().next().unwrap_or("");
    let mut shown: String = first.chars().take(60).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}
