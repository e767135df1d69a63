//! ## What it does
//! Checks for `torch.load(...)` without `map_location`, under any import spelling
//! (`import torch as th`, `from torch import load`, a function-local import).
//!
//! Not flagged: a call that passes `map_location` (by keyword, or as the second positional
//! argument, whatever its value), or that passes `*args` / `**kwargs` which may carry it;
//! other `load` functions (`torch.hub.load`, `pickle.load`, `numpy.load`,
//! `safetensors.torch.load_file`); and programs that never use a GPU (no `cuda`,
//! `device`, `gpu`, `DataParallel`, `distributed` anywhere in the file), whose files were
//! saved on the CPU. `torch` used without an import in a file with a star import
//! (`from utils import *` re-exporting it) is torch.
//!
//! ## Why is this bad?
//! `torch.load` restores every tensor onto the device it was saved from. A checkpoint
//! written by rank 0 of a training job names `cuda:0`, so when each process of a
//! multi-GPU job (or an evaluation script on a shared machine) loads it, every process
//! materialises a full copy of the checkpoint (weights and optimizer state) on GPU 0:
//! that GPU runs out of memory, or carries several gigabytes it never frees while the
//! process lives. Loading onto the CPU first, and letting `load_state_dict` copy the
//! values into the parameters where they already are, costs no GPU memory at all.
//!
//! ## Example
//! ```python
//! checkpoint = torch.load("last.pt")
//! model.load_state_dict(checkpoint["model"])
//! ```
//!
//! Use instead:
//! ```python
//! checkpoint = torch.load("last.pt", map_location="cpu")
//! model.load_state_dict(checkpoint["model"])
//! ```
//!
//! ## Fix safety
//! The fix adds `map_location="cpu"`. It is safe when the loaded object goes straight into
//! `load_state_dict(...)` (`model.load_state_dict(torch.load(path))`): `Module.load_state_dict`
//! copies values into the existing parameters on their own device, and
//! `Optimizer.load_state_dict` moves its state to its parameters' devices, so nothing the
//! program computes changes. It is unsafe otherwise: code that uses a loaded tensor
//! directly (a saved CUDA tensor, a whole pickled model) would get it on the CPU and could
//! fail with a device mismatch or run on the CPU.

use memlint_python::NodeExt;
use memlint_python::tree_sitter::Node;
use memlint_python::SemanticModel;

use crate::prefilter::Words;
use crate::checker::Checker;
use crate::rules::{append_argument, has_argument_list, has_splat, keyword_argument, positional_arguments, snippet};
use crate::{Diagnostic, Fix, Severity};

pub const SUMMARY: &str = "`torch.load` without `map_location`";
pub const CAPTURES: &[&str] = &["call"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// A call of `load` (or an import that renames it).
pub fn trigger(words: &Words<'_>) -> bool {
    words.called("load")
}

const TORCH_LOAD: &[&str] = &["torch.load", "torch.serialization.load"];

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    // The query only runs on calls of something named `load` (or an alias of it).
    let mut names = vec!["load"];
    for qualified in TORCH_LOAD {
        names.extend(model.names_imported_as(qualified));
    }
    // A program that never names CUDA, a device or a GPU runs on the CPU: what it loads was
    // saved there (or fails loudly on a CPU-only machine either way); nothing lands on GPU 0.
    if !uses_a_gpu(model.source()) {
        return;
    }
    let candidates: Vec<_> = names.iter().flat_map(|n| model.calls_named(n)).map(|c| c.byte_range()).collect();
    for m in checker.matches_in(&candidates) {
        let Some(call) = m.get("call") else { continue };
        if model.call_resolves_to(call, TORCH_LOAD).is_none() || !has_argument_list(call) {
            continue;
        }
        if has_splat(call) || keyword_argument(model, call, "map_location").is_some() || positional_arguments(call).len() >= 2 {
            continue;
        }
        let fix = append_argument(model, call, "map_location=\"cpu\"").map(|edit| {
            let message = "Add `map_location=\"cpu\"`";
            if feeds_load_state_dict(model, call) {
                Fix::safe(message, vec![edit])
            } else {
                Fix::unsafe_(message, vec![edit])
            }
        });
        checker.report(
            Diagnostic::new(
                checker.rule,
                call.byte_range(),
                format!(
                    "`{}` without `map_location` restores every tensor onto the GPU it was saved from: in a multi-GPU job every process materialises the whole checkpoint on GPU 0",
                    snippet(model, call)
                ),
            )
            .with_help("load onto the CPU with `map_location=\"cpu\"` (or onto this process's device) and let `load_state_dict` place the values")
            .with_severity(Severity::Warning)
            .with_fix(fix),
        );
    }
}

/// Does the program name CUDA, a device or a GPU anywhere (`.cuda()`, `device`,
/// `DataParallel`, `--gpu`)? Case-insensitive, in code, strings and comments alike.
fn uses_a_gpu(source: &str) -> bool {
    static WORDS: std::sync::OnceLock<aho_corasick::AhoCorasick> = std::sync::OnceLock::new();
    let words = WORDS.get_or_init(|| {
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(["cuda", "device", "gpu", "dataparallel", "distributed", "accelerat", "nccl"])
            .expect("a few plain words build an automaton")
    });
    words.is_match(source)
}

/// `x.load_state_dict(torch.load(...))`: the only argument of a `load_state_dict` call.
fn feeds_load_state_dict(model: &SemanticModel<'_>, call: Node<'_>) -> bool {
    let Some(args) = call.parent().filter(|p| p.kind_name() == "argument_list") else { return false };
    let Some(outer) = args.parent().filter(|p| p.kind_name() == "call") else { return false };
    let method = outer
        .field("function")
        .filter(|f| f.kind_name() == "attribute")
        .and_then(|f| f.field("attribute"))
        .map(|a| model.text(a));
    method == Some("load_state_dict") && positional_arguments(outer).first().map(|a| a.id()) == Some(call.id())
}
