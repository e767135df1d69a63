//! Python's name binding, as far as the transformations need it: scopes (module,
//! functions, lambdas, class bodies, comprehensions), every identifier that is a name
//! (not an attribute, a keyword argument or a module path), whether it binds or reads,
//! and the symbol it resolves to by Python's rules.
//!
//! Rules followed: a name bound anywhere in a function is local to it unless declared
//! `global` / `nonlocal`; class bodies are not seen by the functions inside them;
//! decorators, defaults, annotations, base classes and a comprehension's first iterable
//! are evaluated in the enclosing scope; `:=` binds in the nearest scope that is not a
//! comprehension. A name read but bound nowhere in the file resolves to nothing (a
//! builtin, or a name a star import brings).
//!
//! `dynamic` is set when the file can reach names by their spelling at run time (`eval`,
//! `exec`, `locals()`, `globals()`, `vars()`), or uses syntax this binder does not model
//! (`match` patterns, type parameters): renaming such a file could change what it does.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use memlint_python::tree_sitter::{Node, Tree};

pub type ScopeId = usize;
pub type SymbolId = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeKind {
    Module,
    Function,
    Lambda,
    Class,
    Comprehension,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingKind {
    Assign,
    AugAssign,
    Annotation,
    Param,
    Import,
    Def,
    Class,
    For,
    With,
    Except,
    Del,
    Walrus,
    /// `global x` / `nonlocal x`: not a binding, but the name is the symbol's.
    Declare,
}

#[derive(Debug, Clone)]
pub struct Scope {
    pub kind: ScopeKind,
    /// The node that opens the scope (the module, a `function_definition`, ...).
    pub node: Range<usize>,
    pub parent: Option<ScopeId>,
    pub symbols: HashMap<String, SymbolId>,
    globals: HashSet<String>,
    nonlocals: HashSet<String>,
}

/// One identifier that names a variable.
#[derive(Debug, Clone)]
pub struct Occurrence {
    pub name: String,
    pub range: Range<usize>,
    /// The scope the identifier appears in.
    pub scope: ScopeId,
    /// What it resolves to (`None`: a builtin or a name bound nowhere in the file).
    pub symbol: Option<SymbolId>,
    /// It binds the name (and how).
    pub binding: Option<BindingKind>,
    /// It reads the name (a plain use, `x += ...`, `del x`).
    pub reads: bool,
    /// For a binding: the statement (or parameter, import, clause) that binds.
    pub binder: Range<usize>,
}

#[derive(Debug, Clone)]
pub struct Symbol {
    pub name: String,
    pub scope: ScopeId,
    pub occurrences: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct Scopes {
    pub scopes: Vec<Scope>,
    pub symbols: Vec<Symbol>,
    pub occurrences: Vec<Occurrence>,
    /// Names can be reached by their spelling, or syntax not modelled here is used.
    pub dynamic: bool,
    /// `from m import *` somewhere.
    pub star_import: bool,
}

struct Raw {
    name: String,
    /// The callee of a call without arguments (`vars()`).
    bare_call: bool,
    range: Range<usize>,
    scope: ScopeId,
    binding: Option<BindingKind>,
    reads: bool,
    binder: Range<usize>,
}

struct Binder<'s> {
    source: &'s str,
    scopes: Vec<Scope>,
    raw: Vec<Raw>,
    dynamic: bool,
    star_import: bool,
}

impl Scopes {
    pub fn new(source: &str, tree: &Tree) -> Scopes {
        let root = tree.root_node();
        let mut binder = Binder {
            source,
            scopes: vec![Scope {
                kind: ScopeKind::Module,
                node: root.byte_range(),
                parent: None,
                symbols: HashMap::new(),
                globals: HashSet::new(),
                nonlocals: HashSet::new(),
            }],
            raw: Vec::new(),
            dynamic: false,
            star_import: false,
        };
        binder.children(root, 0);
        binder.resolve()
    }

    pub fn symbol(&self, id: SymbolId) -> &Symbol {
        &self.symbols[id]
    }

    /// The occurrences of a symbol.
    pub fn occurrences_of(&self, id: SymbolId) -> impl Iterator<Item = &Occurrence> {
        self.symbols[id].occurrences.iter().map(|i| &self.occurrences[*i])
    }

    /// The bindings of a symbol (declarations excluded).
    pub fn bindings_of(&self, id: SymbolId) -> impl Iterator<Item = &Occurrence> {
        self.occurrences_of(id).filter(|o| o.binding.is_some_and(|b| b != BindingKind::Declare))
    }

    /// The symbol of the identifier at `range`, if it names one.
    pub fn symbol_at(&self, range: Range<usize>) -> Option<SymbolId> {
        self.occurrences.iter().find(|o| o.range == range).and_then(|o| o.symbol)
    }

    /// The innermost scope whose node contains `offset`.
    pub fn scope_at(&self, offset: usize) -> ScopeId {
        let mut best = 0;
        for (id, scope) in self.scopes.iter().enumerate() {
            if scope.node.start <= offset && offset < scope.node.end && scope.node.len() <= self.scopes[best].node.len() {
                best = id;
            }
        }
        best
    }

    /// The scope a function, lambda, class or comprehension node opens.
    pub fn scope_of_node(&self, node: Range<usize>) -> Option<ScopeId> {
        self.scopes.iter().position(|s| s.node == node)
    }

    /// Is `inner` the scope `outer` or nested in it?
    pub fn is_within(&self, inner: ScopeId, outer: ScopeId) -> bool {
        let mut at = Some(inner);
        while let Some(s) = at {
            if s == outer {
                return true;
            }
            at = self.scopes[s].parent;
        }
        false
    }

    /// Is some symbol of the module named `name`, or does some scope declare it global?
    pub fn module_symbol(&self, name: &str) -> Option<SymbolId> {
        self.scopes[0].symbols.get(name).copied()
    }
}

impl<'s> Binder<'s> {
    fn text(&self, node: Node) -> &'s str {
        &self.source[node.byte_range()]
    }

    fn push_scope(&mut self, kind: ScopeKind, node: Node, parent: ScopeId) -> ScopeId {
        self.scopes.push(Scope {
            kind,
            node: node.byte_range(),
            parent: Some(parent),
            symbols: HashMap::new(),
            globals: HashSet::new(),
            nonlocals: HashSet::new(),
        });
        self.scopes.len() - 1
    }

    fn record(&mut self, node: Node, scope: ScopeId, binding: Option<BindingKind>, reads: bool, binder: Range<usize>) {
        let bare_call = node.parent().is_some_and(|p| {
            p.kind() == "call"
                && p.child_by_field_name("function").is_some_and(|f| f.id() == node.id())
                && p.child_by_field_name("arguments").is_some_and(|a| a.named_child_count() == 0)
        });
        self.raw.push(Raw { name: self.text(node).to_owned(), bare_call, range: node.byte_range(), scope, binding, reads, binder });
    }

    /// The nearest scope that is not a comprehension (where `:=` binds).
    fn walrus_scope(&self, mut scope: ScopeId) -> ScopeId {
        while self.scopes[scope].kind == ScopeKind::Comprehension {
            scope = self.scopes[scope].parent.unwrap_or(0);
        }
        scope
    }

    fn children(&mut self, node: Node, scope: ScopeId) {
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.children(&mut cursor).collect();
        for child in kids {
            self.visit(child, scope);
        }
    }

    fn visit(&mut self, node: Node, scope: ScopeId) {
        match node.kind() {
            "identifier" => self.record(node, scope, None, true, node.byte_range()),
            "attribute" => {
                if let Some(object) = node.child_by_field_name("object") {
                    self.visit(object, scope);
                }
            }
            "keyword_argument" => {
                if let Some(value) = node.child_by_field_name("value") {
                    self.visit(value, scope);
                }
            }
            "function_definition" => self.function(node, scope),
            "class_definition" => self.class(node, scope),
            "lambda" => self.lambda(node, scope),
            "list_comprehension" | "set_comprehension" | "dictionary_comprehension" | "generator_expression" => {
                self.comprehension(node, scope)
            }
            "assignment" => self.assignment(node, scope),
            "augmented_assignment" => {
                let binder = statement_range(node);
                if let Some(left) = node.child_by_field_name("left") {
                    if left.kind() == "identifier" {
                        self.record(left, scope, Some(BindingKind::AugAssign), true, binder);
                    } else {
                        self.visit(left, scope);
                    }
                }
                if let Some(right) = node.child_by_field_name("right") {
                    self.visit(right, scope);
                }
            }
            "for_statement" => {
                if let Some(right) = node.child_by_field_name("right") {
                    self.visit(right, scope);
                }
                if let Some(left) = node.child_by_field_name("left") {
                    self.target(left, scope, BindingKind::For, node.byte_range());
                }
                for field in ["body", "alternative"] {
                    if let Some(child) = node.child_by_field_name(field) {
                        self.visit(child, scope);
                    }
                }
            }
            "as_pattern" => {
                let kind = match node.parent().map(|p| p.kind()) {
                    Some("except_clause") | Some("except_group_clause") => BindingKind::Except,
                    _ => BindingKind::With,
                };
                let binder = node.parent().map_or(node.byte_range(), |p| p.byte_range());
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in kids {
                    if child.kind() == "as_pattern_target" {
                        let mut c2 = child.walk();
                        let targets: Vec<Node> = child.named_children(&mut c2).collect();
                        for t in targets {
                            self.target(t, scope, kind, binder.clone());
                        }
                    } else {
                        self.visit(child, scope);
                    }
                }
            }
            "import_statement" => {
                let mut cursor = node.walk();
                let names: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
                for name in names {
                    match name.kind() {
                        "dotted_name" => {
                            if let Some(first) = name.named_child(0) {
                                self.record(first, scope, Some(BindingKind::Import), false, node.byte_range());
                            }
                        }
                        "aliased_import" => {
                            if let Some(alias) = name.child_by_field_name("alias") {
                                self.record(alias, scope, Some(BindingKind::Import), false, node.byte_range());
                            }
                        }
                        _ => {}
                    }
                }
            }
            "import_from_statement" => {
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in kids {
                    if child.kind() == "wildcard_import" {
                        self.star_import = true;
                    }
                }
                let mut cursor = node.walk();
                let names: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
                for name in names {
                    match name.kind() {
                        "dotted_name" => {
                            if let Some(last) = name.named_child(name.named_child_count().saturating_sub(1)) {
                                self.record(last, scope, Some(BindingKind::Import), false, node.byte_range());
                            }
                        }
                        "aliased_import" => {
                            if let Some(alias) = name.child_by_field_name("alias") {
                                self.record(alias, scope, Some(BindingKind::Import), false, node.byte_range());
                            }
                        }
                        _ => {}
                    }
                }
            }
            "future_import_statement" => {}
            "global_statement" | "nonlocal_statement" => {
                let global = node.kind() == "global_statement";
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in kids {
                    if child.kind() == "identifier" {
                        let name = self.text(child).to_owned();
                        if global {
                            self.scopes[scope].globals.insert(name);
                        } else {
                            self.scopes[scope].nonlocals.insert(name);
                        }
                        self.record(child, scope, Some(BindingKind::Declare), false, node.byte_range());
                    }
                }
            }
            "delete_statement" => {
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in kids {
                    self.deleted(child, scope, node.byte_range());
                }
            }
            "named_expression" => {
                if let Some(value) = node.child_by_field_name("value") {
                    self.visit(value, scope);
                }
                if let Some(name) = node.child_by_field_name("name") {
                    let target = self.walrus_scope(scope);
                    self.record(name, target, Some(BindingKind::Walrus), false, node.byte_range());
                }
            }
            // (`type_parameter` is also the `[int]` of an annotation `Optional[int]`: not
            // dynamic; PEP 695 parameters are the `type_parameters` field of a definition.)
            "match_statement" | "type_alias_statement" | "exec_statement" => {
                self.dynamic = true;
                self.children(node, scope);
            }
            "dotted_name" => {
                // Outside imports: a decorator's or a pattern's dotted name reads its first part.
                if let Some(first) = node.named_child(0) {
                    self.visit(first, scope);
                }
            }
            _ => self.children(node, scope),
        }
    }

    fn deleted(&mut self, node: Node, scope: ScopeId, binder: Range<usize>) {
        match node.kind() {
            "identifier" => self.record(node, scope, Some(BindingKind::Del), true, binder),
            "expression_list" | "tuple" | "list" | "parenthesized_expression" => {
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in kids {
                    self.deleted(child, scope, binder.clone());
                }
            }
            _ => self.visit(node, scope),
        }
    }

    fn assignment(&mut self, node: Node, scope: ScopeId) {
        let binder = statement_range(node);
        if let Some(right) = node.child_by_field_name("right") {
            self.visit(right, scope);
        }
        if let Some(ty) = node.child_by_field_name("type") {
            self.visit(ty, scope);
        }
        if let Some(left) = node.child_by_field_name("left") {
            let kind = if node.child_by_field_name("right").is_none() { BindingKind::Annotation } else { BindingKind::Assign };
            self.target(left, scope, kind, binder);
        }
    }

    /// An assignment target: names in it bind; attributes and subscripts read their parts.
    fn target(&mut self, node: Node, scope: ScopeId, kind: BindingKind, binder: Range<usize>) {
        match node.kind() {
            "identifier" => self.record(node, scope, Some(kind), false, binder),
            "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list" | "expression_list" | "parenthesized_expression"
            | "list_splat_pattern" | "list_splat" => {
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in kids {
                    self.target(child, scope, kind, binder.clone());
                }
            }
            _ => self.visit(node, scope),
        }
    }

    fn parameters(&mut self, params: Node, outer: ScopeId, inner: ScopeId) {
        let mut cursor = params.walk();
        let kids: Vec<Node> = params.named_children(&mut cursor).collect();
        for param in kids {
            let binder = param.byte_range();
            match param.kind() {
                "identifier" => self.record(param, inner, Some(BindingKind::Param), false, binder),
                "default_parameter" | "typed_default_parameter" => {
                    for field in ["type", "value"] {
                        if let Some(child) = param.child_by_field_name(field) {
                            self.visit(child, outer);
                        }
                    }
                    if let Some(name) = param.child_by_field_name("name") {
                        self.parameter_name(name, inner, binder);
                    }
                }
                "typed_parameter" => {
                    if let Some(ty) = param.child_by_field_name("type") {
                        self.visit(ty, outer);
                    }
                    if let Some(name) = param.named_child(0) {
                        self.parameter_name(name, inner, binder);
                    }
                }
                "list_splat_pattern" | "dictionary_splat_pattern" | "tuple_pattern" => self.parameter_name(param, inner, binder),
                _ => {}
            }
        }
    }

    fn parameter_name(&mut self, node: Node, inner: ScopeId, binder: Range<usize>) {
        match node.kind() {
            "identifier" => self.record(node, inner, Some(BindingKind::Param), false, binder),
            _ => {
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in kids {
                    self.parameter_name(child, inner, binder.clone());
                }
            }
        }
    }

    fn function(&mut self, node: Node, scope: ScopeId) {
        if node.child_by_field_name("type_parameters").is_some() {
            self.dynamic = true;
        }
        let inner = self.push_scope(ScopeKind::Function, node, scope);
        if let Some(params) = node.child_by_field_name("parameters") {
            self.parameters(params, scope, inner);
        }
        if let Some(ret) = node.child_by_field_name("return_type") {
            self.visit(ret, scope);
        }
        if let Some(name) = node.child_by_field_name("name") {
            let binder = node.parent().filter(|p| p.kind() == "decorated_definition").unwrap_or(node).byte_range();
            self.record(name, scope, Some(BindingKind::Def), false, binder);
        }
        if let Some(body) = node.child_by_field_name("body") {
            self.visit(body, inner);
        }
    }

    fn class(&mut self, node: Node, scope: ScopeId) {
        if node.child_by_field_name("type_parameters").is_some() {
            self.dynamic = true;
        }
        if let Some(bases) = node.child_by_field_name("superclasses") {
            self.visit(bases, scope);
        }
        let inner = self.push_scope(ScopeKind::Class, node, scope);
        if let Some(name) = node.child_by_field_name("name") {
            let binder = node.parent().filter(|p| p.kind() == "decorated_definition").unwrap_or(node).byte_range();
            self.record(name, scope, Some(BindingKind::Class), false, binder);
        }
        if let Some(body) = node.child_by_field_name("body") {
            self.visit(body, inner);
        }
    }

    fn lambda(&mut self, node: Node, scope: ScopeId) {
        let inner = self.push_scope(ScopeKind::Lambda, node, scope);
        if let Some(params) = node.child_by_field_name("parameters") {
            self.parameters(params, scope, inner);
        }
        if let Some(body) = node.child_by_field_name("body") {
            self.visit(body, inner);
        }
    }

    fn comprehension(&mut self, node: Node, scope: ScopeId) {
        let inner = self.push_scope(ScopeKind::Comprehension, node, scope);
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.named_children(&mut cursor).collect();
        let mut first = true;
        for child in kids {
            if child.kind() == "for_in_clause" {
                if let Some(right) = child.child_by_field_name("right") {
                    self.visit(right, if first { scope } else { inner });
                }
                first = false;
                if let Some(left) = child.child_by_field_name("left") {
                    self.target(left, inner, BindingKind::For, child.byte_range());
                }
            } else {
                self.visit(child, inner);
            }
        }
    }

    fn resolve(self) -> Scopes {
        let Binder { source: _, mut scopes, raw, mut dynamic, star_import } = self;
        let bound: HashSet<(ScopeId, String)> =
            raw.iter().filter(|r| r.binding.is_some_and(|b| b != BindingKind::Declare)).map(|r| (r.scope, r.name.clone())).collect();
        // Where each binding goes.
        let binding_scope = |scopes: &Vec<Scope>, name: &str, scope: ScopeId| -> ScopeId {
            if scopes[scope].globals.contains(name) {
                return 0;
            }
            if scopes[scope].nonlocals.contains(name) {
                let mut at = scopes[scope].parent;
                while let Some(s) = at {
                    if matches!(scopes[s].kind, ScopeKind::Function | ScopeKind::Lambda)
                        && !scopes[s].globals.contains(name)
                        && bound.contains(&(s, name.to_owned()))
                    {
                        return s;
                    }
                    at = scopes[s].parent;
                }
                return scope;
            }
            scope
        };
        let mut symbols: Vec<Symbol> = Vec::new();
        for r in &raw {
            if r.binding.is_some_and(|b| b != BindingKind::Declare) {
                let s = binding_scope(&scopes, &r.name, r.scope);
                if !scopes[s].symbols.contains_key(&r.name) {
                    symbols.push(Symbol { name: r.name.clone(), scope: s, occurrences: Vec::new() });
                    scopes[s].symbols.insert(r.name.clone(), symbols.len() - 1);
                }
            }
        }
        let mut occurrences = Vec::with_capacity(raw.len());
        for r in raw {
            let symbol = if r.binding.is_some() {
                if r.binding == Some(BindingKind::Declare) {
                    let s = binding_scope(&scopes, &r.name, r.scope);
                    if s == r.scope && !scopes[r.scope].globals.contains(&r.name) {
                        None
                    } else {
                        scopes[s].symbols.get(&r.name).copied()
                    }
                } else {
                    let s = binding_scope(&scopes, &r.name, r.scope);
                    scopes[s].symbols.get(&r.name).copied()
                }
            } else {
                lookup(&scopes, &r.name, r.scope)
            };
            if symbol.is_none() && r.binding.is_none() {
                match r.name.as_str() {
                    "eval" | "exec" | "locals" | "globals" => dynamic = true,
                    // `vars(obj)` is `obj.__dict__`; only `vars()` reads the scope.
                    "vars" if r.bare_call => dynamic = true,
                    _ => {}
                }
            }
            let id = occurrences.len();
            if let Some(s) = symbol {
                symbols[s].occurrences.push(id);
            }
            occurrences.push(Occurrence {
                name: r.name,
                range: r.range,
                scope: r.scope,
                symbol,
                binding: r.binding,
                reads: r.reads,
                binder: r.binder,
            });
        }
        Scopes { scopes, symbols, occurrences, dynamic, star_import }
    }
}

/// The symbol a name read in `scope` resolves to.
fn lookup(scopes: &[Scope], name: &str, scope: ScopeId) -> Option<SymbolId> {
    if scopes[scope].globals.contains(name) {
        return scopes[0].symbols.get(name).copied();
    }
    if let Some(s) = scopes[scope].symbols.get(name) {
        return Some(*s);
    }
    let mut at = scopes[scope].parent;
    while let Some(s) = at {
        if scopes[s].kind != ScopeKind::Class {
            if let Some(id) = scopes[s].symbols.get(name) {
                return Some(*id);
            }
        }
        at = scopes[s].parent;
    }
    None
}

/// The statement an assignment belongs to (chained assignments nest).
fn statement_range(node: Node) -> Range<usize> {
    let mut at = node;
    while let Some(parent) = at.parent() {
        if matches!(parent.kind(), "assignment" | "augmented_assignment" | "expression_statement") {
            at = parent;
        } else {
            break;
        }
    }
    at.byte_range()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each name occurrence: `name@line:col -> scope-of-symbol (kind)`.
    fn show(source: &str) -> String {
        let parsed = memlint_python::parse(source);
        let scopes = Scopes::new(source, &parsed.tree);
        let mut out = String::new();
        for o in &scopes.occurrences {
            let row = source[..o.range.start].matches('\n').count() + 1;
            let target = match o.symbol {
                Some(s) => {
                    let scope = &scopes.scopes[scopes.symbols[s].scope];
                    format!("{:?}@{}", scope.kind, source[..scope.node.start].matches('\n').count() + 1)
                }
                None => "-".to_owned(),
            };
            let how = match o.binding {
                Some(b) => format!("{b:?}"),
                None => "read".to_owned(),
            };
            out.push_str(&format!("{}@{} {} -> {}\n", o.name, row, how, target));
        }
        if scopes.dynamic {
            out.push_str("dynamic\n");
        }
        out
    }

    #[test]
    fn functions_classes_comprehensions_and_declarations() {
        let source = "import torch.nn as nn\nx = 1\nclass A(nn.Module):\n    y = x\n    def f(self, z=y):\n        global x\n        x = [x for x in range(z)]\n        return y\n\ndef g(a):\n    b = lambda c: a + c\n    def h():\n        nonlocal a\n        a += 1\n    return (w := b(1))\n";
        expect_test::expect![[r#"
            nn@1 Import -> Module@1
            x@2 Assign -> Module@1
            nn@3 read -> Module@1
            A@3 Class -> Module@1
            x@4 read -> Module@1
            y@4 Assign -> Class@3
            self@5 Param -> Function@5
            y@5 read -> Class@3
            z@5 Param -> Function@5
            f@5 Def -> Class@3
            x@6 Declare -> Module@1
            x@7 read -> Comprehension@7
            range@7 read -> -
            z@7 read -> Function@5
            x@7 For -> Comprehension@7
            x@7 Assign -> Module@1
            y@8 read -> -
            a@10 Param -> Function@10
            g@10 Def -> Module@1
            c@11 Param -> Lambda@11
            a@11 read -> Function@10
            c@11 read -> Lambda@11
            b@11 Assign -> Function@10
            h@12 Def -> Function@10
            a@13 Declare -> Function@10
            a@14 AugAssign -> Function@10
            b@15 read -> Function@10
            w@15 Walrus -> Function@10
        "#]]
        .assert_eq(&show(source));
    }

    #[test]
    fn eval_and_locals_make_a_file_dynamic() {
        assert!(show("def f(x):\n    return eval('x')\n").ends_with("dynamic\n"));
        assert!(!show("def f(eval):\n    return eval('x')\n").ends_with("dynamic\n"), "a parameter named eval is not the builtin");
        assert!(show("def f():\n    return vars()\n").ends_with("dynamic\n"));
        assert!(!show("def f(args):\n    return vars(args)\n").ends_with("dynamic\n"), "vars(obj) reads an object, not the scope");
        assert!(!show("def f(x: Optional[int] = None) -> Dict[str, int]:\n    pass\n").ends_with("dynamic\n"), "annotations");
    }
}
