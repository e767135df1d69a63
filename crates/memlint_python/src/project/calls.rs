//! The calls a module makes of names it imports, with the gradient context each runs in
//! (`with torch.no_grad()`, a decorated function) and whether its result is kept: the
//! walk that fills [`ModuleSummary::calls`], including method calls on names holding an
//! instance of an imported class (`ddpm = DDPM(); ddpm.sample()`).
//!
//! Asks the module's own [`ModuleSummary`] (its imports, functions and classes, filled
//! before this walk runs) and [`super::syntax`]; resolves nothing across modules.

use std::collections::HashMap;

use tree_sitter::Node;

use super::summary::{ImportedCall, ModuleSummary};
use super::syntax::{decorator_disables_grad, dotted, returned_callee_of, runs_backward, text, with_items_disabling_grad};
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
    /// What [`result_kept`] asks of the functions (and the module) around the walk's place,
    /// innermost last: read once per scope when the walk enters it, not once per call in it
    /// (a module-level script has thousands of calls).
    scopes: Vec<ScopeFacts>,
}

/// Of one function body (or the module): does it run a backward pass, and which words
/// appear in what it returns or yields and in what it stores on attributes or items.
struct ScopeFacts {
    backward: bool,
    kept_words: std::collections::HashSet<String>,
}

impl CallCollector {
    /// The walk enters `scope` (a function definition, or the module).
    pub(super) fn enter_scope(&mut self, source: &str, scope: Node<'_>) {
        self.scopes.push(scope_facts(source, scope));
    }

    pub(super) fn finish(mut self) -> Vec<ImportedCall> {
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
    /// The calls of imported names under `node`, with whether gradients are disabled there
    /// (`with torch.no_grad()` / `inference_mode()` / `set_grad_enabled(False)`, a function
    /// decorated with them). One walk; the module's own call graph is not followed.
    pub(super) fn collect_calls(&self, source: &str, node: Node<'_>, disabled: bool, out: &mut CallCollector) {
        self.collect_calls_at(source, &mut node.walk(), disabled, out);
    }

    /// [`Self::collect_calls`] under the node at `cursor`, which it leaves there: one cursor
    /// walks the subtree (a cursor per node, each allocating its stack, showed in profiles).
    fn collect_calls_at<'t>(&self, source: &str, cursor: &mut tree_sitter::TreeCursor<'t>, disabled: bool, out: &mut CallCollector) {
        if !cursor.goto_first_child() {
            return;
        }
        loop {
            let child = cursor.node();
            if child.is_named() && !self.collect_calls_of_definition(source, child, disabled, out) {
                match child.kind_name() {
                    "call" => self.record_call(source, cursor, disabled, out),
                    "assignment" => self.record_instance(source, child, out),
                    _ => {}
                }
                self.collect_calls_at(source, cursor, disabled, out);
            }
            if !cursor.goto_next_sibling() {
                break;
            }
        }
        cursor.goto_parent();
    }

    /// Definitions and `with` blocks change the gradient context of what they contain:
    /// collects their calls and returns true; false for any other node. Out of
    /// [`Self::collect_calls_at`] so that its recursion's frame stays small.
    #[inline(never)]
    fn collect_calls_of_definition(&self, source: &str, child: Node<'_>, disabled: bool, out: &mut CallCollector) -> bool {
        match child.kind_name() {
            "decorated_definition" => {
                let decorators = named_children(child).into_iter().filter(|c| c.kind_name() == "decorator").filter_map(|d| d.named_child(0));
                let inner = decorators.into_iter().any(|d| decorator_disables_grad(source, d));
                if let Some(def) = child.field("definition") {
                    if let Some(body) = def.field("body") {
                        // A decorated class's body runs in the enclosing scope.
                        let function = def.kind_name() == "function_definition";
                        if function {
                            out.enter_scope(source, def);
                        }
                        self.collect_calls(source, body, inner, out);
                        if function {
                            out.scopes.pop();
                        }
                    }
                }
                true
            }
            "function_definition" => {
                // A function runs where it is called: not under the `with` around its def.
                if let Some(body) = child.field("body") {
                    out.enter_scope(source, child);
                    self.collect_calls(source, body, false, out);
                    out.scopes.pop();
                }
                true
            }
            "with_statement" => {
                let (items, off) = with_items_disabling_grad(source, child);
                for item in &items {
                    self.collect_calls(source, *item, disabled, out);
                }
                if let Some(body) = child.field("body") {
                    self.collect_calls(source, body, disabled || off, out);
                }
                true
            }
            _ => false,
        }
    }

    /// A call of an imported name (not torch's), with its gradient context.
    fn record_call(&self, source: &str, at: &tree_sitter::TreeCursor<'_>, disabled: bool, out: &mut CallCollector) {
        let call = at.node();
        let Some(callee) = call.field("function").and_then(|f| dotted(source, f)) else { return };
        let (first, rest) = match callee.split_once('.') {
            Some((f, r)) => (f, Some(r)),
            None => (callee.as_str(), None),
        };
        let qualified = match self.through_imports(&callee) {
            Some(q) => Some(q),
            None if rest.is_none() && !self.star_imports.is_empty() && self.function(first).is_none() && self.class(first).is_none() => {
                Some(first.to_owned())
            }
            None => None,
        };
        match qualified {
            Some(q) if !q.starts_with("torch.") => out.calls.push(ImportedCall { callee: q, grad_disabled: disabled, result_kept: result_kept(source, at, out.scopes.last()) }),
            Some(_) => {}
            // `ddpm.sample(...)` on a name this module binds, `self.model.sample(...)` on an
            // attribute of `self`: a method of what it holds.
            None => {
                let receiver = match rest.and_then(|r| r.split_once('.')) {
                    Some((attribute, method)) if first == "self" && !method.contains('.') => Some((format!("self.{attribute}"), method)),
                    _ => rest.filter(|r| !r.contains('.')).map(|method| (first.to_owned(), method)),
                };
                if let Some((receiver, method)) = receiver {
                    if self.function(first).is_none() && self.class(first).is_none() {
                        let kept = result_kept(source, at, out.scopes.last());
                        out.receiver_calls.push((receiver, method.to_owned(), disabled, kept));
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
    /// holds an instance of an imported class, for the method calls on it.
    fn record_instance(&self, source: &str, assignment: Node<'_>, out: &mut CallCollector) {
        let (Some(left), Some(value)) = (assignment.field("left"), assignment.field("right")) else { return };
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
fn result_kept(source: &str, at: &tree_sitter::TreeCursor<'_>, scope: Option<&ScopeFacts>) -> bool {
    let Some(facts) = scope else { return true };
    if facts.backward {
        return true;
    }
    // The cursor's ancestors are kept on its stack: walking up costs nothing (a node's
    // `parent()` searches down from the root).
    let mut up = at.clone();
    // Walk up to the statement: returned, yielded, or assigned.
    let mut names: Vec<String> = Vec::new();
    while up.goto_parent() {
        let parent = up.node();
        match parent.kind_name() {
            "return_statement" | "yield" => return true,
            "assignment" | "augmented_assignment" => {
                let Some(left) = parent.field("left") else { return true };
                let mut targets = vec![left];
                while let Some(t) = targets.pop() {
                    match t.kind_name() {
                        "identifier" => names.push(text(source, t).to_owned()),
                        "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple" | "list" => targets.extend(named_children(t)),
                        _ => return true,
                    }
                }
                break;
            }
            "block" | "module" | "function_definition" => break,
            _ => {}
        }
    }
    // A name the result is assigned to, returned, yielded or stored later.
    names.iter().any(|name| facts.kept_words.contains(name))
}

/// [`ScopeFacts`] of `scope`, from one walk of its body (nested definitions left out).
fn scope_facts(source: &str, scope: Node<'_>) -> ScopeFacts {
    let body = scope.field("body").unwrap_or(scope);
    let mut kept_words = std::collections::HashSet::new();
    let mut add_words = |t: &str| {
        for w in t.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty()) {
            kept_words.insert(w.to_owned());
        }
    };
    let mut cursor = body.walk();
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        match n.kind_name() {
            "return_statement" | "yield" => add_words(text(source, n)),
            "assignment" => {
                if let (Some(left), Some(right)) = (n.field("left"), n.field("right")) {
                    if matches!(left.kind_name(), "attribute" | "subscript") {
                        add_words(text(source, right));
                    }
                }
            }
            "function_definition" | "class_definition" if n.id() != body.id() && n.id() != scope.id() => continue,
            _ => {}
        }
        stack.extend(n.named_children(&mut cursor));
    }
    ScopeFacts { backward: runs_backward(source, body), kept_words }
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
}
