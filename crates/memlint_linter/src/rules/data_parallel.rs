//! ## What it does
//! Checks for single-process data parallelism: `torch.nn.DataParallel(model)` and the
//! functional `torch.nn.parallel.data_parallel(model, inputs)`, under any import spelling
//! (`nn.DataParallel`, `from torch.nn import DataParallel as DP`, a function-local import),
//! and subclasses of `DataParallel` defined in the same file
//! (`BalancedDataParallel(gpu0_bsz, model)`).
//!
//! Not flagged: `DataParallel` with a single device (`device_ids=[0]`), or on the branch
//! that runs only without CUDA (`else:` of `if torch.cuda.is_available():`), which make
//! no replicas; references that do not construct one (`isinstance(model, nn.DataParallel)`
//! to unwrap a model); and classes of the same name from other libraries
//! (`torch_geometric.nn.DataParallel`).
//!
//! ## Why is this bad?
//! `DataParallel` runs one process that, in every step, copies the model from the first
//! GPU to the others, scatters the batch, and gathers every replica's outputs back onto
//! the first GPU, where the loss and the backward's gradient reduction also happen. The
//! first GPU therefore holds the gathered outputs, the loss computation and the master
//! copy of gradients and optimizer state on top of its own share: it runs out of memory
//! long before the others are full, which caps the batch size for all of them. It is also
//! slower than `DistributedDataParallel` (one Python thread drives every GPU), and
//! PyTorch recommends DDP even on a single machine.
//!
//! ## Example
//! ```python
//! model = nn.DataParallel(Net()).cuda()
//! for x, y in loader:
//!     loss = criterion(model(x.cuda()), y.cuda())
//! ```
//!
//! Use instead:
//! ```python
//! # torchrun --nproc_per_node=4 train.py
//! dist.init_process_group("nccl")
//! local_rank = int(os.environ["LOCAL_RANK"])
//! torch.cuda.set_device(local_rank)
//! model = DistributedDataParallel(Net().cuda(), device_ids=[local_rank])
//! sampler = DistributedSampler(dataset)
//! loader = DataLoader(dataset, sampler=sampler, batch_size=per_gpu_batch)
//! ```

use memlint_python::NodeExt;
use memlint_python::SemanticModel;
use memlint_python::tree_sitter::Node;

use crate::prefilter::Words;
use crate::checker::Checker;
use crate::rules::{calls_that_may_resolve_to, keyword_argument, positional_arguments, snippet};
use crate::{Diagnostic, Severity};

pub const SUMMARY: &str = "`nn.DataParallel` gathers outputs on the first GPU";
pub const CAPTURES: &[&str] = &["call"];
pub const FIXABLE: bool = false;

/// The trigger: what a file must contain for this rule to report anything in it.
/// `DataParallel` or `data_parallel` (also in an import that renames it, or the base of a
/// subclass defined here).
pub fn trigger(words: &Words<'_>) -> bool {
    words.has("DataParallel") || words.has("data_parallel")
}

const DATA_PARALLEL: &[&str] = &[
    "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel",
];
const FUNCTIONAL: &[&str] = &["torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"];

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    let mut candidates = calls_that_may_resolve_to(model, DATA_PARALLEL);
    candidates.extend(calls_that_may_resolve_to(model, FUNCTIONAL));
    // `BalancedDataParallel(...)`: a subclass defined here.
    let subclasses = model.classes_deriving_from(DATA_PARALLEL);
    for name in &subclasses {
        candidates.extend(model.calls_named(name).iter().copied());
    }
    candidates.sort_by_key(|c| (c.start_byte(), c.id()));
    candidates.dedup_by_key(|c| c.id());
    for m in checker.matches_at(&candidates) {
        let Some(call) = m.get("call") else { continue };
        let is_subclass = || {
            call.field("function").is_some_and(|f| f.kind_name() == "identifier" && subclasses.contains(&model.text(f)))
        };
        let functional = if model.call_resolves_to(call, DATA_PARALLEL).is_some() || is_subclass() {
            false
        } else if model.call_resolves_to(call, FUNCTIONAL).is_some() {
            true
        } else {
            continue;
        };
        // Without CUDA, `DataParallel` runs the module as it is: no replicas.
        if single_device(model, call, functional) || model.runs_only_without_cuda(call) {
            continue;
        }
        let what = if functional { "`data_parallel()`" } else { "`DataParallel`" };
        checker.report(
            Diagnostic::new(
                checker.rule,
                call.byte_range(),
                format!(
                    "`{}`: {what} replicates the model and gathers every replica's outputs (and computes the loss and reduces gradients) on the first GPU in each step, so that GPU runs out of memory first while the others sit partly empty",
                    snippet(model, call)
                ),
            )
            .with_help("use `torch.nn.parallel.DistributedDataParallel` with one process per GPU (`torchrun`): each GPU keeps only its own share")
            .with_severity(Severity::Warning),
        );
    }
}

/// `device_ids=[0]` (or a one-element tuple): no replicas, nothing gathered elsewhere.
fn single_device<'t>(model: &SemanticModel<'t>, call: Node<'t>, functional: bool) -> bool {
    // DataParallel(module, device_ids, ...); data_parallel(module, inputs, device_ids, ...)
    let position = if functional { 2 } else { 1 };
    let ids = keyword_argument(model, call, "device_ids").or_else(|| positional_arguments(call).get(position).copied());
    let Some(ids) = ids else { return false };
    matches!(ids.kind_name(), "list" | "tuple")
        && ids.named_child_count() == 1
        && ids.named_child(0).map(|c| !matches!(c.kind_name(), "list_splat" | "list_comprehension")).unwrap_or(false)
}
