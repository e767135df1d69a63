//! ## What it does
//! Checks for `zero_grad(set_to_none=False)` on an optimizer or a module (also the
//! positional `zero_grad(False)`, a variable whose only assignment is `False`, and a
//! command-line option whose argparse default is False: `set_to_none=args.flag` after
//! `add_argument("--flag", action="store_true")` or `default=False`).
//!
//! Not flagged: `zero_grad()` and `zero_grad(set_to_none=True)` (the default since
//! PyTorch 2.0), a value memlint cannot pin down (a parameter, a flag assigned `True`
//! somewhere, a config field), and a module whose gradients are kept on purpose: it
//! preallocates them (`p.grad = torch.zeros_like(p)`) or accumulates into them in place
//! (`p.grad.add_(g)`, `p.grad.copy_(g)`), which needs the buffers to stay allocated.
//!
//! ## Why is this bad?
//! With `set_to_none=False` every parameter's `.grad` tensor is kept and filled with
//! zeros. Those buffers, as large as the trainable weights, then stay allocated through
//! the next forward pass, which is where activation memory peaks, so the peak is higher
//! by the size of the gradients than it needs to be. Zeroing them also costs a memset
//! kernel per parameter each step. With `set_to_none=True` the buffers are released and
//! `backward()` allocates them again only when it produces the gradients.
//!
//! ## Example
//! ```python
//! for x, y in loader:
//!     optimizer.zero_grad(set_to_none=False)
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//! ```
//!
//! Use instead:
//! ```python
//! for x, y in loader:
//!     optimizer.zero_grad(set_to_none=True)
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//! ```
//!
//! ## Fix safety
//! The fix writes `True` in place of the value. It is unsafe: afterwards `.grad` is
//! `None` instead of a zero tensor between steps, so code that reads or updates `p.grad`
//! before the next `backward()` fails, and optimizers skip a parameter whose gradient is
//! `None` where they would have applied momentum or weight decay with a zero gradient
//! (a parameter that gets no gradient in some step is updated differently).

use memlint_python::NodeExt;
use memlint_python::SemanticModel;
use crate::prefilter::Words;
use crate::checker::Checker;
use crate::rules::{always_bool, snippet};
use crate::{Diagnostic, Edit, Fix, Severity};

pub const SUMMARY: &str = "`zero_grad(set_to_none=False)` keeps gradient buffers allocated";
pub const CAPTURES: &[&str] = &["call", "value"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// `zero_grad`.
pub fn trigger(words: &Words<'_>) -> bool {
    words.has("zero_grad")
}

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    // The query matches `.zero_grad(...)` calls only.
    for m in checker.matches_at(model.calls_named("zero_grad")) {
        let (Some(call), Some(value)) = (m.get("call"), m.get("value")) else { continue };
        let literal = always_bool(model, value, false);
        // `set_to_none=args.keep_grads` whose argparse default is False (or a module constant).
        let by_default = !literal && memlint_python::bool_default(model, value) == Some(false);
        if (!literal && !by_default) || grads_are_kept_on_purpose(model) {
            continue;
        }
        let receiver = call
            .field("function")
            .and_then(|f| model.field(f, "object"))
            .map(|o| snippet(model, o))
            .unwrap_or_default();
        // A command-line option is the user's to change: no fix rewrites it.
        let fix = literal.then(|| Fix::unsafe_("Use `set_to_none=True`", vec![Edit::replace(value.byte_range(), "True")]));
        let mut evidence = vec![memlint_python::Fact::at(
            if literal { format!("`set_to_none` is `{}`: always false", model.short_text(value)) } else { format!("`set_to_none` is `{}`, false by default", model.short_text(value)) },
            value,
        )];
        if let Some(object) = model.field(call, "function").and_then(|f| model.field(f, "object")) {
            evidence.extend(model.explain_value(object).into_iter().take(2));
        }
        checker.report(
            Diagnostic::new(
                checker.rule,
                call.byte_range(),
                format!(
                    "`{}` keeps every gradient buffer of `{receiver}` allocated and zero-filled through the next forward pass, raising peak memory by the size of the gradients (as large as the trainable weights)",
                    snippet(model, call)
                ),
            )
            .with_help("call `zero_grad()` (`set_to_none=True` is the default since PyTorch 2.0)")
            .with_severity(Severity::Warning)
            .with_fix(fix)
            .with_evidence(evidence),
        );
    }
}

/// In-place updates of `.grad` (`p.grad.add_(g)`, `p.grad.copy_(g)`), or `.grad` assigned
/// a preallocated buffer (`p.grad = torch.zeros_like(p)`): the program relies on the
/// gradient tensors staying allocated, which `set_to_none=False` is for.
fn grads_are_kept_on_purpose(model: &SemanticModel<'_>) -> bool {
    let whole = 0..model.source().len();
    model.attributes_named_in("grad", whole).iter().any(|grad| {
        let Some(parent) = model.parent(*grad) else { return false };
        match parent.kind_name() {
            // `p.grad.add_(g)` (the `.grad` is the object of an in-place method call).
            "attribute" => {
                let method = model.field(parent, "attribute").map(|a| model.text(a)).unwrap_or("");
                model.field(parent, "object").map(|o| o.id()) == Some(grad.id())
                    && method.ends_with('_')
                    && !method.starts_with('_')
                    && method != "zero_"
                    && model.parent(parent).is_some_and(|c| c.kind_name() == "call")
            }
            // `p.grad = buffer` (not `p.grad = None`).
            "assignment" => {
                model.field(parent, "left").map(|l| l.id()) == Some(grad.id())
                    && model.field(parent, "right").is_some_and(|r| r.kind_name() != "none")
            }
            _ => false,
        }
    })
}
