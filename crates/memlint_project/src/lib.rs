//! The project around a linted file, on disk: which file a module name means, and what
//! each module of the project says of itself ([`memlint_python::ModuleSummary`]), read
//! and parsed lazily, once per run, from any number of threads.
//!
//! ## Which file a module name means
//! - Relative imports (`from .models import G`, `from .. import utils`) are resolved from
//!   the importing file's folder (one dot: that folder; two: its parent; ...).
//! - Absolute imports (`from nets import *`, `import pkg.models`) are looked for, in order,
//!   under the importing file's *package root* (the nearest folder above the file that
//!   has no `__init__.py`: the folder Python puts on `sys.path` when the script or its
//!   package is run from there), the importing file's own folder, and the project roots
//!   the front end gives (the configuration's folder).
//! - `a.b` is the file `a/b.py`, else the package `a/b/__init__.py`. A name that no such
//!   file holds is not the project's (a library): nothing is known of it.
//!
//! ## Summaries kept between runs
//! With a [`SummaryStore`] ([`Project::with_summary_store`]; the CLI's cache folder unless
//! `--no-cache`), each summary made is also written to disk under its module's content
//! hash, and a module whose text hashes the same in a later run is summarized from there
//! without being parsed: a re-run in which one file changed parses that file and reads
//! the summaries of the modules around it.
//!
//! Limits: modules larger than [`MAX_MODULE_BYTES`] are not read, and at most
//! [`Project::with_limit`] modules (default [`DEFAULT_MODULE_LIMIT`]) are summarized in
//! one run; past the limit, names from further modules are unknown (as if the project
//! were a library) and [`Project::limit_reached`] says so.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use memlint_python::{ModuleLoader, ModuleSummary, SymbolAnswer, WalkedTree};
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

mod written_behind;
pub use written_behind::{write_atomically, WrittenBehind};

/// Modules larger than this are not read for the project (generated code, data).
pub const MAX_MODULE_BYTES: u64 = 4 << 20;
/// How much text the trees kept for their files' lints may hold at once
/// ([`Project::keeping_trees`]); a tree takes several times its text's size. On the
/// benchmark tree of issue 31 (1.6 M lines) 4 MB dropped the trees of 181 large files
/// (8 MB of text) that were then parsed again for their lints; 16 MB drops none there,
/// for 80 MB more at the peak (`scripts/bench-check.sh`: the project pass 68% -> 61% over
/// `--no-project`).
pub const KEPT_TREES_TEXT_BUDGET: usize = 16 << 20;
/// How many modules one run summarizes at most.
pub const DEFAULT_MODULE_LIMIT: usize = 50_000;

/// The words of the files of a run, scanned once ([`Project::mentions`]). A word is kept
/// as a 64-bit hash: two words that hash alike only make a file a candidate that the
/// summaries then rule out, never hide one.
struct Mentions {
    /// The files that mention each identifier.
    mentioned: Postings,
    /// The files that may call each identifier: the word followed by `(` or by `as`, past
    /// spaces, line breaks, backslashes and comments. A call of an imported name is
    /// written one of those ways: `name(`, `m.name(`, or `from m import name as alias`.
    called: Postings,
    /// The files that write each identifier in an import statement (a logical line that
    /// starts with `import` or `from`): the names an import of a module of the project
    /// spells (`from .utils import f`, `import pkg.models as m`).
    imported: Postings,
    /// Each file's index, by module key.
    index_by_key: FxHashMap<String, u32>,
}

impl Mentions {
    /// The files (ascending indices) whose text mentions `word`.
    fn files_mentioning(&self, word: &str) -> &[u32] {
        self.mentioned.files(word_hash(word.as_bytes()))
    }

    /// The files (ascending indices) that write `word` in an import statement.
    fn files_importing(&self, word: &str) -> &[u32] {
        self.imported.files(word_hash(word.as_bytes()))
    }

    /// Does file `index` perhaps call `word`?
    fn may_call(&self, index: u32, word: &str) -> bool {
        self.called.files(word_hash(word.as_bytes())).binary_search(&index).is_ok()
    }
}

/// For each word (hashed), the files that hold it, by index in the run's files: each
/// word's files one ascending run of `files` (about 4 bytes per word of each file).
struct Postings {
    /// Each word's number: its files are `files[starts[n]..starts[n + 1]]`.
    numbers: FxHashMap<u64, u32>,
    starts: Vec<u32>,
    files: Vec<u32>,
}

impl Postings {
    /// From each file's words (hashed, each once in its file's list). Each word is
    /// numbered as first seen and its files counted, then each file is placed in its
    /// words' runs, in file order: the runs come out ascending without a sort (a sort of
    /// every (word, file) pair took a quarter of the index's time).
    fn of(per_file: Vec<Vec<u64>>) -> Postings {
        let pairs = per_file.iter().map(Vec::len).sum();
        let mut numbers: FxHashMap<u64, u32> = FxHashMap::default();
        let mut counts: Vec<u32> = Vec::new();
        // The number of each (file, word) pair's word, in file order.
        let mut numbered: Vec<u32> = Vec::with_capacity(pairs);
        for words in &per_file {
            for word in words {
                let n = *numbers.entry(*word).or_insert_with(|| {
                    counts.push(0);
                    (counts.len() - 1) as u32
                });
                counts[n as usize] += 1;
                numbered.push(n);
            }
        }
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut at = 0u32;
        for count in &counts {
            starts.push(at);
            at += count;
        }
        starts.push(at);
        // Where each word's next file goes.
        let mut next = counts;
        next.copy_from_slice(&starts[..starts.len() - 1]);
        let mut files = vec![0u32; pairs];
        let mut numbered = numbered.into_iter();
        for (file, words) in per_file.iter().enumerate() {
            for n in numbered.by_ref().take(words.len()) {
                files[next[n as usize] as usize] = file as u32;
                next[n as usize] += 1;
            }
        }
        Postings { numbers, starts, files }
    }

    fn files(&self, word: u64) -> &[u32] {
        match self.numbers.get(&word) {
            Some(&n) => &self.files[self.starts[n as usize] as usize..self.starts[n as usize + 1] as usize],
            None => &[],
        }
    }
}

fn word_hash(word: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(word)
}

/// Module summaries on disk, one small file per module text (named by its content hash;
/// postcard, a compact serde encoding: JSON took several times the room and the time) in
/// a folder of this build: a build that summarizes differently never reads
/// another's. Written on a thread of their own ([`WrittenBehind`]: a temporary file and a
/// rename, so concurrent runs never read half an entry); an entry that does not decode is
/// ignored (and written again).
pub struct SummaryStore {
    dir: PathBuf,
    writes: WrittenBehind,
}

impl SummaryStore {
    /// The store of build `build` under `dir` (created); `None` when it cannot be created
    /// (summaries are then made from parses only).
    pub fn open(dir: &Path, build: &str) -> Option<SummaryStore> {
        let all = dir.join("summaries");
        let dir = all.join(&blake3::hash(build.as_bytes()).to_hex()[..16]);
        std::fs::create_dir_all(&dir).ok()?;
        // When this build last used its folder: what tells a stale folder from a live one.
        let _ = std::fs::write(dir.join(LAST_USED), build.as_bytes());
        prune_stale_builds(&all, &dir);
        Some(SummaryStore { dir, writes: WrittenBehind::start()? })
    }

    fn path(&self, hash: &str) -> PathBuf {
        self.dir.join(&hash[..2]).join(format!("{hash}.summary"))
    }

    fn get(&self, hash: &str) -> Option<ModuleSummary> {
        let bytes = std::fs::read(self.path(hash)).ok()?;
        postcard::from_bytes(&bytes).ok()
    }

    fn put(&self, hash: &str, summary: &ModuleSummary) {
        let Ok(bytes) = postcard::to_stdvec(summary) else { return };
        self.writes.write(self.path(hash), bytes);
    }
}

/// The file a build's summary folder is marked with each time a store opens it.
const LAST_USED: &str = "last-used";

/// A folder of summaries of another build, unused this long, is deleted when a store
/// opens: a build never reads another's, and each release (and, in development, each change
/// to the linter's sources) makes a folder of its own, so they would pile up.
pub const STALE_BUILD_AFTER: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// Deletes the folders under `all` but `current` last used before [`STALE_BUILD_AFTER`];
/// a folder it cannot read or delete is left as it is.
fn prune_stale_builds(all: &Path, current: &Path) {
    let Ok(entries) = std::fs::read_dir(all) else { return };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let path = entry.path();
        if path == current || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let used = std::fs::metadata(path.join(LAST_USED)).or_else(|_| entry.metadata()).and_then(|m| m.modified());
        let stale = used.is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > STALE_BUILD_AFTER));
        if stale {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// One module read from disk.
struct Module {
    hash: String,
    summary: Arc<ModuleSummary>,
}

/// The trees parsed for summaries and kept for the lints of their files
/// ([`Project::keeping_trees`]).
struct KeptTrees {
    /// The files of the run whose lint has not asked for its tree yet.
    pending: FxHashSet<PathBuf>,
    trees: FxHashMap<PathBuf, (String, WalkedTree)>,
    /// The text those trees hold, in bytes; past [`KEPT_TREES_TEXT_BUDGET`] a tree is
    /// dropped (its file is parsed again for its lint).
    bytes: usize,
}

impl KeptTrees {
    /// Keeps the tree of `path` when its lint is still to come and the budget allows.
    fn keep(&mut self, path: &Path, text: String, tree: WalkedTree) {
        if self.pending.contains(path) && self.bytes + text.len() <= KEPT_TREES_TEXT_BUDGET {
            self.bytes += text.len();
            self.trees.insert(path.to_owned(), (text, tree));
        }
    }

    /// The lint of `path` asks for its tree, once: it is no longer to come, whether it
    /// takes a tree, parses its text itself, or needs none (the pre-filter skipped it), so
    /// no tree is kept for it later, and the room of one kept is freed now.
    fn take(&mut self, path: &Path) -> Option<(String, WalkedTree)> {
        self.pending.remove(path);
        let (text, tree) = self.trees.remove(path)?;
        self.bytes -= text.len();
        Some((text, tree))
    }
}

/// The modules of a project on disk, read lazily. Shared by the threads of one run (the
/// CLI) or kept by the language server, which calls [`Project::invalidate`] when a file
/// changes.
pub struct Project {
    roots: Vec<PathBuf>,
    /// The files of the run (the CLI's files to check, the server's workspace files):
    /// where callers of a function are looked for.
    files: Mutex<Arc<Vec<PathBuf>>>,
    /// [`Project::files_fingerprint`], once made.
    files_fingerprint: BuiltOnce<String>,
    /// By module key ([`Project::key`]): a string, hashed in a few instructions (a `Path`
    /// hashes component by component, and this map is asked at every step of resolution).
    modules: Mutex<FxHashMap<String, Arc<OnceLock<Option<Arc<Module>>>>>>,
    /// The entries of each folder module resolution looked in, read once ([`Project::listing`]).
    /// Keyed by the folder's bytes, not its `Path`: a `Path` hashes component by
    /// component, and every `exists` asks this map (247,524 times on the engine tree).
    listings: Mutex<FxHashMap<std::ffi::OsString, Option<Arc<Listing>>>>,
    /// [`ModuleLoader::resolve_module_in`]'s answers, by the importing file's folder, the
    /// dotted name and the folders the file adds to `sys.path`: the files of a folder
    /// import much the same modules, and each answer tries several paths.
    resolved: Mutex<FxHashMap<String, Option<String>>>,
    /// Which files of the run mention each identifier (built on the first question).
    mentions: BuiltOnce<Arc<Mentions>>,
    /// What classes and functions of the project are, as lints worked them out
    /// ([`ModuleLoader::symbol_answer`]): the lints of the engine tree asked 62,143 times
    /// about 8,907 of them.
    symbol_answers: Mutex<FxHashMap<String, Arc<SymbolAnswer>>>,
    /// [`Project::file_hash`]'s answers.
    hashes: Mutex<FxHashMap<String, Option<String>>>,
    limit: usize,
    summarized: AtomicUsize,
    /// Of those, how many were read and parsed for their summary alone (the others came
    /// from a lint's own parse).
    parsed_for_summary: AtomicUsize,
    limit_reached: AtomicBool,
    /// The trees kept for lints to come, when trees are kept ([`Project::keeping_trees`]):
    /// a module parsed for its summary keeps its text and tree here until its own lint
    /// takes them, so no file of the run is parsed twice.
    kept: Option<Mutex<KeptTrees>>,
    trees_taken: AtomicUsize,
    store: Option<SummaryStore>,
    /// How many summaries came from [`Project::store`] instead of a parse.
    stored_summaries_read: AtomicUsize,
    /// The files parsed in this project's run: for their summary alone, or by their lint
    /// (which seeds the summary). See [`Project::files_parsed`].
    parsed: Mutex<Vec<PathBuf>>,
    /// How many lints kept their module's summary to themselves ([`ModuleLoader::may_be_asked`]
    /// said no other module asks for it).
    seeds_deferred: AtomicUsize,
}

impl Project {
    /// A project whose absolute imports may also resolve under `roots`, and whose callers
    /// are looked for among `files`.
    pub fn new(roots: Vec<PathBuf>, files: Vec<PathBuf>) -> Project {
        Project::with_limit(roots, files, DEFAULT_MODULE_LIMIT)
    }

    pub fn with_limit(roots: Vec<PathBuf>, files: Vec<PathBuf>, limit: usize) -> Project {
        Project {
            roots,
            files: Mutex::new(Arc::new(files)),
            files_fingerprint: BuiltOnce::default(),
            modules: Mutex::new(FxHashMap::default()),
            listings: Mutex::new(FxHashMap::default()),
            resolved: Mutex::new(FxHashMap::default()),
            mentions: BuiltOnce::default(),
            symbol_answers: Mutex::new(FxHashMap::default()),
            hashes: Mutex::new(FxHashMap::default()),
            limit,
            summarized: AtomicUsize::new(0),
            parsed_for_summary: AtomicUsize::new(0),
            limit_reached: AtomicBool::new(false),
            kept: None,
            trees_taken: AtomicUsize::new(0),
            store: None,
            stored_summaries_read: AtomicUsize::new(0),
            parsed: Mutex::new(Vec::new()),
            seeds_deferred: AtomicUsize::new(0),
        }
    }

    /// Keeps the tree of each file of the run that is parsed for its summary, for that
    /// file's own lint to take ([`memlint_python::ModuleLoader::take_tree`]). For a run
    /// that lints every file once (the CLI), not for a long-lived project (the server),
    /// which would keep trees nobody takes.
    pub fn keeping_trees(mut self) -> Project {
        let pending = lock(&self.files).iter().cloned().collect();
        self.kept = Some(Mutex::new(KeptTrees { pending, trees: FxHashMap::default(), bytes: 0 }));
        self
    }

    /// Waits until the summaries made so far are written to the store (they are written
    /// on a thread of their own; see [`WrittenBehind`]).
    pub fn flush_writes(&self) {
        if let Some(store) = &self.store {
            store.writes.flush();
        }
    }

    /// Reads and writes summaries in `store` (see the crate's documentation).
    pub fn with_summary_store(mut self, store: Option<SummaryStore>) -> Project {
        self.store = store;
        self
    }

    /// How many summaries were read from the [`SummaryStore`] instead of made from a parse.
    pub fn summaries_read_from_store(&self) -> usize {
        self.stored_summaries_read.load(Ordering::Relaxed)
    }

    /// How many modules this project summarized (read and parsed, or seeded by a lint).
    pub fn modules_summarized(&self) -> usize {
        self.summarized.load(Ordering::Relaxed).min(self.limit)
    }

    /// How many modules were read and parsed only to be summarized (not seeded by a lint).
    pub fn modules_parsed_for_summary(&self) -> usize {
        self.parsed_for_summary.load(Ordering::Relaxed)
    }

    /// The files of Python text this project's run parsed, each once: those parsed for
    /// their summary alone and those its lints parsed (a lint that took a kept tree
    /// parsed nothing more). `scripts/bench-check.sh` times tree-sitter on them: the parse
    /// a run with the project cannot avoid, beside the parse of `--no-project`.
    pub fn files_parsed(&self) -> Vec<PathBuf> {
        let mut parsed = lock(&self.parsed).clone();
        parsed.sort();
        parsed.dedup();
        parsed
    }

    /// How many lints made no summary of their module as they parsed it, no other module
    /// of the run naming it (it is made if the lint itself asks for it).
    pub fn seeds_deferred(&self) -> usize {
        self.seeds_deferred.load(Ordering::Relaxed)
    }

    /// How many files' lints took the tree their summary was parsed into
    /// ([`Project::keeping_trees`]) instead of parsing again.
    pub fn trees_handed_to_lint(&self) -> usize {
        self.trees_taken.load(Ordering::Relaxed)
    }

    /// Did some module go unread because of the module limit?
    pub fn limit_reached(&self) -> bool {
        self.limit_reached.load(Ordering::Relaxed)
    }

    /// The module key of a file (what [`memlint_python::ProjectResolver`] takes).
    pub fn key(path: &Path) -> String {
        // One spelling per module: a path found under an absolute import root (the current
        // folder) is keyed as the run's files are, relative to the current folder, so a
        // module resolved through an import is the same module as the file linted.
        static CWD: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
        let cwd = CWD.get_or_init(|| std::env::current_dir().and_then(|d| d.canonicalize()).ok().filter(|d| d.parent().is_some()));
        let path = path.strip_prefix("./").unwrap_or(path);
        if let Some(rest) = cwd.as_ref().and_then(|cwd| path.strip_prefix(cwd).ok()) {
            return rest.to_string_lossy().into_owned();
        }
        path.to_string_lossy().into_owned()
    }

    /// Forgets what was read of `path` (it changed on disk), and of which files mention
    /// what. The files of the project may have changed too: `files` replaces them when given.
    pub fn invalidate(&self, path: &Path, files: Option<Vec<PathBuf>>) {
        let key = Project::key(path);
        {
            let mut modules = lock(&self.modules);
            modules.remove(&key);
            modules.remove(path.to_string_lossy().as_ref());
        }
        // The file, or a folder above it, may be new or gone: the listings of its folders
        // are read again (a created or deleted `__init__.py` changes package roots too),
        // spelled as given and as its key spells them (relative to the current folder,
        // which is how resolution from the run's modules reads them).
        let mut listings = lock(&self.listings);
        for folder in path.ancestors().skip(1).chain(Path::new(&key).ancestors().skip(1)) {
            listings.remove(folder.as_os_str());
        }
        drop(listings);
        lock(&self.resolved).clear();
        self.mentions.forget();
        self.files_fingerprint.forget();
        // An answer may rest on any module, through re-exports and bases.
        lock(&self.symbol_answers).clear();
        lock(&self.hashes).remove(&key);
        if let Some(files) = files {
            *lock(&self.files) = Arc::new(files);
        }
    }

    /// The content hash of a module this project read (`None` when it was not read or
    /// could not be): what the results cache keys an importing file on.
    pub fn content_hash(&self, key: &str) -> Option<String> {
        self.module(key).map(|m| m.hash.clone())
    }

    /// The content hash of file `key` as it is now (read once per run, without parsing
    /// when the project has not read it): what the results cache checks its entries'
    /// dependencies against.
    pub fn file_hash(&self, key: &str) -> Option<String> {
        if let Some(Some(m)) = lock(&self.modules).get(key).and_then(|c| c.get().cloned()) {
            return Some(m.hash.clone());
        }
        if let Some(h) = lock(&self.hashes).get(key) {
            return h.clone();
        }
        let h = std::fs::read(key).ok().map(|b| Project::hash_text(&b));
        lock(&self.hashes).insert(key.to_owned(), h.clone());
        h
    }

    /// The results cache's name for the answer to "who calls `name` of module `key`": a
    /// dependency beside the modules a lint read (no path starts with a NUL).
    pub fn callers_dependency(key: &str, name: &str) -> String {
        format!("\0callers\0{key}\0{name}")
    }

    /// What a dependency of a cached result is now: a module's content hash, or for a
    /// [`Project::callers_dependency`], the fingerprint of the run's files and a hash of the
    /// candidate callers with their content hashes (a file that starts or stops mentioning
    /// the name, or any change to one that does, changes it).
    pub fn dependency_hash(&self, dependency: &str) -> Option<String> {
        match Self::callers_question(dependency) {
            Some((key, name)) => Some(format!("{} {}", self.files_fingerprint(), self.callers_hash(key, name))),
            None => self.file_hash(dependency),
        }
    }

    /// Does a dependency still have the value `recorded` ([`Project::dependency_hash`] when
    /// the result was cached)? A callers question holds at once when no file of the run
    /// changed; else its candidate callers are listed again, which means scanning every
    /// file for the words it mentions.
    pub fn dependency_holds(&self, dependency: &str, recorded: &str) -> bool {
        match Self::callers_question(dependency) {
            Some((key, name)) => {
                let Some((files, callers)) = recorded.split_once(' ') else { return false };
                files == self.files_fingerprint() || callers == self.callers_hash(key, name)
            }
            None => self.file_hash(dependency).as_deref() == Some(recorded),
        }
    }

    fn callers_question(dependency: &str) -> Option<(&str, &str)> {
        dependency.strip_prefix("\0callers\0")?.split_once('\0')
    }

    fn callers_hash(&self, key: &str, name: &str) -> String {
        let mut callers = ModuleLoader::candidate_callers(self, key, name);
        callers.sort();
        let listed: String = callers.iter().map(|c| format!("{c}\0{}\n", self.file_hash(c).unwrap_or_default())).collect();
        Project::hash_text(listed.as_bytes())
    }

    /// A hash of the run's files with their content hashes, made once (and again after
    /// [`Project::invalidate`]).
    fn files_fingerprint(&self) -> String {
        self.files_fingerprint.get_or_build(|| self.fingerprint_files())
    }

    fn fingerprint_files(&self) -> String {
        let files = lock(&self.files).clone();
        let hashes: Vec<(String, String)> = files.par_iter().map(|f| {
            let key = Project::key(f);
            let hash = self.file_hash(&key).unwrap_or_default();
            (key, hash)
        }).collect();
        let mut listed: Vec<String> = hashes.into_iter().map(|(key, hash)| format!("{key}\0{hash}\n")).collect();
        listed.sort();
        Project::hash_text(listed.concat().as_bytes())
    }

    /// The content hash of a file's current text (read now).
    pub fn hash_text(text: &[u8]) -> String {
        blake3::hash(text).to_hex().to_string()
    }

    /// Is `path` a file (following links)? Import resolution asks of every candidate
    /// (`<folder>/torch.py`, `<folder>/torch/__init__.py` for each folder that imports
    /// torch): answered from its folder's listing, as Python's own `FileFinder` does,
    /// instead of a `stat` each (135,751 of them on the engine tree, 110k failing).
    fn exists(&self, path: &Path) -> bool {
        match (path.parent(), path.file_name()) {
            (Some(folder), Some(name)) => self.listing(folder).is_some_and(|l| l.get(name) == Some(&EntryKind::File)),
            _ => path.is_file(),
        }
    }

    /// The entries of `folder`, read once; `None` when it is no folder that can be read.
    /// A folder its parent does not list as a folder is not read at all: most candidate
    /// paths lie in folders that do not exist.
    fn listing(&self, folder: &Path) -> Option<Arc<Listing>> {
        if let Some(listing) = lock(&self.listings).get(folder.as_os_str()) {
            return listing.clone();
        }
        let listed_by_parent = match (folder.parent(), folder.file_name()) {
            (Some(parent), Some(name)) => Some(self.listing(parent).is_some_and(|l| l.get(name) == Some(&EntryKind::Folder))),
            // The root, `..`: read it.
            _ => None,
        };
        let listing = if listed_by_parent == Some(false) {
            None
        } else {
            let readable = if folder.as_os_str().is_empty() { Path::new(".") } else { folder };
            std::fs::read_dir(readable).ok().map(|entries| Arc::new(read_listing(entries)))
        };
        lock(&self.listings).insert(folder.as_os_str().to_owned(), listing.clone());
        listing
    }

    /// The folder of `file`'s package root: the nearest folder at or above the file's own
    /// that has no `__init__.py`.
    pub fn package_root(&self, file: &Path) -> Option<PathBuf> {
        let mut dir = file.parent()?.to_owned();
        for _ in 0..64 {
            if !self.exists(&dir.join("__init__.py")) {
                return Some(dir);
            }
            dir = dir.parent()?.to_owned();
        }
        None
    }

    /// `a.b` under `base`: `a/b.py`, else `a/b/__init__.py`; `""` is the package `base`.
    fn module_file(&self, base: &Path, parts: &[&str]) -> Option<PathBuf> {
        if parts.iter().any(|p| p.is_empty() || !p.chars().all(|c| c.is_alphanumeric() || c == '_')) {
            return None;
        }
        let mut dir = base.to_owned();
        for p in parts {
            dir.push(p);
        }
        if !parts.is_empty() {
            let file = dir.with_extension("py");
            if self.exists(&file) {
                return Some(file);
            }
        }
        let init = dir.join("__init__.py");
        self.exists(&init).then_some(init)
    }

    /// [`ModuleLoader::resolve_module_in`] without the memo.
    fn resolve_module_uncached(&self, from: &str, dotted: &str, import_dirs: &[String]) -> Option<String> {
        let from = Path::new(from);
        let dots = dotted.len() - dotted.trim_start_matches('.').len();
        let rest = &dotted[dots..];
        let parts: Vec<&str> = if rest.is_empty() { Vec::new() } else { rest.split('.').collect() };
        if dots > 0 {
            let mut base = from.parent()?.to_owned();
            for _ in 1..dots {
                base = base.parent()?.to_owned();
            }
            return self.module_file(&base, &parts).map(|p| Project::key(&p));
        }
        if parts.is_empty() {
            return None;
        }
        let mut bases: Vec<PathBuf> = Vec::new();
        if let Some(root) = self.package_root(from) {
            bases.push(root);
        }
        if let Some(dir) = from.parent() {
            bases.push(dir.to_owned());
            bases.extend(import_dirs.iter().map(|d| folder_below(dir, d)));
        }
        bases.extend(self.roots.iter().cloned());
        let mut tried: Vec<&Path> = Vec::new();
        for base in &bases {
            if tried.contains(&base.as_path()) {
                continue;
            }
            tried.push(base);
            if let Some(file) = self.module_file(base, &parts) {
                return Some(Project::key(&file));
            }
        }
        None
    }

    /// The module made from a lint's own `text` and `summary` of it (read from the store
    /// instead when it has one); `None` past the run's limit of modules.
    fn module_of_lint(&self, text: &str, summary: &dyn Fn() -> ModuleSummary) -> Option<Arc<Module>> {
        if self.summarized.fetch_add(1, Ordering::Relaxed) >= self.limit {
            self.limit_reached.store(true, Ordering::Relaxed);
            return None;
        }
        let hash = Project::hash_text(text.as_bytes());
        let summary = match &self.store {
            Some(store) => match store.get(&hash) {
                Some(stored) => {
                    self.stored_summaries_read.fetch_add(1, Ordering::Relaxed);
                    stored
                }
                None => {
                    let made = summary();
                    store.put(&hash, &made);
                    made
                }
            },
            None => summary(),
        };
        Some(Arc::new(Module { hash, summary: Arc::new(summary) }))
    }

    fn module(&self, key: &str) -> Option<Arc<Module>> {
        let cell = self.module_cell(key);
        cell.get_or_init(|| {
            let path = PathBuf::from(key);
            if self.summarized.fetch_add(1, Ordering::Relaxed) >= self.limit {
                self.limit_reached.store(true, Ordering::Relaxed);
                return None;
            }
            let meta = std::fs::metadata(&path).ok()?;
            if !meta.is_file() || meta.len() > MAX_MODULE_BYTES {
                return None;
            }
            let bytes = std::fs::read(&path).ok()?;
            let hash = Project::hash_text(&bytes);
            if let Some(summary) = self.store.as_ref().and_then(|store| store.get(&hash)) {
                self.stored_summaries_read.fetch_add(1, Ordering::Relaxed);
                return Some(Arc::new(Module { hash, summary: Arc::new(summary) }));
            }
            // Checked as UTF-8 first: `from_utf8_lossy` alone took several times as long on
            // text that is valid, as nearly all is.
            let text = match std::str::from_utf8(&bytes) {
                Ok(text) => std::borrow::Cow::Borrowed(text),
                Err(_) => String::from_utf8_lossy(&bytes),
            };
            self.parsed_for_summary.fetch_add(1, Ordering::Relaxed);
            lock(&self.parsed).push(path.clone());
            // Walked once: the summary reads the named nodes, and so does the lint that
            // may take this tree.
            let tree = WalkedTree::walk(memlint_python::parse_with(&text, None));
            let summary = Arc::new(ModuleSummary::walked(tree.nodes(), &text));
            if let Some(store) = &self.store {
                store.put(&hash, &summary);
            }
            if let Some(kept) = &self.kept {
                lock(kept).keep(&path, text.into_owned(), tree);
            }
            Some(Arc::new(Module { hash, summary }))
        })
        .clone()
    }

    /// The cell of module `key` in [`Project::modules`], made empty when it has none yet.
    fn module_cell(&self, key: &str) -> Arc<OnceLock<Option<Arc<Module>>>> {
        let mut modules = lock(&self.modules);
        match modules.get(key) {
            Some(cell) => cell.clone(),
            None => modules.entry(key.to_owned()).or_default().clone(),
        }
    }

    /// Which files of the run mention each identifier, and which may call it: one scan of
    /// every file, in parallel, on the first question (and again after
    /// [`Project::invalidate`]).
    fn mentions(&self) -> Arc<Mentions> {
        self.mentions.get_or_build(|| self.scan_mentions())
    }

    fn scan_mentions(&self) -> Arc<Mentions> {
        let files = lock(&self.files).clone();
        // Each thread reads into one buffer and gathers words in one pair of lists, reused
        // from file to file: a fresh buffer per file took fresh pages from the system.
        let per_file: Vec<FileWords> = files
            .par_iter()
            .map_init(WordScan::default, |scan, f| {
                use std::io::Read;
                scan.text.clear();
                match std::fs::File::open(f).and_then(|mut file| file.read_to_end(&mut scan.text)) {
                    Ok(_) => scan.words(),
                    Err(_) => FileWords::default(),
                }
            })
            .collect();
        let (mut mentioned, mut called, mut imported) = (Vec::with_capacity(per_file.len()), Vec::with_capacity(per_file.len()), Vec::with_capacity(per_file.len()));
        for words in per_file {
            mentioned.push(words.mentioned);
            called.push(words.called);
            imported.push(words.imported);
        }
        let (mentioned, (called, imported)) = rayon::join(|| Postings::of(mentioned), || rayon::join(|| Postings::of(called), || Postings::of(imported)));
        let index_by_key = files.iter().enumerate().map(|(i, f)| (Project::key(f), i as u32)).collect();
        Arc::new(Mentions { mentioned, called, imported, index_by_key })
    }
}

/// A folder's entries: each name, and what it is.
type Listing = FxHashMap<std::ffi::OsString, EntryKind>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    File,
    Folder,
    Other,
}

/// The entries of a folder, links followed (the kind of the rest comes with the listing,
/// without a `stat` each).
fn read_listing(entries: std::fs::ReadDir) -> Listing {
    entries
        .flatten()
        .map(|entry| {
            let kind = match entry.file_type() {
                Ok(t) if t.is_symlink() => std::fs::metadata(entry.path()).map(|m| m.file_type()),
                other => other,
            };
            let kind = match kind {
                Ok(t) if t.is_file() => EntryKind::File,
                Ok(t) if t.is_dir() => EntryKind::Folder,
                _ => EntryKind::Other,
            };
            (entry.file_name(), kind)
        })
        .collect()
}

/// The words of a file (identifiers, hashed; each list sorted, each word once in it).
#[derive(Default)]
struct FileWords {
    mentioned: Vec<u64>,
    /// Those that may be called there: followed by `(` or by the keyword `as`, past
    /// spaces, line breaks, backslashes and comments (see [`Mentions::called`]).
    called: Vec<u64>,
    /// Those written in an import statement (see [`Mentions::imported`]).
    imported: Vec<u64>,
}

/// The words of a file: [`FileWords`].
#[cfg(test)]
fn scan_words(bytes: &[u8]) -> FileWords {
    let mut scan = WordScan { text: bytes.to_vec(), ..WordScan::default() };
    scan.words()
}

/// A thread's buffers for [`scan_words`]: the text of the file read, and every occurrence
/// of a word (of a called word, of a word in an import) before they are sorted and made
/// distinct.
#[derive(Default)]
struct WordScan {
    text: Vec<u8>,
    words: Vec<u64>,
    called: Vec<u64>,
    imported: Vec<u64>,
}

/// Is the word starting at `start` the first of its logical line: only spaces and tabs
/// before it since a line break that no backslash continues, a `;`, or the text's start?
/// (A line inside brackets or a string may pass: the scan may see an import where there is
/// none, which only keeps a summary that is not needed.)
fn starts_a_line(bytes: &[u8], start: usize) -> bool {
    let mut i = start;
    while i > 0 && matches!(bytes[i - 1], b' ' | b'\t') {
        i -= 1;
    }
    i == 0 || bytes[i - 1] == b';' || (bytes[i - 1] == b'\n' && !(i >= 2 && bytes[i - 2] == b'\\') && !(i >= 3 && bytes[i - 2] == b'\r' && bytes[i - 3] == b'\\'))
}

/// The end of the import statement whose first word ends at `from`: the first line break
/// outside parentheses that no backslash continues (a `#` comment skipped to its line's end).
fn import_statement_end(bytes: &[u8], from: usize) -> usize {
    let mut depth = 0usize;
    let mut j = from;
    while j < bytes.len() {
        match bytes[j] {
            b'(' => depth += 1,
            b')' => depth = depth.saturating_sub(1),
            b'#' => {
                while j < bytes.len() && bytes[j] != b'\n' {
                    j += 1;
                }
                continue;
            }
            b'\\' => j += 1,
            b'\n' if depth == 0 => return j,
            _ => {}
        }
        j += 1;
    }
    bytes.len()
}

impl WordScan {
    /// [`scan_words`] of `self.text`.
    fn words(&mut self) -> FileWords {
        let bytes = &self.text[..];
        let is_word = |b: u8| memlint_python::IDENTIFIER_BYTE[b as usize];
        self.words.clear();
        self.called.clear();
        self.imported.clear();
        // Where the import statement the scan is in ends (0: in none).
        let mut import_end = 0;
        // The word last seen in each of 256 slots (by hash): a word seen again soon (`self`,
        // `x`, `torch`) is not listed again, so the lists sorted below are mostly distinct
        // words. A 0 slot only lets a word of hash 0 be listed more than once.
        let mut recent = [0u64; 256];
        let mut i = 0;
        while i < bytes.len() {
            if !is_word(bytes[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && is_word(bytes[i]) {
                i += 1;
            }
            let word = &bytes[start..i];
            if word[0].is_ascii_digit() {
                continue;
            }
            let hash = word_hash(word);
            let slot = &mut recent[(hash >> 56) as usize];
            if *slot != hash {
                *slot = hash;
                self.words.push(hash);
            }
            if start < import_end {
                self.imported.push(hash);
            } else if (word == b"import" || word == b"from") && starts_a_line(bytes, start) {
                import_end = import_statement_end(bytes, i);
            }
            let mut j = i;
            while j < bytes.len() {
                match bytes[j] {
                    b' ' | b'\t' | b'\r' | b'\n' | b'\\' | b'\x0c' => j += 1,
                    b'#' => {
                        while j < bytes.len() && bytes[j] != b'\n' {
                            j += 1;
                        }
                    }
                    _ => break,
                }
            }
            let next_is_as = bytes[j..].starts_with(b"as") && bytes.get(j + 2).is_none_or(|b| !is_word(*b));
            if bytes.get(j) == Some(&b'(') || next_is_as {
                self.called.push(hash);
            }
        }
        let distinct = |list: &mut Vec<u64>| {
            list.sort_unstable();
            list.dedup();
            list.clone()
        };
        FileWords { mentioned: distinct(&mut self.words), called: distinct(&mut self.called), imported: distinct(&mut self.imported) }
    }
}

/// The word an import of the module at `path` must write: its file's stem
/// (`from .utils import f`, `import utils`), or for a package's `__init__.py` the
/// package's folder.
fn import_word(path: &Path) -> Option<String> {
    let stem = path.file_stem()?;
    let word = if stem == "__init__" { path.parent()?.file_name()? } else { stem };
    Some(word.to_string_lossy().into_owned())
}

/// `dir` joined with the relative folder `relative` (`"../lib"`), `..` taking back a
/// component of `dir` where it has one (`examples` + `../lib` is `lib`).
fn folder_below(dir: &Path, relative: &str) -> PathBuf {
    let mut path = dir.to_owned();
    for component in relative.split('/') {
        match component {
            "" | "." => {}
            ".." if matches!(path.components().next_back(), Some(std::path::Component::Normal(_))) => {
                path.pop();
            }
            other => path.push(other),
        }
    }
    path
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A value of the whole run built on the first question, once, however many threads ask
/// at that moment (and again after [`BuiltOnce::forget`]). The lints of `memlint check`
/// start together and ask together: each built the mentions index (a scan of every file)
/// for itself until the second waited for the first.
struct BuiltOnce<T> {
    value: Mutex<Option<T>>,
    building: Mutex<()>,
}

impl<T> Default for BuiltOnce<T> {
    fn default() -> Self {
        BuiltOnce { value: Mutex::new(None), building: Mutex::new(()) }
    }
}

impl<T: Clone> BuiltOnce<T> {
    fn get_or_build(&self, build: impl FnOnce() -> T) -> T {
        if let Some(value) = lock(&self.value).as_ref() {
            return value.clone();
        }
        // A thread of rayon's pool builds without waiting: the builder's own parallel
        // work may be queued behind it (or it may be the builder, in a job it stole).
        let _building = rayon::current_thread_index().is_none().then(|| lock(&self.building));
        if let Some(value) = lock(&self.value).as_ref() {
            return value.clone();
        }
        let value = build();
        *lock(&self.value) = Some(value.clone());
        value
    }

    fn forget(&self) {
        *lock(&self.value) = None;
    }
}

impl ModuleLoader for Project {
    fn resolve_module(&self, from: &str, dotted: &str) -> Option<String> {
        self.resolve_module_in(from, dotted, &[])
    }

    /// After the package root and the file's folder, the folders the file puts on
    /// `sys.path` (relative to its folder), then the project roots.
    fn resolve_module_in(&self, from: &str, dotted: &str, import_dirs: &[String]) -> Option<String> {
        // The answer depends on the importing file's folder, not on the file.
        let folder = Path::new(from).parent().map(|d| d.to_string_lossy()).unwrap_or_default();
        let mut key = String::with_capacity(folder.len() + dotted.len() + 2);
        key.push_str(&folder);
        key.push('\0');
        key.push_str(dotted);
        for dir in import_dirs {
            key.push('\0');
            key.push_str(dir);
        }
        if let Some(answer) = lock(&self.resolved).get(&key) {
            return answer.clone();
        }
        let answer = self.resolve_module_uncached(from, dotted, import_dirs);
        lock(&self.resolved).insert(key, answer.clone());
        answer
    }

    fn summary(&self, key: &str) -> Option<Arc<ModuleSummary>> {
        self.module(key).map(|m| m.summary.clone())
    }

    /// The files of the run that mention both `name` and a name a caller must write to
    /// import it: the module's own (`evaluation` for `evaluation.py`), or that of a
    /// package whose `__init__.py` re-exports it (`from pkg import score`).
    fn candidate_callers(&self, key: &str, name: &str) -> Vec<String> {
        let files = lock(&self.files).clone();
        let mentions = self.mentions();
        let indices = mentions.files_mentioning(name);
        if indices.is_empty() {
            return Vec::new();
        }
        let path = Path::new(key);
        let mut words: Vec<String> = import_word(path).into_iter().collect();
        let mut dir = path.parent().map(Path::to_owned);
        if path.file_stem().is_some_and(|s| s == "__init__") {
            dir = dir.as_deref().and_then(Path::parent).map(Path::to_owned);
        }
        while let Some(d) = dir {
            let init = d.join("__init__.py");
            if !self.exists(&init) {
                break;
            }
            let reexports = self
                .summary(&Project::key(&init))
                .map(|s| s.import(name).is_some() || !s.star_imports.is_empty())
                .unwrap_or(false);
            if !reexports {
                break;
            }
            words.extend(d.file_name().map(|n| n.to_string_lossy().into_owned()));
            dir = d.parent().map(Path::to_owned);
        }
        let importing: std::collections::HashSet<u32> =
            words.iter().flat_map(|w| mentions.files_mentioning(w)).copied().collect();
        indices
            .iter()
            .filter(|i| importing.contains(i))
            .filter_map(|i| files.get(*i as usize))
            .map(|p| Project::key(p))
            .filter(|k| k != key)
            .collect()
    }

    fn may_call(&self, key: &str, name: &str) -> bool {
        let mentions = self.mentions();
        let Some(index) = mentions.index_by_key.get(key) else { return true };
        mentions.may_call(*index, name)
    }

    fn linted(&self, key: &str, summary_deferred: bool) {
        // The lint parsed the file, unless it took the tree its summary was parsed into
        // (then the path is listed already).
        lock(&self.parsed).push(PathBuf::from(key));
        if summary_deferred {
            self.seeds_deferred.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn may_be_asked(&self, key: &str) -> bool {
        // A module whose name no other file of the run writes in an import statement is
        // reached by none of their imports (only, rarely, through a module outside the run,
        // or as an attribute of its package, `import pkg` then `pkg.utils.f()`: then it is
        // parsed when asked). A package's `__init__.py` is also reached by relative imports
        // that do not write its name (`from . import f`): any mention of its folder's name
        // counts.
        let mentions = self.mentions();
        let Some(own) = mentions.index_by_key.get(key) else { return true };
        let path = Path::new(key);
        let Some(word) = import_word(path) else { return true };
        let files = if path.file_stem().is_some_and(|s| s == "__init__") { mentions.files_mentioning(&word) } else { mentions.files_importing(&word) };
        files.iter().any(|i| i != own)
    }

    fn symbol_answer(&self, definition: &str) -> Option<Arc<SymbolAnswer>> {
        lock(&self.symbol_answers).get(definition).cloned()
    }

    fn remember_symbol_answer(&self, definition: String, answer: Arc<SymbolAnswer>) {
        lock(&self.symbol_answers).insert(definition, answer);
    }

    fn take_tree(&self, key: &str, text: &str) -> Option<WalkedTree> {
        let kept_text_and_tree = lock(self.kept.as_ref()?).take(Path::new(key));
        let (kept_text, tree) = kept_text_and_tree?;
        (kept_text == text).then(|| {
            self.trees_taken.fetch_add(1, Ordering::Relaxed);
            tree
        })
    }

    fn seed(&self, key: &str, text: &str, summary: &dyn Fn() -> ModuleSummary) {
        let cell = self.module_cell(key);
        if cell.get().is_some() || text.len() as u64 > MAX_MODULE_BYTES {
            return;
        }
        if let Some(module) = self.module_of_lint(text, summary) {
            let _ = cell.set(Some(module));
        }
    }

    fn parse_seeding(&self, key: &str, text: &str) -> Option<WalkedTree> {
        let cell = self.module_cell(key);
        if cell.get().is_some() || text.len() as u64 > MAX_MODULE_BYTES {
            // Made already: by a question that kept its tree for this lint, or not.
            return self.take_tree(key, text);
        }
        // The cell is initialized here, so a thread asking for the module meanwhile
        // ([`Project::module`]) waits on it. Parsing and summarizing ask nothing of the
        // project, so the wait always ends.
        let mut parsed = None;
        cell.get_or_init(|| {
            let walked = WalkedTree::walk(memlint_python::parse_with(text, None));
            let module = self.module_of_lint(text, &|| ModuleSummary::walked(walked.nodes(), text));
            parsed = Some(walked);
            module
        });
        // No longer waiting ([`ModuleLoader::expect_tree`]); the tree a question that was
        // parsing the module kept for this lint, if it did.
        let kept = self.take_tree(key, text);
        parsed.or(kept)
    }

    fn expect_tree(&self, key: &str) {
        if let Some(kept) = &self.kept {
            lock(kept).pending.insert(PathBuf::from(key));
        }
    }

}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project of two files, `train.py` importing `models.py`, in a fresh folder.
    fn two_files() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().expect("temporary folder");
        let models = dir.path().join("models.py");
        let train = dir.path().join("train.py");
        std::fs::write(&models, "import torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n").expect("write models.py");
        std::fs::write(&train, "from models import Net\n\nnet = Net()\n").expect("write train.py");
        (dir, models, train)
    }

    #[test]
    fn a_file_parsed_for_its_summary_hands_its_tree_to_its_lint_once() {
        let (_dir, models, train) = two_files();
        let project = Project::new(Vec::new(), vec![models.clone(), train.clone()]).keeping_trees();
        let key = Project::key(&models);
        assert!(project.summary(&key).is_some(), "models.py is summarized");
        let text = std::fs::read_to_string(&models).expect("read models.py");
        let tree = project.take_tree(&key, &text).expect("the kept tree");
        assert_eq!(tree.tree().root_node().to_sexp(), memlint_python::parse_with(&text, None).root_node().to_sexp());
        assert_eq!(tree.nodes().len(), memlint_python::NamedNodes::of(tree.tree().root_node()).len(), "it comes walked");
        assert!(project.take_tree(&key, &text).is_none(), "handed over once");
        assert_eq!(project.trees_handed_to_lint(), 1);
    }

    #[test]
    fn a_lint_that_parses_its_file_makes_its_summary_from_that_parse() {
        let (_dir, models, train) = two_files();
        let text = std::fs::read_to_string(&models).expect("read models.py");
        let key = Project::key(&models);
        let project = Project::new(Vec::new(), vec![models.clone(), train.clone()]).keeping_trees();
        let tree = project.parse_seeding(&key, &text).expect("the lint's tree");
        assert_eq!(tree.tree().root_node().to_sexp(), memlint_python::parse_with(&text, None).root_node().to_sexp());
        let summary = project.summary(&key).expect("models.py is summarized");
        assert_eq!(summary.classes.len(), 1, "{summary:?}");
        assert_eq!(project.modules_parsed_for_summary(), 0, "the summary came from the lint's parse");
        assert!(project.parse_seeding(&key, &text).is_none(), "made once");
        // Summarized before its lint: the lint parses the file itself, and no summary is
        // made again.
        let project = Project::new(Vec::new(), vec![models.clone(), train.clone()]);
        assert!(project.summary(&key).is_some());
        assert!(project.parse_seeding(&key, &text).is_none());
        assert_eq!(project.modules_parsed_for_summary(), 1);
        // Summarized after the lint found no kept tree but while it expects one: the lint
        // takes the question's tree.
        let project = Project::new(Vec::new(), vec![models.clone(), train.clone()]).keeping_trees();
        assert!(project.take_tree(&key, &text).is_none());
        project.expect_tree(&key);
        assert!(project.summary(&key).is_some());
        assert!(project.parse_seeding(&key, &text).is_some(), "the question's tree");
        assert_eq!((project.modules_parsed_for_summary(), project.trees_handed_to_lint(), kept_bytes(&project)), (1, 1, 0));
        // Not expected (the lint was not about to parse): none is kept.
        let project = Project::new(Vec::new(), vec![models, train]).keeping_trees();
        assert!(project.take_tree(&key, &text).is_none());
        assert!(project.summary(&key).is_some());
        assert!(project.parse_seeding(&key, &text).is_none());
        assert_eq!(kept_bytes(&project), 0);
    }

    #[test]
    fn a_question_asked_while_the_lint_parses_waits_for_that_parse() {
        // The lint starts parsing a file whose parse takes a while, and a question for its
        // summary comes 100 ms later, while the lint still parses. The question waits for
        // the lint's parse, so the file is parsed once. (Before, the lint parsed outside
        // the module's cell, and the question parsed the file a second time: 104 files of
        // the engine tree.)
        let (_dir, models, text) = slow_to_parse_module();
        let project = Project::new(Vec::new(), vec![models.clone()]).keeping_trees();
        let key = Project::key(&models);
        // The lint asks for a kept tree first (there is none), as `lint_in_project` does.
        assert!(project.take_tree(&key, &text).is_none());
        let ((lint_seeded, parse_time), ()) = first_then_another_later(
            || project.parse_seeding(&key, &text).is_some(),
            || assert_eq!(project.summary(&key).expect("models.py is summarized").classes.len(), 6000),
        );
        assert!(lint_seeded, "the lint made the summary");
        assert_eq!(project.modules_parsed_for_summary(), 0, "the question did not parse models.py again");
        // Only a parse that outlasts the question's delay tests the wait.
        eprintln!("the lint's parse took {parse_time:?}");
    }

    #[test]
    fn a_lint_that_comes_while_a_question_parses_its_file_takes_that_tree() {
        // The question starts parsing first; the lint, 100 ms later, finds no kept tree,
        // and waits for the question's parse instead of parsing the file again.
        let (_dir, models, text) = slow_to_parse_module();
        let project = Project::new(Vec::new(), vec![models.clone()]).keeping_trees();
        let key = Project::key(&models);
        let ((summarized, parse_time), tree) = first_then_another_later(
            || project.summary(&key).is_some(),
            // As `lint_in_project` and `ProjectResolver::parse` do: the kept tree first,
            // then its own parse, expecting a tree again while it decides.
            || {
                project.take_tree(&key, &text).or_else(|| {
                    project.expect_tree(&key);
                    project.parse_seeding(&key, &text)
                })
            },
        );
        assert!(summarized, "models.py is summarized");
        assert!(tree.is_some(), "the lint took the question's tree");
        assert_eq!(project.modules_parsed_for_summary(), 1);
        assert_eq!(project.trees_handed_to_lint(), 1);
        assert_eq!(kept_bytes(&project), 0, "no tree is left kept");
        // Only a parse that outlasts the lint's delay tests the wait.
        eprintln!("the question's parse took {parse_time:?}");
    }

    /// Runs `first` on a thread of its own and, 100 ms after it starts, `second` on this
    /// one: `first`'s answer with how long it took, and `second`'s.
    fn first_then_another_later<A: Send, B>(first: impl FnOnce() -> A + Send, second: impl FnOnce() -> B) -> ((A, std::time::Duration), B) {
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|scope| {
            let first = scope.spawn(|| {
                start.wait();
                let began = std::time::Instant::now();
                let answer = first();
                (answer, began.elapsed())
            });
            start.wait();
            std::thread::sleep(std::time::Duration::from_millis(100));
            let second = second();
            (first.join().expect("the first thread"), second)
        })
    }

    /// `models.py` of 6,000 small network classes in a fresh folder, and its text: a
    /// module whose parse takes a while (half a second or more in a debug build).
    fn slow_to_parse_module() -> (tempfile::TempDir, PathBuf, String) {
        let dir = tempfile::tempdir().expect("temporary folder");
        let models = dir.path().join("models.py");
        let text = many_classes(6000);
        std::fs::write(&models, &text).expect("write models.py");
        (dir, models, text)
    }

    /// A module of `n` small network classes: a text whose parse takes a while.
    fn many_classes(n: usize) -> String {
        let mut text = String::from("import torch.nn as nn\n\n");
        for i in 0..n {
            text.push_str(&format!("class Net{i}(nn.Module):\n    def forward(self, x):\n        return self.layer(x) + {i}\n\n"));
        }
        text
    }

    #[test]
    fn a_file_whose_lint_asked_for_its_tree_gets_none_kept_later() {
        let (_dir, models, train) = two_files();
        let text = std::fs::read_to_string(&models).expect("read models.py");
        let key = Project::key(&models);
        // The lint came first (or the pre-filter skipped the file): a later summary keeps
        // no tree, as no lint would take it.
        let project = Project::new(Vec::new(), vec![models.clone(), train.clone()]).keeping_trees();
        assert!(project.take_tree(&key, &text).is_none());
        assert!(project.summary(&key).is_some());
        assert_eq!(kept_bytes(&project), 0);
        // A tree kept for another text than the lint's is dropped, and its room freed.
        let project = Project::new(Vec::new(), vec![models.clone(), train]).keeping_trees();
        assert!(project.summary(&key).is_some());
        assert_eq!(kept_bytes(&project), text.len());
        assert!(project.take_tree(&key, "class Other: pass\n").is_none(), "a different text gets no tree");
        assert_eq!(kept_bytes(&project), 0);
        project.invalidate(&models, None);
        assert!(project.summary(&key).is_some());
        assert!(project.take_tree(&key, &text).is_none(), "its lint asked already");
        assert_eq!(project.trees_handed_to_lint(), 0);
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write a module");
        path
    }

    fn is_module(symbol: Option<memlint_python::Symbol>) -> bool {
        matches!(symbol, Some(memlint_python::Symbol::Class { is_module: true, .. }))
    }

    #[test]
    fn what_a_class_is_is_worked_out_once_and_its_reads_count_for_every_lint_that_asks() {
        use memlint_python::{ProjectIndex, ProjectResolver};
        let dir = tempfile::tempdir().expect("temporary folder");
        let base = write(dir.path(), "base.py", "import torch.nn as nn\n\nclass Base(nn.Module):\n    pass\n");
        let models = write(dir.path(), "models.py", "from base import Base\n\nclass Net(Base):\n    pass\n");
        let train = write(dir.path(), "train.py", "import models\n");
        let eval = write(dir.path(), "eval.py", "import models\n");
        let project = Project::new(Vec::new(), vec![base.clone(), models.clone(), train.clone(), eval.clone()]);
        let first = ProjectResolver::new(&project, Project::key(&train));
        assert!(is_module(first.symbol("models.Net")));
        assert_eq!(lock(&project.symbol_answers).len(), 1, "the answer is kept");
        let second = ProjectResolver::new(&project, Project::key(&eval));
        assert!(is_module(second.symbol("models.Net")));
        // The second lint read nothing itself, yet its result rests on both modules.
        assert_eq!(second.modules_read(), first.modules_read());
        assert!(second.modules_read().contains(&Project::key(&base)));
        // A changed module: answers are worked out again.
        std::fs::write(&base, "class Base:\n    pass\n").expect("write base.py");
        project.invalidate(&base, None);
        assert!(!is_module(ProjectResolver::new(&project, Project::key(&eval)).symbol("models.Net")));
    }

    #[test]
    fn an_answer_that_rests_on_the_asking_module_is_not_kept() {
        use memlint_python::{ProjectIndex, ProjectResolver};
        let dir = tempfile::tempdir().expect("temporary folder");
        // Net's base is in train.py itself: what the lint of train.py reads of it may be an
        // editor's unsaved text.
        let models = write(dir.path(), "models.py", "from train import Base\n\nclass Net(Base):\n    pass\n");
        let train = write(dir.path(), "train.py", "import torch.nn as nn\nimport models\n\nclass Base(nn.Module):\n    pass\n");
        let project = Project::new(Vec::new(), vec![models, train.clone()]);
        assert!(is_module(ProjectResolver::new(&project, Project::key(&train)).symbol("models.Net")));
        assert!(lock(&project.symbol_answers).is_empty());
    }

    #[test]
    fn a_value_asked_for_by_several_threads_at_once_is_built_once() {
        let cell: BuiltOnce<usize> = BuiltOnce::default();
        let builds = AtomicUsize::new(0);
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    barrier.wait();
                    cell.get_or_build(|| {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        builds.fetch_add(1, Ordering::SeqCst) + 7
                    })
                });
            }
        });
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        assert_eq!(cell.get_or_build(|| 0), 7);
        cell.forget();
        assert_eq!(cell.get_or_build(|| 8), 8, "built again after forget");
    }

    #[test]
    fn a_build_whose_parallel_work_asks_for_the_same_value_does_not_wait_for_itself() {
        // The metamorphic harness lints on rayon's pool: a worker busy building may steal a
        // lint that asks for the value being built.
        let cell: BuiltOnce<usize> = BuiltOnce::default();
        let build = || (0..10_000usize).into_par_iter().sum::<usize>();
        let values: Vec<usize> = (0..64).into_par_iter().map(|_| cell.get_or_build(build)).collect();
        assert!(values.iter().all(|&v| v == 49_995_000));
    }

    fn kept_bytes(project: &Project) -> usize {
        project.kept.as_ref().map(|k| lock(k).bytes).unwrap_or(0)
    }

    #[test]
    fn trees_are_kept_only_when_asked_and_only_for_files_of_the_run() {
        let (_dir, models, train) = two_files();
        let text = std::fs::read_to_string(&models).expect("read models.py");
        let key = Project::key(&models);
        let server_like = Project::new(Vec::new(), vec![models.clone(), train.clone()]);
        assert!(server_like.summary(&key).is_some());
        assert!(server_like.take_tree(&key, &text).is_none(), "a long-lived project keeps no tree");
        let only_train = Project::new(Vec::new(), vec![train]).keeping_trees();
        assert!(only_train.summary(&key).is_some());
        assert!(only_train.take_tree(&key, &text).is_none(), "models.py is not linted in this run");
    }

    #[test]
    fn a_word_may_be_called_when_a_parenthesis_or_an_alias_follows_it() {
        let text = b"from m import evaluate as ev, score\nrun (x)\nfit \\\n  (y)\nstep # later\n(z)\nmodel.sample(4)\nx = train\nprint(score)\nassert_ok\nfrom n import cases as c2\n";
        let FileWords { mentioned: words, called, .. } = scan_words(text);
        // Words are kept hashed: which of the words of the text are called.
        let all = [
            "from", "m", "import", "evaluate", "as", "ev", "score", "run", "x", "fit", "y", "step", "later", "z", "model", "sample", "train",
            "print", "assert_ok", "n", "cases", "c2",
        ];
        let mut said_called: Vec<&str> = all.iter().copied().filter(|w| called.contains(&word_hash(w.as_bytes()))).collect();
        said_called.sort_unstable();
        // Words in comments and strings count as well (`later`): the scan may say a word
        // is called when it is not, never the reverse.
        assert_eq!(said_called, ["cases", "evaluate", "fit", "later", "print", "run", "sample", "step"]);
        assert_eq!(called.len(), said_called.len(), "no other word is called");
        assert!(all.iter().all(|w| words.contains(&word_hash(w.as_bytes()))), "every word is mentioned");
        assert_eq!(words.len(), all.len(), "each word once");
        assert!(words.windows(2).all(|w| w[0] < w[1]) && called.windows(2).all(|w| w[0] < w[1]), "sorted, for the postings");
    }

    #[test]
    fn the_words_of_import_statements_are_told_apart() {
        let text = b"import pkg.models as m\nfrom .utils import (\n    score,  # helper\n    fit,\n)\nx = 1; from .. import extra\nfrom a \\\n    import joined\nyield_from = tail\nraise E from cause\n\"\"\"\nfrom the paper\n\"\"\"\ndef f():\n    import inner\n";
        let FileWords { mentioned, imported, .. } = scan_words(text);
        let said_imported = |w: &str| imported.contains(&word_hash(w.as_bytes()));
        for w in ["pkg", "models", "m", "utils", "score", "fit", "extra", "a", "joined", "inner"] {
            assert!(said_imported(w), "{w} is written in an import");
        }
        // The comment inside the parenthesized import is in it; lines after it are not.
        assert!(said_imported("helper"));
        for w in ["x", "yield_from", "tail", "E", "cause", "f", "def"] {
            assert!(!said_imported(w), "{w} is not in an import");
        }
        // A docstring line that starts with `from` passes for one: seeing too much only
        // keeps a summary that is not needed.
        assert!(said_imported("paper"));
        assert!(imported.iter().all(|h| mentioned.contains(h)), "an imported word is a mentioned one");
    }

    #[test]
    fn postings_give_each_words_files_in_order() {
        let postings = Postings::of(vec![vec![1, 5], vec![], vec![5, 9], vec![1, 5, 9]]);
        assert_eq!(postings.files(1), [0, 3]);
        assert_eq!(postings.files(5), [0, 2, 3]);
        assert_eq!(postings.files(9), [2, 3]);
        assert!(postings.files(4).is_empty() && postings.files(10).is_empty() && postings.files(0).is_empty());
        // A file's words in any order, a word first seen in a later file.
        let postings = Postings::of(vec![vec![], vec![9, 1], vec![1], vec![5, 9, 1]]);
        assert_eq!(postings.files(9), [1, 3]);
        assert_eq!(postings.files(1), [1, 2, 3]);
        assert_eq!(postings.files(5), [3]);
        assert!(Postings::of(Vec::new()).files(1).is_empty());
    }

    #[test]
    fn a_file_is_found_through_its_folders_listing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("pkg")).unwrap();
        write(root, "pkg/__init__.py", "");
        write(root, "pkg/models.py", "");
        std::fs::create_dir_all(root.join("pkg/odd.py")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("pkg/models.py"), root.join("pkg/linked.py")).unwrap();
        let project = Project::new(vec![root.to_owned()], Vec::new());
        assert!(project.exists(&root.join("pkg/models.py")));
        assert!(project.exists(&root.join("pkg/__init__.py")));
        assert!(!project.exists(&root.join("pkg/odd.py")), "a folder named like a module is no file");
        assert!(!project.exists(&root.join("pkg/missing.py")));
        assert!(!project.exists(&root.join("torch/__init__.py")), "under a folder that does not exist");
        assert!(!project.exists(&root.join("pkg/models.py/x.py")), "under a file");
        #[cfg(unix)]
        assert!(project.exists(&root.join("pkg/linked.py")), "a link to a file is a file");
        // A folder its parent does not list is never read.
        assert_eq!(lock(&project.listings).get(root.join("torch").as_os_str()), Some(&None));
        // Created later, in a new folder: found once the project is told.
        std::fs::create_dir_all(root.join("torch")).unwrap();
        write(root, "torch/__init__.py", "");
        assert!(!project.exists(&root.join("torch/__init__.py")), "the listings are kept");
        project.invalidate(&root.join("torch/__init__.py"), None);
        assert!(project.exists(&root.join("torch/__init__.py")));
        // Relative paths read the current folder's listing.
        let cwd = std::env::current_dir().unwrap();
        let relative = Path::new("Cargo.toml");
        assert_eq!(project.exists(relative), cwd.join(relative).is_file());
        assert!(!project.exists(Path::new("no-such-folder/x.py")));
    }

    #[test]
    fn a_file_created_under_the_current_folder_is_found_once_told_by_its_absolute_path() {
        // Module keys under the current folder are relative to it (`Project::key`), so
        // resolution reads the listings of relative folders; an editor tells of a new file
        // by its absolute path.
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        let dir = tempfile::tempdir_in(&cwd).unwrap();
        let absolute = dir.path().to_owned();
        std::fs::create_dir_all(absolute.join("pkg")).unwrap();
        write(&absolute, "pkg/__init__.py", "");
        let new_file = PathBuf::from(Project::key(&absolute.join("pkg/new.py")));
        assert!(new_file.is_relative(), "keyed relative to the current folder: {}", new_file.display());
        let project = Project::new(vec![absolute.clone()], Vec::new());
        assert!(!project.exists(&new_file));
        write(&absolute, "pkg/new.py", "");
        assert!(!project.exists(&new_file), "the listings are kept");
        project.invalidate(&absolute.join("pkg/new.py"), None);
        assert!(project.exists(&new_file), "the listing of the file's folder, as its key spells it, is read again");
    }

    #[test]
    fn a_file_that_never_calls_a_name_is_not_parsed_to_look_for_its_calls() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let utils = dir.path().join("utils.py");
        let caller = dir.path().join("caller.py");
        let mentioner = dir.path().join("mentioner.py");
        std::fs::write(&utils, "def evaluate(net):\n    return net\n").expect("write utils.py");
        std::fs::write(&caller, "from utils import evaluate\n\nevaluate(net)\n").expect("write caller.py");
        std::fs::write(&mentioner, "import utils\n\nhandler = utils.evaluate\n").expect("write mentioner.py");
        let project = Project::new(Vec::new(), vec![utils.clone(), caller.clone(), mentioner.clone()]);
        let key = Project::key(&utils);
        let mut candidates = project.candidate_callers(&key, "evaluate");
        candidates.sort();
        let mut expected = vec![Project::key(&caller), Project::key(&mentioner)];
        expected.sort();
        assert_eq!(candidates, expected, "both mention the function and its module");
        assert!(project.may_call(&Project::key(&caller), "evaluate"));
        assert!(!project.may_call(&Project::key(&mentioner), "evaluate"), "only a reference, never a call");
        assert!(project.may_call("not/a/file/of/the/run.py", "evaluate"), "unknown files are not ruled out");
    }

    #[test]
    fn a_summary_read_from_the_store_is_the_one_a_parse_gives() {
        let (dir, models, train) = two_files();
        let store = || SummaryStore::open(&dir.path().join("cache"), "build-a");
        let key = Project::key(&models);
        let first = Project::new(Vec::new(), vec![models.clone(), train.clone()]).with_summary_store(store());
        let parsed = first.summary(&key).expect("models.py is summarized");
        assert_eq!((first.modules_parsed_for_summary(), first.summaries_read_from_store()), (1, 0));
        first.flush_writes();
        let second = Project::new(Vec::new(), vec![models.clone(), train.clone()]).with_summary_store(store());
        let stored = second.summary(&key).expect("models.py is summarized");
        assert_eq!((second.modules_parsed_for_summary(), second.summaries_read_from_store()), (0, 1), "read, not parsed");
        assert_eq!(*stored, *parsed);
        // Another build keeps its own summaries; a changed text is parsed again.
        let other_build = Project::new(Vec::new(), vec![models.clone()]).with_summary_store(SummaryStore::open(&dir.path().join("cache"), "build-b"));
        other_build.summary(&key);
        assert_eq!(other_build.summaries_read_from_store(), 0);
        std::fs::write(&models, "class Net:\n    pass\n").expect("write models.py");
        let changed = Project::new(Vec::new(), vec![models, train]).with_summary_store(store());
        assert!(changed.summary(&key).is_some_and(|s| *s != *parsed));
        assert_eq!(changed.summaries_read_from_store(), 0);
    }

    #[test]
    fn opening_a_store_deletes_the_summaries_of_builds_unused_for_a_week() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let folder = |build: &str| cache.join("summaries").join(&blake3::hash(build.as_bytes()).to_hex()[..16]);
        SummaryStore::open(&cache, "old").unwrap();
        SummaryStore::open(&cache, "recent").unwrap();
        std::fs::write(folder("old").join("ab"), b"an entry").unwrap();
        let long_ago = std::time::SystemTime::now() - STALE_BUILD_AFTER - std::time::Duration::from_secs(3600);
        std::fs::File::options().write(true).open(folder("old").join(LAST_USED)).unwrap().set_modified(long_ago).unwrap();
        SummaryStore::open(&cache, "current").unwrap();
        assert!(!folder("old").exists(), "a build unused for over a week is deleted");
        assert!(folder("recent").is_dir(), "a build used lately is kept");
        assert!(folder("current").join(LAST_USED).is_file());
        // The build that opens is never deleted, however old its mark.
        std::fs::File::options().write(true).open(folder("current").join(LAST_USED)).unwrap().set_modified(long_ago).unwrap();
        SummaryStore::open(&cache, "current").unwrap();
        assert!(folder("current").is_dir());
    }
}
