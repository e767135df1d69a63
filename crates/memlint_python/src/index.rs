//! The model's pass over the tree's named nodes (`NamedNodes`, the one walk): what the
//! module defines, binds, calls and loops over, and the spans of its scopes (the binder's
//! raw material).

use tree_sitter::Node;

use crate::named_nodes::NamedNodes;
use crate::NodeExt;
use crate::semantic::*;

/// Spans that nest (start, end, node id), flattened: `(byte, innermost span there)` in byte
/// order, for a binary search, and for each span `(id, start, end, the span around it)`.
/// Sweeping the spans in start order with a stack of open ones gives, at each start and
/// end, the innermost one.
pub(crate) fn flatten_nested_spans(mut spans: Vec<(usize, usize, usize)>) -> (Vec<(usize, ScopeId)>, Vec<(usize, usize, usize, ScopeId)>) {
    spans.sort_unstable_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
    let mut segments = vec![(0, None)];
    let mut extents = Vec::with_capacity(spans.len());
    let mut open: Vec<(usize, usize)> = Vec::new();
    for &(start, end, id) in &spans {
        while let Some(&(top_end, _)) = open.last() {
            if top_end > start {
                break;
            }
            open.pop();
            segments.push((top_end, open.last().map(|&(_, id)| id)));
        }
        extents.push((id, start, end, open.last().map(|&(_, id)| id)));
        open.push((end, id));
        segments.push((start, Some(id)));
    }
    while let Some((top_end, _)) = open.pop() {
        segments.push((top_end, open.last().map(|&(_, id)| id)));
    }
    (segments, extents)
}

impl<'t> SemanticModel<'t> {
    /// Indexes the node at `at` (a named node) when it is of a kind asked for
    /// (`indexed_kinds`), with its kind id.
    pub(crate) fn index_node(&mut self, nodes: &NamedNodes<'t>, at: usize) {
        let kind = nodes.kind_id(at);
        // Every node but the root is named; the root is whatever node the walk began at.
        if self.indexed_kinds.get(kind as usize).copied().unwrap_or(false) && (at != 0 || nodes.node(0).is_named()) {
            self.indexed_nodes.push(nodes.node(at));
            self.indexed_node_kinds.push(kind);
        }
    }

    /// Indexes the nodes of the subtree at `at` the model does not otherwise collect
    /// (parameters, base classes, imports), in source order.
    pub(crate) fn index_subtree(&mut self, nodes: &NamedNodes<'t>, at: usize) {
        for i in nodes.subtree(at) {
            self.index_node(nodes, i);
        }
    }

    /// Indexes the children of the node at `at` other than `except` (a definition's body,
    /// which is collected), each with its subtree.
    pub(crate) fn index_children_except(&mut self, nodes: &NamedNodes<'t>, at: usize, except: Option<Node<'t>>) {
        if self.indexed_kinds.is_empty() {
            return;
        }
        for child in nodes.children(at) {
            if Some(nodes.node(child)) != except {
                self.index_subtree(nodes, child);
            }
        }
    }

    /// Collects what the node at `at` defines, binds and calls, stepping through the named
    /// nodes of the model's one walk of the tree.
    pub(crate) fn collect(&mut self, nodes: &NamedNodes<'t>, at: usize, scope: ScopeId, class: Option<&str>) {
        self.index_node(nodes, at);
        if !self.visit(nodes, at, scope, class) {
            return;
        }
        for child in nodes.children(at) {
            self.collect(nodes, child, scope, class);
        }
    }

    /// What `node` itself defines, binds and calls; false when it collected its children
    /// itself (definitions, imports). Kept out of [`Self::collect`] so that the recursion's
    /// frame stays small: deeply nested code must not overflow a thread's stack.
    #[inline(never)]
    pub(crate) fn visit(&mut self, nodes: &NamedNodes<'t>, at: usize, scope: ScopeId, class: Option<&str>) -> bool {
        let node = nodes.node(at);
        match nodes.kind(at) {
            "function_definition" => {
                let name = node
                    .field("name")
                    .map(|n| self.text(n).to_owned())
                    .unwrap_or_default();
                let parent = self.parent(node);
                let (decorators, outer) = match parent {
                    Some(p) if p.kind_name() == "decorated_definition" => (
                        self.named_children(p)
                            .into_iter()
                            .filter(|c| c.kind_name() == "decorator")
                            .filter_map(|d| d.named_child(0))
                            .collect(),
                        p,
                    ),
                    _ => (Vec::new(), node),
                };
                let function_name = self.field(node, "name").map(|n| self.text(n)).unwrap_or_default();
                self.add_binding(scope, function_name, node, None, BindingKind::Definition);
                self.functions.insert(
                    node.id(),
                    FunctionInfo { node, name, class: class.map(str::to_owned), decorators, outer },
                );
                let inner = Some(node.id());
                if let Some(params) = self.field(node, "parameters") {
                    for param in self.named_children(params) {
                        if let Some(ident) = parameter_name(param) {
                            self.add_binding(inner, self.text(ident), param, None, BindingKind::Parameter);
                        }
                    }
                }
                let body = self.field(node, "body");
                self.index_children_except(nodes, at, body);
                if let Some(body) = body.and_then(|b| nodes.child_with_id(at, b)) {
                    // Methods see their class only for `self` attribute bookkeeping.
                    self.collect(nodes, body, inner, class);
                }
                return false;
            }
            "class_definition" => {
                let name = node
                    .field("name")
                    .map(|n| self.text(n).to_owned())
                    .unwrap_or_default();
                let bases = node
                    .field("superclasses")
                    .map(|s| self.text(s).to_owned())
                    .unwrap_or_default();
                let base_names: Vec<String> = node
                    .field("superclasses")
                    .map(|s| self.named_children(s).into_iter().filter_map(|b| self.dotted_name(b)).collect())
                    .unwrap_or_default();
                let class_name = self.field(node, "name").map(|n| self.text(n)).unwrap_or_default();
                let local_bases = bases
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .filter(|b| self.classes.contains_key(b))
                    .map(str::to_owned)
                    .collect();
                // Decided once the imports are all known (`resolve_module_classes`).
                let (is_module, is_lightning) = (false, false);
                self.classes.insert(class_name, ClassInfo { is_module, is_lightning, bases: local_bases, spelled_bases: base_names, node });
                self.add_binding(scope, class_name, node, None, BindingKind::Definition);
                let body = self.field(node, "body");
                self.index_children_except(nodes, at, body);
                if let Some(body) = body.and_then(|b| nodes.child_with_id(at, b)) {
                    // The class body binds in the class's own scope: its names (class
                    // attributes, methods) are not seen by the methods nor outside.
                    self.local_scopes.push((node.start_byte(), node.end_byte(), node.id()));
                    self.collect(nodes, body, Some(node.id()), Some(&name));
                }
                return false;
            }
            "import_statement" | "import_from_statement" => {
                self.index_children_except(nodes, at, None);
                if node.kind_name() == "import_from_statement" && self.named_children(node).iter().any(|c| c.kind_name() == "wildcard_import") {
                    self.has_star_import = true;
                    if scope.is_none() {
                        let module = self.field(node, "module_name").map(|m| self.text(m).to_owned()).unwrap_or_default();
                        self.star_imports.push(module);
                    }
                }
                for (local, qualified) in import_bindings(node, self.source) {
                    self.imports.push(Import { scope, local: local.to_owned(), qualified });
                    self.add_binding(scope, local, node, None, BindingKind::Definition);
                }
                return false;
            }
            "assignment" => {
                if let Some(left) = self.field(node, "left") {
                    let value = self.field(node, "right");
                    let statement = self.parent(node).filter(|p| p.kind_name() == "expression_statement").unwrap_or(node);
                    self.bind_target(scope, left, statement, value, BindingKind::Assign);
                }
            }
            "augmented_assignment" => {
                if let Some(left) = self.field(node, "left") {
                    let value = self.field(node, "right");
                    let statement = self.parent(node).filter(|p| p.kind_name() == "expression_statement").unwrap_or(node);
                    self.bind_target(scope, left, statement, value, BindingKind::AugAssign);
                }
            }
            "for_statement" => {
                self.loops.push(node);
                if let Some(left) = self.field(node, "left") {
                    self.bind_target(scope, left, node, None, BindingKind::LoopTarget);
                }
            }
            // A comprehension's targets bind in the comprehension's own scope.
            "for_in_clause" => {
                if let (Some(left), Some(comprehension)) = (self.field(node, "left"), self.parent(node)) {
                    self.bind_target(Some(comprehension.id()), left, node, None, BindingKind::LoopTarget);
                }
            }
            "list_comprehension" | "set_comprehension" | "dictionary_comprehension" | "generator_expression" => {
                self.local_scopes.push((node.start_byte(), node.end_byte(), node.id()));
            }
            // A lambda's parameters bind in the lambda's own scope.
            "lambda" => {
                self.local_scopes.push((node.start_byte(), node.end_byte(), node.id()));
                // Defaults are evaluated outside the lambda: its parameters take effect
                // where its body starts.
                let body_start = self.field(node, "body").map(|b| b.start_byte()).unwrap_or(node.end_byte());
                if let Some(params) = self.field(node, "parameters") {
                    for param in self.named_children(params) {
                        let ident = match param.kind_name() {
                            "list_splat_pattern" | "dictionary_splat_pattern" => param.named_child(0),
                            _ => parameter_name(param),
                        };
                        if let Some(ident) = ident.filter(|i| i.kind_name() == "identifier") {
                            let binding = Binding { position: body_start, statement: param, value: None, kind: BindingKind::Parameter };
                            self.push_binding(Some(node.id()), self.text(ident), binding);
                        }
                    }
                }
            }
            "while_statement" => self.loops.push(node),
            "return_statement" => {
                if let (Some(function), true) = (scope, node.named_child_count() > 0) {
                    self.returns.entry(function).or_default().push(node);
                }
            }
            "identifier" => self.identifiers_by_name.entry(self.text(node)).or_default().push(node),
            "attribute" => {
                if let Some(attr) = self.field(node, "attribute") {
                    self.attributes_by_name.entry(self.text(attr)).or_default().push(node);
                }
            }
            "with_item" => {
                if let Some(value) = self.field(node, "value") {
                    if value.kind_name() == "as_pattern" {
                        if let Some(target) = self.field(value, "alias") {
                            let expr = value.named_child(0);
                            self.bind_target(scope, target, node, expr, BindingKind::WithTarget);
                        }
                    }
                }
            }
            "call" => {
                self.calls.push(node);
                if let Some(callee) = self.field(node, "function") {
                    let last = match callee.kind_name() {
                        "identifier" => Some(self.text(callee)),
                        "attribute" => self.field(callee, "attribute").map(|a| self.text(a)),
                        _ => None,
                    };
                    if let Some(last) = last {
                        if last == "enter_context" || last == "set_grad_enabled" {
                            let statement = self.parent(node).filter(|p| p.kind_name() == "expression_statement");
                            if let Some((statement, block)) = statement.and_then(|st| self.parent(st).map(|b| (st, b))) {
                                self.toggle_statements.entry(key(block)).or_default().push(statement);
                            }
                        }
                        self.calls_by_name.entry(last).or_default().push(node);
                    }
                }
            }
            _ => {}
        }
        true
    }

    pub(crate) fn bind_target(&mut self, scope: ScopeId, target: Node<'t>, statement: Node<'t>, value: Option<Node<'t>>, kind: BindingKind) {
        for leaf in target_leaves(target) {
            match leaf.kind_name() {
                "identifier" => self.add_binding(scope, self.text(leaf), statement, value, kind),
                "attribute" => {
                    if let (Some(obj), Some(attr), Some(value)) = (self.field(leaf, "object"), self.field(leaf, "attribute"), value) {
                        if self.text(obj) == "self" && kind == BindingKind::Assign {
                            self.self_attributes.entry(self.text(attr)).or_default().push(value);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    pub(crate) fn add_binding(&mut self, scope: ScopeId, name: &'t str, statement: Node<'t>, value: Option<Node<'t>>, kind: BindingKind) {
        // A loop or `with` target takes effect where its body starts.
        let position = match kind {
            // A comprehension's target is used before its `for` clause (`[m(x) for m in ms]`).
            BindingKind::LoopTarget if statement.kind_name() == "for_in_clause" => {
                self.parent(statement).map(|c| c.start_byte()).unwrap_or_else(|| statement.start_byte())
            }
            BindingKind::LoopTarget | BindingKind::WithTarget => statement
                .field("body")
                .or_else(|| self.parent(statement).and_then(|p| self.parent(p)).and_then(|w| self.field(w, "body")))
                .map(|b| b.start_byte())
                .unwrap_or_else(|| statement.start_byte()),
            _ => statement.start_byte(),
        };
        self.push_binding(scope, name, Binding { position, statement, value, kind });
    }

    pub(crate) fn push_binding(&mut self, scope: ScopeId, name: &'t str, binding: Binding<'t>) {
        self.bindings.entry(name).or_default().entry(scope).or_default().push(binding);
    }

    /// Which local classes are `torch.nn.Module` (and `LightningModule`) subclasses, from
    /// their bases resolved through the module's imports (`nn.Module` after `from torch
    /// import nn`) or local classes defined before them. (A base the project defines is
    /// asked of the project later, lazily: `is_module_class_at`.)
    pub(crate) fn resolve_module_classes(&mut self) {
        let mut order: Vec<(&'t str, usize)> = Vec::new();
        for (name, bindings) in &self.bindings {
            if let Some(by_scope) = bindings.get(&None) {
                for b in by_scope.iter().filter(|b| b.statement.kind_name() == "class_definition") {
                    order.push((name, b.position));
                }
            }
        }
        // Classes nested in functions or classes are decided too.
        let mut all: Vec<(&'t str, usize)> = self.classes.keys().map(|k| (*k, order.iter().find(|(n, _)| n == k).map(|(_, p)| *p).unwrap_or(usize::MAX))).collect();
        all.sort_by_key(|(name, position)| (*position, *name));
        for _ in 0..2 {
            for (name, _) in &all {
                let bases = self.classes[name].spelled_bases.clone();
                let mut module = false;
                let mut lightning = false;
                for base in &bases {
                    if let Some(local) = self.classes.get(base.as_str()).filter(|_| base != name) {
                        module |= local.is_module;
                        lightning |= local.is_lightning;
                        continue;
                    }
                    let qualified = self.through_module_imports(base).or_else(|| self.through_star_import_of_torch(base));
                    if let Some(q) = qualified {
                        module |= crate::library::library_module_class(&q);
                        lightning |= q.ends_with("LightningModule");
                    }
                }
                let info = self.classes.get_mut(name).expect("a collected class");
                info.is_module |= module;
                info.is_lightning |= lightning;
            }
        }
    }

    /// Builds `scope_segments` and `function_extents` from the functions' spans.
    pub(crate) fn index_scopes(&mut self) {
        let spans = self.functions.values().map(|f| (f.node.start_byte(), f.node.end_byte(), f.node.id())).collect();
        let (segments, extents) = flatten_nested_spans(spans);
        self.function_extents = extents.into_iter().map(|(id, _, end, outer)| (id, (end, outer))).collect();
        self.scope_segments = segments;
    }

    /// Builds `local_scope_segments` and `local_scope_extents` from `local_scopes`.
    pub(crate) fn index_local_scopes(&mut self) {
        let (segments, extents) = flatten_nested_spans(std::mem::take(&mut self.local_scopes));
        self.local_scope_extents = extents.into_iter().map(|(id, start, end, outer)| (id, (end, outer, start))).collect();
        self.local_scope_segments = segments;
    }
}

/// The names an `import` or `from ... import` statement binds, in order, each with what it
/// names: `import torch.nn` binds `torch` (to `torch`), `import torch.nn as nn` binds `nn`
/// (to `torch.nn`), `from torch.nn import functional as F` binds `F` (to
/// `torch.nn.functional`). A `*` import binds no name it can list.
pub fn import_bindings<'s>(import: Node<'_>, source: &'s str) -> Vec<(&'s str, String)> {
    let text = |n: Node<'_>| &source[n.byte_range()];
    let mut bound = Vec::new();
    if import.kind_name() == "import_statement" {
        for child in named_children(import) {
            match child.kind_name() {
                "dotted_name" => {
                    let first = text(child).split('.').next().unwrap_or("");
                    bound.push((first, first.to_owned()));
                }
                "aliased_import" => {
                    if let (Some(name), Some(alias)) = (child.field("name"), child.field("alias")) {
                        bound.push((text(alias), text(name).to_owned()));
                    }
                }
                _ => {}
            }
        }
        return bound;
    }
    let module = import.field("module_name").map(text).unwrap_or_default();
    let mut cursor = import.walk();
    let names: Vec<Node> = import.children_by_field_name("name", &mut cursor).collect();
    for child in names {
        let (name, local) = match child.kind_name() {
            "dotted_name" => (text(child), text(child)),
            "aliased_import" => match (child.field("name"), child.field("alias")) {
                (Some(n), Some(a)) => (text(n), text(a)),
                _ => continue,
            },
            _ => continue,
        };
        bound.push((local, crate::project::join_import(module, name)));
    }
    bound
}

/// The targets an assignment, `for` or `with` target stands for, in order: the pattern
/// containers (`a, (b, *c)`, `[a, b]`) and wrappers (`*c`, the `as` target) taken apart down
/// to what gets bound (an identifier, an attribute, a subscript).
pub fn target_leaves(target: Node<'_>) -> Vec<Node<'_>> {
    fn collect<'t>(target: Node<'t>, out: &mut Vec<Node<'t>>) {
        match target.kind_name() {
            "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple" | "list" | "parenthesized_expression" => {
                for child in named_children(target) {
                    collect(child, out);
                }
            }
            // `*rest`, and `with f() as x:` (the grammar wraps the target).
            "list_splat_pattern" | "as_pattern_target" => {
                if let Some(inner) = target.named_child(0) {
                    collect(inner, out);
                }
            }
            _ => out.push(target),
        }
    }
    let mut out = Vec::new();
    collect(target, &mut out);
    out
}
