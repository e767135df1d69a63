//! ## What it does
//! Checks for per-batch GPU results kept across the per-step loop: appended to a list
//! (`outputs.append(pred)`, `outputs.extend(pred)`, `outputs += [pred]`), stored in a dict or list (`store[key] = pred`), or written in
//! place into a preallocated tensor buffer (`buf[idx] = out`, also one created lazily on
//! the first batch: `if buf is None: buf = torch.zeros(...)`), without `.detach()` /
//! `.cpu()`. The loop must go over batches: its iterable names data (`loader`,
//! `dataset`, `batches`), or its body calls `backward()` or steps an optimizer; a loop
//! inside a forward pass (over layers, tiles, timesteps) needs what it collects.
//!
//! - **Severe**: the value carries autograd history (a model's output outside
//!   `torch.no_grad()`, arithmetic on it). Every batch's graph, with all its saved
//!   activations, stays alive; an in-place write into a buffer also chains every batch's
//!   graph into the buffer's own history.
//! - **Mild**: the value has no history but lives on the GPU (a model's output under
//!   `no_grad`, a `.detach()`ed tensor): device memory grows with the number of batches.
//!   A preallocated buffer does not grow, so writing such a value into one is fine.
//!
//! Not flagged: `.detach().cpu()`, `.cpu()`, `.item()`, `.tolist()`, `.numpy()`,
//! `.to("cpu")`, `.to(torch.device("cpu"))` or `.to(dev)` where `dev` only holds the CPU; a
//! container created (or `.clear()`ed) inside the loop; a bounded `deque(maxlen=...)`;
//! results that are backpropagated later (`torch.stack(outputs).sum().backward()`); losses
//! and their values (`loss.data[0]`; a running list of losses is
//! `accumulated-loss-tensor`'s business); and values memlint
//! cannot place on the GPU (loop targets, parameters, tensors created without a device).
//!
//! ## Why is this bad?
//! A tensor with autograd history keeps the whole graph that produced it, so a list of
//! per-batch outputs keeps a forward pass's worth of activations per batch: evaluation
//! over a few hundred batches runs out of memory even though each batch fits easily.
//! Without history the cost is smaller but still unbounded: the results themselves stay
//! on the GPU until the loop ends, competing with the model for memory.
//!
//! ## Example
//! ```python
//! preds = []
//! for x, _ in test_loader:
//!     preds.append(model(x.cuda()))
//! ```
//!
//! Use instead:
//! ```python
//! preds = []
//! with torch.no_grad():
//!     for x, _ in test_loader:
//!         preds.append(model(x.cuda()).cpu())
//! ```
//!
//! ## Fix safety
//! For a list or dict, the fix stores `<value>.detach().cpu()` (`.cpu()` after an
//! explicit `.detach()`). It is unsafe: the stored
//! results move to the CPU, so code after the loop that combines them with GPU tensors
//! fails with a device mismatch, and `.cpu()` waits for the GPU.
//!
//! For a write into a preallocated buffer, the fix writes `<value>.detach()`: the buffer
//! holds the same numbers, without the chained graph. It is safe when the buffer is a
//! local variable that the function does not return or yield (nothing can backpropagate
//! through it: backpropagated buffers are not flagged), and unsafe otherwise, since a
//! caller could backpropagate through the returned buffer.

use memlint_python::NodeExt;
use memlint_python::tree_sitter::Node;
use memlint_python::{contains, unparenthesize, BindingKind, SemanticModel, ValueKind};

use crate::prefilter::Words;
use crate::rules::{could_loop_over_batches};
use crate::checker::Checker;
use crate::rules::{call_on, descendants_where, is_lazy_initialization, is_loss_like, is_primary, keyword_argument, positional_arguments, snippet};
use crate::{Diagnostic, Fix, Severity};

pub const SUMMARY: &str = "Per-batch GPU results kept across the loop";
pub const CAPTURES: &[&str] = &["collection", "container", "term"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// A loop over batches.
pub fn trigger(words: &Words<'_>) -> bool {
    could_loop_over_batches(words)
}

const TENSOR_FACTORIES: &[&str] = &[
    "zeros", "empty", "ones", "full", "zeros_like", "empty_like", "ones_like", "full_like", "rand", "randn", "tensor", "empty_strided",
];

/// What the results are stored in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Container {
    /// A list, dict, deque: each stored value stays alive.
    Collection,
    /// A preallocated tensor: values are copied in place.
    Buffer,
}

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    // Only loops over batches can keep per-batch results, in their bodies or in a helper
    // they call: the query runs on the whole module.
    let whole = 0..model.source().len();
    for m in checker.matches_in(std::slice::from_ref(&whole)) {
        let (Some(statement), Some(container), Some(term)) = (m.get("collection"), m.get("container"), m.get("term")) else {
            continue;
        };
        // `xs.append(v)`, `xs.extend(v)`, `xs += [v]`: added to a collection.
        let is_append = matches!(statement.kind_name(), "call" | "augmented_assignment");
        let Some(base) = base_name(model, container) else { continue };
        // In a helper the loop calls, storing into its parameter: the caller's container
        // and the caller's loop decide (`def body(x, preds): preds.append(model(x))`).
        let (anchor, base) = match crate::rules::accumulator_through_helper(model, statement, &base, false) {
            Some((site, caller_base)) => (site, caller_base),
            None => (statement, base),
        };
        let loops = model.enclosing_loops(anchor);
        if loops.is_empty() {
            continue;
        }
        // The loops whose iterations the container survives: up to the one that creates it.
        let definitions: Vec<Node> = if base.contains('.') {
            Vec::new()
        } else {
            model
                .bindings_in_scope(&base, anchor)
                .iter()
                .filter(|b| matches!(b.kind, BindingKind::Assign | BindingKind::LoopTarget | BindingKind::WithTarget))
                .filter(|b| !contains(b.statement, anchor))
                // `buf = step(buf, x)`: the helper gives back the buffer it was given.
                .filter(|b| b.statement.id() != anchor.id())
                // `if buf is None: buf = torch.zeros(...)` creates the buffer once.
                .filter(|b| !is_lazy_initialization(model, b.statement, &base))
                .map(|b| b.statement)
                .collect()
        };
        let surviving: Vec<_> = loops
            .iter()
            .take_while(|l| {
                let body = l.node.field("body");
                !definitions.iter().any(|d| body.map(|b| contains(b, *d)).unwrap_or(false))
            })
            .collect();
        let Some(outermost) = surviving.last() else { continue };
        if !surviving.iter().any(|l| l.over_batches) {
            continue;
        }
        let kind = if base.contains('.') {
            if is_append { Some(Container::Collection) } else { None }
        } else {
            container_kind(model, &base, anchor, is_append)
        };
        let Some(kind) = kind else { continue };
        if is_loss_like(model, term, 0) || cleared_in(model, &base, outermost.node) || model.backpropagated_after(&base, anchor) {
            continue;
        }
        let grad = model.value_kind(term) == ValueKind::GradTensor;
        // What is collected with its graph and later backpropagated (a rollout's log
        // probabilities, a truncated-BPTT window) is kept on purpose.
        if grad && model.may_reach_backward(term) {
            continue;
        }
        // Tensors without history only add up over a long loop: one over a `DataLoader`
        // (not a loop over a handful of latent values or target domains).
        if !grad && !surviving.iter().any(|l| model.iterates_data(l.node)) {
            continue;
        }
        // A training loop: its body, or the helper that stores, runs a backward pass.
        let training = trains(model, outermost.node)
            || (anchor.id() != statement.id() && model.enclosing_function(statement).is_some_and(|f| trains(model, f.node)));
        let shown = snippet(model, statement);
        let value = snippet(model, term);
        let (message, severity, fix) = match (kind, grad) {
            (Container::Buffer, true) => (
                format!(
                    "`{shown}` writes `{value}`, which carries autograd history, into the buffer `{base}` in place: every batch's graph is chained into `{base}`, so no batch's activations are freed until the buffer is (severe: memory grows by a forward pass per batch)"
                ),
                Severity::Error,
                {
                    let safe = anchor.id() == statement.id() && is_private_local(model, &base, statement);
                    let edits = call_on(term, ".detach()");
                    Some(if safe { Fix::safe("Write `.detach()`", edits) } else { Fix::unsafe_("Write `.detach()`", edits) })
                },
            ),
            (Container::Buffer, false) => continue,
            (Container::Collection, true) if training => (
                format!(
                    "`{shown}` keeps every batch's autograd graph alive: `{value}` carries autograd history, so each iteration's output and graph nodes (and any activations `backward()` has not freed) stay on the GPU until `{base}` is dropped (severe)"
                ),
                Severity::Error,
                Some(Fix::unsafe_("Store `.detach().cpu()`", call_on(term, ".detach().cpu()"))),
            ),
            (Container::Collection, true) => (
                format!(
                    "`{shown}` keeps every batch's autograd graph alive: `{value}` carries autograd history, so each iteration's saved activations stay on the GPU until `{base}` is dropped (severe: memory grows by a forward pass per batch)"
                ),
                Severity::Error,
                Some(Fix::unsafe_("Store `.detach().cpu()`", call_on(term, ".detach().cpu()"))),
            ),
            (Container::Collection, false) => {
                if model.value_kind(term) != ValueKind::PlainTensor || !on_gpu(model, term, 0) {
                    continue;
                }
                (
                    format!(
                        "`{shown}` keeps every batch's `{value}` on the GPU in `{base}`: it has no autograd history, but device memory grows with the number of batches (mild)"
                    ),
                    Severity::Warning,
                    Some(Fix::unsafe_(format!("Store `{}`", to_cpu_suffix(model, term)), call_on(term, to_cpu_suffix(model, term)))),
                )
            }
        };
        let help = match kind {
            Container::Buffer => format!("write `{}` into the buffer", with_suffix(model, term, ".detach()")),
            Container::Collection => {
                format!("store `{}` (or `.item()` / `.tolist()` for numbers)", with_suffix(model, term, to_cpu_suffix(model, term)))
            }
        };
        let mut evidence: Vec<memlint_python::Fact> = model.explain_value(term).into_iter().take(3).collect();
        if anchor.id() != statement.id() {
            evidence.push(memlint_python::Fact::at(format!("`{}` runs it once per iteration with the caller's `{base}`", model.short_text(anchor)), anchor));
        }
        evidence.push(memlint_python::Fact::at(
            format!("`{base}` outlives the iterations of the loop over batches on line {} (not created, cleared or backpropagated in it)", model.line_of(outermost.node)),
            outermost.node,
        ));
        checker.report(
            Diagnostic::new(checker.rule, statement.byte_range(), message)
                .with_help(help)
                .with_severity(severity)
                .with_fix(fix)
                .with_evidence(evidence),
        );
    }
}

/// Does the loop backpropagate (so `backward()` frees each graph's saved activations)?
fn trains<'t>(model: &SemanticModel<'t>, loop_node: Node<'t>) -> bool {
    !descendants_where(model, loop_node, |n| n.kind_name() == "call" && model.is_backward_call(n)).is_empty()
}

/// `.cpu()` after an explicit `.detach()`, else `.detach().cpu()`.
fn to_cpu_suffix(model: &SemanticModel<'_>, term: Node<'_>) -> &'static str {
    let detached = term.kind_name() == "call"
        && term
            .field("function")
            .and_then(|f| f.field("attribute"))
            .map(|a| model.text(a) == "detach")
            .unwrap_or(false);
    if detached { ".cpu()" } else { ".detach().cpu()" }
}

/// The term's text with `suffix` called on it, parenthesized when needed (for messages).
fn with_suffix(model: &SemanticModel<'_>, term: Node<'_>, suffix: &str) -> String {
    let text = snippet(model, term);
    if is_primary(term) { format!("{text}{suffix}") } else { format!("({text}){suffix}") }
}

/// `outputs`, `store` for `store[k]`, `self.preds` for an attribute.
fn base_name(model: &SemanticModel<'_>, node: Node<'_>) -> Option<String> {
    match node.kind_name() {
        "identifier" => Some(model.text(node).to_owned()),
        "attribute" => model.dotted_name(node),
        "subscript" => base_name(model, node.field("value")?),
        _ => None,
    }
}

/// What the name holds where the results are stored: a collection, a tensor buffer, or
/// something memlint cannot tell (then only `.append` says it is a collection).
fn container_kind<'t>(model: &SemanticModel<'t>, base: &str, at: Node<'t>, is_append: bool) -> Option<Container> {
    let binding = model.binding_at(base, at);
    let value = binding.and_then(|b| if b.kind == BindingKind::Assign { b.value } else { None }).map(unparenthesize);
    let Some(value) = value else {
        return is_append.then_some(Container::Collection);
    };
    match value.kind_name() {
        "list" | "dictionary" | "list_comprehension" | "dictionary_comprehension" => Some(Container::Collection),
        // `[None] * n`
        "binary_operator" if model.field(value, "left").map(|l| l.kind_name() == "list").unwrap_or(false) => Some(Container::Collection),
        "call" => {
            if is_tensor_factory(model, value) {
                return Some(Container::Buffer);
            }
            match model.container_built_by(value) {
                Some("list" | "dict" | "defaultdict" | "OrderedDict") => Some(Container::Collection),
                Some("deque") => keyword_argument(model, value, "maxlen").is_none().then_some(Container::Collection),
                _ => is_append.then_some(Container::Collection),
            }
        }
        _ => is_append.then_some(Container::Collection),
    }
}

/// `torch.zeros(...)`, `torch.empty_like(x).cuda()`, `torch.full(..., device=dev)`.
fn is_tensor_factory<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let mut node = call;
    for _ in 0..8 {
        let Some(callee) = model.field(node, "function") else { return false };
        if let Some(q) = model.qualified_name(callee) {
            let last = q.rsplit('.').next().unwrap_or("");
            return q.starts_with("torch.") && TENSOR_FACTORIES.contains(&last);
        }
        // `.cuda()`, `.to(device)`, `.float()` on a factory call.
        match model.field(callee, "object").map(unparenthesize) {
            Some(object) if callee.kind_name() == "attribute" && object.kind_name() == "call" => node = object,
            _ => return false,
        }
    }
    false
}

/// `base.clear()`, `base.pop(...)`, `del base[...]` in the loop: the container stays bounded.
fn cleared_in<'t>(model: &SemanticModel<'t>, base: &str, loop_node: Node<'t>) -> bool {
    !descendants_where(model, loop_node, |n| match n.kind_name() {
        "call" => n
            .field("function")
            .filter(|f| f.kind_name() == "attribute")
            .map(|f| {
                let method = model.field(f, "attribute").map(|a| model.text(a)).unwrap_or("");
                let object = model.field(f, "object").and_then(|o| base_name(model, o));
                matches!(method, "clear" | "pop" | "popleft") && object.as_deref() == Some(base)
            })
            .unwrap_or(false),
        "delete_statement" => model.identifiers_in(n).iter().any(|i| i == base),
        _ => false,
    })
    .is_empty()
}

/// A function-local name that the function does not return or yield.
fn is_private_local<'t>(model: &SemanticModel<'t>, base: &str, at: Node<'t>) -> bool {
    let Some(function) = model.enclosing_function(at) else { return false };
    if base.contains('.') {
        return false;
    }
    let Some(body) = function.node.field("body") else { return false };
    descendants_where(model, body, |n| {
        matches!(n.kind_name(), "return_statement" | "yield" | "global_statement" | "nonlocal_statement")
            && model.identifiers_in(n).iter().any(|i| i == base)
    })
    .is_empty()
}

/// Is the value on the GPU, as far as memlint can follow it?
fn on_gpu<'t>(model: &SemanticModel<'t>, expr: Node<'t>, depth: usize) -> bool {
    if depth > 12 {
        return false;
    }
    let expr = unparenthesize(expr);
    match expr.kind_name() {
        "identifier" => model
            .binding_at(model.text(expr), expr)
            .and_then(|b| if matches!(b.kind, BindingKind::Assign | BindingKind::WithTarget) { b.value } else { None })
            .map(|v| on_gpu(model, v, depth + 1))
            .unwrap_or(false),
        "attribute" | "subscript" => {
            let field = if expr.kind_name() == "attribute" { "object" } else { "value" };
            expr.field(field).map(|o| on_gpu(model, o, depth + 1)).unwrap_or(false)
        }
        "binary_operator" => ["left", "right"]
            .iter()
            .any(|f| expr.field(f).map(|e| on_gpu(model, e, depth + 1)).unwrap_or(false)),
        "call" => {
            let Some(callee) = model.field(expr, "function") else { return false };
            if model.is_forward_call(expr) {
                // A model's output is where the model is: on the GPU in a script that uses CUDA.
                return model.source().contains("cuda");
            }
            if let Some(q) = model.qualified_name(callee) {
                if !q.starts_with("torch.") {
                    return false;
                }
                let last = q.rsplit('.').next().unwrap_or("");
                if TENSOR_FACTORIES.contains(&last) {
                    return keyword_argument(model, expr, "device").map(|d| device_is_gpu(model, d)).unwrap_or(false);
                }
                let args = positional_arguments(expr);
                return args.iter().any(|a| on_gpu(model, *a, depth + 1));
            }
            if callee.kind_name() != "attribute" {
                return false;
            }
            let method = model.field(callee, "attribute").map(|a| model.text(a)).unwrap_or("");
            let Some(object) = model.field(callee, "object") else { return false };
            match method {
                "cpu" | "numpy" | "tolist" | "item" => false,
                "cuda" => true,
                "to" => {
                    let target = keyword_argument(model, expr, "device").or_else(|| positional_arguments(expr).first().copied());
                    match target {
                        Some(t) if is_dtype(model, t) => on_gpu(model, object, depth + 1),
                        Some(t) => device_is_gpu(model, t),
                        None => on_gpu(model, object, depth + 1),
                    }
                }
                _ => on_gpu(model, object, depth + 1),
            }
        }
        _ => false,
    }
}

fn is_dtype<'t>(model: &SemanticModel<'t>, expr: Node<'t>) -> bool {
    model
        .qualified_name(expr)
        .map(|q| q.starts_with("torch.") && (q.contains("float") || q.contains("int") || q.ends_with("half") || q.ends_with("bool") || q.ends_with("double")))
        .unwrap_or(false)
}

/// `"cuda"`, `"cuda:1"`, `torch.device("cuda")`, or a variable (a training script's
/// `device` is the GPU); not `"cpu"`.
fn device_is_gpu<'t>(model: &SemanticModel<'t>, expr: Node<'t>) -> bool {
    let text = model.text(expr);
    // `dev = torch.device("cpu")` then `.to(dev)`: what the variable holds, when it is
    // only ever the CPU.
    if expr.kind_name() == "identifier" {
        let value = model.binding_at(text, expr).and_then(|b| if b.kind == BindingKind::Assign { b.value } else { None });
        if let Some(value) = value {
            let value_text = model.text(value);
            if value_text.contains("cpu") && !value_text.contains("cuda") {
                return false;
            }
        }
    }
    !text.contains("cpu") && (text.contains("cuda") || matches!(expr.kind_name(), "identifier" | "attribute" | "call"))
}
