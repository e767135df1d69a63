//! ## What it does
//! Checks for `torch.cuda.empty_cache()` in the body of the per-step loop (the loop over
//! a data loader, or the loop whose body runs a forward pass, `backward()` or an optimizer
//! step).
//!
//! Not flagged: a call once per epoch (in the epoch loop, after the step loop), a call
//! guarded by a long periodic condition (`if step % 1000 == 0:`, `if step % log_every ==
//! 0:`; a period known as a constant — literal, module constant, argparse default — must
//! be about 50 steps or more), a call in an exception handler
//! (an out-of-memory retry), and calls in memory-measurement code (code that also reads
//! `torch.cuda.memory_allocated()`, `max_memory_allocated()`, `mem_get_info()`, …).
//!
//!
//! A call in the branch that steps the optimizer under gradient accumulation
//! (`if (i + 1) % accum_steps == 0: optimizer.step(); ...; torch.cuda.empty_cache()`) is
//! flagged: it runs once per update, and short periods are every step for the allocator.
//!
//! ## Why is this bad?
//! `empty_cache()` does not free any tensor: it returns the caching allocator's unused
//! blocks to the driver. The next step allocates the same blocks again with `cudaMalloc`
//! (and `cudaFree` synchronizes the device), so every step pays for allocation and loses
//! the overlap of CPU and GPU work, typically 5-20% of step time. It never lowers the
//! peak memory of the loop, which is what decides whether training runs out of memory.
//!
//! ## Example
//! ```python
//! for x, y in train_loader:
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//!     optimizer.zero_grad()
//!     torch.cuda.empty_cache()
//! ```
//!
//! Use instead:
//! ```python
//! for x, y in train_loader:
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//!     optimizer.zero_grad()
//! ```
//!
//! ## Fix safety
//! The fix removes the call (replacing it with `pass` when it is the only statement of its
//! block). It is safe: what the program computes does not change, only when cached memory
//! is handed back to the driver. It is not offered when the call shares its line with
//! other code.

use memlint_python::NodeExt;
use memlint_python::tree_sitter::Node;
use memlint_python::SemanticModel;

use crate::prefilter::Words;
use crate::checker::Checker;
use crate::rules::{line_end_inclusive, line_indent, line_start, owns_its_lines};
use crate::{Diagnostic, Edit, Fix, Severity};

pub const SUMMARY: &str = "`torch.cuda.empty_cache()` in the per-step loop";
pub const CAPTURES: &[&str] = &["call"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// `empty_cache` (also in an import that renames it).
pub fn trigger(words: &Words<'_>) -> bool {
    words.contains("empty_cache")
}

const EMPTY_CACHE: &[&str] = &["torch.cuda.empty_cache", "torch.cuda.memory.empty_cache"];
const MEMORY_PROBES: &[&str] = &[
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "reset_max_memory_allocated", "mem_get_info", "memory_stats",
    "memory_summary", "memory_snapshot", "list_gpu_processes",
];

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    let whole = 0..model.source().len();
    for m in checker.matches_in(std::slice::from_ref(&whole)) {
        let Some(call) = m.get("call") else { continue };
        let Some(name) = model.call_resolves_to(call, EMPTY_CACHE) else { continue };
        // The loop the call runs once per step of: around it, or around every call of the
        // function it is in (`test(batch)` in the loop, `empty_cache()` in `test`).
        let Some((step_loop, through)) = model.step_loop_around(call) else { continue };
        // The innermost loop around it (in its own function) must be that step loop.
        if through.is_none() && model.enclosing_loops(call).first().map(|l| l.node.id()) != Some(step_loop.id()) {
            continue;
        }
        let guarded = guarded_or_handled(model, call, step_loop) || through.is_some_and(|site| guarded_or_handled(model, site, step_loop));
        if guarded || measures_memory(model, call) {
            continue;
        }
        let shown = model.text(model.field(call, "function").expect("a call has a callee"));
        let place = match through {
            Some(site) => format!(
                " (`{}()`, which the per-step loop on line {} calls on line {})",
                model.enclosing_function(call).map(|f| f.name.as_str()).unwrap_or(""),
                model.line_of(step_loop),
                model.line_of(site)
            ),
            None => String::new(),
        };
        let mut evidence = vec![memlint_python::Fact::at(step_loop_fact(model, step_loop), step_loop)];
        if let Some(site) = through {
            evidence.push(memlint_python::Fact::at(format!("`{}` runs it once per step", model.short_text(site)), site));
        }
        evidence.push(memlint_python::Fact::at(format!("`{}` resolves to `{name}`", model.short_text(call)), call));
        checker.report(
            Diagnostic::new(
                checker.rule,
                call.byte_range(),
                format!(
                    "`{shown}()` in the per-step loop{place} returns cached blocks to the driver, so every later step pays for `cudaMalloc` again and synchronizes; it never lowers the peak"
                ),
            )
            .with_help(format!("remove it, or call `{name}()` once after the loop"))
            .with_severity(Severity::Warning)
            .with_fix(removal_fix(model, call))
            .with_evidence(evidence),
        );
    }
}

/// Why a loop runs once per step: it iterates a `DataLoader`, or its body trains or runs a
/// forward pass.
fn step_loop_fact<'t>(model: &SemanticModel<'t>, step_loop: Node<'t>) -> String {
    let line = model.line_of(step_loop);
    if model.iterates_data(step_loop) {
        format!("the loop on line {line} goes over a `DataLoader`: one iteration per batch")
    } else {
        format!("the loop on line {line} runs a training or inference step in every iteration")
    }
}

/// Inside the loop: under `if step % N == 0:`, or in an `except` handler.
fn guarded_or_handled<'t>(model: &SemanticModel<'t>, call: Node<'t>, loop_node: Node<'t>) -> bool {
    let mut current = model.parent(call);
    while let Some(n) = current {
        if n.id() == loop_node.id() {
            break;
        }
        match n.kind_name() {
            "except_clause" | "except_group_clause" => return true,
            "if_statement" | "elif_clause" => {
                if let Some(condition) = model.field(n, "condition") {
                    if long_period(model, condition, n) {
                        return true;
                    }
                }
            }
            _ => {}
        }
        current = model.parent(n);
    }
    false
}

/// Is `condition` a periodic test (`step % k == 0`) with a long period: a constant of
/// about 50 steps or more (a literal, a module constant, an argparse default), or a
/// logging, evaluation or checkpoint interval (by its name, where no value is known)?
/// The branch that steps the optimizer under gradient accumulation
/// (`if (i + 1) % accum_steps == 0: optimizer.step()`) runs once per update, which is
/// every step as far as the allocator is concerned.
fn long_period<'t>(model: &SemanticModel<'t>, condition: Node<'t>, branch: Node<'t>) -> bool {
    // `do_clean = step % 100 == 0`, then `if do_clean:`: the flag's test.
    let Some(period) = model.period_of(model.flag_value(condition)) else { return false };
    if let Some(value) = memlint_python::constant_value(model, period).and_then(|c| c.as_f64()) {
        return value >= 50.0;
    }
    if crate::rules::branch_steps_an_optimizer(model, branch) {
        return false;
    }
    // Unknown: a named interval is trusted (logging, evaluation, checkpoints).
    true
}

/// Does the function (or module) around the call measure memory?
fn measures_memory<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let scope = model.enclosing_function(call).map(|f| f.node.id());
    MEMORY_PROBES.iter().any(|probe| {
        model.calls_named(probe).iter().any(|c| {
            model.enclosing_function(*c).map(|f| f.node.id()) == scope
                && model
                    .qualified_name(c.field("function").expect("a call has a callee"))
                    .map(|q| q.starts_with("torch."))
                    .unwrap_or(true)
        })
    })
}

fn removal_fix<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> Option<Fix> {
    let source = model.source();
    let statement = model.parent(call).filter(|p| p.kind_name() == "expression_statement")?;
    if !owns_its_lines(source, statement) {
        return None;
    }
    let block = model.parent(statement)?;
    let only_statement = block.named_children(&mut block.walk()).filter(|c| c.kind_name() != "comment").count() == 1;
    let start = line_start(source, statement.start_byte());
    let end = line_end_inclusive(source, statement.end_byte().saturating_sub(1));
    let edit = if only_statement {
        let indent = line_indent(source, statement.start_byte());
        let newline = if source[..end].ends_with('\n') { "\n" } else { "" };
        Edit::replace(start..end, format!("{indent}pass{newline}"))
    } else {
        Edit::delete(start..end)
    };
    Some(Fix::safe("Remove the `empty_cache()` call", vec![edit]))
}
