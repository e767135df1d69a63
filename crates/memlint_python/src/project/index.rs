//! What the semantic model asks about the project around one linted module: the
//! [`ProjectIndex`] trait and its answers ([`Symbol`], [`Returned`]), the empty
//! [`NoProject`], the [`ModuleLoader`] trait the front ends implement (they do the I/O),
//! and [`symbol_matters`], the linter's pre-filter question.
//!
//! Only interfaces: depends on the summary types of [`super::summary`]; the answers come
//! from [`super::resolve`].

use std::sync::Arc;

use super::summary::{FunctionSummary, ModuleSummary};

/// What a name a module imports from its project is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Symbol {
    /// A class; `is_module` when it derives `torch.nn.Module` (through any chain of local,
    /// project and library bases); `pretrained`: the callee (as its module spells it) of a
    /// pretrained network its `__init__` loads and the class never freezes.
    /// `holds_no_parameters`: it derives `torch.nn.Module` and neither it nor what it
    /// stores holds a parameter (its forward records a graph only of its inputs').
    ///
    /// The lists are shared (`Arc`): the semantic model hands out a symbol for each of its
    /// questions, and copying a class's methods each time showed in profiles.
    Class { is_module: bool, methods: Arc<[FunctionSummary]>, pretrained: Option<String>, submodules: Arc<[String]>, may_freeze: bool, holds_no_parameters: bool },
    /// A function; `returns_module` when calling it returns a module instance (a factory);
    /// `returned_elements`: what each element of the tuple it returns is, when known;
    /// `returns`: what it returns, when every `return` builds the same kind of value
    /// (a loss module, an optimizer, a network, ...).
    Function { returns_module: bool, summary: Arc<FunctionSummary>, returned_elements: Arc<[Option<Returned>]>, returns: Option<Returned> },
    /// A module of the project.
    Module,
}

/// What a class or function of the project is ([`ProjectIndex::symbol`]'s answer about
/// it), with the modules read to say so: the same whichever module asks, so a loader may
/// keep it for the lints of a run ([`ModuleLoader::symbol_answer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolAnswer {
    pub symbol: Option<Symbol>,
    /// The modules whose summaries the answer rests on, in the order first read.
    pub read: Vec<String>,
}

/// What an element of a tuple a project function returns is built as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returned {
    Network,
    /// A network whose class may freeze its parameters when built.
    FrozenNetwork,
    Loss,
    Optimizer,
    Scaler,
    Loader,
}

/// What the semantic model of one linted module asks about the project around it.
/// Front ends implement it (through [`ProjectResolver`](super::ProjectResolver));
/// [`NoProject`] knows nothing.
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
    /// its caller ([`ImportedCall::result_kept`](super::ImportedCall::result_kept)):
    /// (gradients disabled, result kept).
    /// The calls of the method `method` of the project class `class` (as the linted module
    /// spells it through its imports; a class of another module), in every module of the
    /// project but the class's own, this one included: (gradients disabled, result kept).
    fn method_call_sites(&self, _class: &str, _method: &str) -> Vec<(bool, bool)> {
        Vec::new()
    }

    fn external_call_sites(&self, function: &str) -> Vec<(bool, bool)> {
        self.external_calls(function).into_iter().map(|disabled| (disabled, true)).collect()
    }

    /// Is `module` (as an import statement of the linted module spells it: `nets`,
    /// `.models`, `..`) one of the project's modules?
    fn is_project_module(&self, module: &str) -> bool;

    /// What a name the linted module does not bind but gets from a star import of a project
    /// module (`from model_3d import *`, where `model_3d` does `import torch.nn as nn`) is
    /// outside the project: `torch.nn`. `None` when it is no library name.
    fn star_imported_external(&self, _name: &str) -> Option<String> {
        None
    }

    /// Does the project class `qualified` (as the linted module spells it through its
    /// imports) derive, through the project's bases, from one of the library classes
    /// `bases` (`torch.nn.DataParallel`)? `false` when it is no project class.
    fn class_derives_from(&self, _qualified: &str, _bases: &[&str]) -> bool {
        false
    }

    /// The linted module's text, before it is parsed (the pre-filter's questions come
    /// first): what the index needs of it to resolve its imports.
    fn note_source(&self, _source: &str) {}

    /// The linter parsed and walked the linted module (`walked`): a chance to summarize it
    /// from that walk, now or, while the lint runs, when it is first asked for.
    fn seed(&self, _walked: &crate::WalkedTree, _source: &str) {}

    /// The tree of the linted module, when the project already parsed exactly `source`
    /// (for the module's summary, before its lint): the linter then does not parse it
    /// again. Asked once per lint, also by a lint that needs no tree (the pre-filter
    /// skipped the file), so that the project keeps none for it. See
    /// [`ModuleLoader::take_tree`]. The tree comes walked ([`crate::WalkedTree`]): the
    /// summary walked it already.
    fn parsed_tree(&self, _source: &str) -> Option<crate::WalkedTree> {
        None
    }

    /// Parses the linted module for its lint, when [`Self::parsed_tree`] gave no tree. An
    /// index that will summarize the module from this parse holds the module while it
    /// parses ([`ModuleLoader::parse_seeding`]), so that a lint of another file asking for
    /// that summary meanwhile waits for it instead of parsing the file a second time.
    fn parse(&self, source: &str) -> crate::WalkedTree {
        crate::WalkedTree::walk(crate::parse_with(source, None))
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
    /// [`ModuleLoader::resolve_module`] for a module that also puts `import_dirs` on
    /// `sys.path` (relative to its own folder, [`ModuleSummary::import_dirs`]): absolute
    /// imports may name modules there. Loaders without folders ignore them.
    fn resolve_module_in(&self, from: &str, dotted: &str, import_dirs: &[String]) -> Option<String> {
        let _ = import_dirs;
        self.resolve_module(from, dotted)
    }
    /// The summary of module `key` (parsed once, then kept); `None` when it cannot be read.
    fn summary(&self, key: &str) -> Option<Arc<ModuleSummary>>;
    /// The modules that may call the function `name` of module `key`: other modules of
    /// the project whose text mentions `name` (a cheap filter; calls are resolved after).
    fn candidate_callers(&self, key: &str, name: &str) -> Vec<String>;
    /// May module `key` (one [`Self::candidate_callers`] gave) call a function or method
    /// named `name`? A loader that scanned the file's text can say no before it is parsed
    /// (the name is never followed by `(` nor imported under an alias); the answer must
    /// never be no for a file whose summary records such a call.
    fn may_call(&self, _key: &str, _name: &str) -> bool {
        true
    }
    /// The linted module `key` was parsed anyway: its summary can be made from that tree
    /// instead of reading and parsing the file again (only when `text` is what the file
    /// holds on disk: the CLI's files, not an editor's unsaved buffer).
    fn seed(&self, _key: &str, _text: &str, _summary: &dyn Fn() -> ModuleSummary) {}
    /// The lint of module `key` (the file on disk) has its tree, and made no summary of it
    /// when `summary_deferred` ([`Self::may_be_asked`] said no). For the loader's count of
    /// the files a run parsed.
    fn linted(&self, _key: &str, _summary_deferred: bool) {}
    /// May a module other than `key` ask for `key`'s summary? A loader that knows which
    /// files write which words can say no for a module whose name no other file writes in
    /// an import statement: few questions reach it (who calls a function of a module it
    /// imports is one, rarely asked). Its lint then makes its summary only if it asks for
    /// it itself. A wrong no costs a parse (the summary is read from the file when asked),
    /// never a finding.
    fn may_be_asked(&self, _key: &str) -> bool {
        true
    }
    /// The tree of module `key` if the loader parsed exactly `text` for its summary and
    /// kept the tree for the module's own lint: handed over once, so a file of the run is
    /// parsed once however its summary and its lint are ordered (and walked once: the
    /// tree comes with the named nodes its summary was made from).
    fn take_tree(&self, _key: &str, _text: &str) -> Option<crate::WalkedTree> {
        None
    }
    /// Parses `text`, the linted module `key` as it is on disk, for its lint, and makes
    /// its summary from that tree, holding the module all the while: a question for its
    /// summary in the meantime waits for this parse rather than reading and parsing the
    /// file again (before, a lint linted while another lint asked for its module parsed
    /// it twice: 104 files, 3.3 MB of text, on the engine tree). When a question is
    /// parsing the module already, the lint waits for it and takes the tree it kept
    /// ([`Self::expect_tree`]). `None` (the lint parses the text itself) when the
    /// summary was made already, when the question's tree could not be kept, or when the
    /// loader keeps no summaries. Ends the wait [`Self::expect_tree`] began.
    fn parse_seeding(&self, _key: &str, _text: &str) -> Option<crate::WalkedTree> {
        None
    }
    /// The lint of module `key`, which found no tree kept for it ([`Self::take_tree`]),
    /// is about to parse its file: a tree parsed for the module's summary from now on is
    /// kept for it again, until [`Self::take_tree`] (or [`Self::parse_seeding`], which
    /// calls it) hands it over. Without it, a question that ends its parse while the lint
    /// decides whether to make the summary dropped its tree (50 files of the engine tree).
    fn expect_tree(&self, _key: &str) {}
    /// The answer kept for the class or function `definition` (an opaque key), if any:
    /// hundreds of the lints of a run ask what the same few classes and functions are.
    fn symbol_answer(&self, _definition: &str) -> Option<Arc<SymbolAnswer>> {
        None
    }
    /// Keeps `answer` for `definition` until a module changes. A loader that keeps none
    /// ignores it.
    fn remember_symbol_answer(&self, _definition: String, _answer: Arc<SymbolAnswer>) {}
}

/// Does a project symbol change what the rules find where it is used: a network class or
/// factory, or something whose methods or itself store arguments beyond the call?
pub fn symbol_matters(symbol: &Symbol) -> bool {
    match symbol {
        Symbol::Class { is_module, methods, .. } => *is_module || methods.iter().any(|m| !m.stores.is_empty()),
        Symbol::Function { returns_module, summary, returned_elements, returns } => {
            *returns_module || returns.is_some() || !summary.stores.is_empty() || returned_elements.iter().any(Option::is_some)
        }
        Symbol::Module => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_project_knows_nothing() {
        let source = "import nets\n";
        let tree = crate::parse(source).tree;
        let index: &dyn ProjectIndex = &NoProject;
        assert_eq!(index.symbol("nets.Net"), None);
        assert!(index.external_calls("train").is_empty());
        assert!(index.external_call_sites("train").is_empty());
        assert!(!index.is_project_module("nets"));
        assert!(index.parsed_tree(source).is_none());
        index.seed(&crate::WalkedTree::walk(tree), source);
        assert!(index.is_empty());
    }

    /// An index that knows only the gradient context of two calls.
    struct TwoCalls;

    impl ProjectIndex for TwoCalls {
        fn symbol(&self, _qualified: &str) -> Option<Symbol> {
            None
        }
        fn external_calls(&self, _function: &str) -> Vec<bool> {
            vec![true, false]
        }
        fn is_project_module(&self, _module: &str) -> bool {
            false
        }
    }

    #[test]
    fn call_sites_default_to_a_kept_result() {
        assert_eq!(TwoCalls.external_call_sites("evaluate"), [(true, true), (false, true)], "unknown: the result may be kept");
        assert!(!TwoCalls.is_empty());
    }

    #[test]
    fn which_symbols_matter_to_the_rules() {
        let storing = FunctionSummary {
            name: "update".to_owned(),
            stores: vec![super::super::StoredArgument { position: 0, name: "val".to_owned(), kind: super::super::StoreKind::Appends, into: "self.v".to_owned() }],
            ..FunctionSummary::default()
        };
        let class = |is_module, methods: Vec<FunctionSummary>| Symbol::Class { is_module, methods: methods.into(), pretrained: None, submodules: Arc::new([]), may_freeze: false, holds_no_parameters: false };
        let function = |returns_module, summary, returned_elements: Vec<Option<Returned>>| Symbol::Function { returns_module, summary: Arc::new(summary), returned_elements: returned_elements.into(), returns: None };
        assert!(symbol_matters(&class(true, Vec::new())), "a network class");
        assert!(symbol_matters(&class(false, vec![storing.clone()])), "a class whose method stores its argument");
        assert!(!symbol_matters(&class(false, vec![FunctionSummary::default()])));
        assert!(symbol_matters(&function(true, FunctionSummary::default(), Vec::new())), "a factory");
        assert!(symbol_matters(&function(false, storing, Vec::new())));
        assert!(symbol_matters(&function(false, FunctionSummary::default(), vec![None, Some(Returned::Optimizer)])));
        assert!(!symbol_matters(&function(false, FunctionSummary::default(), vec![None])));
        assert!(!symbol_matters(&Symbol::Module));
    }
}
