//! ## What it does
//! Checks for `torch.cuda.amp.autocast(...)` and `torch.cuda.amp.GradScaler(...)` in any
//! import form: `torch.cuda.amp.autocast()`, `from torch.cuda import amp` then
//! `amp.autocast()`, `from torch.cuda.amp import GradScaler` then `GradScaler()`, aliases,
//! function-local imports, and the decorator form `@torch.cuda.amp.autocast()`.
//!
//! Not flagged: type annotations (`scaler: torch.cuda.amp.GradScaler`) and other
//! references that construct nothing (`isinstance(s, GradScaler)`), `torch.amp.*`,
//! `torch.autocast`, and same-named classes of other libraries; nor the fallback branch of a
//! version switch whose other branch uses the replacement (`torch.amp.GradScaler("cuda") if
//! TORCH_2_4 else torch.cuda.amp.GradScaler()`): it runs only on an older PyTorch.
//!
//! ## Why is this bad?
//! Since PyTorch 2.4 both are deprecated aliases that emit a `FutureWarning` each time
//! one is constructed (for `autocast`, on every step of the training loop) and will be
//! removed. The device-generic `torch.amp.autocast("cuda")` and
//! `torch.amp.GradScaler("cuda")` do exactly the same thing.
//!
//! ## Example
//! ```python
//! scaler = torch.cuda.amp.GradScaler()
//! for x, y in loader:
//!     with torch.cuda.amp.autocast():
//!         loss = criterion(model(x), y)
//!     scaler.scale(loss).backward()
//! ```
//!
//! Use instead:
//! ```python
//! scaler = torch.amp.GradScaler("cuda")
//! for x, y in loader:
//!     with torch.amp.autocast("cuda"):
//!         loss = criterion(model(x), y)
//!     scaler.scale(loss).backward()
//! ```
//!
//! ## Fix safety
//! The fix rewrites the call to the `torch.amp` spelling with `"cuda"` as the device,
//! adding `import torch` when the module does not import it (an import of the old name is
//! left in place). `torch.cuda.amp.autocast`'s positional arguments are `enabled, dtype,
//! cache_enabled` while `torch.amp.autocast` takes `device_type, dtype, enabled, ...`, so
//! positional arguments are passed by keyword. The `autocast` fix is safe: the deprecated
//! class only forwards to `torch.amp.autocast("cuda", ...)`, which exists in every PyTorch
//! 2.x. It is unsafe when the module changes autocast's defaults
//! (`torch.set_autocast_dtype`, `set_autocast_gpu_dtype`, `set_autocast_cache_enabled`:
//! the old class passed float16 and caching explicitly, the new one reads those defaults)
//! or in TorchScript code (`@torch.jit.script`). The `GradScaler` fix is unsafe:
//! `torch.amp.GradScaler` only exists since PyTorch 2.3, so the fixed file fails on older
//! versions.

use memlint_python::NodeExt;
use memlint_python::tree_sitter::Node;
use memlint_python::SemanticModel;

use crate::prefilter::Words;
use crate::checker::Checker;
use crate::rules::{calls_that_may_resolve_to, has_argument_list, has_splat, in_annotation, positional_arguments, snippet, torch_name};
use crate::{Diagnostic, Edit, Fix, Severity};

pub const SUMMARY: &str = "Deprecated `torch.cuda.amp.autocast` / `torch.cuda.amp.GradScaler`";
pub const CAPTURES: &[&str] = &["call"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// `amp` (every deprecated name is reached through `torch.cuda.amp`).
pub fn trigger(words: &Words<'_>) -> bool {
    words.has("amp")
}

const AUTOCAST: &[&str] = &["torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"];
const GRAD_SCALER: &[&str] = &["torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"];
/// `torch.cuda.amp.autocast`'s positional parameters, in order.
const AUTOCAST_PARAMETERS: &[&str] = &["enabled", "dtype", "cache_enabled"];

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    let mut candidates = calls_that_may_resolve_to(model, AUTOCAST);
    candidates.extend(calls_that_may_resolve_to(model, GRAD_SCALER));
    for m in checker.matches_at(&candidates) {
        let Some(call) = m.get("call") else { continue };
        if in_annotation(call) || fallback_of_the_replacement(model, call) {
            continue;
        }
        let (is_autocast, class) = if model.call_resolves_to(call, AUTOCAST).is_some() {
            (true, "autocast")
        } else if model.call_resolves_to(call, GRAD_SCALER).is_some() {
            (false, "GradScaler")
        } else {
            continue;
        };
        let fix = if is_autocast { autocast_fix(model, call) } else { grad_scaler_fix(model, call) };
        let callee = model.field(call, "function").unwrap_or(call);
        let evidence = vec![memlint_python::Fact::at(
            format!("`{}` resolves to `torch.cuda.amp.{class}` (through the imports and aliases in scope)", model.short_text(callee)),
            callee,
        )];
        checker.report(
            Diagnostic::new(
                checker.rule,
                call.byte_range(),
                format!(
                    "`{}` uses `torch.cuda.amp.{class}`, deprecated since PyTorch 2.4: it warns each time it is constructed and will be removed; use `torch.amp.{class}(\"cuda\")`",
                    snippet(model, call)
                ),
            )
            .with_help(format!("write `torch.amp.{class}(\"cuda\", ...)`"))
            .with_severity(Severity::Warning)
            .with_fix(fix)
            .with_evidence(evidence),
        );
    }
}

/// Is `call` the fallback branch of a version switch whose other branch already uses the
/// replacement (`torch.amp.GradScaler("cuda") if TORCH_2_4 else torch.cuda.amp.GradScaler()`,
/// or the same as an `if`/`else` statement)? That branch runs only on a PyTorch where
/// `torch.cuda.amp` is not deprecated.
fn fallback_of_the_replacement<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let uses_replacement = |branch: Node<'t>| {
        model.calls_in(branch.byte_range()).iter().any(|c| {
            c.field("function")
                .and_then(|f| model.qualified_name(f))
                .is_some_and(|q| q.starts_with("torch.amp.") || q == "torch.autocast")
        })
    };
    let mut node = call;
    while let Some(parent) = model.parent(node) {
        match parent.kind_name() {
            // `a if condition else b`: the branches are the first and last named children.
            "conditional_expression" => {
                let branches = model.named_children(parent);
                let other = match (branches.first(), branches.last()) {
                    (Some(first), Some(last)) if memlint_python::contains(*first, call) => *last,
                    (Some(first), Some(last)) if memlint_python::contains(*last, call) => *first,
                    _ => return false,
                };
                return uses_replacement(other);
            }
            "if_statement" => {
                let consequence = model.field(parent, "consequence");
                let alternatives = model.named_children(parent).into_iter().filter(|c| matches!(c.kind_name(), "else_clause" | "elif_clause"));
                let branches: Vec<Node<'t>> = consequence.into_iter().chain(alternatives).collect();
                if branches.len() < 2 {
                    return false;
                }
                return branches.iter().filter(|b| !memlint_python::contains(**b, call)).any(|b| uses_replacement(*b));
            }
            "function_definition" | "class_definition" | "module" => return false,
            _ => node = parent,
        }
    }
    false
}

/// Edits common to both fixes: the callee becomes `<torch>.amp.<class>`, and `torch` is
/// imported when needed.
fn rename_callee(model: &SemanticModel<'_>, call: Node<'_>, class: &str) -> Option<(Vec<Edit>, String)> {
    let callee = call.field("function")?;
    let (torch, import) = torch_name(model);
    let replacement = format!("{torch}.amp.{class}");
    let mut edits: Vec<Edit> = import.into_iter().collect();
    edits.push(Edit::replace(callee.byte_range(), replacement.clone()));
    Some((edits, replacement))
}

/// The offset just after `(` of the argument list.
fn after_open_paren(model: &SemanticModel<'_>, call: Node<'_>) -> Option<usize> {
    let args = call.field("arguments")?;
    model.text(args).starts_with('(').then(|| args.start_byte() + 1)
}

fn device_argument(model: &SemanticModel<'_>, call: Node<'_>) -> Option<Edit> {
    let open = after_open_paren(model, call)?;
    let args = call.field("arguments")?;
    let empty = args.named_children(&mut args.walk()).all(|a| a.kind_name() == "comment");
    Some(Edit::insert(open, if empty { "\"cuda\"" } else { "\"cuda\", " }))
}

fn autocast_fix<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> Option<Fix> {
    if !has_argument_list(call) || has_splat(call) {
        return None;
    }
    let positional = positional_arguments(call);
    if positional.len() > AUTOCAST_PARAMETERS.len() {
        return None;
    }
    let (mut edits, replacement) = rename_callee(model, call, "autocast")?;
    edits.push(device_argument(model, call)?);
    for (arg, name) in positional.iter().zip(AUTOCAST_PARAMETERS) {
        edits.push(Edit::insert(arg.start_byte(), format!("{name}=")));
    }
    merge_same_offset(&mut edits);
    let message = format!("Use `{replacement}(\"cuda\")`");
    let changes_defaults = ["set_autocast_dtype", "set_autocast_gpu_dtype", "set_autocast_cache_enabled"]
        .iter()
        .any(|n| !model.calls_named(n).is_empty());
    Some(if changes_defaults || in_torchscript(model, call) { Fix::unsafe_(message, edits) } else { Fix::safe(message, edits) })
}

fn grad_scaler_fix(model: &SemanticModel<'_>, call: Node<'_>) -> Option<Fix> {
    if !has_argument_list(call) {
        return None;
    }
    let (mut edits, replacement) = rename_callee(model, call, "GradScaler")?;
    edits.push(device_argument(model, call)?);
    merge_same_offset(&mut edits);
    Some(Fix::unsafe_(format!("Use `{replacement}(\"cuda\")`"), edits))
}

/// Two insertions at one offset (`"cuda", ` and `enabled=` before the first argument)
/// become one, so the fix's edits never overlap.
fn merge_same_offset(edits: &mut Vec<Edit>) {
    edits.sort_by_key(|e| (e.range.start, e.range.end));
    let mut merged: Vec<Edit> = Vec::with_capacity(edits.len());
    for edit in edits.drain(..) {
        match merged.last_mut() {
            Some(last) if last.range.is_empty() && edit.range.is_empty() && last.range.start == edit.range.start => {
                last.content.push_str(&edit.content);
            }
            _ => merged.push(edit),
        }
    }
    *edits = merged;
}

/// Is the call in a function compiled by TorchScript (`@torch.jit.script`)?
fn in_torchscript<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let mut node = call;
    while let Some(f) = model.enclosing_function(node) {
        if f.decorators.iter().any(|d| model.text(*d).contains("jit.script") || model.text(*d) == "script") {
            return true;
        }
        node = f.node;
    }
    false
}
