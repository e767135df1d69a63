//! The resolution of names through the project's modules: [`ProjectResolver`], the
//! [`ProjectIndex`] of one linted module over a [`ModuleLoader`]. It follows imports,
//! re-exports, star imports, base classes and factories lazily, cuts cycles, finds the
//! calls of the linted module's functions in other modules, and records which modules it
//! read.
//!
//! Asks the loader for module keys and [`ModuleSummary`]s (never reads a file itself),
//! the summaries' lookups, `crate::library` (what a library name builds) and
//! `crate::lexicon` (a loss class by its name).

use rustc_hash::FxHashSet as HashSet;
use std::sync::{Arc, Mutex};

use super::index::{ModuleLoader, ProjectIndex, Returned, Symbol, SymbolAnswer};
use super::summary::{FunctionSummary, ModuleSummary};
use crate::library::{library_module_class, library_module_factory};

/// What a name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Class(String, String),
    Function(String, String),
    Module(String),
    /// Not the project's: the fully qualified library name (`torch.nn.Module`).
    External(String),
}

impl Target {
    /// The key of a class or function's [`SymbolAnswer`] with the loader.
    fn definition_key(&self) -> Option<String> {
        match self {
            Target::Class(m, n) => Some(format!("class\0{m}\0{n}")),
            Target::Function(m, n) => Some(format!("function\0{m}\0{n}")),
            Target::Module(_) | Target::External(_) => None,
        }
    }
}

/// The modules an answer to keep rests on, noted while it is worked out.
#[derive(Default)]
struct AnswerReads {
    read: Vec<String>,
    /// It rests on the linted module itself: read from the lint's own tree or text (not
    /// the file's summary), and the lint may be of an unsaved buffer. Not kept.
    rests_on_own_module: bool,
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
    /// The questions of who calls a function of another module: (its module, the name
    /// whose candidate callers were listed), in the order asked.
    callers_asked: Mutex<Vec<(String, String)>>,
    /// The linted text is the file's text on disk (see [`ModuleLoader::seed`]).
    seeds: bool,
    /// The folders the linted module puts on `sys.path`, read from its tree when the
    /// linter hands it over ([`ProjectIndex::seed`]; a notebook has no summary of its own).
    own_import_dirs: Mutex<Option<Vec<String>>>,
    /// The tree [`ProjectIndex::note_source`] parsed to read those folders before the
    /// lint's own parse, with the text it is of: handed to the lint of that text
    /// ([`ProjectIndex::parsed_tree`]), which would otherwise parse it again.
    noted_tree: Mutex<Option<(String, crate::WalkedTree)>>,
    /// The linted module's tree and text, when its summary was not made as it was seeded
    /// (no other module may ask for it, [`ModuleLoader::may_be_asked`]): made from them
    /// if the lint asks for its own module's summary.
    own_tree: Mutex<Option<(tree_sitter::Tree, String)>>,
    own_summary: std::sync::OnceLock<Arc<ModuleSummary>>,
    /// Of that summary, the star imports alone (what most of the lint's questions of its
    /// own module need), read from the kept tree.
    own_star_imports: std::sync::OnceLock<Vec<String>>,
    /// The modules found for imports, by importing module and dotted name: a lint asks the
    /// same again and again, and the loader's own memo first builds a key of the importing
    /// folder, the name and the `sys.path` folders (the folders cloned from a summary).
    /// The linted module's own questions are kept only once its folders are known.
    modules_found: Mutex<rustc_hash::FxHashMap<String, rustc_hash::FxHashMap<String, Option<String>>>>,
    /// The lint's tree is one the loader parsed and made the module's summary from
    /// (before the lint, or for it: [`ModuleLoader::parse_seeding`]): that summary exists.
    own_tree_from_loader: std::sync::atomic::AtomicBool,
    /// Whether the lint makes no summary of its module ([`Self::summary_deferred`]), once
    /// decided.
    summary_deferred: std::sync::OnceLock<bool>,
    /// While a [`SymbolAnswer`] for the loader is worked out: the modules it reads.
    answer_reads: Mutex<Option<AnswerReads>>,
}

impl<'a> ProjectResolver<'a> {
    pub fn new(loader: &'a dyn ModuleLoader, from: impl Into<String>) -> Self {
        ProjectResolver {
            loader,
            from: from.into(),
            read: Mutex::new(Vec::new()),
            callers_asked: Mutex::new(Vec::new()),
            seeds: false,
            own_import_dirs: Mutex::new(None),
            noted_tree: Mutex::new(None),
            own_tree: Mutex::new(None),
            own_summary: std::sync::OnceLock::new(),
            own_star_imports: std::sync::OnceLock::new(),
            modules_found: Mutex::new(Default::default()),
            own_tree_from_loader: std::sync::atomic::AtomicBool::new(false),
            summary_deferred: std::sync::OnceLock::new(),
            answer_reads: Mutex::new(None),
        }
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

    /// The questions of who calls a function of another module that this index asked:
    /// (the function's module, the name whose candidate callers were listed). Their answers
    /// rest on the files that mention the name, not only on the modules read: a file that
    /// starts calling the function is a caller no answer read before.
    pub fn callers_asked(&self) -> Vec<(String, String)> {
        self.callers_asked.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// [`ModuleLoader::candidate_callers`], recorded in [`Self::callers_asked`].
    fn candidate_callers(&self, key: &str, name: &str) -> Vec<String> {
        {
            let mut asked = self.callers_asked.lock().unwrap_or_else(|e| e.into_inner());
            if !asked.iter().any(|(k, n)| k == key && n == name) {
                asked.push((key.to_owned(), name.to_owned()));
            }
        }
        self.loader.candidate_callers(key, name)
    }

    /// The module `dotted` as module `m` imports it, through the folders `m` puts on
    /// `sys.path` too.
    fn resolve_module(&self, m: &str, dotted: &str) -> Option<String> {
        if m == self.from {
            self.note_answer_read(m);
        }
        if let Some(found) = self.modules_found.lock().unwrap_or_else(|e| e.into_inner()).get(m).and_then(|f| f.get(dotted)) {
            return found.clone();
        }
        let mut settled = true;
        let dirs = if dotted.starts_with('.') {
            Vec::new()
        } else if m == self.from {
            // Never the linted module's summary: asking for it before its lint would parse
            // the file a second time. Its folders come from its text or tree.
            let own = self.own_import_dirs.lock().unwrap_or_else(|e| e.into_inner()).clone();
            settled = own.is_some();
            own.unwrap_or_default()
        } else {
            self.loader.summary(m).map(|s| s.import_dirs.clone()).unwrap_or_default()
        };
        let found = self.loader.resolve_module_in(m, dotted, &dirs);
        if settled {
            let mut modules_found = self.modules_found.lock().unwrap_or_else(|e| e.into_inner());
            modules_found.entry(m.to_owned()).or_default().insert(dotted.to_owned(), found.clone());
        }
        found
    }

    fn summary(&self, key: &str) -> Option<Arc<ModuleSummary>> {
        self.record_read(key);
        self.loaded(key)
    }

    /// Records module `key` in [`Self::modules_read`] (not the linted module itself).
    fn record_read(&self, key: &str) {
        if key != self.from {
            let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
            if !read.iter().any(|k| k == key) {
                read.push(key.to_owned());
            }
        }
    }

    /// Does this lint make no summary of its module? Not when the summary
    /// exists already (the lint's tree is the loader's); else when no other module is
    /// likely to import it ([`ModuleLoader::may_be_asked`]). A module that imports the
    /// project's modules may still be asked what it calls (who calls a function of a
    /// module it imports), but rarely is: on the engine tree 147 of 3,360 summaries were
    /// read for their calls, and the 657 made only for that cost more than the 7 parses
    /// of the modules asked after their lints had dropped their trees. Decided once,
    /// before the lint parses ([`ProjectIndex::parse`]) or when it seeds.
    fn summary_deferred(&self) -> bool {
        *self.summary_deferred.get_or_init(|| !self.own_tree_from_loader.load(std::sync::atomic::Ordering::Relaxed) && !self.loader.may_be_asked(&self.from))
    }

    /// The modules the linted module star-imports: from its kept tree while its summary
    /// is not made, else from the summary.
    fn own_star_imports(&self) -> Option<Vec<String>> {
        if self.own_summary.get().is_none() {
            if let Some((tree, text)) = self.own_tree.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                return Some(self.own_star_imports.get_or_init(|| ModuleSummary::star_imports_of(tree.root_node(), text)).clone());
            }
        }
        self.loaded(&self.from).map(|s| s.star_imports.clone())
    }

    /// The summary of module `key` (not recorded as read): the linted module's own from
    /// its tree when it was kept for that ([`ProjectIndex::seed`]), else the loader's.
    fn loaded(&self, key: &str) -> Option<Arc<ModuleSummary>> {
        self.note_answer_read(key);
        if key == self.from {
            if let Some(own) = self.own_summary.get() {
                return Some(own.clone());
            }
            let own_tree = self.own_tree.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((tree, text)) = own_tree.as_ref() {
                let own = self.own_summary.get_or_init(|| Arc::new(ModuleSummary::new(tree, text)));
                // Shared now that it is made: another lint may yet ask.
                self.loader.seed(&self.from, text, &|| (**own).clone());
                return Some(own.clone());
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
        // The first `k` parts with the dots before them, as written: a prefix of `qualified`
        // (asked for every prefix of every name resolved, so not built anew).
        let prefix = |k: usize| &qualified[..dots + parts[..k].iter().map(|p| p.len()).sum::<usize>() + k.saturating_sub(1)];
        for k in (min..=parts.len()).rev() {
            let module = prefix(k);
            let Some(key) = self.resolve_module(from, module) else { continue };
            // `pkg.Name` where `pkg/__init__.py` does `from .Name import Name`: the package's
            // attribute is the class it bound, not the submodule of the same name.
            if k == parts.len() && k >= 1 && (k >= 2 || dots > 0) {
                if let Some(parent_key) = self.resolve_module(from, prefix(k - 1)) {
                    if parent_key != key {
                        if let Some(bound) = self.lookup_in_module(&parent_key, parts[k - 1], &mut seen.clone()) {
                            if !matches!(bound, Target::Module(_)) {
                                return Some(bound);
                            }
                        }
                    }
                }
            }
            let mut target = Target::Module(key);
            for name in &parts[k..] {
                target = match target {
                    Target::Module(m) => self.lookup_in_module(&m, name, seen)?,
                    Target::Class(m, class) => self.method_on_class(m, class, name)?,
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
                    Target::Class(m, class) => self.method_on_class(m, class, name)?,
                    _ => return None,
                };
            }
        }
        Some(target)
    }

    /// `Class.name` where `name` is a method the project class defines, called on the class
    /// itself (a factory classmethod: `Net.from_config(cfg)`): that method, as a function
    /// named `Class.name` (see [`ModuleSummary::function`]).
    fn method_on_class(&self, m: String, class: String, name: &str) -> Option<Target> {
        let function = format!("{class}.{name}");
        self.summary(&m)?.function(&function)?;
        Some(Target::Function(m, function))
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
            let Some(key) = self.resolve_module(m, star) else { continue };
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

    /// Does class `name` of module `m` derive, through the project's classes, from one of
    /// the library classes `bases`?
    fn class_derives_from_library(&self, m: &str, name: &str, bases: &[&str], depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let Some(summary) = self.summary(m) else { return false };
        let Some(class) = summary.class(name) else { return false };
        class.bases.iter().any(|base| match self.resolve_spelled(m, base, &mut HashSet::default()) {
            Some(Target::External(q)) => bases.contains(&q.as_str()),
            Some(Target::Class(bm, bn)) if (bm.as_str(), bn.as_str()) != (m, name) => self.class_derives_from_library(&bm, &bn, bases, depth + 1),
            _ => false,
        })
    }

    /// Does class `name` of module `m` derive `torch.nn.Module`?
    /// The submodules class `name` of module `m` sets (attributes it sets to a network it
    /// builds: `self.encoder = nn.Sequential(...)`, a class of the project deriving
    /// `Module`), and those of its project bases; and the methods it inherits from those
    /// bases, added to `methods` where no method of that name is there yet (a subclass's
    /// own method hides its base's).
    fn inherited_members(&self, m: &str, name: &str, methods: &mut Vec<FunctionSummary>, submodules: &mut Vec<String>, seen: &mut HashSet<(String, String)>, depth: usize) {
        if depth > MAX_DEPTH || !seen.insert((m.to_owned(), name.to_owned())) {
            return;
        }
        let Some(summary) = self.summary(m) else { return };
        let Some(class) = summary.class(name) else { return };
        if depth > 0 {
            for method in &class.methods {
                if !methods.iter().any(|known| known.name == method.name) {
                    methods.push(method.clone());
                }
            }
        }
        for (attribute, callee) in &class.attributes {
            if !submodules.contains(attribute) && self.callee_returns_module(m, callee, &mut HashSet::default(), 1) {
                submodules.push(attribute.clone());
            }
        }
        for base in &class.bases {
            if let Some(Target::Class(bm, bn)) = self.resolve_spelled(m, base, &mut HashSet::default()) {
                self.inherited_members(&bm, &bn, methods, submodules, seen, depth + 1);
            }
        }
    }

    fn class_is_module(&self, m: &str, name: &str, seen: &mut HashSet<(String, String)>, depth: usize) -> bool {
        if depth > MAX_DEPTH || !seen.insert((m.to_owned(), format!("class {name}"))) {
            return false;
        }
        let Some(summary) = self.summary(m) else { return false };
        let Some(class) = summary.class(name) else { return false };
        class.bases.iter().any(|base| match self.resolve_spelled(m, base, &mut HashSet::default()) {
            Some(Target::Class(bm, bn)) => self.class_is_module(&bm, &bn, seen, depth + 1),
            Some(Target::External(q)) => library_module_class(&q),
            Some(_) => false,
            // Not bound in the module at all: judge the name as spelled.
            None => library_module_class(base),
        })
    }

    /// Does class `name` of module `m` hold no parameter: it stores none (see
    /// [`ClassSummary::parameter_free`](super::ClassSummary)), every call it stores builds
    /// a library value without parameters or an instance of such a class of the project,
    /// and its bases are `torch.nn.Module` or such classes?
    fn class_holds_no_parameters(&self, m: &str, name: &str, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let Some(summary) = self.summary(m) else { return false };
        let Some(class) = summary.class(name) else { return false };
        let Some(callees) = &class.parameter_free else { return false };
        let holds_none = |spelled: &str, base: bool| match self.resolve_spelled(m, spelled, &mut HashSet::default()) {
            Some(Target::External(q)) if base => crate::library::is_the_module_base(&q),
            Some(Target::External(q)) => crate::library::stored_value_holds_no_parameters(&q),
            Some(Target::Class(cm, cn)) if (cm.as_str(), cn.as_str()) != (m, name) => {
                self.class_is_module(&cm, &cn, &mut HashSet::default(), depth + 1) && self.class_holds_no_parameters(&cm, &cn, depth + 1)
            }
            _ => false,
        };
        !class.bases.is_empty() && class.bases.iter().all(|b| holds_none(b, true)) && callees.iter().all(|c| holds_none(c, false))
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
        match self.resolve_spelled(m, callee, &mut HashSet::default()) {
            Some(Target::Class(cm, cn)) => self.class_is_module(&cm, &cn, &mut HashSet::default(), depth + 1),
            Some(Target::Function(fm, fname)) => self.function_returns_module(&fm, &fname, seen, depth + 1),
            Some(Target::External(q)) => library_module_factory(&q),
            _ => false,
        }
    }

    /// Notes that module `key` is read, when an answer to keep is being worked out.
    fn note_answer_read(&self, key: &str) {
        if let Some(reads) = self.answer_reads.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            if key == self.from {
                reads.rests_on_own_module = true;
            } else if !reads.read.iter().any(|k| k == key) {
                reads.read.push(key.to_owned());
            }
        }
    }

    /// What `target` is: the loader's kept answer (its reads recorded as this lint's),
    /// else worked out here and handed to the loader to keep, unless it rests on the
    /// linted module itself.
    fn symbol_of(&self, target: Target) -> Option<Symbol> {
        let Some(key) = target.definition_key() else { return self.work_out_symbol(target) };
        if let Some(answer) = self.loader.symbol_answer(&key) {
            for k in &answer.read {
                self.record_read(k);
                self.note_answer_read(k);
            }
            return answer.symbol.clone();
        }
        {
            let mut reads = self.answer_reads.lock().unwrap_or_else(|e| e.into_inner());
            if reads.is_some() {
                // Worked out inside another answer: that one keeps what it read.
                drop(reads);
                return self.work_out_symbol(target);
            }
            *reads = Some(AnswerReads::default());
        }
        let symbol = self.work_out_symbol(target);
        let reads = self.answer_reads.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
        if !reads.rests_on_own_module {
            self.loader.remember_symbol_answer(key, Arc::new(SymbolAnswer { symbol: symbol.clone(), read: reads.read }));
        }
        symbol
    }

    fn work_out_symbol(&self, target: Target) -> Option<Symbol> {
        match target {
            Target::Class(m, n) => {
                let is_module = self.class_is_module(&m, &n, &mut HashSet::default(), 0);
                let summary = self.summary(&m)?;
                let class = summary.class(&n)?;
                let pretrained = class.pretrained_calls.iter().find_map(|call| {
                    let qualified = match self.resolve_spelled(&m, &call.callee, &mut HashSet::default()) {
                        Some(Target::External(q)) => q,
                        // `from_pretrained` of a class memlint cannot resolve: judged as spelled.
                        None => call.callee.clone(),
                        Some(_) => return None,
                    };
                    call.loads_pretrained(&qualified).then(|| call.callee.clone())
                });
                // Attributes the class sets to a network it builds (`self.encoder =
                // nn.Sequential(...)`, a class of the project deriving `Module`).
                let mut methods = class.methods.clone();
                let mut submodules: Vec<String> = Vec::new();
                self.inherited_members(&m, &n, &mut methods, &mut submodules, &mut HashSet::default(), 0);
                let holds_no_parameters = is_module && self.class_holds_no_parameters(&m, &n, 0);
                Some(Symbol::Class { is_module, methods: methods.into(), pretrained, submodules: submodules.into(), may_freeze: class.may_freeze, holds_no_parameters })
            }
            Target::Function(m, n) => {
                let returns_module = self.function_returns_module(&m, &n, &mut HashSet::default(), 0);
                let summary = self.summary(&m)?.function(&n)?.clone();
                let classify = |callee: &str| -> Option<Returned> {
                    if self.callee_returns_module(&m, callee, &mut HashSet::default(), 1) {
                        if let Some(Target::Class(cm, cn)) = self.resolve_spelled(&m, callee, &mut HashSet::default()) {
                            if self.summary(&cm).and_then(|s| s.class(&cn).map(|c| c.may_freeze)).unwrap_or(false) {
                                return Some(Returned::FrozenNetwork);
                            }
                        }
                        if let Some(Target::External(q)) = self.resolve_spelled(&m, callee, &mut HashSet::default()) {
                            if crate::library::call_model(&q) == Some(crate::library::Call::BuildsLoss) {
                                return Some(Returned::Loss);
                            }
                        }
                        let last = callee.rsplit('.').next().unwrap_or(callee);
                        return Some(if crate::lexicon::class_name_says_loss(last) { Returned::Loss } else { Returned::Network });
                    }
                    match self.resolve_spelled(&m, callee, &mut HashSet::default()) {
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
                };
                let returned_elements = summary.returns_elements.iter().map(|callee| classify(callee.as_ref()?)).collect();
                // One kind for every returned call (`return nn.CrossEntropyLoss()`).
                let kinds: Vec<Option<Returned>> = summary.returns_calls.iter().map(|c| classify(c)).collect();
                let returns = match kinds.first() {
                    Some(Some(first)) if kinds.iter().all(|k| *k == Some(*first)) => Some(*first),
                    _ => None,
                };
                Some(Symbol::Function { returns_module, summary: Arc::new(summary), returned_elements, returns })
            }
            Target::Module(_) => Some(Symbol::Module),
            Target::External(_) => None,
        }
    }
}

impl ProjectIndex for ProjectResolver<'_> {
    fn class_derives_from(&self, qualified: &str, bases: &[&str]) -> bool {
        match self.resolve_qualified(&self.from, qualified, &mut HashSet::default()) {
            Some(Target::Class(m, n)) => self.class_derives_from_library(&m, &n, bases, 0),
            _ => false,
        }
    }

    fn symbol(&self, qualified: &str) -> Option<Symbol> {
        let mut seen = HashSet::default();
        // A plain name (no dots) is one the module does not bind: look in its star imports.
        if !qualified.contains('.') {
            for star in &self.own_star_imports()? {
                let Some(key) = self.resolve_module(&self.from, star) else { continue };
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
        self.resolve_module(&self.from, module).is_some()
    }

    fn star_imported_external(&self, name: &str) -> Option<String> {
        let mut seen = HashSet::default();
        for star in &self.own_star_imports()? {
            let Some(key) = self.resolve_module(&self.from, star) else { continue };
            let Some(s) = self.summary(&key) else { continue };
            if s.exports_by_star(name) {
                match self.lookup_in_module(&key, name, &mut seen) {
                    Some(Target::External(q)) => return Some(q),
                    Some(_) => return None,
                    None => {}
                }
            }
        }
        None
    }

    fn note_source(&self, source: &str) {
        let mut own = self.own_import_dirs.lock().unwrap_or_else(|e| e.into_inner());
        if own.is_none() {
            // Rare: parse only a text that touches `sys.path`, and keep the tree for the
            // lint (a tree the project kept for it serves here first).
            *own = Some(if source.contains("sys.path") {
                let tree = self.loader_tree(source).unwrap_or_else(|| crate::WalkedTree::walk(crate::parse_with(source, None)));
                let dirs = super::syntax::sys_path_dirs(source, tree.nodes());
                *self.noted_tree.lock().unwrap_or_else(|e| e.into_inner()) = Some((source.to_owned(), tree));
                dirs
            } else {
                Vec::new()
            });
        }
    }

    fn seed(&self, walked: &crate::WalkedTree, source: &str) {
        let nodes = walked.nodes();
        *self.own_import_dirs.lock().unwrap_or_else(|e| e.into_inner()) = Some(super::syntax::sys_path_dirs(source, nodes));
        // The folders just read are the ones the linted module's imports are found through.
        self.modules_found.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.from);
        if self.seeds && self.from.ends_with(".py") {
            // A summary made from this very tree (the loader's) exists already.
            let from_loader = self.own_tree_from_loader.load(std::sync::atomic::Ordering::Relaxed);
            // (A tree the loader kept after the lint decided not to make the summary is
            // one it made the summary from.)
            let deferred = !from_loader && self.summary_deferred();
            self.loader.linted(&self.from, deferred);
            if deferred {
                // A tree is a counted reference: keeping it costs no copy.
                *self.own_tree.lock().unwrap_or_else(|e| e.into_inner()) = Some((walked.tree().clone(), source.to_owned()));
            } else if !from_loader {
                self.loader.seed(&self.from, source, &|| ModuleSummary::walked(nodes, source));
            }
        }
    }

    fn parse(&self, source: &str) -> crate::WalkedTree {
        if self.seeds && self.from.ends_with(".py") {
            // A question that parses the module while this lint decides keeps its tree.
            self.loader.expect_tree(&self.from);
            if self.summary_deferred() {
                if let Some(tree) = self.loader_tree(source) {
                    return tree;
                }
            } else if let Some(tree) = self.loader.parse_seeding(&self.from, source) {
                // The summary is made from this tree (or the tree it was made from): `seed`
                // makes none.
                self.own_tree_from_loader.store(true, std::sync::atomic::Ordering::Relaxed);
                return tree;
            }
        }
        crate::WalkedTree::walk(crate::parse_with(source, None))
    }

    fn parsed_tree(&self, source: &str) -> Option<crate::WalkedTree> {
        let noted = self.noted_tree.lock().unwrap_or_else(|e| e.into_inner()).take().filter(|(text, _)| text == source).map(|(_, tree)| tree);
        // Asked either way, so that the loader keeps no tree for this lint.
        let kept = self.loader_tree(source);
        noted.or(kept)
    }

    fn external_calls(&self, function: &str) -> Vec<bool> {
        self.external_call_sites(function).into_iter().map(|(disabled, _)| disabled).collect()
    }

    fn external_call_sites(&self, function: &str) -> Vec<(bool, bool)> {
        self.call_sites_elsewhere(&self.from.clone(), function)
    }

    fn method_call_sites(&self, class: &str, method: &str) -> Vec<(bool, bool)> {
        match self.resolve_qualified(&self.from, class, &mut HashSet::default()) {
            // Only a method the class defines itself: the calls of an inherited one are
            // looked for as calls of its base's.
            Some(Target::Class(m, n)) if m != self.from && self.summary(&m).and_then(|s| s.class(&n).map(|c| c.methods.iter().any(|f| f.name == method))).unwrap_or(false) => {
                self.call_sites_elsewhere(&m, &format!("{n}.{method}"))
            }
            _ => Vec::new(),
        }
    }
}

impl ProjectResolver<'_> {
    /// The tree the loader parsed `source` into for its summary, taken from it once.
    /// Only the text on disk (what seeds the summary) is what the loader parsed.
    fn loader_tree(&self, source: &str) -> Option<crate::WalkedTree> {
        let tree = if self.seeds && self.from.ends_with(".py") { self.loader.take_tree(&self.from, source) } else { None };
        if tree.is_some() {
            self.own_tree_from_loader.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        tree
    }

    /// The calls of the function (or `Class.method`) `function` of module `key` in the
    /// project's other modules: (gradients disabled, result kept) for each.
    fn call_sites_elsewhere(&self, key: &str, function: &str) -> Vec<(bool, bool)> {
        // `Class.method`: calls of the method on instances of the class.
        let (class, name) = match function.rsplit_once('.') {
            Some((class, method)) => (Some(class), method),
            None => (None, function),
        };
        let mut found = Vec::new();
        for caller in self.candidate_callers(key, class.unwrap_or(function)) {
            if caller == key || !self.loader.may_call(&caller, name) {
                continue;
            }
            let Some(summary) = self.loaded(&caller) else { continue };
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
                let mut seen = HashSet::default();
                let resolve = |callee: &str, seen: &mut HashSet<(String, String)>| {
                    if callee.contains('.') {
                        self.resolve_qualified(&caller, callee, seen)
                    } else {
                        self.lookup_star(&caller, callee, seen)
                    }
                };
                let hit = match class {
                    Some(class) => call.callee.rsplit_once('.').is_some_and(|(owner, _)| {
                        resolve(owner, &mut seen) == Some(Target::Class(key.to_owned(), class.to_owned()))
                    }),
                    None => resolve(&call.callee, &mut seen) == Some(Target::Function(key.to_owned(), function.to_owned())),
                };
                if hit {
                    found.push((call.grad_disabled, call.result_kept));
                }
            }
        }
        // A method may also be called on a receiver of unknown class in a module that
        // imports its module: such a call counts as one whose result may be kept (and never
        // as one with gradients enabled: it is not known to be this method's).
        if class.is_some() {
            for caller in self.candidate_callers(key, name) {
                if caller == key || !self.loader.may_call(&caller, name) {
                    continue;
                }
                let Some(summary) = self.loaded(&caller) else { continue };
                let unknown = format!("?.{name}");
                for call in summary.calls.iter().filter(|c| c.callee == unknown) {
                    found.push((true, call.result_kept));
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
            let Some(key) = self.resolve_module(m, star) else { continue };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A flat project in memory: module `nets` is the file `nets.py`.
    struct Memory(Vec<(&'static str, &'static str)>);

    impl ModuleLoader for Memory {
        fn resolve_module(&self, _from: &str, dotted: &str) -> Option<String> {
            let key = format!("{}.py", dotted.trim_start_matches('.'));
            self.0.iter().any(|(k, _)| *k == key).then_some(key)
        }
        fn summary(&self, key: &str) -> Option<Arc<ModuleSummary>> {
            let (_, text) = self.0.iter().find(|(k, _)| *k == key)?;
            Some(Arc::new(ModuleSummary::new(&crate::parse(text).tree, text)))
        }
        fn candidate_callers(&self, _key: &str, name: &str) -> Vec<String> {
            self.0.iter().filter(|(_, t)| t.contains(name)).map(|(k, _)| k.to_string()).collect()
        }
    }

    const NETS: &str = "import torch.nn as nn\nfrom torch.optim import AdamW\n\n\
        class Encoder(nn.Module):\n    def __init__(self):\n        super().__init__()\n\
        \n        self.body = nn.Sequential(nn.Linear(2, 2))\n        self.head = Head()\n        self.steps = 0\n\
        \n    def encode(self, x):\n        return self.body(x)\n\n\
        class Head(nn.Module):\n    pass\n\n\
        def build(cfg):\n    model = Encoder()\n    return model.cuda()\n\n\
        def setup():\n    model = Encoder()\n    opt = AdamW(model.parameters())\n    return model, opt\n\n\
        def to_device(model, device):\n    return model.to(device)\n\n\
        def step(loss):\n    loss.backward()\n";

    const TRAIN: &str = "import torch\nfrom nets import Encoder, build, step\n\n\
        def run(batch):\n    model = build(None)\n    with torch.no_grad():\n        step(model(batch))\n\
        \n    out = step(model(batch))\n    enc = Encoder()\n    enc.encode(batch)\n    return out\n";

    fn project() -> Memory {
        Memory(vec![("nets.py", NETS), ("train.py", TRAIN), ("app.py", "from nets import *\n")])
    }

    #[test]
    fn symbols_of_a_two_module_project() {
        let project = project();
        let train = ProjectResolver::new(&project, "train.py");
        match train.symbol("nets.Encoder") {
            Some(Symbol::Class { is_module, methods, pretrained, submodules, .. }) => {
                assert!(is_module, "derives nn.Module through the import of torch.nn");
                assert_eq!(methods.len(), 2);
                assert_eq!(pretrained, None);
                let mut submodules = submodules.to_vec();
                submodules.sort();
                assert_eq!(submodules, ["body", "head"], "a library network and a class of the project; `steps` is not one");
            }
            other => panic!("Encoder is a class: {other:?}"),
        }
        let function = |name: &str| match train.symbol(name) {
            Some(Symbol::Function { returns_module, summary, returned_elements, .. }) => (returns_module, summary, returned_elements),
            other => panic!("{name} is a function: {other:?}"),
        };
        assert!(function("nets.build").0, "a factory: returns an Encoder");
        let (returns_module, _, elements) = function("nets.setup");
        assert!(!returns_module);
        assert_eq!(*elements, [Some(Returned::Network), Some(Returned::Optimizer)]);
        let (returns_module, summary, _) = function("nets.to_device");
        assert!(!returns_module);
        assert_eq!(summary.returns_parameter, Some(0));
        assert!(function("nets.step").1.backprops);
        assert_eq!(train.symbol(".nets"), Some(Symbol::Module));
        assert_eq!(train.symbol("nets"), None, "a plain name is looked up in the star imports only");
        assert_eq!(train.symbol("torch.nn.Linear"), None, "a library's name");
        assert!(train.is_project_module("nets") && !train.is_project_module("torch"));
        assert_eq!(train.modules_read(), ["nets.py"]);
        // A name the module does not bind, through its star import.
        let app = ProjectResolver::new(&project, "app.py");
        assert!(matches!(app.symbol("Head"), Some(Symbol::Class { is_module: true, .. })));
        assert_eq!(app.symbol("Missing"), None);
    }

    #[test]
    fn calls_from_other_modules() {
        let project = project();
        let nets = ProjectResolver::new(&project, "nets.py");
        assert_eq!(nets.external_call_sites("step"), [(true, false), (false, true)], "under no_grad and dropped; then returned");
        assert_eq!(nets.external_calls("step"), [true, false]);
        assert_eq!(nets.external_call_sites("Encoder.encode"), [(false, false)], "a method, on a name holding an Encoder");
        assert!(nets.external_calls("to_device").is_empty());
        assert_eq!(nets.modules_read(), ["train.py"]);
    }

    /// A loader that finds `lib` only through a `sys.path` folder, and counts the questions.
    struct Counting(std::sync::atomic::AtomicUsize);

    impl ModuleLoader for Counting {
        fn resolve_module(&self, from: &str, dotted: &str) -> Option<String> {
            self.resolve_module_in(from, dotted, &[])
        }
        fn resolve_module_in(&self, _from: &str, dotted: &str, import_dirs: &[String]) -> Option<String> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (dotted == "lib" && import_dirs.iter().any(|d| d == "../vendor")).then(|| "../vendor/lib.py".to_owned())
        }
        fn summary(&self, _key: &str) -> Option<Arc<ModuleSummary>> {
            None
        }
        fn candidate_callers(&self, _key: &str, _name: &str) -> Vec<String> {
            Vec::new()
        }
    }

    #[test]
    fn a_lint_asks_the_loader_where_an_import_leads_once() {
        let loader = Counting(Default::default());
        let asked = || loader.0.load(std::sync::atomic::Ordering::Relaxed);
        let train = ProjectResolver::new(&loader, "train.py");
        // Before the lint's folders are known, its own questions are asked every time.
        assert_eq!(train.resolve_module("train.py", "lib"), None);
        assert_eq!(train.resolve_module("train.py", "lib"), None);
        assert_eq!(asked(), 2);
        // Once they are, the answer goes through them, and is asked once.
        let script = "import sys\nsys.path.append('../vendor')\nimport lib\n";
        let tree = crate::WalkedTree::walk(crate::parse_with(script, None));
        train.seed(&tree, script);
        assert_eq!(train.resolve_module("train.py", "lib").as_deref(), Some("../vendor/lib.py"));
        assert_eq!(train.resolve_module("train.py", "lib").as_deref(), Some("../vendor/lib.py"));
        assert_eq!(asked(), 3);
        // Another module's question (its folders come from its summary): asked once too.
        assert_eq!(train.resolve_module("other.py", "lib"), None);
        assert_eq!(train.resolve_module("other.py", "lib"), None);
        assert_eq!(asked(), 4);
    }

    #[test]
    fn a_text_parsed_to_read_its_sys_path_is_handed_to_its_lint_once() {
        // The pre-filter asks where a script's imports lead before its lint parses it; a
        // script that touches `sys.path` is parsed for that, and its lint takes that tree.
        let project = project();
        let script = "import sys\nsys.path.append('../lib')\nimport nets\n";
        let train = ProjectResolver::new(&project, "train.py");
        train.note_source(script);
        assert_eq!(train.own_import_dirs.lock().unwrap().clone(), Some(vec!["../lib".to_owned()]));
        let tree = train.parsed_tree(script).expect("the tree parsed for sys.path");
        assert_eq!(tree.tree().root_node().to_sexp(), crate::parse(script).tree.root_node().to_sexp());
        assert!(train.parsed_tree(script).is_none(), "handed over once");
        // A tree is only ever handed to a lint of the text it is of.
        let other = ProjectResolver::new(&project, "train.py");
        other.note_source(script);
        assert!(other.parsed_tree("import sys\nsys.path.append('../lib')\nimport nets  # edited\n").is_none());
        // A text that does not touch sys.path is not parsed before its lint.
        let plain = ProjectResolver::new(&project, "train.py");
        plain.note_source(TRAIN);
        assert!(plain.parsed_tree(TRAIN).is_none());
    }
}
