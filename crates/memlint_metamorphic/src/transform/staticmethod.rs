//! Top-level functions moved into classes: `def f(...)` becomes
//! `class Helpers:` / `@staticmethod` / `def f(...)` in its place, and every use of `f`
//! becomes `Helpers.f` (one class per function, `Helpers`, `Helpers2`, ..., so that each
//! stays where it was defined).
//!
//! **Why behaviour is kept.** `Helpers.f` is the function itself (a static method read
//! from its class is the plain function), defined at the same point of the module's
//! execution. A function's body does not see the class body's names, so every name in it
//! resolves as before; its decorators and default values are evaluated in the class body,
//! which holds no other name before them, so they read the module's names as before.
//!
//! **Where it refuses.** Functions bound more than once or declared `global` somewhere,
//! names in `__all__` or used by other modules of the project (their importers would not
//! find them), `test*` functions (a test runner finds them by name), functions with decorators other than `no_grad`-like ones (a registering
//! decorator such as `@app.route` or `@pytest.fixture` sees a different object or place),
//! and files that reach names by spelling.

use super::{named_children, Context, Module};
use crate::rewrite::{line_start, Editor};
use crate::scope::BindingKind;
use crate::Rewrite;

fn decorator_allowed(text: &str) -> bool {
    let name = text.trim_start_matches('@').trim();
    let head = name.split('(').next().unwrap_or(name);
    let last = head.rsplit('.').next().unwrap_or(head);
    matches!(last, "no_grad" | "inference_mode" | "enable_grad" | "set_grad_enabled")
}

/// Each eligible top-level function inside a class of its own, as a static method.
pub fn into_classes(source: &str, ctx: &Context) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    if module.scopes.dynamic {
        return None;
    }
    let exported = module.exported();
    let mut editor = Editor::new(source, &module.tree);
    for statement in named_children(module.root()) {
        let function = match statement.kind() {
            "function_definition" => statement,
            "decorated_definition" => match statement.child_by_field_name("definition") {
                Some(d) if d.kind() == "function_definition" => {
                    let decorators = named_children(statement).into_iter().filter(|d| d.kind() == "decorator");
                    if !decorators.into_iter().all(|d| decorator_allowed(module.text(d))) {
                        continue;
                    }
                    d
                }
                _ => continue,
            },
            _ => continue,
        };
        let Some(name) = function.child_by_field_name("name") else { continue };
        let Some(symbol) = module.scopes.symbol_at(name.byte_range()) else { continue };
        let sym = module.scopes.symbol(symbol);
        if ctx.protected.contains(&sym.name)
            || exported.contains(&sym.name)
            || super::rename::is_test_name(&sym.name)
            || (sym.name.starts_with("__") && sym.name.ends_with("__"))
        {
            continue;
        }
        let occurrences: Vec<_> = module.scopes.occurrences_of(symbol).collect();
        if occurrences.iter().filter(|o| o.binding.is_some()).count() != 1 || occurrences.iter().any(|o| o.binding == Some(BindingKind::Declare)) {
            continue;
        }
        let class = module.fresh("Helpers");
        editor.insert(line_start(source, statement.start_byte()), format!("class {class}:\n{}@staticmethod\n", module.unit));
        editor.indent_lines(statement.byte_range(), &module.unit);
        for o in occurrences.iter().filter(|o| o.binding.is_none()) {
            editor.replace(o.range.clone(), format!("{class}.{}", sym.name));
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
    fn functions_become_static_methods_called_through_their_class() {
        let source = "import torch\n\n\n@torch.no_grad()\ndef evaluate(model, x):\n    doc = '''\nkept'''\n    return model(x)\n\n\n@register\ndef hook():\n    pass\n\n\ndef main(model):\n    print(evaluate(model, 1), list(map(evaluate, [model], [2])))\n\n\nif __name__ == '__main__':\n    main(None)\n";
        expect![[r#"
            import torch


            class Helpers:
                @staticmethod
                @torch.no_grad()
                def evaluate(model, x):
                    doc = '''
            kept'''
                    return model(x)


            @register
            def hook():
                pass


            class Helpers2:
                @staticmethod
                def main(model):
                    print(Helpers.evaluate(model, 1), list(map(Helpers.evaluate, [model], [2])))


            if __name__ == '__main__':
                Helpers2.main(None)
        "#]]
        .assert_eq(&into_classes(source, &Context::default()).unwrap().text);
    }
}
