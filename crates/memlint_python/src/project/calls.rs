//! The calls a module makes of names it imports, with the gradient context each runs in
//! (`with torch.no_grad()`, a decorated function) and whether its result is kept: the
//! walk that fills [`ModuleSummary::calls`], including method calls on names holding an
//! instance of an imported class (`ddpm = DDPM(); ddpm.sample()`).
//!
//! Asks the module's own [`ModuleSummary`] (its imports, functions and classes, filled
//! before this walk runs) and [`super::syntax`]; resolves nothing across modules.

use rustc_hash::FxHashMap as HashMap;

use tree_sitter::Node;

use super::summary::{ImportedCall, ModuleSummary};
use super::syntax::{decorator_disables_grad, dotted, returned_callee_of, runs_backward, text, with_items_disabling_grad, NodeKind};
use crate::named_nodes::NamedNodes;
use crate::semantic::{named_children, unparenthesize};
use crate::NodeExt;

/// What the walk of a module's calls gathers: the calls of imported names, and the method
/// calls on names that hold an instance of an imported class (`ddpm = DDPM(...)`, then
/// `ddpm.sample(...)`), recorded as calls of `DDPM.sample`.
#[derive(Default)]
pub(super) struct CallCollector {
    calls: Vec<ImportedCall>,
    /// (receiver name, method, gradients disabled, result kept).
    receiver_calls: Vec<(String, String, bool, bool)>,
    /// What each name holds: the imported classes it is built from (as this module spells
    /// them through its imports); a name bound to instances of several classes
    /// (`trainer = MUNIT_Trainer(c)` in one branch, `UNIT_Trainer(c)` in another) calls
    /// the method of whichever it holds.
    instances: HashMap<String, Vec<String>>,
    /// The functions (and the module) around the walk's place, innermost last: what
    /// [`result_kept`] needs of each, gathered by the same walk that finds the calls.
    scopes: Vec<Scope>,
    /// The names of the module's own functions and classes (asked at every call of a name
    /// not imported: looking through the lists was quadratic in a module of many).
    defined: rustc_hash::FxHashSet<String>,
}

/// Of one function body (or the module): does it run a backward pass, the places of the
/// texts it returns, yields or stores on attributes or items (nested definitions and class
/// bodies left out), and the calls recorded in it whose result is kept if a name they are
/// assigned to is a word of those texts, decided when the walk leaves the scope (a
/// `return` may come after the call). The words are read only then, and only for a scope
/// with such a call: most have none.
struct Scope {
    backward: bool,
    kept_texts: Vec<std::ops::Range<usize>>,
    /// How many class bodies around the walk's place are inside this scope: what is
    /// returned or stored there is not this scope's.
    class_depth: usize,
    pending: Vec<(Recorded, Vec<String>)>,
}

/// A call recorded by the walk: its index among the calls, or among the receiver calls.
#[derive(Clone, Copy)]
enum Recorded {
    Call(usize),
    Receiver(usize),
}

/// What the walk knows of whether a call's result is kept when it meets the call.
enum Kept {
    Known(bool),
    /// Kept if one of these names (what it is assigned to) is kept in its scope.
    IfNameKept(Vec<String>),
}

impl CallCollector {
    /// A collector for the calls of the module `summary`, whose functions and classes are known.
    pub(super) fn for_module(summary: &ModuleSummary) -> CallCollector {
        let defined = summary.functions.iter().map(|f| f.name.clone()).chain(summary.classes.iter().map(|c| c.name.clone())).collect();
        CallCollector { defined, ..CallCollector::default() }
    }

    /// The walk enters `scope` (a function definition, or the module).
    pub(super) fn enter_scope(&mut self, source: &str, scope: Node<'_>) {
        let body = scope.field("body").unwrap_or(scope);
        self.scopes.push(Scope { backward: runs_backward(source, body), kept_texts: Vec::new(), class_depth: 0, pending: Vec::new() });
    }

    /// The walk leaves the innermost scope: the results of the calls recorded in it are
    /// decided.
    pub(super) fn exit_scope(&mut self, source: &str) {
        let Some(scope) = self.scopes.pop() else { return };
        if scope.pending.is_empty() {
            return;
        }
        let kept_words: rustc_hash::FxHashSet<&str> = scope
            .kept_texts
            .iter()
            .flat_map(|range| source[range.clone()].split(|c: char| !c.is_alphanumeric() && c != '_'))
            .filter(|w| !w.is_empty())
            .collect();
        for (recorded, names) in scope.pending {
            self.set_kept(recorded, names.iter().any(|name| kept_words.contains(name.as_str())));
        }
    }

    fn set_kept(&mut self, recorded: Recorded, kept: bool) {
        match recorded {
            Recorded::Call(i) => self.calls[i].result_kept = kept,
            Recorded::Receiver(i) => self.receiver_calls[i].3 = kept,
        }
    }

    /// The text of `node`, met by the walk in the innermost scope (outside class bodies), is
    /// kept: what it returns or yields, or what an assignment to an attribute or item
    /// stores (`assigned`: the assignment's left and right sides).
    fn note_kept(&mut self, node: Node<'_>, assigned: Option<(Option<Node<'_>>, Option<Node<'_>>)>) {
        let Some(scope) = self.scopes.last_mut().filter(|s| s.class_depth == 0) else { return };
        let kept = match assigned {
            None => node,
            Some((Some(left), Some(right))) if matches!(left.kind_name(), "attribute" | "subscript") => right,
            Some(_) => return,
        };
        scope.kept_texts.push(kept.byte_range());
    }

    fn enter_class(&mut self) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.class_depth += 1;
        }
    }

    fn exit_class(&mut self) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.class_depth -= 1;
        }
    }

    /// Records whether the result of the call just recorded as `recorded` is kept.
    fn decide(&mut self, recorded: Recorded, kept: Kept) {
        let kept = match kept {
            Kept::Known(kept) => kept,
            Kept::IfNameKept(names) => match self.scopes.last_mut() {
                Some(scope) => {
                    scope.pending.push((recorded, names));
                    return;
                }
                None => true,
            },
        };
        self.set_kept(recorded, kept);
    }

    pub(super) fn finish(mut self, source: &str) -> Vec<ImportedCall> {
        while !self.scopes.is_empty() {
            self.exit_scope(source);
        }
        for (receiver, method, grad_disabled, result_kept) in std::mem::take(&mut self.receiver_calls) {
            match self.instances.get(&receiver) {
                Some(classes) if !classes.is_empty() => {
                    for class in classes {
                        self.calls.push(ImportedCall { callee: format!("{class}.{method}"), grad_disabled, result_kept });
                    }
                }
                // A receiver of unknown class (`self.model = model`, a parameter): the call
                // may be of any class's method of that name, recorded as `?.method`.
                _ if result_kept => self.calls.push(ImportedCall { callee: format!("?.{method}"), grad_disabled, result_kept }),
                _ => {}
            }
        }
        self.calls
    }
}

impl ModuleSummary {
    /// The calls of imported names under the node at `at` in `nodes`, with whether
    /// gradients are disabled there (`with torch.no_grad()` / `inference_mode()` /
    /// `set_grad_enabled(False)`, a function decorated with them). One walk; the module's
    /// own call graph is not followed.
    pub(super) fn collect_calls<'t>(&self, source: &str, nodes: &NamedNodes<'t>, at: usize, disabled: bool, out: &mut CallCollector) {
        self.collect_calls_at(source, nodes, at, at, disabled, out);
    }

    /// [`Self::collect_calls`] under the node at `at`, within the walk that started at
    /// `root` (what a call's result is kept by is looked for no higher).
    fn collect_calls_at<'t>(&self, source: &str, nodes: &NamedNodes<'t>, at: usize, root: usize, disabled: bool, out: &mut CallCollector) {
        for child in nodes.children(at) {
            let kind = NodeKind::at(nodes, child);
            if matches!(kind, NodeKind::DecoratedDefinition | NodeKind::FunctionDefinition | NodeKind::With) {
                self.collect_calls_of_definition(source, nodes, child, disabled, out);
                continue;
            }
            let node = nodes.node(child);
            match kind {
                NodeKind::Call => self.record_call(source, nodes, child, root, disabled, out),
                NodeKind::Assignment => {
                    // Read from the walk: tree-sitter finds a field by stepping through
                    // the node's children.
                    let field = |name| match nodes.field_at(child, name) {
                        Some(found) => found.map(|at| nodes.node(at)),
                        None => node.field(name),
                    };
                    let (left, right) = (field("left"), field("right"));
                    self.record_instance(source, left, right, out);
                    out.note_kept(node, Some((left, right)));
                }
                NodeKind::Return | NodeKind::Yield => out.note_kept(node, None),
                _ => {}
            }
            let class = kind == NodeKind::ClassDefinition;
            if class {
                out.enter_class();
            }
            self.collect_calls_at(source, nodes, child, root, disabled, out);
            if class {
                out.exit_class();
            }
        }
    }

    /// Definitions and `with` blocks change the gradient context of what they contain:
    /// collects their calls. Out of [`Self::collect_calls_at`] so that
    /// its recursion's frame stays small.
    #[inline(never)]
    fn collect_calls_of_definition<'t>(&self, source: &str, nodes: &NamedNodes<'t>, at: usize, disabled: bool, out: &mut CallCollector) {
        let child = nodes.node(at);
        match nodes.kind(at) {
            "decorated_definition" => {
                let decorators = named_children(child).into_iter().filter(|c| c.kind_name() == "decorator").filter_map(|d| d.named_child(0));
                let inner = decorators.into_iter().any(|d| decorator_disables_grad(source, d));
                if let Some((def_at, def)) = nodes.field_of(child, "definition").and_then(|d| Some((nodes.child_with_id(at, d)?, d))) {
                    if let Some(body) = nodes.field_of(def, "body").and_then(|b| nodes.child_with_id(def_at, b)) {
                        // A decorated class's body runs in the enclosing scope.
                        let function = def.kind_name() == "function_definition";
                        if function {
                            out.enter_scope(source, def);
                        } else {
                            out.enter_class();
                        }
                        self.collect_calls(source, nodes, body, inner, out);
                        if function {
                            out.exit_scope(source);
                        } else {
                            out.exit_class();
                        }
                    }
                }
            }
            "function_definition" => {
                // A function runs where it is called: not under the `with` around its def.
                if let Some(body) = nodes.field_of(child, "body").and_then(|b| nodes.child_with_id(at, b)) {
                    out.enter_scope(source, child);
                    self.collect_calls(source, nodes, body, false, out);
                    out.exit_scope(source);
                }
            }
            "with_statement" => {
                // Its items (those of its `with_clause`, as `with_items_disabling_grad`
                // gives them), then its body.
                let (_, off) = with_items_disabling_grad(source, child);
                if let Some(clause) = nodes.children(at).find(|c| nodes.kind(*c) == "with_clause") {
                    for item in nodes.children(clause) {
                        self.collect_calls(source, nodes, item, disabled, out);
                    }
                }
                if let Some(body) = nodes.field_of(child, "body").and_then(|b| nodes.child_with_id(at, b)) {
                    self.collect_calls(source, nodes, body, disabled || off, out);
                }
            }
            _ => {}
        }
    }

    /// A call of an imported name (not torch's), with its gradient context.
    fn record_call<'t>(&self, source: &str, nodes: &NamedNodes<'t>, at: usize, root: usize, disabled: bool, out: &mut CallCollector) {
        let call = nodes.node(at);
        let Some(callee) = nodes.field_of(call, "function").and_then(|f| dotted(source, f)) else { return };
        let (first, rest) = match callee.split_once('.') {
            Some((f, r)) => (f, Some(r)),
            None => (callee.as_str(), None),
        };
        let qualified = match self.through_imports(&callee) {
            Some(q) => Some(q),
            None if rest.is_none() && !self.star_imports.is_empty() && !out.defined.contains(first) => {
                Some(first.to_owned())
            }
            None => None,
        };
        match qualified {
            Some(q) if !q.starts_with("torch.") => {
                let kept = result_kept(source, nodes, at, root, out.scopes.last());
                out.calls.push(ImportedCall { callee: q, grad_disabled: disabled, result_kept: true });
                out.decide(Recorded::Call(out.calls.len() - 1), kept);
            }
            Some(_) => {}
            // `ddpm.sample(...)` on a name this module binds, `self.model.sample(...)` on an
            // attribute of `self`: a method of what it holds.
            None => {
                let receiver = match rest.and_then(|r| r.split_once('.')) {
                    Some((attribute, method)) if first == "self" && !method.contains('.') => Some((format!("self.{attribute}"), method)),
                    _ => rest.filter(|r| !r.contains('.')).map(|method| (first.to_owned(), method)),
                };
                if let Some((receiver, method)) = receiver {
                    if !out.defined.contains(first) {
                        let kept = result_kept(source, nodes, at, root, out.scopes.last());
                        out.receiver_calls.push((receiver, method.to_owned(), disabled, true));
                        out.decide(Recorded::Receiver(out.receiver_calls.len() - 1), kept);
                    }
                }
            }
        }
    }

    /// `dotted` (as this module spells it) through its imports: `nn.Linear` ->
    /// `torch.nn.Linear`; `None` when its first part is not imported.
    fn through_imports(&self, dotted: &str) -> Option<String> {
        let (first, rest) = dotted.split_once('.').map_or((dotted, None), |(f, r)| (f, Some(r)));
        let q = self.import(first)?;
        Some(match rest {
            Some(r) => format!("{q}.{r}"),
            None => q.to_owned(),
        })
    }

    /// `ddpm = DDPM(...)` (also `DDPM(...).to(device)`, `.cuda()`, `.eval()`): the name
    /// holds an instance of an imported class, for the method calls on it (`left` and
    /// `value`: the assignment's sides).
    fn record_instance<'t>(&self, source: &str, left: Option<Node<'t>>, value: Option<Node<'t>>, out: &mut CallCollector) {
        let (Some(left), Some(value)) = (left, value) else { return };
        let name = match left.kind_name() {
            "identifier" => text(source, left).to_owned(),
            // `self.model = Net()`: the attribute, for `self.model.sample(...)` in the class.
            "attribute" if left.field("object").is_some_and(|o| text(source, o) == "self") => text(source, left).to_owned(),
            _ => return,
        };
        if unparenthesize(value).kind_name() != "call" {
            return;
        }
        let Some(class) = returned_callee_of(source)(value).and_then(|callee| self.through_imports(&callee)) else { return };
        let classes = out.instances.entry(name).or_default();
        if !classes.contains(&class) && classes.len() < 8 {
            classes.push(class);
        }
    }
}

/// May the result of `call` reach a backward pass or leave its caller? Its function (or the
/// module) runs a backward pass, or the call is returned or yielded, stored on an
/// attribute or item, or assigned to a name the function returns, yields or stores.
fn result_kept(source: &str, nodes: &NamedNodes<'_>, at: usize, root: usize, scope: Option<&Scope>) -> Kept {
    let Some(scope) = scope else { return Kept::Known(true) };
    if scope.backward {
        return Kept::Known(true);
    }
    // Walk up to the statement (no higher than where the walk began): returned, yielded,
    // or assigned. The named nodes know their parents (a node's `parent()` searches down
    // from the root).
    let mut up = at;
    let mut names: Vec<String> = Vec::new();
    while let Some(parent_at) = nodes.parent(up).filter(|_| up != root) {
        up = parent_at;
        let parent = nodes.node(up);
        match nodes.kind(up) {
            "return_statement" | "yield" => return Kept::Known(true),
            "assignment" | "augmented_assignment" => {
                let Some(left) = nodes.field_of(parent, "left") else { return Kept::Known(true) };
                let mut targets = vec![left];
                while let Some(t) = targets.pop() {
                    match t.kind_name() {
                        "identifier" => names.push(text(source, t).to_owned()),
                        "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple" | "list" => targets.extend(named_children(t)),
                        _ => return Kept::Known(true),
                    }
                }
                break;
            }
            "block" | "module" | "function_definition" => break,
            _ => {}
        }
    }
    // A name the result is assigned to, returned, yielded or stored later in the scope.
    if names.is_empty() {
        Kept::Known(false)
    } else {
        Kept::IfNameKept(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calls a module's summary records: (callee, gradients disabled, result kept).
    fn calls(source: &str) -> Vec<(String, bool, bool)> {
        let summary = ModuleSummary::new(&crate::parse(source).tree, source);
        summary.calls.into_iter().map(|c| (c.callee, c.grad_disabled, c.result_kept)).collect()
    }

    fn call(callee: &str, grad_disabled: bool, result_kept: bool) -> (String, bool, bool) {
        (callee.to_owned(), grad_disabled, result_kept)
    }

    #[test]
    fn calls_of_imported_names_carry_their_gradient_context() {
        let found = calls(
            "import torch\nfrom .utils import evaluate\nfrom .models import DDPM\n\n\
             with torch.no_grad():\n    evaluate(net)\n    def later():\n        evaluate(net)\n\n\
             @torch.inference_mode()\ndef sample():\n    ddpm = DDPM().to('cuda')\n    out = ddpm.sample(4)\n    return out\n\n\
             def peek():\n    x = evaluate(net)\n    print(x)\n    torch.manual_seed(0)\n",
        );
        assert_eq!(
            found,
            [
                call(".utils.evaluate", true, false),
                // A function runs where it is called, not under the `with` around its def.
                call(".utils.evaluate", false, false),
                call(".models.DDPM", true, false),
                call(".utils.evaluate", false, false),
                // A method of the instance a name holds; its result is returned.
                call(".models.DDPM.sample", true, true),
            ]
        );
    }

    #[test]
    fn kept_results_star_imports_and_instances() {
        let found = calls(
            "from .models import A, B, Net\nfrom helpers import *\n\n\
             def train(batch):\n    m = A()\n    m = B()\n    m.run()\n    loss = compute(batch)\n    loss.backward()\n\n\
             class Trainer:\n    def __init__(self):\n        self.model = Net()\n    def step(self):\n        self.model.sample()\n",
        );
        assert_eq!(
            found,
            [
                // `train` backpropagates: what its calls return may reach the backward pass.
                call(".models.A", false, true),
                call(".models.B", false, true),
                // A name the module does not bind: possibly from the star import.
                call("compute", false, true),
                // Stored on `self`: kept.
                call(".models.Net", false, true),
                // `m` holds an `A` or a `B`: the method of either.
                call(".models.A.run", false, true),
                call(".models.B.run", false, true),
                // A receiver of unknown class whose result is kept: any class's method.
                call("?.backward", false, true),
                // `self.model` holds a `Net`.
                call(".models.Net.sample", false, false),
            ]
        );
    }

    #[test]
    fn a_result_is_kept_by_what_its_own_scope_returns_or_stores_later() {
        let found = calls(
            "from .utils import evaluate\n\n\
             def later_returned(net):\n    out = evaluate(net)\n    print(out)\n    return out\n\n\
             def stored(net, log):\n    out = evaluate(net)\n    log['out'] = out\n\n\
             def only_read(net):\n    out = evaluate(net)\n    class Holder:\n        kept = out\n        def get(self):\n            return out\n    print(out)\n\n\
             def nested_returns_are_not_its_own(net):\n    out = evaluate(net)\n    def inner():\n        return out\n    print(out)\n",
        );
        assert_eq!(
            found,
            [
                // Returned after the call: the walk decides when it leaves the function.
                call(".utils.evaluate", false, true),
                call(".utils.evaluate", false, true),
                // What a class body or a nested function returns or stores is theirs.
                call(".utils.evaluate", false, false),
                call(".utils.evaluate", false, false),
            ]
        );
    }
}
