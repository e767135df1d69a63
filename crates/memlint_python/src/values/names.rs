//! Values of names: what a binding gives a name (an assignment, a loop target, a
//! parameter from what every caller passes, `self`), followed through tuple targets,
//! containers and the elements of loops (`zip`, `enumerate`, `items`, `next`).

use tree_sitter::Node;

use super::*;
use crate::library::{self, Call};
use crate::NodeExt;

impl<'t> SemanticModel<'t> {
    pub(super) fn identifier_value(&self, expr: Node<'t>, depth: usize) -> Value<'t> {
        let d = depth + 1;
        let name = self.text(expr);
        if name == "self" {
            return self.self_value(expr);
        }
        let from_binding = match self.binding_at(name, expr) {
            Some(binding) => {
                let binding = *binding;
                match (binding.kind, binding.value) {
                    (BindingKind::Assign, Some(value)) | (BindingKind::WithTarget, Some(value)) => self.assigned_value(name, &binding, value, d),
                    (BindingKind::AugAssign, Some(value)) => {
                        // `x += y`: the value of x before, combined with y.
                        let before = self
                            .bindings_in_scope(name, expr)
                            .iter()
                            .rev()
                            .find(|b| b.position < binding.position && b.kind != BindingKind::AugAssign)
                            .and_then(|b| b.value)
                            .map(|v| (self.value_at_depth(v, d), v));
                        match before {
                            Some(before) => combine_arithmetic(before, (self.value_at_depth(value, d), value)),
                            None => {
                                let v = self.value_at_depth(value, d);
                                if v.kind == ValueKind::GradTensor { Value::new(v.kind, Basis::Operand(value)) } else { Value::unknown() }
                            }
                        }
                    }
                    (BindingKind::Definition, _) => match binding.statement.kind_name() {
                        "class_definition" => {
                            let kind = if self.is_module_class(name) { ValueKind::ModuleClass } else { ValueKind::Callable };
                            Value::new(kind, Basis::Definition(binding.statement))
                        }
                        "function_definition" => Value::new(ValueKind::Callable, Basis::Definition(binding.statement)),
                        // An import: what the imported name is (a class, a function, a module).
                        _ => match self.lookup_import(name, expr) {
                            Some(qualified) => Value::new(self.imported_value(qualified), Basis::Definition(binding.statement)),
                            None => Value::new(ValueKind::Callable, Basis::Definition(binding.statement)),
                        },
                    },
                    (BindingKind::LoopTarget, _) => self.loop_target_value(name, &binding, d),
                    (BindingKind::Parameter, _) => self.parameter_value(name, &binding, d),
                    _ => Value::unknown(),
                }
            }
            // Not bound in this module: a builtin, or a name from a star import (the project
            // may know it).
            None => match self.project_symbol_spelled(name) {
                Some(crate::Symbol::Class { is_module: true, .. }) => Value::new(ValueKind::ModuleClass, Basis::Project(expr)),
                Some(crate::Symbol::Class { .. } | crate::Symbol::Function { .. } | crate::Symbol::Module) => {
                    Value::new(ValueKind::Callable, Basis::Project(expr))
                }
                None => Value::unknown(),
            },
        };
        if from_binding.kind != ValueKind::Unknown {
            return from_binding;
        }
        // Backpropagated through this binding (`loss.backward()`): a tensor with history.
        if let Some(use_) = self.backward_use(expr) {
            return Value::new(ValueKind::GradTensor, Basis::Backpropagated(use_));
        }
        // What is done with the name: `x.eval()`, `x.parameters()` only exist on modules (in
        // the function; a lambda's parameter or a comprehension's target of the same name is
        // another value).
        let bound_locally = || self.local_scopes_of(expr).any(|id| self.bindings_of(Some(id), name).is_some());
        if bound_locally() {
            return Value::unknown();
        }
        // Uses where the name is read, and, for a global read in a function, uses where it
        // is bound (`net.eval()` at module level, `net(x)` in `main()`).
        let here = self.scope_of(expr);
        let bound_in = self.binding_at(name, expr).map(|b| self.scope_of(b.statement)).filter(|s| *s != here);
        for scope in std::iter::once(here).chain(bound_in) {
            if let Some(use_) = self.module_use(scope, name) {
                return Value::new(ValueKind::Model, Basis::Used(use_));
            }
            if let Some(use_) = self.optimizer_use(scope, name) {
                return Value::new(ValueKind::Optimizer, Basis::Used(use_));
            }
        }
        Value::unknown()
    }

    /// `self` in a method: an instance of its class; a network when the class is a module.
    pub(super) fn self_value(&self, expr: Node<'t>) -> Value<'t> {
        let Some(function) = self.enclosing_function(expr) else { return Value::unknown() };
        let Some(class) = function.class.as_deref() else { return Value::unknown() };
        if !self.is_module_class(class) {
            return Value::unknown();
        }
        let def = self.bindings_of(None, class).and_then(|bs| bs.iter().rev().find(|b| b.statement.kind_name() == "class_definition"));
        Value::new(ValueKind::Model, def.map(|b| Basis::Definition(b.statement)).unwrap_or(Basis::None))
    }

    /// The value of `name` bound by an assignment (or `with ... as name`) to `value`: a
    /// tuple target takes the element at its place when the right side is a display or a
    /// call that returns its arguments (`model, opt = accelerator.prepare(model, opt)`), else
    /// the kind of the whole value.
    pub(super) fn assigned_value(&self, name: &str, binding: &Binding<'t>, value: Node<'t>, depth: usize) -> Value<'t> {
        if let Some(index) = self.target_index(binding.statement, name) {
            let value = unparenthesize(value);
            let elements: Option<Vec<Node<'t>>> = match value.kind_name() {
                "tuple" | "list" | "expression_list" => Some(self.named_children(value)),
                "call" if self.returns_its_arguments(value) => self.field(value, "arguments").map(|a| {
                    self.named_children(a).into_iter().filter(|x| !matches!(x.kind_name(), "keyword_argument" | "comment")).collect()
                }),
                _ => None,
            };
            if let Some(elements) = elements {
                return match elements.get(index) {
                    Some(element) => self.value_at_depth(*element, depth).via(Basis::From(*element)),
                    None => Value::unknown(),
                };
            }
            // `model, opt = setup()`: the element a function returns at that place.
            if value.kind_name() == "call" {
                if let Some(element) = self.returned_element(value, index, depth) {
                    return element;
                }
            }
        }
        self.value_at_depth(value, depth).via(Basis::From(value))
    }

    /// The element at `index` of the tuple `call` returns: a local function's `return a, b`
    /// (joined over its returns), or what the project says a project function's elements are.
    pub(super) fn returned_element(&self, call: Node<'t>, index: usize, depth: usize) -> Option<Value<'t>> {
        if let Some(def) = self.local_callee(call) {
            let mut joined: Option<Value<'t>> = None;
            for value in self.returns.get(&def.id())?.iter().filter_map(|r| r.named_child(0)).map(unparenthesize) {
                if !matches!(value.kind_name(), "expression_list" | "tuple") {
                    return None;
                }
                let element = *self.named_children(value).get(index)?;
                let v = Value::new(self.value_kind_at_depth(element, depth + 1), Basis::Returned(element));
                joined = Some(match joined {
                    None => v,
                    Some(seen) => join(seen, v, false),
                });
            }
            return joined.filter(|v| v.kind != ValueKind::Unknown);
        }
        match self.project_callee(call)? {
            crate::Symbol::Function { returned_elements, .. } => {
                let kind = match (*returned_elements.get(index)?)? {
                    crate::Returned::Network | crate::Returned::FrozenNetwork => ValueKind::Model,
                    crate::Returned::Loss => ValueKind::Loss,
                    crate::Returned::Optimizer => ValueKind::Optimizer,
                    crate::Returned::Scaler => ValueKind::Scaler,
                    crate::Returned::Loader => ValueKind::DataLoader,
                };
                Some(Value::new(kind, Basis::Project(call)))
            }
            _ => None,
        }
    }

    /// `accelerator.prepare(...)`, `deepspeed.initialize(...)`: the arguments come back in
    /// order.
    pub(super) fn returns_its_arguments(&self, call: Node<'t>) -> bool {
        let Some(callee) = self.field(call, "function") else { return false };
        if let Some(q) = self.qualified_name(callee) {
            return library::call_model(&q) == Some(Call::ReturnsArguments);
        }
        callee.kind_name() == "attribute"
            && self.field(callee, "attribute").is_some_and(|a| self.text(a) == "prepare")
            && self.field(callee, "object").is_some_and(|o| {
                let o = unparenthesize(o);
                o.kind_name() == "identifier"
                    && self.binding_at(self.text(o), o).and_then(|b| b.value).is_some_and(|v| {
                        let v = unparenthesize(v);
                        v.kind_name() == "call" && self.field(v, "function").and_then(|f| self.qualified_name(f)).is_some_and(|q| q.ends_with(".Accelerator"))
                    })
            })
    }

    /// The place of `name` in the tuple target of an assignment statement (`a, b = ...`).
    pub(crate) fn target_index(&self, statement: Node<'t>, name: &str) -> Option<usize> {
        let assignment = if statement.kind_name() == "expression_statement" { statement.named_child(0)? } else { statement };
        if assignment.kind_name() != "assignment" {
            return None;
        }
        let left = self.field(assignment, "left")?;
        if !matches!(left.kind_name(), "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple" | "list") {
            return None;
        }
        self.named_children(left).iter().position(|t| t.kind_name() == "identifier" && self.text(*t) == name)
    }

    /// A parameter's value: what the callers of its function in this module pass for it.
    /// The callers whose arguments have a known value decide, and they must agree (a
    /// tensor with history and one without join as one with). `self` of a method is an
    /// instance of its class.
    pub(super) fn parameter_value(&self, name: &str, binding: &Binding<'t>, depth: usize) -> Value<'t> {
        let Some((info, parameters, position)) = self.parameter_site(binding) else { return Value::unknown() };
        let def = info.node;
        if parameters[..position].iter().any(|p| parameter_name(*p).is_none()) {
            return Value::unknown();
        }
        let is_method = info.class.is_some() && !self.is_static_method(info);
        if is_method && position == 0 {
            return self.self_value(self.field(def, "body").unwrap_or(def));
        }
        let position = position - usize::from(is_method);
        let mut joined: Option<Value<'t>> = None;
        for call in self.calls_of_function(info) {
            let Some(argument) = self.argument_for(call, name, Some(position)) else { continue };
            let value = self.value_at_depth(argument, depth);
            if value.kind == ValueKind::Unknown {
                continue;
            }
            let value = Value::new(value.kind, Basis::Passed(argument));
            joined = Some(match joined {
                None => value,
                Some(seen) => join(seen, value, false),
            });
            if joined.is_some_and(|j| j.kind == ValueKind::Unknown) {
                return Value::unknown();
            }
        }
        if joined.is_none() {
            // No caller here: pytest calls tests and fixtures with the fixtures their
            // parameters name.
            if let Some(fixture) = self.pytest_fixture(name) {
                let value = self.function_return_value(fixture, depth + 1);
                if value.kind != ValueKind::Unknown {
                    return Value::new(value.kind, Basis::Fixture(fixture));
                }
            }
        }
        joined.unwrap_or(Value::unknown())
    }

    /// The function of this module named `name` and decorated `@pytest.fixture` (or
    /// `@pytest.fixture(...)`), which pytest calls for a parameter of that name.
    fn pytest_fixture(&self, name: &str) -> Option<Node<'t>> {
        let binding = self.bindings_of(None, name)?.iter().rev().find(|b| b.statement.kind_name() == "function_definition")?;
        let info = self.functions.get(&binding.statement.id())?;
        info.decorators
            .iter()
            .any(|d| {
                let callee = if d.kind_name() == "call" { d.field("function").unwrap_or(*d) } else { *d };
                self.qualified_name(callee).as_deref() == Some("pytest.fixture")
            })
            .then_some(binding.statement)
    }

    /// The function a parameter binding belongs to, its parameters, and the binding's
    /// position among them.
    pub(super) fn parameter_site(&self, binding: &Binding<'t>) -> Option<(&FunctionInfo<'t>, Vec<Node<'t>>, usize)> {
        let params = self.parent(binding.statement).filter(|p| p.kind_name() == "parameters")?;
        let def = self.parent(params).filter(|d| d.kind_name() == "function_definition")?;
        let info = self.functions.get(&def.id())?;
        let parameters = self.named_children(params);
        let position = parameters.iter().position(|p| p.id() == binding.statement.id())?;
        Some((info, parameters, position))
    }

    pub(super) fn is_classmethod(&self, info: &FunctionInfo<'t>) -> bool {
        info.decorators.iter().any(|d| self.text(*d) == "classmethod")
    }

    pub(super) fn is_static_method(&self, info: &FunctionInfo<'t>) -> bool {
        info.decorators.iter().any(|d| matches!(self.text(*d), "staticmethod" | "classmethod"))
    }

    /// The calls in this module of the function `info`: `f(...)` whose callee resolves to
    /// it; for a method of class `C`, `self.f(...)` in a method of `C` (or of a class
    /// deriving it here) and `x.f(...)` where `x` holds an instance of `C`.
    pub fn calls_of_function(&self, info: &FunctionInfo<'t>) -> Vec<Node<'t>> {
        if let Some(calls) = self.function_calls.borrow().get(&info.node.id()) {
            return calls.clone();
        }
        let calls = self.find_calls_of_function(info);
        self.function_calls.borrow_mut().insert(info.node.id(), calls.clone());
        calls
    }

    fn find_calls_of_function(&self, info: &FunctionInfo<'t>) -> Vec<Node<'t>> {
        // `Trainer(model, opt)` calls `Trainer.__init__`.
        if info.name == "__init__" {
            if let Some(class) = &info.class {
                if !self.method_of(class, "__init__").is_some_and(|m| m.id() == info.node.id()) {
                    return Vec::new();
                }
                return self
                    .calls_named(class)
                    .iter()
                    .copied()
                    .filter(|call| match self.call_target(*call) {
                        CallTarget::Name(Some(statement)) => statement.kind_name() == "class_definition",
                        _ => false,
                    })
                    .collect();
            }
        }
        let id = info.node.id();
        self.calls_named(&info.name)
            .iter()
            .copied()
            .filter(|call| match (self.call_target(*call), &info.class) {
                (CallTarget::Name(statement), None) => statement.is_some_and(|s| s.id() == id),
                (CallTarget::SelfMethod(method), Some(_)) => method == Some(id),
                (CallTarget::Receiver(receiver, method), Some(class)) => receiver == class.as_str() || method == Some(id),
                _ => false,
            })
            .collect()
    }

    /// What the callee of `call` resolves to, worked out once per call.
    fn call_target(&self, call: Node<'t>) -> CallTarget<'t> {
        if let Some(known) = self.call_targets.borrow().get(&call.id()) {
            return *known;
        }
        let target = self.find_call_target(call);
        self.call_targets.borrow_mut().insert(call.id(), target);
        target
    }

    fn find_call_target(&self, call: Node<'t>) -> CallTarget<'t> {
        let Some(callee) = self.field(call, "function") else { return CallTarget::Other };
        match callee.kind_name() {
            "identifier" => CallTarget::Name(self.binding_at(self.text(callee), callee).map(|b| b.statement)),
            "attribute" => {
                let (Some(receiver), Some(attribute)) = (self.field(callee, "object"), self.field(callee, "attribute")) else { return CallTarget::Other };
                let name = self.text(attribute);
                if self.text(receiver) == "self" {
                    let caller_class = self.enclosing_function(call).and_then(|g| g.class.clone());
                    return CallTarget::SelfMethod(caller_class.and_then(|c| self.method_of(&c, name)).map(|m| m.id()));
                }
                CallTarget::Receiver(self.text(receiver), self.instance_class(receiver).and_then(|c| self.method_of(c, name)).map(|m| m.id()))
            }
            _ => CallTarget::Other,
        }
    }

    /// The value of a loop (or comprehension) target: an element of a container of modules
    /// (`for m in models`, `for name, net in nets.items()`, `for i, layer in
    /// enumerate(self.layers)`) is a module; a batch of a `DataLoader` is a tensor without
    /// history; the elements of a display of tensors with history carry it.
    pub(super) fn loop_target_value(&self, name: &str, binding: &Binding<'t>, depth: usize) -> Value<'t> {
        let statement = binding.statement;
        let (Some(mut target), Some(mut iterable)) = (self.field(statement, "left"), self.field(statement, "right")) else {
            return Value::unknown();
        };
        let is_pattern = |t: Node<'t>| matches!(t.kind_name(), "pattern_list" | "tuple_pattern" | "list_pattern");
        // The part of the target that one element of `iterable` is bound to, as the
        // wrappers are unwrapped: `enumerate(xs)` and `xs.items()` bind the element to the
        // second name, `zip(a, b)` binds an element of each to its own name.
        let mut unwrapped = false;
        // Iterating a dict's keys, not its values (`for k in d:`).
        let mut over_values = false;
        for _ in 0..6 {
            iterable = unparenthesize(iterable);
            if iterable.kind_name() != "call" {
                break;
            }
            let Some(callee) = self.field(iterable, "function") else { break };
            let arguments: Vec<Node<'t>> = self.field(iterable, "arguments").map(named_children).unwrap_or_default();
            match callee.kind_name() {
                "identifier" => match self.text(callee) {
                    "tqdm" | "iter" | "list" | "reversed" | "sorted" | "tuple" => match arguments.first() {
                        Some(inner) => iterable = *inner,
                        None => return Value::unknown(),
                    },
                    "enumerate" => {
                        let (Some(inner), true) = (arguments.first(), is_pattern(target)) else { return Value::unknown() };
                        let parts = self.named_children(target);
                        let [_, element] = parts[..] else { return Value::unknown() };
                        iterable = *inner;
                        target = element;
                        unwrapped = true;
                    }
                    "zip" if is_pattern(target) => {
                        let parts = self.named_children(target);
                        if parts.len() != arguments.len() {
                            return Value::unknown();
                        }
                        let Some(i) = parts.iter().position(|p| p.id() == binding_target(self, *p, name).id() || contains(*p, binding_target(self, *p, name))) else {
                            return Value::unknown();
                        };
                        iterable = arguments[i];
                        target = parts[i];
                        unwrapped = true;
                    }
                    _ => break,
                },
                "attribute" => {
                    let method = self.field(callee, "attribute").map(|a| self.text(a)).unwrap_or("");
                    let Some(object) = self.field(callee, "object") else { return Value::unknown() };
                    match method {
                        "values" | "children" | "modules" => {
                            iterable = object;
                            over_values = true;
                        }
                        "items" | "named_children" | "named_modules" => {
                            let parts = self.named_children(target);
                            let ([_, element], true) = (&parts[..], is_pattern(target)) else { return Value::unknown() };
                            iterable = object;
                            target = *element;
                            over_values = true;
                            unwrapped = true;
                        }
                        _ => break,
                    }
                    break;
                }
                _ => break,
            }
        }
        let is_element = target.kind_name() == "identifier" && self.text(target) == name;
        let of = self.value_at_depth(iterable, depth);
        match of.kind {
            ValueKind::Model | ValueKind::Loss | ValueKind::Optimizer if is_element => {
                return Value::new(of.kind, Basis::Element(iterable));
            }
            // A batch: tensors (or a tuple or dict of them) without history.
            ValueKind::DataLoader if is_element || contains(target, binding_target(self, target, name)) => {
                return Value::new(ValueKind::PlainTensor, Basis::Element(iterable));
            }
            _ => {}
        }
        // A dict, list or tuple built here of tensors with history (`terms = {"ce": ce,
        // "l2": l2}`, then `for name, term in terms.items():`).
        if is_element || (unwrapped && target.kind_name() == "identifier") {
            if let Some(element) = self.literal_element_with_history(iterable, over_values, binding.statement, depth) {
                return Value::new(ValueKind::GradTensor, Basis::Element(element));
            }
        }
        Value::unknown()
    }

    /// Is `iterable` a name bound once in its scope, before `at`, to a dict (iterated over
    /// its values), list or tuple display whose every element carries autograd history?
    /// Gives its first element.
    pub(super) fn literal_element_with_history(&self, iterable: Node<'t>, over_values: bool, at: Node<'t>, depth: usize) -> Option<Node<'t>> {
        if iterable.kind_name() != "identifier" {
            return None;
        }
        let name = self.text(iterable);
        let [binding] = self.bindings_in_scope(name, iterable) else { return None };
        let (BindingKind::Assign, Some(value)) = (binding.kind, binding.value) else { return None };
        if binding.position > at.start_byte() {
            return None;
        }
        let value = unparenthesize(value);
        let elements: Vec<Node<'t>> = match (value.kind_name(), over_values) {
            ("dictionary", true) => {
                self.named_children(value).into_iter().map(|p| if p.kind_name() == "pair" { self.field(p, "value") } else { None }).collect::<Option<Vec<_>>>()?
            }
            ("list" | "tuple", false) => self.named_children(value),
            _ => return None,
        };
        (!elements.is_empty() && elements.iter().all(|e| self.value_kind_at_depth(*e, depth + 1) == ValueKind::GradTensor)).then(|| elements[0])
    }

    /// What an imported name is, by its fully qualified name: a class or factory that builds
    /// a network, another class or function of the project or a library. Never a module
    /// instance: calling it is not a forward pass.
    pub fn imported_value(&self, qualified: &str) -> ValueKind {
        if library::module_factory(qualified) || library::library_module_class(qualified) {
            return ValueKind::ModuleClass;
        }
        if let Some(crate::Symbol::Class { is_module: true, .. }) = self.project_symbol(qualified) {
            return ValueKind::ModuleClass;
        }
        ValueKind::Callable
    }
}

/// What the callee of a call resolves to (see [`SemanticModel::calls_of_function`]).
#[derive(Clone, Copy)]
pub(crate) enum CallTarget<'t> {
    /// `f(...)`: the statement of the binding of `f` in effect there.
    Name(Option<Node<'t>>),
    /// `self.f(...)`: the method `f` (its node id) of the caller's class.
    SelfMethod(Option<usize>),
    /// `x.f(...)`: `x`'s text (`C.f(...)` calls a method of the class named `C`) and the
    /// method `f` (its node id) of the class `x` holds an instance of.
    Receiver(&'t str, Option<usize>),
    /// Any other callee.
    Other,
}
