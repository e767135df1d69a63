//! Gradient context: whether autograd records at a node, and why not (`no_grad`,
//! decorators, toggles, functions only called from such code).

use rustc_hash::FxHashMap as HashMap;
use tree_sitter::Node;

use crate::NodeExt;
use crate::semantic::*;
use crate::library::*;

/// The functions that always run without gradients, each with why: decorated, framework
/// hooks, or only ever called from no-grad code (a fixed point over the module's calls).
pub(crate) struct NoGradFunctions {
    found: HashMap<usize, String>,
    /// For a function the fixed point added for its callers: its group in `by_callers`.
    group_of: HashMap<usize, usize>,
    by_callers: Vec<CallerGroup>,
    /// Whether each group's callers in the project's other modules disable gradients
    /// too, and so do those of every group it rests on: asked on first use.
    holds_elsewhere: std::cell::RefCell<Vec<Option<bool>>>,
}

/// Functions of one name and kind that the fixed point added because every call of them
/// in the module disables gradients.
struct CallerGroup {
    name: String,
    /// A top-level function of a module in a project: its callers in other modules must
    /// disable gradients too.
    asks_elsewhere: bool,
    /// The functions added before it whose being no-grad disabled one of its calls.
    rests_on: Vec<usize>,
}

/// Where a walk up from a node decided its gradient context: by the code around it, or
/// at its function, by whether that function runs without gradients.
enum AroundNode {
    Decided(GradContext),
    InFunction(usize),
}

impl<'t> SemanticModel<'t> {
    /// Whether `node` runs with gradients disabled, and by what.
    pub fn grad_context(&self, node: Node<'t>) -> GradContext {
        let function = match self.grad_context_around(node) {
            AroundNode::Decided(context) => return context,
            AroundNode::InFunction(function) => function,
        };
        let Some(no_grad) = self.no_grad_functions() else { return GradContext::Enabled };
        match no_grad.found.get(&function) {
            Some(why) if self.no_grad_holds_elsewhere(no_grad, function) => GradContext::Disabled(why.clone()),
            _ => GradContext::Enabled,
        }
    }

    /// The functions that always run without gradients as far as this module shows, found
    /// on first use; `None` while they are being found (a question asked by the fixed
    /// point itself).
    fn no_grad_functions(&self) -> Option<&NoGradFunctions> {
        if let Some(found) = self.no_grad_functions.get() {
            return Some(found);
        }
        if self.finding_no_grad_functions.replace(true) {
            return None;
        }
        let found = self.find_no_grad_functions();
        self.finding_no_grad_functions.set(false);
        Some(self.no_grad_functions.get_or_init(|| found))
    }

    /// Is `function`, which the module's fixed point took as no-grad, one still once its
    /// callers in the project's other modules are known? The fixed point does not ask
    /// them: reading them means summarizing every module that may call, and most of its
    /// functions are never asked about. Being called only from no-grad code is a
    /// conjunction over the calls, so the function is one exactly when its group's
    /// callers elsewhere disable gradients and so do those of each group it rests on,
    /// which were added before it (the questions end). The answer, and the reason given,
    /// are those of the fixed point that asks every group as it adds it.
    fn no_grad_holds_elsewhere(&self, no_grad: &NoGradFunctions, function: usize) -> bool {
        let Some(&group) = no_grad.group_of.get(&function) else { return true };
        if let Some(known) = no_grad.holds_elsewhere.borrow()[group] {
            return known;
        }
        let CallerGroup { name, asks_elsewhere, rests_on } = &no_grad.by_callers[group];
        let holds = (!asks_elsewhere || !self.project.external_calls(name).iter().any(|disabled| !disabled))
            && rests_on.iter().all(|earlier| self.no_grad_holds_elsewhere(no_grad, *earlier));
        no_grad.holds_elsewhere.borrow_mut()[group] = Some(holds);
        holds
    }

    pub(crate) fn grad_context_with(&self, node: Node<'t>, no_grad_fns: &HashMap<usize, String>) -> GradContext {
        match self.grad_context_around(node) {
            AroundNode::Decided(context) => context,
            AroundNode::InFunction(function) => match no_grad_fns.get(&function) {
                Some(why) => GradContext::Disabled(why.clone()),
                None => GradContext::Enabled,
            },
        }
    }

    /// The walk up from `node` to the first `with`, toggle, function or lambda that decides
    /// its gradient context.
    fn grad_context_around(&self, node: Node<'t>) -> AroundNode {
        let mut child = node;
        let mut current = self.parent(node);
        while let Some(n) = current {
            match n.kind_name() {
                "with_statement" => {
                    let in_body = self.field(n, "body").map(|b| contains(b, child)).unwrap_or(false);
                    if in_body {
                        if let Some(ctx) = self.with_grad_effect(n) {
                            return AroundNode::Decided(ctx);
                        }
                    }
                }
                "block" | "module" => {
                    if let Some(ctx) = self.preceding_grad_toggle(n, child) {
                        return AroundNode::Decided(ctx);
                    }
                }
                "function_definition" => return AroundNode::InFunction(n.id()),
                "lambda" => return AroundNode::Decided(GradContext::Enabled),
                _ => {}
            }
            child = n;
            current = self.parent(n);
        }
        AroundNode::Decided(GradContext::Enabled)
    }

    /// What a `with` statement does to autograd, if anything.
    pub(crate) fn with_grad_effect(&self, with: Node<'t>) -> Option<GradContext> {
        let clause = self.named_children(with).into_iter().find(|c| c.kind_name() == "with_clause")?;
        // The last item wins when several are given (`with a(), b():` enters a then b).
        let mut effect = None;
        for item in self.named_children(clause) {
            let Some(mut value) = self.field(item, "value") else { continue };
            if value.kind_name() == "as_pattern" {
                match value.named_child(0) {
                    Some(v) => value = v,
                    None => continue,
                }
            }
            if let Some(e) = self.grad_effect_of_call(value) {
                effect = Some(e);
            }
        }
        effect
    }

    /// The effect of entering the context manager `expr` (a call like `torch.no_grad()`,
    /// a conditional choosing between two, or a name bound to one).
    pub fn grad_effect_of_call(&self, expr: Node<'t>) -> Option<GradContext> {
        self.grad_effect_of_context(expr, true)
    }

    /// [`Self::grad_effect_of_call`]; `follow_names`: a name is followed to the values
    /// assigned to it (once: a name bound to another name is not followed further).
    fn grad_effect_of_context(&self, expr: Node<'t>, follow_names: bool) -> Option<GradContext> {
        let expr = unparenthesize(expr);
        match expr.kind_name() {
            "conditional_expression" => return self.grad_effect_of_either(&[expr.named_child(0), expr.named_child(2)], "a conditional expression"),
            "identifier" if follow_names => return self.grad_effect_of_name(expr),
            "call" => {}
            // `with torch.no_grad:` (no call) does not work, but a bare decorator-style
            // reference is common in decorators; handled there.
            _ => return None,
        }
        let callee = self.field(expr, "function")?;
        let qualified = self.qualified_name(callee).unwrap_or_else(|| self.dotted_name(callee).unwrap_or_default());
        let last = qualified.rsplit('.').next().unwrap_or("");
        let args = self.field(expr, "arguments");
        let first_arg = args.and_then(|a| a.named_child(0));
        let torchy = qualified.starts_with("torch.") || !qualified.contains('.');
        match last {
            "no_grad" if torchy => Some(GradContext::Disabled(format!("`{}()`", self.text(callee)))),
            "inference_mode" if torchy => {
                // `inference_mode(False)` / `inference_mode(mode=False)` keeps gradients on.
                let off = first_arg.map(|a| {
                    let value = if a.kind_name() == "keyword_argument" { self.field(a, "value") } else { Some(a) };
                    value.map(|v| self.text(v) == "False").unwrap_or(false)
                });
                if off == Some(true) {
                    None
                } else {
                    Some(GradContext::Disabled(format!("`{}()`", self.text(callee))))
                }
            }
            "set_grad_enabled" if torchy => {
                let arg = first_arg.map(|a| {
                    if a.kind_name() == "keyword_argument" { self.field(a, "value").unwrap_or(a) } else { a }
                });
                match arg.map(|a| self.text(a)) {
                    Some("True") => Some(GradContext::ExplicitlyEnabled),
                    // `set_grad_enabled(is_train)` may disable gradients: the code is written
                    // for both, so it is not an evaluation pass that forgot `no_grad`.
                    Some(text) => Some(GradContext::Disabled(format!("`{}({})`", self.text(callee), text))),
                    None => None,
                }
            }
            "enable_grad" if torchy => Some(GradContext::ExplicitlyEnabled),
            _ => self.grad_effect_of_local_factory(expr),
        }
    }

    /// One of several contexts, chosen at run time (`torch.enable_grad() if train else
    /// torch.no_grad()`, or a name assigned one or the other). When one of them disables
    /// gradients and each other one is a gradient context or one that does nothing
    /// (`nullcontext()`), the code is written for both modes, as with
    /// `set_grad_enabled(train)`, and counts as disabled (as a local factory does, see
    /// [`Self::grad_effect_of_local_factory`]); when each is `enable_grad()`, as enabled;
    /// otherwise it is unknown, and gradients are on as without it.
    fn grad_effect_of_either(&self, choices: &[Option<Node<'t>>], what: &str) -> Option<GradContext> {
        let (mut disabled, mut all_enabled) = (None, !choices.is_empty());
        for choice in choices {
            let Some(choice) = *choice else { return None };
            match self.grad_effect_of_context(choice, false) {
                Some(GradContext::Disabled(why)) => {
                    disabled.get_or_insert(why);
                    all_enabled = false;
                }
                Some(GradContext::ExplicitlyEnabled) => {}
                None if self.is_null_context(unparenthesize(choice)) => all_enabled = false,
                _ => return None,
            }
        }
        if all_enabled {
            return Some(GradContext::ExplicitlyEnabled);
        }
        disabled.map(|why| GradContext::Disabled(format!("{why} on one branch of {what}")))
    }

    /// `with ctx:` where `ctx` is assigned a context in its scope (`ctx = torch.no_grad()
    /// if evaluating else nullcontext()`): every value assigned to it there is a choice.
    fn grad_effect_of_name(&self, name: Node<'t>) -> Option<GradContext> {
        let bindings = self.bindings_in_scope(self.text(name), name);
        if bindings.is_empty() || bindings.iter().any(|b| b.kind != BindingKind::Assign || b.value.is_none()) {
            return None;
        }
        let values: Vec<Option<Node<'t>>> = bindings.iter().map(|b| b.value).collect();
        self.grad_effect_of_either(&values, &format!("the values assigned to `{}`", self.text(name)))
    }

    /// `with no_grad_ctx():` where `no_grad_ctx` is a function of this module that returns
    /// a context disabling gradients (`return torch.no_grad()`), or, on other paths, one
    /// that does nothing (`contextlib.suppress()`, `nullcontext()`: a fallback for old
    /// versions of torch) or `torch.enable_grad()` (a context chosen by mode).
    fn grad_effect_of_local_factory(&self, call: Node<'t>) -> Option<GradContext> {
        let def = self.local_callee(call)?;
        let (mut disabled, mut enabled, mut null) = (None, false, false);
        for statement in self.returns.get(&def.id())? {
            let value = unparenthesize(statement.named_child(0)?);
            // Only what the function itself returns: another local function's context is
            // not followed (two functions returning each other's would never end).
            if value.kind_name() == "call" && self.local_callee(value).is_some() {
                return None;
            }
            match self.grad_effect_of_call(value) {
                Some(GradContext::Disabled(why)) => disabled = Some(why),
                Some(GradContext::ExplicitlyEnabled) => enabled = true,
                None if self.is_null_context(value) => null = true,
                _ => return None,
            }
        }
        // The contexts it returns on its paths are a choice made at run time, as in
        // `grad_effect_of_either`: one that disables gradients makes the call count as
        // disabling them; `enable_grad()` on every path, as enabling them.
        let name = self.field(call, "function").map(|f| self.text(f)).unwrap_or("");
        match disabled {
            Some(why) if enabled => Some(GradContext::Disabled(format!("`{name}()`, which returns {why} on one of its paths"))),
            Some(why) => Some(GradContext::Disabled(format!("`{name}()`, which returns {why}"))),
            None if enabled && !null => Some(GradContext::ExplicitlyEnabled),
            None => None,
        }
    }

    /// A context manager that does nothing: `contextlib.suppress()`, `nullcontext()`.
    fn is_null_context(&self, value: Node<'t>) -> bool {
        let Some(callee) = self.field(value, "function").filter(|_| value.kind_name() == "call") else { return false };
        let qualified = self.qualified_name(callee).unwrap_or_else(|| self.dotted_name(callee).unwrap_or_default());
        matches!(qualified.as_str(), "contextlib.suppress" | "contextlib.nullcontext" | "contextlib.ExitStack")
            || (self.field(value, "arguments").is_some_and(|a| a.named_child_count() == 0) && matches!(qualified.rsplit('.').next(), Some("nullcontext" | "suppress")))
    }

    /// A statement before `child` in `block` that toggles autograd for the rest of the
    /// block: `torch.set_grad_enabled(False)` or `stack.enter_context(torch.no_grad())`.
    pub(crate) fn preceding_grad_toggle(&self, block: Node<'t>, child: Node<'t>) -> Option<GradContext> {
        // Only blocks with a toggle statement are scanned (recorded while collecting), so
        // this is constant time for almost every block.
        let statements = self.toggle_statements.get(&key(block))?;
        let mut result = None;
        for statement in statements {
            if statement.start_byte() >= child.start_byte() {
                break;
            }
            let Some(call) = statement.named_child(0).filter(|c| c.kind_name() == "call") else { continue };
            let Some(callee) = self.field(call, "function") else { continue };
            let last = callee
                .field("attribute")
                .map(|a| self.text(a))
                .unwrap_or_else(|| self.text(callee));
            if last == "enter_context" {
                if let Some(arg) = self.field(call, "arguments").and_then(|a| a.named_child(0)) {
                    if let Some(effect) = self.grad_effect_of_call(arg) {
                        result = Some(effect);
                    }
                }
            } else if last == "set_grad_enabled" {
                if let Some(effect) = self.grad_effect_of_call(call) {
                    result = Some(effect);
                }
            }
        }
        result
    }

    /// Does a decorator disable gradients (`@torch.no_grad()`, `@torch.inference_mode`,
    /// or a decorator whose name says so)?
    pub(crate) fn decorator_disables_grad(&self, decorator: Node<'t>) -> bool {
        let target = if decorator.kind_name() == "call" {
            match self.field(decorator, "function") {
                Some(f) => f,
                None => return false,
            }
        } else {
            decorator
        };
        if decorator.kind_name() == "call" {
            if let Some(effect) = self.grad_effect_of_call(decorator) {
                return effect.is_disabled();
            }
        }
        let name = self.dotted_name(target).unwrap_or_default().to_lowercase();
        let last = name.rsplit('.').next().unwrap_or("");
        last.contains("no_grad") || last.contains("nograd") || last.contains("inference")
    }

    /// The fixed point of functions that always run without gradients in this module
    /// (callers in other modules are asked later, of a function asked about: see
    /// [`Self::no_grad_holds_elsewhere`]).
    fn find_no_grad_functions(&self) -> NoGradFunctions {
        let mut no_grad: HashMap<usize, String> = HashMap::default();
        let mut group_of: HashMap<usize, usize> = HashMap::default();
        let mut by_callers: Vec<CallerGroup> = Vec::new();
        for info in self.functions() {
            if let Some(d) = info.decorators.iter().find(|d| self.decorator_disables_grad(**d)) {
                no_grad.insert(info.node.id(), format!("`@{}`", self.text(*d)));
            } else if info.class.is_some() && NO_GRAD_HOOKS.contains(&info.name.as_str()) {
                no_grad.insert(info.node.id(), format!("Lightning's `{}` hook", info.name));
            }
        }
        // Functions only ever called from no-grad code: iterate to a fixed point. Calls
        // are matched by name (`f(...)` for functions, `x.f(...)` for methods), so every
        // function of one name and kind has the same callers: each (name, kind) is decided
        // once per round, not once per function (a file of many same-named functions was
        // quadratic). Each round adds at least one group, so rounds are bounded.
        let mut groups: HashMap<(&str, bool), Vec<usize>> = HashMap::default();
        for f in self.functions() {
            groups.entry((f.name.as_str(), f.class.is_some())).or_default().push(f.node.id());
        }
        let mut groups: Vec<((&str, bool), Vec<usize>)> = groups.into_iter().collect();
        groups.sort();
        let mut decided: Vec<bool> = vec![false; groups.len()];
        loop {
            let mut changed = false;
            for (g, ((name, is_method), ids)) in groups.iter().enumerate() {
                if decided[g] || ids.iter().all(|id| no_grad.contains_key(id)) {
                    continue;
                }
                let calls: Vec<Node<'t>> = self
                    .calls_named(name)
                    .iter()
                    .copied()
                    .filter(|c| match c.field("function").map(|c| c.kind_name()) {
                        Some("identifier") => !is_method,
                        Some("attribute") => *is_method,
                        _ => false,
                    })
                    .collect();
                let Some(&first) = calls.first() else {
                    decided[g] = true;
                    continue;
                };
                let GradContext::Disabled(why) = self.grad_context_with(first, &no_grad) else { continue };
                let mut rests_on: Vec<usize> = Vec::new();
                let all_disabled = calls.iter().all(|c| match self.grad_context_around(*c) {
                    AroundNode::Decided(context) => context.is_disabled(),
                    AroundNode::InFunction(f) => {
                        if group_of.contains_key(&f) && !rests_on.contains(&f) {
                            rests_on.push(f);
                        }
                        no_grad.contains_key(&f)
                    }
                });
                if all_disabled {
                    let group = by_callers.len();
                    // Callers in other modules of the project must disable gradients too.
                    by_callers.push(CallerGroup { name: (*name).to_owned(), asks_elsewhere: !*is_method && !self.project.is_empty(), rests_on });
                    for id in ids {
                        if !no_grad.contains_key(id) {
                            no_grad.insert(*id, format!("only called under {why}"));
                            group_of.insert(*id, group);
                        }
                    }
                    decided[g] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let holds_elsewhere = std::cell::RefCell::new(vec![None; by_callers.len()]);
        NoGradFunctions { found: no_grad, group_of, by_callers, holds_elsewhere }
    }

    /// The network whose `forward` the call `call` runs: its callee, or `m` of `m.forward(x)`.
    fn forward_instance(&self, call: Node<'t>) -> Option<Node<'t>> {
        let callee = self.field(call, "function")?;
        match callee.kind_name() {
            "attribute" if self.field(callee, "attribute").is_some_and(|a| self.text(a) == "forward") => self.field(callee, "object"),
            _ => Some(callee),
        }
    }

    /// Does the forward pass `call` run with gradients disabled by its module's own class:
    /// a class whose `forward` is decorated `@torch.no_grad()` (or `inference_mode`), defined
    /// here or in another module of the project (`matcher = HungarianMatcher();
    /// matcher(outputs, targets)`)? Gives why.
    pub fn class_forward_disables_grad(&self, call: Node<'t>) -> Option<String> {
        let instance = self.forward_instance(call)?;
        if let Some(class) = self.instance_class(instance) {
            let forward = self.method_of(class, "forward")?;
            if let Some(known) = self.local_forwards_without_grad.borrow().get(&(forward.id(), class)) {
                return known.clone();
            }
            let answer = self.local_forward_disables_grad(class, forward);
            self.local_forwards_without_grad.borrow_mut().insert((forward.id(), class), answer.clone());
            return answer;
        }
        let construction = self.constructor_through_methods(instance, 0)?;
        match self.project_class_built_by(construction)? {
            crate::Symbol::Class { methods, .. } if methods.iter().any(|m| m.name == "forward" && m.no_grad) => {
                let class = self.field(construction, "function").map(|f| self.text(f)).unwrap_or("");
                Some(format!("`{class}.forward` (in another module of the project) runs under `torch.no_grad()`"))
            }
            crate::Symbol::Class { methods, submodules, .. } if crate::project::forward_runs_submodules_without_grad(&methods, &submodules) => {
                let class = self.field(construction, "function").map(|f| self.text(f)).unwrap_or("");
                Some(format!("`{class}.forward` (in another module of the project) runs its submodules only under `with torch.no_grad()`"))
            }
            _ => None,
        }
    }

    /// Why `forward`, the method of the local class `class`, runs without gradients: it
    /// is decorated so, or it runs its submodules only under `with torch.no_grad()` blocks.
    fn local_forward_disables_grad(&self, class: &str, forward: Node<'t>) -> Option<String> {
        let info = self.functions.get(&forward.id())?;
        if let Some(decorator) = info.decorators.iter().find(|d| self.decorator_disables_grad(**d)) {
            return Some(format!("`{class}.forward` is decorated `@{}`", self.text(*decorator)));
        }
        // Its submodules run only under `with torch.no_grad()` blocks (in `forward` or
        // the methods it calls), as the project summarizes the class.
        let owner = self.parent(forward).and_then(|body| self.parent(body)).filter(|c| c.kind_name() == "class_definition")?;
        let summary = crate::project::class_summary_in(self.source, owner, &self.named);
        let submodules: Vec<String> = summary
            .attributes
            .iter()
            .filter(|(_, callee)| {
                let qualified = self.through_module_imports(callee).unwrap_or_else(|| callee.clone());
                self.is_module_class(callee) || crate::library::library_module_class(&qualified)
            })
            .map(|(attribute, _)| attribute.clone())
            .collect();
        crate::project::forward_runs_submodules_without_grad(&summary.methods, &submodules)
            .then(|| format!("`{class}.forward` runs its submodules only under `with torch.no_grad()`"))
    }

    /// Does the forward pass `call` run a training step itself: its class's `forward`
    /// backpropagates (a meta-learner's outer step, a module that trains in `forward`)?
    /// Its output then keeps no graph for the caller to free. The fact, in words.
    pub fn class_forward_trains(&self, call: Node<'t>) -> Option<String> {
        let instance = self.forward_instance(call)?;
        if let Some(class) = self.instance_class(instance) {
            let forward = self.method_of(class, "forward")?;
            return self.trains_in(self.field(forward, "body")?).then(|| format!("`{class}.forward` backpropagates"));
        }
        let construction = self.constructor_through_methods(instance, 0)?;
        match self.project_class_built_by(construction)? {
            crate::Symbol::Class { methods, .. } if methods.iter().any(|m| m.name == "forward" && m.backprops) => {
                let class = self.field(construction, "function").map(|f| self.text(f)).unwrap_or("");
                Some(format!("`{class}.forward` (in another module of the project) backpropagates"))
            }
            _ => None,
        }
    }

    /// Does calling the method `method` on `object`, an instance of a module class of
    /// another module of the project (or one of its bases), run a forward pass (see
    /// [`crate::project::method_runs_forward`])?
    pub fn project_method_runs_forward(&self, object: Node<'t>, method: &str) -> bool {
        let Some(construction) = self.constructor_through_methods(object, 0) else { return false };
        match self.project_class_built_by(construction) {
            Some(crate::Symbol::Class { is_module: true, methods, submodules, .. }) => crate::project::method_runs_forward(&methods, &submodules, method),
            _ => false,
        }
    }

    /// Does `object.method(...)` run a forward pass of `object`, a network of the project
    /// from another module: its class's method runs one, or, when the class is not known
    /// here (`for model in models:`), a module class this module imports from the project
    /// has a method of that name that does.
    pub(crate) fn project_network_method_runs_forward(&self, object: Node<'t>, method: &str) -> bool {
        if self.constructor_through_methods(object, 0).is_some() {
            return self.project_method_runs_forward(object, method);
        }
        let key = format!("import:{method}");
        if let Some(known) = self.forward_method_names.borrow().get(&key) {
            return *known;
        }
        let runs = self.imports.iter().any(|import| match self.project_symbol(&import.qualified) {
            Some(crate::Symbol::Class { is_module: true, methods, submodules, .. }) => crate::project::method_runs_forward(&methods, &submodules, method),
            _ => false,
        });
        self.forward_method_names.borrow_mut().insert(key, runs);
        runs
    }

    /// For `object.method(...)` where `object` is an instance of a class of another module
    /// of the project: is the method called somewhere in the project, and does every call
    /// of it only read its result ([`crate::ProjectIndex::method_call_sites`])? Then the
    /// method's module reports the forward passes inside it.
    pub fn project_method_results_only_read(&self, object: Node<'t>, method: &str) -> bool {
        let Some(construction) = self.constructor_through_methods(object, 0) else { return false };
        let Some(class) = self.field(construction, "function").and_then(|f| self.qualified_name(f)) else { return false };
        let sites = self.project.method_call_sites(&class, method);
        !sites.is_empty() && sites.iter().all(|(_, kept)| !kept)
    }

    /// The call that built the value of `expr`, through names bound once, `self.X`
    /// attributes and the methods that return the module (`Net().cuda()`).
    pub(crate) fn constructor_through_methods(&self, expr: Node<'t>, depth: usize) -> Option<Node<'t>> {
        if depth > 8 {
            return None;
        }
        let expr = unparenthesize(expr);
        match expr.kind_name() {
            "identifier" | "attribute" => {
                let value = self.constructor_of(expr)?;
                self.constructor_through_methods(value, depth + 1)
            }
            "call" => {
                let callee = self.field(expr, "function")?;
                if callee.kind_name() == "attribute" {
                    let method = self.field(callee, "attribute").map(|a| self.text(a)).unwrap_or("");
                    if MODULE_METHODS_RETURNING_SELF.contains(&method) {
                        return self.constructor_through_methods(self.field(callee, "object")?, depth + 1);
                    }
                }
                // A function that gives its argument back (`cuda(net(...), flag)`).
                if let Some(def) = self.local_callee(expr) {
                    if let Some(argument) = self.argument_returned(def, expr) {
                        return self.constructor_through_methods(argument, depth + 1);
                    }
                }
                if let Some(crate::Symbol::Function { summary, .. }) = self.project_callee(expr) {
                    if let Some(argument) = summary.returns_parameter.and_then(|p| self.argument_for(expr, "", Some(p))) {
                        return self.constructor_through_methods(argument, depth + 1);
                    }
                }
                // A local factory whose every `return` builds the same thing
                // (`def make(): return nn.LogSoftmax(dim=1)`): that construction.
                if let Some(def) = self.local_callee(expr) {
                    if let Some(built) = self.factory_construction(def, depth) {
                        return Some(built);
                    }
                }
                Some(expr)
            }
            // `nets[0]`, `nets["d"]` of a container bound once to a literal: that element.
            "subscript" => {
                let element = self.literal_element(expr)?;
                self.constructor_through_methods(element, depth + 1)
            }
            _ => None,
        }
    }

    /// The construction every `return` of the local function `def` gives, when they all
    /// give one with the same callee.
    fn factory_construction(&self, def: Node<'t>, depth: usize) -> Option<Node<'t>> {
        let mut built: Option<Node<'t>> = None;
        for statement in self.returns.get(&def.id())? {
            let value = statement.named_child(0)?;
            let call = self.constructor_through_methods(value, depth + 1)?;
            let callee = |c: Node<'t>| self.field(c, "function").map(|f| self.text(f));
            match built {
                Some(previous) if callee(previous) != callee(call) => return None,
                _ => built = Some(call),
            }
        }
        built
    }

    /// The element `container[key]` names when the container is a name bound once to a
    /// list, tuple or dict literal and the key is a literal (`nets[0]`, `nets["g"]`).
    pub(crate) fn literal_element(&self, subscript: Node<'t>) -> Option<Node<'t>> {
        let container = unparenthesize(self.field(subscript, "value")?);
        let key = unparenthesize(self.field(subscript, "subscript")?);
        if container.kind_name() != "identifier" {
            return None;
        }
        let binding = self.binding_at(self.text(container), container)?;
        if binding.kind != BindingKind::Assign || self.bindings_in_scope(self.text(container), binding.statement).len() != 1 {
            return None;
        }
        let literal = unparenthesize(binding.value?);
        match literal.kind_name() {
            "list" | "tuple" if key.kind_name() == "integer" => {
                let index: usize = self.text(key).parse().ok()?;
                let elements = self.named_children(literal);
                if elements.iter().any(|e| matches!(e.kind_name(), "list_splat" | "comment")) {
                    return None;
                }
                elements.get(index).copied()
            }
            "dictionary" if key.kind_name() == "string" => self.named_children(literal)
                .into_iter()
                .filter(|p| p.kind_name() == "pair")
                .find(|p| p.field("key").is_some_and(|k| self.text(k) == self.text(key)))
                .and_then(|p| self.field(p, "value")),
            _ => None,
        }
    }

    /// The class of the project whose constructor `call` is: its callee resolves to a
    /// class of the project, directly or through a name bound to one (`net = BetaVAE_H`,
    /// then `net(z_dim)`).
    pub(crate) fn project_class_built_by(&self, call: Node<'t>) -> Option<crate::Symbol> {
        if let Some(symbol @ crate::Symbol::Class { .. }) = self.project_callee(call) {
            return Some(symbol);
        }
        let mut callee = self.field(call, "function")?;
        for _ in 0..4 {
            if callee.kind_name() != "identifier" {
                return None;
            }
            let binding = self.binding_at(self.text(callee), callee)?;
            match (binding.kind, binding.value) {
                (BindingKind::Assign, Some(value)) => callee = unparenthesize(value),
                _ => {
                    let qualified = self.qualified_name(callee)?;
                    return match self.project_symbol(&qualified)? {
                        symbol @ crate::Symbol::Class { .. } => Some(symbol),
                        _ => None,
                    };
                }
            }
            if let Some(qualified) = self.qualified_name(callee) {
                return match self.project_symbol(&qualified)? {
                    symbol @ crate::Symbol::Class { .. } => Some(symbol),
                    _ => None,
                };
            }
        }
        None
    }
}
