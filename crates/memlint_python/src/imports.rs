//! Names through imports: the dotted text of a name and what it qualifies to.

use tree_sitter::Node;

use crate::NodeExt;
use crate::semantic::*;

impl<'t> SemanticModel<'t> {
    /// `dotted` (as spelled at module level) through the module-level imports:
    /// `nn.DataParallel` -> `torch.nn.DataParallel`; `None` when its first part is not
    /// imported there.
    pub(crate) fn through_module_imports(&self, dotted: &str) -> Option<String> {
        let (first, rest) = dotted.split_once('.').map_or((dotted, None), |(f, r)| (f, Some(r)));
        let import = &self.imports[*self.module_imports.get(first)?];
        Some(match rest {
            Some(rest) => format!("{}.{rest}", import.qualified),
            None => import.qualified.clone(),
        })
    }

    /// The dotted text of a name expression (`a.b.c`), or `None` for anything else.
    pub fn dotted_name(&self, node: Node<'_>) -> Option<String> {
        crate::semantic::dotted(self.source(), node)
    }

    /// The fully qualified name a name expression refers to through the imports in
    /// scope: `th.cuda.empty_cache` -> `torch.cuda.empty_cache` after `import torch as th`.
    /// `None` when the first part is not imported.
    pub fn qualified_name(&self, node: Node<'t>) -> Option<String> {
        let key = crate::semantic::key(node);
        if let Some(name) = self.qualified_names.borrow().get(&key) {
            return name.clone();
        }
        let name = self.find_qualified_name(node);
        self.qualified_names.borrow_mut().insert(key, name.clone());
        name
    }

    fn find_qualified_name(&self, node: Node<'t>) -> Option<String> {
        let dotted = self.dotted_name(node)?;
        let (first, rest) = match dotted.split_once('.') {
            Some((f, r)) => (f, Some(r)),
            None => (dotted.as_str(), None),
        };
        let import = match self.lookup_import(first, node).filter(|_| !self.rebinds_an_import(first, node)) {
            Some(import) => import.to_owned(),
            None => match self.alias_by_assignment(first, node) {
                Some(alias) => alias,
                None => self.star_imported_library_name(first, node)?,
            },
        };
        Some(match rest {
            Some(rest) => format!("{}.{}", import, rest),
            None => import,
        })
    }

    /// Is the import `name` hidden at `at` by a later value bound to the same name (`import
    /// model` then `model = model.RNNModel()`: below it, `model` is the network)? A
    /// fallback bound in an `except` clause (`except ImportError: amp = None`) hides
    /// nothing: the import is what runs when it can.
    fn rebinds_an_import(&self, name: &str, at: Node<'t>) -> bool {
        let Some(binding) = self.binding_at(name, at) else { return false };
        if !matches!(binding.kind, BindingKind::Assign | BindingKind::AugAssign | BindingKind::LoopTarget | BindingKind::WithTarget) {
            return false;
        }
        !self.in_except_clause(binding.statement)
    }

    /// Is `node` inside an `except` clause (the fallback of a `try:`)?
    fn in_except_clause(&self, node: Node<'t>) -> bool {
        let mut current = self.parent(node);
        while let Some(p) = current {
            if matches!(p.kind_name(), "except_clause" | "except_group_clause") {
                return true;
            }
            current = self.parent(p);
        }
        false
    }

    /// A name bound nowhere in this module, brought by a star import of a project module
    /// that imports it from a library (`from model_3d import *` giving `nn`): what the
    /// project says it is (`torch.nn`).
    fn star_imported_library_name(&self, name: &str, at: Node<'t>) -> Option<String> {
        if self.star_imports.is_empty() || self.project.is_empty() || self.binding_at(name, at).is_some() || self.bindings_of(None, name).is_some() {
            return None;
        }
        if let Some(answer) = self.star_imported.borrow().get(name) {
            return answer.clone();
        }
        let answer = self.project.star_imported_external(name);
        self.star_imported.borrow_mut().insert(name.to_owned(), answer.clone());
        answer
    }

    /// A module-level alias made by assignment (`autocast = torch.cuda.amp.autocast`,
    /// `F = torch.nn.functional`): what it qualifies to, when the name is bound once at
    /// module level outside an `except` clause (the fallback of a `try:` import for old
    /// versions does not count) and not in the function that reads it.
    fn alias_by_assignment(&self, name: &str, at: Node<'t>) -> Option<String> {
        if self.enclosing_function(at).is_some_and(|f| self.bindings_of(Some(f.node.id()), name).is_some()) {
            return None;
        }
        if let Some(known) = self.module_aliases.borrow().get(name) {
            return known.clone();
        }
        let alias = self.module_alias(name);
        self.module_aliases.borrow_mut().insert(name.to_owned(), alias.clone());
        alias
    }

    /// [`Self::alias_by_assignment`] past the reading function's own bindings: what depends
    /// on the name alone.
    fn module_alias(&self, name: &str) -> Option<String> {
        let bindings = self.bindings_of(None, name)?;
        let primary: Vec<&Binding<'t>> = bindings.iter().filter(|b| !self.in_except_clause(b.statement)).collect();
        let [binding] = primary[..] else { return None };
        let value = unparenthesize(binding.value.filter(|_| binding.kind == BindingKind::Assign)?);
        if !matches!(value.kind_name(), "attribute" | "identifier") || self.text(value) == name {
            return None;
        }
        let dotted = self.dotted_name(value)?;
        let (first, rest) = dotted.split_once('.').map_or((dotted.as_str(), None), |(f, r)| (f, Some(r)));
        let import = self.lookup_import(first, value)?;
        Some(match rest {
            Some(rest) => format!("{import}.{rest}"),
            None => import.to_owned(),
        })
    }

    pub(crate) fn lookup_import(&self, local: &str, at: Node<'t>) -> Option<&str> {
        if !self.imported_names.contains(local) {
            // `from utils import *` re-exporting torch: an unbound `torch` is torch.
            if local == "torch" && self.has_star_import && self.bindings_of(None, local).is_none() {
                return Some("torch");
            }
            return None;
        }
        // Innermost function scopes first, then the module; function-local imports count;
        // in one scope, the last import wins.
        let mut best: Option<(usize, &Import)> = self.module_imports.get(local).map(|&i| (0, &self.imports[i]));
        let Some(candidates) = self.function_imports.get(local) else {
            return best.map(|(_, import)| import.qualified.as_str());
        };
        // The functions around `at`, outermost first.
        let scope = self.scope_of(at);
        let mut chain: Vec<ScopeId> = scope.into_iter().chain(self.outer_functions(scope)).map(Some).collect();
        chain.reverse();
        for import in candidates.iter().map(|&i| &self.imports[i]) {
            let Some(depth) = chain.iter().position(|s| *s == import.scope).map(|i| i + 1) else { continue };
            if best.map(|(d, _)| depth >= d).unwrap_or(true) {
                best = Some((depth, import));
            }
        }
        best.map(|(_, import)| import.qualified.as_str())
    }

    /// The name a module-level import binds `qualified` to (`th` after `import torch as th`).
    pub fn local_name_for(&self, qualified: &str) -> Option<&str> {
        self.imports
            .iter()
            .find(|i| i.scope.is_none() && i.qualified == qualified)
            .map(|i| i.local.as_str())
    }

    /// Every local name (in any scope) that an import binds to `qualified`
    /// (`L` for `from torch import load as L`).
    pub fn names_imported_as(&self, qualified: &str) -> Vec<&str> {
        self.imports.iter().filter(|i| i.qualified == qualified).map(|i| i.local.as_str()).collect()
    }

    /// Does the callee of `call` resolve to one of `names` (fully qualified)?
    pub fn call_resolves_to(&self, call: Node<'t>, names: &[&str]) -> Option<String> {
        let callee = self.field(call, "function")?;
        let qualified = self.qualified_name(callee)?;
        names.iter().any(|n| *n == qualified).then_some(qualified)
    }

    /// `Module` after `from torch.nn import *`: a name a star import of a torch module
    /// binds, when that module has it (only torch's own modules are known here).
    pub(crate) fn through_star_import_of_torch(&self, spelled: &str) -> Option<String> {
        if spelled.contains('.') {
            return None;
        }
        self.star_imports
            .iter()
            .filter(|m| m.as_str() == "torch" || m.starts_with("torch."))
            .map(|m| format!("{m}.{spelled}"))
            .find(|q| crate::library::library_module_class(q))
    }
}
