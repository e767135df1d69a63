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

use tree_sitter::Node;

use crate::semantic::*;
use crate::NodeExt;
use crate::named_nodes::NamedNodes;

mod calls;
pub(crate) mod names;
mod uses;

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
    /// Backpropagated by this call (`loss.backward()`): only a tensor with history can be.
    Backpropagated(Node<'t>),
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
    /// pytest passes it the value of the fixture its parameter names: this fixture's
    /// definition (a function of the module decorated `@pytest.fixture`).
    Fixture(Node<'t>),
    /// A function of another module of the project returns a call of the class it is
    /// handed (`build(Net, cfg)` returning `model_cls(**cfg)`): this argument.
    Handed(Node<'t>),
}

/// What an expression holds, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value<'t> {
    pub kind: ValueKind,
    pub basis: Basis<'t>,
}

impl<'t> Value<'t> {
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
pub(super) fn join<'t>(a: Value<'t>, b: Value<'t>, ignore_unknown: bool) -> Value<'t> {
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
pub(super) fn combine_arithmetic<'t>(left: (Value<'t>, Node<'t>), right: (Value<'t>, Node<'t>)) -> Value<'t> {
    use ValueKind::*;
    let ((l, ln), (r, rn)) = (left, right);
    match (l.kind, r.kind) {
        (GradTensor, _) => Value::new(GradTensor, Basis::Operand(ln)),
        (_, GradTensor) => Value::new(GradTensor, Basis::Operand(rn)),
        // An operand that may carry history leaves the result unknown: a tensor without
        // history times an unknown value may be one with history.
        (Unknown, _) | (_, Unknown) => Value::unknown(),
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
            "unary_operator" | "not_operator" => self.field(expr, "argument").map(|e| self.value_at_depth(e, d)).unwrap_or(Value::unknown()),
            "binary_operator" => {
                let (Some(left), Some(right)) = (self.field(expr, "left"), self.field(expr, "right")) else { return Value::unknown() };
                // `"%d" % x` formats a string: a Python scalar, whatever it formats.
                if matches!(left.kind_name(), "string" | "concatenated_string") {
                    return Value::new(ValueKind::Number, Basis::Operand(left));
                }
                combine_arithmetic((self.value_at_depth(left, d), left), (self.value_at_depth(right, d), right))
            }
            "conditional_expression" => {
                // `a if condition else b`: the branches joined (`None` is no value).
                let parts = self.named_children(expr);
                let branches: Vec<Node<'t>> =
                    [parts.first(), parts.get(2)].into_iter().flatten().copied().filter(|b| b.kind_name() != "none").collect();
                let mut values = branches.iter().map(|b| self.value_at_depth(*b, d).via(Basis::From(*b)));
                let first = values.next().unwrap_or(Value::unknown());
                values.fold(first, |acc, v| join(acc, v, false))
            }
            "boolean_operator" => {
                let (Some(left), Some(right)) = (self.field(expr, "left"), self.field(expr, "right")) else { return Value::unknown() };
                join(self.value_at_depth(left, d).via(Basis::From(left)), self.value_at_depth(right, d).via(Basis::From(right)), false)
            }
            "subscript" => {
                let Some(container) = self.field(expr, "value") else { return Value::unknown() };
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
                let elements = self.named_children(expr);
                self.all_elements(&elements, d)
            }
            "dictionary" => {
                let values: Vec<Node<'t>> = self.named_children(expr).into_iter().filter_map(|p| self.field(p, "value")).collect();
                self.all_elements(&values, d)
            }
            "list_comprehension" | "generator_expression" | "set_comprehension" => match self.field(expr, "body") {
                Some(body) => self.all_elements(&[body], d),
                None => Value::unknown(),
            },
            "dictionary_comprehension" => match self.field(expr, "body").and_then(|p| self.field(p, "value")) {
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

}

/// The `return` statements (bare ones too) below the node at `at` (a function body), not
/// those of functions or classes nested in it, in source order: a scan of the named
/// nodes' preorder that jumps over each nested definition's subtree. (Walking the body
/// with tree-sitter's cursor for every call of a local function was 5% of a lint.)
pub(super) fn returns_below<'t>(nodes: &NamedNodes<'t>, at: usize) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    let mut i = at + 1;
    let end = nodes.subtree(at).end;
    while i < end {
        match nodes.kind(i) {
            "function_definition" | "class_definition" | "lambda" => i = nodes.subtree(i).end,
            "return_statement" => {
                out.push(nodes.node(i));
                i = nodes.subtree(i).end;
            }
            _ => i += 1,
        }
    }
    out
}

/// The identifier `name` inside a target pattern (the pattern itself when absent).
pub(super) fn binding_target<'t>(model: &SemanticModel<'t>, target: Node<'t>, name: &str) -> Node<'t> {
    let mut stack = vec![target];
    while let Some(n) = stack.pop() {
        if n.kind_name() == "identifier" && model.text(n) == name {
            return n;
        }
        stack.extend(model.named_children(n));
    }
    target
}
