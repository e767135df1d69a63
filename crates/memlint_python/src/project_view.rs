//! What the project around the module says: imported names' nature, and callers of this
//! module's functions in other modules (see `project.rs`).

use tree_sitter::Node;

use crate::NodeExt;
use crate::semantic::*;
use crate::lexicon::*;

impl<'t> SemanticModel<'t> {
    /// What the project says a name is, as this module spells it at module level
    /// (`G`, `models.G`): through the module's imports, else (a name the module does
    /// not bind) its star imports.
    pub fn project_symbol_spelled(&self, spelled: &str) -> Option<crate::Symbol> {
        if self.project.is_empty() {
            return None;
        }
        let qualified = match self.through_module_imports(spelled) {
            Some(qualified) => qualified,
            None if !self.star_imports.is_empty() && !spelled.contains('.') => spelled.to_owned(),
            None => return None,
        };
        self.project_symbol(&qualified)
    }

    /// What the project says `qualified` (through this module's imports) is.
    pub fn project_symbol(&self, qualified: &str) -> Option<crate::Symbol> {
        if self.project.is_empty() || qualified.starts_with("torch.") || qualified == "torch" {
            return None;
        }
        if let Some(answer) = self.project_symbols.borrow().get(qualified) {
            return answer.clone();
        }
        let answer = self.project.symbol(qualified);
        self.project_symbols.borrow_mut().insert(qualified.to_owned(), answer.clone());
        answer
    }

    /// The project's answer for the callee of a call (an imported name, or a name the
    /// module does not bind after a star import).
    pub fn project_callee(&self, call: Node<'t>) -> Option<crate::Symbol> {
        if self.project.is_empty() {
            return None;
        }
        let callee = self.field(call, "function")?;
        match self.qualified_name(callee) {
            Some(q) => self.project_symbol(&q),
            None if callee.kind_name() == "identifier" && !self.star_imports.is_empty() => {
                let name = self.text(callee);
                if self.binding_at(name, call).is_some() {
                    return None;
                }
                self.project_symbol(name)
            }
            None => None,
        }
    }

    /// What calling a project name returns, when the project knows: a module instance
    /// (a `torch.nn.Module` subclass, or a factory returning one), or nothing the rules
    /// care about (another class: a constructor call is not a forward pass).
    pub(crate) fn project_call_kind(&self, call: Node<'t>, name: &str) -> Option<ValueKind> {
        if self.project.is_empty() {
            return None;
        }
        // Only a value that is bound can be called later as a network (`g = Generator()`,
        // `return build()`, `x = factory().cuda()`): calls elsewhere (arguments, terms)
        // need not read other modules.
        // And a name bound to a network is called somewhere (`g(z)`, `self.g(z)`).
        let mut at = call;
        let bound = loop {
            match self.parent(at).map(|p| (p, p.kind_name())) {
                Some((p, "attribute" | "call" | "parenthesized_expression")) if p.kind_name() != "call" || self.field(p, "function").map(|f| f.id()) == Some(at.id()) => at = p,
                // A branch of `a if c else b` (not its condition) is bound as the whole is.
                Some((p, "conditional_expression")) if p.named_child(1).map(|c| c.id()) != Some(at.id()) => at = p,
                Some((p, "assignment")) => {
                    let target = self.field(p, "left").and_then(|l| match l.kind_name() {
                        "identifier" => Some(l),
                        "attribute" => self.field(l, "attribute"),
                        _ => None,
                    });
                    // Called later (`g(z)`), or used otherwise (`g.forward(z)`,
                    // `g.eval()`): what the project builds decides.
                    break target.is_some() || self.field(p, "left").is_some_and(|l| matches!(l.kind_name(), "pattern_list" | "tuple_pattern"));
                }
                Some((_, "return_statement" | "expression_list" | "list" | "tuple" | "pattern_list")) => break true,
                _ => break false,
            }
        };
        if !bound {
            return None;
        }
        match self.project_callee(call)? {
            crate::Symbol::Class { is_module: true, .. } => {
                Some(if class_name_says_loss(name) { ValueKind::Loss } else { ValueKind::Model })
            }
            crate::Symbol::Class { is_module: false, .. } => Some(ValueKind::Unknown),
            crate::Symbol::Function { returns: Some(returned), .. } => Some(match returned {
                crate::Returned::Network | crate::Returned::FrozenNetwork => ValueKind::Model,
                crate::Returned::Loss => ValueKind::Loss,
                crate::Returned::Optimizer => ValueKind::Optimizer,
                crate::Returned::Scaler => ValueKind::Scaler,
                crate::Returned::Loader => ValueKind::DataLoader,
            }),
            crate::Symbol::Function { returns_module: true, .. } => Some(ValueKind::Model),
            _ => None,
        }
    }

    /// Does `node` run with gradients disabled because the top-level function around it,
    /// which this module never calls, is called by the project's other modules only with
    /// gradients disabled? Asked separately from [`Self::grad_context`] (by the rules, for
    /// a finding about to be reported), as the answer may read other modules.
    pub fn grad_disabled_by_callers_elsewhere(&self, node: Node<'t>) -> Option<String> {
        if self.project.is_empty() {
            return None;
        }
        let mut current = self.parent(node);
        let mut outermost = None;
        while let Some(n) = current {
            match n.kind_name() {
                "function_definition" => outermost = Some(n),
                // A method: `external_no_grad` asks only for those of top-level classes.
                "class_definition" => break,
                _ => {}
            }
            current = self.parent(n);
        }
        self.external_no_grad(outermost?)
    }

    /// How other modules of the project name the function `info`: `name` for a top-level
    /// function, `Class.method` for a method of a top-level class; `None` for others.
    pub(crate) fn name_elsewhere(&self, info: &FunctionInfo<'t>) -> Option<String> {
        let at_module_level = |n: Node<'t>| self.parent(n).map(|p| p.kind_name() == "module").unwrap_or(false);
        match &info.class {
            None if at_module_level(info.outer) => Some(info.name.clone()),
            // A method directly in the body of a top-level class.
            Some(class) => {
                let class_node = self.parent(info.outer).and_then(|body| self.parent(body)).filter(|c| c.kind_name() == "class_definition");
                let class_outer = class_node.map(|c| self.parent(c).filter(|p| p.kind_name() == "decorated_definition").unwrap_or(c));
                class_outer.filter(|c| at_module_level(*c)).map(|_| format!("{class}.{}", info.name))
            }
            None => None,
        }
    }

    /// Do other modules of the project call the function `def` (a top-level function, or a
    /// method of a top-level class on names holding an instance)? `false` without a project.
    pub fn called_from_other_modules(&self, def: Node<'t>) -> bool {
        if self.project.is_empty() {
            return false;
        }
        let Some(info) = self.functions.get(&def.id()) else { return false };
        self.name_elsewhere(info).is_some_and(|name| !self.project.external_calls(&name).is_empty())
    }

    /// For a top-level function this module never calls, or a method of a top-level class
    /// this module never calls a method of that name on: gradients are disabled in it when
    /// the project's other modules call it (a method: on names holding an instance of the
    /// class), and only with gradients disabled.
    pub(crate) fn external_no_grad(&self, def: Node<'t>) -> Option<String> {
        if self.project.is_empty() {
            return None;
        }
        if let Some(answer) = self.external_no_grad.borrow().get(&def.id()) {
            return answer.clone();
        }
        let info = self.functions.get(&def.id())?;
        let asked = self.name_elsewhere(info);
        let is_method = info.class.is_some();
        let called_here = self.calls_named(&info.name).iter().any(|c| {
            let kind = c.field("function").map(|f| f.kind_name());
            if is_method { kind == Some("attribute") } else { kind == Some("identifier") }
        });
        let answer = if let (Some(asked), false) = (asked, called_here) {
            let calls = self.project.external_calls(&asked);
            (!calls.is_empty() && calls.iter().all(|disabled| *disabled))
                .then(|| "only called with gradients disabled (in other modules of the project)".to_owned())
        } else {
            None
        };
        self.external_no_grad.borrow_mut().insert(def.id(), answer.clone());
        answer
    }

    /// The calls of the function `def` (a top-level function, or a method of a top-level
    /// class) in other modules of the project: for each, whether its result may reach a
    /// backward pass or leave the caller. Empty without a project or such calls.
    pub fn external_results_kept(&self, def: Node<'t>) -> Vec<bool> {
        if self.project.is_empty() {
            return Vec::new();
        }
        let Some(info) = self.functions.get(&def.id()) else { return Vec::new() };
        match self.name_elsewhere(info) {
            Some(name) => self.project.external_call_sites(&name).into_iter().map(|(_, kept)| kept).collect(),
            None => Vec::new(),
        }
    }

    /// The summary of the project function or method `call` runs: `f(...)` of a function
    /// imported from the project, `x.m(...)` where `x` was built from a class of the project.
    pub fn project_function_called(&self, call: Node<'t>) -> Option<crate::FunctionSummary> {
        if self.project.is_empty() {
            return None;
        }
        if let Some(crate::Symbol::Function { summary, .. }) = self.project_callee(call) {
            return Some((*summary).clone());
        }
        let callee = self.field(call, "function").filter(|c| c.kind_name() == "attribute")?;
        let method = self.text(self.field(callee, "attribute")?);
        let construction = self.constructor_through_methods(self.field(callee, "object")?, 0)?;
        match self.project_callee(construction)? {
            crate::Symbol::Class { methods, .. } => methods.iter().find(|m| m.name == method).cloned(),
            _ => None,
        }
    }
}
