//! ## What it does
//! Checks for forward passes of a network, run with gradient tracking, whose output never
//! reaches a backward pass: evaluation, inference, sampling, previews, action selection
//! in a rollout, smoke tests. Outside `torch.no_grad()` / `torch.inference_mode()`, such a
//! pass builds a graph for a backward pass that never comes.
//!
//! It decides from facts, not names:
//! - **the callee is a network**: a value built from a `torch.nn.Module` subclass (local,
//!   of the project, `torch.nn`, torchvision / timm / transformers / `torch.hub`), returned
//!   by a function that builds one (a classmethod returning `cls(...)` too:
//!   `Net.from_config(cfg)`; a function of another module handed the class it builds:
//!   `build(Net, cfg)`), passed by the callers of a function (pytest passes a test the
//!   `@pytest.fixture` its parameter names), held in a list or
//!   dict of networks, assigned to `self.X` in its class hierarchy, or known by what is done with it
//!   (`x.eval()`, `x.parameters()`); a method of a module class that runs the forward pass
//!   (`self.decode(z)`, `policy.pi(x)`) counts too. A value memlint cannot trace to one of
//!   these is never taken for a network, whatever its name.
//! - **gradients are on there**: no `with torch.no_grad():` / `inference_mode()` /
//!   `set_grad_enabled(False)` around it (nor a context chosen at run time that may be
//!   one: `torch.enable_grad() if train else torch.no_grad()`, `ctx = torch.no_grad()`
//!   on one branch and `nullcontext()` on the other, a local function returning
//!   `enable_grad()` on one path and `no_grad()` on another, code written for both modes
//!   as `set_grad_enabled(train)` is), no such decorator on its function, not in a
//!   Lightning hook that runs under `no_grad` (validation, test and prediction steps and
//!   their epoch hooks), not in a function of the module only called from such code (nor,
//!   for a top-level function its module never calls, only from such code in the project's
//!   other modules), and not a network whose class runs `forward` under `@torch.no_grad()`.
//! - **its output reaches no backward pass**: the output is followed through the names,
//!   containers and expressions computed from it and the local functions it is handed to.
//!   It is reported when it is only read (printed, compared, converted to numbers or numpy,
//!   saved, sampled from), or returned to callers in this module that only read it. When
//!   its fate is out of sight (returned to no caller here, stored on an object, handed to
//!   code memlint does not see) it is reported only when the network is in evaluation mode
//!   there (`model.eval()` earlier in the function, no `.train()` in between, nor a
//!   `.train()` later in a loop around the call that the `.eval()` is outside of: the
//!   next iteration runs in training mode).
//!
//! A loop shared by training and evaluation is evaluation when it is run with its
//! training flag off: every backward pass of the function runs under one test of a
//! parameter (`if train:`, `if optimizer is not None:`, `if mode == "train":`, or a name
//! bound once to such a test, `is_train = optimizer is not None`) and a call in the
//! module, made with gradients on, passes a value that turns it off (a literal, a
//! constant, an argparse default: `run_epoch(model, val_loader, train=False)`), or leaves a
//! default that does. The forward passes outside that test are reported; the fix lets
//! gradients follow the flag (`with torch.set_grad_enabled(train):`).
//!
//! Also checks for the legacy guard `Variable(x, volatile=True)`, which has done nothing
//! since PyTorch 0.4.
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
//! The fix decorates the function with `@torch.no_grad()` when nothing in it
//! backpropagates, else wraps the loop (or the statement) holding the forward pass in
//! `with torch.no_grad():`, re-indenting it with the file's indentation, and adds `import
//! torch` when the module does not import it. The values computed are the same; only
//! autograd history is dropped. The fix is safe when the function returns nothing (or the
//! code is at module level); it is unsafe when the function returns or yields values,
//! because a caller elsewhere could backpropagate through them. It is not offered when
//! re-indenting would change a multi-line string.
//!
//! For a loop shared by training and evaluation, the fix wraps the function's outermost
//! loop in `with torch.set_grad_enabled(<flag>):`. It is always unsafe: with the flag on,
//! it turns gradients on even where a caller had turned them off.

use memlint_python::tree_sitter::Node;
use memlint_python::NodeExt;
use memlint_python::{contains, Fact, Fate, FlagOff, GradContext, SemanticModel};
use rustc_hash::FxHashMap as HashMap;

use crate::checker::Checker;
use crate::prefilter::Words;
use crate::rules::could_hold_a_model;
use crate::rules::{has_multiline_string, indent_lines, indent_unit, line_indent, line_start, snippet, torch_name};
use crate::{Diagnostic, Edit, Fix, Severity};

pub const SUMMARY: &str = "Forward pass in evaluation code without `torch.no_grad()`";
pub const CAPTURES: &[&str] = &["volatile_call"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// `Variable(volatile=True)`, or something that could be a network.
pub fn trigger(words: &Words<'_>) -> bool {
    words.contains("volatile") || could_hold_a_model(words)
}

const HELP: &str = "run evaluation under `with torch.no_grad():` (or `torch.inference_mode()`), or decorate the function with `@torch.no_grad()`";

/// How many levels of callers a returned output is followed through.
const CALLER_DEPTH: usize = 3;

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    // The query's pattern names `volatile` literally: without the word it cannot match.
    let mut volatile_calls: Vec<Node<'_>> = Vec::new();
    if model.source().contains("volatile") {
        let whole = 0..model.source().len();
        volatile_calls.extend(checker.matches_in(std::slice::from_ref(&whole)).iter().filter_map(|m| m.get("volatile_call")));
    }
    // Every call is a candidate forward pass: the calls the model indexed (the roots the
    // query runs at; see the query's comment), in source order, each judged as a forward
    // pass and then as a volatile `Variable`.
    let calls: Vec<Node<'_>> = model.indexed_nodes_of_kind("call").collect();
    // Whether each function is part of a forward, asked once per function: in a module's
    // `forward` no call is judged, so its callees' values are never worked out (in a file
    // of network definitions, most of its calls).
    let mut in_forward: HashMap<usize, bool> = HashMap::default();
    for call in calls {
        if model.field(call, "function").is_some_and(|f| f.is_named()) {
            let function = model.enclosing_function(call).map_or(0, |f| f.node.id());
            if !*in_forward.entry(function).or_insert_with(|| part_of_a_forward(model, call)) {
                check_forward_pass(checker, call);
            }
        }
        if volatile_calls.contains(&call) {
            check_volatile(checker, call);
        }
    }
}

/// Reports `call` when it is a forward pass in evaluation code.
fn check_forward_pass<'t>(checker: &mut Checker<'_, 't>, call: Node<'t>) {
    let model = checker.model;
    let Some(module) = model.forward_callee(call) else { return };
    if model.grad_context(call) != GradContext::Enabled
        || model.class_forward_disables_grad(call).is_some()
        || model.class_forward_trains(call).is_some()
        || runs_elsewhere_in_a_lambda(model, call)
    {
        return;
    }
    // A network without trainable parameters records a graph only of an input with
    // history; when that history comes from a forward pass of this function, that
    // forward pass is the one judged (`lsm(self.head(x))`).
    if (model.is_frozen_network(module) || model.holds_no_parameters(module).is_some() || model.frozen_before(module, call).is_some())
        && (!model.gives_history(call) || model.history_from_a_forward_here(call))
    {
        return;
    }
    let Some(reason) = evaluation_reason(model, call, module) else { return };
    // `enc.predict(x)`: a method of a module class that runs the forward pass. Its
    // forward passes are reported inside it when they are evaluation wherever it is
    // called (the fix then decorates the method); else here, where its caller only
    // reads what it returns.
    if method_reports_its_own_forwards(model, call) {
        return;
    }
    // Last, as it may read other modules: callers elsewhere all disable gradients.
    if model.grad_disabled_by_callers_elsewhere(call).is_some() {
        return;
    }
    report(checker, call, module, reason);
}

/// Why a forward pass counts as evaluation.
enum Reason<'t> {
    /// Its output is only read in its function.
    OnlyRead,
    /// Its output is returned to callers in this module that only read it: one of them.
    ReturnedToReaders(Node<'t>),
    /// Its fate is out of sight, and the network was put in evaluation mode here.
    AfterEval(Node<'t>),
    /// Its function backpropagates only under a flag, and a call turns the flag off.
    FlagOff(FlagOff),
}

impl<'t> Reason<'t> {
    fn describe(&self, model: &SemanticModel<'t>) -> String {
        match self {
            Reason::OnlyRead => "its output is only read, never backpropagated".to_owned(),
            Reason::ReturnedToReaders(caller) if caller.kind_name() == "function_definition" => {
                "it is returned to callers in other modules of the project that only read it".to_owned()
            }
            Reason::ReturnedToReaders(caller) => {
                let function = model.enclosing_function(*caller).map(|f| format!("in `{}()`", f.name)).unwrap_or_else(|| "at module level".to_owned());
                format!("it is returned to a caller that only reads it (line {}, {function})", model.line_of(*caller))
            }
            Reason::AfterEval(toggle) => format!("after `{}` (line {})", snippet(model, *toggle), model.line_of(*toggle)),
            Reason::FlagOff(off) => {
                format!("`{}()` backpropagates only `if {}:`, and `{}` on line {} calls it with that off", off.function, off.guard, off.call, off.line)
            }
        }
    }
}

fn evaluation_reason<'t>(model: &SemanticModel<'t>, call: Node<'t>, module: Node<'t>) -> Option<Reason<'t>> {
    // A module's `forward`, and its methods that `forward` runs: the training forward pass.
    // (`check` asks before the callee's value; a method's inner calls are asked here.)
    if part_of_a_forward(model, call) {
        return None;
    }
    match model.fate(call) {
        Fate::Backward(_) => model.training_flag_off(call).filter(|_| !model.in_training_branch(call)).map(Reason::FlagOff),
        Fate::Consumed => Some(Reason::OnlyRead),
        // The function the output leaves (the return may be in a caller the output was
        // handed to in a container).
        Fate::Returned(ret) => match callers_only_read(model, ret, CALLER_DEPTH) {
            Some(Some(caller)) => Some(Reason::ReturnedToReaders(caller)),
            Some(None) => None,
            None => after_eval(model, call, module).map(Reason::AfterEval),
        },
        Fate::Stored(_) | Fate::Handed(_) => after_eval(model, call, module).map(Reason::AfterEval),
    }
}

/// Is `call` in a module class's `forward` (or `__call__`), or in a method of the class
/// that `forward` calls, directly or through other methods?
fn part_of_a_forward<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let Some(function) = model.enclosing_function(call) else { return false };
    let Some(class) = function.class.clone() else { return false };
    // A class whose base memlint cannot see into (`mmcv.runner.BaseModule`) may be a module:
    // its `forward` may be a network's (only `forward`: a plain class's `__call__` is no
    // evidence of one).
    let known = model.is_module_class(&class);
    if !known && !model.may_be_module_class(&class) {
        return false;
    }
    let mut pending = vec![function.node];
    let mut seen = Vec::new();
    while let Some(def) = pending.pop() {
        if seen.contains(&def.id()) || seen.len() > 32 {
            continue;
        }
        seen.push(def.id());
        let Some(info) = model.function(def) else { continue };
        if info.name == "forward" || (known && info.name == "__call__") {
            return true;
        }
        for caller in model.calls_of_function(info) {
            if let Some(f) = model.enclosing_function(caller).filter(|f| f.class.as_deref() == Some(class.as_str())) {
                pending.push(f.node);
            }
        }
    }
    false
}

/// For an output returned by its function: `Some(Some(caller))` when the function has
/// callers (in this module, or in the project's other modules) and every caller only reads
/// the result, `Some(None)` when some caller backpropagates it or lets it out of sight,
/// `None` when no caller is known. Gives a local caller, else the function itself.
fn callers_only_read<'t>(model: &SemanticModel<'t>, node: Node<'t>, depth: usize) -> Option<Option<Node<'t>>> {
    let function = model.enclosing_function(node)?;
    if matches!(function.name.as_str(), "forward" | "__call__") {
        return None;
    }
    // This module's callers first: one that keeps the result decides without asking the
    // project, which reads other files.
    let callers = model.calls_of_function(function);
    for caller in &callers {
        match model.fate(*caller) {
            Fate::Consumed => {}
            Fate::Returned(ret) if depth > 0 => match callers_only_read(model, ret, depth - 1) {
                Some(Some(_)) => {}
                _ => return Some(None),
            },
            _ => return Some(None),
        }
    }
    let elsewhere = model.external_results_kept(function.node);
    if elsewhere.iter().any(|kept| *kept) {
        return Some(None);
    }
    if callers.is_empty() && elsewhere.is_empty() {
        return None;
    }
    Some(Some(callers.first().copied().unwrap_or(function.node)))
}

/// Is `call` a call of a method of a local module class (`enc.predict(x)`,
/// `self.decode(z)`) whose own forward passes record no graph, or are reported inside it?
fn method_reports_its_own_forwards<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let Some(callee) = model.field(call, "function").filter(|c| c.kind_name() == "attribute") else { return false };
    if model.field(callee, "attribute").is_some_and(|a| model.text(a) == "forward") {
        return false;
    }
    let Some(def) = model.local_callee(call) else {
        // A method of a class of another module: its module reports the forward passes in
        // it when every call of it in the project only reads what it returns.
        let (Some(object), Some(method)) = (model.field(callee, "object"), model.field(callee, "attribute")) else { return false };
        return model.project_method_runs_forward(object, model.text(method)) && model.project_method_results_only_read(object, model.text(method));
    };
    if model.function(def).and_then(|f| f.class.clone()).is_none_or(|c| !model.is_module_class(&c)) {
        return false;
    }
    let Some(body) = model.field(def, "body") else { return false };
    let recording: Vec<(Node<'t>, Node<'t>)> = model
        .calls_in(body.byte_range())
        .iter()
        .filter(|inner| model.enclosing_function(**inner).map(|f| f.node.id()) == Some(def.id()))
        .filter(|inner| model.grad_context(**inner) == GradContext::Enabled)
        .filter_map(|inner| Some((*inner, model.forward_callee(*inner)?)))
        .collect();
    // No forward pass in it records a graph (the method runs under `no_grad`), or one that
    // does is reported there.
    recording.is_empty() || recording.iter().any(|(inner, m)| evaluation_reason(model, *inner, *m).is_some())
}

/// `model.eval()` earlier in the same function on the network called (or the object it
/// belongs to), with no `model.train()` in between, nor one later in a loop around the
/// call that the `.eval()` is not in (the next iteration runs in training mode), and no
/// backward pass after the call in the function (adversarial examples and saliency maps
/// need gradients after `.eval()`).
fn after_eval<'t>(model: &SemanticModel<'t>, call: Node<'t>, module: Node<'t>) -> Option<Node<'t>> {
    let function = model.enclosing_function(call);
    let scope_start = function.map(|f| f.node.start_byte()).unwrap_or(0);
    let mut before = mode_toggles(model, call, module, scope_start..call.start_byte());
    before.sort_by_key(|(toggle, _)| toggle.start_byte());
    let (state, true) = before.pop()? else { return None };
    let back_to_training_in_loop = model
        .enclosing_loops(call)
        .iter()
        .filter(|l| !contains(l.node, state))
        .any(|l| mode_toggles(model, call, module, l.node.byte_range()).iter().any(|(_, eval)| !eval));
    if back_to_training_in_loop {
        return None;
    }
    (!needs_gradients(model, call)).then_some(state)
}

/// The calls in `range` of the function of `call` that switch the mode of the network
/// called (`module`) or of the object it belongs to: `.eval()` (true), `.train()` (false,
/// `.train(False)` true).
fn mode_toggles<'t>(model: &SemanticModel<'t>, call: Node<'t>, module: Node<'t>, range: std::ops::Range<usize>) -> Vec<(Node<'t>, bool)> {
    let scope = model.enclosing_function(call).map(|f| f.node.id());
    let module_text = model.text(module);
    let mut toggles = Vec::new();
    for (method, is_eval) in [("eval", true), ("train", false)] {
        for toggle in model.calls_named_in(method, range.clone()) {
            if model.enclosing_function(*toggle).map(|f| f.node.id()) != scope {
                continue;
            }
            let Some(object) = toggle.field("function").and_then(|f| f.field("object")) else { continue };
            let object_text = model.text(object);
            if module_text != object_text && !module_text.starts_with(&format!("{object_text}.")) {
                continue;
            }
            let arg = toggle.field("arguments").and_then(|a| a.named_child(0)).map(|a| model.text(a));
            toggles.push((*toggle, is_eval || arg == Some("False")));
        }
    }
    toggles
}

/// A backward pass after the call in its scope with no `.train()` in between.
fn needs_gradients<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> bool {
    let after = call.end_byte();
    let back_to_training = |until: usize| !model.calls_named_in("train", after..until).is_empty();
    model.backward_calls_in_scope_of(call).iter().any(|b| b.start_byte() >= after && !back_to_training(b.start_byte()))
}

fn report<'t>(checker: &mut Checker<'_, 't>, call: Node<'t>, module: Node<'t>, reason: Reason<'t>) {
    let model = checker.model;
    let message = format!(
        "forward pass `{}` runs with gradient tracking but {}: autograd keeps every layer's activations for a backward pass that never comes",
        snippet(model, call),
        reason.describe(model),
    );
    let (fix, help) = match &reason {
        Reason::FlagOff(off) => (
            grad_follows_flag_fix(model, call, &off.enabled),
            format!("let gradients follow the flag with `with torch.set_grad_enabled({}):`, or make the evaluation call under `with torch.no_grad():`", off.enabled),
        ),
        _ => (no_grad_fix(model, call), HELP.to_owned()),
    };
    let mut evidence = model.explain_value(module);
    evidence.push(grad_fact(model, call));
    evidence.push(Fact::at(
        match &reason {
            Reason::OnlyRead => format!("the output of `{}` reaches no backward pass and nothing with its history leaves the function", snippet(model, call)),
            other => other.describe(model),
        },
        call,
    ));
    checker.report(
        Diagnostic::new(checker.rule, call.byte_range(), message)
            .with_help(help)
            .with_severity(Severity::Warning)
            .with_fix(fix)
            .with_evidence(evidence),
    );
}

/// The gradient context, as a fact.
fn grad_fact<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> Fact {
    let place = match model.enclosing_function(call) {
        Some(f) => format!("in `{}()`", f.name),
        None => "at module level".to_owned(),
    };
    Fact::at(format!("gradients are on {place}: no `torch.no_grad()` around the call, on the function, or in every caller"), call)
}

fn check_volatile<'t>(checker: &mut Checker<'_, 't>, call: Node<'t>) {
    let model = checker.model;
    // `Variable` under any local name (`from torch.autograd import Variable as V`).
    if model.call_resolves_to(call, &["torch.autograd.Variable", "torch.autograd.variable.Variable"]).is_none() {
        return;
    }
    // `volatile=True` on the targets of a training step is not an evaluation guard.
    let in_training_loop = model.enclosing_loops(call).first().map(|l| l.node.field("body").map(|b| model.trains_in(b)).unwrap_or(false)).unwrap_or(false);
    if !model.grad_context(call).is_disabled() && !in_training_loop {
        checker.report(
            Diagnostic::new(checker.rule, call.byte_range(), "`volatile=True` has had no effect since PyTorch 0.4: this code still records autograd history and keeps every activation")
                .with_help(HELP)
                .with_evidence(vec![Fact::at("`Variable(..., volatile=True)` is ignored by PyTorch 0.4 and later", call), grad_fact(model, call)]),
        );
    }
}

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
            let callee = model.parent(holder).and_then(|c| model.field(c, "function")).map(|f| model.text(f)).unwrap_or("");
            !matches!(callee, "map" | "filter" | "sorted" | "min" | "max")
        }
        "assignment" => true,
        _ => false,
    }
}

/// Decorate the function when nothing in it backpropagates; else wrap the outermost loop
/// around the call that does not train (or the statement).
fn no_grad_fix<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> Option<Fix> {
    let source = model.source();
    let (torch, import) = torch_name(model);
    let function = model.enclosing_function(call);
    let returns_values = function.map(|f| returns_values(model, f.node)).unwrap_or(false);
    let mut edits: Vec<Edit> = import.into_iter().collect();
    let trains = |node: Node<'t>| model.field(node, "body").is_some_and(|b| model.trains_in(b));
    let message = match function {
        Some(f) if !trains(f.node) && !matches!(f.name.as_str(), "forward" | "__call__") => {
            let at = line_start(source, f.outer.start_byte());
            let indent = line_indent(source, f.outer.start_byte());
            edits.push(Edit::insert(at, format!("{indent}@{torch}.no_grad()\n")));
            format!("Decorate `{}` with `@{torch}.no_grad()`", f.name)
        }
        _ => {
            let target = model
                .enclosing_loops(call)
                .into_iter()
                .take_while(|l| !trains(l.node))
                .last()
                .map(|l| l.node)
                .unwrap_or_else(|| statement_of(model, call));
            if has_multiline_string(target) || !crate::rules::owns_its_lines(source, target) {
                return None;
            }
            let unit = indent_unit(source, model.root());
            let indent = line_indent(source, target.start_byte());
            let at = line_start(source, target.start_byte());
            let wrap = format!("{indent}with {torch}.no_grad():\n");
            let mut body = indent_lines(source, target, &unit);
            match body.first_mut() {
                // Both insert at `at`: one edit, so the fix stays non-overlapping.
                Some(first) if first.range.start == at => first.content = format!("{wrap}{}", first.content),
                _ => edits.push(Edit::insert(at, wrap)),
            }
            edits.extend(body);
            format!("Wrap in `with {torch}.no_grad():`")
        }
    };
    Some(if returns_values { Fix::unsafe_(message, edits) } else { Fix::safe(message, edits) })
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
    let unit = indent_unit(source, model.root());
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
fn returns_values<'t>(model: &SemanticModel<'t>, function: Node<'t>) -> bool {
    let Some(body) = model.field(function, "body") else { return false };
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        match n.kind_name() {
            "function_definition" | "class_definition" | "lambda" => continue,
            "return_statement" if n.named_child_count() > 0 => return true,
            "yield" => return true,
            _ => {
                stack.extend(model.named_children(n));
            }
        }
    }
    false
}
