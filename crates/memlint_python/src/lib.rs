//! Python front end for memlint: parsing with tree-sitter-python, byte/line/column
//! conversions, and a semantic model of one module ([`SemanticModel`]).
//!
//! Nothing here does I/O: callers hand in source text.

mod calls;
mod classes;
mod constants;
mod control;
mod evidence;
mod flags;
mod flow;
mod grad;
mod imports;
mod index;
mod lexicon;
mod library;
mod line_index;
mod named_nodes;
pub mod project;
mod project_view;
mod scope;
mod semantic;
mod values;

pub use constants::{argparse_default, bool_default, constant_value, fixed_sequence_length, Constant};
pub use evidence::{describe_kind, Fact};
pub use flags::FlagOff;
pub use flow::Fate;
pub use values::{Basis, Value};
pub use line_index::{LineIndex, SourcePosition};
pub use classes::derives_by_name;
pub use index::{import_bindings, target_leaves};
pub use named_nodes::{NamedNodes, WalkedTree};
pub use lexicon::{
    function_name_says_eval, name_says_data, name_says_eval, name_says_loss, name_says_model, name_says_optimizer, name_words,
    text_names_a_model_or_loss, text_names_an_optimizer,
};
pub use library::{builds_on_the_cpu_without_device, loads_pretrained_network, pretrained_class_is_not_a_network, pretrained_class_loads_frozen, MODULE_METHODS_RETURNING_SELF, MODULE_ONLY_METHODS};
pub use semantic::{
    contains, named_children, parameter_name, unparenthesize, Binding, BindingKind, FunctionInfo, GradContext, LoopInfo, LoopKind,
    SemanticModel, ValueKind,
};
pub use project::{
    FunctionSummary, ModuleLoader, ModuleSummary, NoProject, PretrainedCall, ProjectIndex, ProjectResolver, Returned, StoreKind, StoredArgument, SymbolAnswer,
    Symbol,
};
pub use tree_sitter;


use std::sync::atomic::{AtomicU64, Ordering};
use tree_sitter::{Language, Node, Parser, Tree};

/// Which bytes make up Python identifiers: ASCII letters, digits, `_`, and every byte of
/// a non-ASCII character. A table: the scans of a file's words (the linter's pre-filter,
/// the project's index of which files mention which names) ask it of every byte.
pub const IDENTIFIER_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        b += 1;
    }
    table
};

/// Python's keywords (`keyword.kwlist`): words that never name a value.
pub const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
    "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
    "return", "try", "while", "with", "yield",
];

/// The tree-sitter grammar memlint parses Python with.
pub fn language() -> Language {
    tree_sitter_python::LANGUAGE.into()
}

/// Faster lookups on nodes, for the semantic model and the rules (both showed in
/// profiles): `child_by_field_name` compares the name with the grammar's field names on
/// every call, and `kind` measures and validates the C string of the kind's name.
pub trait NodeExt<'t> {
    /// The child in field `name`, with the field's id looked up once per process.
    fn field(&self, name: &'static str) -> Option<Node<'t>>;
    /// The node's kind (as [`Node::kind`]), from a table built once per process.
    fn kind_name(&self) -> &'static str;
}

impl<'t> NodeExt<'t> for Node<'t> {
    fn field(&self, name: &'static str) -> Option<Node<'t>> {
        match field_id(name) {
            Some(id) => self.child_by_field_id(id),
            None => self.child_by_field_name(name),
        }
    }

    fn kind_name(&self) -> &'static str {
        match kind_name_of(self.kind_id()) {
            Some(name) => name,
            None => self.kind(),
        }
    }
}

/// The name of the node kind `id` of the Python grammar (what [`Node::kind`] gives for a
/// node of that kind id), from a table: no call into tree-sitter.
pub(crate) fn kind_name_of(id: u16) -> Option<&'static str> {
    static NAMES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let language = language();
        (0..language.node_kind_count()).map(|id| language.node_kind_for_id(id as u16).unwrap_or("")).collect()
    });
    names.get(id as usize).copied()
}

/// `classify` of every node kind of the Python grammar, by kind id: a walk that visits
/// every node of a large tree reads what to do at each from this table
/// ([`NamedNodes::kind_id`](crate::NamedNodes)) instead of matching kind names, which cost
/// more than the rest of its step.
pub(crate) fn kind_table<T>(classify: impl Fn(&str) -> T) -> Vec<T> {
    (0..language().node_kind_count() as u16).map(|id| classify(kind_name_of(id).unwrap_or(""))).collect()
}

/// The fields memlint reads, in the order of [`field_id`]'s `match`.
pub(crate) const FIELDS: [&str; 18] = [
    "function", "attribute", "object", "body", "arguments", "value", "name", "left", "right", "operator",
    "condition", "alias", "module_name", "superclasses", "return_type", "parameters", "argument", "type",
];

pub(crate) fn field_id(name: &str) -> Option<u16> {
    static IDS: std::sync::OnceLock<Vec<Option<u16>>> = std::sync::OnceLock::new();
    let index = match name {
        "function" => 0,
        "attribute" => 1,
        "object" => 2,
        "body" => 3,
        "arguments" => 4,
        "value" => 5,
        "name" => 6,
        "left" => 7,
        "right" => 8,
        "operator" => 9,
        "condition" => 10,
        "alias" => 11,
        "module_name" => 12,
        "superclasses" => 13,
        "return_type" => 14,
        "parameters" => 15,
        "argument" => 16,
        "type" => 17,
        _ => return None,
    };
    let ids = IDS.get_or_init(|| {
        let language = language();
        FIELDS.iter().map(|f| language.field_id_for_name(f).map(|id| id.get())).collect()
    });
    ids[index]
}

/// A parsed Python module: its text and its concrete syntax tree.
pub struct ParsedModule {
    pub source: String,
    pub tree: Tree,
}

impl ParsedModule {
    pub fn root(&self) -> Node<'_> {
        self.tree.root_node()
    }
}

/// Parse `source` from scratch.
pub fn parse(source: &str) -> ParsedModule {
    let tree = parse_with(source, None);
    ParsedModule { source: source.to_owned(), tree }
}

/// The parses of this process so far ([`parse_with`]), and the bytes of text they read.
static PARSES: (AtomicU64, AtomicU64) = (AtomicU64::new(0), AtomicU64::new(0));

/// How many parses this process ran and how many bytes of text they read: for statistics
/// (`memlint check` with `MEMLINT_PROJECT_STATS` prints them, so a run that parses a file
/// twice shows).
pub fn parses_so_far() -> (u64, u64) {
    (PARSES.0.load(Ordering::Relaxed), PARSES.1.load(Ordering::Relaxed))
}

/// One parse timed ([`time_parses`]): its text's hash, length, and how long tree-sitter
/// took on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseTime {
    pub text_hash: u64,
    pub bytes: usize,
    pub nanos: u64,
}

/// The hash a timed parse keys its text by ([`ParseTime::text_hash`]).
fn text_hash(text: &str) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    std::hash::Hash::hash(text, &mut hasher);
    std::hash::Hasher::finish(&hasher)
}

/// Are parses timed? Read at every parse: one relaxed load when they are not.
static TIMING_PARSES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static PARSE_TIMES: std::sync::Mutex<Vec<ParseTime>> = std::sync::Mutex::new(Vec::new());

/// Times every parse from now on ([`parse_times`] gives them). For benchmarks:
/// `scripts/bench-check.sh` compares the time tree-sitter takes on the same files with the
/// project pass and without it, in the same round (`MEMLINT_PARSE_TIMES`), to tell the
/// project's own work from parsing slowed down beside it.
pub fn time_parses() {
    TIMING_PARSES.store(true, Ordering::Relaxed);
}

/// The parses timed since [`time_parses`], in the order they ended.
pub fn parse_times() -> Vec<ParseTime> {
    PARSE_TIMES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Parse `source`, reusing `old_tree` (already edited with `Tree::edit`) for an
/// incremental re-parse.
pub fn parse_with(source: &str, old_tree: Option<&Tree>) -> Tree {
    PARSES.0.fetch_add(1, Ordering::Relaxed);
    PARSES.1.fetch_add(source.len() as u64, Ordering::Relaxed);
    let started = TIMING_PARSES.load(Ordering::Relaxed).then(std::time::Instant::now);
    let tree = with_parser(|parser| {
        parser.set_included_ranges(&[]).expect("no ranges are always valid");
        // `parse` only returns None on cancellation or without a language; neither applies.
        parser
            .parse(source, old_tree)
            .expect("parsing without a timeout or cancellation flag always yields a tree")
    });
    if let Some(started) = started {
        let nanos = started.elapsed().as_nanos() as u64;
        let time = ParseTime { text_hash: text_hash(source), bytes: source.len(), nanos };
        PARSE_TIMES.lock().unwrap_or_else(|e| e.into_inner()).push(time);
    }
    tree
}

/// Runs `f` with this thread's parser (a parser keeps its buffers from one file to the
/// next; making one per file showed in profiles).
fn with_parser<T>(f: impl FnOnce(&mut Parser) -> T) -> T {
    thread_local! {
        static PARSER: std::cell::RefCell<Parser> = std::cell::RefCell::new({
            let mut parser = Parser::new();
            parser
                .set_language(&language())
                .expect("tree-sitter-python is ABI-compatible with the tree-sitter crate");
            parser
        });
    }
    PARSER.with(|parser| match parser.try_borrow_mut() {
        Ok(mut parser) => f(&mut parser),
        // Only a parse inside a parse on the same thread (which nothing does) gets here.
        Err(_) => {
            let mut parser = Parser::new();
            parser
                .set_language(&language())
                .expect("tree-sitter-python is ABI-compatible with the tree-sitter crate");
            f(&mut parser)
        }
    })
}

/// Parse only the byte `ranges` of `source` (sorted, not overlapping), as if the text
/// between them were not there; nodes keep their positions in `source`. `None` when
/// tree-sitter rejects the ranges.
pub fn parse_ranges(source: &str, ranges: &[std::ops::Range<usize>]) -> Option<Tree> {
    let bytes = source.as_bytes();
    let mut row = 0;
    let mut line_start = 0;
    let mut scanned = 0;
    let mut point = |offset: usize| {
        for newline in memchr::memchr_iter(b'\n', &bytes[scanned..offset]) {
            row += 1;
            line_start = scanned + newline + 1;
        }
        scanned = offset;
        tree_sitter::Point { row, column: offset - line_start }
    };
    let ranges: Vec<tree_sitter::Range> = ranges
        .iter()
        .map(|r| {
            let start_point = point(r.start);
            let end_point = point(r.end);
            tree_sitter::Range { start_byte: r.start, end_byte: r.end, start_point, end_point }
        })
        .collect();
    with_parser(|parser| {
        parser.set_included_ranges(&ranges).ok()?;
        parser.parse(source, None)
    })
}

/// A syntax error found in the tree: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub start: usize,
    pub end: usize,
    pub message: String,
}

/// Every syntax error in the tree (ERROR and MISSING nodes), outermost first.
pub fn syntax_errors(tree: &Tree, source: &str) -> Vec<SyntaxError> {
    let mut errors = Vec::new();
    if !tree.root_node().has_error() {
        return errors;
    }
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.is_missing() {
            errors.push(SyntaxError {
                start: node.start_byte(),
                end: node.end_byte(),
                message: format!("expected `{}`", node.kind()),
            });
            continue;
        }
        if node.is_error() {
            let text = node.utf8_text(source.as_bytes()).unwrap_or("");
            let first = text.lines().next().unwrap_or("").trim();
            let shown: String = first.chars().take(40).collect();
            let message = if shown.is_empty() {
                "unexpected token".to_owned()
            } else {
                format!("unexpected `{shown}`")
            };
            errors.push(SyntaxError { start: node.start_byte(), end: node.end_byte(), message });
            continue;
        }
        if node.has_error() {
            let mut cursor = node.walk();
            let children: Vec<_> = node.children(&mut cursor).collect();
            stack.extend(children.into_iter().rev());
        }
    }
    errors.sort_by_key(|e| e.start);
    errors
}

#[cfg(test)]
mod tests {
    use super::{parse, NodeExt};

    #[test]
    fn timed_parses_record_each_text_its_length_and_time() {
        let text = "def timed_parse_example(x):\n    return x * 2\n";
        // Other tests parse meanwhile: only this text's parses are looked for.
        let parses_of_text = || super::parse_times().into_iter().filter(|t| t.text_hash == super::text_hash(text)).collect::<Vec<_>>();
        assert!(parses_of_text().is_empty(), "nothing is timed before time_parses");
        parse(text);
        assert!(parses_of_text().is_empty(), "nothing is timed before time_parses");
        super::time_parses();
        parse(text);
        parse(text);
        let timed = parses_of_text();
        assert_eq!(timed.len(), 2);
        assert!(timed.iter().all(|t| t.bytes == text.len() && t.nanos > 0));
    }

    #[test]
    fn kind_names_and_fields_agree_with_tree_sitter() {
        let module = parse("import torch\n\n@torch.no_grad()\ndef f(x: int = 1, *a, **k) -> int:\n    for i in range(3):\n        y = f'{x!r:>4}' if x else [z async for z in g()]\n    with open(p) as h, m:\n        return lambda q: q.item()\n");
        let mut stack = vec![module.root()];
        let mut fields = 0;
        while let Some(node) = stack.pop() {
            assert_eq!(node.kind_name(), node.kind());
            for name in super::FIELDS {
                assert_eq!(node.field(name), node.child_by_field_name(name), "{name} of {}", node.kind());
                fields += node.field(name).is_some() as usize;
            }
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
        assert!(fields > 20);
    }
}
