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

use std::cell::{OnceCell, RefCell};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use tree_sitter::{Node, Tree};

use crate::NodeExt;

/// Nearest enclosing function (its node id), or `None` for module level.
type ScopeId = Option<usize>;

/// What an expression evaluates to, as far as GPU memory is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// A tensor that carries autograd history (keeps its graph alive).
    GradTensor,
    /// A tensor without autograd history (detached, created under no-grad, data).
    PlainTensor,
    /// A Python number (`.item()`, `float()`, a literal).
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
struct Import {
    scope: ScopeId,
    local: String,
    qualified: String,
}

#[derive(Debug)]
struct ClassInfo {
    is_module: bool,
    is_lightning: bool,
    /// The names of its local base classes (looked up for inherited methods).
    bases: Vec<String>,
    /// The bases as spelled (dotted), for the project lookup of imported bases.
    spelled_bases: Vec<String>,
}

/// The semantic model of one module. Build it once per parse with [`SemanticModel::new`].
pub struct SemanticModel<'t> {
    source: &'t str,
    root: Node<'t>,
    imports: Vec<Import>,
    functions: HashMap<usize, FunctionInfo<'t>>,
    /// Every call, in source order.
    calls: Vec<Node<'t>>,
    /// Every `for` / `while` statement, in source order.
    loops: Vec<Node<'t>>,
    /// Calls by the last part of their callee's name (`f(...)`, `x.f(...)` -> "f").
    calls_by_name: HashMap<&'t str, Vec<Node<'t>>>,
    /// Every identifier node by its text, in source order: rules look the uses of a name
    /// up here instead of walking the module for each candidate.
    identifiers_by_name: HashMap<&'t str, Vec<Node<'t>>>,
    /// Every `attribute` node by its last part (`a.b.c` -> "c"), in source order.
    attributes_by_name: HashMap<&'t str, Vec<Node<'t>>>,
    /// By name, then by scope (looked up by `&str` without allocating).
    bindings: HashMap<&'t str, HashMap<ScopeId, Vec<Binding<'t>>>>,
    /// `self.<attr> = value` assignments anywhere in a class, by attribute name.
    self_attributes: HashMap<&'t str, Vec<Node<'t>>>,
    classes: HashMap<&'t str, ClassInfo>,
    /// Methods by (class, name): the function node of each.
    methods: HashMap<(String, String), Node<'t>>,
    /// Methods by name: their class and function node.
    methods_by_name: HashMap<String, Vec<(String, Node<'t>)>>,
    /// `return` statements with a value, by the id of their function.
    returns: HashMap<usize, Vec<Node<'t>>>,
    /// Memo of [`SemanticModel::method_runs_forward`], by method node id.
    forward_methods: RefCell<HashMap<usize, bool>>,
    /// Memo of `some_module_method_runs_forward`, by method name.
    forward_method_names: RefCell<HashMap<String, bool>>,
    /// Memo of [`SemanticModel::function_return_kind`], by function node id.
    return_kinds: RefCell<HashMap<usize, ValueKind>>,
    /// (scope, name) of names on which a module-only method is called (`x.eval()`,
    /// `x.parameters()`): a value known as a module by what is done with it. `self.x`
    /// is recorded as "self.x" with scope `None`.
    modules_by_use: OnceCell<HashSet<(ScopeId, &'t str)>>,
    /// Functions that always run with gradients disabled (decorated, framework hooks,
    /// or only ever called from a no-grad context).
    no_grad_functions: HashMap<usize, String>,
    value_cache: RefCell<HashMap<usize, ValueKind>>,
    /// Every node's parent. tree-sitter's `Node::parent` walks down from the root each
    /// time (O(depth × siblings)); the rules ask for parents constantly.
    parents: HashMap<NodeKey, Node<'t>>,
    /// Where each function's scope begins and ends, flattened: `(byte, scope)` in byte
    /// order, the innermost function at that byte (found by binary search: the scope of a
    /// node is asked constantly, and walking its ancestors each time showed in profiles).
    scope_segments: Vec<(usize, ScopeId)>,
    /// Each function's end byte and the function it is nested in.
    function_extents: HashMap<usize, (usize, ScopeId)>,
    /// Classes, lambdas and comprehensions (start, end, node id), in the order the walk
    /// meets them: scopes of their own for the names they bind (a class body's
    /// attributes and methods, a lambda's parameters, a comprehension's targets), which
    /// are visible only inside them (a class's not in its methods either).
    local_scopes: Vec<(usize, usize, usize)>,
    /// `local_scopes` flattened like `scope_segments`: the innermost class, lambda or
    /// comprehension at each byte, `None` outside all of them.
    local_scope_segments: Vec<(usize, ScopeId)>,
    /// Each local scope's end byte, the local scope it is nested in (`None`: directly in
    /// its function or the module), and its start byte.
    local_scope_extents: HashMap<usize, (usize, ScopeId, usize)>,
    /// Index into `imports` of the last module-level import of each local name.
    module_imports: HashMap<String, usize>,
    /// Indices into `imports` of function-local imports, by local name.
    function_imports: HashMap<String, Vec<usize>>,
    /// Which node kinds (by kind id) to index in `indexed_nodes`: asked for by the caller
    /// (the linter's rules' query roots), so that no second walk of the tree finds them.
    indexed_kinds: &'t [bool],
    /// Every named node of `indexed_kinds`, in source order.
    indexed_nodes: Vec<Node<'t>>,
    /// Does the module have a `from x import *`?
    has_star_import: bool,
    /// Local names bound by any import, to reject non-imported names quickly.
    imported_names: HashSet<String>,
    backward_calls: OnceCell<Vec<Node<'t>>>,
    /// Backward calls and optimizer steps with their scope, by start byte: what
    /// `trains_in` searches for every loop (a scan of all calls per loop was quadratic).
    training_calls: OnceCell<Vec<(usize, ScopeId)>>,
    /// `backward_calls` grouped by scope, in source order.
    backward_calls_by_scope: OnceCell<HashMap<ScopeId, Vec<Node<'t>>>>,
    /// `loop_info` by loop node id: rules and the loop classification ask for the same
    /// loops again and again.
    loop_infos: RefCell<HashMap<usize, LoopInfo<'t>>>,
    loop_kinds: RefCell<HashMap<usize, LoopKind>>,
    /// Statements `x.enter_context(...)` / `torch.set_grad_enabled(...)`, by their block.
    toggle_statements: HashMap<NodeKey, Vec<Node<'t>>>,
    // ----- the project around the module (see `project.rs`) -----
    /// What the project knows of imported names ([`crate::NoProject`] for a lone file).
    project: &'t dyn crate::ProjectIndex,
    /// Modules imported with `from M import *` (module level), as spelled.
    star_imports: Vec<String>,
    /// Answers of the project, by the name asked (the model asks each name once).
    project_symbols: RefCell<HashMap<String, Option<crate::Symbol>>>,
    /// Top-level functions only called from other modules, all with gradients disabled.
    external_no_grad: RefCell<HashMap<usize, Option<String>>>,
}

/// A node's identity within one tree (ids alone can repeat for small inline leaves).
type NodeKey = (usize, usize, usize);

fn key(node: Node<'_>) -> NodeKey {
    (node.id(), node.start_byte(), node.end_byte())
}

/// Words in a name that say "this is a model".
const MODEL_WORDS: &[&str] = &[
    "model", "models", "net", "network", "encoder", "decoder", "backbone", "classifier",
    "generator", "discriminator", "teacher", "student", "unet", "vae", "transformer", "critic",
    "actor", "policy", "resnet", "vgg", "bert", "gpt", "llm", "extractor", "autoencoder",
    "detector", "segmenter", "lm", "vit", "clip", "gan",
];
/// First words of a function name that does something to a model rather than being one.
const NOT_MODEL_VERBS: &[&str] = &[
    "get", "create", "build", "make", "load", "download", "update", "step", "swap", "prepare",
    "init", "initialize", "gen", "compute", "apply", "setup", "set", "convert", "wrap", "unwrap",
    "check", "is", "has", "save", "freeze", "unfreeze", "register", "resolve", "validate",
    "maybe", "patch", "replace", "copy", "print", "log", "export", "find", "fetch", "parse",
    "optimize", "extract", "enable", "disable", "reset", "count", "infer", "cast", "move",
    "configure",
];
/// Last words of a name for something a model has or needs, not the model itself.
const NOT_MODEL_NOUNS: &[&str] = &[
    "kwargs", "args", "cache", "config", "cfg", "path", "paths", "name", "names", "dir", "file",
    "type", "types", "cls", "class", "id", "ids", "state", "dict", "registry", "mask", "masks",
    "size", "dim", "params", "parameters", "keys", "list", "info", "card", "url", "version",
    "mixin", "output", "outputs", "tokens", "kwarg", "inputs", "generation", "index",
    // What is done to a model or kept beside it: `clip_gradients`, `clip_grad_norm_`,
    // `model_sharded_context`, `attach_model_callbacks`, `device_map`, `run_gpt2_test`,
    // `model_to_device`, `set_model_graph`, `attach_model_logging_functions`.
    "gradients", "gradient", "grads", "grad", "norm", "context", "callbacks", "callback",
    "hooks", "hook", "attr", "attrs", "map", "usage", "test", "tests", "device", "graph",
    "function", "functions", "value", "values",
    // A tensor of a model: `saved_model_param`, `model_weights`, `model_buffer`.
    "param", "parameter", "weight", "weights", "tensor", "tensors", "buffer", "buffers",
];
/// Words in a name that say "this is a loss function object".
const LOSS_WORDS: &[&str] = &["criterion", "criteria", "loss_fn", "lossfn", "loss_func", "loss_function", "loss_module"];
/// Words in a name that say evaluation or inference.
const EVAL_WORDS: &[&str] = &[
    "eval", "evaluate", "evaluation", "evaluating", "validate", "validation", "validating", "val",
    "valid", "test", "testing", "predict", "prediction", "predictions", "infer", "inference",
    "generate", "generation", "sample", "sampling", "dev", "holdout",
];
/// First words of functions that check, get or prepare something, even when an
/// evaluation word follows (`is_valid`, `get_test_split`).
const NOT_EVAL_FUNCTION_VERBS: &[&str] = &[
    "is", "has", "get", "set", "check", "create", "prepare", "update", "build", "make", "init",
    "setup", "load", "save", "register", "maybe", "convert", "parse", "to", "from", "should",
    "can", "add", "remove", "on",
];
/// Last words of functions that validate or generate something other than a model's output.
const NOT_EVAL_FUNCTION_OBJECTS: &[&str] = &[
    "inputs", "input", "environment", "architecture", "kwargs", "args", "arguments", "config",
    "cfg", "params", "parameters", "shape", "shapes", "dtype", "type", "types", "anchors",
    "ratio", "value", "values", "path", "format", "mask", "masks", "name", "names", "keys",
    "frames", "indices", "ids", "length", "size", "options", "dataloader", "loader",
    "dataset", "file", "files", "signature", "spec", "schema", "settings", "start", "end",
];
/// Methods only a `torch.nn.Module` has: a name they are called on holds a module.
const MODULE_ONLY_METHODS: &[&str] = &["eval", "parameters", "named_parameters", "load_state_dict", "requires_grad_", "modules", "named_modules"];

/// Is `name` spelled like a class (`Generator`, `ResBlock`, `VGG16`): an upper-case first
/// letter and not all upper case (`LR`, `MAX_ITERS` are constants)?
fn is_class_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_uppercase()) && name.chars().any(|c| c.is_lowercase())
}

/// Library callables that build a network: `torch.nn` classes, torchvision / timm model
/// constructors, transformers' `from_pretrained`, `torch.hub.load`.
fn module_factory(qualified: &str) -> bool {
    let last = qualified.rsplit('.').next().unwrap_or("");
    let first_upper = last.chars().next().map(char::is_uppercase).unwrap_or(false);
    if qualified.starts_with("torch.nn.")
        && !qualified.starts_with("torch.nn.functional.")
        && !qualified.starts_with("torch.nn.utils")
        && !qualified.starts_with("torch.nn.init")
        && !qualified.starts_with("torch.nn.parallel.data_parallel")
        && first_upper
    {
        return !matches!(last, "Parameter" | "ParameterList" | "ParameterDict");
    }
    (qualified.starts_with("torchvision.models.") && !qualified.contains("Weights") && last.chars().next().map(char::is_lowercase).unwrap_or(false))
        || qualified == "timm.create_model"
        || qualified == "torch.hub.load"
        || (qualified.starts_with("transformers.") && last == "from_pretrained" && !pretrained_class_is_not_a_network(qualified))
}

/// `from_pretrained` of these loads something other than a network: a tokenizer, a
/// feature extractor or processor, a configuration, a noise scheduler, or a pipeline (which
/// holds networks but is not one, and runs them under `no_grad`). `class` is the callee
/// as spelled or qualified (`transformers.AutoTokenizer.from_pretrained`).
pub fn pretrained_class_is_not_a_network(class: &str) -> bool {
    ["Tokenizer", "Processor", "FeatureExtractor", "Config", "Scheduler", "Pipeline"].iter().any(|w| class.contains(w))
}

/// `from_pretrained` of these loads a network with every parameter frozen unless it is
/// given `is_trainable=True`: PEFT's `PeftModel`, `PeftModelFor*` and `AutoPeftModel*` load
/// for inference by default (not `PeftMixedModel`, which activates, and so unfreezes, the
/// adapter it loads). `class` as for [`pretrained_class_is_not_a_network`].
pub fn pretrained_class_loads_frozen(class: &str) -> bool {
    let last_class = class.trim_end_matches(".from_pretrained").rsplit('.').next().unwrap_or("");
    ["PeftModel", "AutoPeftModel"].iter().any(|p| last_class.starts_with(p)) && !last_class.starts_with("PeftMixedModel")
}

/// Does a call of `callee` (qualified through imports; a `from_pretrained` call also as
/// spelled) load a pretrained network that trains unless frozen? `keyword` gives a keyword
/// argument's text as written. `X.from_pretrained` of a network (not a tokenizer, and not
/// a PEFT model loaded frozen), `torchvision.models.<arch>(weights=...)` or
/// `(pretrained=True)`, `timm.create_model(..., pretrained=True)`, `torch.hub.load(...)`.
pub fn loads_pretrained_network(callee: &str, keyword: &dyn Fn(&str) -> Option<String>) -> bool {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    if last == "from_pretrained" {
        let trainable = keyword("is_trainable").is_some_and(|v| v != "False");
        return !pretrained_class_is_not_a_network(callee) && !(pretrained_class_loads_frozen(callee) && !trainable);
    }
    if callee.starts_with("torchvision.models.") {
        return keyword("weights").is_some_and(|w| w != "None") || keyword("pretrained").as_deref() == Some("True");
    }
    if callee == "timm.create_model" {
        return keyword("pretrained").as_deref() == Some("True");
    }
    callee == "torch.hub.load"
}

/// May a class whose source is `text` freeze the pretrained network it loads, or run it
/// without autograd? It mentions `requires_grad` (`p.requires_grad = False`,
/// `requires_grad_(False)`), `no_grad` or `inference_mode`.
pub(crate) fn class_may_freeze(text: &str) -> bool {
    ["requires_grad", "no_grad", "inference_mode"].iter().any(|w| text.contains(w))
}

/// Methods after which a network PEFT loaded frozen may train again: asked for its
/// parameters (a loop may set `requires_grad`), `requires_grad_`, and PEFT's own
/// `set_adapter` / `set_requires_grad` / `add_adapter`, which make adapters trainable
/// (`load_adapter` does only with `is_trainable=True`).
const UNFREEZING_METHODS: &[&str] = &["requires_grad_", "parameters", "named_parameters", "set_adapter", "set_requires_grad", "add_adapter"];

/// Lightning hooks that run under `torch.no_grad()` already.
const NO_GRAD_HOOKS: &[&str] = &["validation_step", "test_step", "predict_step"];

/// Spans that nest (start, end, node id), flattened: `(byte, innermost span there)` in byte
/// order, for a binary search, and for each span `(id, start, end, the span around it)`.
/// Sweeping the spans in start order with a stack of open ones gives, at each start and
/// end, the innermost one.
fn flatten_nested_spans(mut spans: Vec<(usize, usize, usize)>) -> (Vec<(usize, ScopeId)>, Vec<(usize, usize, usize, ScopeId)>) {
    spans.sort_unstable_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
    let mut segments = vec![(0, None)];
    let mut extents = Vec::with_capacity(spans.len());
    let mut open: Vec<(usize, usize)> = Vec::new();
    for &(start, end, id) in &spans {
        while let Some(&(top_end, _)) = open.last() {
            if top_end > start {
                break;
            }
            open.pop();
            segments.push((top_end, open.last().map(|&(_, id)| id)));
        }
        extents.push((id, start, end, open.last().map(|&(_, id)| id)));
        open.push((end, id));
        segments.push((start, Some(id)));
    }
    while let Some((top_end, _)) = open.pop() {
        segments.push((top_end, open.last().map(|&(_, id)| id)));
    }
    (segments, extents)
}

/// The nodes of `sorted` (by start byte) that start within `range`.
fn within<'a, 't>(sorted: &'a [Node<'t>], range: std::ops::Range<usize>) -> &'a [Node<'t>] {
    let from = sorted.partition_point(|n| n.start_byte() < range.start);
    let to = sorted.partition_point(|n| n.start_byte() < range.end);
    &sorted[from..to.max(from)]
}

/// Splits an identifier into lower-case words: `valLoader2` -> [val, loader2], `train_dl` -> [train, dl].
pub fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c == '_' || c == '.' || !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// A quick necessary condition for the `name_says_*` predicates: does an ASCII name
/// contain one of the words (ASCII case-insensitively)? Every word those predicates
/// accept is a piece of the name, so `false` here means they answer `false`, without
/// splitting the name. Non-ASCII names (whose lower case can be ASCII) always pass.
struct WordFilter {
    words: &'static [&'static str],
    automaton: std::sync::OnceLock<aho_corasick::AhoCorasick>,
    /// For whole texts: the words in lower case, leftmost-first (any occurrence will
    /// do), searched in a lower-case copy, so the SIMD prefilter can be used.
    text_automaton: std::sync::OnceLock<aho_corasick::AhoCorasick>,
}

impl WordFilter {
    const fn new(words: &'static [&'static str]) -> Self {
        WordFilter { words, automaton: std::sync::OnceLock::new(), text_automaton: std::sync::OnceLock::new() }
    }

    fn may_match(&self, name: &str) -> bool {
        if !name.is_ascii() {
            return true;
        }
        self.automaton().is_match(name)
    }
}

impl WordFilter {
    fn automaton(&self) -> &aho_corasick::AhoCorasick {
        self.automaton.get_or_init(|| {
            aho_corasick::AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(self.words)
                .expect("a few plain words build an automaton")
        })
    }

    /// Does some word of `text` (a maximal run of identifier characters: ASCII letters,
    /// digits, `_` and any non-ASCII character; in code, strings or comments) satisfy
    /// `says`, a predicate this filter is a necessary condition of? Searches the text for
    /// the filter's words instead of testing every word; a non-ASCII word is also tested
    /// piece by piece (split at what is not alphanumeric), as a comment splits.
    /// `lower` is `text` in ASCII lower case (the same length).
    fn any_word_of(&self, text: &str, lower: &str, says: impl Fn(&str) -> bool) -> bool {
        let bytes = text.as_bytes();
        let is_word_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
        let word_around = |at: usize| {
            let start = bytes[..at].iter().rposition(|b| !is_word_byte(*b)).map(|p| p + 1).unwrap_or(0);
            let end = bytes[at..].iter().position(|b| !is_word_byte(*b)).map(|p| at + p).unwrap_or(bytes.len());
            // Runs end at ASCII bytes (or the ends of the text): whole characters.
            &text[start..end]
        };
        let test = |word: &str| {
            says(word) || (!word.is_ascii() && word.split(|c: char| !c.is_alphanumeric() && c != '_').any(|p| !p.is_empty() && says(p)))
        };
        let mut tested: HashSet<&str> = HashSet::default();
        let automaton = self.text_automaton.get_or_init(|| {
            aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(self.words.iter().map(|w| w.to_ascii_lowercase()))
                .expect("a few plain words build an automaton")
        });
        let mut from = 0;
        while let Some(m) = automaton.find(aho_corasick::Input::new(lower.as_bytes()).range(from..)) {
            let word = word_around(m.start());
            if tested.insert(word) && test(word) {
                return true;
            }
            from = word.as_ptr() as usize - text.as_ptr() as usize + word.len();
        }
        // The lower case of a non-ASCII word can hold a filter word (the Kelvin sign is `k`).
        let mut from = 0;
        while let Some(n) = bytes[from..].iter().position(|b| *b >= 0x80) {
            let word = word_around(from + n);
            if tested.insert(word) && test(word) {
                return true;
            }
            from = word.as_ptr() as usize - text.as_ptr() as usize + word.len();
        }
        false
    }
}

/// Does some word of `text` (code, strings and comments alike) say it holds a model or
/// a loss function ([`name_says_model`], [`name_says_loss`])?
pub fn text_names_a_model_or_loss(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    MODEL_FILTER.any_word_of(text, &lower, name_says_model) || LOSS_FILTER.any_word_of(text, &lower, name_says_loss)
}

/// Does some word of `text` say it holds an optimizer ([`name_says_optimizer`])?
pub fn text_names_an_optimizer(text: &str) -> bool {
    OPTIMIZER_FILTER.any_word_of(text, &text.to_ascii_lowercase(), name_says_optimizer)
}

static MODEL_FILTER: WordFilter = WordFilter::new(MODEL_WORDS);
static LOSS_FILTER: WordFilter = WordFilter::new(LOSS_WORDS);
static OPTIMIZER_FILTER: WordFilter = WordFilter::new(&["opt", "scaler"]);
static EVAL_FILTER: WordFilter = WordFilter::new(EVAL_WORDS);
static DATA_FILTER: WordFilter = WordFilter::new(&["loader", "dataset", "ds", "dl", "batches", "data", "iterator", "samples"]);

fn strip_digits(word: &str) -> &str {
    word.trim_end_matches(|c: char| c.is_ascii_digit())
}

/// Does a name say it holds a model (`model`, `self.encoder`, `resnet50`, `G_net`)?
/// A verb phrase (`get_model`, `step_model`, `_update_model_kwargs`) or a name for
/// something a model has (`model_config`, `model_path`, `encoder_cache`) does not.
pub fn name_says_model(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    if !MODEL_FILTER.may_match(last) {
        return false;
    }
    let words = name_words(last);
    let (Some(first), Some(final_word)) = (words.first(), words.last()) else { return false };
    if words.len() > 1 && (NOT_MODEL_VERBS.contains(&first.as_str()) || NOT_MODEL_NOUNS.contains(&strip_digits(final_word))) {
        return false;
    }
    if words.iter().any(|w| MODEL_WORDS.contains(&strip_digits(w))) {
        return true;
    }
    let lower = last.to_lowercase();
    let lower = strip_digits(&lower);
    lower.ends_with("model") || lower.ends_with("net")
}

/// Does the name of a module class say it computes a loss (`FocalLoss`, `CrossEntropyLoss2d`,
/// `DiceLoss3D`, `perceptual_loss`)? Asked only of a class known to build a module, to tell
/// a loss from a network.
pub fn class_name_says_loss(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    let stem = last.trim_end_matches(['d', 'D']).trim_end_matches(|c: char| c.is_ascii_digit());
    name_says_loss(last) || last.ends_with("Loss") || (stem.len() < last.len() && stem.ends_with("Loss"))
}

/// Does a name say it holds a loss function object (`criterion`, `loss_fn`)?
pub fn name_says_loss(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    if !LOSS_FILTER.may_match(last) {
        return false;
    }
    let last = last.to_lowercase();
    LOSS_WORDS.iter().any(|w| {
        last == *w
            || last.strip_suffix(w).map(|rest| rest.ends_with('_')).unwrap_or(false)
            || last.strip_prefix(w).map(|rest| rest.starts_with('_')).unwrap_or(false)
    })
}

/// Does a name (or an expression's text) say it holds an optimizer or a `GradScaler`
/// (`optimizer`, `opt_g`, `optimD`, `self.optimizers()[0]`, `scaler`)? `Optional` and
/// `options` do not.
pub fn name_says_optimizer(name: &str) -> bool {
    if !OPTIMIZER_FILTER.may_match(name) {
        return false;
    }
    name_words(name).iter().any(|w| {
        let w = strip_digits(w);
        w == "opt" || w.starts_with("optim") || w.ends_with("scaler")
    })
}

/// Does a name say evaluation/inference (`evaluate`, `val_loader`, `test_step`, `run_inference`)?
pub fn name_says_eval(name: &str) -> bool {
    if !EVAL_FILTER.may_match(name) {
        return false;
    }
    name_words(name).iter().any(|w| EVAL_WORDS.contains(&strip_digits(w)))
}

/// Does a function's name say it evaluates or runs inference (`evaluate`,
/// `validate_one_epoch`, `run_test`, `predict`, `generate`, `sample`)? Not a check, getter
/// or preparation step (`validate_inputs`, `is_valid_image`, `get_valid_ratio`,
/// `prepare_inputs_for_generation`): only the words before a `for` count, and a name that
/// starts with such a verb or ends with what it checks or makes is not evaluation.
pub fn function_name_says_eval(name: &str) -> bool {
    if !EVAL_FILTER.may_match(name) {
        return false;
    }
    let words = name_words(name);
    let words: Vec<&str> = words.iter().map(|w| strip_digits(w)).take_while(|w| *w != "for").collect();
    let (Some(first), Some(last)) = (words.first(), words.last()) else { return false };
    if words.len() > 1 && (NOT_EVAL_FUNCTION_VERBS.contains(first) || NOT_EVAL_FUNCTION_OBJECTS.contains(last)) {
        return false;
    }
    words.iter().any(|w| EVAL_WORDS.contains(w))
}

/// Does a name say it holds batches of data (`train_loader`, `dataset`, `dl`)?
pub fn name_says_data(name: &str) -> bool {
    if !DATA_FILTER.may_match(name) {
        return false;
    }
    let words = name_words(name);
    words.iter().any(|w| {
        let w = strip_digits(w);
        matches!(w, "loader" | "dataloader" | "dataset" | "ds" | "dl" | "batches" | "data" | "iterator" | "datapipe" | "minibatches" | "samples")
            || w.ends_with("loader")
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

/// Methods of an `nn.Module` that return the module itself (`Net().cuda().eval()` is the
/// network), as the model, the project summaries and the rules follow them.
pub const MODULE_METHODS_RETURNING_SELF: &[&str] =
    &["to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_", "type", "share_memory"];

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
        let root = tree.root_node();
        let mut model = SemanticModel {
            source,
            root,
            imports: Vec::new(),
            functions: HashMap::default(),
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
            return_kinds: RefCell::new(HashMap::default()),
            modules_by_use: OnceCell::new(),
            no_grad_functions: HashMap::default(),
            value_cache: RefCell::new(HashMap::default()),
            parents: HashMap::default(),
            scope_segments: Vec::new(),
            indexed_kinds: kinds,
            indexed_nodes: Vec::new(),
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
            backward_calls_by_scope: OnceCell::new(),
            loop_infos: RefCell::new(HashMap::default()),
            loop_kinds: RefCell::new(HashMap::default()),
            toggle_statements: HashMap::default(),
            project,
            star_imports: Vec::new(),
            project_symbols: RefCell::new(HashMap::default()),
            external_no_grad: RefCell::new(HashMap::default()),
        };
        model.parents.reserve(root.descendant_count() / 2);
        model.collect(&mut root.walk(), None, None);
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
        for bindings in model.bindings.values_mut().flat_map(|by_scope| by_scope.values_mut()) {
            bindings.sort_by_key(|b| b.position);
        }
        for f in model.functions.values() {
            if let Some(class) = &f.class {
                model.methods.entry((class.clone(), f.name.clone())).or_insert(f.node);
                model.methods_by_name.entry(f.name.clone()).or_default().push((class.clone(), f.node));
            }
        }
        model.compute_no_grad_functions();
        model
    }

    /// The parent of a node: recorded while collecting (every named node of the code
    /// the model walks), else tree-sitter's (which walks down from the root).
    pub fn parent(&self, node: Node<'t>) -> Option<Node<'t>> {
        match self.parents.get(&key(node)) {
            Some(parent) => Some(*parent),
            None => node.parent(),
        }
    }

    /// Records `node` as the parent of its named children.
    fn record_children(&mut self, node: Node<'t>) {
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            self.parents.insert(key(child), node);
        }
    }

    /// Every `backward()` / `torch.autograd.grad` call of the module.
    pub fn backward_calls(&self) -> &[Node<'t>] {
        self.backward_calls.get_or_init(|| self.calls.iter().copied().filter(|c| self.is_backward_call(*c)).collect())
    }

    /// The `backward()` / `torch.autograd.grad` calls in the scope `node` runs in (its
    /// function, or module level), in source order.
    pub fn backward_calls_in_scope_of(&self, node: Node<'t>) -> &[Node<'t>] {
        let by_scope = self.backward_calls_by_scope.get_or_init(|| {
            let mut by_scope: HashMap<ScopeId, Vec<Node<'t>>> = HashMap::default();
            for call in self.backward_calls() {
                by_scope.entry(self.scope_of(*call)).or_default().push(*call);
            }
            by_scope
        });
        by_scope.get(&self.scope_of(node)).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Is a part of what the name `ident` holds backpropagated in its scope
    /// (`out["loss"].backward()`, `out.loss.backward()`), through the same binding? Then it
    /// holds a tensor with history whatever produced it (`out = module.training_step(b)`).
    pub fn part_is_backpropagated(&self, ident: Node<'t>) -> bool {
        if ident.kind_name() != "identifier" {
            return false;
        }
        let name = self.text(ident);
        let binding = self.binding_at(name, ident).map(|b| b.statement.id());
        if binding.is_none() {
            return false;
        }
        self.backward_calls_in_scope_of(ident).iter().any(|call| {
            let Some(receiver) = call.field("function").filter(|f| f.kind_name() == "attribute").and_then(|f| f.field("object")) else {
                return false;
            };
            let receiver = unparenthesize(receiver);
            let base = match receiver.kind_name() {
                "subscript" => receiver.field("value"),
                "attribute" => receiver.field("object"),
                _ => None,
            };
            base.is_some_and(|b| {
                b.kind_name() == "identifier" && self.text(b) == name && self.binding_at(name, b).map(|x| x.statement.id()) == binding
            })
        })
    }

    /// Is the network `expr` holds frozen, every parameter without `requires_grad`: loaded
    /// by a `from_pretrained` that freezes ([`pretrained_class_loads_frozen`]) without
    /// `is_trainable=True`, through the methods that return the network itself, and its
    /// name never given `requires_grad_` nor asked for its parameters in that scope (which
    /// may unfreeze them)?
    pub fn is_frozen_network(&self, expr: Node<'t>) -> bool {
        let expr = unparenthesize(expr);
        if expr.kind_name() != "identifier" {
            return false;
        }
        let name = self.text(expr);
        let Some(binding) = self.binding_at(name, expr) else { return false };
        let (BindingKind::Assign, Some(mut value)) = (binding.kind, binding.value) else { return false };
        let scope = self.enclosing_function(expr).map(|f| f.node.byte_range()).unwrap_or(0..self.source.len());
        let on_name = |a: &Node<'t>| a.field("object").is_some_and(|o| self.text(o) == name);
        let unfreezes = UNFREEZING_METHODS.iter().any(|m| self.attributes_named_in(m, scope.clone()).iter().any(on_name))
            || self.attributes_named_in("load_adapter", scope.clone()).iter().filter(|a| on_name(a)).any(|a| {
                self.parent(*a).is_some_and(|call| self.text(call).split_whitespace().collect::<String>().contains("is_trainable=True"))
            });
        if unfreezes {
            return false;
        }
        for _ in 0..8 {
            value = unparenthesize(value);
            let Some(callee) = value.field("function").filter(|_| value.kind_name() == "call") else { return false };
            let method = callee.field("attribute").map(|a| self.text(a)).unwrap_or("");
            if method == "from_pretrained" {
                let class = self.qualified_name(callee).or_else(|| self.dotted_name(callee)).unwrap_or_default();
                let trainable = value.field("arguments").is_some_and(|args| {
                    named_children(args).into_iter().any(|a| {
                        a.kind_name() == "keyword_argument"
                            && a.field("name").is_some_and(|n| self.text(n) == "is_trainable")
                            && a.field("value").is_none_or(|v| self.text(v) != "False")
                    })
                });
                return pretrained_class_loads_frozen(&class) && !trainable;
            }
            if !MODULE_METHODS_RETURNING_SELF.contains(&method) || method == "requires_grad_" {
                return false;
            }
            let Some(object) = callee.field("object") else { return false };
            value = object;
        }
        false
    }

    /// Is `name` backpropagated after `statement` in the same scope (`total.backward()`,
    /// `torch.stack(losses).mean().backward()`, `scaler.scale(total).backward()`)?
    pub fn backpropagated_after(&self, name: &str, statement: Node<'t>) -> bool {
        self.backward_calls_in_scope_of(statement)
            .iter()
            .any(|c| c.start_byte() > statement.start_byte() && self.identifiers_in(*c).iter().any(|n| n == name))
    }

    pub fn source(&self) -> &'t str {
        self.source
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

    // ----- collection -------------------------------------------------------------

    fn is_indexed(&self, node: Node<'t>) -> bool {
        self.indexed_kinds.get(node.kind_id() as usize).copied().unwrap_or(false) && node.is_named()
    }

    /// Indexes the nodes of a subtree the model does not otherwise collect (parameters,
    /// base classes, imports), in source order.
    fn index_subtree(&mut self, node: Node<'t>) {
        if self.indexed_kinds.is_empty() {
            return;
        }
        let mut cursor = node.walk();
        'walk: loop {
            let current = cursor.node();
            if self.is_indexed(current) {
                self.indexed_nodes.push(current);
            }
            if cursor.goto_first_child() {
                continue;
            }
            while !cursor.goto_next_sibling() {
                if !cursor.goto_parent() || cursor.node() == node {
                    break 'walk;
                }
            }
        }
    }

    /// Indexes the children of `node` other than `except` (a definition's body, which is
    /// collected), each with its subtree.
    fn index_children_except(&mut self, node: Node<'t>, except: Option<Node<'t>>) {
        if self.indexed_kinds.is_empty() {
            return;
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'t>> = node.children(&mut cursor).filter(|c| Some(*c) != except).collect();
        for child in children {
            self.index_subtree(child);
        }
    }

    /// Collects what the node at `cursor` defines, binds and calls, and records its
    /// named children's parent; one cursor walks the tree (a cursor per node showed in
    /// profiles), and the cursor is back on the node when this returns.
    fn collect(&mut self, cursor: &mut tree_sitter::TreeCursor<'t>, scope: ScopeId, class: Option<&str>) {
        let node = cursor.node();
        if self.is_indexed(node) {
            self.indexed_nodes.push(node);
        }
        if !self.visit(node, scope, class) {
            return;
        }
        if cursor.goto_first_child() {
            loop {
                let child = cursor.node();
                if child.is_named() {
                    self.parents.insert(key(child), node);
                    self.collect(cursor, scope, class);
                }
                if !cursor.goto_next_sibling() {
                    break;
                }
            }
            cursor.goto_parent();
        }
    }

    /// What `node` itself defines, binds and calls; false when it collected its children
    /// itself (definitions, imports). Kept out of [`Self::collect`] so that the recursion's
    /// frame stays small: deeply nested code must not overflow a thread's stack.
    #[inline(never)]
    fn visit(&mut self, node: Node<'t>, scope: ScopeId, class: Option<&str>) -> bool {
        match node.kind_name() {
            "function_definition" => {
                self.record_children(node);
                let name = node
                    .field("name")
                    .map(|n| self.text(n).to_owned())
                    .unwrap_or_default();
                let parent = self.parent(node);
                let (decorators, outer) = match parent {
                    Some(p) if p.kind_name() == "decorated_definition" => (
                        named_children(p)
                            .into_iter()
                            .filter(|c| c.kind_name() == "decorator")
                            .filter_map(|d| d.named_child(0))
                            .collect(),
                        p,
                    ),
                    _ => (Vec::new(), node),
                };
                let function_name = node.field("name").map(|n| self.text(n)).unwrap_or_default();
                self.add_binding(scope, function_name, node, None, BindingKind::Definition);
                self.functions.insert(
                    node.id(),
                    FunctionInfo { node, name, class: class.map(str::to_owned), decorators, outer },
                );
                let inner = Some(node.id());
                if let Some(params) = node.field("parameters") {
                    for param in named_children(params) {
                        if let Some(ident) = parameter_name(param) {
                            self.add_binding(inner, self.text(ident), param, None, BindingKind::Parameter);
                        }
                    }
                }
                let body = node.field("body");
                self.index_children_except(node, body);
                if let Some(body) = body {
                    // Methods see their class only for `self` attribute bookkeeping.
                    self.collect(&mut body.walk(), inner, class);
                }
                return false;
            }
            "class_definition" => {
                self.record_children(node);
                let name = node
                    .field("name")
                    .map(|n| self.text(n).to_owned())
                    .unwrap_or_default();
                let bases = node
                    .field("superclasses")
                    .map(|s| self.text(s).to_owned())
                    .unwrap_or_default();
                let base_names: Vec<String> = node
                    .field("superclasses")
                    .map(|s| named_children(s).into_iter().filter_map(|b| self.dotted_name(b)).collect())
                    .unwrap_or_default();
                let is_lightning = bases.contains("LightningModule");
                let is_module = is_lightning
                    || bases.contains("Module")
                    || bases.split(|c: char| !c.is_alphanumeric() && c != '_').any(|b| {
                        self.classes.get(b).map(|c| c.is_module).unwrap_or(false)
                    });
                let class_name = node.field("name").map(|n| self.text(n)).unwrap_or_default();
                let local_bases = bases
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .filter(|b| self.classes.contains_key(b))
                    .map(str::to_owned)
                    .collect();
                self.classes.insert(class_name, ClassInfo { is_module, is_lightning, bases: local_bases, spelled_bases: base_names });
                self.add_binding(scope, class_name, node, None, BindingKind::Definition);
                let body = node.field("body");
                self.index_children_except(node, body);
                if let Some(body) = body {
                    // The class body binds in the class's own scope: its names (class
                    // attributes, methods) are not seen by the methods nor outside.
                    self.local_scopes.push((node.start_byte(), node.end_byte(), node.id()));
                    self.collect(&mut body.walk(), Some(node.id()), Some(&name));
                }
                return false;
            }
            "import_statement" => {
                self.index_children_except(node, None);
                for child in named_children(node) {
                    match child.kind_name() {
                        "dotted_name" => {
                            let first = self.text(child).split('.').next().unwrap_or("");
                            // `import torch.nn` binds `torch`.
                            self.imports.push(Import { scope, local: first.to_owned(), qualified: first.to_owned() });
                            self.add_binding(scope, first, node, None, BindingKind::Definition);
                        }
                        "aliased_import" => {
                            let (Some(name), Some(alias)) =
                                (child.field("name"), child.field("alias"))
                            else {
                                continue;
                            };
                            let local = self.text(alias);
                            self.imports.push(Import { scope, local: local.to_owned(), qualified: self.text(name).to_owned() });
                            self.add_binding(scope, local, node, None, BindingKind::Definition);
                        }
                        _ => {}
                    }
                }
                return false;
            }
            "import_from_statement" => {
                self.index_children_except(node, None);
                let module = node
                    .field("module_name")
                    .map(|m| self.text(m).to_owned())
                    .unwrap_or_default();
                if named_children(node).iter().any(|c| c.kind_name() == "wildcard_import") {
                    self.has_star_import = true;
                    if scope.is_none() {
                        self.star_imports.push(module.clone());
                    }
                }
                let mut cursor = node.walk();
                let names: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
                for child in names {
                    let (name, local) = match child.kind_name() {
                        "dotted_name" => (self.text(child), self.text(child)),
                        "aliased_import" => match (child.field("name"), child.field("alias")) {
                            (Some(n), Some(a)) => (self.text(n), self.text(a)),
                            _ => continue,
                        },
                        _ => continue,
                    };
                    self.imports.push(Import { scope, local: local.to_owned(), qualified: crate::project::join_import(&module, name) });
                    self.add_binding(scope, local, node, None, BindingKind::Definition);
                }
                return false;
            }
            "assignment" => {
                if let Some(left) = node.field("left") {
                    let value = node.field("right");
                    let statement = self.parent(node).filter(|p| p.kind_name() == "expression_statement").unwrap_or(node);
                    self.bind_target(scope, left, statement, value, BindingKind::Assign);
                }
            }
            "augmented_assignment" => {
                if let Some(left) = node.field("left") {
                    let value = node.field("right");
                    let statement = self.parent(node).filter(|p| p.kind_name() == "expression_statement").unwrap_or(node);
                    self.bind_target(scope, left, statement, value, BindingKind::AugAssign);
                }
            }
            "for_statement" => {
                self.loops.push(node);
                if let Some(left) = node.field("left") {
                    self.bind_target(scope, left, node, None, BindingKind::LoopTarget);
                }
            }
            // A comprehension's targets bind in the comprehension's own scope.
            "for_in_clause" => {
                if let (Some(left), Some(comprehension)) = (node.field("left"), self.parent(node)) {
                    self.bind_target(Some(comprehension.id()), left, node, None, BindingKind::LoopTarget);
                }
            }
            "list_comprehension" | "set_comprehension" | "dictionary_comprehension" | "generator_expression" => {
                self.local_scopes.push((node.start_byte(), node.end_byte(), node.id()));
            }
            // A lambda's parameters bind in the lambda's own scope.
            "lambda" => {
                self.local_scopes.push((node.start_byte(), node.end_byte(), node.id()));
                // Defaults are evaluated outside the lambda: its parameters take effect
                // where its body starts.
                let body_start = node.field("body").map(|b| b.start_byte()).unwrap_or(node.end_byte());
                if let Some(params) = node.field("parameters") {
                    for param in named_children(params) {
                        let ident = match param.kind_name() {
                            "list_splat_pattern" | "dictionary_splat_pattern" => param.named_child(0),
                            _ => parameter_name(param),
                        };
                        if let Some(ident) = ident.filter(|i| i.kind_name() == "identifier") {
                            let binding = Binding { position: body_start, statement: param, value: None, kind: BindingKind::Parameter };
                            self.push_binding(Some(node.id()), self.text(ident), binding);
                        }
                    }
                }
            }
            "while_statement" => self.loops.push(node),
            "return_statement" => {
                if let (Some(function), true) = (scope, node.named_child_count() > 0) {
                    self.returns.entry(function).or_default().push(node);
                }
            }
            "identifier" => self.identifiers_by_name.entry(self.text(node)).or_default().push(node),
            "attribute" => {
                if let Some(attr) = node.field("attribute") {
                    self.attributes_by_name.entry(self.text(attr)).or_default().push(node);
                }
            }
            "with_item" => {
                if let Some(value) = node.field("value") {
                    if value.kind_name() == "as_pattern" {
                        if let Some(target) = value.field("alias") {
                            let expr = value.named_child(0);
                            self.bind_target(scope, target, node, expr, BindingKind::WithTarget);
                        }
                    }
                }
            }
            "call" => {
                self.calls.push(node);
                if let Some(callee) = node.field("function") {
                    let last = match callee.kind_name() {
                        "identifier" => Some(self.text(callee)),
                        "attribute" => callee.field("attribute").map(|a| self.text(a)),
                        _ => None,
                    };
                    if let Some(last) = last {
                        if last == "enter_context" || last == "set_grad_enabled" {
                            let statement = self.parent(node).filter(|p| p.kind_name() == "expression_statement");
                            if let Some((statement, block)) = statement.and_then(|st| self.parent(st).map(|b| (st, b))) {
                                self.toggle_statements.entry(key(block)).or_default().push(statement);
                            }
                        }
                        self.calls_by_name.entry(last).or_default().push(node);
                    }
                }
            }
            _ => {}
        }
        true
    }

    fn bind_target(&mut self, scope: ScopeId, target: Node<'t>, statement: Node<'t>, value: Option<Node<'t>>, kind: BindingKind) {
        match target.kind_name() {
            "identifier" => {
                self.add_binding(scope, self.text(target), statement, value, kind);
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple" | "list" | "parenthesized_expression" => {
                for child in named_children(target) {
                    self.bind_target(scope, child, statement, value, kind);
                }
            }
            // `with f() as x:` (the grammar wraps the target).
            "list_splat_pattern" | "as_pattern_target" => {
                if let Some(inner) = target.named_child(0) {
                    self.bind_target(scope, inner, statement, value, kind);
                }
            }
            "attribute" => {
                if let (Some(obj), Some(attr), Some(value)) =
                    (target.field("object"), target.field("attribute"), value)
                {
                    if self.text(obj) == "self" && kind == BindingKind::Assign {
                        self.self_attributes.entry(self.text(attr)).or_default().push(value);
                    }
                }
            }
            _ => {}
        }
    }

    fn add_binding(&mut self, scope: ScopeId, name: &'t str, statement: Node<'t>, value: Option<Node<'t>>, kind: BindingKind) {
        // A loop or `with` target takes effect where its body starts.
        let position = match kind {
            // A comprehension's target is used before its `for` clause (`[m(x) for m in ms]`).
            BindingKind::LoopTarget if statement.kind_name() == "for_in_clause" => {
                self.parent(statement).map(|c| c.start_byte()).unwrap_or_else(|| statement.start_byte())
            }
            BindingKind::LoopTarget | BindingKind::WithTarget => statement
                .field("body")
                .or_else(|| self.parent(statement).and_then(|p| self.parent(p)).and_then(|w| w.field("body")))
                .map(|b| b.start_byte())
                .unwrap_or_else(|| statement.start_byte()),
            _ => statement.start_byte(),
        };
        self.push_binding(scope, name, Binding { position, statement, value, kind });
    }

    fn push_binding(&mut self, scope: ScopeId, name: &'t str, binding: Binding<'t>) {
        self.bindings.entry(name).or_default().entry(scope).or_default().push(binding);
    }

    // ----- scopes, functions ------------------------------------------------------

    /// Every call that starts within `range`, in source order.
    pub fn calls_in(&self, range: std::ops::Range<usize>) -> &[Node<'t>] {
        within(&self.calls, range)
    }

    /// The calls of `name` (see [`Self::calls_named`]) that start within `range`, in
    /// source order.
    pub fn calls_named_in(&self, name: &str, range: std::ops::Range<usize>) -> &[Node<'t>] {
        within(self.calls_named(name), range)
    }

    /// The identifier nodes with text `name` that start within `range`, in source order
    /// (a binary search in the index built while collecting).
    pub fn identifiers_named_in(&self, name: &str, range: std::ops::Range<usize>) -> &[Node<'t>] {
        within(self.identifiers_by_name.get(name).map(Vec::as_slice).unwrap_or(&[]), range)
    }

    /// The `attribute` nodes whose last part is `attr` (`x.attr`) that start within
    /// `range`, in source order.
    pub fn attributes_named_in(&self, attr: &str, range: std::ops::Range<usize>) -> &[Node<'t>] {
        within(self.attributes_by_name.get(attr).map(Vec::as_slice).unwrap_or(&[]), range)
    }

    /// The innermost function around `node` (a `function_definition`), if any.
    pub fn enclosing_function(&self, node: Node<'t>) -> Option<&FunctionInfo<'t>> {
        self.scope_of(node).and_then(|id| self.functions.get(&id))
    }

    /// Builds `scope_segments` and `function_extents` from the functions' spans.
    fn index_scopes(&mut self) {
        let spans = self.functions.values().map(|f| (f.node.start_byte(), f.node.end_byte(), f.node.id())).collect();
        let (segments, extents) = flatten_nested_spans(spans);
        self.function_extents = extents.into_iter().map(|(id, _, end, outer)| (id, (end, outer))).collect();
        self.scope_segments = segments;
    }

    /// Builds `local_scope_segments` and `local_scope_extents` from `local_scopes`.
    fn index_local_scopes(&mut self) {
        let (segments, extents) = flatten_nested_spans(std::mem::take(&mut self.local_scopes));
        self.local_scope_extents = extents.into_iter().map(|(id, start, end, outer)| (id, (end, outer, start))).collect();
        self.local_scope_segments = segments;
    }

    /// The classes, lambdas and comprehensions around `node` (not `node` itself) inside
    /// the function it runs in, innermost first: the scopes whose names it sees before
    /// its function's. A class around that function is not one of them (a method does
    /// not see its class's names).
    fn local_scopes_of(&self, node: Node<'t>) -> impl Iterator<Item = usize> + use<'_, 't> {
        let (start, end) = (node.start_byte(), node.end_byte());
        let mut scope = None;
        if !self.local_scope_extents.is_empty() {
            let at = self.local_scope_segments.partition_point(|&(byte, _)| byte <= start);
            scope = at.checked_sub(1).and_then(|i| self.local_scope_segments[i].1);
            while let Some(id) = scope {
                let (scope_end, outer, _) = self.local_scope_extents[&id];
                if id != node.id() && end <= scope_end {
                    break;
                }
                scope = outer;
            }
        }
        // Local scopes that start before the function are outside it.
        let function_start = self.enclosing_function(node).map(|f| f.node.start_byte()).unwrap_or(0);
        std::iter::successors(scope, move |id| self.local_scope_extents[id].1)
            .take_while(move |id| self.local_scope_extents[id].2 >= function_start)
    }

    /// The scope whose names `node` sees first: its innermost class body, lambda or
    /// comprehension, else its function, else the module.
    fn binding_scope_of(&self, node: Node<'t>) -> ScopeId {
        self.local_scopes_of(node).next().or_else(|| self.scope_of(node))
    }

    /// The functions around the function `scope` (by node id), innermost first; the
    /// module is not one of them.
    fn outer_functions(&self, scope: ScopeId) -> impl Iterator<Item = usize> + use<'_, 't> {
        std::iter::successors(scope.and_then(|id| self.function_extents[&id].1), move |id| self.function_extents[id].1)
    }

    /// The function `node` runs in (its nearest `function_definition` ancestor), or `None`
    /// at module level.
    fn scope_of(&self, node: Node<'t>) -> ScopeId {
        let (start, end) = (node.start_byte(), node.end_byte());
        let at = self.scope_segments.partition_point(|&(byte, _)| byte <= start);
        let mut scope = at.checked_sub(1).and_then(|i| self.scope_segments[i].1);
        // A definition is not its own scope; a node reaching past a function's end
        // (only in broken code) is not inside it.
        while let Some(id) = scope {
            let (function_end, outer) = self.function_extents[&id];
            if id != node.id() && end <= function_end {
                break;
            }
            scope = outer;
        }
        scope
    }

    /// The statements block that `node`'s scope runs in: the function body, or the module.
    pub fn scope_body(&self, node: Node<'t>) -> Node<'t> {
        self.enclosing_function(node)
            .and_then(|f| f.node.field("body"))
            .unwrap_or(self.root)
    }

    pub fn function(&self, def: Node<'t>) -> Option<&FunctionInfo<'t>> {
        self.functions.get(&def.id())
    }

    pub fn functions(&self) -> impl Iterator<Item = &FunctionInfo<'t>> {
        self.functions.values()
    }

    /// Is `class` a `torch.nn.Module` subclass? A class defined in this module (by its
    /// name) derives `Module` directly or through local bases; a library class
    /// (`torch.nn.Linear`, by its qualified name) or a factory builds a module; for any
    /// other class (imported from a module memlint does not read, or bound by a star
    /// import) only its name is evidence (`Generator`, `ResnetEncoder`, `PerceptualLoss`).
    /// This is the one place that judges classes: a project index answers here for
    /// classes imported from the project.
    pub fn is_module_class(&self, class: &str) -> bool {
        if self.classes.contains_key(class) {
            return self.is_module_class_at(class, 0);
        }
        if let Some(crate::Symbol::Class { is_module, .. }) = self.project_symbol_spelled(class) {
            return is_module;
        }
        if module_factory(class) {
            return true;
        }
        let last = class.rsplit('.').next().unwrap_or(class);
        if class.starts_with("torch.") || class.starts_with("torchvision.") || class.starts_with("transformers.") {
            // Library classes that are not modules (`torch.utils.data.DataLoader`,
            // `transformers.AutoTokenizer`): the library is known.
            return false;
        }
        is_class_name(last) && (name_says_model(last) || class_name_says_loss(last))
    }

    /// The method `name` of a local class, looked up through its local bases.
    pub fn method_of(&self, class: &str, name: &str) -> Option<Node<'t>> {
        let mut pending = vec![class.to_owned()];
        let mut seen = 0;
        while let Some(c) = pending.pop() {
            seen += 1;
            if seen > 16 {
                break;
            }
            if let Some(m) = self.methods.get(&(c.clone(), name.to_owned())) {
                return Some(*m);
            }
            if let Some(info) = self.classes.get(c.as_str()) {
                pending.extend(info.bases.iter().cloned());
            }
        }
        None
    }

    /// What calling the function `def` (defined in this module) returns: the kind of its
    /// `return` values when they agree (a local factory `build_model()` returning a
    /// module; `load_networks()` returning a tuple of networks). This, with
    /// [`Self::imported_call_result`], is where the result of a call is decided.
    pub fn function_return_kind(&self, def: Node<'t>) -> ValueKind {
        if let Some(kind) = self.return_kinds.borrow().get(&def.id()) {
            return *kind;
        }
        self.return_kinds.borrow_mut().insert(def.id(), ValueKind::Unknown);
        let mut kind = ValueKind::Unknown;
        if let Some(returns) = self.returns.get(&def.id()) {
            let kinds: Vec<ValueKind> = returns
                .iter()
                .filter_map(|r| r.named_child(0))
                .map(|v| self.value_kind_at_depth(v, 8))
                .collect();
            let known: Vec<ValueKind> = kinds.iter().copied().filter(|k| *k != ValueKind::Unknown).collect();
            if let Some(first) = known.first() {
                if known.iter().all(|k| k == first) && matches!(first, ValueKind::Model | ValueKind::Loss | ValueKind::Optimizer | ValueKind::Scaler | ValueKind::DataLoader | ValueKind::Number) {
                    kind = *first;
                }
            }
        }
        self.return_kinds.borrow_mut().insert(def.id(), kind);
        kind
    }

    /// What calling an imported function or class returns, by its qualified name (a
    /// project index answers here for the project's own functions).
    pub fn imported_call_result(&self, qualified: &str) -> ValueKind {
        let last = qualified.rsplit('.').next().unwrap_or(qualified);
        if qualified.starts_with("torch.optim.") && is_class_name(last) && !qualified.contains("lr_scheduler") {
            return ValueKind::Optimizer;
        }
        if last == "GradScaler" {
            return ValueKind::Scaler;
        }
        if last == "DataLoader" {
            return ValueKind::DataLoader;
        }
        if self.is_module_class(qualified) {
            return if class_name_says_loss(last) { ValueKind::Loss } else { ValueKind::Model };
        }
        ValueKind::Unknown
    }

    /// Does the method `def` of a module class run a forward pass: call `self(...)`,
    /// `self.forward(...)` or a submodule (`self.fc1(x)`)? Then calling it on an instance
    /// (`model.pi(x)`, `model.predict(x)`, `model.sample(z)`) is a forward pass too.
    pub fn method_runs_forward(&self, def: Node<'t>) -> bool {
        if let Some(known) = self.forward_methods.borrow().get(&def.id()) {
            return *known;
        }
        self.forward_methods.borrow_mut().insert(def.id(), false);
        // A method that backpropagates or steps an optimizer (`q.train_net(...)`) is a
        // training step, not a forward pass.
        let trains = def.field("body").map(|b| self.trains_in(b)).unwrap_or(true);
        let answer = !trains && within(&self.calls, def.byte_range()).iter().any(|c| {
            self.scope_of(*c) == Some(def.id()) && self.forward_callee(*c).map(|m| self.text(m).starts_with("self")).unwrap_or(false)
        });
        self.forward_methods.borrow_mut().insert(def.id(), answer);
        answer
    }

    /// Does some local module class have a method `name` that runs the forward pass?
    /// Decided once per name (a file of many same-named classes stays linear).
    fn some_module_method_runs_forward(&self, name: &str) -> bool {
        if let Some(known) = self.forward_method_names.borrow().get(name) {
            return *known;
        }
        self.forward_method_names.borrow_mut().insert(name.to_owned(), false);
        let runs = self
            .methods_by_name
            .get(name)
            .map(|defs| defs.iter().any(|(class, def)| self.is_module_class(class) && self.method_runs_forward(*def)))
            .unwrap_or(false);
        self.forward_method_names.borrow_mut().insert(name.to_owned(), runs);
        runs
    }

    /// The local module class an expression is an instance of, when it was built from one
    /// (`Policy()`, `Net().cuda()`, `self.actor` set to `Actor(...)` in `__init__`).
    pub fn instance_class(&self, expr: Node<'t>) -> Option<&'t str> {
        self.instance_class_at(expr, 0)
    }

    fn instance_class_at(&self, expr: Node<'t>, depth: usize) -> Option<&'t str> {
        if depth > 12 {
            return None;
        }
        let expr = unparenthesize(expr);
        match expr.kind_name() {
            "identifier" => {
                let binding = self.binding_at(self.text(expr), expr)?;
                match (binding.kind, binding.value) {
                    (BindingKind::Assign, Some(v)) if binding.statement.kind_name() != "for_statement" => self.instance_class_at(v, depth + 1),
                    _ => None,
                }
            }
            "attribute" => {
                let object = expr.field("object")?;
                if self.text(object) != "self" {
                    return None;
                }
                let attr = self.text(expr.field("attribute")?);
                self.self_attributes.get(attr)?.iter().find_map(|v| self.instance_class_at(*v, depth + 1))
            }
            "call" => {
                let callee = expr.field("function")?;
                match callee.kind_name() {
                    "identifier" => {
                        let name = self.text(callee);
                        let (key, _) = self.classes.get_key_value(name)?;
                        self.is_module_class(name).then_some(*key)
                    }
                    "attribute" => {
                        let method = self.text(callee.field("attribute")?);
                        if MODULE_METHODS_RETURNING_SELF.contains(&method) {
                            self.instance_class_at(callee.field("object")?, depth + 1)
                        } else {
                            None
                        }
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Is the local class `class` a `torch.nn.Module` subclass? Through its bases: local
    /// classes, and classes imported from the project.
    fn is_module_class_at(&self, class: &str, depth: usize) -> bool {
        let Some(info) = self.classes.get(class) else { return false };
        if info.is_module {
            return true;
        }
        if depth > 16 || self.project.is_empty() {
            return false;
        }
        info.spelled_bases.iter().any(|base| {
            if base != class && self.classes.contains_key(base.as_str()) {
                return self.is_module_class_at(base, depth + 1);
            }
            matches!(self.project_symbol_spelled(base), Some(crate::Symbol::Class { is_module: true, .. }))
        })
    }

    // ----- the project ------------------------------------------------------------

    /// What the project says a name is, as this module spells it at module level
    /// (`G`, `models.G`): through the module's imports, else (a name the module does
    /// not bind) its star imports.
    pub fn project_symbol_spelled(&self, spelled: &str) -> Option<crate::Symbol> {
        if self.project.is_empty() {
            return None;
        }
        let qualified = match self.through_module_imports(spelled) {
            Some(qualified) => qualified,
            None if !self.star_imports.is_empty() && !spelled.contains('.') => spelled.to_owned(),
            None => return None,
        };
        self.project_symbol(&qualified)
    }

    /// What the project says `qualified` (through this module's imports) is.
    pub fn project_symbol(&self, qualified: &str) -> Option<crate::Symbol> {
        if self.project.is_empty() || qualified.starts_with("torch.") || qualified == "torch" {
            return None;
        }
        if let Some(answer) = self.project_symbols.borrow().get(qualified) {
            return answer.clone();
        }
        let answer = self.project.symbol(qualified);
        self.project_symbols.borrow_mut().insert(qualified.to_owned(), answer.clone());
        answer
    }

    /// The project's answer for the callee of a call (an imported name, or a name the
    /// module does not bind after a star import).
    pub fn project_callee(&self, call: Node<'t>) -> Option<crate::Symbol> {
        if self.project.is_empty() {
            return None;
        }
        let callee = call.field("function")?;
        match self.qualified_name(callee) {
            Some(q) => self.project_symbol(&q),
            None if callee.kind_name() == "identifier" && !self.star_imports.is_empty() => {
                let name = self.text(callee);
                if self.binding_at(name, call).is_some() {
                    return None;
                }
                self.project_symbol(name)
            }
            None => None,
        }
    }

    /// What calling a project name returns, when the project knows: a module instance
    /// (a `torch.nn.Module` subclass, or a factory returning one), or nothing the rules
    /// care about (another class: a constructor call is not a forward pass).
    fn project_call_kind(&self, call: Node<'t>, name: &str) -> Option<ValueKind> {
        if self.project.is_empty() {
            return None;
        }
        // Only a value that is bound can be called later as a network (`g = Generator()`,
        // `return build()`, `x = factory().cuda()`): calls elsewhere (arguments, terms)
        // need not read other modules.
        // And a name bound to a network is called somewhere (`g(z)`, `self.g(z)`).
        let mut at = call;
        let bound = loop {
            match self.parent(at).map(|p| (p, p.kind_name())) {
                Some((p, "attribute" | "call" | "parenthesized_expression")) if p.kind_name() != "call" || p.field("function").map(|f| f.id()) == Some(at.id()) => at = p,
                Some((p, "assignment")) => {
                    let target = p.field("left").and_then(|l| match l.kind_name() {
                        "identifier" => Some(l),
                        "attribute" => l.field("attribute"),
                        _ => None,
                    });
                    break match target {
                        Some(t) => !self.calls_named(self.text(t)).is_empty(),
                        None => true,
                    };
                }
                Some((_, "return_statement" | "expression_list" | "list" | "tuple" | "pattern_list")) => break true,
                _ => break false,
            }
        };
        if !bound {
            return None;
        }
        match self.project_callee(call)? {
            crate::Symbol::Class { is_module: true, .. } => {
                Some(if class_name_says_loss(name) { ValueKind::Loss } else { ValueKind::Model })
            }
            crate::Symbol::Class { is_module: false, .. } => Some(ValueKind::Unknown),
            crate::Symbol::Function { returns_module: true, .. } => Some(ValueKind::Model),
            _ => None,
        }
    }

    /// For a call `obj.method(arg, ...)` where `obj` was built from a class (of this
    /// module or imported from the project): the arguments the method stores into state
    /// outliving the call (`self.total += val`), with the argument node passed for each.
    pub fn call_stores_arguments(&self, call: Node<'t>) -> Vec<(Node<'t>, crate::StoredArgument)> {
        let Some(callee) = call.field("function").filter(|c| c.kind_name() == "attribute") else { return Vec::new() };
        let (Some(object), Some(method)) = (callee.field("object"), callee.field("attribute")) else { return Vec::new() };
        let method = self.text(method);
        let Some(class_call) = self.constructor_of(object) else { return Vec::new() };
        let Some(class_callee) = class_call.field("function") else { return Vec::new() };
        let stores = match self.local_class_methods(class_callee) {
            Some(methods) => methods,
            None => match self.project_callee(class_call) {
                Some(crate::Symbol::Class { methods, .. }) => methods,
                _ => return Vec::new(),
            },
        };
        let Some(summary) = stores.into_iter().find(|m| m.name == method) else { return Vec::new() };
        let mut found = Vec::new();
        for stored in summary.stores {
            if let Some(arg) = self.argument_for(call, &stored.name, Some(stored.position)) {
                found.push((arg, stored));
            }
        }
        found
    }

    /// The argument of `call` that the parameter `name` receives: passed by keyword, or,
    /// given its `position` among the parameters a caller fills by position (after `self`
    /// for a method; `None` for a keyword-only one), the positional argument there. `None`
    /// when not passed, or when a `*args` at or before that position hides which it is.
    pub fn argument_for(&self, call: Node<'t>, name: &str, position: Option<usize>) -> Option<Node<'t>> {
        let arguments = named_children(call.field("arguments")?);
        if let Some(keyword) = arguments
            .iter()
            .find(|a| a.kind_name() == "keyword_argument" && a.field("name").is_some_and(|n| self.text(n) == name))
        {
            return keyword.field("value");
        }
        let positional: Vec<Node<'t>> = arguments.into_iter().filter(|a| a.kind_name() != "keyword_argument").collect();
        let position = position?;
        let upto = positional.get(..=position)?;
        (!upto.iter().any(|a| matches!(a.kind_name(), "list_splat" | "dictionary_splat"))).then(|| upto[position])
    }

    /// The call that built the value of `object` (`meter` after `meter = AverageMeter()`,
    /// `self.meter` after `self.meter = AverageMeter()` in the class).
    fn constructor_of(&self, object: Node<'t>) -> Option<Node<'t>> {
        let value = match object.kind_name() {
            "identifier" => {
                let binding = self.binding_at(self.text(object), object)?;
                if binding.kind != BindingKind::Assign {
                    return None;
                }
                binding.value?
            }
            "attribute" => {
                let obj = object.field("object")?;
                if self.text(obj) != "self" {
                    return None;
                }
                let values = self.self_attributes.get(self.text(object.field("attribute")?))?;
                *values.iter().find(|v| unparenthesize(**v).kind_name() == "call")?
            }
            _ => return None,
        };
        let value = unparenthesize(value);
        (value.kind_name() == "call").then_some(value)
    }

    /// Does building an instance of the class `class` (as spelled here: a local class, or
    /// one imported from the project) load a pretrained network that the class never
    /// freezes? Its `__init__` calls one of [`loads_pretrained_network`]'s constructions
    /// and the class does not look like it freezes it ([`class_may_freeze`]). Gives that
    /// construction's callee as spelled in the class's module.
    pub fn class_loads_pretrained_network(&self, class: &str) -> Option<String> {
        if self.classes.contains_key(class) {
            let def = self.bindings_of(None, class)?.iter().rev().find(|b| b.statement.kind_name() == "class_definition")?.statement;
            if class_may_freeze(self.text(def)) {
                return None;
            }
            // The class that defines the `__init__` it runs (itself, or a local base),
            // summarized as the project summarizes its classes.
            let init = self.method_of(class, "__init__")?;
            let owner = self.parent(init).and_then(|body| self.parent(body)).filter(|c| c.kind_name() == "class_definition")?;
            let summary = crate::project::class_summary(self.source, owner);
            return summary.pretrained_calls.iter().find_map(|call| {
                let qualified = self.through_module_imports(&call.callee).unwrap_or_else(|| call.callee.clone());
                call.loads_pretrained(&qualified).then(|| call.callee.clone())
            });
        }
        match self.project_symbol_spelled(class)? {
            crate::Symbol::Class { pretrained, .. } => pretrained,
            _ => None,
        }
    }

    /// Does the local class `class` derive, through any chain of local bases, from one of
    /// the library classes `qualified` (`torch.nn.DataParallel`), named through this
    /// module's imports? (Not through the project: a rule's trigger could not see a base
    /// named only in another module.)
    pub fn class_derives_from(&self, class: &str, qualified: &[&str]) -> bool {
        self.class_derives_from_at(class, qualified, 0)
    }

    fn class_derives_from_at(&self, class: &str, qualified: &[&str], depth: usize) -> bool {
        let Some(info) = self.classes.get(class) else { return false };
        if depth > 16 {
            return false;
        }
        info.spelled_bases.iter().any(|base| {
            if base != class && self.classes.contains_key(base.as_str()) {
                return self.class_derives_from_at(base, qualified, depth + 1);
            }
            self.through_module_imports(base).is_some_and(|q| qualified.contains(&q.as_str()))
        })
    }

    /// `dotted` (as spelled at module level) through the module-level imports:
    /// `nn.DataParallel` -> `torch.nn.DataParallel`; `None` when its first part is not
    /// imported there.
    fn through_module_imports(&self, dotted: &str) -> Option<String> {
        let (first, rest) = dotted.split_once('.').map_or((dotted, None), |(f, r)| (f, Some(r)));
        let import = &self.imports[*self.module_imports.get(first)?];
        Some(match rest {
            Some(rest) => format!("{}.{rest}", import.qualified),
            None => import.qualified.clone(),
        })
    }

    /// The local classes that derive from one of `qualified` ([`Self::class_derives_from`]).
    pub fn classes_deriving_from(&self, qualified: &[&str]) -> Vec<&str> {
        let mut names: Vec<&str> = self.classes.keys().copied().filter(|c| self.class_derives_from(c, qualified)).collect();
        names.sort_unstable();
        names
    }

    /// The value of the keyword argument `name` of `call`, if given.
    pub fn keyword_value(&self, call: Node<'t>, name: &str) -> Option<Node<'t>> {
        let arguments = call.field("arguments")?;
        named_children(arguments)
            .into_iter()
            .filter(|a| a.kind_name() == "keyword_argument")
            .find(|a| a.field("name").is_some_and(|k| self.text(k) == name))
            .and_then(|a| a.field("value"))
    }

    /// The method summaries of a class this module defines (`callee` names it).
    fn local_class_methods(&self, callee: Node<'t>) -> Option<Vec<crate::FunctionSummary>> {
        if callee.kind_name() != "identifier" {
            return None;
        }
        let name = self.text(callee);
        self.classes.get(name)?;
        let def = self.bindings_of(None, name)?.iter().rev().find(|b| b.statement.kind_name() == "class_definition")?.statement;
        Some(crate::project::class_methods(self.source, def))
    }

    /// Does `node` run with gradients disabled because the top-level function around it,
    /// which this module never calls, is called by the project's other modules only with
    /// gradients disabled? Asked separately from [`Self::grad_context`] (by the rules, for
    /// a finding about to be reported), as the answer may read other modules.
    pub fn grad_disabled_by_callers_elsewhere(&self, node: Node<'t>) -> Option<String> {
        if self.project.is_empty() {
            return None;
        }
        let mut current = self.parent(node);
        let mut outermost = None;
        while let Some(n) = current {
            match n.kind_name() {
                "function_definition" => outermost = Some(n),
                // A method: `external_no_grad` asks only for those of top-level classes.
                "class_definition" => break,
                _ => {}
            }
            current = self.parent(n);
        }
        self.external_no_grad(outermost?)
    }

    /// How other modules of the project name the function `info`: `name` for a top-level
    /// function, `Class.method` for a method of a top-level class; `None` for others.
    fn name_elsewhere(&self, info: &FunctionInfo<'t>) -> Option<String> {
        let at_module_level = |n: Node<'t>| self.parent(n).map(|p| p.kind_name() == "module").unwrap_or(false);
        match &info.class {
            None if at_module_level(info.outer) => Some(info.name.clone()),
            // A method directly in the body of a top-level class.
            Some(class) => {
                let class_node = self.parent(info.outer).and_then(|body| self.parent(body)).filter(|c| c.kind_name() == "class_definition");
                let class_outer = class_node.map(|c| self.parent(c).filter(|p| p.kind_name() == "decorated_definition").unwrap_or(c));
                class_outer.filter(|c| at_module_level(*c)).map(|_| format!("{class}.{}", info.name))
            }
            None => None,
        }
    }

    /// Do other modules of the project call the function `def` (a top-level function, or a
    /// method of a top-level class on names holding an instance)? `false` without a project.
    pub fn called_from_other_modules(&self, def: Node<'t>) -> bool {
        if self.project.is_empty() {
            return false;
        }
        let Some(info) = self.functions.get(&def.id()) else { return false };
        self.name_elsewhere(info).is_some_and(|name| !self.project.external_calls(&name).is_empty())
    }

    /// For a top-level function this module never calls, or a method of a top-level class
    /// this module never calls a method of that name on: gradients are disabled in it when
    /// the project's other modules call it (a method: on names holding an instance of the
    /// class), and only with gradients disabled.
    fn external_no_grad(&self, def: Node<'t>) -> Option<String> {
        if self.project.is_empty() {
            return None;
        }
        if let Some(answer) = self.external_no_grad.borrow().get(&def.id()) {
            return answer.clone();
        }
        let info = self.functions.get(&def.id())?;
        let asked = self.name_elsewhere(info);
        let is_method = info.class.is_some();
        let called_here = self.calls_named(&info.name).iter().any(|c| {
            let kind = c.field("function").map(|f| f.kind_name());
            if is_method { kind == Some("attribute") } else { kind == Some("identifier") }
        });
        let answer = if let (Some(asked), false) = (asked, called_here) {
            let calls = self.project.external_calls(&asked);
            (!calls.is_empty() && calls.iter().all(|disabled| *disabled))
                .then(|| "only called with gradients disabled (in other modules of the project)".to_owned())
        } else {
            None
        };
        self.external_no_grad.borrow_mut().insert(def.id(), answer.clone());
        answer
    }

    pub fn is_lightning_class(&self, class: &str) -> bool {
        self.classes.get(class).map(|c| c.is_lightning).unwrap_or(false)
    }

    // ----- names ------------------------------------------------------------------

    /// The dotted text of a name expression (`a.b.c`), or `None` for anything else.
    pub fn dotted_name(&self, node: Node<'_>) -> Option<String> {
        match node.kind_name() {
            "identifier" => Some(self.text(node).to_owned()),
            "attribute" => {
                let object = node.field("object")?;
                let attr = node.field("attribute")?;
                Some(format!("{}.{}", self.dotted_name(object)?, self.text(attr)))
            }
            _ => None,
        }
    }

    /// The fully qualified name a name expression refers to through the imports in
    /// scope: `th.cuda.empty_cache` -> `torch.cuda.empty_cache` after `import torch as th`.
    /// `None` when the first part is not imported.
    pub fn qualified_name(&self, node: Node<'t>) -> Option<String> {
        let dotted = self.dotted_name(node)?;
        let (first, rest) = match dotted.split_once('.') {
            Some((f, r)) => (f, Some(r)),
            None => (dotted.as_str(), None),
        };
        let import = self.lookup_import(first, node)?;
        Some(match rest {
            Some(rest) => format!("{}.{}", import, rest),
            None => import.to_owned(),
        })
    }

    fn lookup_import(&self, local: &str, at: Node<'t>) -> Option<&str> {
        if !self.imported_names.contains(local) {
            // `from utils import *` re-exporting torch: an unbound `torch` is torch.
            if local == "torch" && self.has_star_import && self.bindings_of(None, local).is_none() {
                return Some("torch");
            }
            return None;
        }
        // Innermost function scopes first, then the module; function-local imports count;
        // in one scope, the last import wins.
        let mut best: Option<(usize, &Import)> = self.module_imports.get(local).map(|&i| (0, &self.imports[i]));
        let Some(candidates) = self.function_imports.get(local) else {
            return best.map(|(_, import)| import.qualified.as_str());
        };
        // The functions around `at`, outermost first.
        let scope = self.scope_of(at);
        let mut chain: Vec<ScopeId> = scope.into_iter().chain(self.outer_functions(scope)).map(Some).collect();
        chain.reverse();
        for import in candidates.iter().map(|&i| &self.imports[i]) {
            let Some(depth) = chain.iter().position(|s| *s == import.scope).map(|i| i + 1) else { continue };
            if best.map(|(d, _)| depth >= d).unwrap_or(true) {
                best = Some((depth, import));
            }
        }
        best.map(|(_, import)| import.qualified.as_str())
    }

    /// The name a module-level import binds `qualified` to (`th` after `import torch as th`).
    pub fn local_name_for(&self, qualified: &str) -> Option<&str> {
        self.imports
            .iter()
            .find(|i| i.scope.is_none() && i.qualified == qualified)
            .map(|i| i.local.as_str())
    }

    /// Every local name (in any scope) that an import binds to `qualified`
    /// (`L` for `from torch import load as L`).
    pub fn names_imported_as(&self, qualified: &str) -> Vec<&str> {
        self.imports.iter().filter(|i| i.qualified == qualified).map(|i| i.local.as_str()).collect()
    }

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
                    if let Some(condition) = parent.field("condition") {
                        let in_body = parent.field("consequence").map(|b| contains(b, child)).unwrap_or(false);
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
                    let parts = named_children(parent);
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
    fn cuda_availability_test(&self, condition: Node<'t>) -> Option<bool> {
        let condition = unparenthesize(condition);
        match condition.kind_name() {
            "not_operator" => self.cuda_availability_test(condition.field("argument")?).map(|b| !b),
            "call" => self.call_resolves_to(condition, &["torch.cuda.is_available"]).map(|_| true),
            "identifier" => {
                let binding = self.binding_at(self.text(condition), condition)?;
                let value = binding.value.filter(|_| binding.kind == BindingKind::Assign)?;
                let all = self.bindings_in_scope(self.text(condition), binding.statement);
                // Bound once in its scope: the name is the test.
                if all.len() != 1 || unparenthesize(value).kind_name() != "call" {
                    return None;
                }
                self.call_resolves_to(unparenthesize(value), &["torch.cuda.is_available"]).map(|_| true)
            }
            _ => None,
        }
    }

    /// Does the callee of `call` resolve to one of `names` (fully qualified)?
    pub fn call_resolves_to(&self, call: Node<'t>, names: &[&str]) -> Option<String> {
        let callee = call.field("function")?;
        let qualified = self.qualified_name(callee)?;
        names.iter().any(|n| *n == qualified).then_some(qualified)
    }

    fn bindings_of(&self, scope: ScopeId, name: &str) -> Option<&Vec<Binding<'t>>> {
        self.bindings.get(name).and_then(|by_scope| by_scope.get(&scope))
    }

    /// The binding of `name` in effect at `at` (the last one before it in the same scope,
    /// then the module scope).
    pub fn binding_at(&self, name: &str, at: Node<'t>) -> Option<&Binding<'t>> {
        let position = at.start_byte();
        let find = |scope: ScopeId| {
            self.bindings_of(scope, name).and_then(|bs| {
                // Sorted by position: start from the last binding at or before `at`.
                let before = bs.partition_point(|b| b.position <= position);
                bs[..before].iter().rev().find(|b| !self.binding_contains_use(b, at))
            })
        };
        // The class bodies, lambdas and comprehensions around `at` in its function,
        // innermost first: their names shadow the function's and are not seen outside.
        if let Some(binding) = self.local_scopes_of(at).find_map(|id| find(Some(id))) {
            return Some(binding);
        }
        let scope = self.scope_of(at);
        match find(scope) {
            Some(b) => Some(b),
            None if scope.is_some() => {
                // A name only assigned later in a function is still local, but the bindings
                // of the enclosing functions (a closure, a nested helper) and of the module
                // are visible anywhere in it (it runs after they are made): innermost first.
                let visible = |scope: ScopeId| self.bindings_of(scope, name).and_then(|bs| bs.iter().rev().find(|b| !self.binding_contains_use(b, at)));
                self.outer_functions(scope).find_map(|id| visible(Some(id))).or_else(|| visible(None))
            }
            None => None,
        }
    }

    /// `x = f(x)`: the use of `x` on the right refers to the binding before this one.
    fn binding_contains_use(&self, binding: &Binding<'t>, at: Node<'t>) -> bool {
        matches!(binding.kind, BindingKind::Assign | BindingKind::AugAssign) && contains(binding.statement, at)
    }

    /// Every binding of `name` in the scope of `at` (its lambda or comprehension, its
    /// function, or the module).
    pub fn bindings_in_scope(&self, name: &str, at: Node<'t>) -> &[Binding<'t>] {
        self.bindings_of(self.binding_scope_of(at), name).map(Vec::as_slice).unwrap_or(&[])
    }

    // ----- gradient context -------------------------------------------------------

    /// Whether `node` runs with gradients disabled, and by what.
    pub fn grad_context(&self, node: Node<'t>) -> GradContext {
        self.grad_context_with(node, &self.no_grad_functions)
    }

    fn grad_context_with(&self, node: Node<'t>, no_grad_fns: &HashMap<usize, String>) -> GradContext {
        let mut child = node;
        let mut current = self.parent(node);
        while let Some(n) = current {
            match n.kind_name() {
                "with_statement" => {
                    let in_body = n.field("body").map(|b| contains(b, child)).unwrap_or(false);
                    if in_body {
                        if let Some(ctx) = self.with_grad_effect(n) {
                            return ctx;
                        }
                    }
                }
                "block" | "module" => {
                    if let Some(ctx) = self.preceding_grad_toggle(n, child) {
                        return ctx;
                    }
                }
                "function_definition" => {
                    return match no_grad_fns.get(&n.id()) {
                        Some(why) => GradContext::Disabled(why.clone()),
                        None => GradContext::Enabled,
                    };
                }
                "lambda" => return GradContext::Enabled,
                _ => {}
            }
            child = n;
            current = self.parent(n);
        }
        GradContext::Enabled
    }

    /// What a `with` statement does to autograd, if anything.
    fn with_grad_effect(&self, with: Node<'t>) -> Option<GradContext> {
        let clause = named_children(with).into_iter().find(|c| c.kind_name() == "with_clause")?;
        // The last item wins when several are given (`with a(), b():` enters a then b).
        let mut effect = None;
        for item in named_children(clause) {
            let Some(mut value) = item.field("value") else { continue };
            if value.kind_name() == "as_pattern" {
                match value.named_child(0) {
                    Some(v) => value = v,
                    None => continue,
                }
            }
            if let Some(e) = self.grad_effect_of_call(value) {
                effect = Some(e);
            }
        }
        effect
    }

    /// The effect of entering the context manager `expr` (a call like `torch.no_grad()`).
    pub fn grad_effect_of_call(&self, expr: Node<'t>) -> Option<GradContext> {
        let expr = unparenthesize(expr);
        if expr.kind_name() != "call" {
            // `with torch.no_grad:` (no call) does not work, but a bare decorator-style
            // reference is common in decorators; handled there.
            return None;
        }
        let callee = expr.field("function")?;
        let qualified = self.qualified_name(callee).unwrap_or_else(|| self.dotted_name(callee).unwrap_or_default());
        let last = qualified.rsplit('.').next().unwrap_or("");
        let args = expr.field("arguments");
        let first_arg = args.and_then(|a| a.named_child(0));
        let torchy = qualified.starts_with("torch.") || !qualified.contains('.');
        match last {
            "no_grad" if torchy => Some(GradContext::Disabled(format!("`{}()`", self.text(callee)))),
            "inference_mode" if torchy => {
                // `inference_mode(False)` / `inference_mode(mode=False)` keeps gradients on.
                let off = first_arg.map(|a| {
                    let value = if a.kind_name() == "keyword_argument" { a.field("value") } else { Some(a) };
                    value.map(|v| self.text(v) == "False").unwrap_or(false)
                });
                if off == Some(true) {
                    None
                } else {
                    Some(GradContext::Disabled(format!("`{}()`", self.text(callee))))
                }
            }
            "set_grad_enabled" if torchy => {
                let arg = first_arg.map(|a| {
                    if a.kind_name() == "keyword_argument" { a.field("value").unwrap_or(a) } else { a }
                });
                match arg.map(|a| self.text(a)) {
                    Some("True") => Some(GradContext::ExplicitlyEnabled),
                    // `set_grad_enabled(is_train)` may disable gradients: the code is written
                    // for both, so it is not an evaluation pass that forgot `no_grad`.
                    Some(text) => Some(GradContext::Disabled(format!("`{}({})`", self.text(callee), text))),
                    None => None,
                }
            }
            "enable_grad" if torchy => Some(GradContext::ExplicitlyEnabled),
            _ => None,
        }
    }

    /// A statement before `child` in `block` that toggles autograd for the rest of the
    /// block: `torch.set_grad_enabled(False)` or `stack.enter_context(torch.no_grad())`.
    fn preceding_grad_toggle(&self, block: Node<'t>, child: Node<'t>) -> Option<GradContext> {
        // Only blocks with a toggle statement are scanned (recorded while collecting), so
        // this is constant time for almost every block.
        let statements = self.toggle_statements.get(&key(block))?;
        let mut result = None;
        for statement in statements {
            if statement.start_byte() >= child.start_byte() {
                break;
            }
            let Some(call) = statement.named_child(0).filter(|c| c.kind_name() == "call") else { continue };
            let Some(callee) = call.field("function") else { continue };
            let last = callee
                .field("attribute")
                .map(|a| self.text(a))
                .unwrap_or_else(|| self.text(callee));
            if last == "enter_context" {
                if let Some(arg) = call.field("arguments").and_then(|a| a.named_child(0)) {
                    if let Some(effect) = self.grad_effect_of_call(arg) {
                        result = Some(effect);
                    }
                }
            } else if last == "set_grad_enabled" {
                if let Some(effect) = self.grad_effect_of_call(call) {
                    result = Some(effect);
                }
            }
        }
        result
    }

    /// Does a decorator disable gradients (`@torch.no_grad()`, `@torch.inference_mode`,
    /// or a decorator whose name says so)?
    fn decorator_disables_grad(&self, decorator: Node<'t>) -> bool {
        let target = if decorator.kind_name() == "call" {
            match decorator.field("function") {
                Some(f) => f,
                None => return false,
            }
        } else {
            decorator
        };
        if decorator.kind_name() == "call" {
            if let Some(effect) = self.grad_effect_of_call(decorator) {
                return effect.is_disabled();
            }
        }
        let name = self.dotted_name(target).unwrap_or_default().to_lowercase();
        let last = name.rsplit('.').next().unwrap_or("");
        last.contains("no_grad") || last.contains("nograd") || last.contains("inference")
    }

    fn compute_no_grad_functions(&mut self) {
        let mut no_grad: HashMap<usize, String> = HashMap::default();
        for info in self.functions.values() {
            if let Some(d) = info.decorators.iter().find(|d| self.decorator_disables_grad(**d)) {
                no_grad.insert(info.node.id(), format!("`@{}`", self.text(*d)));
            } else if info.class.is_some() && NO_GRAD_HOOKS.contains(&info.name.as_str()) {
                no_grad.insert(info.node.id(), format!("Lightning's `{}` hook", info.name));
            }
        }
        // Functions only ever called from no-grad code: iterate to a fixed point. Calls
        // are matched by name (`f(...)` for functions, `x.f(...)` for methods), so every
        // function of one name and kind has the same callers: each (name, kind) is decided
        // once per round, not once per function (a file of many same-named functions was
        // quadratic). Each round adds at least one group, so rounds are bounded.
        let mut groups: HashMap<(&str, bool), Vec<usize>> = HashMap::default();
        for f in self.functions.values() {
            groups.entry((f.name.as_str(), f.class.is_some())).or_default().push(f.node.id());
        }
        let mut groups: Vec<((&str, bool), Vec<usize>)> = groups.into_iter().collect();
        groups.sort();
        let mut decided: Vec<bool> = vec![false; groups.len()];
        loop {
            let mut changed = false;
            for (g, ((name, is_method), ids)) in groups.iter().enumerate() {
                if decided[g] || ids.iter().all(|id| no_grad.contains_key(id)) {
                    continue;
                }
                let mut calls = self.calls_named(name).iter().copied().filter(|c| match c.field("function").map(|c| c.kind_name()) {
                    Some("identifier") => !is_method,
                    Some("attribute") => *is_method,
                    _ => false,
                });
                let Some(first) = calls.next() else {
                    decided[g] = true;
                    continue;
                };
                let GradContext::Disabled(why) = self.grad_context_with(first, &no_grad) else { continue };
                // Callers in other modules of the project must disable gradients too.
                let elsewhere_enabled = || !*is_method && !self.project.is_empty() && self.project.external_calls(name).iter().any(|d| !d);
                if calls.all(|c| self.grad_context_with(c, &no_grad).is_disabled()) && !elsewhere_enabled() {
                    for id in ids {
                        no_grad.entry(*id).or_insert_with(|| format!("only called under {why}"));
                    }
                    decided[g] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self.no_grad_functions = no_grad;
    }

    // ----- loops ------------------------------------------------------------------

    /// The loops whose *body* contains `node`, innermost first, up to the enclosing function.
    pub fn enclosing_loops(&self, node: Node<'t>) -> Vec<LoopInfo<'t>> {
        let mut loops = Vec::new();
        let mut child = node;
        let mut current = self.parent(node);
        while let Some(n) = current {
            match n.kind_name() {
                "for_statement" | "while_statement" => {
                    if n.field("body").map(|b| contains(b, child)).unwrap_or(false) {
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

    /// The names in a loop's iterable (or condition), and its target's text.
    fn loop_header(&self, node: Node<'t>) -> (Vec<String>, &'t str) {
        if node.kind_name() == "for_statement" {
            (
                node.field("right").map(|r| self.identifiers_in(r)).unwrap_or_default(),
                node.field("left").map(|l| self.text(l)).unwrap_or(""),
            )
        } else {
            (node.field("condition").map(|c| self.identifiers_in(c)).unwrap_or_default(), "")
        }
    }

    fn compute_loop_info(&self, node: Node<'t>) -> LoopInfo<'t> {
        let (header_names, _) = self.loop_header(node);
        let over_data = header_names.iter().any(|n| name_says_data(n));
        let over_eval_data = over_data && header_names.iter().any(|n| name_says_eval(n) && name_says_data(n) || n.contains("val") || n.contains("test"));
        let body = node.field("body");
        let over_batches = over_data || body.map(|b| self.trains_in(b)).unwrap_or(false);
        LoopInfo { node, over_eval_data, over_batches }
    }

    /// What a condition tests: the expression a flag was assigned (`do_step = (i + 1) % k
    /// == 0`, then `if do_step:`), else the condition itself.
    pub fn flag_value(&self, condition: Node<'t>) -> Node<'t> {
        if condition.kind_name() != "identifier" {
            return condition;
        }
        self.binding_at(self.text(condition), condition)
            .and_then(|b| if b.kind == BindingKind::Assign { b.value } else { None })
            .unwrap_or(condition)
    }

    /// The period `k` of a condition that holds every k-th step: `i % k == 0`,
    /// `(it + 1) % every == 0`. `"%d" % x` formats a string and is no period. A flag bound
    /// to a periodic test is not followed here (`if generator_step:` alternating two
    /// updates is no rare branch); a rule that wants it asks [`Self::flag_value`] first.
    pub fn period_of(&self, condition: Node<'t>) -> Option<Node<'t>> {
        let mut pending = vec![condition];
        while let Some(n) = pending.pop() {
            if n.kind_name() == "binary_operator" && n.field("operator").is_some_and(|o| self.text(o) == "%") {
                if n.field("left").is_some_and(|l| l.kind_name() == "string") {
                    return None;
                }
                return n.field("right").map(unparenthesize);
            }
            let mut cursor = n.walk();
            // Depth-first, left to right: the first `%` in source order.
            let children: Vec<Node<'t>> = n.named_children(&mut cursor).collect();
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

    fn compute_loop_kind(&self, node: Node<'t>) -> LoopKind {
        let (header_names, target) = self.loop_header(node);
        let over_data = header_names.iter().any(|n| name_says_data(n));
        let says_epoch = name_words(target).iter().any(|w| w.starts_with("epoch"))
            || header_names.iter().any(|n| name_words(n).iter().any(|w| w.starts_with("epoch")));
        let body = node.field("body");
        if says_epoch {
            LoopKind::Epoch
        } else if over_data {
            LoopKind::Step
        } else if body.map(|b| self.contains_nested_step_loop(b)).unwrap_or(false) {
            LoopKind::Epoch
        } else if body.map(|b| self.runs_a_step(b)).unwrap_or(false) {
            LoopKind::Step
        } else {
            LoopKind::Other
        }
    }

    /// Does `body` (nested loops included, nested functions not) call `backward()` or step
    /// an optimizer?
    pub fn trains_in(&self, body: Node<'t>) -> bool {
        let calls = self.training_calls.get_or_init(|| {
            let steps = self.calls_named("step").iter().filter(|c| self.is_optimizer_step(**c));
            let mut calls: Vec<(usize, ScopeId)> =
                self.backward_calls().iter().chain(steps).map(|c| (c.start_byte(), self.scope_of(*c))).collect();
            calls.sort_unstable();
            calls
        });
        let scope = self.scope_of(body);
        let first = calls.partition_point(|(start, _)| *start < body.start_byte());
        calls[first..].iter().take_while(|(start, _)| *start < body.end_byte()).any(|(_, s)| *s == scope)
    }

    fn contains_nested_step_loop(&self, body: Node<'t>) -> bool {
        let mut stack = named_children(body);
        while let Some(n) = stack.pop() {
            match n.kind_name() {
                "function_definition" | "class_definition" | "lambda" => continue,
                "for_statement" | "while_statement" => {
                    if self.loop_kind(n) != LoopKind::Other {
                        return true;
                    }
                    continue;
                }
                _ => stack.extend(named_children(n)),
            }
        }
        false
    }

    /// Does `body` (not counting nested loops and functions) run a training or inference
    /// step: a forward pass, a `backward()`, or an optimizer step?
    pub fn runs_a_step(&self, body: Node<'t>) -> bool {
        let mut stack = named_children(body);
        while let Some(n) = stack.pop() {
            match n.kind_name() {
                "function_definition" | "class_definition" | "lambda" | "for_statement" | "while_statement" => continue,
                "call" => {
                    if self.is_forward_call(n) || self.is_backward_call(n) || self.is_optimizer_step(n) {
                        return true;
                    }
                    stack.extend(named_children(n));
                }
                _ => stack.extend(named_children(n)),
            }
        }
        false
    }

    /// Every identifier (and attribute's last part) inside an expression, as dotted names.
    pub fn identifiers_in(&self, expr: Node<'t>) -> Vec<String> {
        let mut names = Vec::new();
        let mut stack = vec![expr];
        while let Some(n) = stack.pop() {
            match n.kind_name() {
                "identifier" => names.push(self.text(n).to_owned()),
                "attribute" => {
                    if let Some(d) = self.dotted_name(n) {
                        names.push(d);
                    }
                    if let Some(o) = n.field("object") {
                        stack.push(o);
                    }
                }
                "string" => {}
                _ => stack.extend(named_children(n)),
            }
        }
        names
    }

    // ----- calls ------------------------------------------------------------------

    /// `x.backward(...)` on a tensor, or `torch.autograd.backward(x)` / `torch.autograd.grad(...)`.
    pub fn is_backward_call(&self, call: Node<'t>) -> bool {
        let Some(callee) = call.field("function") else { return false };
        if callee.kind_name() == "attribute" {
            let attr = callee.field("attribute").map(|a| self.text(a));
            if attr == Some("backward") {
                return true;
            }
        }
        matches!(
            self.qualified_name(callee).as_deref(),
            Some("torch.autograd.backward" | "torch.autograd.grad")
        )
    }

    /// `accelerator.backward(loss)`, `model_engine.backward(loss)`, `fabric.backward(loss)`, or
    /// any `x.backward(loss)` where `x` is not a tensor and the loss carries history (a
    /// DeepSpeed engine bound to `model`): the backward of a framework that holds the model,
    /// which scales the loss (and divides it for its own gradient accumulation) itself.
    /// `y.backward(grad)` is a tensor's.
    pub fn is_framework_backward(&self, call: Node<'t>) -> bool {
        let Some(receiver) = call.field("function").filter(|f| f.kind_name() == "attribute").and_then(|f| f.field("object")) else {
            return false;
        };
        let spelled = self.text(receiver).to_lowercase();
        if ["accelerator", "engine", "deepspeed", "fabric", "trainer"].iter().any(|w| spelled.contains(w)) {
            return true;
        }
        let receiver_is_tensor = matches!(self.value_kind(receiver), ValueKind::GradTensor | ValueKind::PlainTensor);
        let loss = call.field("arguments").and_then(|a| named_children(a).into_iter().find(|n| n.kind_name() != "keyword_argument" && n.kind_name() != "comment"));
        !receiver_is_tensor && loss.is_some_and(|l| self.has_autograd_history(l))
    }

    /// `optimizer.step()` (a `.step()` on something named like an optimizer) or `scaler.step(opt)`.
    pub fn is_optimizer_step(&self, call: Node<'t>) -> bool {
        let Some(callee) = call.field("function").filter(|c| c.kind_name() == "attribute") else {
            return false;
        };
        let attr = callee.field("attribute").map(|a| self.text(a));
        if attr != Some("step") {
            return false;
        }
        callee.field("object").map(|o| name_says_optimizer(self.text(o))).unwrap_or(false)
    }

    /// Is `call` a forward pass of a model: `model(x)`, `self.encoder(x)`, `model.forward(x)`,
    /// or `self(x)` in a `Module` subclass? Loss modules are not models.
    pub fn is_forward_call(&self, call: Node<'t>) -> bool {
        self.forward_callee(call).is_some()
    }

    /// The module expression a forward call calls (`model` in `model(x)` and `model.forward(x)`).
    pub fn forward_callee(&self, call: Node<'t>) -> Option<Node<'t>> {
        // `with fabric.sharded_model():`: what a `with` enters is a context manager, not a
        // network's output, whatever the callee is called.
        let parent = self.parent(call);
        let entered = parent.is_some_and(|p| {
            p.kind_name() == "with_item" || (p.kind_name() == "as_pattern" && self.parent(p).is_some_and(|g| g.kind_name() == "with_item"))
        });
        if entered {
            return None;
        }
        let module = self.forward_callee_by_value(call)?;
        // A class, function or module of the project is not a module instance: calling it
        // builds one (`Generator(cfg)`), or runs code that is not a forward pass. (Asked
        // last: the answer may read another module.)
        if self.project_callee(call).is_some() {
            return None;
        }
        Some(module)
    }

    fn forward_callee_by_value(&self, call: Node<'t>) -> Option<Node<'t>> {
        let callee = call.field("function")?;
        if callee.kind_name() == "attribute" {
            let attr = callee.field("attribute").map(|a| self.text(a));
            if attr == Some("forward") {
                let object = callee.field("object")?;
                if self.text(object) == "self" || self.value_kind(object) == ValueKind::Model {
                    return Some(object);
                }
                return None;
            }
        }
        if callee.kind_name() == "identifier" && self.text(callee) == "self" {
            let class = self.enclosing_function(call)?.class.clone()?;
            return self.is_module_class(&class).then_some(callee);
        }
        if callee.kind_name() == "attribute" {
            let method = callee.field("attribute").map(|a| self.text(a)).unwrap_or("");
            let object = callee.field("object")?;
            // `nn.parallel.data_parallel(netG, inputs, gpus)`: a forward of its first argument.
            if method == "data_parallel" && self.qualified_name(callee).as_deref() == Some("torch.nn.parallel.data_parallel") {
                let module = call.field("arguments").and_then(|a| a.named_child(0))?;
                return (self.value_kind(module) == ValueKind::Model).then_some(module);
            }
            // `policy.pi(x)`, `model.sample(z)`: a method of a local module class that runs
            // the forward pass, called on an instance (of that class, or a module whose
            // class is not known here: then any local module class's method of that name).
            if let Some(class) = self.instance_class(object) {
                if let Some(def) = self.method_of(class, method) {
                    return self.method_runs_forward(def).then_some(object);
                }
            } else if method != "forward" && self.value_kind(object) == ValueKind::Model && self.some_module_method_runs_forward(method) {
                return Some(object);
            }
        }
        (self.value_kind(callee) == ValueKind::Model).then_some(callee)
    }

    // ----- values -----------------------------------------------------------------

    /// What `expr` holds, taking the gradient context at `expr` into account.
    pub fn value_kind(&self, expr: Node<'t>) -> ValueKind {
        if let Some(kind) = self.value_cache.borrow().get(&expr.id()) {
            return *kind;
        }
        // Guard against cycles (`x = x + 1` is looked up through earlier bindings only,
        // but a malformed tree could still loop).
        self.value_cache.borrow_mut().insert(expr.id(), ValueKind::Unknown);
        let kind = self.compute_value_kind(expr, 0);
        self.value_cache.borrow_mut().insert(expr.id(), kind);
        kind
    }

    /// Does `expr` hold a tensor with autograd history?
    pub fn has_autograd_history(&self, expr: Node<'t>) -> bool {
        self.value_kind(expr) == ValueKind::GradTensor
    }

    fn grad_or_plain(&self, at: Node<'t>) -> ValueKind {
        if self.grad_context(at).is_disabled() {
            ValueKind::PlainTensor
        } else {
            ValueKind::GradTensor
        }
    }

    fn compute_value_kind(&self, expr: Node<'t>, depth: usize) -> ValueKind {
        if depth > 24 {
            return ValueKind::Unknown;
        }
        match expr.kind_name() {
            "parenthesized_expression" => expr.named_child(0).map(|e| self.value_kind(e)).unwrap_or(ValueKind::Unknown),
            "integer" | "float" | "true" | "false" => ValueKind::Number,
            "unary_operator" | "not_operator" => {
                expr.field("argument").map(|e| self.value_kind(e)).unwrap_or(ValueKind::Unknown)
            }
            "binary_operator" => {
                let left = expr.field("left").map(|e| self.value_kind(e)).unwrap_or(ValueKind::Unknown);
                let right = expr.field("right").map(|e| self.value_kind(e)).unwrap_or(ValueKind::Unknown);
                combine_arithmetic(left, right)
            }
            "conditional_expression" => {
                let kinds: Vec<ValueKind> = named_children(expr).into_iter().take(1).chain(named_children(expr).into_iter().skip(2)).map(|e| self.value_kind(e)).collect();
                kinds.into_iter().fold(ValueKind::Unknown, |acc, k| if acc == ValueKind::GradTensor { acc } else if k != ValueKind::Unknown { k } else { acc })
            }
            "subscript" => match expr.field("value").map(|v| self.value_kind(v)) {
                Some(ValueKind::GradTensor) => ValueKind::GradTensor,
                Some(ValueKind::PlainTensor) => ValueKind::PlainTensor,
                Some(k @ (ValueKind::Model | ValueKind::Loss)) => k,
                _ => ValueKind::Unknown,
            },
            "identifier" => self.identifier_kind(expr, depth),
            // A container of modules (`[netG, netD]`, `{"G": G}`, `[Net() for _ in
            // range(k)]`, `return enc, dec`) is read as a module: indexing and iterating it
            // give modules. Other containers stay unknown.
            "list" | "tuple" | "expression_list" | "set" => {
                let elements = named_children(expr);
                if !elements.is_empty() && elements.iter().all(|e| self.value_kind_at_depth(*e, depth + 1) == ValueKind::Model) {
                    ValueKind::Model
                } else {
                    ValueKind::Unknown
                }
            }
            "dictionary" => {
                let values: Vec<Node> = named_children(expr).into_iter().filter_map(|p| p.field("value")).collect();
                if !values.is_empty() && values.iter().all(|e| self.value_kind_at_depth(*e, depth + 1) == ValueKind::Model) {
                    ValueKind::Model
                } else {
                    ValueKind::Unknown
                }
            }
            "list_comprehension" | "generator_expression" | "set_comprehension" => match expr.field("body") {
                Some(body) if self.value_kind_at_depth(body, depth + 1) == ValueKind::Model => ValueKind::Model,
                _ => ValueKind::Unknown,
            },
            "dictionary_comprehension" => match expr.field("body").and_then(|p| p.field("value")) {
                Some(body) if self.value_kind_at_depth(body, depth + 1) == ValueKind::Model => ValueKind::Model,
                _ => ValueKind::Unknown,
            },
            "attribute" => self.attribute_kind(expr, depth),
            "call" => self.call_kind(expr, depth),
            "await" => expr.named_child(0).map(|e| self.value_kind(e)).unwrap_or(ValueKind::Unknown),
            _ => ValueKind::Unknown,
        }
    }

    fn identifier_kind(&self, expr: Node<'t>, depth: usize) -> ValueKind {
        let name = self.text(expr);
        if matches!(name, "None" | "True" | "False") {
            return ValueKind::Unknown;
        }
        let from_binding = match self.binding_at(name, expr) {
            Some(binding) => match (binding.kind, binding.value) {
                (BindingKind::Assign, Some(value)) | (BindingKind::WithTarget, Some(value)) => {
                    // A tuple target takes one element of a call's result: same kind.
                    self.value_kind_at_depth(value, depth + 1)
                }
                (BindingKind::AugAssign, Some(value)) => {
                    // `x += y`: the kind of x before, combined with y.
                    let before = self
                        .bindings_in_scope(name, expr)
                        .iter()
                        .rev()
                        .find(|b| b.position < binding.position && b.kind != BindingKind::AugAssign)
                        .and_then(|b| b.value)
                        .map(|v| self.value_kind_at_depth(v, depth + 1))
                        .unwrap_or(ValueKind::Unknown);
                    combine_arithmetic(before, self.value_kind_at_depth(value, depth + 1))
                }
                (BindingKind::Definition, _) => match binding.statement.kind_name() {
                    "class_definition" => {
                        if self.is_module_class(name) { ValueKind::ModuleClass } else { ValueKind::Callable }
                    }
                    "function_definition" => ValueKind::Callable,
                    // An import: what the imported name is (a class, a function, a module).
                    _ => match self.lookup_import(name, expr) {
                        Some(qualified) => self.imported_value(qualified),
                        None => ValueKind::Callable,
                    },
                },
                (BindingKind::LoopTarget, _) => self.loop_target_kind(name, binding, depth),
                _ => ValueKind::Unknown,
            },
            // Not bound in this module (a builtin, a star import): a CamelCase name is a class.
            None if is_class_name(name) => self.class_value(name),
            None => ValueKind::Unknown,
        };
        if from_binding != ValueKind::Unknown {
            return from_binding;
        }
        // What is done with the name: `x.eval()`, `x.parameters()` only exist on modules
        // (in the function; a lambda's parameter or a comprehension's target of the same
        // name is another value).
        let bound_locally = || self.local_scopes_of(expr).any(|id| self.bindings_of(Some(id), name).is_some());
        if self.is_module_by_use(self.scope_of(expr), name) && !bound_locally() {
            return if name_says_loss(name) { ValueKind::Loss } else { ValueKind::Model };
        }
        // Unknown value (a parameter, a call we cannot see into): fall back to what the
        // name says.
        if name_says_loss(name) {
            ValueKind::Loss
        } else if name_says_model(name) {
            ValueKind::Model
        } else {
            ValueKind::Unknown
        }
    }

    /// The value of a loop (or comprehension) target: an element of a container of modules
    /// (`for m in models`, `for name, net in nets.items()`, `for i, layer in
    /// enumerate(self.layers)`) is a module; the other parts of a tuple target are not.
    fn loop_target_kind(&self, name: &str, binding: &Binding<'t>, depth: usize) -> ValueKind {
        let statement = binding.statement;
        let (Some(target), Some(mut iterable)) = (statement.field("left"), statement.field("right")) else {
            return ValueKind::Unknown;
        };
        let mut unpacks = false;
        // Iterating a dict's keys, not its values (`for k in d:`).
        let mut over_values = false;
        // `enumerate(xs)`, `xs.items()`, `xs.values()`, `zip(...)` (not followed).
        loop {
            iterable = unparenthesize(iterable);
            if iterable.kind_name() != "call" {
                break;
            }
            let Some(callee) = iterable.field("function") else { break };
            match callee.kind_name() {
                "identifier" if self.text(callee) == "enumerate" => {
                    match iterable.field("arguments").and_then(|a| a.named_child(0)) {
                        Some(inner) => {
                            iterable = inner;
                            unpacks = true;
                        }
                        None => return ValueKind::Unknown,
                    }
                }
                "attribute" => {
                    let method = callee.field("attribute").map(|a| self.text(a)).unwrap_or("");
                    let Some(object) = callee.field("object") else { return ValueKind::Unknown };
                    match method {
                        "values" | "children" | "modules" => {
                            iterable = object;
                            over_values = true;
                        }
                        "items" | "named_children" | "named_modules" => {
                            iterable = object;
                            unpacks = true;
                            over_values = true;
                        }
                        _ => return ValueKind::Unknown,
                    }
                    break;
                }
                _ => return ValueKind::Unknown,
            }
        }
        // Only the last name of an unpacking target is the element.
        let is_element = if unpacks || matches!(target.kind_name(), "pattern_list" | "tuple_pattern" | "list_pattern") {
            let last = named_children(target).into_iter().last();
            last.map(|l| l.kind_name() == "identifier" && self.text(l) == name).unwrap_or(false)
        } else {
            target.kind_name() == "identifier"
        };
        if !is_element {
            return ValueKind::Unknown;
        }
        if self.value_kind_at_depth(iterable, depth + 1) == ValueKind::Model {
            return ValueKind::Model;
        }
        // A dict, list or tuple built here of tensors with history (`terms = {"ce": ce,
        // "l2": l2}`, then `for name, term in terms.items():`).
        if self.literal_elements_have_history(iterable, over_values, binding.statement, depth) {
            return ValueKind::GradTensor;
        }
        ValueKind::Unknown
    }

    /// Is `iterable` a name bound once in its scope, before `at`, to a dict (iterated over
    /// its values), list or tuple display whose every element carries autograd history?
    fn literal_elements_have_history(&self, iterable: Node<'t>, over_values: bool, at: Node<'t>, depth: usize) -> bool {
        if iterable.kind_name() != "identifier" || depth > 8 {
            return false;
        }
        let name = self.text(iterable);
        let [binding] = self.bindings_in_scope(name, iterable) else { return false };
        let (BindingKind::Assign, Some(value)) = (binding.kind, binding.value) else { return false };
        if binding.position > at.start_byte() {
            return false;
        }
        let value = unparenthesize(value);
        let elements: Vec<Node<'t>> = match (value.kind_name(), over_values) {
            ("dictionary", true) => named_children(value).into_iter().map(|p| if p.kind_name() == "pair" { p.field("value") } else { None }).collect::<Option<Vec<_>>>().unwrap_or_default(),
            ("list" | "tuple", false) => named_children(value),
            _ => return false,
        };
        !elements.is_empty() && elements.iter().all(|e| self.value_kind_at_depth(*e, depth + 1) == ValueKind::GradTensor)
    }

    /// The value of a class by its name alone (imported from a module memlint does not
    /// read, or bound by a star import): a module class when its name says network or
    /// loss, else a class of something else. Calling either is not a forward pass.
    fn class_value(&self, name: &str) -> ValueKind {
        if self.is_module_class(name) { ValueKind::ModuleClass } else { ValueKind::Callable }
    }

    /// What an imported name is, by its fully qualified name: `torch.nn.Linear` and
    /// `torchvision.models.resnet50` build modules, a CamelCase name is a class, anything
    /// else a function or a Python module. Never a module instance.
    pub fn imported_value(&self, qualified: &str) -> ValueKind {
        let last = qualified.rsplit('.').next().unwrap_or(qualified);
        if module_factory(qualified) {
            return ValueKind::ModuleClass;
        }
        if is_class_name(last) {
            return self.class_value(qualified);
        }
        ValueKind::Callable
    }

    /// Is a module-only method called on `name` in `scope` (`name.eval()`,
    /// `name.parameters()`, `name.load_state_dict(...)`)?
    fn is_module_by_use(&self, scope: ScopeId, name: &str) -> bool {
        let set = self.modules_by_use.get_or_init(|| {
            let mut set = HashSet::default();
            for method in MODULE_ONLY_METHODS {
                for call in self.calls_named(method) {
                    let Some(object) = call.field("function").and_then(|f| f.field("object")) else { continue };
                    let object = unparenthesize(object);
                    match object.kind_name() {
                        "identifier" => {
                            set.insert((self.scope_of(*call), self.text(object)));
                        }
                        "attribute" if object.field("object").map(|o| self.text(o) == "self").unwrap_or(false) => {
                            set.insert((None, self.text(object)));
                        }
                        _ => {}
                    }
                }
            }
            set
        });
        set.contains(&(scope, name))
    }

    fn value_kind_at_depth(&self, expr: Node<'t>, depth: usize) -> ValueKind {
        if let Some(kind) = self.value_cache.borrow().get(&expr.id()) {
            return *kind;
        }
        self.value_cache.borrow_mut().insert(expr.id(), ValueKind::Unknown);
        let kind = self.compute_value_kind(expr, depth);
        self.value_cache.borrow_mut().insert(expr.id(), kind);
        kind
    }

    fn attribute_kind(&self, expr: Node<'t>, depth: usize) -> ValueKind {
        let (Some(object), Some(attr)) = (expr.field("object"), expr.field("attribute")) else {
            return ValueKind::Unknown;
        };
        let attr = self.text(attr);
        if self.text(object) == "self" {
            // `self.restore_model`: a method of the class, not a network.
            if let Some(class) = self.enclosing_function(expr).and_then(|f| f.class.as_deref()) {
                if self.method_of(class, attr).is_some() {
                    return ValueKind::Callable;
                }
            }
            // `self.model`: what the class assigned (in `__init__` or another method).
            let mut known = ValueKind::Unknown;
            if let Some(values) = self.self_attributes.get(attr) {
                for v in values {
                    let k = self.value_kind_at_depth(*v, depth + 1);
                    if k.is_module() {
                        return k;
                    }
                    if known == ValueKind::Unknown
                        && matches!(k, ValueKind::ModuleClass | ValueKind::Callable | ValueKind::Optimizer | ValueKind::Scaler | ValueKind::DataLoader | ValueKind::Number)
                    {
                        known = k;
                    }
                }
            }
            if known != ValueKind::Unknown {
                return known;
            }
            if self.is_module_by_use(None, self.text(expr)) {
                return if name_says_loss(attr) { ValueKind::Loss } else { ValueKind::Model };
            }
            // Else what the name says.
            return if name_says_loss(attr) {
                ValueKind::Loss
            } else if name_says_model(attr) {
                ValueKind::Model
            } else {
                ValueKind::Unknown
            };
        }
        // `super().configure_model()`: `super()` reaches the parent class's methods, never
        // a submodule (those are attributes of `self`).
        if object.kind_name() == "call" && object.field("function").is_some_and(|f| self.text(f) == "super") {
            return ValueKind::Callable;
        }
        match attr {
            "data" | "grad" => return ValueKind::PlainTensor,
            "shape" | "dtype" | "device" | "requires_grad" | "ndim" | "is_cuda" => return ValueKind::Unknown,
            _ => {}
        }
        if let Some(qualified) = self.qualified_name(expr) {
            // `networks.ResnetEncoder`, `commons.clip_grad_value_`, `nn.Linear`: a name in
            // an imported module is a class or a function, never a module instance.
            return self.imported_value(&qualified);
        }
        match self.value_kind_at_depth(object, depth + 1) {
            // `outputs.loss`, `out.logits`: fields of a model's output keep its history.
            ValueKind::GradTensor => ValueKind::GradTensor,
            ValueKind::PlainTensor => ValueKind::PlainTensor,
            // `model_file.Net` (a module object from `importlib`), `zoo.ResBlock`: a class.
            k if !k.is_module() && is_class_name(attr) => self.class_value(attr),
            // `q1.train_net`: a method of a local module class, not a submodule.
            k if k.is_module() && self.methods_by_name.contains_key(attr) => ValueKind::Callable,
            // `self.probe.adapter_model`: on an object of unknown value, a name that a class
            // of this module defines as a method is that method.
            ValueKind::Unknown if self.methods_by_name.contains_key(attr) => ValueKind::Callable,
            // `get_accelerator().default_generator`: an attribute of what an unknown call
            // returns; its name is no evidence of a network.
            ValueKind::Unknown if unparenthesize(object).kind_name() == "call" => ValueKind::Unknown,
            _ => {
                if name_says_loss(attr) {
                    ValueKind::Loss
                } else if name_says_model(attr) {
                    ValueKind::Model
                } else {
                    ValueKind::Unknown
                }
            }
        }
    }

    /// Is some argument of `call` (by position, keyword or splat; also an element of a
    /// literal list or tuple) a tensor with history?
    pub fn gives_history(&self, call: Node<'t>) -> bool {
        self.any_argument_has_history(call, 0)
    }

    fn any_argument_has_history(&self, call: Node<'t>, depth: usize) -> bool {
        let Some(args) = call.field("arguments") else { return false };
        named_children(args).into_iter().any(|a| {
            let value = match a.kind_name() {
                "keyword_argument" => a.field("value"),
                "list_splat" | "dictionary_splat" => a.named_child(0),
                _ => Some(a),
            };
            value.map(|v| self.holds_history(v, depth + 1)).unwrap_or(false)
        })
    }

    /// Does `expr` hold a tensor with history, itself or as an element of a literal list
    /// or tuple (`torch.cat([x, out])`, `torch.stack((a, b))`)?
    fn holds_history(&self, expr: Node<'t>, depth: usize) -> bool {
        let expr = unparenthesize(expr);
        match expr.kind_name() {
            "list" | "tuple" => named_children(expr).into_iter().any(|e| {
                let e = if e.kind_name() == "list_splat" { e.named_child(0).unwrap_or(e) } else { e };
                self.holds_history(e, depth + 1)
            }),
            _ => self.value_kind_at_depth(expr, depth) == ValueKind::GradTensor,
        }
    }

    fn call_kind(&self, call: Node<'t>, depth: usize) -> ValueKind {
        let Some(callee) = call.field("function") else { return ValueKind::Unknown };
        if callee.kind_name() == "attribute" {
            let object = callee.field("object");
            let method = callee.field("attribute").map(|a| self.text(a)).unwrap_or("");
            if let Some(qualified) = self.qualified_name(callee) {
                if let Some(kind) = self.project_call_kind(call, method) {
                    return kind;
                }
                return self.library_call_kind(call, &qualified, depth);
            }
            let Some(object) = object else { return ValueKind::Unknown };
            // `self.load_networks()`: what the method returns.
            if self.text(object) == "self" {
                if let Some(class) = self.enclosing_function(call).and_then(|f| f.class.as_deref()) {
                    if let Some(def) = self.method_of(class, method) {
                        return self.function_return_kind(def);
                    }
                }
            }
            // `policy.pi(x)` on an instance of a local module class: a method that runs the
            // forward pass gives its output, another one what it returns.
            if let Some(class) = self.instance_class_at(object, depth + 1) {
                if let Some(def) = self.method_of(class, method) {
                    if method != "forward" {
                        return if self.method_runs_forward(def) { self.grad_or_plain(call) } else { self.function_return_kind(def) };
                    }
                }
            }
            match method {
                "item" | "tolist" | "__float__" | "numel" | "dim" | "size" | "nelement" | "element_size" => return ValueKind::Number,
                "numpy" | "detach" | "argmax" | "argmin" | "long" | "int" | "bool" | "eq" | "ne" | "lt" | "gt" | "le" | "ge" | "sign" | "round" => {
                    let k = self.value_kind_at_depth(object, depth + 1);
                    return if matches!(k, ValueKind::GradTensor | ValueKind::PlainTensor) || method == "detach" { ValueKind::PlainTensor } else { ValueKind::Unknown };
                }
                "forward" => {
                    let k = self.value_kind_at_depth(object, depth + 1);
                    return if k == ValueKind::Model || self.text(object) == "self" { self.grad_or_plain(call) } else { ValueKind::Unknown };
                }
                "backward" | "step" | "zero_grad" | "append" | "extend" | "update" | "eval" | "train" => return ValueKind::Unknown,
                _ => {}
            }
            // Methods that return the same kind of thing: `model.to(dev)`, `loss.mean()`.
            return match self.value_kind_at_depth(object, depth + 1) {
                ValueKind::GradTensor => ValueKind::GradTensor,
                ValueKind::PlainTensor => {
                    if matches!(method, "requires_grad_") { ValueKind::GradTensor } else { ValueKind::PlainTensor }
                }
                k @ (ValueKind::Model | ValueKind::Loss) => {
                    if MODULE_METHODS_RETURNING_SELF.contains(&method) {
                        k
                    } else if self.value_kind_at_depth(callee, depth + 1) == ValueKind::Model {
                        // `self.backbone.layer4(x)`: a submodule by name.
                        self.grad_or_plain(call)
                    } else {
                        ValueKind::Unknown
                    }
                }
                ValueKind::Unknown => {
                    let callee_kind = self.value_kind_at_depth(callee, depth + 1);
                    self.module_call_result(call, callee_kind, depth)
                }
                _ => ValueKind::Unknown,
            };
        }
        if callee.kind_name() == "identifier" {
            let name = self.text(callee);
            if let Some(kind) = self.project_call_kind(call, name) {
                return kind;
            }
            if let Some(qualified) = self.qualified_name(callee) {
                return self.library_call_kind(call, &qualified, depth);
            }
            match name {
                "float" | "int" | "len" | "bool" | "round" => return ValueKind::Number,
                "sum" | "max" | "min" | "abs" => {
                    return if self.any_argument_has_history(call, depth) { ValueKind::GradTensor } else { ValueKind::Unknown };
                }
                "self" => {
                    let is_module = self
                        .enclosing_function(call)
                        .and_then(|f| f.class.clone())
                        .map(|c| self.is_module_class(&c))
                        .unwrap_or(false);
                    return if is_module { self.grad_or_plain(call) } else { ValueKind::Unknown };
                }
                _ => {}
            }
            if self.classes.contains_key(name) {
                return if self.is_module_class(name) {
                    if class_name_says_loss(name) { ValueKind::Loss } else { ValueKind::Model }
                } else {
                    ValueKind::Unknown
                };
            }
            // A local function: what it returns (`build_model()` returning a network).
            if let Some(binding) = self.binding_at(name, callee) {
                if binding.kind == BindingKind::Definition && binding.statement.kind_name() == "function_definition" {
                    return self.function_return_kind(binding.statement);
                }
            }
            let callee_kind = self.value_kind_at_depth(callee, depth + 1);
            return self.module_call_result(call, callee_kind, depth);
        }
        ValueKind::Unknown
    }

    fn module_call_result(&self, call: Node<'t>, callee_kind: ValueKind, depth: usize) -> ValueKind {
        match callee_kind {
            // Constructing a module (`PSPNet(...)` from a star import, `zoo.ResBlock(...)`).
            ValueKind::ModuleClass => {
                let name = call.field("function").map(|c| self.text(c)).unwrap_or("");
                let last = name.rsplit('.').next().unwrap_or(name);
                if class_name_says_loss(last) { ValueKind::Loss } else { ValueKind::Model }
            }
            ValueKind::Model => self.grad_or_plain(call),
            ValueKind::Loss => {
                if self.any_argument_has_history(call, depth) {
                    ValueKind::GradTensor
                } else {
                    ValueKind::Unknown
                }
            }
            _ => ValueKind::Unknown,
        }
    }

    fn library_call_kind(&self, call: Node<'t>, qualified: &str, depth: usize) -> ValueKind {
        let last = qualified.rsplit('.').next().unwrap_or("");
        if !qualified.starts_with("torch.") || qualified.starts_with("torch.optim.") || qualified.starts_with("torch.hub.") || matches!(last, "GradScaler" | "DataLoader") {
            let kind = self.imported_call_result(qualified);
            if kind != ValueKind::Unknown || !qualified.starts_with("torch.") {
                return kind;
            }
        }
        let first_upper = last.chars().next().map(char::is_uppercase).unwrap_or(false);
        if qualified.starts_with("torch.nn.") && !qualified.starts_with("torch.nn.functional.") && !qualified.starts_with("torch.nn.utils") && !qualified.starts_with("torch.nn.init") && first_upper {
            if class_name_says_loss(last) {
                return ValueKind::Loss;
            }
            if matches!(last, "Parameter" | "ParameterList" | "ParameterDict") {
                return ValueKind::Unknown;
            }
            return ValueKind::Model;
        }
        if (qualified.starts_with("torchvision.models.") || qualified.starts_with("timm.create_model") || qualified.starts_with("transformers.")) && (qualified.contains("from_pretrained") || qualified.starts_with("torchvision.models.") || qualified.starts_with("timm.")) {
            return ValueKind::Model;
        }
        if qualified.starts_with("torch.") {
            if matches!(last, "no_grad" | "inference_mode" | "enable_grad" | "set_grad_enabled" | "device" | "load" | "save" | "manual_seed") {
                return ValueKind::Unknown;
            }
            if matches!(last, "argmax" | "argmin" | "eq" | "ne" | "numel" | "randint" | "zeros" | "ones" | "empty" | "tensor" | "as_tensor" | "from_numpy" | "arange" | "randn" | "rand" | "full" | "zeros_like" | "ones_like" | "empty_like") {
                return ValueKind::PlainTensor;
            }
            return if self.any_argument_has_history(call, depth) { self.grad_or_plain(call) } else { ValueKind::Unknown };
        }
        ValueKind::Unknown
    }
}

fn combine_arithmetic(left: ValueKind, right: ValueKind) -> ValueKind {
    use ValueKind::*;
    match (left, right) {
        (GradTensor, _) | (_, GradTensor) => GradTensor,
        (PlainTensor, _) | (_, PlainTensor) => PlainTensor,
        (Number, Number) => Number,
        _ => Unknown,
    }
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
