//! Training flags: a function that backpropagates only under a test of one of its
//! parameters (`if train: loss.backward()`, `if optimizer is not None:`, `if mode ==
//! "train":`) is a loop shared by training and evaluation, and a call that passes a value
//! turning the test off (a literal, a constant, an argparse default, or the default) runs
//! it as evaluation: none of its backward passes runs then.

use tree_sitter::Node;

use crate::constants::{constant_value, Constant};
use crate::semantic::*;
use crate::NodeExt;

/// A call that runs a function with its training flag off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagOff {
    pub function: String,
    /// The guard, as written (`train`, `optimizer is not None`).
    pub guard: String,
    /// The call that turns it off, and its line.
    pub call: String,
    pub line: usize,
    /// What `torch.set_grad_enabled(...)` is given to follow the flag.
    pub enabled: String,
}

impl<'t> SemanticModel<'t> {
    /// Is `call` (a forward pass) in a function whose every backward pass runs under one
    /// test of a parameter, outside that test, in a function a call of this module (itself
    /// run with gradients) calls with the flag off?
    pub fn training_flag_off(&self, call: Node<'t>) -> Option<FlagOff> {
        let flags = TrainingFlags::of(self);
        training_flag_off(self, &flags, call)
    }

    /// Is `node` inside the test that guards the backward passes of its function's
    /// training flag (the training branch)?
    pub fn in_training_branch(&self, node: Node<'t>) -> bool {
        let Some(function) = self.enclosing_function(node) else { return false };
        let Some(flag) = training_flag(self, function) else { return false };
        guarding_test(self, function, node).is_some_and(|g| g.parameter.id() == flag.parameter.id())
    }
}

/// The functions of this module whose every backward pass runs under one test of a
/// parameter (`if train:`, `if optimizer is not None:`, `if mode == "train":`): a loop
/// shared by training and evaluation, where the flag picks which.
struct TrainingFlags<'a, 't>(Vec<(&'a FunctionInfo<'t>, TrainingFlag<'t>)>);

struct TrainingFlag<'t> {
    /// The parameter (its node in the parameter list).
    parameter: Node<'t>,
    name: &'t str,
    /// The `if` condition, as written (`is_train`).
    guard: &'t str,
    /// The test of the parameter itself (`optimizer is not None` after `is_train =
    /// optimizer is not None`): what `torch.set_grad_enabled(...)` can be given anywhere
    /// in the function.
    tested: &'t str,
    test: FlagTest<'t>,
}

enum FlagTest<'t> {
    /// `if train:`
    Truthy,
    /// `if optimizer is not None:`
    NotNone,
    /// `if mode == "train":` (the literal)
    Equals(Node<'t>),
}

impl<'a, 't> TrainingFlags<'a, 't> {
    fn of(model: &'a SemanticModel<'t>) -> TrainingFlags<'a, 't> {
        let mut found = Vec::new();
        for f in model.functions() {
            if f.class.as_deref().is_some_and(|c| model.is_module_class(c)) {
                continue;
            }
            if let Some(flag) = training_flag(model, f) {
                found.push((f, flag));
            }
        }
        TrainingFlags(found)
    }
}

/// The parameter test that guards every backward pass of `f` (at least one).
fn training_flag<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>) -> Option<TrainingFlag<'t>> {
    let body = f.node.field("body")?;
    let backwards = model.backward_calls_in_scope_of(body);
    let mut flag: Option<TrainingFlag<'t>> = None;
    for backward in backwards {
        let guard = guarding_test(model, f, *backward)?;
        match &flag {
            Some(seen) if seen.parameter.id() != guard.parameter.id() || seen.guard != guard.guard => return None,
            Some(_) => {}
            None => flag = Some(guard),
        }
    }
    flag
}

/// The innermost `if` around `node` in `f` whose condition tests a parameter of `f`, with
/// `node` in its consequence.
fn guarding_test<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, node: Node<'t>) -> Option<TrainingFlag<'t>> {
    let mut current = node;
    while let Some(parent) = model.parent(current) {
        if parent.id() == f.node.id() {
            return None;
        }
        if parent.kind_name() == "if_statement" && parent.field("consequence").is_some_and(|c| c.id() == current.id()) {
            if let Some(flag) = parent.field("condition").and_then(|c| flag_test(model, f, c)) {
                return Some(flag);
            }
        }
        current = parent;
    }
    None
}

/// `train`, `optimizer is not None`, `mode == "train"` on a parameter of `f` not bound again,
/// or a name bound once in `f` to such a test (`is_train = optimizer is not None`).
fn flag_test<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, condition: Node<'t>) -> Option<TrainingFlag<'t>> {
    let condition = unparenthesize(condition);
    parameter_test(model, f, condition).or_else(|| named_flag_test(model, f, condition))
}

/// A test of a parameter of `f` itself: `train`, `optimizer is not None`, `mode == "train"`.
fn parameter_test<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, condition: Node<'t>) -> Option<TrainingFlag<'t>> {
    let (ident, test) = match condition.kind_name() {
        "identifier" => (condition, FlagTest::Truthy),
        "comparison_operator" => {
            let left = condition.named_child(0).filter(|l| l.kind_name() == "identifier")?;
            let right = condition.named_child(1)?;
            if condition.named_child_count() != 2 {
                return None;
            }
            let operator = model.text(condition)[left.end_byte() - condition.start_byte()..right.start_byte() - condition.start_byte()].split_whitespace().collect::<Vec<_>>().join(" ");
            match (operator.as_str(), right.kind_name()) {
                ("is not", "none") => (left, FlagTest::NotNone),
                ("==", "string") => (left, FlagTest::Equals(right)),
                _ => return None,
            }
        }
        _ => return None,
    };
    let name = model.text(ident);
    let binding = model.binding_at(name, ident)?;
    if binding.kind != BindingKind::Parameter || !contains(f.node, binding.statement) {
        return None;
    }
    let text = model.text(condition);
    Some(TrainingFlag { parameter: binding.statement, name, guard: text, tested: text, test })
}

/// `is_train` where `is_train = <a flag test of a parameter>` is its only binding in `f`.
fn named_flag_test<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, condition: Node<'t>) -> Option<TrainingFlag<'t>> {
    if condition.kind_name() != "identifier" {
        return None;
    }
    let name = model.text(condition);
    let [binding] = model.bindings_in_scope(name, condition) else { return None };
    let (BindingKind::Assign, Some(value)) = (binding.kind, binding.value) else { return None };
    if !contains(f.node, binding.statement) {
        return None;
    }
    let flag = parameter_test(model, f, unparenthesize(value))?;
    Some(TrainingFlag { guard: model.text(condition), ..flag })
}

/// Is `call` in a function of `flags` (outside its flag's guard), which a call in this
/// module, itself run with gradients, calls with the flag off?
fn training_flag_off<'t>(model: &SemanticModel<'t>, flags: &TrainingFlags<'_, 't>, call: Node<'t>) -> Option<FlagOff> {
    let function = model.enclosing_function(call)?;
    let (_, flag) = flags.0.iter().find(|(f, _)| f.node.id() == function.node.id())?;
    if guarding_test(model, function, call).is_some_and(|g| g.parameter.id() == flag.parameter.id()) {
        return None;
    }
    let off = model.calls_named(&function.name).iter().copied().find(|c| {
        calls_function(model, function, *c) && flag_value(model, function, flag, *c) == Some(false) && model.grad_context(*c) == GradContext::Enabled
    })?;
    let line = model.source()[..off.start_byte()].matches('\n').count() + 1;
    let enabled = match flag.test {
        FlagTest::Truthy if default_of(flag.parameter).is_some_and(|d| matches!(d.kind_name(), "true" | "false")) => flag.name.to_owned(),
        FlagTest::Truthy => format!("bool({})", flag.name),
        FlagTest::NotNone | FlagTest::Equals(_) => flag.tested.to_owned(),
    };
    Some(FlagOff { function: function.name.clone(), guard: flag.guard.to_owned(), call: model.short_text(off), line, enabled })
}

/// Does `call` call `f`: `f(...)` resolving to it; for a method of class `C`,
/// `self.f(...)` in a method of `C` or `x.f(...)` where `x = C(...)`.
fn calls_function<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, call: Node<'t>) -> bool {
    let Some(callee) = call.field("function") else { return false };
    match (callee.kind_name(), &f.class) {
        ("identifier", None) => model.binding_at(model.text(callee), callee).is_some_and(|b| b.statement.id() == f.node.id()),
        ("attribute", Some(class)) => {
            let Some(receiver) = callee.field("object") else { return false };
            if model.text(receiver) == "self" {
                return model.enclosing_function(call).and_then(|g| g.class.as_deref()) == Some(class.as_str());
            }
            receiver.kind_name() == "identifier"
                && model
                    .binding_at(model.text(receiver), receiver)
                    .and_then(|b| b.value)
                    .map(unparenthesize)
                    .is_some_and(|v| v.kind_name() == "call" && v.field("function").is_some_and(|c| model.text(c) == class))
        }
        _ => false,
    }
}

/// Whether the flag is on in `call` (passed by keyword or position, or its default), when
/// a literal says so.
fn flag_value<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, flag: &TrainingFlag<'t>, call: Node<'t>) -> Option<bool> {
    // `*args` / `**kwargs` may carry the flag.
    let arguments = call.field("arguments").filter(|a| a.kind_name() == "argument_list")?;
    if named_children(arguments).iter().any(|a| matches!(a.kind_name(), "list_splat" | "dictionary_splat")) {
        return None;
    }
    let parameters = named_children(f.node.field("parameters")?);
    let position = parameters.iter().position(|p| p.id() == flag.parameter.id() || contains(*p, flag.parameter))?;
    // `self` is not passed by `x.method(...)`.
    let skipped = usize::from(f.class.is_some());
    // Only plain parameters before it (no `*args` taking its position).
    if parameters[..position].iter().any(|p| parameter_name(*p).is_none()) {
        return None;
    }
    let value = model.argument_for(call, flag.name, position.checked_sub(skipped)).or_else(|| default_of(parameters[position]))?;
    // A literal, a constant name or an argparse default (`train=args.train`).
    let is_none = unparenthesize(value).kind_name() == "none";
    let constant = constant_value(model, value);
    match &flag.test {
        FlagTest::Truthy if is_none => Some(false),
        FlagTest::Truthy => match constant? {
            Constant::Bool(b) => Some(b),
            Constant::Int(i) => Some(i != 0),
            Constant::Float(f) => Some(f != 0.0),
            Constant::Str(s) => Some(!s.is_empty()),
        },
        FlagTest::NotNone => if is_none { Some(false) } else { constant.map(|_| true) },
        FlagTest::Equals(literal) => Some(constant? == constant_value(model, *literal)?),
    }
}

/// A parameter's default value.
fn default_of(parameter: Node<'_>) -> Option<Node<'_>> {
    matches!(parameter.kind_name(), "default_parameter" | "typed_default_parameter").then(|| parameter.field("value")).flatten()
}

