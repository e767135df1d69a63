//! ## What it does
//! Checks for gradient accumulation, where the optimizer steps once every `k` iterations
//! (`optimizer.step()` / `scaler.step(optimizer)` under `if (i + 1) % k == 0:` in the
//! per-step loop, while `backward()` runs every iteration), when the loss that is
//! backpropagated is not divided by `k`, or is divided by something that changes every
//! step (the loop index, a running counter).
//!
//! Not flagged: a loss divided by `k` anywhere on its way to `backward()`
//! (`loss = loss / k`, `loss /= k`, `(loss / k).backward()`, `scaler.scale(loss / k)`,
//! `with amp.scale_loss(loss / k, optimizer) as scaled:`,
//! `loss.div(k)`, `loss * (1 / k)`); a loss already normalised by some other fixed
//! quantity (`loss / num_micro_batches`: memlint cannot tell it from `k`, so it trusts it);
//! Accelerate's `with accelerator.accumulate(model):` and framework `backward`s
//! (`accelerator.backward`, DeepSpeed's `engine.backward`), which divide themselves; a
//! loop where some optimizer steps every iteration (a GAN that updates the critic every
//! step and the generator every `n_critic` steps: each optimizer zeroes and steps its own
//! gradients, nothing is accumulated).
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
/// A `%` (the periodic step), a backward pass and an optimizer step.
pub fn trigger(words: &Words<'_>) -> bool {
    words.contains("%") && could_run_backward(words) && could_step_an_optimizer(words)
}

/// Objects whose `backward(loss)` scales for accumulation itself.
const FRAMEWORKS: &[&str] = &["accelerator", "engine", "deepspeed", "fabric", "trainer"];

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    // The query matches `.backward()` calls only.
    for m in checker.matches_at(model.calls_named("backward")) {
        let (Some(backward), Some(receiver)) = (m.get("backward"), m.get("receiver")) else { continue };
        let receiver_text = model.text(receiver).to_lowercase();
        if FRAMEWORKS.iter().any(|f| receiver_text.contains(f)) {
            continue;
        }
        let Some(step_loop) = model.enclosing_loops(backward).first().copied() else { continue };
        let Some(body) = step_loop.node.field("body") else { continue };
        if periodic_guard(model, backward, step_loop.node).is_some() || under_accelerate(model, backward) {
            continue;
        }
        // An optimizer step in the same loop, guarded by `% k`.
        let steps = descendants_where(body, |n| n.kind_name() == "call" && model.is_optimizer_step(n));
        // An optimizer that steps every iteration of this loop (a GAN's critic, while the
        // generator steps every `n_critic` iterations): each optimizer zeroes and steps its
        // own gradients, and nothing is accumulated.
        let steps_every_iteration = steps.iter().any(|s| {
            model.enclosing_loops(*s).first().map(|l| l.node.id()) == Some(step_loop.node.id())
                && periodic_guard(model, *s, step_loop.node).is_none()
        });
        if steps_every_iteration {
            continue;
        }
        let Some((guard, k)) = steps.iter().find_map(|s| {
            // The step must be in this loop, not in a nested one.
            let innermost = model.enclosing_loops(*s).first().map(|l| l.node.id());
            if innermost != Some(step_loop.node.id()) {
                return None;
            }
            periodic_guard(model, *s, step_loop.node)
        }) else {
            continue;
        };
        // The loss: `loss` in `loss.backward()`, `x` in `scaler.scale(x).backward()`.
        let root = scaled_argument(model, receiver).unwrap_or(receiver);
        let mut divisors = Vec::new();
        let mut visited = HashSet::new();
        collect_divisors(model, root, body, &mut divisors, &mut visited, 0);
        let k_text = normalize(model.text(k));
        if divisors.iter().any(|d| normalize(model.text(*d)) == k_text) {
            continue;
        }
        let counters = running_counters(model, step_loop.node, body);
        let guard_text = snippet(model, guard);
        let loss_text = snippet(model, root);
        let k_shown = snippet(model, k);
        if divisors.is_empty() {
            let message = format!(
                "the optimizer steps once every `{k_shown}` iterations (`{guard_text}`) but `{loss_text}` is backpropagated undivided: gradients of `{k_shown}` micro-batches are summed, so each update is `{k_shown}` times the mean gradient (as if the learning rate were `{k_shown}` times larger)"
            );
            checker.report(
                Diagnostic::new(checker.rule, backward.byte_range(), message)
                    .with_help(format!("divide the loss by `{k_shown}` before `backward()`"))
                    .with_severity(Severity::Warning)
                    .with_fix(Some(division_fix(model, root, receiver, k))),
            );
        } else if let Some(counter) = divisors.iter().find(|d| {
            model.identifiers_in(**d).iter().any(|i| counters.contains(i))
        }) {
            let counter_text = snippet(model, *counter);
            let message = format!(
                "the loss backpropagated here is divided by `{counter_text}`, which changes every iteration, while the optimizer steps once every `{k_shown}` iterations (`{guard_text}`): the accumulated micro-batches are weighted unequally instead of by 1/`{k_shown}` each"
            );
            checker.report(
                Diagnostic::new(checker.rule, backward.byte_range(), message)
                    .with_help(format!("divide the loss by the fixed number of accumulation steps, `{k_shown}`"))
                    .with_severity(Severity::Warning),
            );
        }
    }
}

fn normalize(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect::<String>().trim_matches(|c| c == '(' || c == ')').to_owned()
}

/// The `if` between `node` and `loop_node` whose condition has `... % k`, and `k`.
fn periodic_guard<'t>(model: &SemanticModel<'t>, node: Node<'t>, loop_node: Node<'t>) -> Option<(Node<'t>, Node<'t>)> {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.id() == loop_node.id() {
            break;
        }
        if matches!(n.kind_name(), "if_statement" | "elif_clause") {
            if let Some(condition) = n.field("condition") {
                // `do_step = (i + 1) % k == 0` then `if do_step:`.
                let condition = if condition.kind_name() == "identifier" {
                    model
                        .binding_at(model.text(condition), condition)
                        .and_then(|b| if b.kind == BindingKind::Assign { b.value } else { None })
                        .unwrap_or(condition)
                } else {
                    condition
                };
                let modulus = descendants_where(condition, |c| {
                    c.kind_name() == "binary_operator" && c.field("operator").map(|o| model.text(o) == "%").unwrap_or(false)
                });
                if let Some(k) = modulus.first().and_then(|m| m.field("right")) {
                    let k = unparenthesize(k);
                    if !(k.kind_name() == "integer" && model.text(k) == "1") {
                        return Some((condition, k));
                    }
                }
            }
        }
        current = n.parent();
    }
    None
}

/// Inside `with accelerator.accumulate(model):` (Accelerate divides the loss itself).
fn under_accelerate<'t>(model: &SemanticModel<'t>, node: Node<'t>) -> bool {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.kind_name() == "with_statement" {
            let accumulates = descendants_where(n, |c| c.kind_name() == "with_item").iter().any(|item| {
                !descendants_where(*item, |c| {
                    c.kind_name() == "call"
                        && c.field("function")
                            .and_then(|f| f.field("attribute"))
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
    let callee = receiver.field("function")?;
    let method = callee.field("attribute").map(|a| model.text(a))?;
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
            let op = expr.field("operator").map(|o| model.text(o)).unwrap_or("");
            let (Some(left), Some(right)) = (expr.field("left"), expr.field("right")) else { return };
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
            let Some(callee) = expr.field("function").filter(|f| f.kind_name() == "attribute") else { return };
            let method = callee.field("attribute").map(|a| model.text(a)).unwrap_or("");
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
            if let Some(object) = callee.field("object") {
                collect_divisors(model, object, body, divisors, visited, depth + 1);
            }
        }
        "identifier" => {
            let name = model.text(expr).to_owned();
            if !visited.insert(name.clone()) {
                return;
            }
            for b in model.bindings_in_scope(&name, expr) {
                // A `with` target takes effect where its body starts, maybe at this very use.
                let later = b.position > expr.start_byte() || (b.position == expr.start_byte() && b.kind != BindingKind::WithTarget);
                if later || !contains(body, b.statement) {
                    continue;
                }
                let Some(value) = b.value else { continue };
                match b.kind {
                    // `with amp.scale_loss(loss / k, opt) as scaled:` binds the scaled loss.
                    BindingKind::Assign | BindingKind::WithTarget => collect_divisors(model, value, body, divisors, visited, depth + 1),
                    BindingKind::AugAssign => {
                        let op = b
                            .statement
                            .named_child(0)
                            .filter(|a| a.kind_name() == "augmented_assignment")
                            .and_then(|a| a.field("operator"))
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
    if let Some(left) = loop_node.field("left") {
        names.extend(model.identifiers_in(left));
    }
    for aug in descendants_where(body, |n| n.kind_name() == "augmented_assignment") {
        if let Some(left) = aug.field("left").filter(|l| l.kind_name() == "identifier") {
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
