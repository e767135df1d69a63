//! ## What it does
//! Checks for gradient accumulation, where the optimizer steps once every `k` iterations
//! (`optimizer.step()` / `scaler.step(optimizer)` under `if (i + 1) % k == 0:` in the
//! per-step loop, or under `if count == k:` for a counter reset to 0 there, while
//! `backward()` runs every iteration; or once after an inner loop of `k` micro-batches,
//! `for _ in range(k):` fetching with `next(...)`, `for part in x.chunk(k):` or
//! `for xs, ys in zip(x.chunk(k), y.chunk(k)):`), when the loss that is
//! backpropagated is not divided by `k`, or is divided by something that changes every
//! step (the loop index, a running counter).
//!
//! Not flagged: a loss divided by `k` anywhere on its way to `backward()`
//! (`loss = loss / k`, `loss /= k`, `(loss / k).backward()`, `scaler.scale(loss / k)`,
//! `with amp.scale_loss(loss / k, optimizer) as scaled:`,
//! `loss.div(k)`, `loss * (1 / k)`); a loss already normalised by some other fixed
//! quantity (`loss / num_micro_batches`: memlint cannot tell it from `k`, so it trusts it);
//! Accelerate's `with accelerator.accumulate(model):` and framework `backward`s
//! (`accelerator.backward`, DeepSpeed's `engine.backward`, any `x.backward(loss)` of
//! something that is not a tensor, given the loss), which divide themselves; a loss
//! divided inside apex's `with amp.scale_loss(loss / k, optimizer) as scaled:`; gradients
//! divided after accumulation, in the step's branch before the optimizer steps
//! (`p.grad /= k`, `p.grad.div_(k)`, or a call given the network or its parameters and a
//! quotient, as torchtune's `scale_grads(model, 1 / num_tokens)`). Nor GAN
//! schedules that are not accumulation: an optimizer that steps every iteration in the same
//! loop (the critic, beside a generator stepped every `n_critic` iterations), or a periodic
//! branch that backpropagates its own loss before its optimizer steps.
//!
//! ## Why is this bad?
//! Gradient accumulation simulates a batch `k` times larger than fits in GPU memory.
//! `backward()` *adds* into `.grad`, so without dividing each micro-batch's loss by `k`
//! the accumulated gradient is the sum over `k` micro-batches, `k` times the gradient of
//! the large batch: each update behaves as if the learning rate were `k` times larger,
//! gradient clipping thresholds are off by `k`, and changing `k` to fit memory silently
//! changes the training dynamics. Dividing by a counter that grows each step weights the
//! micro-batches unequally (1, 1/2, 1/3, ...).
//!
//! ## Example
//! ```python
//! for i, (x, y) in enumerate(loader):
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     if (i + 1) % accum_steps == 0:
//!         optimizer.step()
//!         optimizer.zero_grad()
//! ```
//!
//! Use instead:
//! ```python
//! for i, (x, y) in enumerate(loader):
//!     loss = criterion(model(x), y) / accum_steps
//!     loss.backward()
//!     if (i + 1) % accum_steps == 0:
//!         optimizer.step()
//!         optimizer.zero_grad()
//! ```
//!
//! ## Fix safety
//! The fix divides the backpropagated loss by `k` (`(loss / k).backward()`,
//! `scaler.scale(loss / k)`). It is unsafe: it changes the size of every update by design
//! (with SGD the effective learning rate drops by `k`; a tuned learning rate may need
//! retuning), and code that logs the loss before the division is unaffected while code
//! that reuses the divided value is. It is only offered when the loss is not divided at
//! all.

use memlint_python::NodeExt;
use std::collections::HashSet;

use memlint_python::tree_sitter::Node;
use memlint_python::{contains, unparenthesize, BindingKind, SemanticModel};

use crate::prefilter::Words;
use crate::rules::{could_run_backward, could_step_an_optimizer};
use crate::checker::Checker;
use crate::rules::{descendants_where, is_primary, positional_arguments, snippet};
use crate::{Diagnostic, Edit, Fix, Severity};

pub const SUMMARY: &str = "Gradient accumulation without dividing the loss by the accumulation steps";
pub const CAPTURES: &[&str] = &["backward", "receiver"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// A backward pass and an optimizer step (the step may be periodic, `% k`, or come after
/// an inner loop of micro-batches, or when a counter reaches `k`: no `%` needed).
pub fn trigger(words: &Words<'_>) -> bool {
    could_run_backward(words) && could_step_an_optimizer(words)
}

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    // The query matches `.backward()` calls only.
    for m in checker.matches_at(model.calls_named("backward")) {
        let (Some(backward), Some(receiver)) = (m.get("backward"), m.get("receiver")) else { continue };
        // A framework's `backward(loss)` divides for its own accumulation.
        if model.is_framework_backward(backward) {
            continue;
        }
        // The region that runs once per iteration: the innermost loop's body, or the body
        // of a helper that a loop calls once per iteration (`for ...: train_step(...)`).
        let Some(region) = Region::around(model, backward) else { continue };
        let body = region.body;
        if periodic_guard(model, backward, region.node).is_some() || under_accelerate(model, backward) {
            continue;
        }
        // How the optimizer accumulates: a step guarded by `% k` (or a counter reaching `k`)
        // in this loop, or one step after this loop of `k` micro-batches.
        let Some(schedule) = periodic_schedule(model, &region).or_else(|| micro_step_schedule(model, backward, &region)) else {
            continue;
        };
        let (guard, k) = (schedule.guard, schedule.k);
        // The sum is normalised after the fact: the step's branch divides the gradients
        // (`p.grad /= n`, `scale_grads(model, 1 / num_tokens)`) before the optimizer steps.
        if schedule.period.is_some_and(|period| gradients_rescaled_before_step(model, period)) {
            continue;
        }
        // The loss: `loss` in `loss.backward()`, `x` in `scaler.scale(x).backward()`.
        let root = scaled_argument(model, receiver).unwrap_or(receiver);
        let mut divisors = Vec::new();
        let mut visited = HashSet::new();
        collect_divisors(model, root, body, &mut divisors, &mut visited, 0);
        let k_text = normalize(model.text(k));
        if divisors.iter().any(|d| normalize(model.text(*d)) == k_text) {
            continue;
        }
        let counters = region.counters(model);
        let guard_text = snippet(model, guard);
        let every = if schedule.micro_steps {
            format!("the optimizer steps once after the loop over `{}` micro-batches (`{guard_text}`)", snippet(model, k))
        } else {
            format!("the optimizer steps once every `{}` iterations (`{guard_text}`)", snippet(model, k))
        };
        let loss_text = snippet(model, root);
        let k_shown = snippet(model, k);
        let mut evidence = vec![memlint_python::Fact::at(
            if schedule.micro_steps {
                format!("the optimizer steps after the loop of `{k_shown}` micro-batches, not inside it")
            } else {
                format!("every optimizer step of the loop runs only when `{guard_text}` holds")
            },
            guard,
        )];
        if let Some(site) = region.site {
            evidence.push(memlint_python::Fact::at(format!("`{}` runs the backward pass once per iteration", model.short_text(site)), site));
        }
        evidence.push(memlint_python::Fact::at(format!("`{}` runs every iteration, on `{loss_text}`", model.short_text(backward)), backward));
        if divisors.is_empty() {
            let message = format!(
                "{every} but `{loss_text}` is backpropagated undivided: gradients of `{k_shown}` micro-batches are summed, so each update is `{k_shown}` times the mean gradient (as if the learning rate were `{k_shown}` times larger)"
            );
            checker.report(
                Diagnostic::new(checker.rule, backward.byte_range(), message)
                    .with_help(format!("divide the loss by `{k_shown}` before `backward()`"))
                    .with_severity(Severity::Warning)
                    .with_fix(Some(division_fix(model, root, receiver, k)))
                    .with_evidence(evidence),
            );
        } else if let Some(counter) = divisors.iter().find(|d| {
            model.identifiers_in(**d).iter().any(|i| counters.contains(i))
        }) {
            let counter_text = snippet(model, *counter);
            let message = format!(
                "the loss backpropagated here is divided by `{counter_text}`, which changes every iteration, while {every}: the accumulated micro-batches are weighted unequally instead of by 1/`{k_shown}` each"
            );
            checker.report(
                Diagnostic::new(checker.rule, backward.byte_range(), message)
                    .with_help(format!("divide the loss by the fixed number of accumulation steps, `{k_shown}`"))
                    .with_severity(Severity::Warning)
                    .with_evidence(evidence),
            );
        }
    }
}

/// Does the branch `period` rescale the accumulated gradients before its first optimizer
/// step: `p.grad /= n`, `p.grad.div_(n)` / `.mul_(1 / n)` (also through `.data`), or a call
/// given the network (or its parameters) and a quotient, as torchtune's
/// `scale_grads(model, 1 / num_tokens)`?
fn gradients_rescaled_before_step<'t>(model: &SemanticModel<'t>, period: Node<'t>) -> bool {
    let range = period.byte_range();
    let in_period = model.calls_in(range.clone()).iter();
    let Some(step) = in_period.clone().find(|c| model.is_optimizer_step(**c)).map(|c| c.start_byte()) else { return false };
    // Divided in the branch, or in a local function it calls before the step.
    let helpers_divide = in_period
        .clone()
        .take_while(|c| c.start_byte() < step)
        .filter_map(|c| model.local_callee(*c))
        .filter_map(|def| model.field(def, "body"))
        .any(|body| grads_divided_in(model, body.byte_range()));
    grads_divided_in(model, range.start..step) || helpers_divide
        || in_period.take_while(|c| c.start_byte() < step).any(|call| {
            let arguments = positional_arguments(*call);
            let quotient = arguments.iter().any(|a| {
                let a = unparenthesize(*a);
                a.kind_name() == "binary_operator" && model.field(a, "operator").map(|o| model.text(o)) == Some("/")
            });
            quotient && arguments.iter().any(|a| holds_network_or_parameters(model, *a))
        })
}

/// `p.grad /= n`, `p.grad.div_(n)` / `.mul_(1 / n)` (also through `.data`) in `range`.
fn grads_divided_in(model: &SemanticModel<'_>, range: std::ops::Range<usize>) -> bool {
    model.attributes_named_in("grad", range).iter().any(|grad| {
        let mut target = *grad;
        if let Some(data) = model.parent(target).filter(|p| p.kind_name() == "attribute" && p.field("object") == Some(target)) {
            if model.field(data, "attribute").map(|a| model.text(a)) == Some("data") {
                target = data;
            }
        }
        let Some(parent) = model.parent(target) else { return false };
        match parent.kind_name() {
            "augmented_assignment" => {
                model.field(parent, "left") == Some(target) && matches!(model.field(parent, "operator").map(|o| model.text(o)), Some("/=" | "*="))
            }
            "attribute" => {
                let method = model.field(parent, "attribute").map(|a| model.text(a));
                matches!(method, Some("div_" | "mul_")) && model.parent(parent).is_some_and(|c| c.kind_name() == "call")
            }
            _ => false,
        }
    })
}

/// A network (`model`, `self._model`) or its parameters (`model.parameters()`, also
/// wrapped in `list(...)`).
fn holds_network_or_parameters<'t>(model: &SemanticModel<'t>, argument: Node<'t>) -> bool {
    let mut node = unparenthesize(argument);
    for _ in 0..4 {
        if model.value_kind(node).is_module() {
            return true;
        }
        if node.kind_name() != "call" {
            return false;
        }
        let Some(callee) = model.field(node, "function") else { return false };
        match callee.kind_name() {
            "attribute" => {
                let method = model.field(callee, "attribute").map(|a| model.text(a));
                return matches!(method, Some("parameters" | "named_parameters")) && model.field(callee, "object").is_some_and(|o| model.value_kind(o).is_module());
            }
            "identifier" if matches!(model.text(callee), "list" | "tuple") => match positional_arguments(node).first() {
                Some(inner) => node = unparenthesize(*inner),
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

/// When the optimizer steps, for the backward calls of one loop.
struct Schedule<'t> {
    /// What decides the step: the `if` condition, or the micro-batch loop's header.
    guard: Node<'t>,
    /// How many backward passes one step sums.
    k: Node<'t>,
    micro_steps: bool,
    /// The branch that steps the optimizer (`if (i + 1) % k == 0:`), for a periodic step.
    period: Option<Node<'t>>,
}

/// What runs once per iteration of a loop: the loop's body, or the body of a helper whose
/// every call (in this module) is in such a loop.
struct Region<'t> {
    /// The loop, or the helper's `def`.
    node: Node<'t>,
    body: Node<'t>,
    /// For a helper: the call in the loop that runs it.
    site: Option<Node<'t>>,
}

impl<'t> Region<'t> {
    fn around(model: &SemanticModel<'t>, node: Node<'t>) -> Option<Region<'t>> {
        if let Some(l) = model.enclosing_loops(node).first() {
            return Some(Region { node: l.node, body: l.node.field("body")?, site: None });
        }
        let (_, site) = model.step_loop_around(node)?;
        let site = site?;
        let function = model.enclosing_function(node)?.node;
        Some(Region { node: function, body: model.field(function, "body")?, site: Some(site) })
    }

    /// Is `node` in this region's own iteration (not in a loop nested in it)?
    fn holds_directly(&self, model: &SemanticModel<'t>, node: Node<'t>) -> bool {
        match model.enclosing_loops(node).first() {
            Some(l) => l.node.id() == self.node.id(),
            None => self.site.is_some() && model.enclosing_function(node).is_some_and(|f| f.node.id() == self.node.id()),
        }
    }

    /// Names that change every iteration: the loop's targets and what its body increments;
    /// for a helper, its parameters that receive such a name of the caller's loop.
    fn counters(&self, model: &SemanticModel<'t>) -> HashSet<String> {
        let mut names = running_counters(model, self.node, self.body);
        if let Some(site) = self.site {
            let Some(outer) = model.enclosing_loops(site).first().copied() else { return names };
            let Some(outer_body) = outer.node.field("body") else { return names };
            let theirs = running_counters(model, outer.node, outer_body);
            let params = self.node.field("parameters").map(memlint_python::named_children).unwrap_or_default();
            for (position, param) in params.iter().filter_map(|p| memlint_python::parameter_name(*p)).enumerate() {
                let name = model.text(param);
                let argument = model.argument_for(site, name, Some(position)).map(unparenthesize);
                if argument.is_some_and(|a| a.kind_name() == "identifier" && theirs.contains(model.text(a))) {
                    names.insert(name.to_owned());
                }
            }
        }
        names
    }
}

/// The optimizer steps of the region (not of a nested loop) all under a periodic guard,
/// the period's branch backpropagating nothing of its own: gradients sum over the period.
fn periodic_schedule<'t>(model: &SemanticModel<'t>, region: &Region<'t>) -> Option<Schedule<'t>> {
    let step_loop = region.node;
    let steps: Vec<Node<'t>> = descendants_where(model, region.body, |n| n.kind_name() == "call" && model.is_optimizer_step(n))
        .into_iter()
        .filter(|s| region.holds_directly(model, *s))
        .collect();
    // An optimizer stepped every iteration consumes the gradients of every iteration:
    // a GAN's critic (stepped every iteration) beside its generator (every `n_critic`).
    if steps.iter().any(|s| periodic_guard(model, *s, step_loop).is_none()) {
        return None;
    }
    let (guard, k, period) = steps.iter().find_map(|s| periodic_guard(model, *s, step_loop))?;
    // The periodic branch backpropagates its own loss: its optimizer steps on what that
    // branch computed (the generator's update every `n_critic` iterations), not on
    // gradients summed over the period.
    if model.backward_calls().iter().any(|b| contains(period, *b)) {
        return None;
    }
    Some(Schedule { guard, k, micro_steps: false, period: Some(period) })
}

/// `backward` in an inner loop over `k` micro-batches (`for _ in range(k):` fetching with
/// `next(...)`, or `for part in x.chunk(k):`) that steps no optimizer, inside a loop that
/// steps one after it: one step sums `k` backward passes.
fn micro_step_schedule<'t>(model: &SemanticModel<'t>, backward: Node<'t>, region: &Region<'t>) -> Option<Schedule<'t>> {
    // In a helper the micro-batch loop calls: the loops around that call.
    let anchor = region.site.unwrap_or(backward);
    if region.site.is_some() && !descendants_where(model, region.body, |n| n.kind_name() == "call" && model.is_optimizer_step(n)).is_empty() {
        return None;
    }
    let loops = model.enclosing_loops(anchor);
    let (inner, outer) = (loops.first()?.node, loops.get(1)?.node);
    let inner_body = model.field(inner, "body")?;
    // How many micro-batches: the loop's count, whatever form its header takes (`range(k)`
    // fetching with `next(...)`, chunks, `enumerate`/`zip` of them, `while True` over
    // `iter(...)`).
    let (k, from_range) = model.iteration_count(inner)?;
    // A `range(k)` loop counts micro-batches when it fetches one each time (in its body,
    // or in the helper it runs).
    let fetches = |body: Node<'t>| !model.calls_named_in("next", body.byte_range()).is_empty();
    if from_range && !fetches(inner_body) && !(region.site.is_some() && fetches(region.body)) {
        return None;
    }
    if !descendants_where(model, inner_body, |n| n.kind_name() == "call" && model.is_optimizer_step(n)).is_empty() {
        return None;
    }
    let outer_body = model.field(outer, "body")?;
    let steps_after = descendants_where(model, outer_body, |n| n.kind_name() == "call" && model.is_optimizer_step(n))
        .into_iter()
        .any(|s| s.start_byte() >= inner.end_byte() && model.enclosing_loops(s).first().map(|l| l.node.id()) == Some(outer.id()));
    if !steps_after {
        return None;
    }
    let header = inner.child_by_field_name("right").or_else(|| inner.child_by_field_name("condition")).unwrap_or(inner);
    Some(Schedule { guard: header, k, micro_steps: true, period: None })
}

fn normalize(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect::<String>().trim_matches(|c| c == '(' || c == ')').to_owned()
}

/// The `if` between `node` and `loop_node` whose condition has `... % k`: its condition,
/// `k`, and the `if` (or `elif`) itself.
fn periodic_guard<'t>(model: &SemanticModel<'t>, node: Node<'t>, loop_node: Node<'t>) -> Option<(Node<'t>, Node<'t>, Node<'t>)> {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.id() == loop_node.id() {
            break;
        }
        if matches!(n.kind_name(), "if_statement" | "elif_clause") {
            if let Some(condition) = model.field(n, "condition") {
                // `do_step = (i + 1) % k == 0` then `if do_step:`.
                let condition = model.flag_value(condition);
                if let Some(k) = model.period_of(condition) {
                    if !(k.kind_name() == "integer" && model.text(k) == "1") {
                        return Some((condition, k, n));
                    }
                }
                if let Some(k) = counter_threshold(model, condition, n, loop_node) {
                    return Some((condition, k, n));
                }
            }
        }
        current = n.parent();
    }
    None
}

/// `k` in `if count == k:` / `if count >= k:` where `count` is incremented in the loop
/// and reset to 0 in the branch: a counter that reaches `k` and starts again.
fn counter_threshold<'t>(model: &SemanticModel<'t>, condition: Node<'t>, branch: Node<'t>, loop_node: Node<'t>) -> Option<Node<'t>> {
    let comparison = unparenthesize(condition);
    if comparison.kind_name() != "comparison_operator" || comparison.named_child_count() != 2 {
        return None;
    }
    let (left, right) = (comparison.named_child(0)?, comparison.named_child(1)?);
    let operator = model.source()[left.end_byte()..right.start_byte()].trim();
    if !matches!(operator, "==" | ">=") || left.kind_name() != "identifier" {
        return None;
    }
    let counter = model.text(left);
    let consequence = model.field(branch, "consequence")?;
    let reset = descendants_where(model, consequence, |n| {
        n.kind_name() == "assignment"
            && model.field(n, "left").is_some_and(|l| model.text(l) == counter)
            && model.field(n, "right").is_some_and(|r| model.text(r) == "0")
    });
    let incremented = descendants_where(model, model.field(loop_node, "body")?, |n| {
        n.kind_name() == "augmented_assignment"
            && model.field(n, "left").is_some_and(|l| model.text(l) == counter)
            && model.field(n, "operator").is_some_and(|o| model.text(o) == "+=")
    });
    (!reset.is_empty() && !incremented.is_empty()).then(|| unparenthesize(right))
}

/// Inside `with accelerator.accumulate(model):` (Accelerate divides the loss itself).
fn under_accelerate<'t>(model: &SemanticModel<'t>, node: Node<'t>) -> bool {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.kind_name() == "with_statement" {
            let accumulates = descendants_where(model, n, |c| c.kind_name() == "with_item").iter().any(|item| {
                !descendants_where(model, *item, |c| {
                    c.kind_name() == "call"
                        && model.field(c, "function")
                            .and_then(|f| model.field(f, "attribute"))
                            .map(|a| model.text(a) == "accumulate")
                            .unwrap_or(false)
                })
                .is_empty()
            });
            if accumulates {
                return true;
            }
        }
        if n.kind_name() == "function_definition" {
            break;
        }
        current = n.parent();
    }
    false
}

/// `x` in `scaler.scale(x)`.
fn scaled_argument<'t>(model: &SemanticModel<'t>, receiver: Node<'t>) -> Option<Node<'t>> {
    let receiver = unparenthesize(receiver);
    if receiver.kind_name() != "call" {
        return None;
    }
    let callee = model.field(receiver, "function")?;
    let method = model.field(callee, "attribute").map(|a| model.text(a))?;
    if method != "scale" {
        return None;
    }
    positional_arguments(receiver).first().copied()
}

/// What the loss is divided by on its way to `backward()`, following its assignments in
/// the loop body.
fn collect_divisors<'t>(
    model: &SemanticModel<'t>,
    expr: Node<'t>,
    body: Node<'t>,
    divisors: &mut Vec<Node<'t>>,
    visited: &mut HashSet<String>,
    depth: usize,
) {
    if depth > 12 {
        return;
    }
    let expr = unparenthesize(expr);
    match expr.kind_name() {
        "binary_operator" => {
            let op = model.field(expr, "operator").map(|o| model.text(o)).unwrap_or("");
            let (Some(left), Some(right)) = (model.field(expr, "left"), model.field(expr, "right")) else { return };
            if matches!(op, "/" | "//") {
                divisors.push(unparenthesize(right));
                collect_divisors(model, left, body, divisors, visited, depth + 1);
            } else if op == "*" {
                collect_divisors(model, left, body, divisors, visited, depth + 1);
                collect_divisors(model, right, body, divisors, visited, depth + 1);
            } else if matches!(op, "+" | "-") {
                // A sum is divided by `d` only when both terms are (`a / k + b / k`).
                let (mut l, mut r) = (Vec::new(), Vec::new());
                collect_divisors(model, left, body, &mut l, &mut visited.clone(), depth + 1);
                collect_divisors(model, right, body, &mut r, visited, depth + 1);
                divisors.extend(l.into_iter().filter(|d| r.iter().any(|e| normalize(model.text(*e)) == normalize(model.text(*d)))));
            }
        }
        "call" => {
            let Some(callee) = model.field(expr, "function").filter(|f| f.kind_name() == "attribute") else { return };
            let method = model.field(callee, "attribute").map(|a| model.text(a)).unwrap_or("");
            let args = positional_arguments(expr);
            match method {
                "div" | "div_" | "divide" | "true_divide" => {
                    if let Some(d) = args.first() {
                        divisors.push(unparenthesize(*d));
                    }
                }
                // `scaler.scale(loss / k)`, apex's `amp.scale_loss(loss / k, optimizer)`.
                "scale" | "scale_loss" => {
                    if let Some(a) = args.first() {
                        collect_divisors(model, *a, body, divisors, visited, depth + 1);
                    }
                    return;
                }
                "mul" | "mul_" | "multiply" => {
                    if let Some(a) = args.first() {
                        collect_divisors(model, *a, body, divisors, visited, depth + 1);
                    }
                }
                _ => {}
            }
            if let Some(object) = model.field(callee, "object") {
                collect_divisors(model, object, body, divisors, visited, depth + 1);
            }
        }
        "identifier" => {
            let name = model.text(expr).to_owned();
            if !visited.insert(name.clone()) {
                return;
            }
            for b in model.bindings_in_scope(&name, expr) {
                // A `with` target takes effect where its body starts, which may be this use.
                if b.position > expr.start_byte() || !contains(body, b.statement) {
                    continue;
                }
                let Some(value) = b.value else { continue };
                match b.kind {
                    // `with amp.scale_loss(loss / k, optimizer) as scaled:` binds `scaled`.
                    BindingKind::Assign | BindingKind::WithTarget => collect_divisors(model, value, body, divisors, visited, depth + 1),
                    BindingKind::AugAssign => {
                        let op = b
                            .statement
                            .named_child(0)
                            .filter(|a| a.kind_name() == "augmented_assignment")
                            .and_then(|a| model.field(a, "operator"))
                            .map(|o| model.text(o))
                            .unwrap_or("");
                        match op {
                            "/=" | "//=" => divisors.push(unparenthesize(value)),
                            "*=" => collect_divisors(model, value, body, divisors, visited, depth + 1),
                            _ => {}
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// Names that change every iteration: the loop's targets and names incremented in its body.
fn running_counters<'t>(model: &SemanticModel<'t>, loop_node: Node<'t>, body: Node<'t>) -> HashSet<String> {
    let mut names: HashSet<String> = HashSet::new();
    if let Some(left) = model.field(loop_node, "left") {
        names.extend(model.identifiers_in(left));
    }
    for aug in descendants_where(model, body, |n| n.kind_name() == "augmented_assignment") {
        if let Some(left) = model.field(aug, "left").filter(|l| l.kind_name() == "identifier") {
            names.insert(model.text(left).to_owned());
        }
    }
    names
}

/// Divide the backpropagated loss by `k`: `(loss / k).backward()`, `scaler.scale(loss / k)`.
fn division_fix<'t>(model: &SemanticModel<'t>, root: Node<'t>, receiver: Node<'t>, k: Node<'t>) -> Fix {
    let k_text = if is_primary(k) { model.text(k).to_owned() } else { format!("({})", model.text(k)) };
    let (open, close) = if is_primary(root) { ("", "") } else { ("(", ")") };
    // As the receiver of `.backward()` the quotient needs parentheses; as an argument not.
    let (outer_open, outer_close) = if root.id() == receiver.id() { ("(", ")") } else { ("", "") };
    let edits = vec![
        Edit::insert(root.start_byte(), format!("{outer_open}{open}")),
        Edit::insert(root.end_byte(), format!("{close} / {k_text}{outer_close}")),
    ];
    Fix::unsafe_(format!("Divide `{}` by `{}`", snippet(model, root), model.text(k)), edits)
}
