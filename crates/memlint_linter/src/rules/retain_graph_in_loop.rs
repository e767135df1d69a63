//! ## What it does
//! Checks for `loss.backward(retain_graph=True)` (or `torch.autograd.grad(...,
//! retain_graph=True)`, `torch.autograd.backward(..., retain_graph=True)`) inside a loop,
//! on a graph built in the same iteration, when no second backward follows in that
//! iteration.
//!
//! Also in a helper outside any loop of its own (`def backward_step(loss):
//! loss.backward(retain_graph=True)`) when every call of it in this module is in a loop
//! over batches and nothing backpropagates again after it in the calling iteration.
//!
//! Not flagged: GAN-style or gradient-penalty code that backpropagates again later in
//! the iteration (`d_loss.backward(retain_graph=True)` then `g_loss.backward()`,
//! `autograd.grad(..., retain_graph=True)` then `(loss + penalty).backward()`); a loop
//! that backpropagates through one graph built before it (per-output Jacobian rows,
//! several heads on shared features); `create_graph=True` (higher-order gradients need
//! the graph); and `retain_graph=` with anything but `True` (`retain_graph=i < n - 1`).
//!
//! ## Why is this bad?
//! `retain_graph=True` stops `backward()` from freeing the graph's saved activations.
//! They stay alive until the last reference to the graph goes away, which in a loop is
//! when `loss` is reassigned in the *next* iteration, after that iteration's forward pass
//! has run. So the previous step's activations sit on the GPU during the next forward:
//! the activation peak is about doubled. If the loss (or anything holding its graph) is
//! also kept across iterations (appended to a list, summed into a total), no graph is
//! ever freed and memory grows step by step until it runs out.
//!
//! ## Example
//! ```python
//! for x, y in loader:
//!     loss = criterion(model(x), y)
//!     loss.backward(retain_graph=True)
//!     optimizer.step()
//! ```
//!
//! Use instead:
//! ```python
//! for x, y in loader:
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//! ```

use memlint_python::NodeExt;
use memlint_python::tree_sitter::Node;
use memlint_python::{contains, BindingKind, SemanticModel, ValueKind};

use crate::prefilter::Words;
use crate::checker::Checker;
use crate::rules::{always_bool, calls_that_may_resolve_to, descendants_where, keyword_argument, positional_arguments, snippet};
use crate::{Diagnostic, Severity};

pub const SUMMARY: &str = "`retain_graph=True` in a loop without a second backward";
pub const CAPTURES: &[&str] = &["call", "value"];
pub const FIXABLE: bool = false;

/// The trigger: what a file must contain for this rule to report anything in it.
/// The `retain_graph` keyword.
pub fn trigger(words: &Words<'_>) -> bool {
    words.has("retain_graph")
}

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    // Only backward calls are reported: `.backward(...)`, or `torch.autograd.backward` /
    // `torch.autograd.grad` by any name.
    let mut candidates = model.calls_named("backward").to_vec();
    candidates.extend(calls_that_may_resolve_to(model, &["torch.autograd.backward", "torch.autograd.grad"]));
    for m in checker.matches_at(&candidates) {
        let (Some(call), Some(value)) = (m.get("call"), m.get("value")) else { continue };
        if !model.is_backward_call(call) || !always_bool(model, value, true) {
            continue;
        }
        if keyword_argument(model, call, "create_graph").map(|v| model.text(v) != "False").unwrap_or(false) {
            continue;
        }
        let Some(innermost) = model.enclosing_loops(call).first().copied() else {
            // Outside a loop: a helper that the step loop calls once per iteration.
            if let Some(report) = in_helper_called_per_step(model, call) {
                checker.report(report.into_diagnostic(checker.rule, model, call));
            }
            continue;
        };
        let Some(body) = innermost.node.field("body") else { continue };
        let Some(root) = backpropagated_tensor(model, call) else { continue };
        let names = graph_names(model, root, body);
        if !built_in_iteration(model, root, &names, body) || shares_outer_graph(model, &names, body) {
            continue;
        }
        // A second backward later in the iteration (GAN, gradient penalty) needs the graph.
        let second = descendants_where(model, body, |n| n.kind_name() == "call" && n.start_byte() >= call.end_byte() && model.is_backward_call(n));
        if !second.is_empty() {
            continue;
        }
        let shown = snippet(model, call);
        let root_text = snippet(model, root);
        let (message, severity) = match kept_across_iterations(model, &names, body) {
            Some(keeper) => (
                format!(
                    "`{shown}` retains the graph of `{root_text}` and `{keeper}` keeps it across iterations: no step's graph is ever freed, so activation memory grows every step until it runs out"
                ),
                Severity::Error,
            ),
            None => (
                format!(
                    "`{shown}` retains the graph of `{root_text}` though nothing backpropagates through it again in this iteration: its saved activations stay alive through the next step's forward pass (about double the activation peak), and leak if the loss is also kept across iterations"
                ),
                Severity::Warning,
            ),
        };
        let evidence = vec![
            memlint_python::Fact::at(format!("`{}` is always true", model.short_text(value)), value),
            memlint_python::Fact::at(format!("the graph of `{root_text}` is built in each iteration of the loop on line {}", model.line_of(innermost.node)), root),
            memlint_python::Fact::at("no later backward pass in the iteration goes through it again", innermost.node),
        ];
        checker.report(
            Diagnostic::new(checker.rule, call.byte_range(), message)
                .with_help("drop `retain_graph=True`; it is only needed when a second backward goes through the same graph")
                .with_severity(severity)
                .with_evidence(evidence),
        );
    }
}

/// A backward with `retain_graph=True` in a helper (`def backward_step(loss):
/// loss.backward(retain_graph=True)`) outside any loop of its own, where the helper is
/// called from a loop over batches of this module and nothing backpropagates again: not
/// later in the helper, nor later in the calling iteration (no other backward, no other
/// call of a local function that runs one).
struct HelperCalledPerStep<'t> {
    helper: String,
    loop_header: Node<'t>,
}

impl<'t> HelperCalledPerStep<'t> {
    fn into_diagnostic(self, rule: crate::Rule, model: &SemanticModel<'t>, call: Node<'t>) -> Diagnostic {
        let shown = snippet(model, call);
        let line = self.loop_header.start_position().row + 1;
        Diagnostic::new(
            rule,
            call.byte_range(),
            format!(
                "`{shown}` retains the graph in `{}()`, which the loop over batches at line {line} calls every step, and nothing backpropagates through that graph again: its saved activations stay alive through the next step's forward pass (about double the activation peak)",
                self.helper
            ),
        )
        .with_help("drop `retain_graph=True`; it is only needed when a second backward goes through the same graph")
        .with_severity(Severity::Warning)
        .with_evidence(vec![
            memlint_python::Fact::at(format!("`{}()` is called by the loop over batches on line {line}, once per step", self.helper), self.loop_header),
            memlint_python::Fact::at("nothing backpropagates again later in the helper or in the calling iteration", call),
        ])
    }
}

fn in_helper_called_per_step<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> Option<HelperCalledPerStep<'t>> {
    let function = model.enclosing_function(call)?;
    let runs_backward = |node: Node<'t>| !descendants_where(model, node, |n| n.kind_name() == "call" && model.is_backward_call(n)).is_empty();
    let body = function.node.field("body")?;
    let later_in_helper = descendants_where(model, body, |n| n.kind_name() == "call" && n.start_byte() >= call.end_byte() && model.is_backward_call(n));
    if !later_in_helper.is_empty() {
        return None;
    }
    let calls_helper = |site: Node<'t>| {
        let Some(callee) = model.field(site, "function") else { return false };
        match (&function.class, callee.kind_name()) {
            (None, "identifier") => true,
            (Some(_), "attribute") => model.field(callee, "object").map(|o| model.text(o) == "self").unwrap_or(false),
            _ => false,
        }
    };
    // Calls of local functions that run a backward pass.
    let runs_local_backward =
        |site: Node<'t>| crate::rules::local_functions_called(model, site).any(|f| f.node.field("body").is_some_and(runs_backward));
    let mut found = None;
    for site in model.calls_named(&function.name).iter().copied().filter(|c| calls_helper(*c)) {
        if contains(function.node, site) {
            return None;
        }
        let loop_ = model.enclosing_loops(site).first().copied()?;
        if !loop_.over_batches {
            return None;
        }
        let loop_body = loop_.node.field("body")?;
        let again = descendants_where(model, loop_body, |n| {
            n.kind_name() == "call" && n.start_byte() >= site.end_byte() && (model.is_backward_call(n) || runs_local_backward(n))
        });
        if !again.is_empty() {
            return None;
        }
        found = Some(HelperCalledPerStep { helper: function.name.clone(), loop_header: loop_.node });
    }
    found
}

/// The tensor a backward call starts from: `loss` in `loss.backward()`, the first argument
/// (or `outputs=` / `tensors=`) of `torch.autograd.grad` / `torch.autograd.backward`.
fn backpropagated_tensor<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> Option<Node<'t>> {
    let callee = model.field(call, "function")?;
    if callee.kind_name() == "attribute" && model.field(callee, "attribute").map(|a| model.text(a)) == Some("backward") {
        let object = model.field(callee, "object")?;
        // `torch.autograd.backward(t)` is an attribute call too.
        if model.qualified_name(callee).as_deref() != Some("torch.autograd.backward") {
            return Some(object);
        }
    }
    keyword_argument(model, call, "outputs")
        .or_else(|| keyword_argument(model, call, "tensors"))
        .or_else(|| positional_arguments(call).first().copied())
}

/// The names the backpropagated tensor is computed from, following assignments inside the
/// loop body (`loss = criterion(out, y)` -> `out`, `y`, ...).
fn graph_names<'t>(model: &SemanticModel<'t>, root: Node<'t>, body: Node<'t>) -> Vec<(String, Node<'t>)> {
    let mut seen: Vec<(String, Node<'t>)> = Vec::new();
    let mut work: Vec<Node<'t>> = vec![root];
    while let Some(expr) = work.pop() {
        if seen.len() > 64 {
            break;
        }
        for ident in descendants_where(model, expr, |n| n.kind_name() == "identifier" && is_variable_use(n)) {
            let name = model.text(ident).to_owned();
            if seen.iter().any(|(n, _)| *n == name) {
                continue;
            }
            seen.push((name.clone(), ident));
            if let Some(b) = model.binding_at(&name, ident) {
                if contains(body, b.statement) && matches!(b.kind, BindingKind::Assign | BindingKind::AugAssign) {
                    if let Some(v) = b.value {
                        work.push(v);
                    }
                }
            }
        }
    }
    seen
}

/// Is the graph built in this iteration: a forward pass or a name assigned in the loop body?
fn built_in_iteration<'t>(model: &SemanticModel<'t>, root: Node<'t>, names: &[(String, Node<'t>)], body: Node<'t>) -> bool {
    if !descendants_where(model, root, |n| n.kind_name() == "call" && model.is_forward_call(n)).is_empty() {
        return true;
    }
    names.iter().any(|(name, at)| {
        model
            .binding_at(name, *at)
            .map(|b| contains(body, b.statement) && matches!(b.kind, BindingKind::Assign | BindingKind::AugAssign))
            .unwrap_or(false)
    })
}

/// Does the graph go through a tensor with history computed before the loop (shared
/// features, a model output reused by every iteration)? Then each iteration backpropagates
/// through that shared part again, and it must be retained.
///
/// A value from before the loop that memlint cannot tell (a parameter nobody passes a known
/// value for) may be such a tensor: no finding rests on it being none. What is only called
/// (`model(x)`) is the network, not a tensor.
fn shares_outer_graph<'t>(model: &SemanticModel<'t>, names: &[(String, Node<'t>)], body: Node<'t>) -> bool {
    names.iter().any(|(name, at)| {
        // The loop's own targets are bound again every iteration.
        let outside = model
            .binding_at(name, *at)
            .map(|b| !contains(body, b.statement) && b.statement.field("body").is_none_or(|own| own.id() != body.id()))
            .unwrap_or(false);
        let called = model.parent(*at).is_some_and(|p| p.kind_name() == "call" && model.field(p, "function").is_some_and(|f| f.id() == at.id()));
        // `next(batches)`: an iterator the step draws a fresh batch from.
        let iterated = model
            .parent(*at)
            .and_then(|args| model.parent(args))
            .is_some_and(|c| c.kind_name() == "call" && model.field(c, "function").is_some_and(|f| f.kind_name() == "identifier" && model.text(f) == "next"));
        let called = called || iterated;
        outside && match model.value_kind(*at) {
            ValueKind::GradTensor => true,
            ValueKind::Unknown => !called,
            _ => false,
        }
    })
}

/// `losses.append(loss)`, `total += loss`, `total = total + loss` with an accumulator that is
/// not reset in the loop body: what keeps the graph across iterations.
fn kept_across_iterations<'t>(model: &SemanticModel<'t>, names: &[(String, Node<'t>)], body: Node<'t>) -> Option<String> {
    let holds_graph = |expr: Node<'t>| {
        model.value_kind(expr) == ValueKind::GradTensor
            && descendants_where(model, expr, |n| n.kind_name() == "identifier").iter().any(|i| names.iter().any(|(n, _)| n == model.text(*i)))
    };
    let reset_in_body = |base: &str, at: Node<'t>| {
        model
            .bindings_in_scope(base, at)
            .iter()
            .any(|b| b.kind == BindingKind::Assign && contains(body, b.statement) && !contains(b.statement, at))
    };
    for n in descendants_where(model, body, |n| matches!(n.kind_name(), "call" | "augmented_assignment")) {
        let (container, term) = match n.kind_name() {
            "call" => {
                let Some(callee) = model.field(n, "function").filter(|f| f.kind_name() == "attribute") else { continue };
                if model.field(callee, "attribute").map(|a| model.text(a)) != Some("append") {
                    continue;
                }
                let (Some(object), Some(arg)) = (model.field(callee, "object"), positional_arguments(n).first().copied()) else {
                    continue;
                };
                (object, arg)
            }
            _ => {
                let (Some(left), Some(right)) = (model.field(n, "left"), model.field(n, "right")) else { continue };
                (left, right)
            }
        };
        let Some(base) = model.dotted_name(container) else { continue };
        if holds_graph(term) && !reset_in_body(&base, n) {
            return Some(base);
        }
    }
    None
}

/// An identifier that names a variable (not `.attr` of an attribute, not `kw=` of a call).
fn is_variable_use(ident: Node<'_>) -> bool {
    match ident.parent() {
        Some(p) if p.kind_name() == "attribute" => p.field("attribute").map(|a| a.id()) != Some(ident.id()),
        Some(p) if p.kind_name() == "keyword_argument" => p.field("name").map(|a| a.id()) != Some(ident.id()),
        _ => true,
    }
}
