//! Values: what an expression holds (a network, a loss module, a tensor with or without
//! autograd history, a number, an optimizer, a value of another framework...), decided from
//! how it was built and where it flows, never from how it is spelled (issue 32).
//!
//! Evidence comes from construction (`Net()` of a class deriving `torch.nn.Module`, a
//! library call the table in `library.rs` models), from flow (an assignment, what every
//! caller of a function passes for a parameter, what a function returns, the element of a
//! container) and from use (`x.eval()`, `x.parameters()`: only a module has them). Each
//! value carries the [`Basis`] it rests on, so that a finding can say why
//! (`evidence.rs`). What none of these decide stays [`ValueKind::Unknown`], and no rule
//! reports on an unknown value alone.

use rustc_hash::FxHashMap as HashMap;
use tree_sitter::Node;

use crate::library::{self, Call};
use crate::semantic::*;
use crate::NodeExt;

/// How deep a value is followed through bindings, calls and callers.
const MAX_DEPTH: usize = 24;

/// The fact a value rests on: the node that decided it, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis<'t> {
    /// Nothing decides it.
    None,
    /// A literal.
    Literal,
    /// Built by this call: a class or factory call (a network, a loss, an optimizer).
    Built(Node<'t>),
    /// A library call whose behaviour is modelled (`torch.randn`, `np.asarray`).
    Library(Node<'t>),
    /// The output of this forward pass.
    Forward(Node<'t>),
    /// What this expression holds (an assignment's value, an alias, a method returning
    /// its object).
    From(Node<'t>),
    /// What a caller passes for a parameter: this argument.
    Passed(Node<'t>),
    /// A method only modules have is called on it: this call (`x.eval()`).
    Used(Node<'t>),
    /// An element of this container.
    Element(Node<'t>),
    /// What a function returns: this value.
    Returned(Node<'t>),
    /// Arithmetic with this operand, which carries autograd history.
    Operand(Node<'t>),
    /// A definition: a `def`, a `class` or an import.
    Definition(Node<'t>),
    /// The project's other modules decide (an imported class or factory): this call or name.
    Project(Node<'t>),
}

/// What an expression holds, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value<'t> {
    pub kind: ValueKind,
    pub basis: Basis<'t>,
}

impl<'t> Value<'t> {
    pub(crate) const UNKNOWN: Value<'static> = Value { kind: ValueKind::Unknown, basis: Basis::None };

    fn new(kind: ValueKind, basis: Basis<'t>) -> Value<'t> {
        Value { kind, basis }
    }

    fn unknown() -> Value<'t> {
        Value { kind: ValueKind::Unknown, basis: Basis::None }
    }

    /// The same kind, resting on `basis`.
    fn via(self, basis: Basis<'t>) -> Value<'t> {
        if self.kind == ValueKind::Unknown { self } else { Value { kind: self.kind, basis } }
    }

    fn is_tensor(self) -> bool {
        matches!(self.kind, ValueKind::GradTensor | ValueKind::PlainTensor)
    }
}

/// Two values reaching one place (branches of a conditional, the callers of a function):
/// the same kind stays; a tensor with history wins over one without (it may carry
/// history); anything else is unknown. An unknown side is ignored only where the caller
/// says so (`ignore_unknown`: the callers whose values are known decide).
fn join<'t>(a: Value<'t>, b: Value<'t>, ignore_unknown: bool) -> Value<'t> {
    use ValueKind::*;
    match (a.kind, b.kind) {
        (x, y) if x == y => a,
        (Unknown, _) if ignore_unknown => b,
        (_, Unknown) if ignore_unknown => a,
        (GradTensor, PlainTensor) => a,
        (PlainTensor, GradTensor) => b,
        _ => Value::unknown(),
    }
}

/// Arithmetic on two values.
fn combine_arithmetic<'t>(left: (Value<'t>, Node<'t>), right: (Value<'t>, Node<'t>)) -> Value<'t> {
    use ValueKind::*;
    let ((l, ln), (r, rn)) = (left, right);
    match (l.kind, r.kind) {
        (GradTensor, _) => Value::new(GradTensor, Basis::Operand(ln)),
        (_, GradTensor) => Value::new(GradTensor, Basis::Operand(rn)),
        (Foreign, _) => Value::new(Foreign, Basis::Operand(ln)),
        (_, Foreign) => Value::new(Foreign, Basis::Operand(rn)),
        (PlainTensor, _) => Value::new(PlainTensor, Basis::Operand(ln)),
        (_, PlainTensor) => Value::new(PlainTensor, Basis::Operand(rn)),
        (Number, Number) => Value::new(Number, Basis::Operand(ln)),
        _ => Value::unknown(),
    }
}

impl<'t> SemanticModel<'t> {
    /// What `expr` holds, and the fact that decides it.
    pub fn value(&self, expr: Node<'t>) -> Value<'t> {
        self.value_at_depth(expr, 0)
    }

    /// What `expr` holds, taking the gradient context at `expr` into account.
    pub fn value_kind(&self, expr: Node<'t>) -> ValueKind {
        self.value(expr).kind
    }

    /// Does `expr` hold a tensor with autograd history?
    pub fn has_autograd_history(&self, expr: Node<'t>) -> bool {
        self.value_kind(expr) == ValueKind::GradTensor
    }

    pub(crate) fn value_kind_at_depth(&self, expr: Node<'t>, depth: usize) -> ValueKind {
        self.value_at_depth(expr, depth).kind
    }

    pub(crate) fn value_at_depth(&self, expr: Node<'t>, depth: usize) -> Value<'t> {
        if let Some(value) = self.value_cache.borrow().get(&expr.id()) {
            return *value;
        }
        if depth > MAX_DEPTH {
            return Value::unknown();
        }
        // A cycle (a parameter whose caller passes the function's own result, `x = x + 1`
        // in broken code) meets this placeholder and stays unknown.
        self.value_cache.borrow_mut().insert(expr.id(), Value::unknown());
        let value = self.compute_value(expr, depth);
        self.value_cache.borrow_mut().insert(expr.id(), value);
        value
    }

    /// A tensor that records history here, or one that does not (the gradient context at `at`).
    pub(crate) fn grad_or_plain(&self, at: Node<'t>) -> ValueKind {
        if self.grad_context(at).is_disabled() {
            ValueKind::PlainTensor
        } else {
            ValueKind::GradTensor
        }
    }

    fn forward_output(&self, call: Node<'t>) -> Value<'t> {
        Value::new(self.grad_or_plain(call), Basis::Forward(call))
    }

    fn compute_value(&self, expr: Node<'t>, depth: usize) -> Value<'t> {
        let d = depth + 1;
        match expr.kind_name() {
            "parenthesized_expression" | "await" => {
                expr.named_child(0).map(|e| self.value_at_depth(e, d).via(Basis::From(e))).unwrap_or(Value::unknown())
            }
            "integer" | "float" | "true" | "false" => Value::new(ValueKind::Number, Basis::Literal),
            "unary_operator" | "not_operator" => expr.field("argument").map(|e| self.value_at_depth(e, d)).unwrap_or(Value::unknown()),
            "binary_operator" => {
                let (Some(left), Some(right)) = (expr.field("left"), expr.field("right")) else { return Value::unknown() };
                // `"%d" % x` formats a string: a Python scalar, whatever it formats.
                if matches!(left.kind_name(), "string" | "concatenated_string") {
                    return Value::new(ValueKind::Number, Basis::Operand(left));
                }
                combine_arithmetic((self.value_at_depth(left, d), left), (self.value_at_depth(right, d), right))
            }
            "conditional_expression" => {
                // `a if condition else b`: the branches joined (`None` is no value).
                let parts = named_children(expr);
                let branches: Vec<Node<'t>> =
                    [parts.first(), parts.get(2)].into_iter().flatten().copied().filter(|b| b.kind_name() != "none").collect();
                let mut values = branches.iter().map(|b| self.value_at_depth(*b, d).via(Basis::From(*b)));
                let first = values.next().unwrap_or(Value::unknown());
                values.fold(first, |acc, v| join(acc, v, false))
            }
            "boolean_operator" => {
                let (Some(left), Some(right)) = (expr.field("left"), expr.field("right")) else { return Value::unknown() };
                join(self.value_at_depth(left, d).via(Basis::From(left)), self.value_at_depth(right, d).via(Basis::From(right)), false)
            }
            "subscript" => {
                let Some(container) = expr.field("value") else { return Value::unknown() };
                let of = self.value_at_depth(container, d);
                match of.kind {
                    ValueKind::GradTensor | ValueKind::PlainTensor | ValueKind::Foreign => of.via(Basis::From(container)),
                    // An element of a container of networks (`nets["G"]`, `self.blocks[i]`).
                    ValueKind::Model | ValueKind::Loss => Value::new(of.kind, Basis::Element(container)),
                    _ => self.constant_element_value(expr, d),
                }
            }
            "identifier" => self.identifier_value(expr, depth),
            // A container of networks (`[netG, netD]`, `{"G": G}`, `[Net() for _ in
            // range(k)]`, `return enc, dec`) holds networks: indexing and iterating it give
            // networks. Other containers stay unknown.
            "list" | "tuple" | "expression_list" | "set" => {
                let elements = named_children(expr);
                self.all_elements(&elements, d)
            }
            "dictionary" => {
                let values: Vec<Node<'t>> = named_children(expr).into_iter().filter_map(|p| p.field("value")).collect();
                self.all_elements(&values, d)
            }
            "list_comprehension" | "generator_expression" | "set_comprehension" => match expr.field("body") {
                Some(body) => self.all_elements(&[body], d),
                None => Value::unknown(),
            },
            "dictionary_comprehension" => match expr.field("body").and_then(|p| p.field("value")) {
                Some(body) => self.all_elements(&[body], d),
                None => Value::unknown(),
            },
            "lambda" => Value::new(ValueKind::Callable, Basis::Definition(expr)),
            "attribute" => self.attribute_value(expr, depth),
            "call" => self.call_value(expr, depth),
            _ => Value::unknown(),
        }
    }

    /// A container whose every element is a network (or loss module) holds networks.
    fn all_elements(&self, elements: &[Node<'t>], depth: usize) -> Value<'t> {
        if elements.is_empty() {
            return Value::unknown();
        }
        let first = self.value_at_depth(elements[0], depth);
        if (first.kind.is_module() || first.kind == ValueKind::Optimizer) && elements.iter().all(|e| self.value_kind_at_depth(*e, depth) == first.kind) {
            return Value::new(first.kind, Basis::From(elements[0]));
        }
        Value::unknown()
    }

    fn identifier_value(&self, expr: Node<'t>, depth: usize) -> Value<'t> {
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

    /// An object on which both `.zero_grad()` and `.step()` are called in `scope` (a
    /// module has no `step`, a scheduler no `zero_grad`), or whose `.param_groups` are read:
    /// an optimizer by what is done with it. Gives the `step` call (or the attribute).
    pub(crate) fn optimizer_use(&self, scope: ScopeId, name: &str) -> Option<Node<'t>> {
        let uses = self.optimizers_by_use.get_or_init(|| {
            let on = |call: &Node<'t>| -> Option<(ScopeId, &'t str)> {
                let object = unparenthesize(call.field("function")?.field("object")?);
                match object.kind_name() {
                    "identifier" => Some((self.scope_of(*call), self.text(object))),
                    "attribute" if object.field("object").is_some_and(|o| self.text(o) == "self") => Some((None, self.text(object))),
                    _ => None,
                }
            };
            let zeroed: HashMap<(ScopeId, &'t str), Node<'t>> = self.calls_named("zero_grad").iter().filter_map(|c| Some((on(c)?, *c))).collect();
            let mut uses: HashMap<(ScopeId, &'t str), Node<'t>> = HashMap::default();
            for step in self.calls_named("step") {
                if let Some(key) = on(step) {
                    if zeroed.contains_key(&key) {
                        uses.entry(key).or_insert(*step);
                    }
                }
            }
            for attribute in self.attributes_named_in("param_groups", 0..self.source().len()) {
                if let Some(object) = attribute.field("object").map(unparenthesize) {
                    let key = match object.kind_name() {
                        "identifier" => (self.scope_of(*attribute), self.text(object)),
                        "attribute" if object.field("object").is_some_and(|o| self.text(o) == "self") => (None, self.text(object)),
                        _ => continue,
                    };
                    uses.entry(key).or_insert(*attribute);
                }
            }
            uses
        });
        uses.get(&(scope, name)).copied()
    }

    /// `self` in a method: an instance of its class; a network when the class is a module.
    fn self_value(&self, expr: Node<'t>) -> Value<'t> {
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
    fn assigned_value(&self, name: &str, binding: &Binding<'t>, value: Node<'t>, depth: usize) -> Value<'t> {
        if let Some(index) = self.target_index(binding.statement, name) {
            let value = unparenthesize(value);
            let elements: Option<Vec<Node<'t>>> = match value.kind_name() {
                "tuple" | "list" | "expression_list" => Some(named_children(value)),
                "call" if self.returns_its_arguments(value) => value.field("arguments").map(|a| {
                    named_children(a).into_iter().filter(|x| !matches!(x.kind_name(), "keyword_argument" | "comment")).collect()
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
    fn returned_element(&self, call: Node<'t>, index: usize, depth: usize) -> Option<Value<'t>> {
        if let Some(def) = self.local_callee(call) {
            let mut joined: Option<Value<'t>> = None;
            for value in self.returns.get(&def.id())?.iter().filter_map(|r| r.named_child(0)).map(unparenthesize) {
                if !matches!(value.kind_name(), "expression_list" | "tuple") {
                    return None;
                }
                let element = *named_children(value).get(index)?;
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
    fn returns_its_arguments(&self, call: Node<'t>) -> bool {
        let Some(callee) = call.field("function") else { return false };
        if let Some(q) = self.qualified_name(callee) {
            return library::call_model(&q) == Some(Call::ReturnsArguments);
        }
        callee.kind_name() == "attribute"
            && callee.field("attribute").is_some_and(|a| self.text(a) == "prepare")
            && callee.field("object").is_some_and(|o| {
                let o = unparenthesize(o);
                o.kind_name() == "identifier"
                    && self.binding_at(self.text(o), o).and_then(|b| b.value).is_some_and(|v| {
                        let v = unparenthesize(v);
                        v.kind_name() == "call" && v.field("function").and_then(|f| self.qualified_name(f)).is_some_and(|q| q.ends_with(".Accelerator"))
                    })
            })
    }

    /// The place of `name` in the tuple target of an assignment statement (`a, b = ...`).
    pub(crate) fn target_index(&self, statement: Node<'t>, name: &str) -> Option<usize> {
        let assignment = if statement.kind_name() == "expression_statement" { statement.named_child(0)? } else { statement };
        if assignment.kind_name() != "assignment" {
            return None;
        }
        let left = assignment.field("left")?;
        if !matches!(left.kind_name(), "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple" | "list") {
            return None;
        }
        named_children(left).iter().position(|t| t.kind_name() == "identifier" && self.text(*t) == name)
    }

    /// A parameter's value: what the callers of its function in this module pass for it.
    /// The callers whose arguments have a known value decide, and they must agree (a
    /// tensor with history and one without join as one with). `self` of a method is an
    /// instance of its class.
    fn parameter_value(&self, name: &str, binding: &Binding<'t>, depth: usize) -> Value<'t> {
        let Some(params) = self.parent(binding.statement).filter(|p| p.kind_name() == "parameters") else { return Value::unknown() };
        let Some(def) = self.parent(params).filter(|d| d.kind_name() == "function_definition") else { return Value::unknown() };
        let Some(info) = self.functions.get(&def.id()) else { return Value::unknown() };
        let parameters = named_children(params);
        let Some(position) = parameters.iter().position(|p| p.id() == binding.statement.id()) else { return Value::unknown() };
        if parameters[..position].iter().any(|p| parameter_name(*p).is_none()) {
            return Value::unknown();
        }
        let is_method = info.class.is_some() && !self.is_static_method(info);
        if is_method && position == 0 {
            return self.self_value(def.field("body").unwrap_or(def));
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
        joined.unwrap_or(Value::unknown())
    }

    fn is_static_method(&self, info: &FunctionInfo<'t>) -> bool {
        info.decorators.iter().any(|d| matches!(self.text(*d), "staticmethod" | "classmethod"))
    }

    /// The calls in this module of the function `info`: `f(...)` whose callee resolves to
    /// it; for a method of class `C`, `self.f(...)` in a method of `C` (or of a class
    /// deriving it here) and `x.f(...)` where `x` holds an instance of `C`.
    pub fn calls_of_function(&self, info: &FunctionInfo<'t>) -> Vec<Node<'t>> {
        // `Trainer(model, opt)` calls `Trainer.__init__`.
        if info.name == "__init__" {
            if let Some(class) = &info.class {
                return self
                    .calls_named(class)
                    .iter()
                    .copied()
                    .filter(|call| {
                        call.field("function").is_some_and(|c| {
                            c.kind_name() == "identifier"
                                && self.binding_at(self.text(c), c).is_some_and(|b| b.statement.kind_name() == "class_definition")
                                && self.method_of(class, "__init__").is_some_and(|m| m.id() == info.node.id())
                        })
                    })
                    .collect();
            }
        }
        self.calls_named(&info.name)
            .iter()
            .copied()
            .filter(|call| {
                let Some(callee) = call.field("function") else { return false };
                match (callee.kind_name(), &info.class) {
                    ("identifier", None) => self.binding_at(self.text(callee), callee).is_some_and(|b| b.statement.id() == info.node.id()),
                    ("attribute", Some(class)) => {
                        let Some(receiver) = callee.field("object") else { return false };
                        if self.text(receiver) == "self" {
                            let caller_class = self.enclosing_function(*call).and_then(|g| g.class.clone());
                            return caller_class.is_some_and(|c| self.method_of(&c, &info.name).is_some_and(|m| m.id() == info.node.id()));
                        }
                        if self.text(receiver) == class.as_str() {
                            return true;
                        }
                        self.instance_class(receiver).is_some_and(|c| self.method_of(c, &info.name).is_some_and(|m| m.id() == info.node.id()))
                    }
                    _ => false,
                }
            })
            .collect()
    }

    /// The value of a loop (or comprehension) target: an element of a container of modules
    /// (`for m in models`, `for name, net in nets.items()`, `for i, layer in
    /// enumerate(self.layers)`) is a module; a batch of a `DataLoader` is a tensor without
    /// history; the elements of a display of tensors with history carry it.
    fn loop_target_value(&self, name: &str, binding: &Binding<'t>, depth: usize) -> Value<'t> {
        let statement = binding.statement;
        let (Some(mut target), Some(mut iterable)) = (statement.field("left"), statement.field("right")) else {
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
            let Some(callee) = iterable.field("function") else { break };
            let arguments: Vec<Node<'t>> = iterable.field("arguments").map(named_children).unwrap_or_default();
            match callee.kind_name() {
                "identifier" => match self.text(callee) {
                    "tqdm" | "iter" | "list" | "reversed" | "sorted" | "tuple" => match arguments.first() {
                        Some(inner) => iterable = *inner,
                        None => return Value::unknown(),
                    },
                    "enumerate" => {
                        let (Some(inner), true) = (arguments.first(), is_pattern(target)) else { return Value::unknown() };
                        let parts = named_children(target);
                        let [_, element] = parts[..] else { return Value::unknown() };
                        iterable = *inner;
                        target = element;
                        unwrapped = true;
                    }
                    "zip" if is_pattern(target) => {
                        let parts = named_children(target);
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
                    let method = callee.field("attribute").map(|a| self.text(a)).unwrap_or("");
                    let Some(object) = callee.field("object") else { return Value::unknown() };
                    match method {
                        "values" | "children" | "modules" => {
                            iterable = object;
                            over_values = true;
                        }
                        "items" | "named_children" | "named_modules" => {
                            let parts = named_children(target);
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
    fn literal_element_with_history(&self, iterable: Node<'t>, over_values: bool, at: Node<'t>, depth: usize) -> Option<Node<'t>> {
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
                named_children(value).into_iter().map(|p| if p.kind_name() == "pair" { p.field("value") } else { None }).collect::<Option<Vec<_>>>()?
            }
            ("list" | "tuple", false) => named_children(value),
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

    /// A call on `name` in `scope` of a method only modules have (`name.eval()`,
    /// `name.parameters()`, `name.load_state_dict(...)`): the first such call.
    pub(crate) fn module_use(&self, scope: ScopeId, name: &str) -> Option<Node<'t>> {
        let uses = self.modules_by_use.get_or_init(|| {
            let mut uses: HashMap<(ScopeId, &'t str), Node<'t>> = HashMap::default();
            for method in library::MODULE_ONLY_METHODS {
                for call in self.calls_named(method) {
                    let Some(object) = call.field("function").and_then(|f| f.field("object")) else { continue };
                    let object = unparenthesize(object);
                    match object.kind_name() {
                        "identifier" => {
                            uses.entry((self.scope_of(*call), self.text(object))).or_insert(*call);
                        }
                        "attribute" if object.field("object").map(|o| self.text(o) == "self").unwrap_or(false) => {
                            uses.entry((None, self.text(object))).or_insert(*call);
                        }
                        // `nets["G"].eval()`: one element of a container, in the scope the
                        // container is bound in.
                        "subscript" => {
                            if let Some(key) = self.constant_element_key(object) {
                                uses.entry(key).or_insert(*call);
                            }
                        }
                        _ => {}
                    }
                }
            }
            uses
        });
        uses.get(&(scope, name)).copied()
    }

    /// For `c["k"]` / `c[0]` (a name indexed by a literal): the scope `c` is bound in and the
    /// element's text, the key under which uses of that one element are found.
    pub(crate) fn constant_element_key(&self, subscript: Node<'t>) -> Option<(ScopeId, &'t str)> {
        let container = unparenthesize(subscript.field("value")?);
        let index = subscript.field("subscript")?;
        if container.kind_name() != "identifier" || !matches!(index.kind_name(), "string" | "integer") {
            return None;
        }
        let binding = self.binding_at(self.text(container), container)?;
        Some((self.scope_of(binding.statement), self.text(subscript)))
    }

    /// The element `c["k"]` / `c[0]` of a name bound once to a dict or list display, or,
    /// used like a module (`c["k"].eval()`), a network by use.
    fn constant_element_value(&self, subscript: Node<'t>, depth: usize) -> Value<'t> {
        let Some(container) = subscript.field("value").map(unparenthesize) else { return Value::unknown() };
        let Some(index) = subscript.field("subscript") else { return Value::unknown() };
        if container.kind_name() == "identifier" {
            if let [binding] = self.bindings_in_scope(self.text(container), container) {
                if let (BindingKind::Assign, Some(value)) = (binding.kind, binding.value.map(unparenthesize)) {
                    let element = match (value.kind_name(), index.kind_name()) {
                        ("dictionary", "string") => named_children(value)
                            .into_iter()
                            .filter(|p| p.kind_name() == "pair")
                            .find(|p| p.field("key").is_some_and(|k| self.text(k) == self.text(index)))
                            .and_then(|p| p.field("value")),
                        ("list" | "tuple", "integer") => self.text(index).parse::<usize>().ok().and_then(|i| named_children(value).get(i).copied()),
                        _ => None,
                    };
                    if let Some(element) = element {
                        let v = self.value_at_depth(element, depth + 1);
                        if v.kind != ValueKind::Unknown {
                            return v.via(Basis::Element(element));
                        }
                    }
                }
            }
        }
        if let Some((scope, text)) = self.constant_element_key(subscript) {
            if let Some(use_) = self.module_use(scope, text) {
                return Value::new(ValueKind::Model, Basis::Used(use_));
            }
        }
        Value::unknown()
    }

    fn attribute_value(&self, expr: Node<'t>, depth: usize) -> Value<'t> {
        let d = depth + 1;
        let (Some(object), Some(attr)) = (expr.field("object"), expr.field("attribute")) else {
            return Value::unknown();
        };
        let attr = self.text(attr);
        if self.text(object) == "self" {
            let class = self.enclosing_function(expr).and_then(|f| f.class.as_deref());
            // `self.restore_model`: a method of the class, not a network.
            if let Some(def) = class.and_then(|c| self.method_of(c, attr)) {
                return Value::new(ValueKind::Callable, Basis::Definition(def));
            }
            // `self.model`: what the class assigned (in `__init__` or another method).
            let mut known = Value::unknown();
            if let Some(values) = self.self_attributes.get(attr) {
                for v in values {
                    let value = self.value_at_depth(*v, d);
                    if value.kind.is_module() {
                        return value.via(Basis::From(*v));
                    }
                    if known.kind == ValueKind::Unknown
                        && matches!(
                            value.kind,
                            ValueKind::ModuleClass | ValueKind::Callable | ValueKind::Optimizer | ValueKind::Scaler | ValueKind::DataLoader | ValueKind::Number | ValueKind::Foreign
                        )
                    {
                        known = value.via(Basis::From(*v));
                    }
                }
            }
            if known.kind != ValueKind::Unknown {
                return known;
            }
            if let Some(use_) = self.module_use(None, self.text(expr)) {
                return Value::new(ValueKind::Model, Basis::Used(use_));
            }
            if let Some(use_) = self.optimizer_use(None, self.text(expr)) {
                return Value::new(ValueKind::Optimizer, Basis::Used(use_));
            }
            return Value::unknown();
        }
        // `super().configure_model()`: `super()` reaches the parent class's methods, never
        // a submodule (those are attributes of `self`).
        if object.kind_name() == "call" && object.field("function").is_some_and(|f| self.text(f) == "super") {
            return Value::new(ValueKind::Callable, Basis::None);
        }
        match attr {
            "data" | "grad" => return Value::new(ValueKind::PlainTensor, Basis::From(object)),
            "shape" | "dtype" | "device" | "requires_grad" | "ndim" | "is_cuda" => return Value::unknown(),
            _ => {}
        }
        if let Some(qualified) = self.qualified_name(expr) {
            // `networks.ResnetEncoder`, `nn.Linear`, `torch.cuda.amp.autocast`: a name in an
            // imported module is a class or a function, never a module instance.
            return Value::new(self.imported_value(&qualified), Basis::Definition(expr));
        }
        let of = self.value_at_depth(object, d);
        match of.kind {
            // `outputs.loss`, `out.logits`: fields of a model's output keep its history.
            ValueKind::GradTensor | ValueKind::PlainTensor | ValueKind::Foreign => of.via(Basis::From(object)),
            ValueKind::Model | ValueKind::Loss => {
                // `model.module`: the network a `DataParallel` / DDP wrapper holds.
                if attr == "module" {
                    return Value::new(ValueKind::Model, Basis::From(object));
                }
                if self.methods_by_name.contains_key(attr) {
                    return Value::new(ValueKind::Callable, Basis::None);
                }
                // A submodule the instance's class assigns (`self.encoder = Encoder()`).
                if let Some(class) = self.instance_class(object) {
                    if self.method_of(class, attr).is_some() {
                        return Value::new(ValueKind::Callable, Basis::None);
                    }
                    if let Some(v) = self.class_attribute_value(class, attr, d) {
                        return v;
                    }
                    return Value::unknown();
                }
                // ... or a class of the project does.
                if let Some(construction) = self.constructor_through_methods(object, 0) {
                    if let Some(crate::Symbol::Class { submodules, methods, .. }) = self.project_class_built_by(construction) {
                        if methods.iter().any(|m| m.name == attr) {
                            return Value::new(ValueKind::Callable, Basis::None);
                        }
                        if submodules.iter().any(|s| s == attr) {
                            return Value::new(ValueKind::Model, Basis::Project(construction));
                        }
                    }
                }
                Value::unknown()
            }
            // `q1.train_net`, `self.probe.adapter_model`: on an object of unknown value, a
            // name that a class of this module defines as a method is that method.
            ValueKind::Unknown if self.methods_by_name.contains_key(attr) => Value::new(ValueKind::Callable, Basis::None),
            _ => Value::unknown(),
        }
    }

    /// What the local class `class` (or a local base) assigns to `self.<attr>`: a network
    /// when one of the assigned values is. (`self_attributes` is keyed by attribute name
    /// across classes; the assignment must be in a method of that class.)
    fn class_attribute_value(&self, class: &str, attr: &str, depth: usize) -> Option<Value<'t>> {
        let values = self.self_attributes.get(attr)?;
        values.iter().find_map(|v| {
            let owner = self.enclosing_function(*v).and_then(|f| f.class.clone())?;
            if owner != class && !self.class_derives_locally(class, &owner) {
                return None;
            }
            let value = self.value_at_depth(*v, depth);
            value.kind.is_module().then(|| value.via(Basis::From(*v)))
        })
    }

    /// Does the local class `class` derive (through local bases) from the local `base`?
    fn class_derives_locally(&self, class: &str, base: &str) -> bool {
        let mut pending = vec![class.to_owned()];
        let mut seen = 0;
        while let Some(c) = pending.pop() {
            seen += 1;
            if seen > 16 {
                return false;
            }
            if c == base {
                return true;
            }
            if let Some(info) = self.classes.get(c.as_str()) {
                pending.extend(info.bases.iter().cloned());
            }
        }
        false
    }

    /// Is some argument of `call` (by position, keyword or splat; also an element of a
    /// literal list or tuple) a tensor with history?
    pub fn gives_history(&self, call: Node<'t>) -> bool {
        self.argument_with_history(call, 0).is_some()
    }

    fn argument_with_history(&self, call: Node<'t>, depth: usize) -> Option<Node<'t>> {
        let args = call.field("arguments")?;
        named_children(args).into_iter().find_map(|a| {
            let value = match a.kind_name() {
                "keyword_argument" => a.field("value"),
                "list_splat" | "dictionary_splat" => a.named_child(0),
                _ => Some(a),
            };
            value.and_then(|v| self.holds_history(v, depth + 1))
        })
    }

    fn any_tensor_argument(&self, call: Node<'t>, depth: usize) -> bool {
        let Some(args) = call.field("arguments") else { return false };
        named_children(args).into_iter().any(|a| {
            let value = if a.kind_name() == "keyword_argument" { a.field("value") } else { Some(a) };
            value.is_some_and(|v| self.value_at_depth(v, depth + 1).is_tensor())
        })
    }

    /// The expression holding a tensor with history in `expr`, itself or an element of a
    /// literal list or tuple (`torch.cat([x, out])`, `torch.stack((a, b))`).
    fn holds_history(&self, expr: Node<'t>, depth: usize) -> Option<Node<'t>> {
        let expr = unparenthesize(expr);
        match expr.kind_name() {
            "list" | "tuple" => named_children(expr).into_iter().find_map(|e| {
                let e = if e.kind_name() == "list_splat" { e.named_child(0).unwrap_or(e) } else { e };
                self.holds_history(e, depth + 1)
            }),
            _ => (self.value_kind_at_depth(expr, depth) == ValueKind::GradTensor).then_some(expr),
        }
    }

    /// A tensor operation's result: history when an argument has it (and gradients are on
    /// here), a tensor without when an argument is a tensor, else unknown.
    fn tensor_op_result(&self, call: Node<'t>, depth: usize) -> Value<'t> {
        if let Some(arg) = self.argument_with_history(call, depth) {
            let kind = self.grad_or_plain(call);
            return Value::new(kind, if kind == ValueKind::GradTensor { Basis::Operand(arg) } else { Basis::Library(call) });
        }
        if self.any_tensor_argument(call, depth) {
            return Value::new(ValueKind::PlainTensor, Basis::Library(call));
        }
        Value::unknown()
    }

    /// What the library call `call` of `qualified` returns, by the library's model.
    fn library_value(&self, call: Node<'t>, qualified: &str, depth: usize) -> Value<'t> {
        let Some(model) = library::call_model(qualified) else { return Value::unknown() };
        let basis = Basis::Library(call);
        match model {
            Call::BuildsNetwork => Value::new(ValueKind::Model, Basis::Built(call)),
            Call::BuildsLoss => Value::new(ValueKind::Loss, Basis::Built(call)),
            Call::BuildsOptimizer => Value::new(ValueKind::Optimizer, Basis::Built(call)),
            Call::BuildsScaler => Value::new(ValueKind::Scaler, Basis::Built(call)),
            Call::BuildsLoader => Value::new(ValueKind::DataLoader, Basis::Built(call)),
            Call::ReturnsFirstArgument => {
                let first = call.field("arguments").and_then(|a| named_children(a).into_iter().find(|x| x.kind_name() != "comment"));
                let first = first.map(|f| if f.kind_name() == "keyword_argument" { f.field("value").unwrap_or(f) } else { f });
                first.map(|f| self.value_at_depth(f, depth + 1).via(Basis::From(f))).unwrap_or(Value::unknown())
            }
            Call::NewTensor | Call::TensorNoHistory => Value::new(ValueKind::PlainTensor, basis),
            Call::TensorOp => self.tensor_op_result(call, depth),
            Call::Number => Value::new(ValueKind::Number, basis),
            Call::Foreign => Value::new(ValueKind::Foreign, basis),
            Call::ReturnsArguments | Call::Backward | Call::DisablesGrad | Call::EnablesGrad | Call::SetsGrad | Call::ReadsOnly | Call::Other => {
                Value::unknown()
            }
        }
    }

    /// What calling the function `def` (defined in this module) returns: the value of its
    /// `return` values when they agree (a local factory `build_model()` returning a module;
    /// `train_step()` returning its loss, with history). `None` returns are no value.
    pub fn function_return_value(&self, def: Node<'t>, depth: usize) -> Value<'t> {
        if let Some(value) = self.return_values.borrow().get(&def.id()) {
            return *value;
        }
        self.return_values.borrow_mut().insert(def.id(), Value::unknown());
        let mut result: Option<Value<'t>> = None;
        if let Some(returns) = self.returns.get(&def.id()) {
            for value in returns.iter().filter_map(|r| r.named_child(0)).filter(|v| v.kind_name() != "none") {
                let v = Value::new(self.value_kind_at_depth(value, depth + 1), Basis::Returned(value));
                result = Some(match result {
                    None => v,
                    Some(seen) => join(seen, v, false),
                });
            }
        }
        let result = result.filter(|v| {
            matches!(
                v.kind,
                ValueKind::Model | ValueKind::Loss | ValueKind::Optimizer | ValueKind::Scaler | ValueKind::DataLoader | ValueKind::Number | ValueKind::GradTensor | ValueKind::PlainTensor | ValueKind::Foreign
            )
        });
        let result = result.unwrap_or(Value::unknown());
        self.return_values.borrow_mut().insert(def.id(), result);
        result
    }

    /// [`Self::function_return_value`]'s kind.
    pub fn function_return_kind(&self, def: Node<'t>) -> ValueKind {
        self.function_return_value(def, 0).kind
    }

    /// What calling an imported function or class returns, by its qualified name (a
    /// project index answers for the project's own functions).
    pub fn imported_call_result(&self, qualified: &str) -> ValueKind {
        match library::call_model(qualified) {
            Some(Call::BuildsOptimizer) => return ValueKind::Optimizer,
            Some(Call::BuildsScaler) => return ValueKind::Scaler,
            Some(Call::BuildsLoader) => return ValueKind::DataLoader,
            Some(Call::BuildsLoss) => return ValueKind::Loss,
            Some(Call::BuildsNetwork) => return ValueKind::Model,
            _ => {}
        }
        if self.is_module_class(qualified) {
            let last = qualified.rsplit('.').next().unwrap_or(qualified);
            return if crate::lexicon::class_name_says_loss(last) { ValueKind::Loss } else { ValueKind::Model };
        }
        ValueKind::Unknown
    }

    /// A module instance built by calling the class `class` (a module class): a loss module
    /// when its class's name says so, else a network. (The value is known to be a module by
    /// its class; the name only tells a loss from a network.)
    fn instance_of_module_class(&self, class: &str, call: Node<'t>) -> Value<'t> {
        let last = class.rsplit('.').next().unwrap_or(class);
        let kind = if crate::lexicon::class_name_says_loss(last) { ValueKind::Loss } else { ValueKind::Model };
        Value::new(kind, Basis::Built(call))
    }

    fn call_value(&self, call: Node<'t>, depth: usize) -> Value<'t> {
        let d = depth + 1;
        let Some(callee) = call.field("function") else { return Value::unknown() };
        // A forward pass (of a network, or a method of a module class that runs one): its
        // output.
        if self.forward_callee(call).is_some() {
            return if self.forward_runs_without_grad(call) { Value::new(ValueKind::PlainTensor, Basis::Forward(call)) } else { self.forward_output(call) };
        }
        match callee.kind_name() {
            "attribute" => self.method_call_value(call, callee, depth),
            "identifier" => {
                let name = self.text(callee);
                if let Some(value) = self.project_call_value(call, name) {
                    return value;
                }
                if let Some(qualified) = self.qualified_name(callee) {
                    return self.library_value(call, &qualified, depth);
                }
                match name {
                    "float" | "int" | "len" | "bool" | "round" => return Value::new(ValueKind::Number, Basis::Library(call)),
                    "sum" | "max" | "min" | "abs" => {
                        return match self.argument_with_history(call, depth) {
                            Some(arg) => Value::new(ValueKind::GradTensor, Basis::Operand(arg)),
                            None => Value::unknown(),
                        };
                    }
                    // An iterator over (or a copy of) a container of networks, optimizers or
                    // batches holds the same elements; `next()` of one gives an element.
                    "iter" | "reversed" | "list" | "tuple" | "sorted" | "next" => {
                        let Some(argument) = call.field("arguments").and_then(|a| a.named_child(0)) else { return Value::unknown() };
                        let of = self.value_at_depth(argument, d);
                        return match (name, of.kind) {
                            ("next", ValueKind::DataLoader) => Value::new(ValueKind::PlainTensor, Basis::Element(argument)),
                            ("next", kind) if kind.is_module() || kind == ValueKind::Optimizer => Value::new(kind, Basis::Element(argument)),
                            (_, kind) if kind.is_module() || matches!(kind, ValueKind::Optimizer | ValueKind::DataLoader) => of.via(Basis::From(argument)),
                            _ => Value::unknown(),
                        };
                    }
                    "self" => {
                        let is_module = self.enclosing_function(call).and_then(|f| f.class.clone()).is_some_and(|c| self.is_module_class(&c));
                        return if is_module { self.forward_output(call) } else { Value::unknown() };
                    }
                    _ => {}
                }
                if self.classes.contains_key(name) {
                    return if self.is_module_class(name) { self.instance_of_module_class(name, call) } else { Value::unknown() };
                }
                // A local function: what it returns (`build_model()` returning a network; the
                // argument itself when it gives a parameter back: `cuda(net, flag)`).
                if let Some(binding) = self.binding_at(name, callee) {
                    if binding.kind == BindingKind::Definition && binding.statement.kind_name() == "function_definition" {
                        if let Some(argument) = self.argument_returned(binding.statement, call) {
                            return self.value_at_depth(argument, d).via(Basis::From(argument));
                        }
                        return self.function_return_value(binding.statement, d);
                    }
                }
                let of = self.value_at_depth(callee, d);
                self.result_of_calling(call, of, depth)
            }
            _ => {
                let of = self.value_at_depth(callee, d);
                self.result_of_calling(call, of, depth)
            }
        }
    }

    /// Calling a value: constructing a module (a module class), a forward pass (a
    /// network), a loss (a loss module given a tensor with history).
    fn result_of_calling(&self, call: Node<'t>, callee: Value<'t>, depth: usize) -> Value<'t> {
        match callee.kind {
            ValueKind::ModuleClass => {
                let name = call.field("function").map(|c| self.text(c)).unwrap_or("");
                self.instance_of_module_class(name, call)
            }
            ValueKind::Model => {
                if self.forward_runs_without_grad(call) {
                    Value::new(ValueKind::PlainTensor, Basis::Forward(call))
                } else {
                    self.forward_output(call)
                }
            }
            ValueKind::Loss => match self.argument_with_history(call, depth) {
                Some(arg) => Value::new(self.grad_or_plain(call), Basis::Operand(arg)),
                None => Value::unknown(),
            },
            ValueKind::Foreign => Value::new(ValueKind::Foreign, Basis::From(call.field("function").unwrap_or(call))),
            _ => Value::unknown(),
        }
    }

    fn method_call_value(&self, call: Node<'t>, callee: Node<'t>, depth: usize) -> Value<'t> {
        let d = depth + 1;
        let Some(object) = callee.field("object") else { return Value::unknown() };
        let method = callee.field("attribute").map(|a| self.text(a)).unwrap_or("");
        if let Some(qualified) = self.qualified_name(callee) {
            if let Some(value) = self.project_call_value(call, method) {
                return value;
            }
            return self.library_value(call, &qualified, depth);
        }
        // `self.load_networks()`, `self.decode(z)`: a method of the class (a method of a
        // module class that runs the forward pass gives its output).
        if self.text(object) == "self" {
            if let Some(class) = self.enclosing_function(call).and_then(|f| f.class.clone()) {
                // Lightning's `self.optimizers()` gives the module's optimizers.
                if method == "optimizers" && self.is_lightning_class(&class) && self.method_of(&class, method).is_none() {
                    return Value::new(ValueKind::Optimizer, Basis::Library(call));
                }
                if let Some(def) = self.method_of(&class, method) {
                    if self.is_module_class(&class) && self.method_runs_forward(def) {
                        return self.forward_output(call);
                    }
                    return self.function_return_value(def, d);
                }
            }
        }
        // `policy.pi(x)` on an instance of a local module class: a method that runs the
        // forward pass gives its output, another one what it returns.
        if let Some(class) = self.instance_class_at(object, d) {
            if let Some(def) = self.method_of(class, method) {
                if method != "forward" {
                    return if self.method_runs_forward(def) { self.forward_output(call) } else { self.function_return_value(def, d) };
                }
            }
        }
        let of = self.value_at_depth(object, d);
        match of.kind {
            ValueKind::GradTensor | ValueKind::PlainTensor => match library::tensor_method(method) {
                Call::Number => Value::new(ValueKind::Number, Basis::Library(call)),
                Call::Foreign => Value::new(ValueKind::Foreign, Basis::Library(call)),
                Call::TensorNoHistory => Value::new(ValueKind::PlainTensor, Basis::Library(call)),
                Call::Backward => Value::unknown(),
                _ if method == "requires_grad_" => Value::new(ValueKind::GradTensor, Basis::From(object)),
                _ => of.via(Basis::From(object)),
            },
            ValueKind::Foreign => match library::foreign_method(method) {
                Call::Number => Value::new(ValueKind::Number, Basis::Library(call)),
                _ => Value::new(ValueKind::Foreign, Basis::From(object)),
            },
            ValueKind::Model | ValueKind::Loss => {
                if library::MODULE_METHODS_RETURNING_SELF.contains(&method) {
                    return of.via(Basis::From(object));
                }
                if method == "forward" {
                    return self.forward_output(call);
                }
                // `self.backbone.layer4(x)`, `model.encoder(x)`: a submodule.
                let callee_value = self.value_at_depth(callee, d);
                if callee_value.kind == ValueKind::Model {
                    return self.forward_output(call);
                }
                Value::unknown()
            }
            // `scaler.scale(loss)`: the scaled loss keeps its history.
            ValueKind::Scaler if method == "scale" => call
                .field("arguments")
                .and_then(|a| a.named_child(0))
                .map(|a| self.value_at_depth(a, d).via(Basis::From(a)))
                .unwrap_or(Value::unknown()),
            ValueKind::Unknown => {
                let callee_value = self.value_at_depth(callee, d);
                self.result_of_calling(call, callee_value, depth)
            }
            _ => Value::unknown(),
        }
    }

    /// The argument of `call` that the function `def` (local) gives back, when every
    /// `return` of it returns one parameter.
    pub(crate) fn argument_returned(&self, def: Node<'t>, call: Node<'t>) -> Option<Node<'t>> {
        let mut statements = Vec::new();
        collect_returns(def.field("body")?, &mut statements);
        let name = crate::project::returned_parameter(self.source, def, &statements)?;
        let params = named_children(def.field("parameters")?);
        let position = params.iter().filter_map(|p| parameter_name(*p)).position(|n| self.text(n) == name)?;
        let method = self.functions.get(&def.id()).is_some_and(|f| f.class.is_some());
        let position = if method { position.checked_sub(1)? } else { position };
        self.argument_for(call, &name, Some(position))
    }

    /// What calling a project name returns, when the project knows (see
    /// [`Self::project_call_kind`]); a project function that gives a parameter back
    /// returns that argument.
    fn project_call_value(&self, call: Node<'t>, name: &str) -> Option<Value<'t>> {
        if let Some(crate::Symbol::Function { summary, .. }) = self.project_callee(call) {
            if let Some(position) = summary.returns_parameter {
                let argument = self.argument_for(call, "", Some(position))?;
                return Some(self.value_at_depth(argument, 1).via(Basis::From(argument)));
            }
        }
        let kind = self.project_call_kind(call, name)?;
        Some(match kind {
            ValueKind::Unknown => Value::unknown(),
            kind => Value::new(kind, Basis::Project(call)),
        })
    }

    /// Does the forward pass `call` run without autograd because its module's class runs
    /// its `forward` under `@torch.no_grad()` (a local class, or one of the project)?
    pub(crate) fn forward_runs_without_grad(&self, call: Node<'t>) -> bool {
        self.class_forward_disables_grad(call).is_some()
    }
}

/// The `return` statements of a function body, not of functions nested in it.
fn collect_returns<'t>(node: Node<'t>, out: &mut Vec<Node<'t>>) {
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        match child.kind_name() {
            "function_definition" | "class_definition" | "lambda" => {}
            "return_statement" => out.push(child),
            _ => collect_returns(child, out),
        }
    }
}

/// The identifier `name` inside a target pattern (the pattern itself when absent).
fn binding_target<'t>(model: &SemanticModel<'t>, target: Node<'t>, name: &str) -> Node<'t> {
    let mut stack = vec![target];
    while let Some(n) = stack.pop() {
        if n.kind_name() == "identifier" && model.text(n) == name {
            return n;
        }
        stack.extend(named_children(n));
    }
    target
}
