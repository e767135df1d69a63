//! Where a value goes: the [`Fate`] of a tensor computed at one place (a forward pass's
//! output, a parameter of a function), followed through the names it is assigned to, the
//! containers it is put in, the expressions computed from it and the local functions it
//! is handed to, to a `backward()`, out of its function, or nowhere.
//!
//! A value is followed while it can carry autograd history or be part of a training step:
//! a tensor with history, or a tensor derived from one without it (`out.detach()`, an
//! `argmax`), which still belongs to a training step when it reaches a backward pass (a
//! detached target). Once it is a number, a numpy array or another framework's value it
//! can no longer reach a backward pass, and nothing about it escapes.
//!
//! Each answer is memoized in the model; the cost of one is the number of uses of the
//! names the value flows into (looked up in the identifier index), bounded by a budget
//! past which the value counts as handed to unseen code.

use crate::index::target_leaves;
use tree_sitter::Node;

use crate::library::{READING_CALLS, READING_LIBRARIES, STORING_METHODS};
use crate::semantic::*;
use crate::NodeExt;

/// How many uses one question may follow before giving up (the value then counts as
/// handed to code memlint does not follow).
const BUDGET: usize = 400;

/// Where a value goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate<'t> {
    /// It reaches this backward pass (`loss.backward()`, `torch.autograd.grad(...)`).
    Backward(Node<'t>),
    /// It leaves its function through this `return` or `yield`, still carrying history.
    Returned(Node<'t>),
    /// It is stored where it outlives its function (`self.x = out`, an attribute, a
    /// global's item): this statement.
    Stored(Node<'t>),
    /// It is handed, with history, to code memlint does not follow (an unknown function, a
    /// method of an unknown object): this call.
    Handed(Node<'t>),
    /// It is only read: never backpropagated, and nothing with history leaves.
    Consumed,
}

impl<'t> Fate<'t> {
    /// Two paths of one value: a backward pass anywhere decides; then any escape; else it is
    /// consumed.
    fn merge(self, other: Fate<'t>) -> Fate<'t> {
        match (self, other) {
            (Fate::Backward(_), _) => self,
            (_, Fate::Backward(_)) => other,
            (Fate::Consumed, _) => other,
            _ => self,
        }
    }

    pub fn is_backward(self) -> bool {
        matches!(self, Fate::Backward(_))
    }
}

/// What the value being followed can still carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carries {
    /// Autograd history.
    History,
    /// A tensor without history, derived from one: part of a step if it reaches a backward.
    Derived,
}

impl<'t> SemanticModel<'t> {
    /// The fate of the value of `expr` (a forward call's output) in the function it is in.
    pub fn fate(&self, expr: Node<'t>) -> Fate<'t> {
        if let Some(fate) = self.fates.borrow().get(&expr.id()) {
            return *fate;
        }
        let mut follower = Follower::new(self);
        follower.use_at(expr, Carries::History);
        let fate = follower.run();
        self.fates.borrow_mut().insert(expr.id(), fate);
        fate
    }

    /// The fate, inside the function `def`, of what its parameter `name` receives (a
    /// tensor with history): where a caller's value goes once handed to it. A cycle of calls
    /// answers [`Fate::Handed`].
    pub fn parameter_fate(&self, def: Node<'t>, name: &str) -> Fate<'t> {
        let key = (def.id(), name.to_owned());
        if let Some(fate) = self.parameter_fates.borrow().get(&key) {
            return *fate;
        }
        self.parameter_fates.borrow_mut().insert(key.clone(), Fate::Handed(def));
        let fate = match self.field(def, "body") {
            Some(body) => {
                let mut follower = Follower::new(self);
                let parameter = self.bindings_of(Some(def.id()), name).and_then(|bs| bs.iter().find(|b| b.kind == BindingKind::Parameter)).map(|b| b.statement);
                match parameter {
                    Some(p) => {
                        follower.follow(Bound { name: self.intern(name), binding: p.id(), from: body.start_byte(), loop_start: None, function: Some(def), carries: Carries::History });
                        follower.run()
                    }
                    None => Fate::Handed(def),
                }
            }
            None => Fate::Consumed,
        };
        self.parameter_fates.borrow_mut().insert(key, fate);
        fate
    }

    /// May the value of `expr` reach a backward pass: in its function, or, returned, in a
    /// caller (in this module, up to a few levels; a caller in another module that may keep
    /// the result counts)? What is stored or handed out of sight is taken not to.
    pub fn may_reach_backward(&self, expr: Node<'t>) -> bool {
        self.reaches_backward_within(expr, 3)
    }

    fn reaches_backward_within(&self, expr: Node<'t>, depth: usize) -> bool {
        match self.fate(expr) {
            Fate::Backward(_) => true,
            Fate::Returned(ret) if depth > 0 => {
                let Some(function) = self.enclosing_function(ret) else { return false };
                if self.external_results_kept(function.node).iter().any(|kept| *kept) {
                    return true;
                }
                self.calls_of_function(function).into_iter().any(|call| self.reaches_backward_within(call, depth - 1))
            }
            _ => false,
        }
    }

    /// The fate of the result of `call` (a call of a function whose return value carries
    /// history) in the caller's function.
    pub fn result_fate(&self, call: Node<'t>) -> Fate<'t> {
        self.fate(call)
    }

    /// Does the function `def` return or yield a tensor with history? Its callers may
    /// backpropagate it.
    pub fn function_returns_history(&self, def: Node<'t>) -> bool {
        self.returns.get(&def.id()).is_some_and(|returns| {
            returns.iter().filter_map(|r| r.named_child(0)).any(|v| self.carries_history(v))
        })
    }

    /// Does `expr` hold a tensor with history, or a container built from one
    /// (`(out, h)`, `{"logits": out}`)?
    pub(crate) fn carries_history(&self, expr: Node<'t>) -> bool {
        let expr = unparenthesize(expr);
        match expr.kind_name() {
            "tuple" | "list" | "expression_list" | "set" => self.named_children(expr).into_iter().any(|e| self.carries_history(e)),
            "dictionary" => self.named_children(expr).into_iter().filter_map(|p| self.field(p, "value")).any(|e| self.carries_history(e)),
            "keyword_argument" => self.field(expr, "value").map(|v| self.carries_history(v)).unwrap_or(false),
            "list_splat" | "dictionary_splat" => expr.named_child(0).map(|v| self.carries_history(v)).unwrap_or(false),
            "list_comprehension" | "generator_expression" => self.field(expr, "body").map(|b| self.carries_history(b)).unwrap_or(false),
            _ => self.value_kind(expr) == ValueKind::GradTensor,
        }
    }

    /// A name's text as it appears in the module (for the follower's worklist).
    fn intern(&self, name: &str) -> &'t str {
        self.identifiers_by_name.get_key_value(name).map(|(k, _)| *k).unwrap_or("")
    }
}

/// A name bound to the value followed: its uses are those that see this binding.
#[derive(Clone, Copy)]
struct Bound<'t> {
    name: &'t str,
    /// The statement (or parameter) of the binding the uses must see, by node id.
    binding: usize,
    /// Where its uses start.
    from: usize,
    /// When the binding is in a loop: the start of the loop's body (uses before the
    /// binding see it on the next iteration, unless the body binds the name before them).
    loop_start: Option<usize>,
    function: Option<Node<'t>>,
    carries: Carries,
}

/// One question: the uses still to follow, and what was found so far.
struct Follower<'m, 't> {
    model: &'m SemanticModel<'t>,
    pending: Vec<Bound<'t>>,
    /// The bindings already followed, by (name, binding).
    seen: rustc_hash::FxHashSet<(&'t str, usize)>,
    budget: usize,
    fate: Fate<'t>,
}

impl<'m, 't> Follower<'m, 't> {
    fn new(model: &'m SemanticModel<'t>) -> Self {
        Follower { model, pending: Vec::new(), seen: Default::default(), budget: BUDGET, fate: Fate::Consumed }
    }

    fn found(&mut self, fate: Fate<'t>) {
        self.fate = self.fate.merge(fate);
    }

    fn run(mut self) -> Fate<'t> {
        while let Some(bound) = self.pending.pop() {
            if self.fate.is_backward() {
                break;
            }
            let Bound { name, binding, from, loop_start, function, carries } = bound;
            if name.is_empty() || !self.seen.insert((name, binding)) {
                continue;
            }
            let model = self.model;
            let end = function.map(|f| f.end_byte()).unwrap_or(model.source().len());
            let start = loop_start.unwrap_or(from).min(from);
            for use_ in model.identifiers_named_in(name, start..end) {
                if self.budget == 0 {
                    self.found(Fate::Handed(*use_));
                    return self.fate;
                }
                self.budget -= 1;
                if model.enclosing_function(*use_).map(|f| f.node.id()) != function.map(|f| f.id()) {
                    continue;
                }
                if model.is_binding_target(*use_) {
                    continue;
                }
                // The use must see the binding followed: no other binding of the name between
                // them runs on every path to it (one in a branch that does not hold the use
                // may not run); before it in its loop, the same from the loop's start.
                let after_binding = use_.start_byte() >= from;
                let since = if after_binding { from } else { start };
                if model.rebound_on_every_path(name, since, *use_, binding) {
                    continue;
                }
                self.use_at(*use_, carries);
            }
        }
        self.fate
    }

    fn follow(&mut self, bound: Bound<'t>) {
        self.pending.push(bound);
    }

    /// Follow the name `ident` after `statement`, which binds it (a target) or stores into
    /// what it holds (a container): the uses that see that binding.
    fn follow_name(&mut self, ident: Node<'t>, statement: Node<'t>, function: Option<Node<'t>>, carries: Carries) {
        let model = self.model;
        let name = model.text(ident);
        let own = model.bindings_in_scope(name, ident).iter().find(|b| b.statement.id() == statement.id() || contains(b.statement, ident) && contains(statement, b.statement) || contains(b.statement, statement));
        let binding = match own {
            Some(b) if model.is_binding_target(ident) || b.kind == BindingKind::AugAssign => *b,
            _ => match model.binding_at(name, ident) {
                Some(b) => *b,
                None => return,
            },
        };
        let binding_stmt = binding.statement;
        let from = if binding_stmt.kind_name() == "for_statement" {
            binding_stmt.field("body").map(|b| b.start_byte()).unwrap_or(statement.end_byte())
        } else {
            statement.end_byte()
        };
        let loop_start = model.loop_body_start(binding.position, function);
        self.follow(Bound { name, binding: binding_stmt.id(), from, loop_start, function, carries });
    }

    /// The value is used at `node`: walk up its expression to its statement.
    fn use_at(&mut self, node: Node<'t>, mut carries: Carries) {
        let model = self.model;
        let function = model.enclosing_function(node).map(|f| f.node);
        let mut current = node;
        // The argument of a call the value is in (the child of its argument list).
        let mut argument = node;
        loop {
            let Some(parent) = model.parent(current) else { return };
            if parent.kind_name() == "argument_list" {
                argument = current;
            }
            match parent.kind_name() {
                "call" => {
                    let in_arguments = parent.field("arguments").is_some_and(|a| a.id() == current.id());
                    let is_callee = parent.field("function").is_some_and(|f| f.id() == current.id());
                    if model.is_backward_call(parent) {
                        self.found(Fate::Backward(parent));
                        return;
                    }
                    if in_arguments {
                        match self.handed_to(parent, argument, carries) {
                            Handing::Stop => return,
                            Handing::Continue => {}
                        }
                    } else if !is_callee {
                        // The callee is computed from the value (`nets[out.argmax()](x)`).
                        return;
                    }
                    if !self.still_followed(parent, &mut carries) {
                        return;
                    }
                }
                "argument_list" | "keyword_argument" | "list_splat" | "dictionary_splat" | "parenthesized_expression" | "pair" => {}
                "attribute" => {
                    // `out.logits`, `out.argmax` (then called): the value's part or method.
                    if parent.field("object").is_some_and(|o| o.id() == current.id()) {
                        let is_method = model.parent(parent).is_some_and(|c| c.kind_name() == "call" && c.field("function").is_some_and(|f| f.id() == parent.id()));
                        if !is_method && !self.still_followed(parent, &mut carries) {
                            return;
                        }
                    } else {
                        return;
                    }
                }
                "subscript" => {
                    if parent.field("value").is_some_and(|v| v.id() == current.id()) {
                        if !self.still_followed(parent, &mut carries) {
                            return;
                        }
                    } else {
                        // An index computed from the value.
                        return;
                    }
                }
                "binary_operator" | "unary_operator" | "conditional_expression" | "boolean_operator" | "list" | "tuple" | "set"
                | "dictionary" | "expression_list" | "await" => {
                    if !self.still_followed(parent, &mut carries) {
                        return;
                    }
                }
                "comparison_operator" | "not_operator" => return,
                "list_comprehension" | "generator_expression" | "set_comprehension" | "dictionary_comprehension" | "for_in_clause" => {
                    // Followed as a whole: the comprehension's value carries what its body does.
                    if !self.still_followed(parent, &mut carries) {
                        return;
                    }
                }
                "lambda" => {
                    self.escape(carries, Fate::Handed(parent));
                    return;
                }
                "return_statement" => {
                    self.escape(carries, Fate::Returned(parent));
                    return;
                }
                "yield" => {
                    self.escape(carries, Fate::Returned(parent));
                    return;
                }
                "assignment" | "augmented_assignment" => {
                    if parent.field("right").is_some_and(|r| r.id() == current.id()) {
                        if let Some(left) = parent.field("left") {
                            self.assigned_to(left, parent, function, carries);
                        }
                    }
                    return;
                }
                "for_statement" => {
                    if parent.field("right").is_some_and(|r| r.id() == current.id()) {
                        if let Some(left) = parent.field("left") {
                            for t in target_leaves(left).into_iter().filter(|t| t.kind_name() == "identifier") {
                                self.follow_name(t, parent, function, carries);
                            }
                        }
                    }
                    return;
                }
                "with_item" | "as_pattern" => {
                    self.escape(carries, Fate::Handed(parent));
                    return;
                }
                // Read by a statement: a condition, an assertion, `del`, a bare expression.
                _ => return,
            }
            current = parent;
        }
    }

    /// An escape of the value: with history it is one; a value without history cannot
    /// carry any out.
    fn escape(&mut self, carries: Carries, fate: Fate<'t>) {
        if carries == Carries::History {
            self.found(fate);
        }
    }

    /// Is the value of `expr`, computed from the followed one, still followed? Updates what
    /// it carries: a number or another framework's value ends the path.
    fn still_followed(&self, expr: Node<'t>, carries: &mut Carries) -> bool {
        match self.model.value_kind(expr) {
            ValueKind::Number | ValueKind::Foreign => false,
            ValueKind::PlainTensor => {
                *carries = Carries::Derived;
                true
            }
            _ => true,
        }
    }

    /// The value is an argument of `call` (not a backward pass).
    fn handed_to(&mut self, call: Node<'t>, argument: Node<'t>, carries: Carries) -> Handing {
        let model = self.model;
        let Some(callee) = call.field("function") else { return Handing::Stop };
        // A forward pass or a tensor operation: its result is computed from the value.
        if model.forward_callee(call).is_some() {
            return Handing::Continue;
        }
        let last = match callee.kind_name() {
            "identifier" => model.text(callee),
            "attribute" => callee.field("attribute").map(|a| model.text(a)).unwrap_or(""),
            _ => "",
        };
        // Put into a container: follow the container (`log_probs.append(lp)`, then
        // `torch.stack(log_probs)`), or it is stored where the container lives.
        if STORING_METHODS.contains(&last) && callee.kind_name() == "attribute" {
            let container = callee.field("object").map(unparenthesize);
            let statement = model.statement_around(call);
            self.into_container(container, statement, carries);
            return Handing::Stop;
        }
        // A local function: where its parameter's value goes.
        if let Some(def) = model.local_callee(call) {
            if let Some(parameter) = model.parameter_receiving(def, call, Some(argument)) {
                return match model.parameter_fate(def, parameter) {
                    Fate::Backward(b) => {
                        self.found(Fate::Backward(b));
                        Handing::Stop
                    }
                    Fate::Returned(_) => Handing::Continue,
                    Fate::Consumed => Handing::Stop,
                    escape => {
                        self.escape(carries, escape);
                        Handing::Stop
                    }
                };
            }
        }
        // A function or method of the project: what its summary says it does with what it
        // is given (it backpropagates, stores, or computes a result from it).
        if let Some(summary) = model.project_function_called(call) {
            if summary.backprops {
                self.found(Fate::Backward(call));
            } else if !summary.stores.is_empty() {
                self.escape(carries, Fate::Stored(call));
            } else {
                return Handing::Continue;
            }
            return Handing::Stop;
        }
        if let Some(q) = model.qualified_name(callee) {
            // torch's own functions compute from the value; the other libraries memlint
            // models read it; a library it does not model may keep it.
            if q.starts_with("torch.") && !q.starts_with("torch.save") {
                return Handing::Continue;
            }
            if READING_LIBRARIES.iter().any(|p| q.starts_with(p)) || crate::library::call_model(&q).is_some() {
                return Handing::Stop;
            }
            self.escape(carries, Fate::Handed(call));
            return Handing::Stop;
        }
        // A method of a tensor, a number or a loss module: its result is computed from it.
        if callee.kind_name() == "attribute" {
            let object = callee.field("object").map(|o| model.value_kind(o)).unwrap_or(ValueKind::Unknown);
            if matches!(object, ValueKind::GradTensor | ValueKind::PlainTensor | ValueKind::Number | ValueKind::Foreign) {
                return Handing::Continue;
            }
        }
        if model.value_kind(callee) == ValueKind::Loss {
            return Handing::Continue;
        }
        // Builtins that give the value back (in a container, an element, an iterator): their
        // result carries it on.
        if callee.kind_name() == "identifier" && PASSING_BUILTINS.contains(&last) {
            return Handing::Continue;
        }
        // Builtins and the methods that print, log or save; an unseen function whose name
        // says it shows or saves what it is given.
        if READING_CALLS.contains(&last) || reads_by_name(last) {
            return Handing::Stop;
        }
        // `self.assertEqual(out, ...)` in a `unittest.TestCase`: an assertion reads.
        if last.starts_with("assert") && callee.kind_name() == "attribute" && callee.field("object").is_some_and(|o| model.text(o) == "self") {
            let class = model.enclosing_function(call).and_then(|f| f.class.clone());
            if class.is_some_and(|c| model.class_derives_from(&c, crate::library::TEST_CASE_CLASSES)) {
                return Handing::Stop;
            }
        }
        self.escape(carries, Fate::Handed(call));
        Handing::Stop
    }

    /// The value is assigned to `left`.
    fn assigned_to(&mut self, left: Node<'t>, statement: Node<'t>, function: Option<Node<'t>>, carries: Carries) {
        for t in target_leaves(left) {
            match t.kind_name() {
                "identifier" => self.follow_name(t, statement, function, carries),
                // `results[k] = out`: into a local container, followed as the container.
                "subscript" => self.into_container(t.field("value").map(unparenthesize), statement, carries),
                // `self.x = out`: outlives the call; its reads later in this function
                // carry the value on.
                "attribute" => {
                    self.escape(carries, Fate::Stored(statement));
                    self.follow_attribute(t, statement, function, carries);
                }
                _ => self.escape(carries, Fate::Stored(statement)),
            }
        }
    }

    /// The value was assigned to the attribute `target` of a name (`self.loss_a = out`) by
    /// `statement`: follow the reads of that attribute on that name later in the same
    /// function (`self.loss = 2 * self.loss_a; self.loss.backward()`).
    fn follow_attribute(&mut self, target: Node<'t>, statement: Node<'t>, function: Option<Node<'t>>, carries: Carries) {
        let model = self.model;
        let (Some(object), Some(attribute)) = (target.field("object"), target.field("attribute")) else { return };
        if object.kind_name() != "identifier" {
            return;
        }
        let name = model.text(attribute);
        if !self.seen.insert((name, statement.id())) {
            return;
        }
        let object_name = model.text(object);
        let end = function.map(|f| f.end_byte()).unwrap_or(model.source().len());
        for read in model.attributes_named_in(name, statement.end_byte()..end) {
            if self.budget == 0 {
                self.found(Fate::Handed(*read));
                return;
            }
            self.budget -= 1;
            if read.field("object").is_none_or(|o| model.text(o) != object_name) {
                continue;
            }
            if model.enclosing_function(*read).map(|f| f.node.id()) != function.map(|f| f.id()) {
                continue;
            }
            // Assigned again, not read.
            let written = model.parent(*read).is_some_and(|p| {
                matches!(p.kind_name(), "assignment" | "augmented_assignment") && p.field("left").is_some_and(|l| l.id() == read.id())
            });
            if !written {
                self.use_at(*read, carries);
            }
        }
    }
}

impl<'m, 't> Follower<'m, 't> {
    /// The value is put into `container` by `statement` (`c.append(v)`, `c[k] = v`): a
    /// container built in this function is followed as the container; a container that
    /// is a parameter of a local function is followed, in each caller, as the container
    /// the caller passes (`def body(x, preds): preds.append(out)`, `body(x, preds)` in a
    /// loop); anything else keeps the value where memlint does not follow it.
    fn into_container(&mut self, container: Option<Node<'t>>, statement: Node<'t>, carries: Carries) {
        let model = self.model;
        let Some(c) = container.filter(|c| c.kind_name() == "identifier") else {
            self.escape(carries, Fate::Stored(statement));
            return;
        };
        if model.holds_a_local_container(c) && !model.is_global_name(c) {
            let function = model.enclosing_function(c).map(|f| f.node);
            self.follow_name(c, statement, function, carries);
            return;
        }
        match model.containers_passed_for(c, 0) {
            Some(passed) => {
                for (argument, call_statement) in passed {
                    let function = model.enclosing_function(argument).map(|f| f.node);
                    self.follow_name(argument, call_statement, function, carries);
                }
            }
            None => self.escape(carries, Fate::Stored(statement)),
        }
    }
}

enum Handing {
    /// The call's result carries the value on: keep walking up.
    Continue,
    /// The value stops here (read, stored, followed elsewhere).
    Stop,
}

/// Builtins whose result holds what they are given (a container, an element of it, an
/// iterator over it).
const PASSING_BUILTINS: &[&str] = &["list", "tuple", "dict", "set", "zip", "enumerate", "sorted", "reversed", "min", "max", "sum", "abs", "iter", "next", "map", "filter", "getattr"];

/// First words of functions that show, save or log what they are given (`save_img_results`,
/// `plot_samples`), when memlint cannot see the function.
const READING_VERBS: &[&str] = &["save", "show", "plot", "log", "print", "visualize", "visualise", "vis", "draw", "write", "display", "imsave", "dump"];

fn reads_by_name(name: &str) -> bool {
    crate::lexicon::name_words(name).first().map(|w| READING_VERBS.contains(&w.as_str())).unwrap_or(false)
}

impl<'t> SemanticModel<'t> {
    /// Is `name` bound again between the byte `since` and `use_` (not by `except`, the
    /// binding followed) by a statement that runs on every path to the use: one whose
    /// block holds the use? A binding in a branch that does not hold the use may not run
    /// (`if a: out = f(x)` / `else: out = g(x)`: both reach the use after the `if`).
    pub(crate) fn rebound_on_every_path(&self, name: &str, since: usize, use_: Node<'t>, except: usize) -> bool {
        self.bindings_in_scope(name, use_).iter().any(|b| {
            b.statement.id() != except
                && b.position >= since
                && b.position < use_.start_byte()
                && !contains(b.statement, use_)
                && matches!(b.kind, BindingKind::Assign | BindingKind::LoopTarget | BindingKind::WithTarget)
                && self.parent(b.statement).is_some_and(|block| contains(block, use_))
        })
    }

    /// The statement (a child of a block or the module) around `node`.
    pub(crate) fn statement_around(&self, node: Node<'t>) -> Node<'t> {
        let mut current = node;
        while let Some(parent) = self.parent(current) {
            if matches!(parent.kind_name(), "block" | "module") {
                return current;
            }
            current = parent;
        }
        current
    }

    /// The start of the body of the innermost loop (in `function`) around the byte `at`: a
    /// value bound in a loop is seen again by the uses before its binding on the next
    /// iteration.
    pub(crate) fn loop_body_start(&self, at: usize, function: Option<Node<'t>>) -> Option<usize> {
        let range = function.map(|f| f.byte_range()).unwrap_or(0..self.source().len());
        self.loops
            .iter()
            .filter(|l| range.start <= l.start_byte() && l.end_byte() <= range.end)
            .filter_map(|l| l.field("body"))
            .filter(|b| b.start_byte() <= at && at < b.end_byte())
            .filter(|b| self.enclosing_function(*b).map(|f| f.node.id()) == function.map(|f| f.id()))
            .map(|b| b.start_byte())
            .max()
    }

    /// Does the name at `ident` hold a container built in this module (a list, dict, set or
    /// tuple display or comprehension, `list()`, `dict()`, `defaultdict(...)`, `deque(...)`),
    /// as far as its binding there says? What is put in it is followed with it; what is put
    /// into another object (an instance of a class) is stored there.
    pub(crate) fn holds_a_local_container(&self, ident: Node<'t>) -> bool {
        let name = self.text(ident);
        let Some(binding) = self.binding_at(name, ident) else { return false };
        let Some(mut value) = binding.value.filter(|_| binding.kind == BindingKind::Assign).map(unparenthesize) else { return false };
        // `preds, losses = [], []`: the element at the name's place.
        if let Some(index) = self.target_index(binding.statement, name) {
            if matches!(value.kind_name(), "expression_list" | "tuple" | "list") {
                match self.named_children(value).get(index) {
                    Some(element) => value = unparenthesize(*element),
                    None => return false,
                }
            }
        }
        match value.kind_name() {
            "list" | "dictionary" | "set" | "tuple" | "list_comprehension" | "dictionary_comprehension" | "set_comprehension" => true,
            "binary_operator" => self.field(value, "left").is_some_and(|l| l.kind_name() == "list"),
            "call" => self.container_built_by(value).is_some(),
            _ => false,
        }
    }

    /// The containers that the callers of a local function pass for its parameter at
    /// `ident` (each as the argument's identifier and the statement of the call), when
    /// every caller is in this module and passes a container built there (or, up to two
    /// levels, one its own caller passes). `None` when it is no parameter, some caller
    /// passes something else, or code in another module may call the function.
    pub(crate) fn containers_passed_for(&self, ident: Node<'t>, depth: usize) -> Option<Vec<(Node<'t>, Node<'t>)>> {
        let name = self.text(ident);
        let binding = self.binding_at(name, ident).filter(|b| b.kind == BindingKind::Parameter)?;
        let function = self.enclosing_function(ident)?;
        let params = self.named_children(self.parent(binding.statement)?);
        let position = params.iter().filter_map(|p| parameter_name(*p)).position(|n| self.text(n) == name)?;
        let position = if function.class.is_some() { position.checked_sub(1)? } else { position };
        let calls = self.calls_of_function(function);
        if calls.is_empty() {
            return None;
        }
        let mut passed = Vec::new();
        for call in calls {
            let argument = self.argument_for(call, name, Some(position)).map(unparenthesize).filter(|a| a.kind_name() == "identifier")?;
            if self.is_global_name(argument) {
                return None;
            }
            if self.holds_a_local_container(argument) {
                passed.push((argument, self.statement_around(call)));
            } else if depth < 2 {
                passed.extend(self.containers_passed_for(argument, depth + 1)?);
            } else {
                return None;
            }
        }
        // Asked last: the project reads other files to answer.
        if self.called_from_other_modules(function.node) {
            return None;
        }
        Some(passed)
    }

    /// The container a call builds (`list()`, `defaultdict(list)`, `deque(maxlen=4)`, also
    /// through aliased imports), by its canonical name.
    pub fn container_built_by(&self, call: Node<'t>) -> Option<&'static str> {
        let callee = self.field(call, "function")?;
        let qualified = match self.qualified_name(callee) {
            Some(q) => q,
            // A builtin, unless the module binds the name itself.
            None if callee.kind_name() == "identifier" && self.binding_at(self.text(callee), callee).is_none() => self.text(callee).to_owned(),
            None => return None,
        };
        crate::library::container_builder(&qualified)
    }

    /// Is the identifier the target of an assignment, a `for` or a `with` (a binding, not a
    /// use)?
    pub(crate) fn is_binding_target(&self, ident: Node<'t>) -> bool {
        let mut current = ident;
        while let Some(parent) = self.parent(current) {
            match parent.kind_name() {
                "pattern_list" | "tuple_pattern" | "list_pattern" | "list_splat_pattern" | "as_pattern_target" => current = parent,
                "tuple" | "list" | "expression_list" | "parenthesized_expression" => current = parent,
                "assignment" => return self.field(parent, "left").is_some_and(|l| l.id() == current.id()),
                "augmented_assignment" => return false,
                "for_statement" | "for_in_clause" => return self.field(parent, "left").is_some_and(|l| l.id() == current.id()),
                _ => return false,
            }
        }
        false
    }

    /// Is `name` (used at the identifier) a module-level name used in a function (a global:
    /// what is put in it outlives the function)?
    pub(crate) fn is_global_name(&self, ident: Node<'t>) -> bool {
        let Some(function) = self.enclosing_function(ident) else { return false };
        let name = self.text(ident);
        self.bindings_of(Some(function.node.id()), name).is_none() && self.bindings_of(None, name).is_some()
    }

    /// The parameter of `def` that the argument at `argument` (or, when `None`, the first
    /// argument holding history) of `call` fills.
    pub(crate) fn parameter_receiving(&self, def: Node<'t>, call: Node<'t>, argument: Option<Node<'t>>) -> Option<&'t str> {
        let params = self.named_children(self.field(def, "parameters")?);
        let arguments = self.named_children(self.field(call, "arguments")?);
        let method = self.functions.get(&def.id()).is_some_and(|f| f.class.is_some())
            && self.field(call, "function").is_some_and(|c| c.kind_name() == "attribute");
        let skip = usize::from(method);
        let held = |a: Node<'t>| argument.map(|x| x.id() == a.id() || contains(a, x)).unwrap_or_else(|| self.carries_history(a));
        let mut position = 0;
        for a in arguments {
            match a.kind_name() {
                "keyword_argument" => {
                    if self.field(a, "value").is_some_and(held) {
                        let name = self.field(a, "name").map(|n| self.text(n))?;
                        return params.iter().filter_map(|p| parameter_name(*p)).map(|n| self.text(n)).find(|n| *n == name);
                    }
                }
                "list_splat" | "dictionary_splat" => {
                    if held(a) {
                        return None;
                    }
                }
                "comment" => {}
                _ => {
                    if held(a) {
                        let param = params.get(position + skip)?;
                        return parameter_name(*param).map(|n| self.text(n));
                    }
                    position += 1;
                }
            }
        }
        None
    }
}

impl<'t> SemanticModel<'t> {
    /// May the module that `construction` builds run a forward pass? It does unless it is
    /// bound to a name (or `self.<attr>`) whose every use only unwraps it (`net.module`) or
    /// calls a method of the module API on it (`net.load_state_dict(...)`, `net.eval()`,
    /// `net = net.cuda()`): a `DataParallel` built only to load a `module.`-prefixed
    /// checkpoint never drives a GPU. A use memlint cannot place (passed on, returned,
    /// stored, called) may run it.
    pub fn module_may_run_forward(&self, construction: Node<'t>) -> bool {
        // The expression that holds the module: through `.cuda()`, `.to(...)`, `.eval()`.
        let mut holder = construction;
        while let Some(parent) = self.parent(holder) {
            let chained = parent.kind_name() == "attribute"
                && self.parent(parent).is_some_and(|c| c.kind_name() == "call")
                && self.field(parent, "attribute").is_some_and(|a| crate::library::MODULE_METHODS_RETURNING_SELF.contains(&self.text(a)));
            match parent.kind_name() {
                "attribute" if chained => holder = self.parent(parent).unwrap_or(parent),
                "parenthesized_expression" => holder = parent,
                _ => break,
            }
        }
        let Some(assignment) = self.parent(holder).filter(|a| a.kind_name() == "assignment" && a.field("right").is_some_and(|r| r.id() == holder.id())) else {
            return true;
        };
        // The bindings that hold the module (`net = DataParallel(m)`, then `net =
        // net.cuda()`), and the uses that see them.
        let mut pending = vec![assignment];
        let mut uses: Vec<Node<'t>> = Vec::new();
        let mut seen = 0;
        while let Some(assignment) = pending.pop() {
            seen += 1;
            if seen > 16 {
                return true;
            }
            let Some(target) = self.field(assignment, "left") else { return true };
            match target.kind_name() {
                "identifier" => {
                    let name = self.text(target);
                    let scope = self.enclosing_function(assignment).map(|f| f.node.byte_range()).unwrap_or(0..self.source().len());
                    // A global read in functions is out of this question's reach.
                    let global_read = |f: &crate::FunctionInfo<'t>| {
                        self.identifiers_named_in(name, f.node.byte_range())
                            .iter()
                            .any(|u| self.binding_at(name, *u).is_some_and(|b| self.enclosing_function(b.statement).is_none()))
                    };
                    if self.enclosing_function(assignment).is_none() && self.functions().any(global_read) {
                        return true;
                    }
                    for u in self.identifiers_named_in(name, assignment.end_byte()..scope.end) {
                        // `args.model`, `f(model=...)`: a member or a keyword, not the name.
                        let not_a_reference = self.parent(*u).is_some_and(|p| {
                            (p.kind_name() == "attribute" && self.field(p, "attribute").is_some_and(|a| a.id() == u.id()))
                                || (p.kind_name() == "keyword_argument" && self.field(p, "name").is_some_and(|n| n.id() == u.id()))
                        });
                        if not_a_reference || !self.binding_at(name, *u).is_some_and(|b| b.statement.id() == assignment.id() || contains(b.statement, assignment)) {
                            continue;
                        }
                        // `net = net.cuda()`: the module again, under a new binding.
                        let rebound = self.parent(*u).filter(|a| a.kind_name() == "attribute").and_then(|a| {
                            let method = self.field(a, "attribute").map(|m| self.text(m))?;
                            let call = self.parent(a).filter(|c| c.kind_name() == "call")?;
                            let next = self.parent(call).filter(|n| n.kind_name() == "assignment" && n.field("right").is_some_and(|r| r.id() == call.id()))?;
                            crate::library::MODULE_METHODS_RETURNING_SELF.contains(&method).then_some(next)
                        });
                        match rebound {
                            Some(next) => pending.push(next),
                            None => uses.push(*u),
                        }
                    }
                }
                "attribute" if self.field(target, "object").is_some_and(|o| self.text(o) == "self") => {
                    let Some(attr) = self.field(target, "attribute").map(|a| self.text(a)) else { return true };
                    let Some(class) = self.enclosing_function(assignment).and_then(|f| f.class.clone()) else { return true };
                    let Some(class_node) = self.functions().find(|f| f.class.as_deref() == Some(class.as_str())).and_then(|f| self.parent(f.node)) else { return true };
                    uses.extend(
                        self.attributes_named_in(attr, class_node.byte_range())
                            .iter()
                            .copied()
                            .filter(|a| a.id() != target.id() && a.field("object").is_some_and(|o| self.text(o) == "self")),
                    );
                }
                _ => return true,
            }
        }
        uses.into_iter().any(|u| {
            if self.is_binding_target(u) {
                return false;
            }
            let Some(parent) = self.parent(u) else { return true };
            if parent.kind_name() != "attribute" || self.field(parent, "object").is_none_or(|o| o.id() != u.id()) {
                return true;
            }
            let attr = self.field(parent, "attribute").map(|a| self.text(a)).unwrap_or("");
            if attr == "module" {
                return false;
            }
            let call = self.parent(parent).filter(|c| c.kind_name() == "call" && c.field("function").is_some_and(|f| f.id() == parent.id()));
            // `test(model.eval(), ...)`: the module goes on where the call's result goes.
            if call.is_some_and(|c| crate::library::MODULE_METHODS_RETURNING_SELF.contains(&attr) && self.parent(c).is_some_and(|p| p.kind_name() != "expression_statement")) {
                return true;
            }
            !(call.is_some() && crate::library::MODULE_API_METHODS.contains(&attr) && attr != "forward")
        })
    }
}
