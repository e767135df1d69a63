//! ## What it does
//! Checks for single-process data parallelism: `torch.nn.DataParallel(model)` and the
//! functional `torch.nn.parallel.data_parallel(model, inputs)`, under any import spelling
//! (`nn.DataParallel`, `from torch.nn import DataParallel as DP`, a function-local import),
//! and subclasses of `DataParallel` defined in the same file
//! (`BalancedDataParallel(gpu0_bsz, model)`).
//!
//! Not flagged: `DataParallel` with a single device (`device_ids=[0]`, also through a name
//! bound only to such a list: `ids = [0]; DataParallel(net, device_ids=ids)`), or on the branch
//! that runs only without CUDA (`else:` of `if torch.cuda.is_available():`), which make
//! no replicas; references that do not construct one (`isinstance(model, nn.DataParallel)`
//! to unwrap a model); and classes of the same name from other libraries
//! (`torch_geometric.nn.DataParallel`).
//!
//! ## Why is this bad?
//! `DataParallel` drives every GPU from one process. In every step it copies the model from
//! the first GPU to the others, scatters the batch, runs the replicas in threads of that one
//! process, gathers their outputs onto the first GPU for the loss, and sums the replicas'
//! gradients back onto the first GPU, which holds the only gradients and optimizer state.
//! What that costs, measured with PyTorch 2.11 on H100s (`memlint verify --rule MEM007
//! --compare-torch`: an MLP of 8 × `Linear(4096, 4096)`, batch 512, SGD with momentum):
//!
//! - **Time.** The per-step copies and the one process make each step slower than with
//!   `DistributedDataParallel`: 1.2× to 1.3× on 2 GPUs and 1.8× to 2.4× on 4 (plain SGD
//!   and with momentum); 2.1× to 4.3× for a smaller model (4 × `Linear(2048, 2048)`, batch
//!   256), where PyTorch's host work per step sets the pace; 1.1× to 1.2× for a large one
//!   (4 × `Linear(8192, 8192)`, batch 4096).
//! - **The other GPUs' memory.** They hold a replica and their share of the activations
//!   only: 598 to 618 MiB against the first GPU's 2,115 MiB (28 to 29%); the rest of their
//!   memory stays unused.
//! - **Not the first GPU's peak.** DDP's peak on every GPU was as high (2,118 to 2,122 MiB),
//!   or higher (+3 to 6% for the large model): each DDP process keeps the whole model, its
//!   gradients, its optimizer state and, by default, a second copy of the gradients in its
//!   communication buckets. With `gradient_as_bucket_view=True` the gradients live in the
//!   buckets and the peak was 19 to 20% lower (1,686 to 1,706 MiB).
//!
//! So moving to DDP makes steps faster and puts every GPU's memory to work; it lowers the
//! per-GPU peak below the first GPU's only with `gradient_as_bucket_view=True`.
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
//! model = DistributedDataParallel(Net().cuda(), device_ids=[local_rank], gradient_as_bucket_view=True)
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

pub const SUMMARY: &str = "`nn.DataParallel` copies the model to every GPU each step and leaves their memory unused";
pub const CAPTURES: &[&str] = &["call"];
pub const FIXABLE: bool = false;

/// The trigger: what a file must contain for this rule to report anything in it.
/// `DataParallel` or `data_parallel` (also in an import that renames it, or the base of a
/// subclass defined here), or names taken from the project (a subclass defined in another
/// module: `from encoding.parallel import DataParallelModel`).
pub fn trigger(words: &Words<'_>) -> bool {
    words.has("DataParallel") || words.has("data_parallel") || words.project_values()
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
    // Subclasses the project defines in other modules.
    candidates.extend(model.calls().iter().copied().filter(|c| {
        c.field("function").is_some_and(|f| matches!(f.kind_name(), "identifier" | "attribute")) && model.call_builds_subclass_of(*c, DATA_PARALLEL)
    }));
    candidates.sort_by_key(|c| (c.start_byte(), c.id()));
    candidates.dedup_by_key(|c| c.id());
    for m in checker.matches_at(&candidates) {
        let Some(call) = m.get("call") else { continue };
        let is_subclass = || model.call_builds_subclass_of(call, DATA_PARALLEL);
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
        // A wrapper that never runs a forward pass (built to load a `module.`-prefixed
        // checkpoint, then unwrapped with `.module`) drives no GPU.
        if !functional && !model.module_may_run_forward(call) {
            continue;
        }
        let what = if functional { "`data_parallel()`" } else { "`DataParallel`" };
        checker.report(
            Diagnostic::new(
                checker.rule,
                call.byte_range(),
                format!(
                    "`{}`: {what} drives every GPU from one process: each step copies the model from the first GPU to the others and sums the gradients back onto it, so steps are slower than with DistributedDataParallel and the other GPUs' memory goes mostly unused",
                    snippet(model, call)
                ),
            )
            .with_help("use `torch.nn.parallel.DistributedDataParallel` with one process per GPU (`torchrun`) and `gradient_as_bucket_view=True` (without it every GPU keeps a second copy of the gradients): steps are faster and every GPU does its share, but each GPU then holds the whole model, its gradients and optimizer state, about what the first GPU holds now; `memlint verify --rule MEM007` measures both on your GPUs")
            .with_severity(Severity::Warning)
            .with_evidence(vec![
                memlint_python::Fact::at(
                    format!(
                        "`{}` resolves to {}",
                        model.short_text(model.field(call, "function").unwrap_or(call)),
                        if functional { "`torch.nn.parallel.data_parallel`".to_owned() } else if is_subclass() { "a subclass of `torch.nn.DataParallel`".to_owned() } else { "`torch.nn.DataParallel`".to_owned() }
                    ),
                    call,
                ),
                memlint_python::Fact::plain("no single-device `device_ids`, not only in code that runs without CUDA, and the wrapper may run a forward pass"),
            ]),
        );
    }
}

/// `device_ids=[0]` (or a one-element tuple): no replicas, nothing gathered elsewhere.
fn single_device<'t>(model: &SemanticModel<'t>, call: Node<'t>, functional: bool) -> bool {
    // DataParallel(module, device_ids, ...); data_parallel(module, inputs, device_ids, ...)
    let position = if functional { 2 } else { 1 };
    let ids = keyword_argument(model, call, "device_ids").or_else(|| positional_arguments(call).get(position).copied());
    let Some(ids) = ids else { return false };
    memlint_python::fixed_sequence_length(model, ids) == Some(1)
}
