//! The transformations: each a pure function from a Python module's text to a
//! [`Rewrite`] that does exactly what the module did (or `None` when it does not apply),
//! built on the tree-sitter tree, never on the text's spelling. Each module documents why
//! its rewrite keeps behaviour and where it refuses to apply.
//!
//! A transformation applies everywhere it can in the module at once (every loop, every
//! gate, every name), so one rewrite per module and transformation.

use std::collections::HashSet;

use memlint_python::tree_sitter::{Node, Tree};

use crate::rewrite::{indent_unit, FreshNames};
use crate::scope::Scopes;
use crate::Rewrite;

pub mod containers;
pub mod extract;
pub mod factory;
pub(crate) mod flow;
pub mod gates;
pub mod imports;
pub mod loops;
pub mod rename;
pub mod staticmethod;

/// What a transformation may need to know of the module's surroundings.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Module-level names of this module that other modules of its project use: never
    /// renamed, moved or rebound.
    pub protected: HashSet<String>,
    /// The module belongs to a package (its folder has `__init__.py`): a module written
    /// beside it is imported relatively.
    pub in_package: bool,
    /// Names of the modules already beside this one (`train` for `train.py`): a module
    /// written beside it takes a name none of them has.
    pub siblings: HashSet<String>,
}

/// One transformation.
pub struct Transformation {
    /// Its kebab-case name (the harness's table, `--transform`).
    pub name: &'static str,
    /// What it does, in one line.
    pub summary: &'static str,
    pub apply: fn(&str, &Context) -> Option<Rewrite>,
}

/// Every transformation, in the order of the report.
pub const ALL: &[Transformation] = &[
    Transformation { name: "neutral-names", summary: "every name the file binds renamed v1, f2, C3, a4", apply: rename::neutral },
    Transformation {
        name: "misleading-names",
        summary: "every name the file binds renamed to one that says the opposite role",
        apply: rename::misleading,
    },
    Transformation {
        name: "extract-loop-body",
        summary: "each `for` body moved into a module-level helper (free names in, assigned names out)",
        apply: extract::extract_loop_bodies,
    },
    Transformation {
        name: "static-method",
        summary: "each top-level function moved into a class as a @staticmethod, called `Helpers.f(...)`",
        apply: staticmethod::into_classes,
    },
    Transformation { name: "aliased-imports", summary: "every import bound under another name, every use renamed", apply: imports::alias },
    Transformation {
        name: "for-to-while",
        summary: "`for x in it:` as `while True:` with `next()` and `StopIteration`",
        apply: loops::for_to_while,
    },
    Transformation { name: "enumerate", summary: "`for x in it:` as `for _i, x in enumerate(it):`", apply: loops::enumerated },
    Transformation {
        name: "zip-count",
        summary: "`for x in it:` as `for x, _c in zip(it, itertools.count()):`",
        apply: loops::zipped,
    },
    Transformation {
        name: "dict-container",
        summary: "a name bound once to a call and called later kept in a dict: `_nets[\"m\"](x)`",
        apply: containers::in_dict,
    },
    Transformation {
        name: "list-container",
        summary: "a name bound once to a call and called later kept in a list: `_nets[0](x)`",
        apply: containers::in_list,
    },
    Transformation { name: "factory", summary: "that call made by a module-level factory `_make_v()`", apply: factory::local },
    Transformation {
        name: "factory-module",
        summary: "that factory in a sibling module `_factory.py`, imported",
        apply: factory::sibling,
    },
    Transformation { name: "gate-variable", summary: "`if <cond>:` as `_gate = <cond>` then `if _gate:`", apply: gates::gate_variable },
    Transformation { name: "if-true", summary: "each statement holding a call wrapped in `if True:`", apply: gates::if_true },
];

/// Looks a transformation up by name.
pub fn by_name(name: &str) -> Option<&'static Transformation> {
    ALL.iter().find(|t| t.name == name)
}

/// A parsed module with what every transformation asks of it.
pub(crate) struct Module<'s> {
    pub source: &'s str,
    pub tree: Tree,
    pub scopes: Scopes,
    pub fresh: std::cell::RefCell<FreshNames>,
    pub unit: String,
}

impl<'s> Module<'s> {
    /// `None` when the module does not parse cleanly: nothing is rewritten then.
    pub fn parse(source: &'s str) -> Option<Module<'s>> {
        let tree = memlint_python::parse_with(source, None);
        if tree.root_node().has_error() {
            return None;
        }
        let scopes = Scopes::new(source, &tree);
        let fresh = FreshNames::new(source, &tree);
        let unit = indent_unit(source, &tree);
        Some(Module { source, tree, scopes, fresh: std::cell::RefCell::new(fresh), unit })
    }

    /// A name used nowhere in the module (nor by an earlier call): `base`, `base2`, ...
    pub fn fresh(&self, base: &str) -> String {
        self.fresh.borrow_mut().take(base)
    }

    pub fn text(&self, node: Node) -> &'s str {
        &self.source[node.byte_range()]
    }

    pub fn root(&self) -> Node<'_> {
        self.tree.root_node()
    }

    /// Every node of `kind` in the module, in source order.
    pub fn nodes_of(&self, kind: &str) -> Vec<Node<'_>> {
        let mut found = Vec::new();
        descendants(self.root(), &mut |n| {
            if n.kind() == kind {
                found.push(n);
            }
        });
        found
    }

    /// The names listed in the module's `__all__` (exported: never renamed or moved).
    pub fn exported(&self) -> HashSet<String> {
        let mut names = HashSet::new();
        for child in named_children(self.root()) {
            let Some(assign) = child.named_child(0).filter(|a| child.kind() == "expression_statement" && a.kind() == "assignment") else {
                continue;
            };
            let Some(left) = assign.child_by_field_name("left") else { continue };
            if self.text(left) != "__all__" {
                continue;
            }
            if let Some(right) = assign.child_by_field_name("right") {
                descendants(right, &mut |n| {
                    if n.kind() == "string_content" {
                        names.insert(self.text(n).to_owned());
                    }
                });
            }
        }
        names
    }
}

/// Calls `f` on `node` and every node under it, in source order.
pub(crate) fn descendants<'t>(node: Node<'t>, f: &mut dyn FnMut(Node<'t>)) {
    f(node);
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        descendants(child, f);
    }
}

pub(crate) fn named_children(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

/// The nearest ancestor of `node` (itself included) of one of `kinds`.
pub(crate) fn ancestor<'t>(node: Node<'t>, kinds: &[&str]) -> Option<Node<'t>> {
    let mut at = Some(node);
    while let Some(n) = at {
        if kinds.contains(&n.kind()) {
            return Some(n);
        }
        at = n.parent();
    }
    None
}

/// The module-level statement that holds `node`.
pub(crate) fn top_level_statement(node: Node<'_>) -> Node<'_> {
    let mut at = node;
    while let Some(parent) = at.parent() {
        if parent.kind() == "module" {
            return at;
        }
        at = parent;
    }
    at
}

/// Where a statement may be added before everything else of the module: after leading
/// comments (a shebang, an encoding declaration), the docstring and `from __future__`
/// imports. Insert `"\n"` first when [`needs_newline_at`] says so.
pub(crate) fn module_insertion_point(module: &Module) -> usize {
    let mut at = 0;
    let mut seen_statement = false;
    for child in named_children(module.root()) {
        let docstring = !seen_statement
            && child.kind() == "expression_statement"
            && child.named_child(0).is_some_and(|s| matches!(s.kind(), "string" | "concatenated_string"));
        if child.kind() == "comment" || docstring || child.kind() == "future_import_statement" {
            seen_statement |= child.kind() != "comment";
            let end = crate::rewrite::line_end(module.source, child.end_byte());
            at = (end + 1).min(module.source.len());
        } else {
            break;
        }
    }
    at
}

/// Does text inserted at `at` need a newline before it (the end of a file without one)?
pub(crate) fn needs_newline_at(source: &str, at: usize) -> bool {
    at == source.len() && !source.is_empty() && !source.ends_with('\n')
}

