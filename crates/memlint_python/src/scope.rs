//! Scopes and bindings: which function (or class body, lambda, comprehension) a node is
//! in, and which binding of a name a use sees.

use tree_sitter::Node;

use crate::NodeExt;
use crate::semantic::*;

impl<'t> SemanticModel<'t> {
    /// Every call that starts within `range`, in source order.
    pub fn calls_in(&self, range: std::ops::Range<usize>) -> &[Node<'t>] {
        within(&self.calls, range)
    }

    /// The calls of `name` (see [`Self::calls_named`]) that start within `range`, in
    /// source order.
    pub fn calls_named_in(&self, name: &str, range: std::ops::Range<usize>) -> &[Node<'t>] {
        within(self.calls_named(name), range)
    }

    /// The identifier nodes with text `name` that start within `range`, in source order
    /// (a binary search in the index built while collecting).
    pub fn identifiers_named_in(&self, name: &str, range: std::ops::Range<usize>) -> &[Node<'t>] {
        within(self.identifiers_by_name.get(name).map(Vec::as_slice).unwrap_or(&[]), range)
    }

    /// The `attribute` nodes whose last part is `attr` (`x.attr`) that start within
    /// `range`, in source order.
    pub fn attributes_named_in(&self, attr: &str, range: std::ops::Range<usize>) -> &[Node<'t>] {
        within(self.attributes_by_name.get(attr).map(Vec::as_slice).unwrap_or(&[]), range)
    }

    /// The innermost function around `node` (a `function_definition`), if any.
    pub fn enclosing_function(&self, node: Node<'t>) -> Option<&FunctionInfo<'t>> {
        self.scope_of(node).and_then(|id| self.functions.get(&id))
    }

    /// The classes, lambdas and comprehensions around `node` (not `node` itself) inside
    /// the function it runs in, innermost first: the scopes whose names it sees before
    /// its function's. A class around that function is not one of them (a method does
    /// not see its class's names).
    pub(crate) fn local_scopes_of(&self, node: Node<'t>) -> impl Iterator<Item = usize> + use<'_, 't> {
        let (start, end) = (node.start_byte(), node.end_byte());
        let mut scope = None;
        if !self.local_scope_extents.is_empty() {
            let at = self.local_scope_segments.partition_point(|&(byte, _)| byte <= start);
            scope = at.checked_sub(1).and_then(|i| self.local_scope_segments[i].1);
            while let Some(id) = scope {
                let (scope_end, outer, _) = self.local_scope_extents[&id];
                if id != node.id() && end <= scope_end {
                    break;
                }
                scope = outer;
            }
        }
        // Local scopes that start before the function are outside it.
        let function_start = self.enclosing_function(node).map(|f| f.node.start_byte()).unwrap_or(0);
        std::iter::successors(scope, move |id| self.local_scope_extents[id].1)
            .take_while(move |id| self.local_scope_extents[id].2 >= function_start)
    }

    /// The scope whose names `node` sees first: its innermost class body, lambda or
    /// comprehension, else its function, else the module.
    pub(crate) fn binding_scope_of(&self, node: Node<'t>) -> ScopeId {
        self.local_scopes_of(node).next().or_else(|| self.scope_of(node))
    }

    /// The functions around the function `scope` (by node id), innermost first; the
    /// module is not one of them.
    pub(crate) fn outer_functions(&self, scope: ScopeId) -> impl Iterator<Item = usize> + use<'_, 't> {
        std::iter::successors(scope.and_then(|id| self.function_extents[&id].1), move |id| self.function_extents[id].1)
    }

    /// The function `node` runs in (its nearest `function_definition` ancestor), or `None`
    /// at module level.
    pub(crate) fn scope_of(&self, node: Node<'t>) -> ScopeId {
        let (start, end) = (node.start_byte(), node.end_byte());
        let at = self.scope_segments.partition_point(|&(byte, _)| byte <= start);
        let mut scope = at.checked_sub(1).and_then(|i| self.scope_segments[i].1);
        // A definition is not its own scope; a node reaching past a function's end
        // (only in broken code) is not inside it.
        while let Some(id) = scope {
            let (function_end, outer) = self.function_extents[&id];
            if id != node.id() && end <= function_end {
                break;
            }
            scope = outer;
        }
        scope
    }

    /// The statements block that `node`'s scope runs in: the function body, or the module.
    pub fn scope_body(&self, node: Node<'t>) -> Node<'t> {
        self.enclosing_function(node)
            .and_then(|f| f.node.field("body"))
            .unwrap_or(self.root)
    }

    pub fn function(&self, def: Node<'t>) -> Option<&FunctionInfo<'t>> {
        self.functions.get(&def.id())
    }

    /// The functions and methods, in source order.
    pub fn functions(&self) -> impl Iterator<Item = &FunctionInfo<'t>> {
        self.functions_in_order.iter().map(|id| &self.functions[id])
    }

    pub(crate) fn bindings_of(&self, scope: ScopeId, name: &str) -> Option<&Vec<Binding<'t>>> {
        self.bindings.get(name).and_then(|by_scope| by_scope.get(&scope))
    }

    /// The binding of `name` in effect at `at` (the last one before it in the same scope,
    /// then the module scope).
    pub fn binding_at(&self, name: &str, at: Node<'t>) -> Option<&Binding<'t>> {
        let position = at.start_byte();
        let find = |scope: ScopeId| {
            self.bindings_of(scope, name).and_then(|bs| {
                // Sorted by position: start from the last binding at or before `at`.
                let before = bs.partition_point(|b| b.position <= position);
                bs[..before].iter().rev().find(|b| !self.binding_contains_use(b, at))
            })
        };
        // The class bodies, lambdas and comprehensions around `at` in its function,
        // innermost first: their names shadow the function's and are not seen outside.
        if let Some(binding) = self.local_scopes_of(at).find_map(|id| find(Some(id))) {
            return Some(binding);
        }
        let scope = self.scope_of(at);
        match find(scope) {
            Some(b) => Some(b),
            None if scope.is_some() => {
                // A name only assigned later in a function is still local, but the bindings
                // of the enclosing functions (a closure, a nested helper) and of the module
                // are visible anywhere in it (it runs after they are made): innermost first.
                let visible = |scope: ScopeId| self.bindings_of(scope, name).and_then(|bs| bs.iter().rev().find(|b| !self.binding_contains_use(b, at)));
                self.outer_functions(scope).find_map(|id| visible(Some(id))).or_else(|| visible(None))
            }
            None => None,
        }
    }

    /// `x = f(x)`: the use of `x` on the right refers to the binding before this one.
    pub(crate) fn binding_contains_use(&self, binding: &Binding<'t>, at: Node<'t>) -> bool {
        matches!(binding.kind, BindingKind::Assign | BindingKind::AugAssign) && contains(binding.statement, at)
    }

    /// Every binding of `name` in the scope of `at` (its lambda or comprehension, its
    /// function, or the module).
    pub fn bindings_in_scope(&self, name: &str, at: Node<'t>) -> &[Binding<'t>] {
        self.bindings_of(self.binding_scope_of(at), name).map(Vec::as_slice).unwrap_or(&[])
    }
}
