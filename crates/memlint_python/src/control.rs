//! Control facts: loops around a node and what they iterate, periodic conditions, flags,
//! whether a body trains or runs a step, branches that run only without CUDA.

use tree_sitter::Node;

use crate::NodeExt;
use crate::semantic::*;

impl<'t> SemanticModel<'t> {
    /// Does `node` run only where CUDA is unavailable: in the `elif`/`else` branches of
    /// `if torch.cuda.is_available():` (or of a name bound to it once:
    /// `use_cuda = torch.cuda.is_available()`), in the body of
    /// `if not torch.cuda.is_available():`, or the `else` part of a conditional expression
    /// on it? (Within its function: a `def` runs where it is called.)
    pub fn runs_only_without_cuda(&self, node: Node<'t>) -> bool {
        let mut child = node;
        while let Some(parent) = self.parent(child) {
            match parent.kind_name() {
                "function_definition" | "lambda" | "class_definition" => return false,
                "if_statement" => {
                    if let Some(condition) = self.field(parent, "condition") {
                        let in_body = self.field(parent, "consequence").map(|b| contains(b, child)).unwrap_or(false);
                        let in_else = !in_body && condition.id() != child.id() && !contains(condition, child);
                        match self.cuda_availability_test(condition) {
                            Some(true) if in_else => return true,
                            Some(false) if in_body => return true,
                            _ => {}
                        }
                    }
                }
                "conditional_expression" => {
                    // `a if condition else b`
                    let parts = self.named_children(parent);
                    if let [consequence, condition, alternative] = parts[..] {
                        let within = |part: Node<'t>| part.id() == child.id() || contains(part, child);
                        match self.cuda_availability_test(condition) {
                            Some(true) if within(alternative) => return true,
                            Some(false) if within(consequence) => return true,
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
            child = parent;
        }
        false
    }

    /// `Some(true)` when `condition` is `torch.cuda.is_available()` (through imports, or a
    /// name bound to it), `Some(false)` when it is its negation, `None` otherwise.
    pub(crate) fn cuda_availability_test(&self, condition: Node<'t>) -> Option<bool> {
        self.cuda_availability_test_at(condition, 0)
    }

    fn cuda_availability_test_at(&self, condition: Node<'t>, depth: usize) -> Option<bool> {
        let condition = unparenthesize(condition);
        if depth > 6 {
            return None;
        }
        match condition.kind_name() {
            "not_operator" => self.cuda_availability_test_at(self.field(condition, "argument")?, depth + 1).map(|b| !b),
            "call" => self.call_resolves_to(condition, &["torch.cuda.is_available"]).map(|_| true),
            "identifier" => {
                let binding = self.binding_at(self.text(condition), condition)?;
                let value = binding.value.filter(|_| binding.kind == BindingKind::Assign)?;
                let all = self.bindings_in_scope(self.text(condition), binding.statement);
                // Bound once in its scope: the name is the test (`_gate = use_cuda`,
                // `no_cuda = not torch.cuda.is_available()` are followed too).
                if all.len() != 1 || value.id() == condition.id() || contains(value, condition) {
                    return None;
                }
                self.cuda_availability_test_at(value, depth + 1)
            }
            _ => None,
        }
    }

    /// The loops whose *body* contains `node`, innermost first, up to the enclosing function.
    pub fn enclosing_loops(&self, node: Node<'t>) -> Vec<LoopInfo<'t>> {
        let mut loops = Vec::new();
        let mut child = node;
        let mut current = self.parent(node);
        while let Some(n) = current {
            match n.kind_name() {
                "for_statement" | "while_statement" => {
                    if self.field(n, "body").map(|b| contains(b, child)).unwrap_or(false) {
                        loops.push(self.loop_info(n));
                    }
                }
                "function_definition" | "lambda" | "class_definition" => break,
                _ => {}
            }
            child = n;
            current = self.parent(n);
        }
        loops
    }

    /// Classifies a `for` or `while` loop.
    pub fn loop_info(&self, node: Node<'t>) -> LoopInfo<'t> {
        if let Some(info) = self.loop_infos.borrow().get(&node.id()) {
            return *info;
        }
        let info = self.compute_loop_info(node);
        self.loop_infos.borrow_mut().insert(node.id(), info);
        info
    }


    pub(crate) fn compute_loop_info(&self, node: Node<'t>) -> LoopInfo<'t> {
        let over_data = self.iterates_data(node);
        let over_batches = over_data || (!self.inside_a_forward(node) && !self.iterates_modules(node) && self.body_runs_a_step(node));
        LoopInfo { node, over_eval_data: false, over_batches }
    }

    /// The iterable of a `for` loop without the wrappers that keep its elements
    /// (`enumerate(x)`, `tqdm(x)`, `iter(x)`, `zip(x, ...)`: the first iterable).
    pub(crate) fn loop_iterable(&self, node: Node<'t>) -> Option<Node<'t>> {
        let mut iterable = self.field(node, "right")?;
        for _ in 0..4 {
            iterable = unparenthesize(iterable);
            let Some(callee) = self.field(iterable, "function").filter(|_| iterable.kind_name() == "call") else { break };
            let wrapper = match callee.kind_name() {
                "identifier" => matches!(self.text(callee), "enumerate" | "tqdm" | "iter" | "zip" | "trange"),
                "attribute" => self.field(callee, "attribute").is_some_and(|a| self.text(a) == "tqdm"),
                _ => false,
            };
            if !wrapper {
                break;
            }
            let Some(first) = self.field(iterable, "arguments").and_then(|a| a.named_child(0)) else { break };
            iterable = first;
        }
        Some(iterable)
    }

    /// How many times a loop runs, where its header (or, for `while True:` over an iterator,
    /// the iterator) says: `range(k)`, `x.chunk(k)` / `torch.chunk(x, k)`, `enumerate` and
    /// `tqdm` of such, `zip` of such with one count (an endless `itertools.count()` beside
    /// them counts nothing), and `while True:` taking `next(it)` of `it = iter(E)` until
    /// `StopIteration`. Gives `k` and whether it came from a `range` (a `range(k)` loop
    /// only counts micro-batches when its body fetches them).
    pub fn iteration_count(&self, loop_node: Node<'t>) -> Option<(Node<'t>, bool)> {
        match loop_node.kind_name() {
            "for_statement" => self.iterable_count(self.field(loop_node, "right")?, 0),
            "while_statement" => {
                let iterator = self.while_iterator(loop_node)?;
                let binding = self.binding_at(self.text(iterator), iterator)?;
                let value = unparenthesize(binding.value.filter(|_| binding.kind == BindingKind::Assign)?);
                let callee = self.field(value, "function").filter(|_| value.kind_name() == "call")?;
                if self.text(callee) != "iter" {
                    return None;
                }
                self.iterable_count(self.field(value, "arguments")?.named_child(0)?, 0)
            }
            _ => None,
        }
    }

    /// The iterator a `while True:` loop steps with `next(it)` until `StopIteration`.
    fn while_iterator(&self, loop_node: Node<'t>) -> Option<Node<'t>> {
        let condition = unparenthesize(self.field(loop_node, "condition")?);
        if !matches!(self.text(condition), "True" | "1") {
            return None;
        }
        let body = self.field(loop_node, "body")?;
        let calls = self.calls_named_in("next", body.byte_range());
        // `except StopIteration: break` (or `return`) in the loop.
        let mut stops = false;
        let mut stack = vec![body];
        while let Some(n) = stack.pop() {
            if matches!(n.kind_name(), "function_definition" | "class_definition" | "lambda") {
                continue;
            }
            if n.kind_name() == "except_clause" && self.text(n).contains("StopIteration") {
                stops = true;
                break;
            }
            stack.extend(self.named_children(n));
        }
        if !stops {
            return None;
        }
        calls.iter().filter(|c| self.enclosing_loops(**c).first().is_some_and(|l| l.node.id() == loop_node.id())).find_map(|c| {
            let it = unparenthesize(c.field("arguments")?.named_child(0)?);
            (it.kind_name() == "identifier").then_some(it)
        })
    }

    fn iterable_count(&self, iterable: Node<'t>, depth: usize) -> Option<(Node<'t>, bool)> {
        let iterable = unparenthesize(iterable);
        if depth > 4 || iterable.kind_name() != "call" {
            return None;
        }
        let callee = self.field(iterable, "function")?;
        let arguments: Vec<Node<'t>> =
            self.named_children(self.field(iterable, "arguments")?).into_iter().filter(|a| !matches!(a.kind_name(), "keyword_argument" | "comment")).collect();
        match callee.kind_name() {
            "identifier" => match self.text(callee) {
                "range" if arguments.len() == 1 => Some((arguments[0], true)),
                "enumerate" | "tqdm" | "iter" | "trange" | "list" | "reversed" => self.iterable_count(*arguments.first()?, depth + 1),
                "zip" => {
                    let endless = |a: &Node<'t>| {
                        let a = unparenthesize(*a);
                        a.kind_name() == "call"
                            && self.field(a, "function").and_then(|f| self.qualified_name(f)).is_some_and(|q| matches!(q.as_str(), "itertools.count" | "itertools.repeat" | "itertools.cycle"))
                    };
                    let counts: Vec<(Node<'t>, bool)> =
                        arguments.iter().filter(|a| !endless(a)).map(|a| self.iterable_count(*a, depth + 1)).collect::<Option<Vec<_>>>()?;
                    let first = *counts.first()?;
                    let same = |a: Node<'t>, b: Node<'t>| {
                        let norm = |t: &str| t.chars().filter(|c| !c.is_whitespace()).collect::<String>();
                        norm(self.text(a)) == norm(self.text(b))
                    };
                    counts.iter().all(|(k, _)| same(*k, first.0)).then_some(first)
                }
                _ => None,
            },
            "attribute" => {
                let method = self.text(self.field(callee, "attribute")?);
                if method == "tqdm" {
                    return self.iterable_count(*arguments.first()?, depth + 1);
                }
                if method != "chunk" {
                    return None;
                }
                let is_torch = self.qualified_name(callee).is_some_and(|q| q == "torch.chunk");
                let k = if is_torch { arguments.get(1) } else { arguments.first() };
                k.map(|k| (*k, false))
            }
            _ => None,
        }
    }

    /// Does the loop go over a `DataLoader`: a `for` over one (through `enumerate`, `tqdm`,
    /// `zip`), or a `while` whose body takes `next()` of an iterator over one?
    pub fn iterates_data(&self, node: Node<'t>) -> bool {
        match node.kind_name() {
            "for_statement" => self.loop_iterable(node).is_some_and(|i| self.value_kind(i) == ValueKind::DataLoader),
            "while_statement" => self.field(node, "body").is_some_and(|body| {
                self.calls_named_in("next", body.byte_range()).iter().any(|call| {
                    call.field("arguments").and_then(|a| a.named_child(0)).is_some_and(|it| {
                        let it = unparenthesize(it);
                        it.kind_name() == "identifier"
                            && self.binding_at(self.text(it), it).and_then(|b| b.value).is_some_and(|v| {
                                let v = unparenthesize(v);
                                let inner = if v.kind_name() == "call" && self.field(v, "function").is_some_and(|f| self.text(f) == "iter") {
                                    self.field(v, "arguments").and_then(|a| a.named_child(0))
                                } else {
                                    Some(v)
                                };
                                inner.is_some_and(|i| self.value_kind(i) == ValueKind::DataLoader)
                            })
                    })
                })
            }),
            _ => false,
        }
    }

    /// Is `node` in a method of a module class (the forward pass and its helpers)?
    pub(crate) fn inside_a_forward(&self, node: Node<'t>) -> bool {
        let Some(function) = self.enclosing_function(node) else { return false };
        let Some(class) = function.class.as_deref() else { return false };
        // The `forward` of a class whose base memlint cannot see into may be a network's
        // (unknown stays unknown); its other methods are what they are.
        self.is_module_class(class) || (function.name == "forward" && self.may_be_module_class(class))
    }

    /// Does the loop iterate a container of networks (`for layer in self.layers`)?
    fn iterates_modules(&self, node: Node<'t>) -> bool {
        node.kind_name() == "for_statement" && self.loop_iterable(node).is_some_and(|i| self.value_kind(i).is_module())
    }

    /// Does the loop's body, in the loop's scope, run a step: a forward pass, a backward pass
    /// or an optimizer step, directly or through a local function it calls?
    fn body_runs_a_step(&self, node: Node<'t>) -> bool {
        let Some(body) = self.field(node, "body") else { return false };
        self.trains_in(body) || self.runs_a_step_anywhere(body)
    }

    /// What a condition tests: the expression a flag was assigned (`do_step = (i + 1) % k
    /// == 0`, then `if do_step:`), else the condition itself.
    pub fn flag_value(&self, condition: Node<'t>) -> Node<'t> {
        // Through chains of flags (`do_step = (i + 1) % k == 0`, `_gate = do_step`).
        let mut current = condition;
        for _ in 0..4 {
            if current.kind_name() != "identifier" {
                break;
            }
            match self.binding_at(self.text(current), current).and_then(|b| if b.kind == BindingKind::Assign { b.value } else { None }) {
                Some(value) if !contains(value, current) => current = unparenthesize(value),
                _ => break,
            }
        }
        current
    }

    /// The period `k` of a condition that holds every k-th step: `i % k == 0`,
    /// `(it + 1) % every == 0`. `"%d" % x` formats a string and is no period. A flag bound
    /// to a periodic test is not followed here (`if generator_step:` alternating two
    /// updates is no rare branch); a rule that wants it asks [`Self::flag_value`] first.
    pub fn period_of(&self, condition: Node<'t>) -> Option<Node<'t>> {
        let mut pending = vec![condition];
        while let Some(n) = pending.pop() {
            if n.kind_name() == "binary_operator" && self.field(n, "operator").is_some_and(|o| self.text(o) == "%") {
                if self.field(n, "left").is_some_and(|l| l.kind_name() == "string") {
                    return None;
                }
                return self.field(n, "right").map(unparenthesize);
            }
            // Depth-first, left to right: the first `%` in source order.
            let children: Vec<Node<'t>> = self.named_children(n);
            pending.extend(children.into_iter().rev());
        }
        None
    }

    /// What a loop steps through: epochs, steps, or something else. (Walks the loop's
    /// body, so it is computed only when asked for.)
    pub fn loop_kind(&self, node: Node<'t>) -> LoopKind {
        if let Some(kind) = self.loop_kinds.borrow().get(&node.id()) {
            return *kind;
        }
        let kind = self.compute_loop_kind(node);
        self.loop_kinds.borrow_mut().insert(node.id(), kind);
        kind
    }

    pub(crate) fn compute_loop_kind(&self, node: Node<'t>) -> LoopKind {
        let body = self.field(node, "body");
        if body.is_some_and(|b| self.contains_nested_step_loop(b)) {
            LoopKind::Epoch
        } else if self.loop_info(node).over_batches {
            LoopKind::Step
        } else {
            LoopKind::Other
        }
    }

    /// Does `body` (nested loops included, nested functions not) call `backward()` or step
    /// an optimizer?
    pub fn trains_in(&self, body: Node<'t>) -> bool {
        let scope = self.scope_of(body);
        let within_body = |calls: &[(usize, ScopeId)]| {
            let first = calls.partition_point(|(start, _)| *start < body.start_byte());
            calls[first..].iter().take_while(|(start, _)| *start < body.end_byte()).any(|(_, s)| *s == scope)
        };
        if let Some(calls) = self.training_calls.get() {
            return within_body(calls);
        }
        // Deciding that `x.step()` steps an optimizer asks what `x` is, which may ask
        // whether some method trains (a forward pass through a method): that inner
        // question is answered from the backward passes alone.
        if self.training_calls_pending.replace(true) {
            let mut calls: Vec<(usize, ScopeId)> = self.backward_calls().iter().map(|c| (c.start_byte(), self.scope_of(*c))).collect();
            calls.sort_unstable();
            return within_body(&calls);
        }
        let steps = self.calls_named("step").iter().filter(|c| self.is_optimizer_step(**c));
        let mut calls: Vec<(usize, ScopeId)> =
            self.backward_calls().iter().chain(steps).map(|c| (c.start_byte(), self.scope_of(*c))).collect();
        calls.sort_unstable();
        let calls = self.training_calls.get_or_init(|| calls);
        within_body(calls)
    }

    /// Does `body` hold a loop over batches (or epochs), itself or in a local function it
    /// calls (`for epoch in range(n): train(model, loader)`)?
    pub(crate) fn contains_nested_step_loop(&self, body: Node<'t>) -> bool {
        let mut stack = self.named_children(body);
        while let Some(n) = stack.pop() {
            match n.kind_name() {
                "function_definition" | "class_definition" | "lambda" => continue,
                "for_statement" | "while_statement" => {
                    if self.loop_kind(n) != LoopKind::Other {
                        return true;
                    }
                    continue;
                }
                "call" => {
                    if self.local_callee(n).is_some_and(|def| self.function_has_step_loop(def)) {
                        return true;
                    }
                    stack.extend(self.named_children(n));
                }
                _ => stack.extend(self.named_children(n)),
            }
        }
        false
    }

    /// The function of this module that `call` runs: `f(...)` resolving to a local
    /// function, `self.f(...)` a method of the caller's class (or a local base), `x.f(...)`
    /// a method of the local class `x` is an instance of.
    pub fn local_callee(&self, call: Node<'t>) -> Option<Node<'t>> {
        let callee = self.field(call, "function")?;
        match callee.kind_name() {
            "identifier" => {
                let binding = self.binding_at(self.text(callee), callee)?;
                (binding.kind == BindingKind::Definition && binding.statement.kind_name() == "function_definition").then_some(binding.statement)
            }
            "attribute" => {
                let method = self.text(self.field(callee, "attribute")?);
                let object = self.field(callee, "object")?;
                if self.text(object) == "self" {
                    let class = self.enclosing_function(call)?.class.clone()?;
                    return self.method_of(&class, method);
                }
                let class = self.instance_class(object)?;
                self.method_of(class, method)
            }
            _ => None,
        }
    }

    /// Does the function `def` hold a loop over batches (its own, or in a local function it
    /// calls)? Memoized; a cycle of calls answers no.
    pub fn function_has_step_loop(&self, def: Node<'t>) -> bool {
        if let Some(known) = self.step_loop_functions.borrow().get(&def.id()) {
            return *known;
        }
        self.step_loop_functions.borrow_mut().insert(def.id(), false);
        let answer = self.field(def, "body").is_some_and(|b| self.contains_nested_step_loop(b));
        self.step_loop_functions.borrow_mut().insert(def.id(), answer);
        answer
    }

    /// Does the function `def` run a step when called (a forward pass, a backward pass or
    /// an optimizer step in its own body, outside loops, or through a local function it
    /// calls)? Memoized; a cycle of calls answers no.
    pub fn function_runs_a_step(&self, def: Node<'t>) -> bool {
        if let Some(known) = self.step_functions.borrow().get(&def.id()) {
            return *known;
        }
        self.step_functions.borrow_mut().insert(def.id(), false);
        let answer = self.field(def, "body").is_some_and(|b| self.trains_in(b) || self.runs_a_step_anywhere(b));
        self.step_functions.borrow_mut().insert(def.id(), answer);
        answer
    }

    /// Does `body` (not counting nested loops and functions) run a training or inference
    /// step: a forward pass, a `backward()`, or an optimizer step?
    pub fn runs_a_step(&self, body: Node<'t>) -> bool {
        self.step_in(body, false)
    }

    /// [`Self::runs_a_step`], also through the local functions `body` calls.
    pub(crate) fn runs_a_step_anywhere(&self, body: Node<'t>) -> bool {
        self.step_in(body, true)
    }

    fn step_in(&self, body: Node<'t>, through_calls: bool) -> bool {
        let mut stack = self.named_children(body);
        while let Some(n) = stack.pop() {
            match n.kind_name() {
                "function_definition" | "class_definition" | "lambda" | "for_statement" | "while_statement" => continue,
                "call" => {
                    if self.is_forward_call(n) || self.is_backward_call(n) || self.is_optimizer_step(n) {
                        return true;
                    }
                    if through_calls && self.local_callee(n).is_some_and(|def| self.function_runs_a_step(def)) {
                        return true;
                    }
                    stack.extend(self.named_children(n));
                }
                _ => stack.extend(self.named_children(n)),
            }
        }
        false
    }

    /// The loop over batches (or steps) `node` runs once per iteration of: its innermost
    /// enclosing loop of kind [`LoopKind::Step`] in its function, else, for a function
    /// without such a loop around `node`, the step loop around a call of that function in
    /// this module (`for batch in loader: test(batch)`, then `empty_cache()` in `test`),
    /// followed through up to three levels of callers. Gives the loop and, when it was
    /// found through a call, that call.
    pub fn step_loop_around(&self, node: Node<'t>) -> Option<(Node<'t>, Option<Node<'t>>)> {
        self.step_loop_around_at(node, 0)
    }

    fn step_loop_around_at(&self, node: Node<'t>, depth: usize) -> Option<(Node<'t>, Option<Node<'t>>)> {
        if let Some(l) = self.enclosing_loops(node).into_iter().find(|l| self.loop_kind(l.node) == LoopKind::Step) {
            return Some((l.node, None));
        }
        if depth >= 3 || !self.enclosing_loops(node).is_empty() {
            return None;
        }
        let function = self.enclosing_function(node)?;
        // Every local call runs it per step (one that does not would make it no per-step
        // code). Decided here first: the project, which reads other files to answer, is
        // asked only of a function whose local calls all run it per step.
        let calls = self.calls_of_function(function);
        let mut found = None;
        for call in &calls {
            let (l, _) = self.step_loop_around_at(*call, depth + 1)?;
            found.get_or_insert((l, Some(*call)));
        }
        // A function other modules call may run anywhere.
        if found.is_some() && self.called_from_other_modules(function.node) {
            return None;
        }
        found
    }
}
