//! A value kept in a container: a name bound once to a call and called later (a network,
//! a loss) is kept in a dict (`_nets = {"m": Net()}` ... `_nets["m"](x)`) or a list
//! (`_nets = [Net()]` ... `_nets[0](x)`), and every use goes through the container.
//!
//! **Why behaviour is kept.** The container holds the very object the name held, and
//! nothing else writes to it, so `_nets["m"]` evaluates to that object wherever the name
//! did; the name had one binding, so it held that object at every use after the binding
//! (and a use before it failed in both versions, with `NameError` or
//! `UnboundLocalError`).
//!
//! **Where it refuses.** Names bound more than once (including `del`, `+=`, a loop target),
//! bound by anything but `name = <call>`, declared `global`/`nonlocal`, bound in a class
//! body, lambda or comprehension, dunders, module-level names in `__all__` or used by other
//! modules, names used in a decorator or (for the dict) inside an f-string, and files that
//! reach names by spelling.

use memlint_python::tree_sitter::Node;

use super::{ancestor, Context, Module};
use crate::rewrite::Editor;
use crate::scope::{BindingKind, ScopeKind, SymbolId};
use crate::Rewrite;

/// `name = <call>` with `name(...)` later.
pub(crate) struct Candidate<'t> {
    pub symbol: SymbolId,
    /// The `expression_statement` that binds it.
    pub statement: Node<'t>,
    pub target: Node<'t>,
    pub call: Node<'t>,
}

/// The names bound once to a call and called later.
pub(crate) fn called_bindings<'m>(module: &'m Module, ctx: &Context) -> Vec<Candidate<'m>> {
    let scopes = &module.scopes;
    if scopes.dynamic {
        return Vec::new();
    }
    let exported = module.exported();
    let mut found = Vec::new();
    for (id, symbol) in scopes.symbols.iter().enumerate() {
        let name = symbol.name.as_str();
        if name.starts_with("__") && name.ends_with("__") {
            continue;
        }
        if !matches!(scopes.scopes[symbol.scope].kind, ScopeKind::Module | ScopeKind::Function) {
            continue;
        }
        if symbol.scope == 0 && (ctx.protected.contains(name) || exported.contains(name)) {
            continue;
        }
        let occurrences: Vec<_> = scopes.occurrences_of(id).collect();
        let bindings: Vec<_> = occurrences.iter().filter(|o| o.binding.is_some()).collect();
        if bindings.len() != 1 || bindings[0].binding != Some(BindingKind::Assign) {
            continue;
        }
        let Some(target) = module.root().descendant_for_byte_range(bindings[0].range.start, bindings[0].range.end) else { continue };
        let Some(assignment) = target.parent().filter(|a| a.kind() == "assignment") else { continue };
        if assignment.child_by_field_name("left").map(|l| l.id()) != Some(target.id()) || assignment.child_by_field_name("type").is_some() {
            continue;
        }
        let Some(call) = assignment.child_by_field_name("right").filter(|r| r.kind() == "call") else { continue };
        let Some(statement) = assignment.parent().filter(|s| s.kind() == "expression_statement") else { continue };
        let called = occurrences.iter().any(|o| {
            o.binding.is_none()
                && module.root().descendant_for_byte_range(o.range.start, o.range.end).is_some_and(|n| {
                    n.parent().is_some_and(|p| p.kind() == "call" && p.child_by_field_name("function").is_some_and(|f| f.id() == n.id()))
                })
        });
        let in_decorator = occurrences.iter().any(|o| {
            module.root().descendant_for_byte_range(o.range.start, o.range.end).is_some_and(|n| ancestor(n, &["decorator"]).is_some())
        });
        if called && !in_decorator {
            found.push(Candidate { symbol: id, statement, target, call });
        }
    }
    found.sort_by_key(|c| c.statement.start_byte());
    found
}

fn in_fstring(module: &Module, range: std::ops::Range<usize>) -> bool {
    module.root().descendant_for_byte_range(range.start, range.end).is_some_and(|n| ancestor(n, &["interpolation"]).is_some())
}

fn contain(source: &str, ctx: &Context, dict: bool) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    let candidates = called_bindings(&module, ctx);
    let mut editor = Editor::new(source, &module.tree);
    for c in candidates {
        let uses: Vec<_> = module.scopes.occurrences_of(c.symbol).filter(|o| o.binding.is_none()).map(|o| o.range.clone()).collect();
        if dict && uses.iter().any(|r| in_fstring(&module, r.clone())) {
            continue;
        }
        let container = module.fresh("_nets");
        let (open, close, access) = if dict { ("{\"m\": ", "}", "[\"m\"]") } else { ("[", "]", "[0]") };
        editor.replace(c.target.byte_range(), container.clone());
        editor.insert(c.call.start_byte(), open);
        editor.insert(c.call.end_byte(), close);
        for range in uses {
            editor.replace(range, format!("{container}{access}"));
        }
    }
    if editor.is_empty() {
        return None;
    }
    editor.finish(Vec::new())
}

/// The value kept in a dict under `"m"`.
pub fn in_dict(source: &str, ctx: &Context) -> Option<Rewrite> {
    contain(source, ctx, true)
}

/// The value kept in a one-element list.
pub fn in_list(source: &str, ctx: &Context) -> Option<Rewrite> {
    contain(source, ctx, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    const SOURCE: &str = "import torch\n\ndef evaluate(loader):\n    net = Net().cuda()\n    net.eval()\n    crit = torch.nn.MSELoss()\n    for x, y in loader:\n        print(crit(net(x), y), f'{net}')\n    opt = torch.optim.SGD(net.parameters())\n    model = Net()\n    model = model.half()\n    model(1)\n";

    #[test]
    fn called_names_go_into_a_dict() {
        expect![[r#"
            import torch

            def evaluate(loader):
                net = Net().cuda()
                net.eval()
                _nets = {"m": torch.nn.MSELoss()}
                for x, y in loader:
                    print(_nets["m"](net(x), y), f'{net}')
                opt = torch.optim.SGD(net.parameters())
                model = Net()
                model = model.half()
                model(1)
        "#]]
        .assert_eq(&in_dict(SOURCE, &Context::default()).unwrap().text);
    }

    #[test]
    fn called_names_go_into_a_list() {
        expect![[r#"
            import torch

            def evaluate(loader):
                _nets = [Net().cuda()]
                _nets[0].eval()
                _nets2 = [torch.nn.MSELoss()]
                for x, y in loader:
                    print(_nets2[0](_nets[0](x), y), f'{_nets[0]}')
                opt = torch.optim.SGD(_nets[0].parameters())
                model = Net()
                model = model.half()
                model(1)
        "#]]
        .assert_eq(&in_list(SOURCE, &Context::default()).unwrap().text);
    }
}
