//! The project around a file: what other modules need to know of one module
//! ([`ModuleSummary`]), the question the semantic model asks about the names a module
//! imports ([`ProjectIndex`]), and the resolution of those names through the project's
//! modules ([`ProjectResolver`]: re-exports, star imports, base classes, factories),
//! over a [`ModuleLoader`] that the front ends implement (they do the I/O; nothing here
//! reads a file).
//!
//! Names are resolved as the linted module spells them through its imports: after
//! `from .models import Generator`, `Generator` is `.models.Generator`; after
//! `from . import nets`, `nets.Net` is `.nets.Net`; after `from nets import *`, a name the
//! module does not bind is looked up in `nets`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tree_sitter::{Node, Tree};

use crate::semantic::{named_children, unparenthesize};
use crate::NodeExt;

/// How a function stores one of its arguments into state that outlives the call
/// (`self.total += val`, `self.preds.append(preds)`, a module-level list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// Added into a running total (`self.total += val`, `self.sum = self.sum + val * n`).
    Accumulates,
    /// Appended to a container (`self.values.append(val)`, `HISTORY.extend(val)`).
    Appends,
}

/// One argument a function stores beyond the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredArgument {
    /// Its position among the arguments a caller passes (`self` not counted for methods).
    pub position: usize,
    /// The parameter's name (for keyword arguments).
    pub name: String,
    pub kind: StoreKind,
    /// Where it is stored (`self.total`), for messages.
    pub into: String,
}

/// A function or method, as other modules see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionSummary {
    pub name: String,
    /// Decorated with `torch.no_grad()` / `torch.inference_mode()`.
    pub no_grad: bool,
    /// The callees (dotted, as this module spells them) whose result it returns:
    /// `return Net(cfg)`, `m = Net(); m.cuda(); return m`, `return m.to(dev)`.
    pub returns_calls: Vec<String>,
    /// The arguments it stores into state outliving the call.
    pub stores: Vec<StoredArgument>,
    /// Its body runs a backward pass (`x.backward()`, `torch.autograd.grad`): what it is
    /// given may reach one.
    pub backprops: bool,
    /// For a function that returns a tuple (`return model, optimizer`): the callee (as this
    /// module spells it, through the function's own assignments) each element is built by,
    /// from the first such `return`.
    pub returns_elements: Vec<Option<String>>,
    /// The position (among the arguments a caller passes) of the parameter it returns, when
    /// every `return` gives that parameter back (itself, through methods that return the
    /// module, or a conditional of those: `return x.cuda() if flag else x`).
    pub returns_parameter: Option<usize>,
}

/// A class, as other modules see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassSummary {
    pub name: String,
    /// The bases, dotted as this module spells them (resolved through its imports later).
    pub bases: Vec<String>,
    pub methods: Vec<FunctionSummary>,
    /// The calls of its `__init__` that may load a pretrained network (resolved through
    /// the module's imports later, see [`crate::loads_pretrained_network`]); empty when
    /// the class may freeze them (`crate::library::class_may_freeze`).
    pub pretrained_calls: Vec<PretrainedCall>,
    /// `self.X = Callee(...)` in its methods: (X, the callee as this module spells it),
    /// resolved later (a submodule when the callee builds a network).
    pub attributes: Vec<(String, String)>,
}

/// A call that may load a pretrained network: the callee as the module spells it, and
/// its keyword arguments that decide (`pretrained`, `weights`, `is_trainable`) as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PretrainedCall {
    pub callee: String,
    pub keywords: Vec<(String, String)>,
}

impl PretrainedCall {
    /// Does this call load a pretrained network, its callee being `qualified` (resolved
    /// through its module's imports; as spelled when it does not resolve)?
    pub fn loads_pretrained(&self, qualified: &str) -> bool {
        let keyword = |name: &str| self.keywords.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        crate::loads_pretrained_network(qualified, &keyword)
    }
}

/// The keyword arguments [`crate::loads_pretrained_network`] reads.
const PRETRAINED_KEYWORDS: &[&str] = &["pretrained", "weights", "is_trainable"];

/// What other files need to know of one module, computed from its tree in one walk of its
/// top-level statements and class bodies (function bodies only for their returns and
/// stores).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleSummary {
    pub classes: Vec<ClassSummary>,
    pub functions: Vec<FunctionSummary>,
    /// Module-level imports: the local name and what it stands for (relative names keep
    /// their dots: `from .models import G` gives (`G`, `.models.G`); `from . import m`
    /// gives (`m`, `.m`)).
    pub imports: Vec<(String, String)>,
    /// Modules imported with `from M import *`, as spelled.
    pub star_imports: Vec<String>,
    /// `__all__` when it is a literal list or tuple of strings.
    pub all: Option<Vec<String>>,
    /// The calls of names it imports, and of methods on names holding an instance of an
    /// imported class (`ddpm = DDPM(); ddpm.sample()` gives `DDPM.sample`, qualified
    /// through the imports; see [`ImportedCall`]).
    pub calls: Vec<ImportedCall>,
}

/// A call of an imported name, with the gradient context it runs in: what a module that
/// defines the function needs to know of its callers elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedCall {
    /// The callee through this module's imports (`.utils.evaluate`), or a plain name
    /// this module does not bind (possibly from a star import).
    pub callee: String,
    pub grad_disabled: bool,
    /// What the call returns may reach a backward pass or leave the caller: its function
    /// backpropagates anything, or returns, yields or stores the result (or a name it is
    /// assigned to) on an object. `false` when the caller only reads it.
    pub result_kept: bool,
}

/// What the walk of a module's calls gathers: the calls of imported names, and the method
/// calls on names that hold an instance of an imported class (`ddpm = DDPM(...)`, then
/// `ddpm.sample(...)`), recorded as calls of `DDPM.sample`.
#[derive(Default)]
struct CallCollector {
    calls: Vec<ImportedCall>,
    /// (receiver name, method, gradients disabled, result kept).
    receiver_calls: Vec<(String, String, bool, bool)>,
    /// What each name holds: the imported class it is built from (as this module spells
    /// it through its imports), `None` when it holds instances of different classes.
    instances: HashMap<String, Option<String>>,
}

impl CallCollector {
    fn finish(mut self) -> Vec<ImportedCall> {
        for (receiver, method, grad_disabled, result_kept) in std::mem::take(&mut self.receiver_calls) {
            if let Some(Some(class)) = self.instances.get(&receiver) {
                self.calls.push(ImportedCall { callee: format!("{class}.{method}"), grad_disabled, result_kept });
            }
        }
        self.calls
    }
}

/// The qualified name an import binds, from the module text of `from M import name`:
/// `from .a import b` -> `.a.b`, `from . import b` -> `.b`, `from .. import b` -> `..b`.
pub fn join_import(module: &str, name: &str) -> String {
    if module.ends_with('.') || module.is_empty() {
        format!("{module}{name}")
    } else {
        format!("{module}.{name}")
    }
}

fn text<'s>(source: &'s str, node: Node<'_>) -> &'s str {
    &source[node.byte_range()]
}

fn dotted(source: &str, node: Node<'_>) -> Option<String> {
    match node.kind_name() {
        "identifier" => Some(text(source, node).to_owned()),
        "attribute" => Some(format!("{}.{}", dotted(source, node.field("object")?)?, text(source, node.field("attribute")?))),
        _ => None,
    }
}

/// `torch.no_grad()`, `torch.inference_mode()` (not `inference_mode(False)`),
/// `torch.set_grad_enabled(False)`.
fn disables_grad_call(source: &str, call: Node<'_>) -> bool {
    let Some(name) = call.field("function").and_then(|f| dotted(source, f)) else { return false };
    let first_arg = call.field("arguments").and_then(|a| a.named_child(0)).map(|a| text(source, a));
    match name.rsplit('.').next().unwrap_or("") {
        "no_grad" => true,
        "inference_mode" => !first_arg.map(|a| a.ends_with("False")).unwrap_or(false),
        "set_grad_enabled" => first_arg.map(|a| a.ends_with("False")).unwrap_or(false),
        _ => false,
    }
}

/// Decorators that disable gradients (`@torch.no_grad()`, `@torch.inference_mode()`,
/// `@no_grad`).
fn decorator_disables_grad(source: &str, decorator: Node<'_>) -> bool {
    let target = if decorator.kind_name() == "call" { decorator.field("function") } else { Some(decorator) };
    let Some(name) = target.and_then(|t| dotted(source, t)) else { return false };
    let last = name.rsplit('.').next().unwrap_or("");
    if last == "inference_mode" && decorator.kind_name() == "call" {
        let off = decorator.field("arguments").and_then(|a| a.named_child(0)).map(|a| text(source, a).ends_with("False"));
        return off != Some(true);
    }
    matches!(last, "no_grad" | "inference_mode")
}

impl ModuleSummary {
    /// The summary of a parsed module.
    pub fn new(tree: &Tree, source: &str) -> ModuleSummary {
        let mut summary = ModuleSummary::default();
        let root = tree.root_node();
        for statement in named_children(root) {
            summary.statement(source, statement);
        }
        let mut collector = CallCollector::default();
        summary.collect_calls(source, root, false, &mut collector);
        summary.calls = collector.finish();
        summary
    }

    /// The calls of imported names under `node`, with whether gradients are disabled there
    /// (`with torch.no_grad()` / `inference_mode()` / `set_grad_enabled(False)`, a function
    /// decorated with them). One walk; the module's own call graph is not followed.
    fn collect_calls(&self, source: &str, node: Node<'_>, disabled: bool, out: &mut CallCollector) {
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
                    "call" => self.record_call(source, child, disabled, out),
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
                        self.collect_calls(source, body, inner, out);
                    }
                }
                true
            }
            "function_definition" => {
                // A function runs where it is called: not under the `with` around its def.
                if let Some(body) = child.field("body") {
                    self.collect_calls(source, body, false, out);
                }
                true
            }
            "with_statement" => {
                let items = named_children(child).into_iter().find(|c| c.kind_name() == "with_clause").map(named_children).unwrap_or_default();
                for item in &items {
                    self.collect_calls(source, *item, disabled, out);
                }
                let off = items.iter().any(|item| {
                    let Some(mut value) = item.field("value") else { return false };
                    if value.kind_name() == "as_pattern" {
                        match value.named_child(0) {
                            Some(v) => value = v,
                            None => return false,
                        }
                    }
                    value.kind_name() == "call" && disables_grad_call(source, value)
                });
                if let Some(body) = child.field("body") {
                    self.collect_calls(source, body, disabled || off, out);
                }
                true
            }
            _ => false,
        }
    }

    /// A call of an imported name (not torch's), with its gradient context.
    fn record_call(&self, source: &str, call: Node<'_>, disabled: bool, out: &mut CallCollector) {
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
            Some(q) if !q.starts_with("torch.") => out.calls.push(ImportedCall { callee: q, grad_disabled: disabled, result_kept: result_kept(source, call) }),
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
                        out.receiver_calls.push((receiver, method.to_owned(), disabled, result_kept(source, call)));
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
        // One name holding instances of two classes in this module: neither is followed.
        match out.instances.get(&name) {
            Some(Some(existing)) if *existing != class => {
                out.instances.insert(name, None);
            }
            Some(_) => {}
            None => {
                out.instances.insert(name, Some(class));
            }
        }
    }

    fn statement(&mut self, source: &str, statement: Node<'_>) {
        match statement.kind_name() {
            "decorated_definition" => {
                let decorators: Vec<Node> = named_children(statement)
                    .into_iter()
                    .filter(|c| c.kind_name() == "decorator")
                    .filter_map(|d| d.named_child(0))
                    .collect();
                if let Some(def) = statement.field("definition") {
                    match def.kind_name() {
                        "function_definition" => {
                            let mut f = function_summary(source, def, false);
                            f.no_grad = decorators.iter().any(|d| decorator_disables_grad(source, *d));
                            self.functions.push(f);
                        }
                        "class_definition" => self.classes.push(class_summary(source, def)),
                        _ => {}
                    }
                }
            }
            "function_definition" => self.functions.push(function_summary(source, statement, false)),
            "class_definition" => self.classes.push(class_summary(source, statement)),
            "import_statement" => {
                for child in named_children(statement) {
                    match child.kind_name() {
                        "dotted_name" => {
                            let name = text(source, child);
                            let first = name.split('.').next().unwrap_or(name);
                            self.imports.push((first.to_owned(), first.to_owned()));
                        }
                        "aliased_import" => {
                            if let (Some(n), Some(a)) = (child.field("name"), child.field("alias")) {
                                self.imports.push((text(source, a).to_owned(), text(source, n).to_owned()));
                            }
                        }
                        _ => {}
                    }
                }
            }
            "import_from_statement" => {
                let module = statement.field("module_name").map(|m| text(source, m)).unwrap_or("");
                if named_children(statement).iter().any(|c| c.kind_name() == "wildcard_import") {
                    self.star_imports.push(module.to_owned());
                    return;
                }
                let mut cursor = statement.walk();
                for child in statement.children_by_field_name("name", &mut cursor) {
                    let (name, local) = match child.kind_name() {
                        "dotted_name" => (text(source, child), text(source, child)),
                        "aliased_import" => match (child.field("name"), child.field("alias")) {
                            (Some(n), Some(a)) => (text(source, n), text(source, a)),
                            _ => continue,
                        },
                        _ => continue,
                    };
                    self.imports.push((local.to_owned(), join_import(module, name)));
                }
            }
            "expression_statement" => {
                // `__all__ = ["A", "B"]` (also `+=`).
                let Some(assign) = statement.named_child(0) else { return };
                if !matches!(assign.kind_name(), "assignment" | "augmented_assignment") {
                    return;
                }
                let (Some(left), Some(right)) = (assign.field("left"), assign.field("right")) else { return };
                if text(source, left) != "__all__" || !matches!(right.kind_name(), "list" | "tuple") {
                    return;
                }
                let names: Vec<String> = named_children(right)
                    .into_iter()
                    .filter(|s| s.kind_name() == "string")
                    .map(|s| text(source, s).trim_matches(|c| c == '"' || c == '\'').to_owned())
                    .collect();
                match &mut self.all {
                    Some(all) if assign.kind_name() == "augmented_assignment" => all.extend(names),
                    _ => self.all = Some(names),
                }
            }
            // Definitions and imports under `if TYPE_CHECKING:` / `try:` still bind.
            "if_statement" | "try_statement" => {
                for child in named_children(statement) {
                    if child.kind_name() == "block" {
                        for s in named_children(child) {
                            self.statement(source, s);
                        }
                    } else if matches!(child.kind_name(), "else_clause" | "except_clause" | "elif_clause" | "finally_clause") {
                        for block in named_children(child).into_iter().filter(|b| b.kind_name() == "block") {
                            for s in named_children(block) {
                                self.statement(source, s);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }

    pub fn class(&self, name: &str) -> Option<&ClassSummary> {
        self.classes.iter().rev().find(|c| c.name == name)
    }

    pub fn function(&self, name: &str) -> Option<&FunctionSummary> {
        self.functions.iter().rev().find(|f| f.name == name)
    }

    pub fn import(&self, local: &str) -> Option<&str> {
        self.imports.iter().rev().find(|(l, _)| l == local).map(|(_, q)| q.as_str())
    }

    /// Does `from this_module import *` bind `name`? (`__all__` when there is one, else
    /// every name not starting with `_`.)
    pub fn exports_by_star(&self, name: &str) -> bool {
        match &self.all {
            Some(all) => all.iter().any(|n| n == name),
            None => !name.starts_with('_'),
        }
    }
}

pub(crate) fn class_summary(source: &str, class: Node<'_>) -> ClassSummary {
    let name = class.field("name").map(|n| text(source, n).to_owned()).unwrap_or_default();
    let bases = class
        .field("superclasses")
        .map(|s| named_children(s).into_iter().filter_map(|b| dotted(source, b)).collect())
        .unwrap_or_default();
    let mut methods = Vec::new();
    let mut pretrained_calls = Vec::new();
    let mut attributes = Vec::new();
    if let Some(body) = class.field("body") {
        let may_freeze = crate::library::class_may_freeze(text(source, body));
        for item in named_children(body) {
            let (def, decorators) = match item.kind_name() {
                "function_definition" => (item, Vec::new()),
                "decorated_definition" => match item.field("definition").filter(|d| d.kind_name() == "function_definition") {
                    Some(def) => (
                        def,
                        named_children(item).into_iter().filter(|c| c.kind_name() == "decorator").filter_map(|d| d.named_child(0)).collect(),
                    ),
                    None => continue,
                },
                _ => continue,
            };
            let is_static = decorators.iter().any(|d| text(source, *d) == "staticmethod");
            let mut f = function_summary(source, def, !is_static);
            f.no_grad = decorators.iter().any(|d| decorator_disables_grad(source, *d));
            if f.name == "__init__" && !may_freeze {
                if let Some(init_body) = def.field("body") {
                    pretrained_calls_in(source, init_body, &mut pretrained_calls);
                }
            }
            if let Some(method_body) = def.field("body") {
                attribute_calls(source, method_body, &mut attributes);
            }
            methods.push(f);
        }
    }
    ClassSummary { name, bases, methods, pretrained_calls, attributes }
}

/// `self.X = Callee(...)` (through methods that return the module) under `body`.
fn attribute_calls(source: &str, body: Node<'_>, out: &mut Vec<(String, String)>) {
    let mut cursor = body.walk();
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        match n.kind_name() {
            "function_definition" | "class_definition" | "lambda" => continue,
            "assignment" => {
                if let (Some(left), Some(right)) = (n.field("left"), n.field("right")) {
                    if left.kind_name() == "attribute" && left.field("object").is_some_and(|o| text(source, o) == "self") {
                        if let (Some(attr), Some(callee)) = (left.field("attribute"), returned_callee_of(source)(right)) {
                            if unparenthesize(right).kind_name() == "call" {
                                out.push((text(source, attr).to_owned(), callee));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        stack.extend(n.named_children(&mut cursor));
    }
}

/// The calls under `node` that may load a pretrained network: `from_pretrained`, a call
/// given `pretrained=` or `weights=`, a `load` (`torch.hub.load`).
fn pretrained_calls_in(source: &str, node: Node<'_>, out: &mut Vec<PretrainedCall>) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if matches!(n.kind_name(), "function_definition" | "class_definition" | "lambda") && n.id() != node.id() {
            continue;
        }
        if n.kind_name() == "call" {
            if let Some(callee) = n.field("function").and_then(|f| dotted(source, f)) {
                let keywords: Vec<(String, String)> = n
                    .field("arguments")
                    .map(named_children)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|a| a.kind_name() == "keyword_argument")
                    .filter_map(|a| Some((text(source, a.field("name")?).to_owned(), text(source, a.field("value")?).to_owned())))
                    .filter(|(k, _)| PRETRAINED_KEYWORDS.contains(&k.as_str()))
                    .collect();
                let last = callee.rsplit('.').next().unwrap_or(&callee);
                if last == "from_pretrained" || last == "load" || keywords.iter().any(|(k, _)| k != "is_trainable") {
                    out.push(PretrainedCall { callee, keywords });
                }
            }
        }
        stack.extend(named_children(n));
    }
}

/// The methods of a class definition of the linted module (for `meter.update(loss)` on
/// an instance of a local class).
pub(crate) fn class_methods(source: &str, class: Node<'_>) -> Vec<FunctionSummary> {
    class_summary(source, class).methods
}

/// The parameters of a function: (name, position a caller passes it at).
fn parameters(source: &str, def: Node<'_>, method: bool) -> Vec<String> {
    let Some(params) = def.field("parameters") else { return Vec::new() };
    let mut names = Vec::new();
    for p in named_children(params) {
        // `*args`, `**kwargs` and the bare `*` end the positional parameters we track.
        match crate::semantic::parameter_name(p) {
            Some(i) => names.push(text(source, i).to_owned()),
            None => break,
        }
    }
    if method && !names.is_empty() {
        names.remove(0);
    }
    names
}

/// The statements of a body, nested blocks included, nested functions and classes not.
fn statements_of<'t>(body: Node<'t>, out: &mut Vec<Node<'t>>) {
    for s in named_children(body) {
        match s.kind_name() {
            "expression_statement" | "return_statement" => out.push(s),
            "block" | "else_clause" | "elif_clause" | "except_clause" | "finally_clause" | "if_statement" | "for_statement"
            | "while_statement" | "with_statement" | "try_statement" => statements_of(s, out),
            _ => {}
        }
    }
}

/// Does `expr` use `name` bare (itself, or as an operand of arithmetic), so that what is
/// stored is the argument with whatever history it carries (`val`, `val * n`), not a
/// number made of it (`val.item()`, `float(val)`)?
fn uses_bare(source: &str, expr: Node<'_>, name: &str) -> bool {
    let expr = unparenthesize(expr);
    match expr.kind_name() {
        "identifier" => text(source, expr) == name,
        "binary_operator" => {
            expr.field("left").map(|l| uses_bare(source, l, name)).unwrap_or(false)
                || expr.field("right").map(|r| uses_bare(source, r, name)).unwrap_or(false)
        }
        _ => false,
    }
}

/// Is `target` state that outlives a call: `self.x`, `self.x[k]`, or a module-level name
/// (a `global`, or any name the function does not bind)?
fn outliving_target(source: &str, target: Node<'_>, locals: &HashSet<String>) -> Option<String> {
    let t = unparenthesize(target);
    match t.kind_name() {
        "attribute" => {
            let d = dotted(source, t)?;
            (d.starts_with("self.") || d.starts_with("cls.")).then_some(d)
        }
        "subscript" => outliving_target(source, t.field("value")?, locals),
        "identifier" => {
            let n = text(source, t);
            (!locals.contains(n)).then(|| n.to_owned())
        }
        _ => None,
    }
}

fn function_summary(source: &str, def: Node<'_>, method: bool) -> FunctionSummary {
    let name = def.field("name").map(|n| text(source, n).to_owned()).unwrap_or_default();
    let params = parameters(source, def, method);
    let mut statements = Vec::new();
    if let Some(body) = def.field("body") {
        statements_of(body, &mut statements);
    }
    // Names the function binds (parameters and assignment targets): not module state.
    let mut locals: HashSet<String> = params.iter().cloned().collect();
    if method {
        locals.insert("self".to_owned());
    }
    let mut rebound: HashSet<String> = HashSet::new();
    let mut local_calls: Vec<(String, String)> = Vec::new();
    for s in &statements {
        let Some(e) = s.named_child(0) else { continue };
        if e.kind_name() == "assignment" {
            if let Some(left) = e.field("left") {
                if left.kind_name() == "identifier" {
                    let n = text(source, left).to_owned();
                    if params.contains(&n) {
                        rebound.insert(n.clone());
                    }
                    if let Some(callee) = e.field("right").and_then(returned_callee_of(source)) {
                        local_calls.push((n.clone(), callee));
                    }
                    locals.insert(n);
                }
            }
        }
    }
    let mut stores = Vec::new();
    let mut returns_calls = Vec::new();
    for s in &statements {
        if s.kind_name() == "return_statement" {
            if let Some(value) = s.named_child(0) {
                if let Some(callee) = returned_callee_of(source)(value) {
                    // `return m` / `return m.to(dev)` after `m = Net()`.
                    match local_calls.iter().rev().find(|(n, _)| *n == callee) {
                        Some((_, c)) => returns_calls.push(c.clone()),
                        None if !locals.contains(callee.split('.').next().unwrap_or("")) || callee.contains('.') => {
                            returns_calls.push(callee)
                        }
                        None => {}
                    }
                }
            }
            continue;
        }
        let Some(e) = s.named_child(0) else { continue };
        let stored = match e.kind_name() {
            // `self.total += val`
            "augmented_assignment" if e.field("operator").map(|o| text(source, o) == "+=").unwrap_or(true) => {
                e.field("left").zip(e.field("right")).map(|(l, r)| (l, r, StoreKind::Accumulates))
            }
            // `self.total = self.total + val`
            "assignment" => e.field("left").zip(e.field("right")).filter(|(l, r)| {
                r.kind_name() == "binary_operator" && r.field("left").map(|rl| text(source, rl) == text(source, *l)).unwrap_or(false)
            }).map(|(l, r)| (l, r, StoreKind::Accumulates)),
            // `self.values.append(val)`
            "call" => {
                let callee = e.field("function").filter(|c| c.kind_name() == "attribute");
                let method_name = callee.and_then(|c| c.field("attribute")).map(|a| text(source, a));
                match (callee.and_then(|c| c.field("object")), method_name, e.field("arguments").and_then(|a| a.named_child(0))) {
                    (Some(obj), Some("append" | "extend" | "add" | "put" | "appendleft"), Some(arg)) => Some((obj, arg, StoreKind::Appends)),
                    _ => None,
                }
            }
            _ => None,
        };
        let Some((target, value, kind)) = stored else { continue };
        let Some(into) = outliving_target(source, target, &locals) else { continue };
        for (position, p) in params.iter().enumerate() {
            if rebound.contains(p) {
                continue;
            }
            if uses_bare(source, value, p) && !stores.iter().any(|s: &StoredArgument| s.position == position) {
                stores.push(StoredArgument { position, name: p.clone(), kind, into: into.clone() });
            }
        }
    }
    let backprops = def.field("body").is_some_and(|b| runs_backward(source, b));
    let returns_parameter = returned_parameter(source, def, &statements).and_then(|p| params.iter().position(|n| *n == p));
    let returns_elements = statements
        .iter()
        .filter(|s| s.kind_name() == "return_statement")
        .filter_map(|s| s.named_child(0).map(unparenthesize))
        .find(|v| matches!(v.kind_name(), "expression_list" | "tuple"))
        .map(|tuple| {
            named_children(tuple)
                .into_iter()
                .map(|element| {
                    let callee = returned_callee_of(source)(element)?;
                    match local_calls.iter().rev().find(|(n, _)| *n == callee) {
                        Some((_, c)) => Some(c.clone()),
                        None if unparenthesize(element).kind_name() == "call" => Some(callee),
                        None => None,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    FunctionSummary { name, no_grad: false, returns_calls, stores, backprops, returns_parameter, returns_elements }
}

/// The parameter every `return` of a function gives back (through methods that return
/// the module, and both branches of a conditional), by name. `statements`: the function's
/// statements (nested blocks included).
pub(crate) fn returned_parameter(source: &str, def: Node<'_>, statements: &[Node<'_>]) -> Option<String> {
    let params = def.field("parameters").map(named_children).unwrap_or_default();
    let names: Vec<&str> = params.iter().filter_map(|p| crate::semantic::parameter_name(*p)).map(|n| text(source, n)).collect();
    let mut found: Option<String> = None;
    let mut returns = 0;
    for s in statements.iter().filter(|s| s.kind_name() == "return_statement") {
        returns += 1;
        let value = s.named_child(0)?;
        let mut pending = vec![value];
        while let Some(v) = pending.pop() {
            let v = unparenthesize(v);
            match v.kind_name() {
                "conditional_expression" => {
                    let parts = named_children(v);
                    pending.extend([parts.first(), parts.get(2)].into_iter().flatten().copied());
                }
                _ => {
                    let returned = returned_callee_of(source)(v)?;
                    if !names.contains(&returned.as_str()) || found.as_ref().is_some_and(|f| *f != returned) {
                        return None;
                    }
                    // Only through methods that return the module: a call of the parameter
                    // itself (`return x(y)`) gives its result, not it.
                    if unparenthesize(v).kind_name() == "call" && returned_callee_of(source)(unparenthesize(v)).as_deref() == Some(returned.as_str()) {
                        let mut inner = unparenthesize(v);
                        while inner.kind_name() == "call" {
                            let callee = inner.field("function")?;
                            if callee.kind_name() != "attribute" {
                                return None;
                            }
                            inner = unparenthesize(callee.field("object")?);
                        }
                    }
                    found = Some(returned);
                }
            }
        }
    }
    if returns == 0 {
        return None;
    }
    found
}

/// Does `node` (a body; nested functions included, conservatively) call `backward()` or
/// `autograd.grad` / `autograd.backward`?
fn runs_backward(source: &str, node: Node<'_>) -> bool {
    let mut cursor = node.walk();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind_name() == "call" {
            if let Some(callee) = n.field("function").and_then(|f| dotted(source, f)) {
                if callee.ends_with(".backward") || callee.ends_with("autograd.grad") {
                    return true;
                }
            }
        }
        stack.extend(n.named_children(&mut cursor));
    }
    false
}

/// May the result of `call` reach a backward pass or leave its caller? Its function (or the
/// module) runs a backward pass, or the call is returned or yielded, stored on an
/// attribute or item, or assigned to a name the function returns, yields or stores.
fn result_kept(source: &str, call: Node<'_>) -> bool {
    let mut scope = call.parent();
    while let Some(n) = scope {
        if matches!(n.kind_name(), "function_definition" | "module") {
            break;
        }
        scope = n.parent();
    }
    let Some(scope) = scope else { return true };
    let body = scope.field("body").unwrap_or(scope);
    if runs_backward(source, body) {
        return true;
    }
    // Walk up to the statement: returned, yielded, or assigned.
    let mut current = call;
    let mut names: Vec<String> = Vec::new();
    while let Some(parent) = current.parent() {
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
            _ => current = parent,
        }
    }
    // A name the result is assigned to, returned, yielded or stored later.
    let mut cursor = body.walk();
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        match n.kind_name() {
            "return_statement" | "yield" => {
                let t = text(source, n);
                if names.iter().any(|name| t.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == name)) {
                    return true;
                }
            }
            "assignment" => {
                if let (Some(left), Some(right)) = (n.field("left"), n.field("right")) {
                    let stored = matches!(left.kind_name(), "attribute" | "subscript");
                    let r = text(source, right);
                    if stored && names.iter().any(|name| r.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == name)) {
                        return true;
                    }
                }
            }
            "function_definition" | "class_definition" if n.id() != body.id() && n.id() != scope.id() => continue,
            _ => {}
        }
        stack.extend(n.named_children(&mut cursor));
    }
    false
}

/// For a returned or assigned expression: the dotted callee of the call it is, through
/// methods that return the module itself (`Net(cfg).cuda()` -> `Net`), or a plain name
/// (`m`, to look up in the function's assignments).
fn returned_callee_of(source: &str) -> impl Fn(Node<'_>) -> Option<String> + '_ {
    move |value| {
        let mut v = unparenthesize(value);
        loop {
            match v.kind_name() {
                "identifier" => return Some(text(source, v).to_owned()),
                "call" => {
                    let callee = v.field("function")?;
                    if callee.kind_name() == "attribute" {
                        let method = callee.field("attribute").map(|a| text(source, a)).unwrap_or("");
                        if crate::library::MODULE_METHODS_RETURNING_SELF.contains(&method) {
                            v = unparenthesize(callee.field("object")?);
                            continue;
                        }
                    }
                    return dotted(source, callee);
                }
                _ => return None,
            }
        }
    }
}

// ----- what the semantic model asks -----------------------------------------------------

/// What a name a module imports from its project is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Symbol {
    /// A class; `is_module` when it derives `torch.nn.Module` (through any chain of local,
    /// project and library bases); `pretrained`: the callee (as its module spells it) of a
    /// pretrained network its `__init__` loads and the class never freezes.
    Class { is_module: bool, methods: Vec<FunctionSummary>, pretrained: Option<String>, submodules: Vec<String> },
    /// A function; `returns_module` when calling it returns a module instance (a factory);
    /// `returned_elements`: what each element of the tuple it returns is, when known.
    Function { returns_module: bool, summary: FunctionSummary, returned_elements: Vec<Option<Returned>> },
    /// A module of the project.
    Module,
}

/// What an element of a tuple a project function returns is built as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returned {
    Network,
    Loss,
    Optimizer,
    Scaler,
    Loader,
}

/// What the semantic model of one linted module asks about the project around it.
/// Front ends implement it (through [`ProjectResolver`]); [`NoProject`] knows nothing.
pub trait ProjectIndex: Sync {
    /// What `qualified` (as the linted module spells it through its imports:
    /// `.models.Generator`, `nets.build_net`) is in the project; `None` when it is not
    /// the project's (a library, a typo) or the project does not know.
    fn symbol(&self, qualified: &str) -> Option<Symbol>;

    /// The calls of the linted module's top-level function `function` (or, spelled
    /// `Class.method`, of a method of one of its top-level classes, called on names that
    /// hold an instance of it) from other modules of the project: for each, whether it runs
    /// with gradients disabled. Empty when there are none (or the project does not know).
    fn external_calls(&self, function: &str) -> Vec<bool>;

    /// The same calls, each with whether its result may reach a backward pass or leave
    /// its caller ([`ImportedCall::result_kept`]): (gradients disabled, result kept).
    fn external_call_sites(&self, function: &str) -> Vec<(bool, bool)> {
        self.external_calls(function).into_iter().map(|disabled| (disabled, true)).collect()
    }

    /// Is `module` (as an import statement of the linted module spells it: `nets`,
    /// `.models`, `..`) one of the project's modules?
    fn is_project_module(&self, module: &str) -> bool;

    /// The linter parsed the linted module: a chance to summarize it from that tree.
    fn seed(&self, _tree: &Tree, _source: &str) {}

    /// The tree of the linted module, when the project already parsed exactly `source`
    /// (for the module's summary, before its lint): the linter then does not parse it
    /// again. See [`ModuleLoader::take_tree`].
    fn parsed_tree(&self, _source: &str) -> Option<Tree> {
        None
    }

    /// Does the index know anything at all? (An empty one lets the linter skip work.)
    fn is_empty(&self) -> bool {
        false
    }
}

/// The empty project: one file on its own (tests, a buffer without a workspace).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProject;

impl ProjectIndex for NoProject {
    fn symbol(&self, _qualified: &str) -> Option<Symbol> {
        None
    }
    fn external_calls(&self, _function: &str) -> Vec<bool> {
        Vec::new()
    }
    fn is_project_module(&self, _module: &str) -> bool {
        false
    }
    fn is_empty(&self) -> bool {
        true
    }
}

/// Where modules come from: the front ends implement it over files (the CLI, the
/// language server) or over text (tests). Keys are opaque strings (a file's path).
pub trait ModuleLoader: Sync {
    /// The module `dotted` (absolute `nets.zoo`, or relative with leading dots: `.models`,
    /// `..pkg.m`, `.` for the package itself) imported from module `from`; `None` when it
    /// is not a module of the project.
    fn resolve_module(&self, from: &str, dotted: &str) -> Option<String>;
    /// The summary of module `key` (parsed once, then kept); `None` when it cannot be read.
    fn summary(&self, key: &str) -> Option<Arc<ModuleSummary>>;
    /// The modules that may call the function `name` of module `key`: other modules of
    /// the project whose text mentions `name` (a cheap filter; calls are resolved after).
    fn candidate_callers(&self, key: &str, name: &str) -> Vec<String>;
    /// The linted module `key` was parsed anyway: its summary can be made from that tree
    /// instead of reading and parsing the file again (only when `text` is what the file
    /// holds on disk: the CLI's files, not an editor's unsaved buffer).
    fn seed(&self, _key: &str, _text: &str, _summary: &dyn Fn() -> ModuleSummary) {}
    /// The tree of module `key` if the loader parsed exactly `text` for its summary and
    /// kept the tree for the module's own lint: handed over once, so a file of the run is
    /// parsed once however its summary and its lint are ordered.
    fn take_tree(&self, _key: &str, _text: &str) -> Option<Tree> {
        None
    }
}

/// What a name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Class(String, String),
    Function(String, String),
    Module(String),
    /// Not the project's: the fully qualified library name (`torch.nn.Module`).
    External(String),
}

/// How deep re-exports, bases and factories are followed (cycles are cut before).
const MAX_DEPTH: usize = 24;

/// The project index of one linted module over a [`ModuleLoader`]: resolves the names
/// it imports lazily, follows re-exports, star imports, base classes and factories, and
/// records which modules it read (the results cache keys the file on them).
pub struct ProjectResolver<'a> {
    loader: &'a dyn ModuleLoader,
    from: String,
    read: Mutex<Vec<String>>,
    /// The linted text is the file's text on disk (see [`ModuleLoader::seed`]).
    seeds: bool,
}

impl<'a> ProjectResolver<'a> {
    pub fn new(loader: &'a dyn ModuleLoader, from: impl Into<String>) -> Self {
        ProjectResolver { loader, from: from.into(), read: Mutex::new(Vec::new()), seeds: false }
    }

    /// The linted text is what the file holds on disk: its parse can seed its summary.
    pub fn seeding(mut self) -> Self {
        self.seeds = true;
        self
    }

    /// The modules whose summary this index read (other than the linted module), in the
    /// order first read.
    pub fn modules_read(&self) -> Vec<String> {
        self.read.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn summary(&self, key: &str) -> Option<Arc<ModuleSummary>> {
        if key != self.from {
            let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
            if !read.iter().any(|k| k == key) {
                read.push(key.to_owned());
            }
        }
        self.loader.summary(key)
    }

    /// Resolves `qualified` as spelled in module `from` through its imports: the longest
    /// prefix that is a project module, then names in it.
    fn resolve_qualified(&self, from: &str, qualified: &str, seen: &mut HashSet<(String, String)>) -> Option<Target> {
        if !seen.insert((from.to_owned(), qualified.to_owned())) || seen.len() > MAX_DEPTH * 4 {
            return None;
        }
        let dots = qualified.len() - qualified.trim_start_matches('.').len();
        let rest = &qualified[dots..];
        let parts: Vec<&str> = if rest.is_empty() { Vec::new() } else { rest.split('.').collect() };
        let min = if dots > 0 { 0 } else { 1 };
        for k in (min..=parts.len()).rev() {
            let module = format!("{}{}", &qualified[..dots], parts[..k].join("."));
            let Some(key) = self.loader.resolve_module(from, &module) else { continue };
            let mut target = Target::Module(key);
            for name in &parts[k..] {
                target = match target {
                    Target::Module(m) => self.lookup_in_module(&m, name, seen)?,
                    _ => return None,
                };
            }
            return Some(target);
        }
        if dots == 0 {
            return Some(Target::External(qualified.to_owned()));
        }
        None
    }

    /// Resolves a name as module `m` spells it (dotted: its first part is a definition,
    /// an import or a star-imported name of `m`).
    fn resolve_spelled(&self, m: &str, spelled: &str, seen: &mut HashSet<(String, String)>) -> Option<Target> {
        let (first, rest) = match spelled.split_once('.') {
            Some((f, r)) => (f, Some(r)),
            None => (spelled, None),
        };
        let mut target = self.lookup_in_module(m, first, seen)?;
        if let Some(rest) = rest {
            for name in rest.split('.') {
                target = match target {
                    Target::Module(m) => self.lookup_in_module(&m, name, seen)?,
                    Target::External(q) => Target::External(format!("{q}.{name}")),
                    _ => return None,
                };
            }
        }
        Some(target)
    }

    /// What `name` is in module `m`: a class or function it defines, a name it imports
    /// (re-exports, followed), a name a star import brings, or a submodule of a package.
    fn lookup_in_module(&self, m: &str, name: &str, seen: &mut HashSet<(String, String)>) -> Option<Target> {
        if !seen.insert((m.to_owned(), format!("#{name}"))) || seen.len() > MAX_DEPTH * 4 {
            return None;
        }
        let summary = self.summary(m)?;
        if summary.class(name).is_some() {
            return Some(Target::Class(m.to_owned(), name.to_owned()));
        }
        if summary.function(name).is_some() {
            return Some(Target::Function(m.to_owned(), name.to_owned()));
        }
        if let Some(q) = summary.import(name) {
            return self.resolve_qualified(m, q, seen);
        }
        for star in &summary.star_imports {
            let Some(key) = self.loader.resolve_module(m, star) else { continue };
            let Some(s) = self.summary(&key) else { continue };
            if s.exports_by_star(name) {
                if let Some(t) = self.lookup_in_module(&key, name, seen) {
                    return Some(t);
                }
            }
        }
        // A submodule of a package (`from pkg import models` where pkg/models.py exists).
        self.loader.resolve_module(m, &format!(".{name}")).filter(|k| k != m).map(Target::Module)
    }

    /// Does class `name` of module `m` derive `torch.nn.Module`?
    fn class_is_module(&self, m: &str, name: &str, seen: &mut HashSet<(String, String)>, depth: usize) -> bool {
        if depth > MAX_DEPTH || !seen.insert((m.to_owned(), format!("class {name}"))) {
            return false;
        }
        let Some(summary) = self.summary(m) else { return false };
        let Some(class) = summary.class(name) else { return false };
        class.bases.iter().any(|base| match self.resolve_spelled(m, base, &mut HashSet::new()) {
            Some(Target::Class(bm, bn)) => self.class_is_module(&bm, &bn, seen, depth + 1),
            Some(Target::External(q)) => library_module_class(&q),
            Some(_) => false,
            // Not bound in the module at all: judge the name as spelled.
            None => library_module_class(base),
        })
    }

    /// Does calling function `name` of module `m` return a module instance?
    fn function_returns_module(&self, m: &str, name: &str, seen: &mut HashSet<(String, String)>, depth: usize) -> bool {
        if depth > MAX_DEPTH || !seen.insert((m.to_owned(), format!("def {name}"))) {
            return false;
        }
        let Some(summary) = self.summary(m) else { return false };
        let Some(f) = summary.function(name) else { return false };
        f.returns_calls.iter().any(|callee| self.callee_returns_module(m, callee, seen, depth))
    }

    fn callee_returns_module(&self, m: &str, callee: &str, seen: &mut HashSet<(String, String)>, depth: usize) -> bool {
        match self.resolve_spelled(m, callee, &mut HashSet::new()) {
            Some(Target::Class(cm, cn)) => self.class_is_module(&cm, &cn, &mut HashSet::new(), depth + 1),
            Some(Target::Function(fm, fname)) => self.function_returns_module(&fm, &fname, seen, depth + 1),
            Some(Target::External(q)) => library_module_factory(&q),
            _ => false,
        }
    }

    fn symbol_of(&self, target: Target) -> Option<Symbol> {
        match target {
            Target::Class(m, n) => {
                let is_module = self.class_is_module(&m, &n, &mut HashSet::new(), 0);
                let summary = self.summary(&m)?;
                let class = summary.class(&n)?;
                let pretrained = class.pretrained_calls.iter().find_map(|call| {
                    let qualified = match self.resolve_spelled(&m, &call.callee, &mut HashSet::new()) {
                        Some(Target::External(q)) => q,
                        // `from_pretrained` of a class memlint cannot resolve: judged as spelled.
                        None => call.callee.clone(),
                        Some(_) => return None,
                    };
                    call.loads_pretrained(&qualified).then(|| call.callee.clone())
                });
                // Attributes the class sets to a network it builds (`self.encoder =
                // nn.Sequential(...)`, a class of the project deriving `Module`).
                let submodules = class
                    .attributes
                    .iter()
                    .filter(|(_, callee)| self.callee_returns_module(&m, callee, &mut HashSet::new(), 1))
                    .map(|(attr, _)| attr.clone())
                    .collect();
                Some(Symbol::Class { is_module, methods: class.methods.clone(), pretrained, submodules })
            }
            Target::Function(m, n) => {
                let returns_module = self.function_returns_module(&m, &n, &mut HashSet::new(), 0);
                let summary = self.summary(&m)?.function(&n)?.clone();
                let returned_elements = summary
                    .returns_elements
                    .iter()
                    .map(|callee| {
                        let callee = callee.as_ref()?;
                        if self.callee_returns_module(&m, callee, &mut HashSet::new(), 1) {
                            let last = callee.rsplit('.').next().unwrap_or(callee);
                            return Some(if crate::lexicon::class_name_says_loss(last) { Returned::Loss } else { Returned::Network });
                        }
                        match self.resolve_spelled(&m, callee, &mut HashSet::new()) {
                            Some(Target::External(q)) => match crate::library::call_model(&q)? {
                                crate::library::Call::BuildsOptimizer => Some(Returned::Optimizer),
                                crate::library::Call::BuildsScaler => Some(Returned::Scaler),
                                crate::library::Call::BuildsLoader => Some(Returned::Loader),
                                crate::library::Call::BuildsLoss => Some(Returned::Loss),
                                crate::library::Call::BuildsNetwork => Some(Returned::Network),
                                _ => None,
                            },
                            _ => None,
                        }
                    })
                    .collect();
                Some(Symbol::Function { returns_module, summary, returned_elements })
            }
            Target::Module(_) => Some(Symbol::Module),
            Target::External(_) => None,
        }
    }
}

pub use crate::library::{library_module_class, library_module_factory};

impl ProjectIndex for ProjectResolver<'_> {
    fn symbol(&self, qualified: &str) -> Option<Symbol> {
        let mut seen = HashSet::new();
        // A plain name (no dots) is one the module does not bind: look in its star imports.
        if !qualified.contains('.') {
            let summary = self.loader.summary(&self.from)?;
            for star in &summary.star_imports {
                let Some(key) = self.loader.resolve_module(&self.from, star) else { continue };
                let Some(s) = self.summary(&key) else { continue };
                if s.exports_by_star(qualified) {
                    if let Some(t) = self.lookup_in_module(&key, qualified, &mut seen) {
                        return self.symbol_of(t);
                    }
                }
            }
            return None;
        }
        let target = self.resolve_qualified(&self.from, qualified, &mut seen)?;
        self.symbol_of(target)
    }

    fn is_project_module(&self, module: &str) -> bool {
        self.loader.resolve_module(&self.from, module).is_some()
    }

    fn seed(&self, tree: &Tree, source: &str) {
        if self.seeds && self.from.ends_with(".py") {
            self.loader.seed(&self.from, source, &|| ModuleSummary::new(tree, source));
        }
    }

    fn parsed_tree(&self, source: &str) -> Option<Tree> {
        // Only the text on disk (what seeds the summary) is what the loader parsed.
        if self.seeds && self.from.ends_with(".py") { self.loader.take_tree(&self.from, source) } else { None }
    }

    fn external_calls(&self, function: &str) -> Vec<bool> {
        self.external_call_sites(function).into_iter().map(|(disabled, _)| disabled).collect()
    }

    fn external_call_sites(&self, function: &str) -> Vec<(bool, bool)> {
        // `Class.method`: calls of the method on instances of the class.
        let (class, name) = match function.rsplit_once('.') {
            Some((class, method)) => (Some(class), method),
            None => (None, function),
        };
        let mut found = Vec::new();
        for caller in self.loader.candidate_callers(&self.from, class.unwrap_or(function)) {
            if caller == self.from {
                continue;
            }
            let Some(summary) = self.loader.summary(&caller) else { continue };
            let mut relevant = summary.calls.iter().filter(|c| c.callee.rsplit('.').next() == Some(name)).peekable();
            if relevant.peek().is_none() {
                continue;
            }
            // The caller is read: a change to it can change this module's findings.
            {
                let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
                if !read.iter().any(|k| *k == caller) {
                    read.push(caller.clone());
                }
            }
            for call in relevant {
                let mut seen = HashSet::new();
                let resolve = |callee: &str, seen: &mut HashSet<(String, String)>| {
                    if callee.contains('.') {
                        self.resolve_qualified(&caller, callee, seen)
                    } else {
                        self.lookup_star(&caller, callee, seen)
                    }
                };
                let hit = match class {
                    Some(class) => call.callee.rsplit_once('.').is_some_and(|(owner, _)| {
                        resolve(owner, &mut seen) == Some(Target::Class(self.from.clone(), class.to_owned()))
                    }),
                    None => resolve(&call.callee, &mut seen) == Some(Target::Function(self.from.clone(), function.to_owned())),
                };
                if hit {
                    found.push((call.grad_disabled, call.result_kept));
                }
            }
        }
        found
    }
}

impl ProjectResolver<'_> {
    fn lookup_star(&self, m: &str, name: &str, seen: &mut HashSet<(String, String)>) -> Option<Target> {
        let summary = self.summary(m)?;
        for star in &summary.star_imports {
            let Some(key) = self.loader.resolve_module(m, star) else { continue };
            let Some(s) = self.summary(&key) else { continue };
            if s.exports_by_star(name) {
                if let Some(t) = self.lookup_in_module(&key, name, seen) {
                    return Some(t);
                }
            }
        }
        None
    }
}

/// One import statement found by [`scan_imports`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedImport<'s> {
    /// The module as spelled (`nets`, `.models`, `..`, `pkg.sub`).
    pub module: &'s str,
    /// The names it binds: (what the local name stands for, as the semantic model
    /// qualifies it: `m.Generator`, `.models`, `pkg`; the local name: `G`, `models`, `pkg`).
    pub locals: Vec<(String, &'s str)>,
    /// `from module import *`.
    pub star: bool,
}

/// The import statements of a source text, by a scan of its lines (no parse): `import a.b
/// as c`, `from m import a, b as c`, parenthesized lists over several lines, `from m
/// import *`. The linter asks the project about them before it lets the pre-filter skip
/// rules. Imports inside strings are found too (harmless: it may only run more rules).
pub fn scan_imports(source: &str) -> Vec<ScannedImport<'_>> {
    let mut imports = Vec::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("from ") {
            let Some((module, names)) = rest.split_once(" import") else { continue };
            let module = module.trim();
            let mut names = names.split('#').next().unwrap_or("").trim().to_owned();
            let mut locals_text = String::new();
            if names.starts_with('(') {
                // A parenthesized list, possibly over several lines.
                while !names.contains(')') {
                    match lines.next() {
                        Some(next) => {
                            names.push(' ');
                            names.push_str(next.split('#').next().unwrap_or(""));
                        }
                        None => break,
                    }
                }
                locals_text.push_str(names.trim_start_matches('(').split(')').next().unwrap_or(""));
            } else {
                locals_text.push_str(&names);
            }
            let star = locals_text.trim() == "*";
            let locals = if star { Vec::new() } else { locals_in(&locals_text, source).into_iter().map(|(n, l)| (join_import(module, &n), l)).collect() };
            imports.push(ScannedImport { module, locals, star });
        } else if let Some(rest) = line.strip_prefix("import ") {
            for part in rest.split('#').next().unwrap_or("").split(',') {
                let words: Vec<&str> = part.split_whitespace().collect();
                match words.as_slice() {
                    [module] => {
                        let first = module.split('.').next().unwrap_or(module);
                        imports.push(ScannedImport { module, locals: vec![(first.to_owned(), first)], star: false })
                    }
                    [module, "as", local] => imports.push(ScannedImport { module, locals: vec![(module.to_string(), *local)], star: false }),
                    _ => {}
                }
            }
        }
    }
    imports
}

/// The (name, local name) pairs of `a, b as c` (local names as slices of `source`).
fn locals_in<'s>(list: &str, source: &'s str) -> Vec<(String, &'s str)> {
    let is_name = |n: &str| !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_');
    list.split(',')
        .filter_map(|part| {
            let words: Vec<&str> = part.split_whitespace().collect();
            let (name, local) = match words.as_slice() {
                [name] => (*name, *name),
                [name, "as", local] => (*name, *local),
                _ => return None,
            };
            if !is_name(name) || !is_name(local) {
                return None;
            }
            source.find(local).map(|at| (name.to_owned(), &source[at..at + local.len()]))
        })
        .collect()
}

/// Does a project symbol change what the rules find where it is used: a network class or
/// factory, or something whose methods or itself store arguments beyond the call?
pub fn symbol_matters(symbol: &Symbol) -> bool {
    match symbol {
        Symbol::Class { is_module, methods, .. } => *is_module || methods.iter().any(|m| !m.stores.is_empty()),
        Symbol::Function { returns_module, summary, returned_elements } => {
            *returns_module || !summary.stores.is_empty() || returned_elements.iter().any(Option::is_some)
        }
        Symbol::Module => false,
    }
}

/// The modules a source text imports, as spelled (`nets`, `.models`, `..pkg.m`, `.`):
/// a line scan for `import` statements, no parse. The linter asks the project whether any
/// of them is the project's before it lets the pre-filter skip rules.
pub fn imported_modules(source: &str) -> Vec<&str> {
    let mut modules = Vec::new();
    for line in source.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("from ") {
            if let Some(module) = rest.split_whitespace().next() {
                modules.push(module);
            }
        } else if let Some(rest) = line.strip_prefix("import ") {
            for part in rest.split(',') {
                if let Some(module) = part.split_whitespace().next() {
                    modules.push(module.trim_end_matches(['(', ')', ';', '\\']));
                }
            }
        }
    }
    modules
}
