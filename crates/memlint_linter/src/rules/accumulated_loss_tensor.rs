//! ## What it does
//! Checks for a tensor with autograd history (a loss, a model's output, arithmetic on
//! them) accumulated across iterations of a loop into something that outlives the
//! iteration: `total += loss`, `total = total + loss`, `losses.append(loss)`, or a dict of
//! such (`stats["loss"] += loss`, `history[k].append(loss)`, `for name, term in
//! terms.items(): stats[name] += term` over a dict of losses built in the loop); also
//! through a method call,
//! `meter.update(loss)`, when the method of `meter`'s class (defined in the same module or
//! another module of the project) does `self.total += val` or appends the loss to an
//! attribute.
//!
//! The loop must go over batches: its iterable names data (`loader`, `dataset`,
//! `batches`), or its body calls `backward()` or steps an optimizer. A loop inside a
//! forward pass (over layers, tiles, timesteps) needs what it collects for that pass.
//! A list of other per-batch outputs (`preds.append(out)`) is `gpu-tensors-collected`.
//!
//! A total reset only periodically (`if i % log_interval == 0: total = 0`) survives
//! the iterations in between and is flagged. A reset in the branch that steps the
//! optimizer under gradient accumulation (`if (i + 1) % accum_steps == 0:
//! optimizer.step(); ...; total = 0`) runs once per update, and is not; nor is a total
//! reset at the top of each step of a loop that steps the optimizer, summed over an inner
//! loop of micro-batches (`total = 0; for micro in batch.chunk(k): ...; total += loss`).
//!
//! Also a step's outputs kept whole when part of them is backpropagated (`out =
//! module.training_step(batch)`, `out["loss"].backward()`, `logs.append(out)`).
//!
//! Not flagged: accumulating `loss.item()`, `loss.detach()` or `float(loss)`; and the sum
//! of per-step losses inside one iteration that is then backpropagated (BPTT-style
//! `loss += criterion(out[t], y[t])` followed by `loss.backward()`), or any accumulator
//! that is itself backpropagated later.
//!
//! ## Why is this bad?
//! A tensor with autograd history holds on to the graph that produced it. Adding it to a
//! running total links every iteration's graph into the total, so nothing is freed until
//! the total is dropped:
//! - in an evaluation loop without `torch.no_grad()`, each batch's saved activations stay
//!   on the GPU, and memory grows batch by batch until it runs out (severe);
//! - in a training loop after `backward()`, the saved activations are freed, but each
//!   step's graph nodes and loss scalar stay alive: a slow leak for the whole epoch.
//!
//! ## Example
//! ```python
//! total_loss = 0
//! for x, y in train_loader:
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//!     total_loss += loss
//! ```
//!
//! Use instead:
//! ```python
//! total_loss = 0
//! for x, y in train_loader:
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//!     total_loss += loss.item()
//! ```
//!
//! ## Fix safety
//! The fix accumulates `<term>.item()` instead; where the code after the loop uses the
//! accumulator as a tensor (`total.item()`, `total.cpu()`, `torch.isnan(total)`), it
//! accumulates `<term>.detach()`, which keeps a tensor and frees the graph. Both are
//! unsafe: `.item()` makes the accumulator a Python float (code that uses it as a tensor
//! in a way memlint does not see would break) and fails on a term with more than one
//! element; `.detach()` keeps the total on the GPU.

use memlint_python::NodeExt;
use memlint_python::tree_sitter::Node;
use memlint_python::{contains, unparenthesize, BindingKind, SemanticModel};

use crate::prefilter::Words;
use crate::rules::{could_hold_a_model, could_loop_over_batches, could_run_backward};
use crate::checker::Checker;
use crate::rules::{is_lazy_initialization, is_loss_like, snippet};
use crate::{Diagnostic, Edit, Fix, Severity};

pub const SUMMARY: &str = "Tensor with autograd history accumulated across loop iterations";
pub const CAPTURES: &[&str] = &["accumulation", "accumulator", "term"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// An addition or `append` (or a method of a project class that stores its argument), a
/// loop over batches, and something that could be a network or a loss, or a backward pass
/// (what it backpropagates has history, whatever produced it).
pub fn trigger(words: &Words<'_>) -> bool {
    (words.contains("+") || words.has("append") || words.project_values())
        && could_loop_over_batches(words)
        && (could_hold_a_model(words) || could_run_backward(words))
}

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    // Only code in a loop (or in a helper a loop calls) can accumulate across iterations.
    let whole = 0..model.source().len();
    for m in checker.matches_in(std::slice::from_ref(&whole)) {
        let (Some(statement), Some(accumulator), Some(term)) = (m.get("accumulation"), m.get("accumulator"), m.get("term")) else {
            continue;
        };
        // A step's outputs whose loss is backpropagated (`out = module.training_step(b);
        // out["loss"].backward(); logs.append(out)`) hold that loss and its graph.
        let holds_backpropagated_loss = model.part_is_backpropagated(unparenthesize(term));
        if !model.has_autograd_history(term) && !holds_backpropagated_loss {
            continue;
        }
        let Some(base) = accumulator_base(model, accumulator) else { continue };
        // Any other collected tensor is `gpu-tensors-collected`'s business.
        if statement.kind_name() == "call" && !is_loss_like(model, term, 0) && !holds_backpropagated_loss {
            continue;
        }
        report(checker, statement, &base, term, None);
    }
    check_calls(checker);
}

/// Through calls: `meter.update(loss)` where the method of `meter`'s class (defined in
/// this module or imported from the project) does `self.total += val` or appends it.
fn check_calls(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    for range in model.outermost_loop_ranges() {
        for call in model.calls_in(range).iter().copied() {
            if model.field(call, "function").map(|f| f.kind_name() != "attribute").unwrap_or(true) {
                continue;
            }
            // Cheap first: some argument carries history (what the method stores may be
            // in another module).
            let args = model.field(call, "arguments").map(|a| model.named_children(a)).unwrap_or_default();
            let has_history = args.iter().any(|a| {
                let value = if a.kind_name() == "keyword_argument" { a.field("value") } else { Some(*a) };
                value.map(|v| model.has_autograd_history(v)).unwrap_or(false)
            });
            if !has_history {
                continue;
            }
            for (term, stored) in model.call_stores_arguments(call) {
                if !model.has_autograd_history(term) {
                    continue;
                }
                if stored.kind == memlint_python::StoreKind::Appends && !is_loss_like(model, term, 0) {
                    continue;
                }
                let Some(object) = model.field(call, "function").and_then(|f| model.field(f, "object")) else { continue };
                let Some(base) = accumulator_base(model, object) else { continue };
                report(checker, call, &base, term, Some(&stored));
            }
        }
    }
}

/// Reports `statement` (an accumulation, or a call that accumulates, `via`) when the
/// accumulator `base` outlives the iterations of a loop over batches.
fn report<'t>(checker: &mut Checker<'_, 't>, statement: Node<'t>, base: &str, term: Node<'t>, via: Option<&memlint_python::StoredArgument>) {
    let model = checker.model;
    {
        // In a helper the loop calls, accumulating into its parameter: the caller's loop
        // and the caller's name decide.
        // A name rebound by `+=` must come back from the helper; a container mutated in
        // place (`stats["loss"] += loss`, `losses.append(loss)`) need not.
        let rebinds = statement.kind_name() != "call"
            && model.field(statement, "left").is_some_and(|l| l.kind_name() == "identifier");
        let (anchor, base) = match crate::rules::accumulator_through_helper(model, statement, base, rebinds) {
            Some((site, caller_base)) => (site, caller_base),
            None => (statement, base.to_owned()),
        };
        let loops = model.enclosing_loops(anchor);
        if loops.is_empty() {
            return;
        }
        // The loops whose iterations the accumulator survives: those that contain no
        // plain (re)definition of it. They are the innermost ones, up to the loop that
        // resets it.
        let definitions: Vec<Node> = if base.contains('.') {
            Vec::new()
        } else {
            model
                .bindings_in_scope(&base, anchor)
                .iter()
                .filter(|b| matches!(b.kind, BindingKind::Assign | BindingKind::LoopTarget | BindingKind::WithTarget))
                .filter(|b| !contains(b.statement, anchor))
                // `if total is None: total = loss` starts the total once.
                .filter(|b| !is_lazy_initialization(model, b.statement, &base))
                .map(|b| b.statement)
                .collect()
        };
        // A reset under a condition (`if i % log_interval == 0: total = 0`) does not run
        // every iteration: the total survives the iterations in between.
        let surviving: Vec<_> = loops
            .iter()
            .take_while(|l| {
                let body = l.node.field("body");
                !definitions.iter().any(|d| body.map(|b| contains(b, *d) && !conditional_within(model, *d, b)).unwrap_or(false))
            })
            .collect();
        let Some(outermost) = surviving.last() else { return };
        // Across batches only: a loop inside a forward pass (over layers, tiles,
        // timesteps) needs what it collects for that pass's own backward.
        if !surviving.iter().any(|l| l.over_batches) {
            return;
        }
        // Reset once per optimizer update: the loop that resets the total steps an optimizer
        // and the loops it survives (micro-batches of one update) do not. It holds one
        // accumulation window, read after the inner loop (`print(total.item())`).
        let steps = |node: Node<'t>| !crate::rules::descendants_where(model, node, |c| c.kind_name() == "call" && model.is_optimizer_step(c)).is_empty();
        if loops.get(surviving.len()).is_some_and(|resetting| steps(resetting.node)) && !steps(outermost.node) {
            return;
        }
        if model.backpropagated_after(&base, anchor) {
            return;
        }
        // A training loop: its body, or the helper that accumulates, runs a backward pass.
        let training = subtree_has(model, outermost.node, |n| n.kind_name() == "call" && model.is_backward_call(n))
            || (anchor.id() != statement.id()
                && model.enclosing_function(statement).is_some_and(|f| subtree_has(model, f.node, |n| n.kind_name() == "call" && model.is_backward_call(n))));
        let statement_text = snippet(model, statement);
        let term_text = snippet(model, term);
        let (message, severity) = if training {
            (
                format!(
                    "`{statement_text}` keeps each step's graph nodes and loss tensor alive after `backward()`: `{term_text}` carries autograd history, so `{base}` grows by one graph per step for the whole loop"
                ),
                Severity::Warning,
            )
        } else {
            (
                format!(
                    "`{statement_text}` keeps every batch's activations on the GPU: `{term_text}` carries autograd history in a loop with no `backward()` and no `torch.no_grad()`, so each iteration's graph stays alive in `{base}`"
                ),
                Severity::Error,
            )
        };
        let message = match via {
            Some(stored) => message.replacen(
                &format!("`{statement_text}`"),
                &format!("`{statement_text}` (its method stores `{}` in `{}`)", stored.name, stored.into),
                1,
            ),
            None => message,
        };
        let mut evidence = Vec::new();
        // Why the term carries history: the chain of facts its value rests on.
        let chain = model.explain_value(term);
        if chain.is_empty() {
            evidence.push(memlint_python::Fact::at(format!("`{term_text}` carries autograd history"), term));
        }
        evidence.extend(chain);
        if anchor.id() != statement.id() {
            evidence.push(memlint_python::Fact::at(
                format!("`{}` runs it once per iteration and keeps `{base}` across iterations", model.short_text(anchor)),
                anchor,
            ));
        }
        evidence.push(memlint_python::Fact::at(
            format!("`{base}` is not reset in the loop on line {} and never backpropagated", model.line_of(outermost.node)),
            outermost.node,
        ));
        // A total used as a tensor afterwards (`total.item()`) must stay a tensor.
        let used_as_tensor = used_as_tensor_after(model, &base, anchor);
        let fix = if used_as_tensor { detach_fix(model, term, &base) } else { item_fix(model, term) };
        checker.report(
            Diagnostic::new(checker.rule, statement.byte_range(), message)
                .with_help(if used_as_tensor {
                    format!("accumulate a detached tensor (`{term_text}.detach()`): `{base}` is used as a tensor later")
                } else {
                    format!("accumulate a number (`{term_text}.item()`) or a detached tensor (`.detach()`)")
                })
                .with_severity(severity)
                .with_fix(Some(fix))
                .with_evidence(evidence),
        );
    }
}

/// The name that holds the accumulation: `total`, `stats` for `stats["loss"]`,
/// `self.total` for an attribute.
fn accumulator_base(model: &SemanticModel<'_>, node: Node<'_>) -> Option<String> {
    match node.kind_name() {
        "identifier" => Some(model.text(node).to_owned()),
        "attribute" => model.dotted_name(node),
        "subscript" => accumulator_base(model, node.field("value")?),
        _ => None,
    }
}

/// Is `node` under a periodic `if` (`if i % log_interval == 0:`) inside `body`?
fn conditional_within<'t>(model: &SemanticModel<'t>, node: Node<'t>, body: Node<'t>) -> bool {
    let mut current = model.parent(node);
    while let Some(n) = current {
        if n.id() == body.id() {
            return false;
        }
        if matches!(n.kind_name(), "if_statement" | "elif_clause") {
            // The branch that steps the optimizer runs once per update: a total reset there
            // holds one accumulation window at most.
            let periodic = model.field(n, "condition").map(|c| model.text(c).contains('%')).unwrap_or(false)
                && !(n.kind_name() == "if_statement" && crate::rules::branch_steps_an_optimizer(model, n));
            let in_consequence = model.field(n, "consequence").map(|c| contains(c, node)).unwrap_or(false);
            if periodic && in_consequence {
                return true;
            }
        }
        current = model.parent(n);
    }
    false
}

fn subtree_has<'t>(model: &SemanticModel<'t>, node: Node<'t>, predicate: impl Fn(Node<'t>) -> bool) -> bool {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if predicate(n) {
            return true;
        }
        if matches!(n.kind_name(), "function_definition" | "class_definition") && n.id() != node.id() {
            continue;
        }
        stack.extend(model.named_children(n));
    }
    false
}

/// Attributes a Python number has; any other attribute read on the accumulator
/// (`total.item()`, `total.cpu()`) means the code after the loop treats it as a tensor.
const NUMBER_ATTRIBUTES: &[&str] = &["real", "imag", "conjugate", "is_integer", "hex", "as_integer_ratio", "bit_length", "__class__"];

/// Is the accumulator `base` (a plain name) read as a tensor after `anchor`, in its scope:
/// a method or attribute a number lacks (`total.item()`, `total.detach()`), or an argument
/// of a torch function (`torch.stack(losses)` is for containers, but `torch.isnan(total)`).
fn used_as_tensor_after<'t>(model: &SemanticModel<'t>, base: &str, anchor: Node<'t>) -> bool {
    used_as_tensor_at(model, base, anchor, 0)
}

/// [`used_as_tensor_after`], following a returned accumulator (`return total / n`) to
/// what its callers in this module bind it to (`train_loss = train(...)`, then
/// `train_loss.item()`), up to two levels.
fn used_as_tensor_at<'t>(model: &SemanticModel<'t>, base: &str, anchor: Node<'t>, depth: usize) -> bool {
    if base.contains('.') {
        return false;
    }
    let scope = model.scope_body(anchor);
    let mut returned = false;
    let used = model.identifiers_named_in(base, anchor.end_byte()..scope.end_byte()).iter().any(|id| {
        let Some(parent) = model.parent(*id) else { return false };
        let mut up = Some(*id);
        while let Some(n) = up.and_then(|n| model.parent(n)) {
            if n.kind_name() == "return_statement" {
                returned = true;
            }
            if matches!(n.kind_name(), "block" | "module") {
                break;
            }
            up = Some(n);
        }
        match parent.kind_name() {
            "attribute" => {
                model.field(parent, "object").is_some_and(|o| o.id() == id.id())
                    && model.field(parent, "attribute").is_some_and(|a| !NUMBER_ATTRIBUTES.contains(&model.text(a)))
            }
            "argument_list" => model
                .parent(parent)
                .and_then(|call| model.field(call, "function"))
                .and_then(|f| model.qualified_name(f))
                .is_some_and(|q| q.starts_with("torch.")),
            _ => false,
        }
    });
    if used || !returned || depth >= 2 {
        return used;
    }
    let Some(function) = model.enclosing_function(anchor) else { return false };
    model.calls_of_function(function).into_iter().any(|call| {
        let statement = crate::rules::statement_around(model, call);
        let Some(assignment) = statement.named_child(0).filter(|a| a.kind_name() == "assignment") else { return false };
        let Some(target) = model.field(assignment, "left").filter(|t| t.kind_name() == "identifier") else { return false };
        model.field(assignment, "right").is_some_and(|r| r.id() == call.id())
            && used_as_tensor_at(model, model.text(target), statement, depth + 1)
    })
}

/// `total += loss.detach()`: the total stays a tensor (so `total.item()` after the loop
/// still works) and holds no graph.
fn detach_fix(model: &SemanticModel<'_>, term: Node<'_>, base: &str) -> Fix {
    let simple = matches!(term.kind_name(), "identifier" | "attribute" | "call" | "subscript" | "parenthesized_expression");
    let edits = if simple {
        vec![Edit::insert(term.end_byte(), ".detach()")]
    } else {
        vec![Edit::insert(term.start_byte(), "("), Edit::insert(term.end_byte(), ").detach()")]
    };
    let shown = snippet(model, term);
    Fix::unsafe_(format!("Accumulate `{shown}.detach()` (`{base}` stays a tensor)"), edits)
}

fn item_fix(model: &SemanticModel<'_>, term: Node<'_>) -> Fix {
    let simple = matches!(term.kind_name(), "identifier" | "attribute" | "call" | "subscript" | "parenthesized_expression");
    let edits = if simple {
        vec![Edit::insert(term.end_byte(), ".item()")]
    } else {
        vec![Edit::insert(term.start_byte(), "("), Edit::insert(term.end_byte(), ").item()")]
    };
    let shown = snippet(model, term);
    Fix::unsafe_(format!("Accumulate `{shown}.item()`"), edits)
}
