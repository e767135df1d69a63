//! ## What it does
//! Checks for float16 training without loss scaling: a model converted with `.half()` or
//! `.to(torch.float16)`, or `autocast` with `dtype=torch.float16` (or CUDA autocast's
//! default dtype, which is float16), in a module that calls `.backward()`, steps an
//! optimizer, and uses no `GradScaler`.
//!
//! bfloat16 (`.bfloat16()`, `autocast(dtype=torch.bfloat16)`, CPU autocast's default) is
//! not flagged: it has float32's exponent range. Nor are inference-only code (no
//! `.backward()`, or autocast under `torch.no_grad()`), code that computes gradients but
//! never steps an optimizer (to compare them with a reference), and backward passes
//! whose loss is scaled (in a function that calls `scaler.scale(...)`, apex's
//! `amp.scale_loss` or `FP16_Optimizer`'s `optimizer.backward(loss)`, DeepSpeed's or
//! Accelerate's `backward`, any `x.backward(loss)` of something that is not a tensor, given
//! the loss). A `GradScaler` created in another function, or created and
//! never used, scales nothing. A network converted inside a function that does not
//! backpropagate must leave it (returned, stored on `self`, or given to a function of
//! this module that backpropagates) to count: a local model halved for inference or for a
//! library call is not trained here. The dtype may be a name or `getattr(torch, args.dtype)`
//! with a `"float16"` default; the converted model may be a chained constructor
//! (`Net().cuda().half()`).
//!
//!
//! A network converted to float16 whose loss a `GradScaler` scales is reported too, as an
//! error: PyTorch's `GradScaler` refuses float16 weights (`scaler.step` raises `ValueError:
//! Attempting to unscale FP16 gradients.`). Mixed precision keeps float32 weights and runs
//! the forward pass under `autocast`; the fix for both is to drop the conversion.
//!
//! ## Why is this bad?
//! float16 cannot represent magnitudes below about 6e-8 (and keeps little precision
//! below 6e-5). Many gradients of a deep network are smaller than that: in float16 they
//! underflow to zero, so layers silently stop learning or training diverges. A
//! `GradScaler` multiplies the loss before `backward()` so gradients stay representable,
//! unscales them before the optimizer step, and skips steps that overflowed.
//!
//! ## Example
//! ```python
//! model = Net().cuda().half()
//! for x, y in loader:
//!     loss = criterion(model(x.half()), y)
//!     loss.backward()
//!     optimizer.step()
//! ```
//!
//! Use instead:
//! ```python
//! model = Net().cuda()
//! scaler = torch.amp.GradScaler("cuda")
//! for x, y in loader:
//!     with torch.autocast("cuda", dtype=torch.float16):
//!         loss = criterion(model(x), y)
//!     scaler.scale(loss).backward()
//!     scaler.step(optimizer)
//!     scaler.update()
//! ```

use memlint_python::NodeExt;
use memlint_python::tree_sitter::Node;
use memlint_python::{named_children, SemanticModel, ValueKind};

use crate::prefilter::Words;
use crate::checker::Checker;
use crate::rules::snippet;
use crate::{Diagnostic, Severity};

pub const SUMMARY: &str = "float16 training without a `GradScaler`";
pub const CAPTURES: &[&str] = &["conversion", "receiver", "autocast"];
pub const FIXABLE: bool = false;

/// The trigger: what a file must contain for this rule to report anything in it.
/// A called `backward()` (the rule is about training) and a float16 conversion or autocast.
pub fn trigger(words: &Words<'_>) -> bool {
    words.called("backward") && ["half", "float16", "autocast"].iter().any(|w| words.contains(w))
}

const AUTOCASTS: &[&str] = &[
    "torch.autocast",
    "torch.amp.autocast",
    "torch.amp.autocast_mode.autocast",
    "torch.cuda.amp.autocast",
    "torch.cuda.amp.autocast_mode.autocast",
];
/// For autocast: the forward runs in float16, the weights stay float32, a scaler fits.
const HELP: &str = "scale the loss with `scaler = torch.amp.GradScaler(\"cuda\")`: `scaler.scale(loss).backward()`, `scaler.step(optimizer)`, `scaler.update()`; or train in bfloat16";
/// For a network converted to float16: a `GradScaler` refuses float16 weights, so the
/// conversion itself must go.
const HELP_CONVERSION: &str = "drop the conversion to float16 and train under `torch.autocast(\"cuda\", dtype=torch.float16)` with `scaler = torch.amp.GradScaler(\"cuda\")` (`scaler.scale(loss).backward()`, `scaler.step(optimizer)`, `scaler.update()`), or train in bfloat16 (`.bfloat16()`, no scaler needed); a `GradScaler` on a `.half()` network fails at `scaler.step` (`ValueError: Attempting to unscale FP16 gradients`)";

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    // The backward passes that nothing scales: not a framework's, and not in a function
    // (or module body) that scales its loss. A `GradScaler` created elsewhere, or created
    // and never used, scales nothing.
    let scaling_scopes = scaling_scopes(model);
    let grad_scaler_scopes = grad_scaler_scopes(model);
    let own_backward: Vec<Node> = model.calls_named("backward").iter().copied().filter(|c| !backward_scales_itself(model, *c)).collect();
    let backward_calls: Vec<Node> = own_backward
        .iter()
        .copied()
        .filter(|c| !scaling_scopes.contains(&model.enclosing_function(*c).map(|f| f.node.id())))
        .collect();
    // The backward passes a `GradScaler` scales: with float16 weights they fail at run time.
    let scaler_backward: Vec<Node> = own_backward
        .iter()
        .copied()
        .filter(|c| grad_scaler_scopes.contains(&model.enclosing_function(*c).map(|f| f.node.id())))
        .collect();
    if backward_calls.is_empty() && scaler_backward.is_empty() {
        return;
    }
    // Underflowing gradients matter where they update weights: code that only computes
    // gradients (to compare them with a reference, to inspect them) trains nothing.
    let steps_weights = model.calls_named("step").iter().any(|c| {
        model.is_optimizer_step(*c)
            || c.field("function").and_then(|f| f.field("object")).is_some_and(|o| {
                matches!(model.value_kind(o), ValueKind::Optimizer | ValueKind::Scaler)
            })
    });
    if !steps_weights {
        return;
    }
    // The query matches `.half()` / `.to(...)` calls and calls of a name ending in `autocast`.
    let candidates: Vec<Node> = model
        .calls()
        .iter()
        .copied()
        .filter(|c| {
            c.field("function").map(|f| {
                let text = model.text(f);
                text.ends_with("autocast") || text.ends_with("half") || text.ends_with("to")
            }) == Some(true)
        })
        .collect();
    for m in checker.matches_at(&candidates) {
        if let (Some(conversion), Some(receiver)) = (m.get("conversion"), m.get("receiver")) {
            let method = conversion
                .field("function")
                .and_then(|f| model.field(f, "attribute"))
                .map(|a| model.text(a))
                .unwrap_or("");
            let to_fp16 = match method {
                "half" => true,
                "to" => conversion
                    .field("arguments")
                    .map(|args| model.named_children(args).into_iter().any(|a| is_float16(model, argument_value(a))))
                    .unwrap_or(false),
                _ => false,
            };
            if !to_fp16 || model.value_kind(receiver) != ValueKind::Model {
                continue;
            }
            let shown = snippet(model, conversion);
            let mut evidence = model.explain_value(receiver);
            if !backward_calls.is_empty() && may_be_trained(model, conversion, receiver, &backward_calls) {
                if let Some(b) = backward_calls.first() {
                    evidence.push(memlint_python::Fact::at(format!("`{}` backpropagates with no loss scaling", model.short_text(*b)), *b));
                }
                checker.report(
                    Diagnostic::new(
                        checker.rule,
                        conversion.byte_range(),
                        format!(
                            "`{shown}` trains in float16 without loss scaling: gradients smaller than about 6e-8 underflow to zero in float16, so layers silently stop learning"
                        ),
                    )
                    .with_help(HELP_CONVERSION)
                    .with_severity(Severity::Warning)
                    .with_evidence(evidence),
                );
            } else if !scaler_backward.is_empty() && may_be_trained(model, conversion, receiver, &scaler_backward) {
                if let Some(b) = scaler_backward.first() {
                    evidence.push(memlint_python::Fact::at(format!("`{}` is scaled by a `GradScaler`", model.short_text(*b)), *b));
                }
                checker.report(
                    Diagnostic::new(
                        checker.rule,
                        conversion.byte_range(),
                        format!(
                            "`{shown}` makes the weights float16, and this code scales their gradients with a `GradScaler`: `scaler.step` raises `ValueError: Attempting to unscale FP16 gradients.` on the first step"
                        ),
                    )
                    .with_help(HELP_CONVERSION)
                    .with_severity(Severity::Error)
                    .with_evidence(evidence),
                );
            }
        } else if let Some(call) = m.get("autocast") {
            if model.call_resolves_to(call, AUTOCASTS).is_none() || !autocasts_to_float16(model, call) {
                continue;
            }
            if model.grad_context(call).is_disabled() {
                continue;
            }
            let scope = model.enclosing_function(call).map(|f| f.node.id());
            let trains_here = scope.is_none()
                || backward_calls.iter().any(|b| model.enclosing_function(*b).map(|f| f.node.id()) == scope);
            if !trains_here {
                continue;
            }
            checker.report(
                Diagnostic::new(
                    checker.rule,
                    call.byte_range(),
                    format!(
                        "`{}` runs the forward pass in float16 and this code calls `backward()` without a `GradScaler`: gradients smaller than about 6e-8 underflow to zero in float16",
                        snippet(model, call)
                    ),
                )
                .with_help(HELP)
                .with_severity(Severity::Warning),
            );
        }
    }
}

/// Can the network converted by `conversion` reach one of the unscaled `backward_calls`?
/// At module level (a program), or where its function backpropagates, yes; in another
/// function only when the network leaves it: returned (a factory), stored on `self`, or
/// handed to a function of this module that backpropagates. A local network converted for
/// inference or for a library call (`prepare_model_for_kbit_training(model)`) does not.
fn may_be_trained<'t>(model: &SemanticModel<'t>, conversion: Node<'t>, receiver: Node<'t>, backward_calls: &[Node<'t>]) -> bool {
    let Some(function) = model.enclosing_function(conversion) else { return true };
    let scope = function.node.id();
    let in_scope = |n: Node<'t>| model.enclosing_function(n).map(|f| f.node.id()) == Some(scope);
    if backward_calls.iter().any(|b| in_scope(*b)) {
        return true;
    }
    // The names that hold the network: the receiver's (`model.half()` converts `model` in
    // place) and the assignment's target (`net = Net().half()`).
    let mut names: Vec<String> = model.dotted_name(receiver).into_iter().collect();
    let mut current = model.parent(conversion);
    while let Some(n) = current {
        match n.kind_name() {
            "return_statement" => return true,
            "assignment" => {
                if let Some(target) = model.field(n, "left").and_then(|l| model.dotted_name(l)) {
                    names.push(target);
                }
                break;
            }
            "expression_statement" | "block" | "function_definition" => break,
            _ => {}
        }
        current = model.parent(n);
    }
    if names.iter().any(|n| n.starts_with("self.")) {
        return true;
    }
    let Some(body) = function.node.field("body") else { return true };
    let mentions = |node: Node<'t>| model.identifiers_in(node).iter().any(|i| names.iter().any(|n| n == i));
    let returned = crate::rules::descendants_where(model, body, |n| n.kind_name() == "return_statement" && in_scope(n) && mentions(n));
    if !returned.is_empty() {
        return true;
    }
    // Handed to a function of this module that backpropagates without scaling.
    let trains = |f: &memlint_python::FunctionInfo<'t>| backward_calls.iter().any(|b| model.enclosing_function(*b).map(|g| g.node.id()) == Some(f.node.id()));
    model
        .calls_in(body.byte_range())
        .iter()
        .any(|call| call.field("arguments").is_some_and(mentions) && crate::rules::local_functions_called(model, *call).any(trains))
}

fn argument_value(arg: Node<'_>) -> Node<'_> {
    if arg.kind_name() == "keyword_argument" {
        arg.field("value").unwrap_or(arg)
    } else {
        arg
    }
}

/// `torch.float16` / `torch.half`, also through a name bound to it, or
/// `getattr(torch, name)` where `name` holds `"float16"` / `"half"` (a constant or an
/// argparse default).
fn is_float16<'t>(model: &SemanticModel<'t>, expr: Node<'t>) -> bool {
    is_float16_at(model, expr, 0)
}

fn is_float16_at<'t>(model: &SemanticModel<'t>, expr: Node<'t>, depth: usize) -> bool {
    if depth > 6 {
        return false;
    }
    if matches!(model.qualified_name(expr).as_deref(), Some("torch.float16" | "torch.half")) {
        return true;
    }
    match expr.kind_name() {
        "identifier" if model.qualified_name(expr).is_none() => model
            .binding_at(model.text(expr), expr)
            .and_then(|b| if b.kind == memlint_python::BindingKind::Assign { b.value } else { None })
            .map(|v| is_float16_at(model, v, depth + 1))
            .unwrap_or(false),
        "call" => {
            let is_getattr = model.field(expr, "function").map(|f| model.text(f) == "getattr").unwrap_or(false);
            let args: Vec<Node> = model.field(expr, "arguments").map(named_children).unwrap_or_default();
            is_getattr
                && args.len() >= 2
                && model.qualified_name(args[0]).as_deref() == Some("torch")
                && matches!(memlint_python::constant_value(model, args[1]), Some(memlint_python::Constant::Str(ref s)) if s == "float16" || s == "half")
        }
        _ => false,
    }
}

/// Does this autocast compute in float16 (explicitly, or by CUDA's default)?
fn autocasts_to_float16<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let Some(args) = model.field(call, "arguments") else { return false };
    let args = model.named_children(args);
    let keyword = |name: &str| {
        args.iter().find(|a| {
            a.kind_name() == "keyword_argument" && a.field("name").map(|n| model.text(n) == name).unwrap_or(false)
        })
        .and_then(|a| a.field("value"))
    };
    if keyword("enabled").map(|v| model.text(v) == "False").unwrap_or(false) {
        return false;
    }
    if let Some(dtype) = keyword("dtype") {
        return is_float16(model, dtype);
    }
    let qualified = model.qualified_name(model.field(call, "function").expect("a call has a callee")).unwrap_or_default();
    if qualified.starts_with("torch.cuda.amp") {
        return true;
    }
    // `torch.autocast(device_type, dtype=None)`: float16 on CUDA, bfloat16 on CPU.
    let device = keyword("device_type").or_else(|| args.iter().copied().find(|a| a.kind_name() != "keyword_argument"));
    match device {
        Some(d) if d.kind_name() == "string" => {
            let text = model.text(d).trim_matches(|c| c == '"' || c == '\'');
            text == "cuda"
        }
        // A variable (`device.type`): assume the CUDA default, as training code means.
        Some(_) => true,
        None => false,
    }
}

/// The functions (by node id; `None` for the module body) that scale a loss: a
/// `scaler.scale(...)` of a `GradScaler`, apex's `amp.scale_loss(...)`, or apex's
/// `FP16_Optimizer` (whose `optimizer.backward(loss)` scales).
fn scaling_scopes<'t>(model: &SemanticModel<'t>) -> Vec<Option<usize>> {
    let scope = |c: &Node<'t>| model.enclosing_function(*c).map(|f| f.node.id());
    let mut scopes: Vec<Option<usize>> = model.calls_named("scale_loss").iter().map(scope).collect();
    scopes.extend(model.calls_named("scale").iter().filter(|c| {
        c.field("function")
            .and_then(|f| model.field(f, "object"))
            .map(|o| model.value_kind(o) == ValueKind::Scaler)
            .unwrap_or(false)
    }).map(scope));
    // `optimizer.backward(loss)`: apex's `FP16_Optimizer` scales (its `else` branch's
    // `loss.backward()` is the float32 path).
    scopes.extend(model.calls_named("backward").iter().filter(|c| {
        c.field("function")
            .and_then(|f| model.field(f, "object"))
            .map(|o| model.value_kind(o) == ValueKind::Optimizer)
            .unwrap_or(false)
    }).map(scope));
    scopes
}

/// The functions (by node id; `None` for the module body) that scale a loss with a
/// `GradScaler` (`scaler.scale(loss)`): those need float32 weights.
fn grad_scaler_scopes<'t>(model: &SemanticModel<'t>) -> Vec<Option<usize>> {
    model
        .calls_named("scale")
        .iter()
        .filter(|c| c.field("function").and_then(|f| f.field("object")).is_some_and(|o| model.value_kind(o) == ValueKind::Scaler))
        .map(|c| model.enclosing_function(*c).map(|f| f.node.id()))
        .collect()
}

/// A framework's backward (see `SemanticModel::is_framework_backward`), or apex's
/// `FP16_Optimizer`, whose `optimizer.backward(loss)` scales the loss.
fn backward_scales_itself<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let optimizer = model.field(call, "function").and_then(|f| model.field(f, "object")).is_some_and(|o| model.value_kind(o) == ValueKind::Optimizer);
    model.is_framework_backward(call) || optimizer
}
