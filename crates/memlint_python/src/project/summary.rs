//! What other modules need to know of one module: the summary types
//! ([`ModuleSummary`], [`ClassSummary`], [`FunctionSummary`], [`StoredArgument`],
//! [`PretrainedCall`], [`ImportedCall`]), the walk of a module's top-level statements
//! that builds a [`ModuleSummary`], and its lookups (`class`, `function`, `import`,
//! `exports_by_star`).
//!
//! Asks [`super::definitions`] for the summary of each function and class it meets,
//! [`super::calls`] for the module's calls of imported names, [`super::syntax`] for node
//! readings; `crate::loads_pretrained_network` decides a [`PretrainedCall`]. Knows
//! nothing of other modules: resolution is [`super::resolve`]'s.

use tree_sitter::{Node, Tree};

use super::calls::CallCollector;
use super::definitions::{class_summary_in, function_summary};
use super::syntax::{decorator_disables_grad, text};
use crate::named_nodes::NamedNodes;
use crate::semantic::named_children;
use crate::NodeExt;

/// How a function stores one of its arguments into state that outlives the call
/// (`self.total += val`, `self.preds.append(preds)`, a module-level list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StoreKind {
    /// Added into a running total (`self.total += val`, `self.sum = self.sum + val * n`).
    Accumulates,
    /// Appended to a container (`self.values.append(val)`, `HISTORY.extend(val)`).
    Appends,
}

/// One argument a function stores beyond the call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// The position (among the arguments a caller passes) of the parameter whose call it
    /// returns, when every `return` calls that parameter (`return model_cls(**cfg)`, also
    /// through methods that return the module: `return cls().cuda()`): a factory handed
    /// the class it builds.
    #[serde(default)]
    pub returns_called_parameter: Option<usize>,
    /// The method every `return` ends with, when each returns a method call
    /// (`return t.cpu().detach().numpy()`: `numpy`): what a tensor method gives decides the
    /// value (`library::tensor_method`).
    pub returns_method: Option<String>,
    /// For a method: the attributes of `self` it calls or hands to a call with gradients
    /// on (outside `with torch.no_grad()` blocks; `""` for `self(...)`), and those it
    /// calls or hands on only under such a block. See [`forward_runs_submodules_without_grad`].
    pub self_used_with_grad: Vec<String>,
    pub self_used_without_grad: Vec<String>,
    /// Of [`Self::self_used_with_grad`], those it calls (`self(x)` as `""`, `self.fc(x)`,
    /// `self.decode(z)`), not only hands to a call (`init(self.fc)`).
    pub self_called_with_grad: Vec<String>,
    /// For a method: it has a decorator memlint does not know (not `no_grad`, not
    /// `staticmethod`, `classmethod`, `property`), which may change how it runs.
    pub unread_decorator: bool,
    /// Every `return` of it gives no tensor (no value, a literal, a number, numpy): calling
    /// it hands its caller no forward pass's output, whatever it runs inside.
    pub returns_no_tensor: bool,
}

/// Does the `forward` of a class with these methods run its submodules only under
/// `with torch.no_grad()` blocks, in `forward` or the methods of the class it calls
/// (`MTCNN.forward` calls `self.detect`, which runs `self.pnet` inside such a block)?
/// Then calling an instance records no graph of them. At least one submodule must be
/// seen run that way (a `forward` that reads its parameters directly is not this).
pub fn forward_runs_submodules_without_grad(methods: &[FunctionSummary], submodules: &[String]) -> bool {
    let mut pending = vec!["forward"];
    let mut seen: Vec<&str> = Vec::new();
    let mut submodule_without_grad = false;
    while let Some(name) = pending.pop() {
        if seen.contains(&name) || seen.len() > 32 {
            continue;
        }
        seen.push(name);
        let Some(method) = methods.iter().find(|m| m.name == name) else { continue };
        if method.no_grad {
            submodule_without_grad |= !method.self_used_with_grad.is_empty() || !method.self_used_without_grad.is_empty();
            continue;
        }
        for attr in &method.self_used_with_grad {
            if attr.is_empty() || submodules.contains(attr) {
                return false;
            }
            if methods.iter().any(|m| &m.name == attr) {
                pending.push(attr);
            }
        }
        submodule_without_grad |= method.self_used_without_grad.iter().any(|a| submodules.contains(a));
    }
    submodule_without_grad
}

/// Does the method `name` of a module class with these methods and submodules run a
/// forward pass: call `self(...)`, `self.forward(...)`, a submodule, or a method of the
/// class that does, without backpropagating? Then calling it on an instance
/// (`model.classify(x)`, `model.sample(z)`) is a forward pass.
pub fn method_runs_forward(methods: &[FunctionSummary], submodules: &[String], name: &str) -> bool {
    // A method that returns no tensor (`test_loop` giving an accuracy) runs its forward
    // passes for itself: they are judged inside it, not where it is called.
    if methods.iter().find(|m| m.name == name).is_none_or(|m| m.returns_no_tensor) {
        return false;
    }
    let mut pending = vec![name];
    let mut seen: Vec<&str> = Vec::new();
    while let Some(name) = pending.pop() {
        if seen.contains(&name) || seen.len() > 32 {
            continue;
        }
        seen.push(name);
        let Some(method) = methods.iter().find(|m| m.name == name) else { continue };
        if method.backprops || method.no_grad || method.unread_decorator {
            continue;
        }
        for attribute in &method.self_called_with_grad {
            if attribute.is_empty() || attribute == "forward" || submodules.contains(attribute) {
                return true;
            }
            if methods.iter().any(|m| &m.name == attribute) {
                pending.push(attribute);
            }
        }
    }
    false
}

/// A class, as other modules see it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Its `__init__` may freeze its parameters (`p.requires_grad = False`,
    /// `self.requires_grad_(False)`, perhaps under a condition): an instance may record
    /// no graph.
    pub may_freeze: bool,
    /// What its methods store on `self` when none of it could be a parameter: the callees
    /// of the calls stored, judged later (see
    /// [`parameter_free_stores`](super::syntax::parameter_free_stores)); `None` when the
    /// class may hold a parameter of its own.
    pub parameter_free: Option<Vec<String>>,
}

/// A call that may load a pretrained network: the callee as the module spells it, and
/// its keyword arguments that decide (`pretrained`, `weights`, `is_trainable`) as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
pub(super) const PRETRAINED_KEYWORDS: &[&str] = &["pretrained", "weights", "is_trainable"];

/// What other files need to know of one module, computed from its tree in one walk of its
/// top-level statements and class bodies (function bodies only for their returns and
/// stores).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// The folders it puts on `sys.path`, relative to its own folder (`"../lib"`): where
    /// its absolute imports may also be found (see
    /// [`sys_path_dirs`](super::syntax::sys_path_dirs)).
    pub import_dirs: Vec<String>,
}

/// A call of an imported name, with the gradient context it runs in: what a module that
/// defines the function needs to know of its callers elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// The qualified name an import binds, from the module text of `from M import name`:
/// `from .a import b` -> `.a.b`, `from . import b` -> `.b`, `from .. import b` -> `..b`.
pub fn join_import(module: &str, name: &str) -> String {
    if module.ends_with('.') || module.is_empty() {
        format!("{module}{name}")
    } else {
        format!("{module}.{name}")
    }
}

/// The statements of a module that run when it is imported, in order: the top-level
/// ones, and those in the blocks of a top-level `if` or `try` (definitions and imports
/// under `if TYPE_CHECKING:` or `try:` still bind), at any depth, in place of the
/// statement that holds them.
fn module_statements<'t>(root: Node<'t>, children: &dyn Fn(Node<'t>) -> Vec<Node<'t>>) -> Vec<Node<'t>> {
    fn push<'t>(statement: Node<'t>, children: &dyn Fn(Node<'t>) -> Vec<Node<'t>>, out: &mut Vec<Node<'t>>) {
        if !matches!(statement.kind_name(), "if_statement" | "try_statement") {
            out.push(statement);
            return;
        }
        for child in children(statement) {
            if child.kind_name() == "block" {
                children(child).into_iter().for_each(|s| push(s, children, out));
            } else if matches!(child.kind_name(), "else_clause" | "except_clause" | "elif_clause" | "finally_clause") {
                for block in children(child).into_iter().filter(|b| b.kind_name() == "block") {
                    children(block).into_iter().for_each(|s| push(s, children, out));
                }
            }
        }
    }
    let mut out = Vec::new();
    children(root).into_iter().for_each(|s| push(s, children, &mut out));
    out
}

impl ModuleSummary {
    /// The summary of a parsed module.
    pub fn new(tree: &Tree, source: &str) -> ModuleSummary {
        // One walk of the tree: the walks of the class summaries and of the calls step
        // through its named nodes.
        ModuleSummary::walked(&NamedNodes::of(tree.root_node()), source)
    }

    /// The summary of the module whose tree `nodes` were walked from (its root's).
    pub fn walked(nodes: &NamedNodes<'_>, source: &str) -> ModuleSummary {
        let mut summary = ModuleSummary::default();
        let root = nodes.root();
        // Every body asked whether it backpropagates is answered from one walk.
        let _backward_calls = super::syntax::BackwardCalls::of_module(source, root);
        for statement in module_statements(root, &|n| nodes.named_children_of(n)) {
            summary.statement(source, statement, nodes);
        }
        let mut collector = CallCollector::for_module(&summary);
        collector.enter_scope(source, root);
        summary.collect_calls(source, nodes, 0, false, &mut collector);
        summary.calls = collector.finish(source);
        summary.import_dirs = super::syntax::sys_path_dirs(source, nodes);
        summary
    }

    /// The modules a module imports with `from M import *`, as [`Self::walked`] records
    /// them, without summarizing the rest.
    pub fn star_imports_of(root: Node<'_>, source: &str) -> Vec<String> {
        module_statements(root, &named_children)
            .into_iter()
            .filter(|s| matches!(s.kind_name(), "import_statement" | "import_from_statement"))
            .filter(|s| named_children(*s).iter().any(|c| c.kind_name() == "wildcard_import"))
            .map(|s| s.field("module_name").map(|m| text(source, m)).unwrap_or("").to_owned())
            .collect()
    }

    fn statement<'t>(&mut self, source: &str, statement: Node<'t>, nodes: &NamedNodes<'t>) {
        match statement.kind_name() {
            "decorated_definition" => {
                let decorators: Vec<Node> = nodes
                    .named_children_of(statement)
                    .into_iter()
                    .filter(|c| c.kind_name() == "decorator")
                    .filter_map(|d| d.named_child(0))
                    .collect();
                if let Some(def) = nodes.field_of(statement, "definition") {
                    match def.kind_name() {
                        "function_definition" => {
                            let mut f = function_summary(source, def, false, nodes);
                            f.no_grad = decorators.iter().any(|d| decorator_disables_grad(source, *d));
                            self.functions.push(f);
                        }
                        "class_definition" => self.classes.push(class_summary_in(source, def, nodes)),
                        _ => {}
                    }
                }
            }
            "function_definition" => self.functions.push(function_summary(source, statement, false, nodes)),
            "class_definition" => self.classes.push(class_summary_in(source, statement, nodes)),
            "import_statement" | "import_from_statement" => {
                if nodes.named_children_of(statement).iter().any(|c| c.kind_name() == "wildcard_import") {
                    let module = nodes.field_of(statement, "module_name").map(|m| text(source, m)).unwrap_or("");
                    self.star_imports.push(module.to_owned());
                    return;
                }
                for (local, qualified) in crate::import_bindings(statement, source) {
                    self.imports.push((local.to_owned(), qualified));
                }
            }
            "expression_statement" => {
                // `__all__ = ["A", "B"]` (also `+=`).
                let Some(assign) = statement.named_child(0) else { return };
                if !matches!(assign.kind_name(), "assignment" | "augmented_assignment") {
                    return;
                }
                let (Some(left), Some(right)) = (nodes.field_of(assign, "left"), nodes.field_of(assign, "right")) else { return };
                if text(source, left) != "__all__" || !matches!(right.kind_name(), "list" | "tuple") {
                    return;
                }
                let names: Vec<String> = nodes
                    .named_children_of(right)
                    .into_iter()
                    .filter(|s| s.kind_name() == "string")
                    .map(|s| text(source, s).trim_matches(|c| c == '"' || c == '\'').to_owned())
                    .collect();
                match &mut self.all {
                    Some(all) if assign.kind_name() == "augmented_assignment" => all.extend(names),
                    _ => self.all = Some(names),
                }
            }
            _ => {}
        }
    }

    pub fn class(&self, name: &str) -> Option<&ClassSummary> {
        self.classes.iter().rev().find(|c| c.name == name)
    }

    /// A top-level function, or `Class.method`: a method called on its class (a factory
    /// classmethod, `Net.from_config(cfg)`).
    pub fn function(&self, name: &str) -> Option<&FunctionSummary> {
        match name.split_once('.') {
            Some((class, method)) => self.class(class)?.methods.iter().rev().find(|f| f.name == method),
            None => self.functions.iter().rev().find(|f| f.name == name),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(source: &str) -> ModuleSummary {
        ModuleSummary::new(&crate::parse(source).tree, source)
    }

    #[test]
    fn methods_that_call_a_submodule_self_or_such_a_method_run_the_forward_pass() {
        let s = summary(
            "import torch.nn as nn
from nets import nograd

class M(nn.Module):
    def classify(self, x):
        return self.head(x)
    def embed(self, x):
        return self(x)
    def predict(self, x):
        return self.classify(x).argmax(1)
    def describe(self):
        return str(self.head)
    def reset(self):
        self.head.reset_parameters()
    def step(self, x):
        self.head(x).sum().backward()
    @nograd
    def guarded(self, x):
        return self.head(x)
    def test_loop(self, loader):
        accs = [self.head(x).argmax(1).eq(y).float().mean().item() for x, y in loader]
        acc = np.mean(accs)
        return acc
    def show(self, x):
        print(self.head(x))
",
        );
        let methods = &s.class("M").expect("M").methods;
        let submodules = vec!["head".to_owned()];
        let runs = |name: &str| method_runs_forward(methods, &submodules, name);
        assert!(runs("classify"), "calls a submodule");
        assert!(runs("embed"), "calls self");
        assert!(runs("predict"), "calls a method that runs the forward pass");
        assert!(!runs("describe"), "only hands the submodule to a call");
        assert!(!runs("reset"), "calls a method of the submodule, not the submodule");
        assert!(!runs("step"), "backpropagates: a training step");
        assert!(!runs("guarded"), "a decorator memlint cannot read");
        assert!(!runs("missing"));
        assert!(!runs("test_loop"), "returns a number: its forward passes are its own");
        assert!(!runs("show"), "returns nothing");
    }

    #[test]
    fn import_names_join_as_spelled() {
        assert_eq!(join_import(".models", "G"), ".models.G");
        assert_eq!(join_import(".", "nets"), ".nets");
        assert_eq!(join_import("..", "nets"), "..nets");
        assert_eq!(join_import("pkg.sub", "Net"), "pkg.sub.Net");
        assert_eq!(join_import("", "Net"), "Net");
    }

    #[test]
    fn a_summary_records_imports_definitions_and_all() {
        let s = summary(
            "import torch\nimport torch.nn as nn\nimport os.path\nfrom .models import Generator as G, Disc\nfrom . import nets\n\
             from utils import *\ntry:\n    from fast import Net\nexcept ImportError:\n    from slow import Net\n\
             __all__ = ['train']\n__all__ += ['Meter']\n\n\
             @torch.no_grad()\ndef evaluate(model):\n    return model\n\n\
             def train(model):\n    pass\n\n\
             class Meter:\n    def update(self, val):\n        self.total += val\n\n\
             def train(model, extra):\n    return extra\n",
        );
        let imports: Vec<(&str, &str)> = s.imports.iter().map(|(l, q)| (l.as_str(), q.as_str())).collect();
        assert_eq!(
            imports,
            [
                ("torch", "torch"),
                ("nn", "torch.nn"),
                ("os", "os"),
                ("G", ".models.Generator"),
                ("Disc", ".models.Disc"),
                ("nets", ".nets"),
                ("Net", "fast.Net"),
                ("Net", "slow.Net")
            ]
        );
        assert_eq!(s.import("Net"), Some("slow.Net"), "the last binding wins");
        assert_eq!(s.import("models"), None);
        assert_eq!(s.star_imports, ["utils"]);
        assert_eq!(s.all, Some(vec!["train".to_owned(), "Meter".to_owned()]), "`+=` extends a literal __all__");
        assert!(s.function("evaluate").is_some_and(|f| f.no_grad), "a decorated no_grad function");
        assert_eq!(s.function("train").and_then(|f| f.returns_parameter), Some(1), "the last definition of a name wins");
        assert_eq!(s.class("Meter").map(|c| c.methods[0].stores.len()), Some(1));
        assert!(s.exports_by_star("Meter") && !s.exports_by_star("evaluate"), "__all__ decides what a star import brings");
        let plain = summary("def public():\n    pass\n");
        assert!(plain.exports_by_star("public") && !plain.exports_by_star("_private"), "without __all__: names not starting with _");
    }

    #[test]
    fn a_pretrained_call_is_judged_once_its_callee_is_resolved() {
        let call = |keywords: &[(&str, &str)]| PretrainedCall {
            callee: "create_model".to_owned(),
            keywords: keywords.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        assert!(call(&[("pretrained", "True")]).loads_pretrained("timm.create_model"));
        assert!(!call(&[("pretrained", "False")]).loads_pretrained("timm.create_model"));
        assert!(!call(&[("pretrained", "True")]).loads_pretrained("mylib.create_model"), "a callee memlint does not know");
    }

    #[test]
    fn star_imports_alone_are_those_the_whole_summary_records() {
        let source = "from a import *\nimport b\nif X:\n    from .c import *\nelif Y:\n    from d import *\nelse:\n    pass\n\
try:\n    from e import *\nexcept ImportError:\n    from f import *\nfinally:\n    from g import *\n\
def h():\n    from i import *\nclass J:\n    from k import *\nfrom l import m\n";
        let tree = crate::parse(source).tree;
        let star = ModuleSummary::star_imports_of(tree.root_node(), source);
        assert_eq!(star, ["a", ".c", "d", "e", "f", "g"]);
        assert_eq!(star, summary(source).star_imports);
    }
}
