//! Where autograd history goes: an analysis beside the semantic model (as ruff keeps its
//! domain analyses beside its model), built only from the model's public facts (values,
//! bindings, the index of identifiers, backward calls).
//!
//! Two questions, both about a forward pass whose output may or may not be needed for a
//! backward pass:
//! - [`HistoryFlow::scope_keeps_history`]: does a function (or the module body) hand a
//!   tensor with autograd history to anything that outlives it or could backpropagate it
//!   — return or yield it, store it on an object, append it to a container, pass it to a
//!   function memlint cannot see into — or backpropagate anything itself?
//! - [`HistoryFlow::result_reaches_backward`]: does the value of one forward call reach a
//!   `backward()` (or leave the function) through the names it is assigned to?
//!
//! Each scope is decided once (memoized); a result is followed through the uses of the
//! names it flows into, looked up in the model's identifier index, so the cost is the
//! number of those uses, not the size of the function.

use std::cell::RefCell;

use rustc_hash::FxHashMap as HashMap;
use tree_sitter::Node;

use crate::semantic::{named_children, unparenthesize, SemanticModel, ValueKind};
use crate::NodeExt;

/// Library prefixes whose functions only read a tensor (show, save, convert it): passing a
/// tensor with history to them keeps nothing.
const READING_LIBRARIES: &[&str] = &[
    "torch.", "torchvision.", "numpy.", "np.", "cv2.", "PIL.", "matplotlib.", "scipy.", "imageio.", "skimage.",
    "math.", "os.", "json.", "logging.", "pickle.", "wandb.", "tensorboardX.", "time.", "random.", "sys.",
];

/// Builtins and methods that read their arguments (print, log, save, convert).
const READING_CALLS: &[&str] = &[
    "print", "len", "float", "int", "str", "repr", "format", "isinstance", "round", "bool", "type", "range",
    "enumerate", "zip", "min", "max", "sum", "abs", "sorted", "list", "tuple", "dict", "set", "getattr",
    "add_image", "add_images", "add_scalar", "add_scalars", "add_histogram", "add_figure", "add_video",
    "add_audio", "add_text", "log", "info", "debug", "warning", "imsave", "imwrite", "imshow", "show",
    "save_image", "make_grid", "write", "display", "plot", "savefig", "format_map", "join",
];

/// First words of functions that show, save or log what they are given (`save_img_results`,
/// `plot_samples`): names are the evidence where memlint cannot see the function.
const READING_VERBS: &[&str] = &["save", "show", "plot", "log", "print", "visualize", "visualise", "vis", "draw", "write", "display", "imsave", "dump"];

fn reads_by_name(name: &str) -> bool {
    crate::lexicon::name_words(name).first().map(|w| READING_VERBS.contains(&w.as_str())).unwrap_or(false)
}

/// Methods that store their argument in the object they are called on.
const STORING_METHODS: &[&str] = &[
    "append", "extend", "insert", "put", "put_data", "push", "add", "update", "store", "record", "setdefault",
    "appendleft", "put_nowait", "register_buffer",
];

/// Memoized answers about the flow of autograd history in one module.
pub struct HistoryFlow<'m, 't> {
    model: &'m SemanticModel<'t>,
    /// By function node id (0 for the module body).
    scopes: RefCell<HashMap<usize, bool>>,
    /// Answers callers decide once per (question, name).
    by_name: RefCell<HashMap<(&'static str, String), bool>>,
}

impl<'m, 't> HistoryFlow<'m, 't> {
    pub fn new(model: &'m SemanticModel<'t>) -> Self {
        HistoryFlow { model, scopes: RefCell::new(HashMap::default()), by_name: RefCell::new(HashMap::default()) }
    }

    /// A memo for callers' per-name questions (`question`, `name`), so that a file of many
    /// same-named functions is decided once per name.
    pub fn memo_by_name(&self, question: &'static str, name: &str, decide: impl FnOnce() -> bool) -> bool {
        let key = (question, name.to_owned());
        if let Some(known) = self.by_name.borrow().get(&key) {
            return *known;
        }
        let answer = decide();
        self.by_name.borrow_mut().insert(key, answer);
        answer
    }

    /// Does the scope `node` runs in (its function, or the module body) backpropagate, or
    /// let a tensor with history escape it (return, yield, store on an object or in a
    /// container, pass to a function or method memlint cannot see into)? `false` means
    /// every forward pass there builds a graph that nothing can use.
    pub fn scope_keeps_history(&self, node: Node<'t>) -> bool {
        let model = self.model;
        let function = model.enclosing_function(node).map(|f| f.node);
        let id = function.map(|f| f.id()).unwrap_or(0);
        if let Some(known) = self.scopes.borrow().get(&id) {
            return *known;
        }
        let answer = self.compute_scope_keeps_history(function);
        self.scopes.borrow_mut().insert(id, answer);
        answer
    }

    fn compute_scope_keeps_history(&self, function: Option<Node<'t>>) -> bool {
        let model = self.model;
        let range = function.map(|f| f.byte_range()).unwrap_or(0..model.source().len());
        let in_scope = |n: Node<'t>| model.enclosing_function(n).map(|f| f.node.id()) == function.map(|f| f.id());
        let anchor = function.and_then(|f| f.field("body")).unwrap_or(model.root());
        if !model.backward_calls_in_scope_of(anchor).is_empty() {
            return true;
        }
        if model.trains_in(anchor) {
            return true;
        }
        let calls = model.calls();
        let from = calls.partition_point(|c| c.start_byte() < range.start);
        let to = calls.partition_point(|c| c.start_byte() < range.end);
        for call in &calls[from..to.max(from)] {
            if !in_scope(*call) {
                continue;
            }
            if self.call_keeps_argument_history(*call) {
                return true;
            }
        }
        // Returns, yields and stores: walk the scope's statements (once per scope).
        let mut stack = vec![anchor];
        while let Some(n) = stack.pop() {
            match n.kind_name() {
                "function_definition" | "class_definition" | "lambda" if n.id() != anchor.id() => continue,
                "return_statement" | "yield" => {
                    if let Some(value) = n.named_child(0) {
                        if self.carries_history(value) {
                            return true;
                        }
                    }
                }
                "assignment" | "augmented_assignment" => {
                    // `out[:, 1:5] /= scale` edits a local tensor in place; `self.x = out`,
                    // `results["out"] = out` keep it.
                    let stores = n
                        .field("left")
                        .map(|l| match l.kind_name() {
                            "attribute" => true,
                            "subscript" => !l
                                .field("value")
                                .map(|v| matches!(self.model.value_kind(v), ValueKind::GradTensor | ValueKind::PlainTensor))
                                .unwrap_or(false),
                            _ => false,
                        })
                        .unwrap_or(false);
                    // A global or an outer name assigned in a function also outlives it;
                    // only attribute and item stores are looked at (locals die here).
                    if stores && n.field("right").map(|r| self.carries_history(r)).unwrap_or(false) {
                        return true;
                    }
                }
                _ => {}
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
        false
    }

    /// Does the function `def` return or yield a tensor with history (`return model(x),
    /// noise`)? Its caller may backpropagate it.
    pub fn function_returns_history(&self, def: Node<'t>) -> bool {
        let Some(body) = def.field("body") else { return false };
        let mut stack = vec![body];
        while let Some(n) = stack.pop() {
            match n.kind_name() {
                "function_definition" | "class_definition" | "lambda" => continue,
                "return_statement" | "yield" => {
                    if n.named_child(0).map(|v| self.carries_history(v)).unwrap_or(false) {
                        return true;
                    }
                }
                _ => {}
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
        false
    }

    /// Does `expr` hold a tensor with history, or a container or call result built from one
    /// (`(out, h)`, `{"logits": out}`)?
    fn carries_history(&self, expr: Node<'t>) -> bool {
        let expr = unparenthesize(expr);
        match expr.kind_name() {
            "tuple" | "list" | "expression_list" | "set" => named_children(expr).into_iter().any(|e| self.carries_history(e)),
            "dictionary" => named_children(expr).into_iter().filter_map(|p| p.field("value")).any(|e| self.carries_history(e)),
            "keyword_argument" => expr.field("value").map(|v| self.carries_history(v)).unwrap_or(false),
            "list_splat" | "dictionary_splat" => expr.named_child(0).map(|v| self.carries_history(v)).unwrap_or(false),
            "list_comprehension" | "generator_expression" => expr.field("body").map(|b| self.carries_history(b)).unwrap_or(false),
            _ => self.model.value_kind(expr) == ValueKind::GradTensor,
        }
    }

    /// Does `call` hand a tensor with history to something that may keep or
    /// backpropagate it: a storing method (`xs.append(out)`), a function defined here or
    /// in the project, an unknown object's method? Forward passes, tensor methods and the
    /// reading functions of libraries (`save_image`, `np.asarray`, `print`) do not.
    fn call_keeps_argument_history(&self, call: Node<'t>) -> bool {
        let model = self.model;
        let Some(args) = call.field("arguments") else { return false };
        let Some(callee) = call.field("function") else { return false };
        if model.forward_callee(call).is_some() {
            return false;
        }
        let last = match callee.kind_name() {
            "identifier" => model.text(callee),
            "attribute" => callee.field("attribute").map(|a| model.text(a)).unwrap_or(""),
            _ => "",
        };
        if !STORING_METHODS.contains(&last) {
            if READING_CALLS.contains(&last) || reads_by_name(last) {
                return false;
            }
            if let Some(q) = model.qualified_name(callee) {
                if READING_LIBRARIES.iter().any(|p| q.starts_with(p)) {
                    return false;
                }
            }
            // A method of a tensor (`out.argmax(1)`, `out.cpu()`): its value is tracked.
            if callee.kind_name() == "attribute" {
                let object_kind = callee.field("object").map(|o| model.value_kind(o)).unwrap_or(ValueKind::Unknown);
                if matches!(object_kind, ValueKind::GradTensor | ValueKind::PlainTensor | ValueKind::Number) {
                    return false;
                }
            }
        }
        named_children(args).into_iter().any(|a| self.carries_history(a))
    }

    /// Does the output of the forward call `call` reach a `backward()` in its scope, or
    /// leave it (returned, stored on an object, handed to a function that may keep it),
    /// through the names it is assigned to and the names computed from those?
    pub fn result_reaches_backward(&self, call: Node<'t>) -> bool {
        let model = self.model;
        let function = model.enclosing_function(call).map(|f| f.node);
        let scope_end = function.map(|f| f.end_byte()).unwrap_or(model.source().len());
        let Some(statement) = statement_of(model, call) else { return true };
        let mut pending: Vec<(&'t str, usize)> = Vec::new();
        if !self.statement_passes_on(statement, call, &mut pending) {
            return true;
        }
        // For each name, the earliest point its uses were followed from: a name assigned
        // twice is followed from its first assignment, whichever is popped first.
        let mut seen: HashMap<&'t str, usize> = HashMap::default();
        let mut budget = 256;
        while let Some((name, after)) = pending.pop() {
            if seen.get(name).is_some_and(|from| *from <= after) {
                continue;
            }
            seen.insert(name, after);
            for use_ in model.identifiers_named_in(name, after..scope_end) {
                budget -= 1;
                if budget == 0 {
                    return true;
                }
                if model.enclosing_function(*use_).map(|f| f.node.id()) != function.map(|f| f.id()) {
                    continue;
                }
                let Some(st) = statement_of(model, *use_) else { return true };
                if !self.statement_passes_on(st, *use_, &mut pending) {
                    return true;
                }
            }
        }
        false
    }

    /// Follows a value used at `at` within `statement`: adds the names it is assigned to
    /// `pending`; `false` when the statement backpropagates it, returns it, stores it on
    /// an object or hands it to a call that may keep it.
    fn statement_passes_on(&self, statement: Node<'t>, at: Node<'t>, pending: &mut Vec<(&'t str, usize)>) -> bool {
        let model = self.model;
        // Calls between the use and its statement: `loss(out).backward()`, `keep(out)`.
        let mut current = at;
        while let Some(parent) = model.parent(current) {
            if parent.id() == statement.id() {
                break;
            }
            if parent.kind_name() == "call" {
                if model.is_backward_call(parent) {
                    return false;
                }
                let is_argument = parent.field("arguments").map(|a| a.id() == current.id() || crate::semantic::contains(a, current)).unwrap_or(false);
                if is_argument && self.call_keeps_argument_history_of(parent) {
                    return false;
                }
                // `out.backward()` on the value itself.
                if let Some(callee) = parent.field("function") {
                    if callee.kind_name() == "attribute" && callee.field("attribute").map(|a| model.text(a) == "backward").unwrap_or(false) {
                        return false;
                    }
                }
            }
            current = parent;
        }
        match statement.kind_name() {
            "return_statement" => false,
            "expression_statement" => {
                let Some(inner) = statement.named_child(0) else { return true };
                match inner.kind_name() {
                    "assignment" | "augmented_assignment" => {
                        let Some(left) = inner.field("left") else { return true };
                        let mut targets = Vec::new();
                        collect_targets(left, &mut targets);
                        for t in targets {
                            match t.kind_name() {
                                "identifier" => pending.push((model.text(t), statement.end_byte())),
                                // Stored on an object or in a container: outlives the statement.
                                _ => return false,
                            }
                        }
                        true
                    }
                    "yield" => false,
                    _ => true,
                }
            }
            // Conditions, loop headers: read only (a `for` over it binds its target).
            "for_statement" => {
                if let Some(left) = statement.field("left") {
                    let mut targets = Vec::new();
                    collect_targets(left, &mut targets);
                    for t in targets {
                        if t.kind_name() == "identifier" {
                            pending.push((model.text(t), statement.start_byte()));
                        }
                    }
                }
                true
            }
            _ => true,
        }
    }

    /// [`Self::call_keeps_argument_history`] without the check that an argument has
    /// history (the value followed has it by construction).
    fn call_keeps_argument_history_of(&self, call: Node<'t>) -> bool {
        let model = self.model;
        let Some(callee) = call.field("function") else { return true };
        if model.forward_callee(call).is_some() {
            return false;
        }
        let last = match callee.kind_name() {
            "identifier" => model.text(callee),
            "attribute" => callee.field("attribute").map(|a| model.text(a)).unwrap_or(""),
            _ => "",
        };
        if STORING_METHODS.contains(&last) {
            return true;
        }
        if READING_CALLS.contains(&last) || reads_by_name(last) {
            return false;
        }
        if let Some(q) = model.qualified_name(callee) {
            return !READING_LIBRARIES.iter().any(|p| q.starts_with(p));
        }
        if callee.kind_name() == "attribute" {
            let object_kind = callee.field("object").map(|o| model.value_kind(o)).unwrap_or(ValueKind::Unknown);
            if matches!(object_kind, ValueKind::GradTensor | ValueKind::PlainTensor | ValueKind::Number | ValueKind::Loss) {
                return false;
            }
        }
        true
    }
}

/// The statement (a child of a block or the module) that contains `node`; a `for`/`if`/
/// `while` header counts as its statement.
fn statement_of<'t>(model: &SemanticModel<'t>, node: Node<'t>) -> Option<Node<'t>> {
    let mut current = node;
    while let Some(parent) = model.parent(current) {
        if matches!(parent.kind_name(), "block" | "module") {
            return Some(current);
        }
        if matches!(parent.kind_name(), "for_statement" | "while_statement" | "if_statement" | "elif_clause" | "with_statement")
            && parent.field("body").map(|b| b.id() != current.id()).unwrap_or(true)
            && !matches!(current.kind_name(), "block" | "else_clause" | "elif_clause")
        {
            return Some(parent);
        }
        current = parent;
    }
    None
}

fn collect_targets<'t>(target: Node<'t>, out: &mut Vec<Node<'t>>) {
    match target.kind_name() {
        "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple" | "list" | "parenthesized_expression" => {
            for c in named_children(target) {
                collect_targets(c, out);
            }
        }
        "list_splat_pattern" => {
            if let Some(inner) = target.named_child(0) {
                collect_targets(inner, out);
            }
        }
        _ => out.push(target),
    }
}
