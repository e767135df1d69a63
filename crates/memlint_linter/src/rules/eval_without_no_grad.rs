//! ## What it does
//! Checks for forward passes in evaluation or inference code that run with gradient
//! tracking, outside `torch.no_grad()` / `torch.inference_mode()`. Code is evaluation
//! when it follows `model.eval()`, loops over a validation or test loader, or is a
//! function whose name says evaluate / validate / test / predict / infer / generate /
//! sample — and also by what it does: a function (or script) that never backpropagates
//! and lets no tensor with autograd history out (it does not return, store, append or
//! hand one to a function memlint cannot see into), such as an inference script, an RL
//! rollout that only samples actions, or `select_action` returning numpy; and a periodic
//! preview in a training loop (`if it % 200 == 0: preview = netG(fixed_noise)`) whose
//! output never reaches a backward pass.
//!
//! A helper is evaluation when evaluation code is all that calls it: every use of a plain
//! function of the module is a call in a function named for evaluation or in a loop over
//! validation data, with no backward pass after it there, and no other module of the
//! project calls it (`def run_batch(x): return model(x)` called from `evaluate()`).
//!
//! A loop shared by training and evaluation is evaluation when it is run with its
//! training flag off: every backward pass of the function runs under one test of a
//! parameter (`if train:`, `if optimizer is not None:`, `if mode == "train":`, or a name
//! bound once to such a test, `is_train = optimizer is not None`) and a call
//! in the module, made with gradients on, passes a value that turns it off (a literal, a
//! constant, an argparse default: `run_epoch(model, val_loader, train=False)`), or leaves a
//! default that does. The forward
//! passes outside that test are reported; the fix lets gradients follow the flag
//! (`with torch.set_grad_enabled(train):`).
//!
//! A call is a forward pass when its callee is a module *instance*: a value built from a
//! `torch.nn.Module` subclass (local, `torch.nn`, torchvision / timm / transformers /
//! `torch.hub` factories, or a class whose name says network), returned by a local
//! factory, held in a list, dict or `nn.ModuleList` and iterated, an attribute set in
//! `__init__`, `nn.parallel.data_parallel(net, ...)`, or a method of a local module
//! class that runs the forward pass (`policy.pi(x)`). Constructors (`Generator(cfg)`,
//! `zoo.ResBlock(64, 64)`), functions and methods (`self.restore_model(...)`,
//! `convert_model(model)`) are not; a name says "network" only where no value is known.
//!
//! Also checks for the legacy guard `Variable(x, volatile=True)`, which has done nothing
//! since PyTorch 0.4.
//!
//! Code counts as running without gradients inside `with torch.no_grad():`,
//! `with torch.inference_mode():` or `with torch.set_grad_enabled(False):` (also as one
//! item of a multi-item `with`, and after `stack.enter_context(torch.no_grad())`), in a
//! function decorated `@torch.no_grad()` / `@torch.inference_mode()` (or a decorator whose
//! name says so), in Lightning's `validation_step` / `test_step` / `predict_step`, and in a
//! function of the same module that is only ever called from such code (or, by
//! `memlint check` and the language server, a top-level function that its own module never
//! calls and the project's other modules call only from such code).
//!
//! In a project, a network built from a class of a sibling module (`from .models import
//! Generator`, `from nets import *`, a re-export through a package's `__init__.py`) or
//! returned by a factory function of another module is a network whatever its name; the
//! constructor or factory call itself is not a forward pass.
//!
//! A function named for evaluation that is called from some module's `forward` (a
//! `predict_heads` helper of a detection model) is part of the training forward pass and is
//! not treated as evaluation; neither are checks and preparation steps (`validate_inputs`,
//! `prepare_inputs_for_generation`), nor a function that returns the network's output to
//! a caller that backpropagates (`noisy_sample` in diffusion training). The methods of a
//! module class are its forward pass and are not judged by behaviour. `volatile=True` on
//! the targets of a training step is not an evaluation guard and is not reported.
//!
//! Code that needs gradients after `.eval()` (a `.backward()` or `torch.autograd.grad` later
//! in the same function with no `.train()` in between, as in adversarial examples or
//! saliency maps) is not flagged; a training loop earlier in the function does not count.
//!
//! ## Why is this bad?
//! `model.eval()` only switches layers such as dropout and batch norm to inference
//! behaviour; it does not stop autograd. Without `no_grad`, every layer saves its inputs
//! for a backward pass that never comes, so an evaluation step holds as much activation
//! memory as a training step. Evaluation then runs out of GPU memory at batch sizes that
//! would fit several times over, and anything kept from the loop (a loss, the outputs)
//! keeps each batch's graph alive too.
//!
//! ## Example
//! ```python
//! def evaluate(model, val_loader):
//!     model.eval()
//!     correct = 0
//!     for x, y in val_loader:
//!         out = model(x.cuda())
//!         correct += (out.argmax(1) == y.cuda()).sum().item()
//!     return correct
//! ```
//!
//! Use instead:
//! ```python
//! @torch.no_grad()
//! def evaluate(model, val_loader):
//!     model.eval()
//!     correct = 0
//!     for x, y in val_loader:
//!         out = model(x.cuda())
//!         correct += (out.argmax(1) == y.cuda()).sum().item()
//!     return correct
//! ```
//!
//! ## Fix safety
//! The fix decorates the evaluation function with `@torch.no_grad()`, or wraps the
//! evaluation loop (or statement) in `with torch.no_grad():`, re-indenting it with the
//! file's indentation, and adds `import torch` when the module does not import it.
//! The values computed are the same; only autograd history is dropped. The fix is safe
//! when the function returns nothing (or the code is at module level); it is unsafe when
//! the function returns or yields values, because a caller elsewhere could backpropagate
//! through them. It is not offered when re-indenting would change a multi-line string.
//!
//! For a loop shared by training and evaluation, the fix wraps the function's outermost
//! loop in `with torch.set_grad_enabled(<flag>):`. It is always unsafe: with the flag on,
//! it turns gradients on even where a caller had turned them off.

use memlint_python::NodeExt;
use memlint_python::tree_sitter::Node;
use memlint_python::{constant_value, function_name_says_eval, named_children, unparenthesize, BindingKind, Constant, FunctionInfo, GradContext, HistoryFlow, SemanticModel};

use crate::prefilter::Words;
use crate::rules::could_hold_a_model;
use crate::checker::Checker;
use crate::rules::{has_multiline_string, indent_lines, indent_unit, line_indent, line_start, snippet, torch_name};
use crate::{Diagnostic, Edit, Fix, Severity};

pub const SUMMARY: &str = "Forward pass in evaluation code without `torch.no_grad()`";
pub const CAPTURES: &[&str] = &["call", "callee", "volatile_call"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// `Variable(volatile=True)`, or something that could be a network.
pub fn trigger(words: &Words<'_>) -> bool {
    // Evaluation is also decided by behaviour (code that never backpropagates, periodic
    // previews), so anything that could hold a network may hold a finding.
    words.contains("volatile") || could_hold_a_model(words)
}

const HELP: &str = "run evaluation under `with torch.no_grad():` (or `torch.inference_mode()`), or decorate the function with `@torch.no_grad()`";

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    let names = EvaluationNames::default();
    let flow = HistoryFlow::new(model);
    let flags = TrainingFlags::of(model);
    let helpers = EvaluationHelpers::of(model, &names);
    for m in checker.matches_in(&evaluation_regions(checker, &names, &flags, &helpers)) {
        if let Some(call) = m.get("volatile_call") {
            // `volatile=True` on the targets of a training step is not an evaluation guard.
            let in_training_loop = model.enclosing_loops(call).first().map(|l| l.node.field("body").map(|b| model.trains_in(b)).unwrap_or(false)).unwrap_or(false);
            if !model.grad_context(call).is_disabled() && !in_training_loop {
                checker.report(
                    Diagnostic::new(
                        checker.rule,
                        call.byte_range(),
                        "`volatile=True` has had no effect since PyTorch 0.4: this code still records autograd history and keeps every activation",
                    )
                    .with_help(HELP),
                );
            }
            continue;
        }
        let Some(call) = m.get("call") else { continue };
        let Some(module) = model.forward_callee(call) else { continue };
        if model.grad_context(call) != GradContext::Enabled || runs_elsewhere_in_a_lambda(model, call) {
            continue;
        }
        let Some(reason) = evaluation_reason(model, call, module, &names)
            .or_else(|| behaviour_reason(model, &flow, call))
            .or_else(|| helpers.reason(model, call))
            .or_else(|| training_flag_off(model, &flags, call))
        else {
            continue;
        };
        // With the flag off, none of the function's backward passes runs.
        let flag_off = matches!(reason, EvaluationReason::TrainingFlagOff { .. });
        if (!flag_off && needs_gradients(model, call)) || frozen_and_given_no_history(model, call, module) {
            continue;
        }
        // Last, as it may read other modules: callers elsewhere all disable gradients.
        if model.grad_disabled_by_callers_elsewhere(call).is_some() {
            continue;
        }
        let message = format!(
            "forward pass `{}` in evaluation code ({}) runs with gradient tracking: autograd keeps every layer's activations for a backward pass that never comes",
            snippet(model, call),
            reason.describe(),
        );
        let fix = match &reason {
            EvaluationReason::TrainingFlagOff { enabled, .. } => grad_follows_flag_fix(model, call, enabled),
            _ => no_grad_fix(model, call, &reason),
        };
        let help = match &reason {
            EvaluationReason::TrainingFlagOff { enabled, .. } => {
                format!("let gradients follow the flag with `with torch.set_grad_enabled({enabled}):`, or make the evaluation call under `with torch.no_grad():`")
            }
            _ => HELP.to_owned(),
        };
        checker.report(
            Diagnostic::new(checker.rule, call.byte_range(), message)
                .with_help(help)
                .with_severity(Severity::Warning)
                .with_fix(fix),
        );
    }
}

/// Where evaluation code can be (a superset of what `evaluation_reason` accepts): the
/// bodies of functions named for evaluation, loops over validation data, and what
/// follows `.eval()` / `.train(False)` in its scope. The query only runs there.
fn evaluation_regions(checker: &Checker<'_, '_>, names: &EvaluationNames, flags: &TrainingFlags<'_, '_>, helpers: &EvaluationHelpers<'_>) -> Vec<std::ops::Range<usize>> {
    let model = checker.model;
    let source_len = model.source().len();
    if memchr::memmem::find(model.source().as_bytes(), b"volatile").is_some() {
        return vec![0..source_len];
    }
    let mut regions = Vec::new();
    for f in model.functions() {
        if is_evaluation_function(model, f, names) {
            regions.push(f.node.byte_range());
        }
    }
    for l in model.loops() {
        if model.loop_info(*l).over_eval_data {
            regions.push(l.byte_range());
        }
    }
    for toggle in model.calls_named("eval").iter().chain(model.calls_named("train")) {
        let end = model.enclosing_function(*toggle).map(|f| f.node.end_byte()).unwrap_or(source_len);
        regions.push(toggle.start_byte()..end);
    }
    // Evaluation by behaviour: scopes that never backpropagate (the module body, then each
    // function), and training loops that may hold a periodic preview.
    if model.backward_calls_in_scope_of(model.root()).is_empty() {
        return vec![0..source_len];
    }
    for f in model.functions() {
        if f.node.field("body").map(|b| model.backward_calls_in_scope_of(b).is_empty()).unwrap_or(false) {
            regions.push(f.node.byte_range());
        }
    }
    for (function, _) in &flags.0 {
        regions.push(function.node.byte_range());
    }
    for (function, _) in &helpers.0 {
        regions.push(function.byte_range());
    }
    if memchr::memchr(b'%', model.source().as_bytes()).is_some() {
        for l in model.loops() {
            if model.loop_info(*l).over_batches {
                regions.push(l.byte_range());
            }
        }
    }
    regions
}

/// A function named for evaluation (`predict`, `generate`, `_sample`) that is not a step of
/// some module's `forward`: `self.predict_heads(x)` called from `forward` runs in training
/// too, and needs its graph.
fn is_evaluation_function<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, decided: &EvaluationNames) -> bool {
    if !function_name_says_eval(&f.name) || f.name == "forward" {
        return false;
    }
    if let Some(known) = decided.0.borrow().get(&f.name) {
        return *known;
    }
    let calls = model.calls_named(&f.name);
    let from_forward = calls
        .iter()
        .any(|call| model.enclosing_function(*call).map(|caller| caller.name == "forward").unwrap_or(false));
    // `noisy_sample(model, x0, t)` returning the network's output to a training step that
    // backpropagates it: a step of training, whatever its name says.
    let feeds_training = || {
        calls.iter().any(|call| !model.backward_calls_in_scope_of(*call).is_empty())
            && HistoryFlow::new(model).function_returns_history(f.node)
    };
    let answer = !from_forward && !feeds_training();
    decided.0.borrow_mut().insert(f.name.clone(), answer);
    answer
}

/// [`is_evaluation_function`] depends on the function's name alone and is asked for every
/// candidate: decided once per name while checking a module (a file of many same-named
/// functions made it quadratic).
#[derive(Default)]
struct EvaluationNames(std::cell::RefCell<rustc_hash::FxHashMap<String, bool>>);

/// Why a forward pass counts as evaluation.
enum EvaluationReason<'t> {
    AfterEval(String),
    EvalLoop(Node<'t>, String),
    EvalFunction(String),
    /// Nothing in the function (or the module body) backpropagates or keeps a tensor with
    /// history: the function's name, or `None` at module level.
    NeverBackpropagated(Option<String>),
    /// A forward under a periodic condition in a training loop (`if it % 100 == 0:`) whose
    /// output never reaches a backward pass: the condition.
    PeriodicPreview(String),
    /// A forward in a function called only from evaluation code: the function, and one
    /// of its callers.
    CalledFromEvaluation { function: String, caller: String },
    /// A forward in a function that backpropagates only when a parameter says so
    /// (`if train: loss.backward()`), which this module calls with it off.
    TrainingFlagOff {
        function: String,
        /// The guard, as written (`train`, `optimizer is not None`).
        guard: String,
        /// The call that turns it off, and its line.
        call: String,
        line: usize,
        /// What `torch.set_grad_enabled(...)` is given to follow the flag.
        enabled: String,
    },
}

impl EvaluationReason<'_> {
    fn describe(&self) -> String {
        match self {
            EvaluationReason::AfterEval(call) => format!("after `{call}`"),
            EvaluationReason::EvalLoop(_, over) => format!("in a loop over `{over}`"),
            EvaluationReason::EvalFunction(name) => format!("in `{name}()`"),
            EvaluationReason::NeverBackpropagated(Some(name)) => {
                format!("`{name}()` never backpropagates nor keeps a tensor with history")
            }
            EvaluationReason::NeverBackpropagated(None) => "the script never backpropagates".to_owned(),
            EvaluationReason::PeriodicPreview(condition) => {
                format!("a preview under `if {condition}:` in the training loop whose output is never backpropagated")
            }
            EvaluationReason::CalledFromEvaluation { function, caller } => {
                format!("in `{function}()`, called only from evaluation code: {caller}")
            }
            EvaluationReason::TrainingFlagOff { function, guard, call, line, .. } => {
                format!("`{function}()` backpropagates only `if {guard}:`, and `{call}` on line {line} calls it with that off")
            }
        }
    }
}

/// Evaluation by what the code does, not by its names: a forward pass in a function (or
/// module body) that never backpropagates and lets no tensor with history out, or a
/// periodic preview in a training loop whose output never reaches a backward pass. Not
/// inside a module's own methods (they are the forward pass), `forward` itself, or a
/// function called from some `forward`.
fn behaviour_reason<'t>(model: &SemanticModel<'t>, flow: &HistoryFlow<'_, 't>, call: Node<'t>) -> Option<EvaluationReason<'t>> {
    let function = model.enclosing_function(call);
    if let Some(f) = function {
        if matches!(f.name.as_str(), "forward" | "__call__") || f.class.as_deref().map(|c| model.is_module_class(c)).unwrap_or(false) {
            return None;
        }
        if flow_called_from_forward(model, flow, &f.name) {
            return None;
        }
    }
    if !flow.scope_keeps_history(call) {
        return Some(EvaluationReason::NeverBackpropagated(function.map(|f| f.name.clone())));
    }
    // A periodic preview: `if step % k == 0:` between the call and a training loop.
    let mut current = model.parent(call)?;
    let mut condition = None;
    loop {
        match current.kind_name() {
            "if_statement" if condition.is_none() => {
                if let Some(c) = current.field("condition") {
                    if model.period_of(c).is_some() {
                        condition = Some(c);
                    }
                }
            }
            "for_statement" | "while_statement" => {
                let condition = condition?;
                if !model.loop_info(current).over_batches || flow.result_reaches_backward(call) {
                    return None;
                }
                return Some(EvaluationReason::PeriodicPreview(snippet(model, condition)));
            }
            "function_definition" | "lambda" | "class_definition" | "module" => return None,
            _ => {}
        }
        current = model.parent(current)?;
    }
}

/// Is a function of this name called from some `forward`? Asked once per name (through
/// the flow's memo), not per candidate.
fn flow_called_from_forward<'t>(model: &SemanticModel<'t>, flow: &HistoryFlow<'_, 't>, name: &str) -> bool {
    flow.memo_by_name("called_from_forward", name, || {
        model
            .calls_named(name)
            .iter()
            .any(|c| model.enclosing_function(*c).map(|caller| caller.name == "forward").unwrap_or(false))
    })
}

fn evaluation_reason<'t>(model: &SemanticModel<'t>, call: Node<'t>, module: Node<'t>, names: &EvaluationNames) -> Option<EvaluationReason<'t>> {
    let function = model.enclosing_function(call);
    if let Some(f) = function {
        if is_evaluation_function(model, f, names) {
            return Some(EvaluationReason::EvalFunction(f.name.clone()));
        }
    }
    for l in model.enclosing_loops(call) {
        if l.over_eval_data {
            let over = l
                .node
                .field("right")
                .map(|r| snippet(model, r))
                .unwrap_or_default();
            return Some(EvaluationReason::EvalLoop(l.node, over));
        }
    }
    // `model.eval()` earlier in the same scope on the module called (or its parent), and
    // no `model.train()` in between.
    let module_text = model.text(module);
    let scope = function.map(|f| f.node.id());
    let scope_start = function.map(|f| f.node.start_byte()).unwrap_or(0);
    let mut state: Option<String> = None;
    let mut toggles: Vec<(usize, Option<String>)> = Vec::new();
    for (method, is_eval) in [("eval", true), ("train", false)] {
        for toggle in model.calls_named_in(method, scope_start..call.start_byte()) {
            if model.enclosing_function(*toggle).map(|f| f.node.id()) != scope {
                continue;
            }
            let Some(object) = toggle.field("function").and_then(|f| f.field("object")) else {
                continue;
            };
            let object_text = model.text(object);
            let applies = module_text == object_text || module_text.starts_with(&format!("{object_text}."));
            if !applies {
                continue;
            }
            let arg = toggle.field("arguments").and_then(|a| a.named_child(0)).map(|a| model.text(a));
            let eval = if is_eval { true } else { arg == Some("False") };
            toggles.push((toggle.start_byte(), eval.then(|| model.text(*toggle).to_owned())));
        }
    }
    toggles.sort_by_key(|t| t.0);
    for (_, t) in toggles {
        state = t;
    }
    state.map(EvaluationReason::AfterEval)
}

/// Does the forward pass need its graph: a backward in the same scope after it, with no
/// `.train()` in between (adversarial examples, saliency maps)? A training loop earlier in
/// the function (which runs again on the next epoch) does not backpropagate through an
/// evaluation pass that follows it.
/// Is `call` in a lambda that other code runs (`run_model=lambda: model(x)` given to a
/// function, or bound to a name and handed on)? Its gradient context and what happens to
/// its result are that code's. A lambda given to `map`, `filter`, `sorted`, `min` or `max`
/// runs here.
fn runs_elsewhere_in_a_lambda<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let mut node = call;
    let lambda = loop {
        let Some(parent) = model.parent(node) else { return false };
        match parent.kind_name() {
            "lambda" => break parent,
            "function_definition" | "class_definition" | "module" => return false,
            _ => node = parent,
        }
    };
    let Some(mut holder) = model.parent(lambda) else { return false };
    if holder.kind_name() == "keyword_argument" {
        let Some(args) = model.parent(holder) else { return false };
        holder = args;
    }
    match holder.kind_name() {
        "argument_list" => {
            let callee = model.parent(holder).and_then(|c| c.field("function")).map(|f| model.text(f)).unwrap_or("");
            !matches!(callee, "map" | "filter" | "sorted" | "min" | "max")
        }
        "assignment" => true,
        _ => false,
    }
}

/// A frozen network (every parameter without `requires_grad`, as PEFT loads one for
/// inference) given no tensor with history records no graph: nothing to save.
fn frozen_and_given_no_history<'t>(model: &SemanticModel<'t>, call: Node<'t>, module: Node<'t>) -> bool {
    model.is_frozen_network(module) && !model.gives_history(call)
}

fn needs_gradients<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let after = call.end_byte();
    let back_to_training = |until: usize| !model.calls_named_in("train", after..until).is_empty();
    model.backward_calls_in_scope_of(call).iter().any(|b| {
        // `model(x).sum().backward()`: the backward's own expression holds the forward.
        (b.start_byte() <= call.start_byte() && call.end_byte() <= b.end_byte())
            || (b.start_byte() >= after && !back_to_training(b.start_byte()))
    })
}

fn no_grad_fix<'t>(model: &SemanticModel<'t>, call: Node<'t>, reason: &EvaluationReason<'t>) -> Option<Fix> {
    let source = model.source();
    let (torch, import) = torch_name(model);
    let function = model.enclosing_function(call);
    let returns_values = function.map(|f| returns_values(f.node)).unwrap_or(false);
    let mut edits: Vec<Edit> = import.into_iter().collect();
    let message;
    match (reason, function) {
        (
            EvaluationReason::EvalFunction(name)
            | EvaluationReason::NeverBackpropagated(Some(name))
            | EvaluationReason::CalledFromEvaluation { function: name, .. },
            Some(f),
        ) => {
            let at = line_start(source, f.outer.start_byte());
            let indent = line_indent(source, f.outer.start_byte());
            edits.push(Edit::insert(at, format!("{indent}@{torch}.no_grad()\n")));
            message = format!("Decorate `{name}` with `@{torch}.no_grad()`");
        }
        _ => {
            // Wrap the evaluation loop, else the outermost loop in the scope around the
            // call, else the statement itself.
            let target = match reason {
                EvaluationReason::EvalLoop(node, _) => *node,
                // Only the preview: the loop around it trains.
                EvaluationReason::PeriodicPreview(_) => statement_of(model, call),
                _ => model
                    .enclosing_loops(call)
                    .last()
                    .map(|l| l.node)
                    .unwrap_or_else(|| statement_of(model, call)),
            };
            if has_multiline_string(target) || !crate::rules::owns_its_lines(source, target) {
                return None;
            }
            let unit = indent_unit(source);
            let indent = line_indent(source, target.start_byte());
            let at = line_start(source, target.start_byte());
            edits.push(Edit::insert(at, format!("{indent}with {torch}.no_grad():\n")));
            // Both edits insert at `at`: merge them so the fix stays non-overlapping.
            let mut body = indent_lines(source, target, &unit);
            if let Some(first) = body.first_mut() {
                if first.range.start == at {
                    let wrap = edits.pop().expect("pushed above");
                    first.content = format!("{}{}", wrap.content, first.content);
                }
            }
            edits.extend(body);
            message = format!("Wrap in `with {torch}.no_grad():`");
        }
    }
    let fix = if returns_values { Fix::unsafe_(message, edits) } else { Fix::safe(message, edits) };
    Some(fix)
}

/// `with torch.set_grad_enabled(train):` around the outermost loop of the function around
/// `call` (else its statement): gradients follow the flag.
fn grad_follows_flag_fix<'t>(model: &SemanticModel<'t>, call: Node<'t>, enabled: &str) -> Option<Fix> {
    let source = model.source();
    let (torch, import) = torch_name(model);
    let mut edits: Vec<Edit> = import.into_iter().collect();
    let target = model.enclosing_loops(call).last().map(|l| l.node).unwrap_or_else(|| statement_of(model, call));
    if has_multiline_string(target) || !crate::rules::owns_its_lines(source, target) {
        return None;
    }
    let unit = indent_unit(source);
    let indent = line_indent(source, target.start_byte());
    let at = line_start(source, target.start_byte());
    let mut body = indent_lines(source, target, &unit);
    let wrap = format!("{indent}with {torch}.set_grad_enabled({enabled}):\n");
    match body.first_mut() {
        // Both insert at `at`: one edit, so the fix stays non-overlapping.
        Some(first) if first.range.start == at => first.content = format!("{wrap}{}", first.content),
        _ => edits.push(Edit::insert(at, wrap)),
    }
    edits.extend(body);
    Some(Fix::unsafe_(format!("Wrap in `with {torch}.set_grad_enabled({enabled}):`"), edits))
}

/// Plain functions of this module (not methods, not named for evaluation) called only
/// from evaluation code: every use of the function is a call of it, in a function named
/// for evaluation or a loop over validation data, with no backward pass after it there;
/// and no other module of the project calls it. Each with the name of a caller (or of the
/// loop's data).
struct EvaluationHelpers<'t>(Vec<(Node<'t>, String)>);

impl<'t> EvaluationHelpers<'t> {
    /// `call` is in one of the functions.
    fn reason(&self, model: &SemanticModel<'t>, call: Node<'t>) -> Option<EvaluationReason<'t>> {
        let f = model.enclosing_function(call)?;
        let (_, caller) = self.0.iter().find(|(def, _)| def.id() == f.node.id())?;
        Some(EvaluationReason::CalledFromEvaluation { function: f.name.clone(), caller: caller.clone() })
    }

    fn of(model: &SemanticModel<'t>, names: &EvaluationNames) -> EvaluationHelpers<'t> {
        let mut found = Vec::new();
        for f in model.functions() {
            if f.class.is_some() || matches!(f.name.as_str(), "forward" | "__call__") || function_name_says_eval(&f.name) {
                continue;
            }
            if let Some(caller) = only_caller_is_evaluation(model, f, names) {
                found.push((f.node, caller));
            }
        }
        EvaluationHelpers(found)
    }
}

fn only_caller_is_evaluation<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, names: &EvaluationNames) -> Option<String> {
    let own_name = f.node.field("name")?;
    let mut caller = None;
    for ident in model.identifiers_named_in(&f.name, 0..model.source().len()) {
        if ident.id() == own_name.id() || model.binding_at(&f.name, *ident).is_none_or(|b| b.statement.id() != f.node.id()) {
            continue;
        }
        // Used otherwise (handed on as a value, aliased): it may run anywhere.
        let site = model.parent(*ident).filter(|c| c.kind_name() == "call" && c.field("function").is_some_and(|g| g.id() == ident.id()))?;
        // In a lambda that other code runs: its context is that code's.
        if runs_elsewhere_in_a_lambda(model, site) {
            return None;
        }
        let in_eval_loop = model.enclosing_loops(site).iter().find(|l| l.over_eval_data).and_then(|l| l.node.field("right")).map(|r| format!("a loop over `{}`", snippet(model, r)));
        let by_name = model.enclosing_function(site).filter(|g| is_evaluation_function(model, g, names)).map(|g| format!("`{}()`", g.name));
        let evaluation = by_name.or(in_eval_loop)?;
        if needs_gradients(model, site) {
            return None;
        }
        caller.get_or_insert(evaluation);
    }
    let caller = caller?;
    (!model.called_from_other_modules(f.node)).then_some(caller)
}

/// The functions of this module whose every backward pass runs under one test of a
/// parameter (`if train:`, `if optimizer is not None:`, `if mode == "train":`): a loop
/// shared by training and evaluation, where the flag picks which.
struct TrainingFlags<'a, 't>(Vec<(&'a FunctionInfo<'t>, TrainingFlag<'t>)>);

struct TrainingFlag<'t> {
    /// The parameter (its node in the parameter list).
    parameter: Node<'t>,
    name: &'t str,
    /// The `if` condition, as written (`is_train`).
    guard: &'t str,
    /// The test of the parameter itself (`optimizer is not None` after `is_train =
    /// optimizer is not None`): what `torch.set_grad_enabled(...)` can be given anywhere
    /// in the function.
    tested: &'t str,
    test: FlagTest<'t>,
}

enum FlagTest<'t> {
    /// `if train:`
    Truthy,
    /// `if optimizer is not None:`
    NotNone,
    /// `if mode == "train":` (the literal)
    Equals(Node<'t>),
}

impl<'a, 't> TrainingFlags<'a, 't> {
    fn of(model: &'a SemanticModel<'t>) -> TrainingFlags<'a, 't> {
        let mut found = Vec::new();
        for f in model.functions() {
            if f.class.as_deref().is_some_and(|c| model.is_module_class(c)) {
                continue;
            }
            if let Some(flag) = training_flag(model, f) {
                found.push((f, flag));
            }
        }
        TrainingFlags(found)
    }
}

/// The parameter test that guards every backward pass of `f` (at least one).
fn training_flag<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>) -> Option<TrainingFlag<'t>> {
    let body = f.node.field("body")?;
    let backwards = model.backward_calls_in_scope_of(body);
    let mut flag: Option<TrainingFlag<'t>> = None;
    for backward in backwards {
        let guard = guarding_test(model, f, *backward)?;
        match &flag {
            Some(seen) if seen.parameter.id() != guard.parameter.id() || seen.guard != guard.guard => return None,
            Some(_) => {}
            None => flag = Some(guard),
        }
    }
    flag
}

/// The innermost `if` around `node` in `f` whose condition tests a parameter of `f`, with
/// `node` in its consequence.
fn guarding_test<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, node: Node<'t>) -> Option<TrainingFlag<'t>> {
    let mut current = node;
    while let Some(parent) = model.parent(current) {
        if parent.id() == f.node.id() {
            return None;
        }
        if parent.kind_name() == "if_statement" && parent.field("consequence").is_some_and(|c| c.id() == current.id()) {
            if let Some(flag) = parent.field("condition").and_then(|c| flag_test(model, f, c)) {
                return Some(flag);
            }
        }
        current = parent;
    }
    None
}

/// `train`, `optimizer is not None`, `mode == "train"` on a parameter of `f` not bound again,
/// or a name bound once in `f` to such a test (`is_train = optimizer is not None`).
fn flag_test<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, condition: Node<'t>) -> Option<TrainingFlag<'t>> {
    let condition = unparenthesize(condition);
    parameter_test(model, f, condition).or_else(|| named_flag_test(model, f, condition))
}

/// A test of a parameter of `f` itself: `train`, `optimizer is not None`, `mode == "train"`.
fn parameter_test<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, condition: Node<'t>) -> Option<TrainingFlag<'t>> {
    let (ident, test) = match condition.kind_name() {
        "identifier" => (condition, FlagTest::Truthy),
        "comparison_operator" => {
            let left = condition.named_child(0).filter(|l| l.kind_name() == "identifier")?;
            let right = condition.named_child(1)?;
            if condition.named_child_count() != 2 {
                return None;
            }
            let operator = model.text(condition)[left.end_byte() - condition.start_byte()..right.start_byte() - condition.start_byte()].split_whitespace().collect::<Vec<_>>().join(" ");
            match (operator.as_str(), right.kind_name()) {
                ("is not", "none") => (left, FlagTest::NotNone),
                ("==", "string") => (left, FlagTest::Equals(right)),
                _ => return None,
            }
        }
        _ => return None,
    };
    let name = model.text(ident);
    let binding = model.binding_at(name, ident)?;
    if binding.kind != BindingKind::Parameter || !memlint_python::contains(f.node, binding.statement) {
        return None;
    }
    let text = model.text(condition);
    Some(TrainingFlag { parameter: binding.statement, name, guard: text, tested: text, test })
}

/// `is_train` where `is_train = <a flag test of a parameter>` is its only binding in `f`.
fn named_flag_test<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, condition: Node<'t>) -> Option<TrainingFlag<'t>> {
    if condition.kind_name() != "identifier" {
        return None;
    }
    let name = model.text(condition);
    let [binding] = model.bindings_in_scope(name, condition) else { return None };
    let (BindingKind::Assign, Some(value)) = (binding.kind, binding.value) else { return None };
    if !memlint_python::contains(f.node, binding.statement) {
        return None;
    }
    let flag = parameter_test(model, f, unparenthesize(value))?;
    Some(TrainingFlag { guard: model.text(condition), ..flag })
}

/// Is `call` in a function of `flags` (outside its flag's guard), which a call in this
/// module, itself run with gradients, calls with the flag off?
fn training_flag_off<'t>(model: &SemanticModel<'t>, flags: &TrainingFlags<'_, 't>, call: Node<'t>) -> Option<EvaluationReason<'t>> {
    let function = model.enclosing_function(call)?;
    let (_, flag) = flags.0.iter().find(|(f, _)| f.node.id() == function.node.id())?;
    if guarding_test(model, function, call).is_some_and(|g| g.parameter.id() == flag.parameter.id()) {
        return None;
    }
    let off = model.calls_named(&function.name).iter().copied().find(|c| {
        calls_function(model, function, *c) && flag_value(model, function, flag, *c) == Some(false) && model.grad_context(*c) == GradContext::Enabled
    })?;
    let line = model.source()[..off.start_byte()].matches('\n').count() + 1;
    let enabled = match flag.test {
        FlagTest::Truthy if default_of(flag.parameter).is_some_and(|d| matches!(d.kind_name(), "true" | "false")) => flag.name.to_owned(),
        FlagTest::Truthy => format!("bool({})", flag.name),
        FlagTest::NotNone | FlagTest::Equals(_) => flag.tested.to_owned(),
    };
    Some(EvaluationReason::TrainingFlagOff { function: function.name.clone(), guard: flag.guard.to_owned(), call: snippet(model, off), line, enabled })
}

/// Does `call` call `f`: `f(...)` resolving to it; for a method of class `C`,
/// `self.f(...)` in a method of `C` or `x.f(...)` where `x = C(...)`.
fn calls_function<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, call: Node<'t>) -> bool {
    let Some(callee) = call.field("function") else { return false };
    match (callee.kind_name(), &f.class) {
        ("identifier", None) => model.binding_at(model.text(callee), callee).is_some_and(|b| b.statement.id() == f.node.id()),
        ("attribute", Some(class)) => {
            let Some(receiver) = callee.field("object") else { return false };
            if model.text(receiver) == "self" {
                return model.enclosing_function(call).and_then(|g| g.class.as_deref()) == Some(class.as_str());
            }
            receiver.kind_name() == "identifier"
                && model
                    .binding_at(model.text(receiver), receiver)
                    .and_then(|b| b.value)
                    .map(unparenthesize)
                    .is_some_and(|v| v.kind_name() == "call" && v.field("function").is_some_and(|c| model.text(c) == class))
        }
        _ => false,
    }
}

/// Whether the flag is on in `call` (passed by keyword or position, or its default), when
/// a literal says so.
fn flag_value<'t>(model: &SemanticModel<'t>, f: &FunctionInfo<'t>, flag: &TrainingFlag<'t>, call: Node<'t>) -> Option<bool> {
    // `*args` / `**kwargs` may carry the flag.
    let arguments = call.field("arguments").filter(|a| a.kind_name() == "argument_list")?;
    if named_children(arguments).iter().any(|a| matches!(a.kind_name(), "list_splat" | "dictionary_splat")) {
        return None;
    }
    let parameters = named_children(f.node.field("parameters")?);
    let position = parameters.iter().position(|p| p.id() == flag.parameter.id() || memlint_python::contains(*p, flag.parameter))?;
    // `self` is not passed by `x.method(...)`.
    let skipped = usize::from(f.class.is_some());
    // Only plain parameters before it (no `*args` taking its position).
    if parameters[..position].iter().any(|p| memlint_python::parameter_name(*p).is_none()) {
        return None;
    }
    let value = model.argument_for(call, flag.name, position.checked_sub(skipped)).or_else(|| default_of(parameters[position]))?;
    // A literal, a constant name or an argparse default (`train=args.train`).
    let is_none = unparenthesize(value).kind_name() == "none";
    let constant = constant_value(model, value);
    match &flag.test {
        FlagTest::Truthy if is_none => Some(false),
        FlagTest::Truthy => match constant? {
            Constant::Bool(b) => Some(b),
            Constant::Int(i) => Some(i != 0),
            Constant::Float(f) => Some(f != 0.0),
            Constant::Str(s) => Some(!s.is_empty()),
        },
        FlagTest::NotNone => if is_none { Some(false) } else { constant.map(|_| true) },
        FlagTest::Equals(literal) => Some(constant? == constant_value(model, *literal)?),
    }
}

/// A parameter's default value.
fn default_of(parameter: Node<'_>) -> Option<Node<'_>> {
    matches!(parameter.kind_name(), "default_parameter" | "typed_default_parameter").then(|| parameter.field("value")).flatten()
}

/// The statement a node is part of (the child of a block or the module).
fn statement_of<'t>(model: &SemanticModel<'t>, node: Node<'t>) -> Node<'t> {
    let mut current = node;
    while let Some(parent) = model.parent(current) {
        if matches!(parent.kind_name(), "block" | "module") {
            return current;
        }
        current = parent;
    }
    current
}

/// Does a function return or yield a value (not counting nested functions)?
fn returns_values(function: Node<'_>) -> bool {
    let Some(body) = function.field("body") else { return false };
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        match n.kind_name() {
            "function_definition" | "class_definition" | "lambda" => continue,
            "return_statement" if n.named_child_count() > 0 => return true,
            "yield" => return true,
            _ => {
                let mut cursor = n.walk();
                stack.extend(n.named_children(&mut cursor));
            }
        }
    }
    false
}
