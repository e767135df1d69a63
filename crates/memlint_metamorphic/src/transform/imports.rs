//! Imports bound under other names: `import torch as T`, `from torch import nn as tnn`,
//! every use renamed.
//!
//! **Why behaviour is kept.** `import M as A` binds `A` to the same module object that
//! `import M` binds to `M` (and `from M import x as a` the same object as `x`); every read
//! of the name is renamed with it, so every read gets the same object. `import a.b` binds
//! `a` and loads `a.b`; it is kept and followed by `import a as A`, which binds `A` to the
//! same package. Other bindings of the same name (`except ImportError: apex = None`) are
//! renamed too.
//!
//! **Where it refuses.** Names in `__all__` or used by other modules of the project, star
//! imports and `__future__` imports (not names), names also bound as parameters, and files
//! that reach names by spelling (see [`crate::scope`]'s `dynamic`).

use super::{Context, Module};
use crate::rewrite::Editor;
use crate::scope::BindingKind;
use crate::Rewrite;

/// Every imported name under a new alias (`torch` as `T`, any other `x` as `tx`).
pub fn alias(source: &str, ctx: &Context) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    if module.scopes.dynamic {
        return None;
    }
    let exported = module.exported();
    let mut editor = Editor::new(source, &module.tree);
    for (id, symbol) in module.scopes.symbols.iter().enumerate() {
        let bindings: Vec<_> = module.scopes.bindings_of(id).collect();
        if !bindings.iter().any(|o| o.binding == Some(BindingKind::Import))
            || !bindings.iter().all(|o| matches!(o.binding, Some(BindingKind::Import | BindingKind::Assign | BindingKind::Del)))
        {
            continue;
        }
        if symbol.scope == 0 && (ctx.protected.contains(&symbol.name) || exported.contains(&symbol.name)) {
            continue;
        }
        let alias = module.fresh(&if symbol.name == "torch" { "T".to_owned() } else { format!("t{}", symbol.name) });
        for o in module.scopes.occurrences_of(id) {
            if o.binding != Some(BindingKind::Import) {
                editor.replace(o.range.clone(), alias.clone());
                continue;
            }
            let Some(node) = module.root().descendant_for_byte_range(o.range.start, o.range.end) else { continue };
            let Some(parent) = node.parent() else { continue };
            match parent.kind() {
                // `import x as a`, `from m import x as a`: the alias is the binding.
                "aliased_import" => editor.replace(o.range.clone(), alias.clone()),
                "dotted_name" if parent.named_child_count() == 1 => editor.insert(parent.end_byte(), format!(" as {alias}")),
                // `import a.b` binds `a`: kept, and `a` bound again under the alias.
                "dotted_name" => {
                    let statement = parent.parent().filter(|s| s.kind() == "import_statement")?;
                    editor.insert(statement.end_byte(), format!("; import {} as {alias}", symbol.name));
                }
                _ => return None,
            }
        }
    }
    if editor.is_empty() {
        return None;
    }
    editor.finish(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn every_import_gets_an_alias_and_every_use_follows() {
        let source = "import torch\nimport torch.nn.functional as F\nfrom torch import nn, optim as opt\nimport os.path\ntry:\n    import apex\nexcept ImportError:\n    apex = None\n\nclass Net(nn.Module):\n    def forward(self, x):\n        import math\n        return F.relu(x) * math.pi + os.path.sep.count('/')\n\nnet = Net().to(torch.device('cuda'))\nopt.SGD(net.parameters(), lr=1, nn=apex)\n";
        expect![[r#"
            import torch as T
            import torch.nn.functional as tF
            from torch import nn as tnn, optim as topt
            import os.path; import os as tos
            try:
                import apex as tapex
            except ImportError:
                tapex = None

            class Net(tnn.Module):
                def forward(self, x):
                    import math as tmath
                    return tF.relu(x) * tmath.pi + tos.path.sep.count('/')

            net = Net().to(T.device('cuda'))
            topt.SGD(net.parameters(), lr=1, nn=tapex)
        "#]]
        .assert_eq(&alias(source, &Context::default()).unwrap().text);
    }

    #[test]
    fn exported_and_protected_imports_are_kept() {
        let ctx = Context { protected: ["np".to_owned()].into_iter().collect(), ..Context::default() };
        let source = "import numpy as np\nfrom a import b\n__all__ = ['b']\nprint(np, b)\n";
        assert!(alias(source, &ctx).is_none());
    }
}
