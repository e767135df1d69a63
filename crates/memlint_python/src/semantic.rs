//! A semantic model of one Python module, as far as memlint's rules need it.
//!
//! It answers, for any node: what a dotted name resolves to through imports
//! ([`SemanticModel::qualified_name`]), whether the code runs with autograd
//! disabled ([`SemanticModel::grad_context`]), which loops surround it and what they
//! iterate ([`SemanticModel::enclosing_loops`]), and what kind of value an
//! expression holds ([`SemanticModel::value_kind`]): a tensor with autograd history,
//! a tensor without, a Python number, or a `torch.nn.Module`.
//!
//! The model is flow-insensitive on purpose: a name's value is the last assignment
//! before the use in the same scope. That is what a reader of a training script
//! assumes, and it keeps the model linear in the size of the module.

use std::cell::{Cell, OnceCell, RefCell};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use tree_sitter::{Node, Tree};

use crate::named_nodes::NamedNodes;
use crate::NodeExt;

/// Nearest enclosing function (its node id), or `None` for module level.
pub(crate) type ScopeId = Option<usize>;

/// What an expression evaluates to, as far as GPU memory is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// A tensor that carries autograd history (keeps its graph alive).
    GradTensor,
    /// A tensor without autograd history (detached, created under no-grad, data).
    PlainTensor,
    /// A Python scalar: a number (`.item()`, `float()`, a literal) or a string (a literal,
    /// an f-string, `"%.3f" % x`). Autograd never records it.
    Number,
    /// A `torch.nn.Module` that computes a forward pass (a model).
    Model,
    /// A loss module or loss function object (`nn.CrossEntropyLoss()`, `criterion`).
    Loss,
    /// A class (or factory) whose call builds a module: a local class deriving
    /// `torch.nn.Module`, `torch.nn.Linear`, `torchvision.models.resnet50`. Calling it
    /// constructs a module; it is not a forward pass.
    ModuleClass,
    /// A function, a method, a Python module or a class that does not build a network:
    /// calling it is not a forward pass.
    Callable,
    /// A `torch.optim` optimizer.
    Optimizer,
    /// A `GradScaler`.
    Scaler,
    /// A `DataLoader`.
    DataLoader,
    /// A value of another framework: a numpy array, a JAX or TensorFlow array, a Flax
    /// module. Not a tensor: autograd never records it.
    Foreign,
    Unknown,
}

impl ValueKind {
    /// A module *instance* (a network or a loss module): calling it runs a forward pass.
    pub fn is_module(self) -> bool {
        matches!(self, ValueKind::Model | ValueKind::Loss)
    }

    /// Something whose call is a Python call, not a forward pass (a class, a function).
    pub fn is_callable_definition(self) -> bool {
        matches!(self, ValueKind::ModuleClass | ValueKind::Callable)
    }
}

/// Whether autograd records operations at a point in the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GradContext {
    /// Gradients are disabled; the string says by what (for messages).
    Disabled(String),
    /// Gradients are explicitly enabled (`torch.enable_grad()`).
    ExplicitlyEnabled,
    /// The default: gradients are recorded.
    Enabled,
}

impl GradContext {
    pub fn is_disabled(&self) -> bool {
        matches!(self, GradContext::Disabled(_))
    }
}

/// One assignment of a name.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'t> {
    /// Where the binding takes effect (the start of its statement).
    pub position: usize,
    /// The statement or construct that binds the name.
    pub statement: Node<'t>,
    /// The value assigned, when there is a single expression for it.
    pub value: Option<Node<'t>>,
    pub kind: BindingKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingKind {
    /// `x = value` (also one element of a tuple target: the value is the whole right side).
    Assign,
    /// `x += value`
    AugAssign,
    /// The target of a `for` loop or comprehension.
    LoopTarget,
    /// A function parameter.
    Parameter,
    /// `with ... as x`
    WithTarget,
    /// `import` / `def` / `class`
    Definition,
}

/// A function or method definition.
#[derive(Debug, Clone)]
pub struct FunctionInfo<'t> {
    pub node: Node<'t>,
    pub name: String,
    /// The class this is a method of, if any.
    pub class: Option<String>,
    /// The decorator expressions (without `@`).
    pub decorators: Vec<Node<'t>>,
    /// The `decorated_definition` when there are decorators (where a new decorator goes).
    pub outer: Node<'t>,
}

/// What kind of loop a `for`/`while` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopKind {
    /// The loop over epochs (or another loop around the per-step loop).
    Epoch,
    /// The per-step loop: over a loader/dataset, or a loop whose body runs a step.
    Step,
    /// Some other loop.
    Other,
}

/// A loop around a node.
#[derive(Debug, Clone, Copy)]
pub struct LoopInfo<'t> {
    pub node: Node<'t>,
    /// The loop iterates over validation/test data (by the names in its iterable).
    pub over_eval_data: bool,
    /// The loop goes over batches: its iterable (or condition) names data, or its body
    /// backpropagates or steps an optimizer. Loops inside a forward pass (over layers,
    /// tiles, timesteps) are not: what they collect is needed by that forward pass.
    pub over_batches: bool,
}

#[derive(Debug)]
pub(crate) struct Import {
    pub(crate) scope: ScopeId,
    pub(crate) local: String,
    pub(crate) qualified: String,
}

#[derive(Debug)]
pub(crate) struct ClassInfo<'t> {
    pub(crate) is_module: bool,
    pub(crate) is_lightning: bool,
    /// The names of its local base classes (looked up for inherited methods).
    pub(crate) bases: Vec<String>,
    /// The bases as spelled (dotted), for the project lookup of imported bases.
    pub(crate) spelled_bases: Vec<String>,
    /// Its `class_definition`.
    pub(crate) node: Node<'t>,
}

/// The semantic model of one module. Build it once per parse with [`SemanticModel::new`].
pub struct SemanticModel<'t> {
    pub(crate) source: &'t str,
    pub(crate) root: Node<'t>,
    pub(crate) imports: Vec<Import>,
    pub(crate) functions: HashMap<usize, FunctionInfo<'t>>,
    /// The keys of `functions` in source order: what iterates over them (a node's id is
    /// its address, so the map's own order changes from run to run).
    pub(crate) functions_in_order: Vec<usize>,
    /// Every call, in source order.
    pub(crate) calls: Vec<Node<'t>>,
    /// Every `for` / `while` statement, in source order.
    pub(crate) loops: Vec<Node<'t>>,
    /// Calls by the last part of their callee's name (`f(...)`, `x.f(...)` -> "f").
    pub(crate) calls_by_name: HashMap<&'t str, Vec<Node<'t>>>,
    /// Every identifier node by its text, in source order: rules look the uses of a name
    /// up here instead of walking the module for each candidate.
    pub(crate) identifiers_by_name: HashMap<&'t str, Vec<Node<'t>>>,
    /// Every `attribute` node by its last part (`a.b.c` -> "c"), in source order.
    pub(crate) attributes_by_name: HashMap<&'t str, Vec<Node<'t>>>,
    /// By name, then by scope (looked up by `&str` without allocating).
    pub(crate) bindings: HashMap<&'t str, HashMap<ScopeId, Vec<Binding<'t>>>>,
    /// `self.<attr> = value` assignments anywhere in a class, by attribute name.
    pub(crate) self_attributes: HashMap<&'t str, Vec<Node<'t>>>,
    pub(crate) classes: HashMap<&'t str, ClassInfo<'t>>,
    /// Methods by (class, name): the function node of each.
    pub(crate) methods: HashMap<(String, String), Node<'t>>,
    /// Methods by name: their class and function node.
    pub(crate) methods_by_name: HashMap<String, Vec<(String, Node<'t>)>>,
    /// `return` statements with a value, by the id of their function.
    pub(crate) returns: HashMap<usize, Vec<Node<'t>>>,
    /// Memo of [`SemanticModel::method_runs_forward`], by method node id.
    pub(crate) forward_methods: RefCell<HashMap<usize, bool>>,
    /// Memo of `some_module_method_runs_forward`, by method name.
    pub(crate) forward_method_names: RefCell<HashMap<String, bool>>,
    /// Memo of [`SemanticModel::calls_of_function`], by function node id: each use of a
    /// parameter asks for its function's callers, and finding them filters every call of
    /// that name in the module.
    pub(crate) function_calls: RefCell<HashMap<usize, Vec<Node<'t>>>>,
    /// Memo of what each call of a function's name resolves to, by call node id: a name
    /// defined many times (copies of a script in one file) would otherwise resolve every
    /// call once per definition.
    pub(crate) call_targets: RefCell<HashMap<usize, crate::values::names::CallTarget<'t>>>,
    /// Memo of [`SemanticModel::qualified_name`]: asked of the same callee by many facts
    /// (is it a backward call, a project class, a library call).
    pub(crate) qualified_names: RefCell<HashMap<NodeKey, Option<String>>>,
    /// Memo of whether a local module class's `forward` runs without gradients (and why),
    /// by the id of its `forward`: asked at every forward call of an instance, and the
    /// answer summarizes the whole class. Keyed with the class too: a subclass's instances
    /// run their base's `forward`, and the reason names the class.
    pub(crate) local_forwards_without_grad: RefCell<HashMap<(usize, &'t str), Option<String>>>,
    /// Memo of [`SemanticModel::instance_class`]: asked of the callee of every forward call
    /// by several facts, and `self.x` follows every assignment of `self.x` in the module.
    pub(crate) instance_classes: RefCell<HashMap<NodeKey, Option<&'t str>>>,
    /// Memo of the class of `self.<name>`, by the node id of the class whose method uses
    /// it (0 outside methods) and the attribute's name: every `self.<name>` in the methods
    /// of one class asks the same question (see `self_attribute_values`).
    pub(crate) self_attribute_classes: RefCell<HashMap<(usize, &'t str), Option<&'t str>>>,
    /// Memo of [`SemanticModel::self_attribute_values`], by the same key: which of the
    /// module's assignments of `self.<name>` the methods of one class see.
    pub(crate) self_attribute_values: RefCell<HashMap<(usize, &'t str), Vec<Node<'t>>>>,
    /// Memo of [`SemanticModel::function_return_kind`], by function node id.
    pub(crate) return_values: RefCell<HashMap<usize, crate::values::Value<'t>>>,
    /// (scope, name) of names on which a module-only method is called (`x.eval()`,
    /// `x.parameters()`): a value known as a module by what is done with it. `self.x`
    /// is recorded as "self.x" with scope `None`.
    pub(crate) modules_by_use: OnceCell<HashMap<(ScopeId, &'t str), Node<'t>>>,
    /// Like `modules_by_use`, for optimizers (`x.zero_grad()` and `x.step()`, `x.param_groups`).
    pub(crate) optimizers_by_use: OnceCell<HashMap<(ScopeId, &'t str), Node<'t>>>,
    /// Functions that always run with gradients disabled (decorated, framework hooks,
    /// or only ever called from a no-grad context): found on the first question of a
    /// gradient context, not while the model is built, since most lints never ask; their
    /// callers in other modules are asked about only for a function a question lands in.
    pub(crate) no_grad_functions: OnceCell<crate::grad::NoGradFunctions>,
    /// A fixed point of no-grad functions is being computed: a gradient context asked
    /// meanwhile sees no function as no-grad yet.
    pub(crate) finding_no_grad_functions: Cell<bool>,
    pub(crate) value_cache: RefCell<HashMap<usize, crate::values::Value<'t>>>,
    /// Every node's parent. tree-sitter's `Node::parent` walks down from the root each
    /// time (O(depth × siblings)); the rules ask for parents constantly.
    /// The named nodes of the tree, from the one walk (a node's parent is read there).
    pub(crate) named: std::rc::Rc<std::borrow::Cow<'t, NamedNodes<'t>>>,
    /// Where each function's scope begins and ends, flattened: `(byte, scope)` in byte
    /// order, the innermost function at that byte (found by binary search: the scope of a
    /// node is asked constantly, and walking its ancestors each time showed in profiles).
    pub(crate) scope_segments: Vec<(usize, ScopeId)>,
    /// Each function's end byte and the function it is nested in.
    pub(crate) function_extents: HashMap<usize, (usize, ScopeId)>,
    /// Classes, lambdas and comprehensions (start, end, node id), in the order the walk
    /// meets them: scopes of their own for the names they bind (a class body's
    /// attributes and methods, a lambda's parameters, a comprehension's targets), which
    /// are visible only inside them (a class's not in its methods either).
    pub(crate) local_scopes: Vec<(usize, usize, usize)>,
    /// `local_scopes` flattened like `scope_segments`: the innermost class, lambda or
    /// comprehension at each byte, `None` outside all of them.
    pub(crate) local_scope_segments: Vec<(usize, ScopeId)>,
    /// Each local scope's end byte, the local scope it is nested in (`None`: directly in
    /// its function or the module), and its start byte.
    pub(crate) local_scope_extents: HashMap<usize, (usize, ScopeId, usize)>,
    /// Index into `imports` of the last module-level import of each local name.
    pub(crate) module_imports: HashMap<String, usize>,
    /// Indices into `imports` of function-local imports, by local name.
    pub(crate) function_imports: HashMap<String, Vec<usize>>,
    /// Which node kinds (by kind id) to index in `indexed_nodes`: asked for by the caller
    /// (the linter's rules' query roots), so that no second walk of the tree finds them.
    pub(crate) indexed_kinds: &'t [bool],
    /// Every named node of `indexed_kinds`, in source order.
    pub(crate) indexed_nodes: Vec<Node<'t>>,
    /// Their kind ids (asking a node for its kind is a call into tree-sitter).
    pub(crate) indexed_node_kinds: Vec<u16>,
    /// Does the module have a `from x import *`?
    pub(crate) has_star_import: bool,
    /// Local names bound by any import, to reject non-imported names quickly.
    pub(crate) imported_names: HashSet<String>,
    pub(crate) backward_calls: OnceCell<Vec<Node<'t>>>,
    /// Backward calls and optimizer steps with their scope, by start byte: what
    /// `trains_in` searches for every loop (a scan of all calls per loop was quadratic).
    pub(crate) training_calls: OnceCell<Vec<(usize, ScopeId)>>,
    /// [`SemanticModel::trains_in`] is computing `training_calls` (a re-entrant question).
    pub(crate) training_calls_pending: Cell<bool>,
    /// `backward_calls` grouped by scope, in source order.
    pub(crate) backward_calls_by_scope: OnceCell<HashMap<ScopeId, Vec<Node<'t>>>>,
    /// `loop_info` by loop node id: rules and the loop classification ask for the same
    /// loops again and again.
    pub(crate) loop_infos: RefCell<HashMap<usize, LoopInfo<'t>>>,
    pub(crate) loop_kinds: RefCell<HashMap<usize, LoopKind>>,
    /// Memos of `function_has_step_loop` and `function_runs_a_step`, by function node id.
    pub(crate) step_loop_functions: RefCell<HashMap<usize, bool>>,
    pub(crate) step_functions: RefCell<HashMap<usize, bool>>,
    /// Memos of `fate` (by expression node id) and `parameter_fate` (by function and name).
    pub(crate) fates: RefCell<HashMap<usize, crate::flow::Fate<'t>>>,
    pub(crate) parameter_fates: RefCell<HashMap<(usize, String), crate::flow::Fate<'t>>>,
    /// Statements `x.enter_context(...)` / `torch.set_grad_enabled(...)`, by their block.
    pub(crate) toggle_statements: HashMap<NodeKey, Vec<Node<'t>>>,
    // ----- the project around the module (see `project.rs`) -----
    /// What the project knows of imported names ([`crate::NoProject`] for a lone file).
    pub(crate) project: &'t dyn crate::ProjectIndex,
    /// Modules imported with `from M import *` (module level), as spelled.
    pub(crate) star_imports: Vec<String>,
    /// Answers of the project, by the name asked (the model asks each name once).
    pub(crate) project_symbols: RefCell<HashMap<String, Option<crate::Symbol>>>,
    /// Library names brought by star imports of project modules, by name (asked once).
    pub(crate) star_imported: RefCell<HashMap<String, Option<String>>>,
    /// What each name is a module-level alias of, by assignment (`F = torch.nn.functional`),
    /// once per name: the answer looks at every module-level binding of the name.
    pub(crate) module_aliases: RefCell<HashMap<String, Option<String>>>,
    /// Top-level functions only called from other modules, all with gradients disabled.
    pub(crate) external_no_grad: RefCell<HashMap<usize, Option<String>>>,
}

/// A node's identity within one tree (ids alone can repeat for small inline leaves).
pub(crate) type NodeKey = (usize, usize, usize);

pub(crate) fn key(node: Node<'_>) -> NodeKey {
    (node.id(), node.start_byte(), node.end_byte())
}

/// The nodes of `sorted` (by start byte) that start within `range`.
pub(crate) fn within<'a, 't>(sorted: &'a [Node<'t>], range: std::ops::Range<usize>) -> &'a [Node<'t>] {
    let from = sorted.partition_point(|n| n.start_byte() < range.start);
    let to = sorted.partition_point(|n| n.start_byte() < range.end);
    &sorted[from..to.max(from)]
}

/// The dotted name an identifier or a chain of attributes over one spells (`torch.nn.Linear`),
/// else `None` (a call, a subscript or a literal in the chain).
pub(crate) fn dotted(source: &str, node: Node<'_>) -> Option<String> {
    use crate::NodeExt;
    let kind = node.kind_name();
    if kind != "identifier" && kind != "attribute" {
        return None;
    }
    let text = &source[node.byte_range()];
    // Most chains are written as their name, without spaces, comments or line breaks: then
    // the text is the name, read without a field lookup and a string made at each link.
    if kind == "identifier" || (is_plain_dotted_name(text) && !node.has_error()) {
        return Some(text.to_owned());
    }
    Some(format!("{}.{}", dotted(source, node.field("object")?)?, &source[node.field("attribute")?.byte_range()]))
}

/// Is `text` identifiers joined by dots, none of them a keyword (`None.x` is no name)?
fn is_plain_dotted_name(text: &str) -> bool {
    text.split('.').all(|part| {
        part.bytes().next().is_some_and(|b| !b.is_ascii_digit())
            && part.bytes().all(|b| crate::IDENTIFIER_BYTE[b as usize])
            && !crate::KEYWORDS.contains(&part)
    })
}

/// Named children of a node, collected.
pub fn named_children<'t>(node: Node<'t>) -> Vec<Node<'t>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

/// The name of a parameter of a function's parameter list (`x`, `x: int`, `x=1`,
/// `x: int = 1`); `None` for `*args`, `**kwargs`, the bare `*` and `/`.
pub fn parameter_name(parameter: Node<'_>) -> Option<Node<'_>> {
    match parameter.kind_name() {
        "identifier" => Some(parameter),
        "typed_parameter" => parameter.named_child(0).filter(|n| n.kind_name() == "identifier"),
        "default_parameter" | "typed_default_parameter" => parameter.field("name"),
        _ => None,
    }
}

/// True when `inner` lies within `outer` (inclusive).
pub fn contains(outer: Node<'_>, inner: Node<'_>) -> bool {
    outer.start_byte() <= inner.start_byte() && inner.end_byte() <= outer.end_byte()
}

/// Strips parentheses around an expression.
pub fn unparenthesize(mut node: Node<'_>) -> Node<'_> {
    while node.kind_name() == "parenthesized_expression" {
        match node.named_child(0) {
            Some(inner) => node = inner,
            None => break,
        }
    }
    node
}

impl<'t> SemanticModel<'t> {
    pub fn new(tree: &'t Tree, source: &'t str) -> Self {
        Self::with_project(tree, source, &crate::NoProject)
    }

    /// The model of a module of a project: names it imports from the project are
    /// resolved through `project` (classes and their bases, factories, callers elsewhere).
    pub fn with_project(tree: &'t Tree, source: &'t str, project: &'t dyn crate::ProjectIndex) -> Self {
        Self::indexing(tree, source, project, &[])
    }

    /// [`Self::with_project`] that also indexes every named node whose kind id is `true`
    /// in `kinds` ([`Self::indexed_nodes`]), during the same walk.
    pub fn indexing(tree: &'t Tree, source: &'t str, project: &'t dyn crate::ProjectIndex, kinds: &'t [bool]) -> Self {
        Self::indexing_nodes(std::borrow::Cow::Owned(NamedNodes::of(tree.root_node())), source, project, kinds)
    }

    /// [`Self::indexing`] of the tree `nodes` were walked from (its root node's), when the
    /// caller walked it for something else too: the module's summary, or a parse for the
    /// summary whose walk the project kept ([`crate::WalkedTree`]).
    pub fn indexing_borrowed(nodes: &'t NamedNodes<'t>, source: &'t str, project: &'t dyn crate::ProjectIndex, kinds: &'t [bool]) -> Self {
        Self::indexing_nodes(std::borrow::Cow::Borrowed(nodes), source, project, kinds)
    }

    fn indexing_nodes(nodes: std::borrow::Cow<'t, NamedNodes<'t>>, source: &'t str, project: &'t dyn crate::ProjectIndex, kinds: &'t [bool]) -> Self {
        let root = nodes.root();
        let mut model = SemanticModel {
            source,
            root,
            imports: Vec::new(),
            functions: HashMap::default(),
            functions_in_order: Vec::new(),
            calls: Vec::new(),
            loops: Vec::new(),
            calls_by_name: HashMap::default(),
            identifiers_by_name: HashMap::default(),
            attributes_by_name: HashMap::default(),
            bindings: HashMap::default(),
            self_attributes: HashMap::default(),
            classes: HashMap::default(),
            methods: HashMap::default(),
            methods_by_name: HashMap::default(),
            returns: HashMap::default(),
            forward_methods: RefCell::new(HashMap::default()),
            forward_method_names: RefCell::new(HashMap::default()),
            function_calls: RefCell::new(HashMap::default()),
            call_targets: RefCell::new(HashMap::default()),
            qualified_names: RefCell::new(HashMap::default()),
            local_forwards_without_grad: RefCell::new(HashMap::default()),
            instance_classes: RefCell::new(HashMap::default()),
            self_attribute_classes: RefCell::new(HashMap::default()),
            self_attribute_values: RefCell::new(HashMap::default()),
            return_values: RefCell::new(HashMap::default()),
            modules_by_use: OnceCell::new(),
            optimizers_by_use: OnceCell::new(),
            no_grad_functions: OnceCell::new(),
            finding_no_grad_functions: Cell::new(false),
            value_cache: RefCell::new(HashMap::default()),
            named: std::rc::Rc::new(nodes),
            scope_segments: Vec::new(),
            indexed_kinds: kinds,
            indexed_nodes: Vec::new(),
            indexed_node_kinds: Vec::new(),
            function_extents: HashMap::default(),
            local_scopes: Vec::new(),
            local_scope_segments: Vec::new(),
            local_scope_extents: HashMap::default(),
            module_imports: HashMap::default(),
            function_imports: HashMap::default(),
            imported_names: HashSet::default(),
            has_star_import: false,
            backward_calls: OnceCell::new(),
            training_calls: OnceCell::new(),
            training_calls_pending: Cell::new(false),
            backward_calls_by_scope: OnceCell::new(),
            loop_infos: RefCell::new(HashMap::default()),
            loop_kinds: RefCell::new(HashMap::default()),
            step_loop_functions: RefCell::new(HashMap::default()),
            step_functions: RefCell::new(HashMap::default()),
            fates: RefCell::new(HashMap::default()),
            parameter_fates: RefCell::new(HashMap::default()),
            toggle_statements: HashMap::default(),
            project,
            star_imports: Vec::new(),
            project_symbols: RefCell::new(HashMap::default()),
            star_imported: RefCell::new(HashMap::default()),
            module_aliases: RefCell::new(HashMap::default()),
            external_no_grad: RefCell::new(HashMap::default()),
        };
        let nodes = model.named.clone();
        model.collect(&nodes, 0, None, None);
        model.imported_names = model.imports.iter().map(|i| i.local.clone()).collect();
        for (i, import) in model.imports.iter().enumerate() {
            match import.scope {
                None => {
                    model.module_imports.insert(import.local.clone(), i);
                }
                Some(_) => model.function_imports.entry(import.local.clone()).or_default().push(i),
            }
        }
        model.index_scopes();
        model.index_local_scopes();
        model.resolve_module_classes();
        for bindings in model.bindings.values_mut().flat_map(|by_scope| by_scope.values_mut()) {
            bindings.sort_by_key(|b| b.position);
        }
        let mut in_order: Vec<(usize, usize)> = model.functions.values().map(|f| (f.node.start_byte(), f.node.id())).collect();
        in_order.sort_unstable();
        model.functions_in_order = in_order.into_iter().map(|(_, id)| id).collect();
        for f in model.functions_in_order.iter().map(|id| &model.functions[id]) {
            if let Some(class) = &f.class {
                // A method defined twice (a redefinition, or one per library version
                // under `if`): the last definition in the source is the one looked up.
                model.methods.insert((class.clone(), f.name.clone()), f.node);
                model.methods_by_name.entry(f.name.clone()).or_default().push((class.clone(), f.node));
            }
        }
        // Answers given while the model was still being built may rest on facts it had
        // not yet collected: the memos start afresh.
        model.function_calls.get_mut().clear();
        model.call_targets.get_mut().clear();
        model.qualified_names.get_mut().clear();
        model.local_forwards_without_grad.get_mut().clear();
        model.instance_classes.get_mut().clear();
        model.self_attribute_classes.get_mut().clear();
        model.self_attribute_values.get_mut().clear();
        model
    }

    /// The parent of a node: from the model's walk (every named node), else tree-sitter's
    /// (an anonymous node; tree-sitter walks down from the root to find it).
    pub fn parent(&self, node: Node<'t>) -> Option<Node<'t>> {
        match self.named.index_of(node) {
            Some(at) => self.named.parent(at).map(|p| self.named.given(p)),
            None => node.parent(),
        }
    }

    pub fn source(&self) -> &'t str {
        self.source
    }

    /// The child of `node` in field `name` (as [`crate::NodeExt::field`] gives it), read
    /// from the model's walk of its tree where it can be ([`NamedNodes::field_of`]).
    pub fn field(&self, node: Node<'t>, name: &'static str) -> Option<Node<'t>> {
        self.named.field_of(node, name)
    }

    /// The named children of `node` (as [`named_children`] gives them), read from the
    /// model's walk of its tree ([`NamedNodes::named_children_of`]).
    pub fn named_children(&self, node: Node<'t>) -> Vec<Node<'t>> {
        self.named.named_children_of(node)
    }

    pub fn root(&self) -> Node<'t> {
        self.root
    }

    /// The text of a node.
    pub fn text(&self, node: Node<'_>) -> &'t str {
        &self.source[node.byte_range()]
    }

    /// Every call expression of the module, in source order.
    pub fn calls(&self) -> &[Node<'t>] {
        &self.calls
    }

    /// Every `for` and `while` statement, in source order.
    pub fn loops(&self) -> &[Node<'t>] {
        &self.loops
    }

    /// Byte ranges of the loops not nested in another loop of the same scope.
    pub fn outermost_loop_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
        for l in &self.loops {
            if ranges.last().map(|r| l.end_byte() <= r.end).unwrap_or(false) {
                continue;
            }
            ranges.push(l.byte_range());
        }
        ranges
    }

    /// Calls whose callee's last name part is `name` (`name(...)`, `x.name(...)`).
    pub fn calls_named(&self, name: &str) -> &[Node<'t>] {
        self.calls_by_name.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The named nodes of the kinds given to [`Self::indexing`], in source order.
    pub fn indexed_nodes(&self) -> &[Node<'t>] {
        &self.indexed_nodes
    }

    /// The kind id of each of [`Self::indexed_nodes`], in the same order.
    pub fn indexed_node_kinds(&self) -> &[u16] {
        &self.indexed_node_kinds
    }

    /// The indexed nodes of the named kind `kind` (`"call"`), in source order.
    pub fn indexed_nodes_of_kind(&self, kind: &str) -> impl Iterator<Item = Node<'t>> + '_ {
        let kind = crate::language().id_for_node_kind(kind, true);
        self.indexed_nodes.iter().zip(&self.indexed_node_kinds).filter(move |(_, k)| **k == kind).map(|(n, _)| *n)
    }
}
