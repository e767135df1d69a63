//! A value built by a factory: `v = Net(cfg)` becomes `v = _make_v(cfg)` with
//! `def _make_v(cfg): return Net(cfg)`, either at module level before the statement that
//! held the binding (`factory`) or in a sibling module `_factory.py` that the file imports
//! (`factory-module`). The candidates are those of [`super::containers`]: names bound
//! once to a call and called later.
//!
//! **Why behaviour is kept.** The call expression is evaluated by the factory when the
//! binding ran, with the same values: the local names it reads are passed as arguments
//! (read at the same point), module-level names and builtins are read by the factory from
//! the same module when it runs (`factory`), and in the sibling module the names the file
//! imported are imported again by the same import statement (the file has already run
//! it: `_factory` is imported right after the file's last top-level import, so no module
//! is imported earlier than before) while the file's own classes and globals are passed as
//! arguments. The factory returns the call's value unchanged.
//!
//! **Where it refuses.** A local name the call reads that may be unbound there (see
//! [`super::flow::bound_before`]: a call that would fail on it might not have read it),
//! names of an enclosing function (a module-level factory cannot see them), calls that
//! hold `yield`, `await`, `:=`, `super`, a lambda or generator (their closures would read
//! the factory's parameters instead of the caller's later values) or a private `__name`
//! (class name mangling), and, for `factory-module`, a binding at module level before the
//! file's last top-level import.

use std::collections::BTreeMap;

use memlint_python::tree_sitter::Node;

use super::containers::{called_bindings, Candidate};
use super::flow::bound_before;
use super::{descendants, module_insertion_point, named_children, needs_newline_at, top_level_statement, Context, Module};
use crate::rewrite::{line_end, Editor, Piece};
use crate::scope::{BindingKind, ScopeKind, SymbolId};
use crate::Rewrite;

/// What the factory of one candidate reads.
struct Plan {
    /// Parameters (local names, and for the sibling module the file's own globals), in
    /// order of first use.
    params: Vec<String>,
    /// Import statements to repeat in the sibling module.
    imports: Vec<String>,
}

/// Decides how the call of `c` can be moved out, or `None`.
fn plan(module: &Module, c: &Candidate, sibling: bool) -> Option<Plan> {
    let scopes = &module.scopes;
    let call = c.call;
    let mut refused = false;
    descendants(call, &mut |n| match n.kind() {
        "yield" | "await" | "named_expression" | "lambda" | "generator_expression" => refused = true,
        "identifier" => {
            let t = module.text(n);
            if t == "super" || t == "__class__" || (t.starts_with("__") && !t.ends_with("__")) {
                refused = true;
            }
        }
        _ => {}
    });
    if refused {
        return None;
    }
    let here = scopes.symbol(c.symbol).scope;
    let mut params: Vec<String> = Vec::new();
    let mut imports: Vec<String> = Vec::new();
    let mut seen: Vec<SymbolId> = Vec::new();
    for o in scopes.occurrences.iter().filter(|o| call.start_byte() <= o.range.start && o.range.end <= call.end_byte()) {
        let Some(symbol) = o.symbol else { continue };
        let owner = scopes.symbol(symbol).scope;
        // Names of comprehensions inside the call move with it.
        if scopes.scopes[owner].kind == ScopeKind::Comprehension && scopes.scopes[owner].node.start >= call.start_byte() {
            continue;
        }
        if seen.contains(&symbol) {
            continue;
        }
        seen.push(symbol);
        let name = scopes.symbol(symbol).name.clone();
        if owner == 0 {
            if !sibling {
                continue;
            }
            match top_level_import(module, symbol) {
                Some(statement) => {
                    if !imports.contains(&statement) {
                        imports.push(statement);
                    }
                }
                None => {
                    if here == 0 && !bound_before(module, c.statement, symbol) {
                        return None;
                    }
                    params.push(name);
                }
            }
        } else if owner == here {
            if !bound_before(module, c.statement, symbol) {
                return None;
            }
            params.push(name);
        } else {
            return None;
        }
    }
    Some(Plan { params, imports })
}

/// The import statement, spelled for the sibling module, of a module-level name bound
/// once by an unconditional top-level import.
fn top_level_import(module: &Module, symbol: SymbolId) -> Option<String> {
    let bindings: Vec<_> = module.scopes.bindings_of(symbol).collect();
    if bindings.len() != 1 || bindings[0].binding != Some(BindingKind::Import) {
        return None;
    }
    let statement = module.root().descendant_for_byte_range(bindings[0].binder.start, bindings[0].binder.end)?;
    let statement = super::ancestor(statement, &["import_statement", "import_from_statement"])?;
    if statement.parent()?.kind() != "module" {
        return None;
    }
    let binding = module.root().descendant_for_byte_range(bindings[0].range.start, bindings[0].range.end)?;
    // The one name of the statement that binds the symbol.
    let item = named_children(statement)
        .into_iter()
        .filter(|n| matches!(n.kind(), "dotted_name" | "aliased_import"))
        .find(|n| n.start_byte() <= binding.start_byte() && binding.end_byte() <= n.end_byte())?;
    let text = module.text(item);
    Some(match statement.kind() {
        "import_statement" => format!("import {text}"),
        _ => format!("from {} import {text}", module.text(statement.child_by_field_name("module_name")?)),
    })
}

/// The factory's text: `def name(params):` / `return <call>`.
fn factory_text(module: &Module, name: &str, plan: &Plan, call: Node) -> String {
    format!("def {name}({}):\n{}return {}\n", plan.params.join(", "), module.unit, module.text(call))
}

/// `v = Net(...)` as `v = _make_v(...)`, the factory defined at module level before the
/// statement that held the binding.
pub fn local(source: &str, ctx: &Context) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    let mut editor = Editor::new(source, &module.tree);
    for c in called_bindings(&module, ctx) {
        let Some(plan) = plan(&module, &c, false) else { continue };
        let name = module.fresh(&format!("_make_{}", module.scopes.symbol(c.symbol).name.trim_start_matches('_')));
        let top = top_level_statement(c.statement);
        editor.edit(
            top.start_byte()..top.start_byte(),
            vec![
                Piece::text(format!("def {name}({}):\n{}return ", plan.params.join(", "), module.unit)),
                Piece::copy(c.call.byte_range()),
                Piece::text("\n\n\n"),
            ],
        );
        editor.replace(c.call.byte_range(), format!("{name}({})", plan.params.join(", ")));
    }
    if editor.is_empty() {
        return None;
    }
    editor.finish(Vec::new())
}

/// The same factories in a sibling module (`_factory.py`, or `_factory2.py` ... when taken),
/// imported by the file after its last top-level import (relatively in a package).
pub fn sibling(source: &str, ctx: &Context) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    let last_import = named_children(module.root())
        .into_iter()
        .rfind(|n| matches!(n.kind(), "import_statement" | "import_from_statement" | "future_import_statement"));
    let at = match last_import {
        Some(statement) => (line_end(source, statement.end_byte()) + 1).min(source.len()),
        None => module_insertion_point(&module),
    };
    let mut editor = Editor::new(source, &module.tree);
    let mut factories: Vec<(String, std::ops::Range<usize>)> = Vec::new();
    let mut imports: BTreeMap<usize, String> = BTreeMap::new();
    let mut names = Vec::new();
    for c in called_bindings(&module, ctx) {
        if module.scopes.symbol(c.symbol).scope == 0 && c.statement.start_byte() < at {
            continue;
        }
        let Some(plan) = plan(&module, &c, true) else { continue };
        let name = module.fresh(&format!("_make_{}", module.scopes.symbol(c.symbol).name.trim_start_matches('_')));
        factories.push((factory_text(&module, &name, &plan, c.call), c.call.byte_range()));
        for i in plan.imports.iter() {
            if !imports.values().any(|v| v == i) {
                imports.insert(imports.len(), i.clone());
            }
        }
        editor.replace(c.call.byte_range(), format!("{name}({})", plan.params.join(", ")));
        names.push(name);
    }
    if names.is_empty() {
        return None;
    }
    let mut stem = "_factory".to_owned();
    let mut n = 2;
    while ctx.siblings.contains(&stem) {
        stem = format!("_factory{n}");
        n += 1;
    }
    let dot = if ctx.in_package { "." } else { "" };
    let newline = if needs_newline_at(source, at) { "\n" } else { "" };
    editor.insert(at, format!("{newline}from {dot}{stem} import {}\n", names.join(", ")));
    let mut text = String::from("\"\"\"Factories moved out of a module by memlint-metamorphic.\"\"\"\n");
    for i in imports.values() {
        text.push_str(i);
        text.push('\n');
    }
    let mut moved = Vec::new();
    for (f, call) in factories {
        text.push_str("\n\n");
        // The call is the text after `return ` on the factory's second line.
        let at = text.len() + f.find("return ").map_or(0, |i| i + "return ".len());
        moved.push((call, 0, at));
        text.push_str(&f);
    }
    editor.finish_moving(vec![(format!("{stem}.py"), text)], moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    const SOURCE: &str = "import torch\nfrom torchvision import models as zoo\n\nclass Net(torch.nn.Module):\n    pass\n\nHIDDEN = 4\n\ndef evaluate(loader, cfg):\n    if cfg:\n        width = 3\n    net = Net(cfg.depth, HIDDEN).cuda()\n    enc = zoo.resnet18(pretrained=True)\n    bad = Net(width)\n    for x in loader:\n        print(net(x), enc(x), bad(x))\n";

    #[test]
    fn a_factory_before_the_function_builds_the_value() {
        let rewrite = local(SOURCE, &Context::default()).unwrap();
        expect![[r#"
            import torch
            from torchvision import models as zoo

            class Net(torch.nn.Module):
                pass

            HIDDEN = 4

            def _make_net(cfg):
                return Net(cfg.depth, HIDDEN).cuda()


            def _make_enc():
                return zoo.resnet18(pretrained=True)


            def evaluate(loader, cfg):
                if cfg:
                    width = 3
                net = _make_net(cfg)
                enc = _make_enc()
                bad = Net(width)
                for x in loader:
                    print(net(x), enc(x), bad(x))
        "#]]
        .assert_eq(&rewrite.text);
        let call = rewrite.map_offset(SOURCE.find("Net(cfg").unwrap()).unwrap();
        assert_eq!(&rewrite.text[call..call + 7], "Net(cfg", "the construction moved into the factory");
        assert_eq!(rewrite.map_line(12), Some(20), "the binding's line stays the binding's");
    }

    #[test]
    fn a_sibling_module_holds_the_factory_and_repeats_the_imports() {
        let rewrite = sibling(SOURCE, &Context::default()).unwrap();
        expect![[r#"
            import torch
            from torchvision import models as zoo
            from _factory import _make_net, _make_enc

            class Net(torch.nn.Module):
                pass

            HIDDEN = 4

            def evaluate(loader, cfg):
                if cfg:
                    width = 3
                net = _make_net(Net, cfg, HIDDEN)
                enc = _make_enc()
                bad = Net(width)
                for x in loader:
                    print(net(x), enc(x), bad(x))
        "#]]
        .assert_eq(&rewrite.text);
        assert_eq!(rewrite.modules.len(), 1);
        let (module, at) = rewrite.map_offset_to_module(SOURCE.find("zoo.resnet18").unwrap()).unwrap();
        assert_eq!(&rewrite.modules[module].1[at..at + 12], "zoo.resnet18", "the call moved into the sibling module");
        expect![[r#"
            """Factories moved out of a module by memlint-metamorphic."""
            from torchvision import models as zoo


            def _make_net(Net, cfg, HIDDEN):
                return Net(cfg.depth, HIDDEN).cuda()


            def _make_enc():
                return zoo.resnet18(pretrained=True)
        "#]]
        .assert_eq(&rewrite.modules[0].1);
        let ctx = Context { in_package: true, siblings: ["_factory".to_owned()].into_iter().collect(), ..Context::default() };
        let rewrite = sibling(SOURCE, &ctx).unwrap();
        assert!(rewrite.text.contains("from ._factory2 import _make_net, _make_enc\n"));
        assert_eq!(rewrite.modules[0].0, "_factory2.py");
    }
}
