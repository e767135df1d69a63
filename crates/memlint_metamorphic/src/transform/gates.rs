//! Gates spelled another way: a condition computed into a variable first, and an
//! always-true `if` around a statement.
//!
//! **Why behaviour is kept.** `if C:` evaluates `C` once and tests its truth;
//! `_gate = C` right before `if _gate:` evaluates the same expression at the same point
//! and tests the truth of the same value (`elif` conditions are left in place: they are
//! evaluated only when the branches before them were not taken). `if True:` runs its body
//! every time, and a statement in it binds its names in the same scope as before.
//!
//! **Where it refuses.** Statements directly in a class body for `gate-variable` (the new
//! name would become a class attribute); for `if-true`, statements that share a line with
//! another statement (`a(); b()`) or sit on their block's header line.

use super::{descendants, Context, Module};
use crate::rewrite::{indentation, line_start, starts_line, Editor, Piece};
use crate::scope::ScopeKind;
use crate::Rewrite;

use memlint_python::tree_sitter::Node;

/// `if C:` as `_gate = C` / `if _gate:`.
pub fn gate_variable(source: &str, _ctx: &Context) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    let mut editor = Editor::new(source, &module.tree);
    for node in module.nodes_of("if_statement") {
        let Some(condition) = node.child_by_field_name("condition") else { continue };
        if !starts_line(source, node) || module.scopes.scopes[module.scopes.scope_at(node.start_byte())].kind == ScopeKind::Class {
            continue;
        }
        let gate = module.fresh("_gate");
        let indent = indentation(source, node.start_byte());
        let value = if matches!(condition.kind(), "named_expression" | "expression_list") {
            vec![Piece::text("("), Piece::copy(condition.byte_range()), Piece::text(")")]
        } else {
            vec![Piece::copy(condition.byte_range())]
        };
        let mut pieces = vec![Piece::text(format!("{gate} = "))];
        pieces.extend(value);
        pieces.push(Piece::text(format!("\n{indent}if {gate}")));
        editor.edit(node.start_byte()..condition.end_byte(), pieces);
    }
    if editor.is_empty() {
        return None;
    }
    editor.finish(Vec::new())
}

/// Each simple statement holding a call (an expression, `return`, `raise`, `assert`),
/// alone on its lines, wrapped in `if True:`.
pub fn if_true(source: &str, _ctx: &Context) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    let mut editor = Editor::new(source, &module.tree);
    let mut statements = Vec::new();
    for kind in ["expression_statement", "return_statement", "raise_statement", "assert_statement"] {
        statements.extend(module.nodes_of(kind));
    }
    statements.sort_by_key(|n| n.start_byte());
    for node in statements {
        if !node.parent().is_some_and(|p| matches!(p.kind(), "block" | "module")) || !starts_line(source, node) || !alone_on_its_lines(node) {
            continue;
        }
        let mut has_call = false;
        descendants(node, &mut |n| has_call |= n.kind() == "call");
        if !has_call {
            continue;
        }
        let indent = indentation(source, node.start_byte());
        // A tab-indented line of a file indented with spaces (or the other way) takes a
        // tab: spaces before its tabs could measure the same as the `if` line's tabs.
        let unit = if indent.contains('\t') { "\t" } else { module.unit.as_str() };
        editor.insert(line_start(source, node.start_byte()), format!("{indent}if True:\n"));
        editor.indent_lines(node.byte_range(), unit);
    }
    if editor.is_empty() {
        return None;
    }
    editor.finish(Vec::new())
}

/// No other statement shares a line with `node` (comments may).
fn alone_on_its_lines(node: Node) -> bool {
    let mut previous = node.prev_named_sibling();
    while let Some(p) = previous.filter(|p| p.kind() == "comment") {
        previous = p.prev_named_sibling();
    }
    let mut next = node.next_named_sibling();
    while let Some(n) = next.filter(|n| n.kind() == "comment") {
        next = n.next_named_sibling();
    }
    previous.is_none_or(|p| p.end_position().row < node.start_position().row)
        && next.is_none_or(|n| n.start_position().row > node.end_position().row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn conditions_go_into_variables_and_elif_stays() {
        let source = "def step(i, model, x):\n    if i % 10 == 0 and model.training:\n        model(x)\n    elif (y := x):\n        print(y)\n    if z := i:\n        pass\n";
        expect![[r#"
            def step(i, model, x):
                _gate = i % 10 == 0 and model.training
                if _gate:
                    model(x)
                elif (y := x):
                    print(y)
                _gate2 = (z := i)
                if _gate2:
                    pass
        "#]]
        .assert_eq(&gate_variable(source, &Context::default()).unwrap().text);
    }

    #[test]
    fn statements_with_calls_get_an_always_true_if() {
        let source = "def evaluate(model, x):\n    y = model(\n        x,\n    )  # forward\n    s = '''a\nb'''.strip()\n    a(); b()\n    return y\n";
        let rewrite = if_true(source, &Context::default()).unwrap();
        expect![[r#"
            def evaluate(model, x):
                if True:
                    y = model(
                        x,
                    )  # forward
                if True:
                    s = '''a
            b'''.strip()
                a(); b()
                return y
        "#]]
        .assert_eq(&rewrite.text);
        assert_eq!(rewrite.map_line(2), Some(3));
    }

    #[test]
    fn tab_indented_lines_of_a_space_indented_file_get_a_tab() {
        let source = "def f():\n    pass\n\n\ndef g(x):\n\tprint(x)\n";
        assert_eq!(if_true(source, &Context::default()).unwrap().text, "def f():\n    pass\n\n\ndef g(x):\n\tif True:\n\t\tprint(x)\n");
    }
}
