//! Other spellings of the same `for` loop: `while True:` with `next()`, `enumerate`, and
//! `zip` with `itertools.count()`.
//!
//! **Why behaviour is kept.** `for T in E: B` evaluates `E`, calls `iter()` on it once,
//! then binds `T` to each `next()` until `StopIteration`, running `B` each time;
//! `_it = iter(E)` / `while True: try: T = next(_it) except StopIteration: break` / `B`
//! does exactly that (the `try` holds only the `next()` call, so a `StopIteration` raised
//! by `B` still propagates; `break` and `continue` in `B` leave or restart the `while` as
//! they did the `for`). `enumerate(E)` and `zip(E, itertools.count())` call `iter(E)`
//! once and `next()` on it exactly as often as the loop did (`zip` asks `E` first and
//! stops when it is exhausted), adding a counter bound to a new name.
//!
//! **Where it refuses.** `async for` (its iterator is asynchronous), a loop with an
//! `else:` (`for-to-while` only: `break` would skip it differently), a body on the header's
//! line, a loop directly in a class body (the new name would become a class attribute), and
//! files that bind `iter`, `next`, `StopIteration`, `enumerate` or `zip` themselves (the
//! builtin would not be the one called).

use super::{module_insertion_point, needs_newline_at, Context, Module};
use crate::rewrite::{indentation, line_start, starts_line, Editor, Piece};
use crate::scope::ScopeKind;
use crate::Rewrite;

use memlint_python::tree_sitter::Node;

/// The `for` statements a rewrite may touch, with their target and iterable.
fn loops<'m>(module: &'m Module, builtins: &[&str], allow_else: bool) -> Option<Vec<(Node<'m>, Node<'m>, Node<'m>)>> {
    if module.scopes.symbols.iter().any(|s| builtins.contains(&s.name.as_str())) {
        return None;
    }
    let mut found = Vec::new();
    for node in module.nodes_of("for_statement") {
        let is_async = node.child(0).is_some_and(|c| c.kind() == "async");
        let (Some(left), Some(right), Some(body)) =
            (node.child_by_field_name("left"), node.child_by_field_name("right"), node.child_by_field_name("body"))
        else {
            continue;
        };
        if is_async || (!allow_else && node.child_by_field_name("alternative").is_some()) {
            continue;
        }
        if body.start_position().row == node.start_position().row || !starts_line(module.source, node) {
            continue;
        }
        if module.scopes.scopes[module.scopes.scope_at(node.start_byte())].kind == ScopeKind::Class {
            continue;
        }
        found.push((node, left, right));
    }
    Some(found)
}

/// The iterable's text as one expression (`a, b` becomes `(a, b)`).
fn iterable(right: Node) -> Vec<Piece> {
    if matches!(right.kind(), "expression_list" | "pattern_list") {
        vec![Piece::text("("), Piece::copy(right.byte_range()), Piece::text(")")]
    } else {
        vec![Piece::copy(right.byte_range())]
    }
}

/// `for x in it:` as `_it = iter(it)` / `while True:` / `try: x = next(_it)` /
/// `except StopIteration: break`.
pub fn for_to_while(source: &str, _ctx: &Context) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    let found = loops(&module, &["iter", "next", "StopIteration"], false)?;
    let mut editor = Editor::new(source, &module.tree);
    for (node, left, right) in found {
        let body = node.child_by_field_name("body")?;
        let colon = (0..node.child_count()).filter_map(|i| node.child(i)).find(|c| c.kind() == ":")?;
        let outer = indentation(source, node.start_byte());
        let inner = indentation(source, body.start_byte());
        let Some(unit) = inner.strip_prefix(outer).filter(|u| !u.is_empty()) else { continue };
        let it = module.fresh("_it");
        let mut header = vec![Piece::text(format!("{it} = iter("))];
        header.extend(iterable(right));
        header.push(Piece::text(format!(")\n{outer}while True:")));
        editor.edit(node.start_byte()..colon.end_byte(), header);
        let at = line_start(source, body.start_byte());
        editor.edit(
            at..at,
            vec![
                Piece::text(format!("{inner}try:\n{inner}{unit}")),
                Piece::copy(left.byte_range()),
                Piece::text(format!(" = next({it})\n{inner}except StopIteration:\n{inner}{unit}break\n")),
            ],
        );
    }
    if editor.is_empty() {
        return None;
    }
    editor.finish(Vec::new())
}

/// `for x in it:` as `for _i, x in enumerate(it):`.
pub fn enumerated(source: &str, _ctx: &Context) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    let found = loops(&module, &["enumerate"], true)?;
    let mut editor = Editor::new(source, &module.tree);
    for (_, left, right) in found {
        let counter = module.fresh("_i");
        let target = if left.kind() == "pattern_list" {
            vec![Piece::text(format!("{counter}, (")), Piece::copy(left.byte_range()), Piece::text(")")]
        } else {
            vec![Piece::text(format!("{counter}, ")), Piece::copy(left.byte_range())]
        };
        editor.edit(left.byte_range(), target);
        let mut it = vec![Piece::text("enumerate(")];
        it.extend(iterable(right));
        it.push(Piece::text(")"));
        editor.edit(right.byte_range(), it);
    }
    if editor.is_empty() {
        return None;
    }
    editor.finish(Vec::new())
}

/// `for x in it:` as `for x, _c in zip(it, itertools.count()):`, importing `itertools`
/// under a new name after the module's docstring and `__future__` imports.
pub fn zipped(source: &str, _ctx: &Context) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    let found = loops(&module, &["zip"], true)?;
    if found.is_empty() {
        return None;
    }
    let mut editor = Editor::new(source, &module.tree);
    let itertools = module.fresh("_itertools");
    for (_, left, right) in found {
        let counter = module.fresh("_c");
        let target = if left.kind() == "pattern_list" {
            vec![Piece::text("("), Piece::copy(left.byte_range()), Piece::text(format!("), {counter}"))]
        } else {
            vec![Piece::copy(left.byte_range()), Piece::text(format!(", {counter}"))]
        };
        editor.edit(left.byte_range(), target);
        let mut it = vec![Piece::text("zip(")];
        it.extend(iterable(right));
        it.push(Piece::text(format!(", {itertools}.count())")));
        editor.edit(right.byte_range(), it);
    }
    let at = module_insertion_point(&module);
    let newline = if needs_newline_at(source, at) { "\n" } else { "" };
    editor.insert(at, format!("{newline}import itertools as {itertools}\n"));
    editor.finish(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    const LOOPS: &str = "\"\"\"Doc.\"\"\"\nfrom __future__ import annotations\n\n\ndef run(model, loader):\n    for x, y in loader:  # batches\n        out = model(x)\n        if out is None:\n            continue\n    for a in 1, 2:\n        print(a)\n    else:\n        print('done')\n";

    #[test]
    fn for_becomes_while_with_next() {
        let rewrite = for_to_while(LOOPS, &Context::default()).unwrap();
        expect![[r#"
            """Doc."""
            from __future__ import annotations


            def run(model, loader):
                _it = iter(loader)
                while True:  # batches
                    try:
                        x, y = next(_it)
                    except StopIteration:
                        break
                    out = model(x)
                    if out is None:
                        continue
                for a in 1, 2:
                    print(a)
                else:
                    print('done')
        "#]]
        .assert_eq(&rewrite.text);
        assert_eq!(rewrite.map_line(6), Some(6), "the header's line: `_it = iter(...)`");
        assert_eq!(rewrite.map_line(7), Some(12), "the body moves down with the `try`");
    }

    #[test]
    fn enumerate_wraps_the_iterable_and_the_target() {
        expect![[r#"
            """Doc."""
            from __future__ import annotations


            def run(model, loader):
                for _i, (x, y) in enumerate(loader):  # batches
                    out = model(x)
                    if out is None:
                        continue
                for _i2, a in enumerate((1, 2)):
                    print(a)
                else:
                    print('done')
        "#]]
        .assert_eq(&enumerated(LOOPS, &Context::default()).unwrap().text);
    }

    #[test]
    fn zip_counts_alongside_and_imports_itertools_after_future_imports() {
        expect![[r#"
            """Doc."""
            from __future__ import annotations
            import itertools as _itertools


            def run(model, loader):
                for (x, y), _c in zip(loader, _itertools.count()):  # batches
                    out = model(x)
                    if out is None:
                        continue
                for a, _c2 in zip((1, 2), _itertools.count()):
                    print(a)
                else:
                    print('done')
        "#]]
        .assert_eq(&zipped(LOOPS, &Context::default()).unwrap().text);
    }

    #[test]
    fn refuses_where_the_builtins_are_rebound_or_the_loop_is_async() {
        assert!(for_to_while("def f(x):\n    next = 1\n    for a in x:\n        print(a)\n", &Context::default()).is_none());
        assert!(enumerated("async def f(x):\n    async for a in x:\n        print(a)\n", &Context::default()).is_none());
        assert!(for_to_while("for a in x: print(a)\n", &Context::default()).is_none(), "body on the header's line");
    }
}
