//! Classes: which are `torch.nn.Module` subclasses, their methods, which instance an
//! expression was built from, which methods run the forward pass.

use tree_sitter::Node;

use crate::NodeExt;
use crate::semantic::*;
use crate::library::*;

impl<'t> SemanticModel<'t> {
    /// Is the network `expr` holds frozen, every parameter without `requires_grad`: loaded
    /// by a `from_pretrained` that freezes ([`pretrained_class_loads_frozen`]) without
    /// `is_trainable=True`, through the methods that return the network itself, and its
    /// name never given `requires_grad_` nor asked for its parameters in that scope (which
    /// may unfreeze them)?
    pub fn is_frozen_network(&self, expr: Node<'t>) -> bool {
        let expr = unparenthesize(expr);
        if expr.kind_name() != "identifier" {
            return false;
        }
        let name = self.text(expr);
        let Some(binding) = self.binding_at(name, expr) else { return false };
        let (BindingKind::Assign, Some(mut value)) = (binding.kind, binding.value) else { return false };
        let scope = self.enclosing_function(expr).map(|f| f.node.byte_range()).unwrap_or(0..self.source.len());
        let on_name = |a: &Node<'t>| a.field("object").is_some_and(|o| self.text(o) == name);
        let unfreezes = UNFREEZING_METHODS.iter().any(|m| self.attributes_named_in(m, scope.clone()).iter().any(on_name))
            || self.attributes_named_in("load_adapter", scope.clone()).iter().filter(|a| on_name(a)).any(|a| {
                self.parent(*a).is_some_and(|call| self.text(call).split_whitespace().collect::<String>().contains("is_trainable=True"))
            });
        if unfreezes {
            return false;
        }
        // `net, names = build(...)`: the element a project function returns, built by a
        // class that may freeze it.
        if let Some(index) = self.target_index(binding.statement, name) {
            let call = unparenthesize(value);
            if call.kind_name() == "call" {
                if let Some(crate::Symbol::Function { returned_elements, .. }) = self.project_callee(call) {
                    return returned_elements.get(index).copied().flatten() == Some(crate::Returned::FrozenNetwork);
                }
            }
        }
        for _ in 0..8 {
            value = unparenthesize(value);
            let Some(callee) = self.field(value, "function").filter(|_| value.kind_name() == "call") else { return false };
            // Built by a class whose `__init__` may freeze its parameters
            // (`Vgg16(requires_grad=False)`), of this module or of the project.
            if self.constructor_may_freeze(value) {
                return true;
            }
            let method = self.field(callee, "attribute").map(|a| self.text(a)).unwrap_or("");
            if method == "from_pretrained" {
                let class = self.qualified_name(callee).or_else(|| self.dotted_name(callee)).unwrap_or_default();
                let trainable = self.field(value, "arguments").is_some_and(|args| {
                    self.named_children(args).into_iter().any(|a| {
                        a.kind_name() == "keyword_argument"
                            && self.field(a, "name").is_some_and(|n| self.text(n) == "is_trainable")
                            && self.field(a, "value").is_none_or(|v| self.text(v) != "False")
                    })
                });
                return pretrained_class_loads_frozen(&class) && !trainable;
            }
            if !MODULE_METHODS_RETURNING_SELF.contains(&method) || method == "requires_grad_" {
                return false;
            }
            let Some(object) = self.field(callee, "object") else { return false };
            value = object;
        }
        false
    }

    /// The statement before `call` in its function that last set `requires_grad` on the
    /// parameters of `module` (`for p in netD.parameters(): p.requires_grad = False`,
    /// `netD.requires_grad_(False)`), when it froze them: a GAN loop freezes the critic
    /// for the generator's step and unfreezes it at the top of the next iteration, so what
    /// runs after the freeze (a validation pass over the critic) records no graph of it.
    pub fn frozen_before(&self, module: Node<'t>, call: Node<'t>) -> Option<Node<'t>> {
        let module_text = self.text(module);
        let start = self.enclosing_function(call).map(|f| f.node.start_byte()).unwrap_or(0);
        let range = start..call.start_byte();
        let mut last: Option<(usize, Node<'t>, bool)> = None;
        let mut consider = |at: Node<'t>, statement: Node<'t>, value: &str| {
            let frozen = match value {
                "False" => false,
                "True" => true,
                _ => return,
            };
            if last.is_none_or(|(position, _, _)| at.start_byte() > position) {
                last = Some((at.start_byte(), statement, !frozen));
            }
        };
        // `p.requires_grad = False` in `for p in module.parameters():`
        for attribute in self.attributes_named_in("requires_grad", range.clone()) {
            let Some(assignment) = self.parent(*attribute).filter(|a| a.kind_name() == "assignment" && a.field("left").is_some_and(|l| l.id() == attribute.id())) else { continue };
            let Some(variable) = attribute.field("object").filter(|o| o.kind_name() == "identifier") else { continue };
            let Some(value) = self.field(assignment, "right") else { continue };
            let mut up = self.parent(assignment);
            while let Some(node) = up {
                if node.kind_name() == "for_statement" {
                    let over = self.field(node, "right").map(|r| self.text(r).split_whitespace().collect::<String>());
                    if self.field(node, "left").is_some_and(|l| self.text(l) == self.text(variable)) && over.as_deref() == Some(format!("{module_text}.parameters()").as_str()) {
                        consider(assignment, node, self.text(value));
                    }
                    break;
                }
                if node.kind_name() == "function_definition" {
                    break;
                }
                up = self.parent(node);
            }
        }
        // `module.requires_grad_(False)`
        for attribute in self.attributes_named_in("requires_grad_", range) {
            if attribute.field("object").is_none_or(|o| self.text(o) != module_text) {
                continue;
            }
            let Some(call) = self.parent(*attribute).filter(|c| c.kind_name() == "call") else { continue };
            let value = self.field(call, "arguments").and_then(|a| a.named_child(0)).map(|a| self.text(a)).unwrap_or("True");
            consider(call, call, value);
        }
        last.filter(|(_, _, frozen)| *frozen).map(|(_, statement, _)| statement)
    }

    /// Does the network `module` (the callee of a forward pass) hold no parameter: built by
    /// a `torch.nn` layer without parameters (`nn.ReflectionPad2d(2)`), or by a module
    /// class of this module or of the project that stores none (buffers, constants, such
    /// layers), through names, `self.X`, the methods that return the module and the
    /// wrappers that hand it on (`DataParallel(net)`)? Its forward then records a graph
    /// only when its input carries one. The fact, in words, for the evidence.
    pub fn holds_no_parameters(&self, module: Node<'t>) -> Option<String> {
        let mut expr = module;
        for _ in 0..4 {
            let construction = self.constructor_through_methods(expr, 0)?;
            let callee = self.field(construction, "function")?;
            let spelled = self.text(callee);
            if callee.kind_name() == "identifier" && self.classes.contains_key(spelled) {
                return self.local_class_holds_no_parameters(spelled, 0).then(|| format!("`{spelled}` stores no parameter"));
            }
            if let Some(qualified) = self.qualified_name(callee) {
                if layer_holds_no_parameters(&qualified) {
                    return Some(format!("`{spelled}` holds no parameters"));
                }
                if wraps_its_first_argument(&qualified) {
                    expr = self.argument_for(construction, "module", Some(0))?;
                    continue;
                }
            }
            return match self.project_class_built_by(construction)? {
                crate::Symbol::Class { holds_no_parameters: true, .. } => Some(format!("`{spelled}` (in another module of the project) stores no parameter")),
                _ => None,
            };
        }
        None
    }

    /// Does the local class `class` derive `torch.nn.Module` holding no parameter of its
    /// own or of what it stores (see [`Self::holds_no_parameters`])?
    pub(crate) fn local_class_holds_no_parameters(&self, class: &str, depth: usize) -> bool {
        if depth > 8 {
            return false;
        }
        let Some(info) = self.classes.get(class) else { return false };
        let callees = info.node.field("body").and_then(|body| self.named.within(body, |nodes, at| crate::project::parameter_free_stores(self.source, nodes, at)));
        let Some(callees) = callees else {
            return false;
        };
        let holds_none = |spelled: &str, base: bool| {
            if self.classes.contains_key(spelled) {
                return spelled != class && self.is_module_class(spelled) && self.local_class_holds_no_parameters(spelled, depth + 1);
            }
            if let Some(crate::Symbol::Class { is_module, holds_no_parameters, .. }) = self.project_symbol_spelled(spelled) {
                return is_module && holds_no_parameters;
            }
            match self.through_module_imports(spelled) {
                Some(qualified) if base => is_the_module_base(&qualified),
                Some(qualified) => stored_value_holds_no_parameters(&qualified),
                None => false,
            }
        };
        !info.spelled_bases.is_empty() && info.spelled_bases.iter().all(|b| holds_none(b, true)) && callees.iter().all(|c| holds_none(c, false))
    }

    /// Does `call` build an instance of a class (of this module, or of the project) whose
    /// `__init__` may freeze its parameters, or call a project function that returns one?
    fn constructor_may_freeze(&self, call: Node<'t>) -> bool {
        let Some(callee) = self.field(call, "function") else { return false };
        if callee.kind_name() == "identifier" && self.classes.contains_key(self.text(callee)) {
            return self
                .method_of(self.text(callee), "__init__")
                .and_then(|def| self.field(def, "body"))
                .is_some_and(|body| crate::library::body_may_freeze_parameters(self.text(body)));
        }
        match self.project_callee(call) {
            Some(crate::Symbol::Class { may_freeze, .. }) => may_freeze,
            Some(crate::Symbol::Function { returns, .. }) => returns == Some(crate::Returned::FrozenNetwork),
            _ => false,
        }
    }

    /// Is `class` a `torch.nn.Module` subclass? A class defined in this module (by its
    /// name) derives `Module` directly or through local bases or bases of the project; a
    /// library class (`torch.nn.Linear`, by its qualified name) or a factory builds a
    /// module; a class the project defines is asked of the project. A class memlint cannot
    /// see into is not known to be one: its name is no evidence.
    /// This is the one place that judges classes.
    pub fn is_module_class(&self, class: &str) -> bool {
        if self.classes.contains_key(class) {
            return self.is_module_class_at(class, 0);
        }
        if let Some(crate::Symbol::Class { is_module, .. }) = self.project_symbol_spelled(class).or_else(|| self.project_symbol(class)) {
            return is_module;
        }
        // A library class or factory; any other class memlint cannot see into is not known
        // to be a module (its name is no evidence).
        module_factory(class) || crate::library::library_module_class(class)
    }

    /// Is the local class `class` a module, or may it be one: one of its bases (through
    /// local bases) is a class memlint cannot see into, one of another library than torch
    /// and Python's own (`mmcv.runner.BaseModule`). A question whose answer rests on the
    /// class being no module (its `forward` is no network's) stays unanswered there.
    pub fn may_be_module_class(&self, class: &str) -> bool {
        self.is_module_class(class) || self.has_unknown_base(class, 0)
    }

    fn has_unknown_base(&self, class: &str, depth: usize) -> bool {
        /// Bases of Python's own: known to be no module.
        const PYTHON: &[&str] = &[
            "object", "Exception", "BaseException", "ValueError", "RuntimeError", "dict", "list", "tuple", "set", "str",
            "int", "float", "abc", "typing", "enum", "collections", "dataclasses", "threading", "multiprocessing",
            "argparse", "json", "logging", "unittest", "contextlib", "functools", "io", "os", "pathlib", "types",
            "Enum", "IntEnum", "ABC", "NamedTuple", "Generic", "Protocol", "TypedDict",
        ];
        let Some(info) = self.classes.get(class) else { return false };
        if depth > 16 {
            return false;
        }
        info.spelled_bases.iter().any(|base| {
            if self.classes.contains_key(base.as_str()) {
                return base != class && self.has_unknown_base(base, depth + 1);
            }
            if self.project_symbol_spelled(base).is_some() {
                return false;
            }
            let qualified = self.through_module_imports(base).unwrap_or_else(|| base.clone());
            let head = qualified.split('.').next().unwrap_or("");
            !(head == "torch" || head == "torchvision" || PYTHON.contains(&head))
        })
    }

    /// The method `name` of a local class, looked up through its local bases.
    pub fn method_of(&self, class: &str, name: &str) -> Option<Node<'t>> {
        let mut pending = vec![class.to_owned()];
        let mut seen = 0;
        while let Some(c) = pending.pop() {
            seen += 1;
            if seen > 16 {
                break;
            }
            if let Some(m) = self.methods.get(&(c.clone(), name.to_owned())) {
                return Some(*m);
            }
            if let Some(info) = self.classes.get(c.as_str()) {
                pending.extend(info.bases.iter().cloned());
            }
        }
        None
    }

    /// Does the method `def` of a module class run a forward pass: call `self(...)`,
    /// `self.forward(...)` or a submodule (`self.fc1(x)`)? Then calling it on an instance
    /// (`model.pi(x)`, `model.predict(x)`, `model.sample(z)`) is a forward pass too.
    pub fn method_runs_forward(&self, def: Node<'t>) -> bool {
        if let Some(known) = self.forward_methods.borrow().get(&def.id()) {
            return *known;
        }
        self.forward_methods.borrow_mut().insert(def.id(), false);
        // A method that backpropagates or steps an optimizer (`q.train_net(...)`) is a
        // training step, not a forward pass.
        let trains = self.field(def, "body").map(|b| self.trains_in(b)).unwrap_or(true);
        let answer = !trains && within(&self.calls, def.byte_range()).iter().any(|c| {
            self.scope_of(*c) == Some(def.id()) && self.forward_callee(*c).map(|m| self.text(m).starts_with("self")).unwrap_or(false)
        });
        self.forward_methods.borrow_mut().insert(def.id(), answer);
        answer
    }

    /// Does some local module class have a method `name` that runs the forward pass?
    /// Decided once per name (a file of many same-named classes stays linear).
    pub(crate) fn some_module_method_runs_forward(&self, name: &str) -> bool {
        if let Some(known) = self.forward_method_names.borrow().get(name) {
            return *known;
        }
        self.forward_method_names.borrow_mut().insert(name.to_owned(), false);
        let runs = self
            .methods_by_name
            .get(name)
            .map(|defs| defs.iter().any(|(class, def)| self.is_module_class(class) && self.method_runs_forward(*def)))
            .unwrap_or(false);
        self.forward_method_names.borrow_mut().insert(name.to_owned(), runs);
        runs
    }

    /// The local module class an expression is an instance of, when it was built from one
    /// (`Policy()`, `Net().cuda()`, `self.actor` set to `Actor(...)` in `__init__`).
    pub fn instance_class(&self, expr: Node<'t>) -> Option<&'t str> {
        let key = crate::semantic::key(expr);
        if let Some(known) = self.instance_classes.borrow().get(&key) {
            return *known;
        }
        let class = self.instance_class_at(expr, 0);
        self.instance_classes.borrow_mut().insert(key, class);
        class
    }

    pub(crate) fn instance_class_at(&self, expr: Node<'t>, depth: usize) -> Option<&'t str> {
        if depth > 12 {
            return None;
        }
        let expr = unparenthesize(expr);
        match expr.kind_name() {
            "identifier" => {
                let binding = self.binding_at(self.text(expr), expr)?;
                match (binding.kind, binding.value) {
                    (BindingKind::Assign, Some(v)) if binding.statement.kind_name() != "for_statement" => self.instance_class_at(v, depth + 1),
                    _ => None,
                }
            }
            "attribute" => {
                let object = self.field(expr, "object")?;
                if self.text(object) != "self" {
                    return None;
                }
                let attr = self.text(self.field(expr, "attribute")?);
                // The values `self.<attr>` can mean depend only on the class of the method.
                let key = (self.enclosing_function(expr).and_then(|f| self.method_class(f)).map_or(0, |c| c.id()), attr);
                if let Some(known) = self.self_attribute_classes.borrow().get(&key) {
                    return *known;
                }
                // Answered from depth 1 whatever the depth asking, so that the memo does not
                // depend on who asked first; a cycle back to it meets the placeholder.
                self.self_attribute_classes.borrow_mut().insert(key, None);
                let class = self.self_attribute_values(expr, attr).find_map(|v| self.instance_class_at(v, 1));
                self.self_attribute_classes.borrow_mut().insert(key, class);
                class
            }
            "call" => {
                let callee = self.field(expr, "function")?;
                match callee.kind_name() {
                    "identifier" => {
                        let name = self.text(callee);
                        let (key, _) = self.classes.get_key_value(name)?;
                        self.is_module_class(name).then_some(*key)
                    }
                    "attribute" => {
                        let method = self.text(self.field(callee, "attribute")?);
                        if MODULE_METHODS_RETURNING_SELF.contains(&method) {
                            self.instance_class_at(self.field(callee, "object")?, depth + 1)
                        } else {
                            None
                        }
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Is the local class `class` a `torch.nn.Module` subclass? Through its bases: local
    /// classes, and classes imported from the project.
    pub(crate) fn is_module_class_at(&self, class: &str, depth: usize) -> bool {
        let Some(info) = self.classes.get(class) else { return false };
        if info.is_module {
            return true;
        }
        if depth > 16 || self.project.is_empty() {
            return false;
        }
        info.spelled_bases.iter().any(|base| {
            if base != class && self.classes.contains_key(base.as_str()) {
                return self.is_module_class_at(base, depth + 1);
            }
            matches!(self.project_symbol_spelled(base), Some(crate::Symbol::Class { is_module: true, .. }))
        })
    }

    /// Does building an instance of the class `class` (as spelled here: a local class, or
    /// one imported from the project) load a pretrained network that the class never
    /// freezes? Its `__init__` calls one of [`loads_pretrained_network`]'s constructions
    /// and the class does not look like it freezes it ([`class_may_freeze`]). Gives that
    /// construction's callee as spelled in the class's module.
    pub fn class_loads_pretrained_network(&self, class: &str) -> Option<String> {
        if self.classes.contains_key(class) {
            let def = self.bindings_of(None, class)?.iter().rev().find(|b| b.statement.kind_name() == "class_definition")?.statement;
            if class_may_freeze(self.text(def)) {
                return None;
            }
            // The class that defines the `__init__` it runs (itself, or a local base),
            // summarized as the project summarizes its classes.
            let init = self.method_of(class, "__init__")?;
            let owner = self.parent(init).and_then(|body| self.parent(body)).filter(|c| c.kind_name() == "class_definition")?;
            let summary = crate::project::class_summary_in(self.source, owner, &self.named);
            return summary.pretrained_calls.iter().find_map(|call| {
                let qualified = self.through_module_imports(&call.callee).unwrap_or_else(|| call.callee.clone());
                call.loads_pretrained(&qualified).then(|| call.callee.clone())
            });
        }
        match self.project_symbol_spelled(class)? {
            crate::Symbol::Class { pretrained, .. } => pretrained,
            _ => None,
        }
    }

    /// Does the local class `class` derive, through any chain of local bases, from one of
    /// the library classes `qualified` (`torch.nn.DataParallel`), named through this
    /// module's imports? (Not through the project: a rule's trigger could not see a base
    /// named only in another module.)
    pub fn class_derives_from(&self, class: &str, qualified: &[&str]) -> bool {
        self.class_derives_from_at(class, qualified, 0)
    }

    pub(crate) fn class_derives_from_at(&self, class: &str, qualified: &[&str], depth: usize) -> bool {
        let Some(info) = self.classes.get(class) else { return false };
        if depth > 16 {
            return false;
        }
        info.spelled_bases.iter().any(|base| {
            if base != class && self.classes.contains_key(base.as_str()) {
                return self.class_derives_from_at(base, qualified, depth + 1);
            }
            self.through_module_imports(base).is_some_and(|q| qualified.contains(&q.as_str()))
        })
    }

    /// Does `call` build an instance of a class deriving from one of the library classes
    /// `qualified`: a local class ([`Self::class_derives_from`]), or a class of the project
    /// (`from parallel import UserScatteredDataParallel`)?
    pub fn call_builds_subclass_of(&self, call: Node<'t>, qualified: &[&str]) -> bool {
        let Some(callee) = self.field(call, "function") else { return false };
        if callee.kind_name() == "identifier" && self.classes.contains_key(self.text(callee)) {
            return self.class_derives_from(self.text(callee), qualified);
        }
        if self.project.is_empty() {
            return false;
        }
        match self.qualified_name(callee) {
            Some(q) if !q.starts_with("torch.") => self.project.class_derives_from(&q, qualified),
            _ => false,
        }
    }

    /// The local classes that derive from one of `qualified` ([`Self::class_derives_from`]).
    pub fn classes_deriving_from(&self, qualified: &[&str]) -> Vec<&str> {
        let mut names: Vec<&str> = self.classes.keys().copied().filter(|c| self.class_derives_from(c, qualified)).collect();
        names.sort_unstable();
        names
    }

    /// The method summaries of a class this module defines (`callee` names it).
    pub(crate) fn local_class_methods(&self, callee: Node<'t>) -> Option<Vec<crate::FunctionSummary>> {
        if callee.kind_name() != "identifier" {
            return None;
        }
        let name = self.text(callee);
        self.classes.get(name)?;
        let def = self.bindings_of(None, name)?.iter().rev().find(|b| b.statement.kind_name() == "class_definition")?.statement;
        Some(crate::project::class_summary_in(self.source, def, &self.named).methods)
    }

    pub fn is_lightning_class(&self, class: &str) -> bool {
        self.classes.get(class).map(|c| c.is_lightning).unwrap_or(false)
    }
}

/// Does the class named `class` derive from the one named `base`, `bases_of` giving a
/// class's bases by name (the model's local classes, or the server prediction's table of
/// them, which must answer alike)? At most 16 classes are visited: a cycle of bases ends.
pub fn derives_by_name<'a>(class: &'a str, base: &str, bases_of: impl Fn(&str) -> Vec<&'a str>) -> bool {
    let mut pending = vec![class];
    let mut seen = 0;
    while let Some(c) = pending.pop() {
        seen += 1;
        if seen > 16 {
            return false;
        }
        if c == base {
            return true;
        }
        pending.extend(bases_of(c));
    }
    false
}
