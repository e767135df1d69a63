//! A loop body extracted into a helper: the body of a `for` or `while` loop becomes a
//! module-level function, defined before the statement that holds the loop; the names the
//! body reads come in as arguments, the names it assigns that are used after the body (or
//! by the next iteration) go back out as its return value.
//!
//! ```text
//! for x, y in loader:                 def _loop_body(model, x, total):
//!     out = model(x)                      out = model(x)
//!     total += out.sum()                  total += out.sum()
//!                                         return total
//!                                     ...
//!                                     for x, y in loader:
//!                                         total = _loop_body(model, x, total)
//! ```
//!
//! **Why behaviour is kept.** Each iteration runs the same statements on the same objects:
//! every local name the body reads before assigning it holds, as an argument, the value
//! it held in the enclosing function; module-level names and builtins are read from the
//! same module; every name the body assigns that is read outside it (or in the next
//! iteration) is returned and assigned back right after, before anything else can read
//! it; names assigned and used only within one iteration of a function's loop stay in the
//! helper (at module level every name assigned is returned: it stays a global).
//!
//! **Where it refuses** (the loop is left as it is): a body that contains `break`,
//! `continue` (of this loop), `return`, `yield`, `await`, `global`, `nonlocal`, `del` of a
//! local, a nested `def` or `class`, a lambda or generator reading the function's locals
//! (it would keep the helper's values instead of reading later ones), `super`,
//! `__class__` or a private `__name`; a body on the loop's header line; a loop in a class
//! body, inside `try`, or inside a `with` whose manager may swallow an exception (the
//! names assigned before the exception would not reach the handler); a name the body reads
//! first that may be unbound when the body starts (passing it would fail where the body
//! might not have read it); a name returned that the body may leave unassigned; a name
//! the body assigns that another scope reads (a function reading a global the loop sets,
//! a closure), since that scope would see the new value only after the helper returns;
//! names of an enclosing function (a module-level helper cannot see them); a loop whose
//! body holds another loop that is extracted (the innermost loops are extracted).

use memlint_python::tree_sitter::Node;

use super::flow::{binds_unconditionally, bound_before, with_never_swallows};
use super::{descendants, named_children, top_level_statement, Context, Module};
use crate::rewrite::{indentation, line_start, starts_line, Editor, Piece};
use crate::scope::{BindingKind, ScopeKind, SymbolId};
use crate::Rewrite;

/// Every extractable innermost loop body moved into a helper.
pub fn extract_loop_bodies(source: &str, _ctx: &Context) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    if module.scopes.dynamic {
        return None;
    }
    let mut loops: Vec<Node> = module.nodes_of("for_statement");
    loops.extend(module.nodes_of("while_statement"));
    // Innermost first: deeper loops before the loops around them.
    loops.sort_by_key(|l| std::cmp::Reverse(depth(*l)));
    let mut editor = Editor::new(source, &module.tree);
    let mut taken: Vec<std::ops::Range<usize>> = Vec::new();
    for l in loops {
        let Some(body) = l.child_by_field_name("body") else { continue };
        if taken.iter().any(|t| t.start >= body.start_byte() && t.end <= body.end_byte()) {
            continue;
        }
        let Some(plan) = plan(&module, l, body) else { continue };
        taken.push(body.byte_range());
        let name = module.fresh("_loop_body");
        let args = plan.params.join(", ");
        let inner = indentation(source, body.start_byte()).to_owned();
        let call = match plan.returns.len() {
            0 => format!("{inner}{name}({args})"),
            _ => format!("{inner}{} = {name}({args})", plan.returns.join(", ")),
        };
        let lines = line_start(source, body.start_byte())..body.end_byte();
        let mut def = vec![Piece::text(format!("def {name}({args}):\n")), Piece::reindented(lines.clone(), &inner, &module.unit)];
        if plan.returns.is_empty() {
            def.push(Piece::text("\n\n\n"));
        } else {
            def.push(Piece::text(format!("\n{}return {}\n\n\n", module.unit, plan.returns.join(", "))));
        }
        let top = top_level_statement(l);
        editor.edit(top.start_byte()..top.start_byte(), def);
        editor.edit(lines, vec![Piece::text(call)]);
    }
    if editor.is_empty() {
        return None;
    }
    editor.finish(Vec::new())
}

fn depth(node: Node) -> usize {
    let mut d = 0;
    let mut at = node.parent();
    while let Some(n) = at {
        d += 1;
        at = n.parent();
    }
    d
}

struct Plan {
    params: Vec<String>,
    returns: Vec<String>,
}

fn plan(module: &Module, l: Node, body: Node) -> Option<Plan> {
    let source = module.source;
    let scopes = &module.scopes;
    if l.child(0).is_some_and(|c| c.kind() == "async") || body.start_position().row == l.start_position().row || !starts_line(source, l) {
        return None;
    }
    let s = scopes.scope_at(l.start_byte());
    if !matches!(scopes.scopes[s].kind, ScopeKind::Function | ScopeKind::Module) {
        return None;
    }
    // Around the loop, within its function: no `try`, no `with` that may swallow.
    let mut at = l.parent();
    while let Some(n) = at {
        if matches!(n.kind(), "function_definition" | "module") {
            break;
        }
        if n.kind() == "try_statement" || (n.kind() == "with_statement" && !with_never_swallows(module, n)) {
            return None;
        }
        at = n.parent();
    }
    // What the body may not hold.
    let mut refused = false;
    descendants(body, &mut |n| match n.kind() {
        "return_statement" | "yield" | "await" | "global_statement" | "nonlocal_statement" | "function_definition" | "class_definition" => {
            refused = true
        }
        "break_statement" | "continue_statement" => {
            let mut up = n.parent();
            while let Some(p) = up {
                if matches!(p.kind(), "for_statement" | "while_statement") {
                    if p.id() == l.id() {
                        refused = true;
                    }
                    break;
                }
                up = p.parent();
            }
        }
        "lambda" | "generator_expression" => {
            let range = n.byte_range();
            if scopes
                .occurrences
                .iter()
                .any(|o| range.start <= o.range.start && o.range.end <= range.end && o.symbol.is_some_and(|sym| scopes.symbol(sym).scope == s))
            {
                refused = true;
            }
        }
        "identifier" => {
            let t = &source[n.byte_range()];
            if t == "super" || t == "__class__" || (t.starts_with("__") && !t.ends_with("__")) {
                refused = true;
            }
        }
        _ => {}
    });
    if refused {
        return None;
    }
    let range = body.byte_range();
    let inside = |r: &std::ops::Range<usize>| range.start <= r.start && r.end <= range.end;
    let statements: Vec<Node> = named_children(body).into_iter().filter(|n| n.kind() != "comment").collect();
    let first = *statements.first()?;
    let mut used: Vec<SymbolId> = Vec::new();
    for o in scopes.occurrences.iter().filter(|o| inside(&o.range)) {
        let Some(sym) = o.symbol else { continue };
        let owner = scopes.symbol(sym).scope;
        if owner != s {
            // Names of comprehensions in the body move with it; module names are read
            // from the module (a function cannot write them without `global`).
            let nested_here = scopes.scopes[owner].node.start >= range.start && scopes.scopes[owner].node.end <= range.end;
            if nested_here || (owner == 0 && o.binding.is_none()) {
                continue;
            }
            return None;
        }
        if o.binding == Some(BindingKind::Del) {
            return None;
        }
        if !used.contains(&sym) {
            used.push(sym);
        }
    }
    let mut params = Vec::new();
    let mut returns = Vec::new();
    for sym in used {
        let occurrences: Vec<_> = scopes.occurrences_of(sym).collect();
        let in_body: Vec<_> = occurrences.iter().filter(|o| inside(&o.range)).collect();
        let written = in_body.iter().any(|o| o.binding.is_some());
        let bindings: Vec<_> = scopes.bindings_of(sym).collect();
        let definite = statements.iter().find(|st| binds_unconditionally(module, **st, &bindings));
        let read_first = in_body.iter().any(|o| o.reads && definite.is_none_or(|d| o.range.start < d.end_byte()));
        let outside: Vec<_> = occurrences.iter().filter(|o| !inside(&o.range)).collect();
        if written && outside.iter().any(|o| o.scope != s) {
            // Another scope (a function reading the global, a closure) would read it
            // while the helper runs.
            return None;
        }
        let name = scopes.symbol(sym).name.clone();
        // At module level every name assigned stays a global of the module, as before.
        let returned = written && (!outside.is_empty() || read_first || s == 0);
        // Read before the body assigns it, or returned though the body may not assign it:
        // its value comes in.
        let incoming = (read_first && (scopes.scopes[s].kind == ScopeKind::Function || written)) || (returned && definite.is_none());
        if incoming {
            if !bound_before(module, first, sym) {
                return None;
            }
            params.push(name.clone());
        }
        if returned {
            returns.push(name);
        }
    }
    Some(Plan { params, returns })
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn bodies_become_helpers_with_their_inputs_and_outputs() {
        let source = "import torch\n\n\ndef evaluate(model, loader):\n    total = 0\n    best = None\n    for x, y in loader:\n        out = model(x)\n        total += out.sum()\n        if out.max() > 0:\n            best = out\n    print(total, best)\n";
        expect![[r#"
            import torch


            def _loop_body(model, x, total, best):
                out = model(x)
                total += out.sum()
                if out.max() > 0:
                    best = out
                return total, best


            def evaluate(model, loader):
                total = 0
                best = None
                for x, y in loader:
                    total, best = _loop_body(model, x, total, best)
                print(total, best)
        "#]]
        .assert_eq(&extract_loop_bodies(source, &Context::default()).unwrap().text);
    }

    #[test]
    fn innermost_loops_at_module_level_pass_only_what_they_write() {
        let source = "import torch\nmodel = torch.nn.Linear(2, 2)\nsteps = 0\nfor epoch in range(2):\n    for x in [torch.ones(2)]:\n        y = model(x)\n        steps = steps + 1\nprint(steps)\n";
        expect![[r#"
            import torch
            model = torch.nn.Linear(2, 2)
            steps = 0
            def _loop_body(steps):
                y = model(x)
                steps = steps + 1
                return y, steps


            for epoch in range(2):
                for x in [torch.ones(2)]:
                    y, steps = _loop_body(steps)
            print(steps)
        "#]]
        .assert_eq(&extract_loop_bodies(source, &Context::default()).unwrap().text);
    }

    #[test]
    fn refuses_bodies_that_leave_the_loop_or_race_another_scope() {
        let refused = [
            "def f(xs):\n    for x in xs:\n        if x:\n            break\n        print(x)\n",
            "def f(xs):\n    for x in xs:\n        return x\n",
            "def f(xs):\n    fs = []\n    for x in xs:\n        fs.append(lambda: x)\n    return fs\n",
            "lr = 1\ndef train():\n    print(lr)\nfor e in range(3):\n    lr = e\n    train()\n",
            "def f(xs, c):\n    if c:\n        seen = 0\n    for x in xs:\n        seen = seen + x\n    return seen\n",
            "def f(xs):\n    for x in xs:\n        if x:\n            last = x\n    return last\n",
            "def f(xs):\n    try:\n        for x in xs:\n            print(x)\n    except ValueError:\n        pass\n",
        ];
        for source in refused {
            assert!(extract_loop_bodies(source, &Context::default()).is_none(), "{source}");
        }
        let allowed = "def f(xs):\n    with torch.no_grad():\n        for x in xs:\n            print(x)\n";
        assert!(extract_loop_bodies(allowed, &Context::default()).is_some());
    }
}
