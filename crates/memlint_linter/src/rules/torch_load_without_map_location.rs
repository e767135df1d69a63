//! ## What it does
//! Checks for `torch.load(...)` without `map_location`, under any import spelling
//! (`import torch as th`, `from torch import load`, a function-local import).
//!
//! Not flagged: a call that passes `map_location` (by keyword, or as the second positional
//! argument, whatever its value), or that passes `*args` / `**kwargs` which may carry it;
//! other `load` functions (`torch.hub.load`, `pickle.load`, `numpy.load`,
//! `safetensors.torch.load_file`); and a load in a program that never uses CUDA (a
//! conversion script, a CPU demo: the load runs at module level or the file has a
//! `__main__` guard, and nothing in the file places anything on a device — no `.cuda()`,
//! `torch.cuda`, `.to(...)`, `device`, GPU settings or `"cuda"` string outside an
//! `add_argument` declaration). A module of functions is always checked: a CUDA program
//! may call them. Nor a load of a file this module saved from CPU values
//! (`torch.save({"x": t.detach().cpu()}, path)` then `torch.load(path)`, the same literal
//! path or the same expression in one function): `.cpu()`, `.numpy()`, `.tolist()` results,
//! tensors built with no `device` (`torch.zeros(3)`, also when later changed in place:
//! `mean += x` keeps the tensor where it is), numbers and strings, through the names that
//! hold them.
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
use memlint_python::{BindingKind, SemanticModel};

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
    let candidates: Vec<_> = names.iter().flat_map(|n| model.calls_named(n)).copied().collect();
    let module = ModuleFacts::default();
    for m in checker.matches_at(&candidates) {
        let Some(call) = m.get("call") else { continue };
        if model.call_resolves_to(call, TORCH_LOAD).is_none() || !has_argument_list(call) {
            continue;
        }
        if has_splat(call) || keyword_argument(model, call, "map_location").is_some() || positional_arguments(call).len() >= 2 {
            continue;
        }
        if runs_in_a_program_without_cuda(model, call, &module) || loads_what_this_module_saved_from_the_cpu(model, call) {
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
        let callee = model.field(call, "function").unwrap_or(call);
        let evidence = vec![
            memlint_python::Fact::at(format!("`{}` resolves to `torch.load`", model.short_text(callee)), callee),
            memlint_python::Fact::at("no `map_location` is given (no keyword, no second argument, no `**kwargs`)", call),
            memlint_python::Fact::plain("the program may run with CUDA (the call is not only in code that runs without it), and this module saves nothing it loads here from the CPU"),
        ];
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
            .with_fix(fix)
            .with_evidence(evidence),
        );
    }
}

/// Names whose use places something on a GPU or picks a device: `.cuda()`, `torch.cuda`,
/// `.to(...)`, `device=`, `torch.device`, data- and distributed-parallel wrappers, settings
/// that select GPUs (`args.gpu`, `gpu_ids`, `local_rank`), accelerator objects.
const DEVICE_NAMES: &[&str] = &[
    "cuda", "to", "device", "devices", "set_device", "gpu", "gpus", "gpu_id", "gpu_ids", "n_gpu", "ngpu", "num_gpus",
    "local_rank", "DataParallel", "DistributedDataParallel", "data_parallel", "distributed", "accelerator", "Accelerator",
    "deepspeed", "fabric", "Trainer",
];

/// Is `call` in a program that never uses CUDA? Then `torch.load` restores nothing onto
/// a GPU the program could use (a checkpoint saved from CUDA would fail to load instead,
/// which no `map_location` advice about GPU memory concerns).
///
/// A program: the load runs when the file runs (at module level), or the file has a
/// `__main__` guard. Never using CUDA: no name of [`DEVICE_NAMES`] is used anywhere in the
/// file, and `"cuda"` appears in no string except the flags of `add_argument(...)` (a
/// `--cuda` flag that nothing reads is not a use). A library module (functions only, no
/// `__main__`) may be called from a CUDA program, so it is never exempt.
fn runs_in_a_program_without_cuda<'t>(model: &SemanticModel<'t>, call: Node<'t>, module: &ModuleFacts) -> bool {
    let is_program = model.enclosing_function(call).is_none() || *module.main_guard.get_or_init(|| has_main_guard(model));
    is_program && *module.without_cuda.get_or_init(|| never_uses_cuda(model))
}

/// What [`runs_in_a_program_without_cuda`] asks of the whole module: found once per lint,
/// when a first call needs it (asking per call made a file of many loads quadratic).
#[derive(Default)]
struct ModuleFacts {
    main_guard: std::cell::OnceCell<bool>,
    without_cuda: std::cell::OnceCell<bool>,
}

/// Has the module an `if __name__ == "__main__":` guard at top level?
fn has_main_guard(model: &SemanticModel<'_>) -> bool {
    let root = model.root();
    let mut cursor = root.walk();
    let found = root.named_children(&mut cursor).any(|statement| {
        statement.kind_name() == "if_statement"
            && model.field(statement, "condition").map(|c| model.text(c)).is_some_and(|c| c.contains("__name__") && c.contains("__main__"))
    });
    found
}

/// No name of [`DEVICE_NAMES`] is used, and `"cuda"` is in no code or string but comments,
/// docstrings and the flags of `add_argument(...)`.
fn never_uses_cuda(model: &SemanticModel<'_>) -> bool {
    let source = model.source();
    let whole = 0..source.len();
    if DEVICE_NAMES
        .iter()
        .any(|name| !model.identifiers_named_in(name, whole.clone()).is_empty() || !model.attributes_named_in(name, whole.clone()).is_empty())
    {
        return false;
    }
    // `"cuda"` / `"cuda:0"` in code, not in a comment or an argparse declaration.
    let lower = source.to_ascii_lowercase();
    for at in memchr::memmem::find_iter(lower.as_bytes(), b"cuda") {
        let Some(node) = model.root().descendant_for_byte_range(at, at + 4) else { return false };
        if node.kind_name() == "comment" {
            continue;
        }
        let mut current = Some(node);
        let mut declared = false;
        while let Some(n) = current {
            if n.kind_name() == "call" {
                let callee = model.field(n, "function").and_then(|f| model.field(f, "attribute")).map(|a| model.text(a));
                declared = callee == Some("add_argument");
                break;
            }
            if matches!(n.kind_name(), "function_definition" | "class_definition" | "module") {
                break;
            }
            current = n.parent();
        }
        // A docstring or other bare string statement does nothing either.
        let string = if node.kind_name() == "string_content" { node.parent() } else { Some(node) };
        let bare_string = string
            .filter(|s| s.kind_name() == "string")
            .and_then(|s| s.parent())
            .map(|p| p.kind_name() == "expression_statement")
            .unwrap_or(false);
        if !declared && !bare_string {
            return false;
        }
    }
    true
}

const TORCH_SAVE: &[&str] = &["torch.save", "torch.serialization.save"];

/// Does `call` load a file this module writes with `torch.save` from CPU values (the same
/// path: the same literal, or the same expression in the same function)? Nothing in it can
/// land on a GPU.
fn loads_what_this_module_saved_from_the_cpu<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let Some(path_node) = positional_arguments(call).first().copied() else { return false };
    let path = model.text(path_node);
    // A name means the same file only in the same function; a literal path anywhere.
    let scope = |node: Node<'t>| model.enclosing_function(node).map(|f| f.node.id());
    let literal = path_node.kind_name() == "string";
    let mut names = vec!["save"];
    for qualified in TORCH_SAVE {
        names.extend(model.names_imported_as(qualified));
    }
    names.iter().flat_map(|n| model.calls_named(n)).any(|save| {
        if model.call_resolves_to(*save, TORCH_SAVE).is_none() {
            return false;
        }
        let arguments = positional_arguments(*save);
        let (Some(object), Some(target)) = (arguments.first(), arguments.get(1)) else { return false };
        model.text(*target) == path && (literal || scope(*save) == scope(call)) && holds_only_cpu_values(model, *object, 0)
    })
}

/// Is `expr` made only of values on the CPU: `.cpu()` / `.numpy()` / `.tolist()` results,
/// `torch.from_numpy(...)`, tensor factories given no device, numbers and strings (also from
/// `len()`, `float()`), names bound to those, or dicts, lists and tuples of those?
fn holds_only_cpu_values<'t>(model: &SemanticModel<'t>, expr: Node<'t>, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    match expr.kind_name() {
        "integer" | "float" | "string" | "true" | "false" | "none" => true,
        "dictionary" => {
            let mut cursor = expr.walk();
            let pairs: Vec<Node<'t>> = expr.named_children(&mut cursor).collect();
            pairs.iter().all(|pair| pair.kind_name() == "pair" && pair.field("value").is_some_and(|v| holds_only_cpu_values(model, v, depth + 1)))
        }
        "list" | "tuple" => {
            let mut cursor = expr.walk();
            let items: Vec<Node<'t>> = expr.named_children(&mut cursor).collect();
            items.iter().all(|item| holds_only_cpu_values(model, *item, depth + 1))
        }
        "parenthesized_expression" => expr.named_child(0).is_some_and(|e| holds_only_cpu_values(model, e, depth + 1)),
        "call" => {
            let Some(callee) = model.field(expr, "function") else { return false };
            let method = match callee.kind_name() {
                "attribute" => model.field(callee, "attribute").map(|a| model.text(a)),
                _ => None,
            };
            // `len(xs)`, `float(x)`: a builtin (not rebound here) giving a number or a string.
            let builtin = callee.kind_name() == "identifier"
                && matches!(model.text(callee), "len" | "int" | "float" | "str" | "bool" | "round")
                && model.binding_at(model.text(callee), callee).is_none();
            builtin || matches!(method, Some("cpu" | "numpy" | "tolist" | "item")) || builds_a_cpu_tensor(model, expr)
        }
        // A name: what its binding there holds. `mean = torch.zeros(3)`, then `mean += ...`
        // and `mean /= n`: an in-place operation keeps the tensor on its device (a tensor
        // of another device would make it raise).
        "identifier" => {
            let name = model.text(expr);
            let Some(binding) = model.binding_at(name, expr) else { return false };
            match (binding.kind, binding.value) {
                (BindingKind::Assign, Some(value)) => holds_only_cpu_values(model, value, depth + 1),
                (BindingKind::AugAssign, _) => model
                    .bindings_in_scope(name, expr)
                    .iter()
                    .rev()
                    .find(|b| b.position < binding.position && b.kind != BindingKind::AugAssign)
                    .is_some_and(|b| b.kind == BindingKind::Assign && b.value.is_some_and(|v| builds_a_cpu_tensor(model, v))),
                _ => false,
            }
        }
        _ => false,
    }
}

/// `torch.from_numpy(a)`, or a tensor factory (`torch.zeros(3)`, `torch.tensor(xs)`) given
/// no `device`: a tensor on the CPU.
fn builds_a_cpu_tensor<'t>(model: &SemanticModel<'t>, expr: Node<'t>) -> bool {
    if expr.kind_name() != "call" {
        return false;
    }
    let Some(qualified) = model.field(expr, "function").and_then(|f| model.qualified_name(f)) else { return false };
    memlint_python::builds_on_the_cpu_without_device(&qualified) && (qualified == "torch.from_numpy" || keyword_argument(model, expr, "device").is_none())
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
