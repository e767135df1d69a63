//! The `LanguageServer` implementation: document sync, lint scheduling, diagnostics
//! (pushed or pulled), code actions, hover and settings.

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use memlint_linter::{Applicability, FixMode, LinterSettings, RuleSelection, Severity};
use memlint_python::tree_sitter::Tree;
use serde_json::{json, Value};
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::lsp_types as lsp;
use tower_lsp_server::lsp_types::notification::Notification as _;
use tower_lsp_server::lsp_types::{
    CodeAction, CodeActionKind, CodeActionOptions, CodeActionOrCommand, CodeActionParams, CodeActionProviderCapability,
    CodeActionResponse, DiagnosticOptions, DiagnosticServerCapabilities, DidChangeConfigurationParams,
    DidChangeNotebookDocumentParams, DidChangeTextDocumentParams, DidChangeWatchedFilesParams,
    DidChangeWatchedFilesRegistrationOptions, DidCloseNotebookDocumentParams, DidCloseTextDocumentParams,
    DidOpenNotebookDocumentParams, DidOpenTextDocumentParams, DocumentDiagnosticParams, DocumentDiagnosticReport,
    DocumentDiagnosticReportResult, FileSystemWatcher, FullDocumentDiagnosticReport, GlobPattern, Hover,
    HoverContents, HoverParams, HoverProviderCapability, InitializeParams, InitializeResult, InitializedParams,
    MarkupContent, MarkupKind, MessageType, NotebookCellKind, NotebookCellSelector, NotebookDocumentSyncOptions,
    NotebookSelector, OneOf, Registration, RelatedFullDocumentDiagnosticReport,
    RelatedUnchangedDocumentDiagnosticReport, ServerCapabilities, ServerInfo, TextDocumentSyncCapability,
    TextDocumentSyncKind, TextDocumentSyncOptions, TextEdit, UnchangedDocumentDiagnosticReport, Uri, WorkspaceEdit,
};
use tower_lsp_server::{Client, LanguageServer, UriExt};

use crate::actions;
use crate::document::{Document, Encoding};
use crate::hover;
use crate::incremental::Baseline;
use crate::notebook;
use crate::published::PublishedJson;
use crate::settings::{ClientSettings, DocumentSettings, SettingsStore};

/// The code action kind of "fix everything memlint can fix".
pub const FIX_ALL: CodeActionKind = CodeActionKind::new("source.fixAll.memlint");

/// The Python files whose changes re-lint the open files that import them.
const PYTHON_FILES: &str = "**/*.py";

/// The configuration files whose changes re-resolve settings.
const WATCHED: &[&str] = &["**/pyproject.toml", "**/memlint.toml", "**/.memlint.toml"];

pub struct Server {
    client: Client,
    /// Set by [`crate::Service`] from the raw `initialize` params.
    pub(crate) raw_refresh_support: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
    /// Held from the version check to the end of `publishDiagnostics`, so an older
    /// version's results can never be published after a newer one's; it guards the JSON
    /// of the findings last published, which the next publish writes again where it can.
    publish_lock: Arc<tokio::sync::Mutex<PublishedJson>>,
    /// Where `publishDiagnostics` goes when the server owns its output (see
    /// [`crate::serve_with`]): written from the typed params, not through a
    /// `serde_json::Value` tree, which for a thousand findings costs more than linting.
    direct_output: Option<crate::DirectOutput>,
}

/// The findings of one version of a document, with the settings generation they used.
struct Linted {
    version: i32,
    generation: u64,
    findings: Arc<Findings>,
    /// A prediction (see [`crate::incremental`]): `schedule` published it, and a complete
    /// lint of the same version is still to come.
    predicted: bool,
}

/// A document's findings, and where the facts of their evidence are.
#[derive(Default)]
pub(crate) struct Findings {
    pub(crate) diagnostics: Vec<memlint_linter::Diagnostic>,
    /// Per finding, per fact of its evidence: the cell document the fact lies in when it is
    /// another cell of the notebook (its range counts in that cell's bytes); `None` for a
    /// fact in this document or with no place. Empty for a file.
    elsewhere: Vec<Vec<Option<Uri>>>,
}

impl Findings {
    pub(crate) fn of_file(diagnostics: Vec<memlint_linter::Diagnostic>) -> Findings {
        Findings { diagnostics, elsewhere: Vec::new() }
    }

    /// Per fact of finding `i`: the other cell it lies in (see `elsewhere`); empty for a file.
    pub(crate) fn elsewhere_of(&self, i: usize) -> &[Option<Uri>] {
        self.elsewhere.get(i).map_or(&[], Vec::as_slice)
    }

    /// The document a fact of finding `i` lies in: `doc`, or another cell of its notebook
    /// (`None` when that cell is no longer open).
    pub(crate) fn fact_document<'a>(&self, i: usize, fact: usize, doc: &'a Document, docs: &'a HashMap<Uri, Document>) -> Option<&'a Document> {
        match self.elsewhere.get(i).and_then(|places| places.get(fact)).and_then(Option::as_ref) {
            Some(uri) => docs.get(uri),
            None => Some(doc),
        }
    }

    /// Each fact's place in words, as the hover shows it: `line 12` in a file, `cell 3,
    /// line 2` in a notebook (the cell counted among all of the notebook's cells, as
    /// `memlint check` counts them); `None` for a fact with no place.
    fn fact_places(&self, i: usize, doc: &Document, state: &State) -> Vec<Option<String>> {
        let d = &self.diagnostics[i];
        d.evidence
            .iter()
            .enumerate()
            .map(|(j, fact)| {
                let range = fact.range.as_ref()?;
                let target = self.fact_document(i, j, doc, &state.docs)?;
                let line = target.index.line_of(range.start.min(target.text.len())) + 1;
                match &target.notebook {
                    Some(nb) => {
                        let cell = state.notebooks.get(nb).and_then(|n| n.cells.iter().position(|(u, _)| *u == target.uri));
                        Some(match cell {
                            Some(c) => format!("cell {}, line {line}", c + 1),
                            None => format!("line {line} of its cell"),
                        })
                    }
                    None => Some(format!("line {line}")),
                }
            })
            .collect()
    }
}

struct NotebookDoc {
    /// Every cell in order, and whether it is a code cell.
    cells: Vec<(Uri, bool)>,
}

struct State {
    encoding: Encoding,
    /// The client pulls diagnostics (`textDocument/diagnostic`); nothing is pushed then.
    pull: bool,
    /// The client resolves a code action's `edit` lazily (`codeAction/resolve`).
    lazy_edits: bool,
    refresh_support: bool,
    watch_dynamic: bool,
    roots: Vec<PathBuf>,
    docs: HashMap<Uri, Document>,
    lints: HashMap<Uri, Linted>,
    /// By document, or by notebook for its cells.
    settings: HashMap<Uri, Arc<DocumentSettings>>,
    notebooks: HashMap<Uri, NotebookDoc>,
    store: SettingsStore,
    /// Bumped when settings change: findings of an older generation are stale.
    generation: u64,
    /// Messages not yet shown (startup problems, configuration errors).
    pending_messages: Vec<(MessageType, String)>,
    shown: HashSet<String>,
    /// The workspace's project (built on the first lint of a file, see `workspace.rs`).
    project: Option<Arc<memlint_project::Project>>,
    /// For each open document: the project modules its last lint read (a change to one
    /// of them re-lints it), and the names whose callers in other modules it asked about
    /// (a changed file that mentions one may have become a caller: it re-lints it too).
    dependencies: HashMap<Uri, (Vec<PathBuf>, Vec<String>)>,
    /// The build identity summaries are stored under (see [`crate::Options`]).
    summary_build: Option<String>,
    /// Per open file: its last complete lint, which a prediction after an edit starts from
    /// (see [`crate::incremental`]), and how long it took.
    baselines: HashMap<Uri, (Arc<Baseline>, Duration)>,
    /// See [`crate::Options::predict_after`].
    predict_after: Duration,
    /// The files whose complete lint after a prediction is running, and whether a newer
    /// prediction asked for another when it ends.
    refreshing: HashMap<Uri, bool>,
}

/// How long typing must pause before the complete lint that checks a prediction starts:
/// while keys come faster, it would only take a core from the next keystroke's prediction.
const REFRESH_PAUSE: Duration = Duration::from_millis(50);

/// How [`Server::lint`] lints.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LintMode {
    /// A file's findings may be predicted from its last complete lint.
    Predict,
    /// A complete lint, dropped unrun if the client moves on before it starts.
    Complete,
    /// A complete lint that runs even for a version the client has moved past: it is the
    /// next prediction's baseline.
    Refresh,
}

/// Work for one lint: a file, or every Python cell of a notebook.
struct Job {
    generation: u64,
    settings: Arc<DocumentSettings>,
    kind: JobKind,
    /// The workspace project and the document's path in it.
    project: Option<(Arc<memlint_project::Project>, PathBuf)>,
    /// A file's last complete lint: when set, the job first tries to predict its findings
    /// from it (see [`crate::incremental`]).
    predict_from: Option<Arc<Baseline>>,
}

enum JobKind {
    File { uri: Uri, version: i32, text: String, tree: Tree },
    Notebook { notebook: Uri, cells: Vec<(Uri, i32, String)> },
}

struct JobOutput {
    generation: u64,
    /// A notebook's cells as linted: results are stale once cells are added or removed.
    notebook: Option<(Uri, Vec<Uri>)>,
    /// Per document: the version linted and its findings.
    entries: Vec<(Uri, i32, Findings)>,
    problems: Vec<String>,
    /// The project modules the lint read, and the names whose callers elsewhere it asked
    /// about (`None` for a prediction: it read only part of the file, so the complete
    /// lint's record stands).
    dependencies: Option<(Vec<PathBuf>, Vec<String>)>,
    /// A file's complete lint, to predict the next edit's findings from, and its time.
    baseline: Option<(Uri, Baseline, Duration)>,
    /// The findings are a prediction: a complete lint is still to come.
    predicted: bool,
}

impl Job {
    fn versions(&self) -> Vec<(&Uri, i32)> {
        match &self.kind {
            JobKind::File { uri, version, .. } => vec![(uri, *version)],
            JobKind::Notebook { cells, .. } => cells.iter().map(|(u, v, _)| (u, *v)).collect(),
        }
    }

    fn is_current(&self, state: &State) -> bool {
        let cells_unchanged = match &self.kind {
            JobKind::File { .. } => true,
            JobKind::Notebook { notebook, cells } => {
                state.code_cells(notebook) == cells.iter().map(|(u, _, _)| u.clone()).collect::<Vec<_>>()
            }
        };
        cells_unchanged
            && self.generation == state.generation
            && self.versions().into_iter().all(|(uri, v)| state.docs.get(uri).map(|d| d.version) == Some(v))
    }

    fn run(self) -> JobOutput {
        let linter = &self.settings.linter;
        let mut linted_cells = None;
        let resolver = self.project.as_ref().map(|(p, path)| memlint_python::ProjectResolver::new(&**p, memlint_project::Project::key(path)));
        let index: &dyn memlint_linter::ProjectIndex = match &resolver {
            Some(r) => r,
            None => &memlint_linter::NoProject,
        };
        let mut baseline = None;
        let (entries, problems) = match self.kind {
            JobKind::File { uri, version, text, tree } => {
                let predicted = self.predict_from.as_deref().filter(|b| b.generation == self.generation).and_then(|from| {
                    crate::incremental::predict(from, &text, &tree, &|blanked| {
                        // A rule that panics gives no prediction: the complete lint reports it.
                        let (mut found, problems) =
                            lint_guarded(linter, 1, &|s| vec![memlint_linter::lint_unfiltered_in_project(blanked, s, index).diagnostics]);
                        problems.is_empty().then(|| found.pop().unwrap_or_default())
                    })
                });
                if let Some(found) = predicted {
                    let entries = vec![(uri, version, Findings::of_file(found))];
                    return JobOutput { generation: self.generation, notebook: None, entries, problems: Vec::new(), dependencies: None, baseline: None, predicted: true };
                }
                let started = Instant::now();
                let (mut per_unit, problems) =
                    lint_guarded(linter, 1, &|s| vec![memlint_linter::lint_tree_in_project(&text, &tree, s, index).diagnostics]);
                let found = per_unit.pop().unwrap_or_default();
                let took = started.elapsed();
                baseline = Some((uri.clone(), Baseline { text, tree, diagnostics: found.clone(), generation: self.generation }, took));
                (vec![(uri, version, Findings::of_file(found))], problems)
            }
            JobKind::Notebook { notebook, cells } => {
                linted_cells = Some((notebook, cells.iter().map(|(u, _, _)| u.clone()).collect()));
                let texts: Vec<&str> = cells.iter().map(|(_, _, t)| t.as_str()).collect();
                // The cells are linted as one program, then its findings are split by cell.
                let (per_cell, problems) = match notebook::notebook_of(&texts) {
                    Ok(nb) => {
                        let (mut program, problems) =
                            lint_guarded(linter, 1, &|s| vec![memlint_linter::lint_in_project(nb.python_source(), s, index).diagnostics]);
                        (notebook::split_cells(&nb, &texts, program.pop().unwrap_or_default()), problems)
                    }
                    Err(e) => (vec![Vec::new(); texts.len()], vec![format!("memlint: the notebook could not be read: {e}")]),
                };
                let entries = cells
                    .iter()
                    .enumerate()
                    .zip(per_cell)
                    .map(|((own, (u, v, _)), found)| {
                        let mut findings = Findings::default();
                        for f in found {
                            let places = f.fact_cells.iter().map(|c| c.filter(|c| *c != own).and_then(|c| cells.get(c)).map(|(u, _, _)| u.clone())).collect();
                            findings.elsewhere.push(places);
                            findings.diagnostics.push(f.diagnostic);
                        }
                        (u.clone(), *v, findings)
                    })
                    .collect();
                (entries, problems)
            }
        };
        let dependencies = Some(
            resolver
                .map(|r| (r.modules_read().into_iter().map(PathBuf::from).collect(), r.callers_asked().into_iter().map(|(_, name)| name).collect()))
                .unwrap_or_default(),
        );
        JobOutput { generation: self.generation, notebook: linted_cells, entries, problems, dependencies, baseline, predicted: false }
    }
}

/// Runs `run` under `catch_unwind`. If a rule panics, each enabled rule is re-run alone
/// so that only the broken rule's findings are lost, and the problem is reported.
fn lint_guarded(
    settings: &LinterSettings,
    units: usize,
    run: &dyn Fn(&LinterSettings) -> Vec<Vec<memlint_linter::Diagnostic>>,
) -> (Vec<Vec<memlint_linter::Diagnostic>>, Vec<String>) {
    match catch_unwind(AssertUnwindSafe(|| run(settings))) {
        Ok(found) => (found, Vec::new()),
        Err(_) => {
            let mut merged = vec![Vec::new(); units];
            let mut problems = Vec::new();
            for rule in settings.rules.iter() {
                let mut rules = RuleSelection::none();
                rules.enable(rule);
                let single = LinterSettings { rules, severity: settings.severity.clone() };
                match catch_unwind(AssertUnwindSafe(|| run(&single))) {
                    Ok(found) => {
                        for (unit, mut d) in merged.iter_mut().zip(found) {
                            unit.append(&mut d);
                        }
                    }
                    Err(payload) => problems.push(format!(
                        "memlint: rule {} ({}) crashed and was skipped for this document: {}",
                        rule.code(),
                        rule.name(),
                        panic_message(&payload)
                    )),
                }
            }
            for unit in &mut merged {
                unit.sort_by_key(|d| (d.range.start, d.rule));
            }
            if problems.is_empty() {
                problems.push("memlint: linting crashed on this document; no single rule is to blame".to_owned());
            }
            (merged, problems)
        }
    }
}

fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic without a message".to_owned())
}

fn to_lsp_severity(severity: Severity) -> lsp::DiagnosticSeverity {
    match severity {
        Severity::Info => lsp::DiagnosticSeverity::INFORMATION,
        Severity::Warning => lsp::DiagnosticSeverity::WARNING,
        Severity::Error => lsp::DiagnosticSeverity::ERROR,
    }
}

fn applicability_str(applicability: Applicability) -> &'static str {
    match applicability {
        Applicability::Safe => "safe",
        Applicability::Unsafe => "unsafe",
    }
}

fn text_edit(doc: &Document, edit: &memlint_linter::Edit, encoding: Encoding) -> TextEdit {
    TextEdit { range: doc.range(edit.range.clone(), encoding), new_text: edit.content.clone() }
}

/// Finding `i` of `doc` as an LSP diagnostic; its fix travels in `data` in the client's
/// positions, and each fact of its evidence that has a place is a `relatedInformation`
/// entry (in `doc`, or in another cell of its notebook).
fn to_lsp(doc: &Document, findings: &Findings, i: usize, docs: &HashMap<Uri, Document>, encoding: Encoding) -> lsp::Diagnostic {
    let wire = WireDiagnostic::of(doc, findings, i, docs, encoding);
    lsp::Diagnostic {
        range: wire.range,
        severity: Some(wire.severity),
        code: Some(lsp::NumberOrString::String(wire.code.to_owned())),
        code_description: wire.code_description,
        source: Some(wire.source.to_owned()),
        message: wire.message.to_owned(),
        related_information: wire.related_information,
        tags: None,
        data: serde_json::to_value(&wire.data).ok(),
    }
}

/// A diagnostic as `publishDiagnostics` writes it: the JSON of [`to_lsp`]'s
/// `lsp::Diagnostic`, serialized straight from the finding (its `data` is not built as a
/// `serde_json::Value` first, which for a thousand findings costs milliseconds).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireDiagnostic<'a> {
    range: lsp::Range,
    severity: lsp::DiagnosticSeverity,
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    code_description: Option<lsp::CodeDescription>,
    source: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    related_information: Option<Vec<lsp::DiagnosticRelatedInformation>>,
    data: WireData<'a>,
}

#[derive(serde::Serialize)]
struct WireData<'a> {
    name: &'a str,
    help: Option<&'a str>,
    fix: Option<WireFix<'a>>,
}

#[derive(serde::Serialize)]
struct WireFix<'a> {
    applicability: &'static str,
    message: &'a str,
    edits: Vec<TextEdit>,
}

impl<'a> WireDiagnostic<'a> {
    pub(crate) fn of(doc: &Document, findings: &'a Findings, i: usize, docs: &HashMap<Uri, Document>, encoding: Encoding) -> WireDiagnostic<'a> {
        let mut places = Vec::new();
        push_places(doc, findings, i, docs, encoding, &mut places);
        WireDiagnostic::placed(doc, findings, i, docs, &places)
    }

    /// Finding `i` at `places`, the client's positions [`push_places`] gives for it.
    pub(crate) fn placed(doc: &Document, findings: &'a Findings, i: usize, docs: &HashMap<Uri, Document>, places: &[Option<lsp::Range>]) -> WireDiagnostic<'a> {
        const PLACED: &str = "push_places gives a finding's own range and each fix edit's";
        let d = &findings.diagnostics[i];
        let (range, rest) = places.split_first().expect(PLACED);
        let (facts, edits) = rest.split_at(d.evidence.len());
        let related: Vec<lsp::DiagnosticRelatedInformation> = d
            .evidence
            .iter()
            .zip(facts)
            .enumerate()
            .filter_map(|(j, (fact, place))| {
                let range = (*place)?;
                let target = findings.fact_document(i, j, doc, docs)?;
                Some(lsp::DiagnosticRelatedInformation {
                    location: lsp::Location { uri: target.uri.clone(), range },
                    message: fact.text.clone(),
                })
            })
            .collect();
        let fix = d.fix.as_ref().map(|fix| WireFix {
            applicability: applicability_str(fix.applicability),
            message: &fix.message,
            edits: fix.edits.iter().zip(edits).map(|(e, place)| TextEdit { range: place.expect(PLACED), new_text: e.content.clone() }).collect(),
        });
        WireDiagnostic {
            range: range.expect(PLACED),
            severity: to_lsp_severity(d.severity),
            code: d.rule.code(),
            // Only an absolute URI is a link; the docs' path inside memlint's repository
            // (while it has no public home) is shown in the hover instead.
            code_description: Some(d.rule.url()).filter(|u| u.contains("://")).and_then(|u| u.parse().ok()).map(|href| lsp::CodeDescription { href }),
            source: "memlint",
            message: &d.message,
            related_information: (!related.is_empty()).then_some(related),
            data: WireData { name: d.rule.name(), help: d.help.as_deref(), fix },
        }
    }
}

/// Appends where finding `i`'s JSON puts it, in the client's positions, in order: its own
/// range, each fact's range in the document it lies in (`None` for a fact with no place, or
/// in a cell no longer open), each fix edit's range. [`WireDiagnostic::placed`] reads them
/// back; with the finding's words, the fact documents and the document's URI they decide
/// its JSON (which is how `published.rs` knows a finding's JSON is unchanged).
pub(crate) fn push_places(doc: &Document, findings: &Findings, i: usize, docs: &HashMap<Uri, Document>, encoding: Encoding, out: &mut Vec<Option<lsp::Range>>) {
    let d = &findings.diagnostics[i];
    out.push(Some(doc.range(d.range.clone(), encoding)));
    out.extend(d.evidence.iter().enumerate().map(|(j, fact)| {
        let range = fact.range.as_ref()?;
        Some(findings.fact_document(i, j, doc, docs)?.range(range.clone(), encoding))
    }));
    out.extend(d.fix.iter().flat_map(|f| f.edits.iter()).map(|e| Some(doc.range(e.range.clone(), encoding))));
}

/// The params of `publishDiagnostics` as the direct output writes them: each finding's
/// JSON made by [`PublishedJson`].
#[derive(serde::Serialize)]
struct WirePublish<'a> {
    uri: &'a Uri,
    diagnostics: Vec<&'a serde_json::value::RawValue>,
    version: i32,
}

fn content_modified() -> Error {
    Error { code: ErrorCode::ContentModified, message: "the document changed while memlint was linting it".into(), data: None }
}

fn unknown_document(uri: &Uri) -> Error {
    Error::invalid_params(format!("memlint has no open document {}", uri.as_str()))
}

fn file_path(uri: &Uri) -> Option<PathBuf> {
    if uri.scheme().map(|s| s.as_str()) != Some("file") {
        return None;
    }
    uri.to_file_path().map(|p| p.into_owned())
}

impl State {
    fn new() -> State {
        let (store, _) = SettingsStore::new(ClientSettings::default(), Vec::new());
        State {
            encoding: Encoding::Utf16,
            pull: false,
            lazy_edits: false,
            refresh_support: false,
            watch_dynamic: false,
            roots: Vec::new(),
            docs: HashMap::new(),
            lints: HashMap::new(),
            settings: HashMap::new(),
            notebooks: HashMap::new(),
            store,
            generation: 0,
            pending_messages: Vec::new(),
            shown: HashSet::new(),
            project: None,
            dependencies: HashMap::new(),
            summary_build: None,
            baselines: HashMap::new(),
            predict_after: crate::PREDICT_AFTER,
            refreshing: HashMap::new(),
        }
    }

    /// The key settings are kept under: the notebook for a cell, else the document.
    fn settings_key(&self, uri: &Uri) -> Uri {
        self.docs.get(uri).and_then(|d| d.notebook.clone()).unwrap_or_else(|| uri.clone())
    }

    /// Resolves (again) the settings of `key` (a document or a notebook).
    fn resolve_settings(&mut self, key: &Uri) -> Arc<DocumentSettings> {
        let path = file_path(key);
        let settings = match self.store.for_path(path.as_deref()) {
            Ok(settings) => settings,
            Err((message, keep)) => {
                if self.shown.insert(message.clone()) {
                    self.pending_messages.push((MessageType::ERROR, message));
                }
                // The last good settings of this very document win over the folder's.
                self.settings.get(key).cloned().unwrap_or(keep)
            }
        };
        self.settings.insert(key.clone(), settings.clone());
        settings
    }

    fn settings_for(&mut self, uri: &Uri) -> Arc<DocumentSettings> {
        let key = self.settings_key(uri);
        match self.settings.get(&key) {
            Some(s) => s.clone(),
            None => self.resolve_settings(&key),
        }
    }

    /// The workspace project (built now if it is not yet) and the path of `uri` in it;
    /// `None` for a document that is not a file.
    fn project_for(&mut self, uri: &Uri) -> Option<(Arc<memlint_project::Project>, PathBuf)> {
        let path = file_path(uri)?;
        let (roots, build) = (&self.roots, self.summary_build.as_deref());
        let project = self
            .project
            .get_or_insert_with(|| {
                let store = build.and_then(|b| crate::workspace::summary_store(roots, b));
                Arc::new(memlint_project::Project::new(roots.clone(), crate::workspace::python_files(roots)).with_summary_store(store))
            })
            .clone();
        Some((project, path))
    }

    /// The open units (documents, notebooks) whose last lint read one of `paths`.
    fn dependents_of(&self, paths: &[PathBuf]) -> Vec<Uri> {
        // What the changed files say now: one that mentions a name whose callers a lint
        // asked about may call it now.
        let texts: Vec<String> = paths.iter().filter_map(|p| std::fs::read_to_string(p).ok()).collect();
        let words: Vec<memlint_linter::prefilter::Words<'_>> = texts.iter().map(|text| memlint_linter::prefilter::Words::scan(text)).collect();
        let mentioned = |name: &String| words.iter().any(|w| w.has(name));
        self.dependencies
            .iter()
            .filter(|(_, (modules, callers))| modules.iter().any(|d| paths.contains(d)) || callers.iter().any(mentioned))
            .map(|(u, _)| u.clone())
            .collect()
    }

    /// The open Python code cells of a notebook, in order.
    fn code_cells(&self, notebook: &Uri) -> Vec<Uri> {
        self.notebooks
            .get(notebook)
            .map(|nb| nb.cells.iter().filter(|(u, code)| *code && self.docs.contains_key(u)).map(|(u, _)| u.clone()).collect())
            .unwrap_or_default()
    }

    /// The lint of the unit `uri` belongs to; `predict`: a file's may first predict its
    /// findings from its last complete lint (never when the client pulls: what it pulls,
    /// it keeps).
    fn job(&mut self, uri: &Uri, predict: bool) -> Option<Job> {
        let doc = self.docs.get(uri)?;
        let generation = self.generation;
        match doc.notebook.clone() {
            Some(nb) => {
                let cells = self
                    .code_cells(&nb)
                    .into_iter()
                    .filter_map(|u| self.docs.get(&u).map(|d| (u.clone(), d.version, d.text.clone())))
                    .collect();
                let settings = self.settings_for(uri);
                let project = self.project_for(&nb);
                Some(Job { generation, settings, kind: JobKind::Notebook { notebook: nb, cells }, project, predict_from: None })
            }
            None => {
                let kind = JobKind::File { uri: uri.clone(), version: doc.version, text: doc.text.clone(), tree: doc.tree.clone() };
                let settings = self.settings_for(uri);
                let project = self.project_for(uri);
                let predict_from = self
                    .baselines
                    .get(uri)
                    .filter(|(_, took)| predict && !self.pull && *took >= self.predict_after)
                    .map(|(baseline, _)| baseline.clone());
                Some(Job { generation, settings, kind, project, predict_from })
            }
        }
    }

    /// Stores a job's findings if they are still current; returns the documents updated.
    fn store(&mut self, output: JobOutput) -> Vec<Uri> {
        let mut updated = Vec::new();
        if output.generation != self.generation {
            return updated;
        }
        // A complete lint is a good start for the next prediction even once its version
        // is past (the prediction compares texts, not versions).
        if let Some((uri, baseline, took)) = output.baseline {
            if self.docs.contains_key(&uri) {
                self.baselines.insert(uri, (Arc::new(baseline), took));
            }
        }
        if let Some((notebook, cells)) = &output.notebook {
            if self.code_cells(notebook) != *cells {
                return updated;
            }
        }
        let all_current = output.entries.iter().all(|(u, v, _)| self.docs.get(u).map(|d| d.version) == Some(*v));
        if !all_current {
            return updated;
        }
        for problem in output.problems {
            self.pending_messages.push((MessageType::ERROR, problem));
        }
        if let (Some((uri, _, _)), Some(dependencies)) = (output.entries.first(), output.dependencies) {
            let unit = output.notebook.as_ref().map(|(nb, _)| nb.clone()).unwrap_or_else(|| uri.clone());
            self.dependencies.insert(unit, dependencies);
        }
        for (uri, version, findings) in output.entries {
            // The complete lint that confirms a published prediction changes nothing to
            // publish. (Findings a request linted for are stored unpublished: a lint of
            // the same version after them is published.)
            let confirmed = !output.predicted
                && self.lints.get(&uri).is_some_and(|l| {
                    l.predicted && l.version == version && l.generation == output.generation && l.findings.diagnostics == findings.diagnostics
                });
            let predicted = output.predicted;
            self.lints.insert(uri.clone(), Linted { version, generation: output.generation, findings: Arc::new(findings), predicted });
            if !confirmed {
                updated.push(uri);
            }
        }
        updated
    }

    fn current_lint(&self, uri: &Uri) -> Option<Arc<Findings>> {
        let doc = self.docs.get(uri)?;
        self.lints
            .get(uri)
            .filter(|l| l.version == doc.version && l.generation == self.generation)
            .map(|l| l.findings.clone())
    }

    fn lsp_diagnostics(&self, uri: &Uri) -> Option<(i32, Vec<lsp::Diagnostic>)> {
        let doc = self.docs.get(uri)?;
        let lint = self.current_lint(uri)?;
        Some((doc.version, (0..lint.diagnostics.len()).map(|i| to_lsp(doc, &lint, i, &self.docs, self.encoding)).collect()))
    }

    /// Re-resolves every open document's settings and invalidates their findings.
    fn reload(&mut self, client: ClientSettings) {
        let (store, problems) = self.store.reload(client);
        self.store = store;
        self.shown.clear();
        for problem in problems {
            self.shown.insert(problem.clone());
            self.pending_messages.push((MessageType::ERROR, problem));
        }
        let keys: Vec<Uri> = self.settings.keys().cloned().collect();
        for key in keys {
            self.resolve_settings(&key);
        }
        self.generation += 1;
    }

    /// One document per lint unit: each file, and the first open cell of each notebook.
    fn units(&self) -> Vec<Uri> {
        let mut seen = HashSet::new();
        self.docs
            .values()
            .filter(|d| d.notebook.as_ref().map(|nb| seen.insert(nb.as_str().to_owned())).unwrap_or(true))
            .map(|d| d.uri.clone())
            .collect()
    }
}

impl Server {
    pub fn new(client: Client) -> Server {
        Server::with_options(client, crate::Options::default())
    }

    pub fn with_options(client: Client, options: crate::Options) -> Server {
        Server::with_output(client, options, None)
    }

    pub(crate) fn with_output(client: Client, options: crate::Options, direct_output: Option<crate::DirectOutput>) -> Server {
        let mut state = State::new();
        state.summary_build = options.summary_build;
        state.predict_after = options.predict_after;
        Server {
            client,
            raw_refresh_support: Arc::new(AtomicBool::new(false)),
            state: Arc::new(Mutex::new(state)),
            publish_lock: Arc::new(tokio::sync::Mutex::new(PublishedJson::default())),
            direct_output,
        }
    }

    fn handle(&self) -> Server {
        Server {
            client: self.client.clone(),
            raw_refresh_support: self.raw_refresh_support.clone(),
            state: self.state.clone(),
            publish_lock: self.publish_lock.clone(),
            direct_output: self.direct_output.clone(),
        }
    }

    /// `textDocument/publishDiagnostics`, through the direct output when there is one.
    async fn publish_diagnostics(&self, uri: Uri, diagnostics: Vec<lsp::Diagnostic>, version: Option<i32>) {
        match &self.direct_output {
            // A finding's diagnostic takes about a kilobyte.
            Some(output) => {
                let size = 1024 * (diagnostics.len() + 1);
                output.notify("textDocument/publishDiagnostics", &lsp::PublishDiagnosticsParams { uri, diagnostics, version }, size)
            }
            None => self.client.publish_diagnostics(uri, diagnostics, version).await,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held (none is expected: linting runs outside it)
        // must not wedge the server: the state is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn flush_messages(&self) {
        let messages = std::mem::take(&mut self.state().pending_messages);
        for (typ, message) in messages {
            self.client.show_message(typ, &message).await;
            self.client.log_message(typ, message).await;
        }
    }

    /// Lints the unit `uri` belongs to (unless a newer version arrives first) and stores
    /// the findings; returns the documents updated, and whether the findings are a
    /// prediction (a file's may be in [`LintMode::Predict`], see [`crate::incremental`]).
    async fn lint(&self, uri: &Uri, mode: LintMode) -> (Vec<Uri>, bool) {
        let Some(job) = self.state().job(uri, mode == LintMode::Predict) else { return (Vec::new(), false) };
        let state = self.state.clone();
        let output = match mode {
            // The complete lint after a prediction yields to the next keystroke's.
            LintMode::Refresh => crate::background::run(move || job.run()).await,
            _ => tokio::task::spawn_blocking(move || {
                // Dropped unseen if the client has moved on while this waited for a thread.
                if !job.is_current(&state.lock().unwrap_or_else(|e| e.into_inner())) {
                    return None;
                }
                Some(job.run())
            })
            .await
            .ok()
            .flatten(),
        };
        match output {
            Some(output) => {
                let predicted = output.predicted;
                (self.state().store(output), predicted)
            }
            _ => (Vec::new(), false),
        }
    }

    /// Push mode: lint in the background and publish if still current. After an edit
    /// inside one definition of a file, a prediction is published first; a complete lint
    /// follows (see [`Server::refresh`]) and is published only where it differs.
    fn schedule(&self, uri: Uri) {
        let server = self.handle();
        tokio::spawn(async move {
            let (updated, predicted) = server.lint(&uri, LintMode::Predict).await;
            server.publish(updated).await;
            if predicted {
                server.refresh(uri).await;
            }
        });
    }

    /// The complete lint after a prediction: once typing pauses for [`REFRESH_PAUSE`] (a
    /// prediction meanwhile restarts the wait), one at a time per file, each of the version
    /// current when it starts, run even if the client moves on meanwhile (it is the next
    /// prediction's baseline); a prediction made while one runs asks for one more after
    /// it, so the last version typed always gets its complete lint.
    async fn refresh(&self, uri: Uri) {
        {
            let mut state = self.state();
            if let Some(again) = state.refreshing.get_mut(&uri) {
                *again = true;
                return;
            }
            state.refreshing.insert(uri.clone(), false);
        }
        loop {
            loop {
                tokio::time::sleep(REFRESH_PAUSE).await;
                let mut state = self.state();
                match state.refreshing.get_mut(&uri) {
                    Some(again) if *again => *again = false,
                    _ => break,
                }
            }
            let (updated, _) = self.lint(&uri, LintMode::Refresh).await;
            self.publish(updated).await;
            let mut state = self.state();
            match state.refreshing.get_mut(&uri) {
                Some(again) if *again => *again = false,
                _ => {
                    state.refreshing.remove(&uri);
                    return;
                }
            }
        }
    }

    /// Publishes the current findings of `updated`.
    async fn publish(&self, updated: Vec<Uri>) {
        let mut published = self.publish_lock.lock().await;
        if let Some(output) = &self.direct_output {
            {
                let state = self.state();
                published.retain_open(&state.docs);
                for uri in &updated {
                    let (Some(doc), Some(lint)) = (state.docs.get(uri), state.current_lint(uri)) else { continue };
                    let json = published.diagnostics(doc, &lint, &state.docs, state.encoding);
                    let size = json.iter().map(|j| j.get().len() + 1).sum::<usize>() + uri.as_str().len() + 64;
                    let diagnostics = json.iter().map(|j| &**j).collect();
                    output.notify("textDocument/publishDiagnostics", &WirePublish { uri, diagnostics, version: doc.version }, size);
                }
            }
            drop(published);
            self.flush_messages().await;
            return;
        }
        let to_publish: Vec<_> = {
            let state = self.state();
            updated.iter().filter_map(|u| state.lsp_diagnostics(u).map(|(v, d)| (u.clone(), v, d))).collect()
        };
        for (uri, version, diagnostics) in to_publish {
            self.publish_diagnostics(uri, diagnostics, Some(version)).await;
        }
        drop(published);
        self.flush_messages().await;
    }

    /// For requests: the findings of the document's current version, linting if needed.
    async fn current(&self, uri: &Uri) -> Result<Arc<Findings>> {
        if !self.state().docs.contains_key(uri) {
            return Err(unknown_document(uri));
        }
        if let Some(lint) = self.state().current_lint(uri) {
            return Ok(lint);
        }
        self.lint(uri, LintMode::Complete).await;
        self.flush_messages().await;
        let state = self.state();
        if !state.docs.contains_key(uri) {
            return Err(unknown_document(uri));
        }
        state.current_lint(uri).ok_or_else(content_modified)
    }

    /// After a settings change: push every unit again, or ask a pulling client to pull.
    async fn relint_all(&self) {
        let (pull, refresh, units) = {
            let state = self.state();
            (state.pull, state.refresh_support, state.units())
        };
        self.flush_messages().await;
        if pull {
            if refresh {
                if let Err(e) = self.client.workspace_diagnostic_refresh().await {
                    self.client.log_message(MessageType::WARNING, format!("memlint: diagnostic refresh failed: {e}")).await;
                }
            }
        } else {
            for uri in units {
                self.schedule(uri);
            }
        }
    }

    /// Python files of the workspace changed on disk: the project forgets what it read of
    /// them (and the workspace's file list when files came or went), and the open units
    /// that read one of them are linted again.
    async fn modules_changed(&self, paths: &[PathBuf], created_or_deleted: bool) {
        let (pull, refresh, dependents) = {
            let mut state = self.state();
            if let Some(project) = state.project.clone() {
                let files = created_or_deleted.then(|| crate::workspace::python_files(&state.roots));
                for (i, path) in paths.iter().enumerate() {
                    project.invalidate(path, if i == 0 { files.clone() } else { None });
                }
            }
            // A file created may now be imported by files whose lint found nothing there.
            let dependents = if created_or_deleted { state.units() } else { state.dependents_of(paths) };
            for uri in &dependents {
                state.lints.remove(uri);
                // Its findings outside an edit may have read what changed.
                state.baselines.remove(uri);
                for cell in state.code_cells(uri) {
                    state.lints.remove(&cell);
                }
            }
            if state.pull && !dependents.is_empty() {
                // Pulled results are identified by generation: a new one makes clients pull again.
                state.generation += 1;
            }
            (state.pull, state.refresh_support, dependents)
        };
        if dependents.is_empty() {
            return;
        }
        if pull {
            if refresh {
                if let Err(e) = self.client.workspace_diagnostic_refresh().await {
                    self.client.log_message(MessageType::WARNING, format!("memlint: diagnostic refresh failed: {e}")).await;
                }
            }
        } else {
            for uri in dependents {
                self.schedule(uri);
            }
        }
    }

    async fn clear(&self, uris: Vec<Uri>) {
        for uri in uris {
            self.publish_diagnostics(uri, Vec::new(), None).await;
        }
    }

    /// `memlint/malformedMessage`, sent by the input filter in place of a bad message.
    pub(crate) async fn malformed_message(&self, params: Value) {
        let problem = params.get("problem").and_then(Value::as_str).unwrap_or("a malformed message");
        self.log(MessageType::ERROR, format!("memlint: ignored {problem}")).await;
    }

    async fn log(&self, typ: MessageType, message: String) {
        self.client.log_message(typ, message).await;
    }

    /// The fix-all edit for the document's current version, computed off the async threads.
    async fn fix_all_edit(&self, uri: &Uri, version: i32) -> Result<WorkspaceEdit> {
        let stored = self.current(uri).await?;
        let (text, settings, is_cell) = {
            let mut state = self.state();
            let doc = state.docs.get(uri).ok_or_else(|| unknown_document(uri))?;
            if doc.version != version {
                return Err(content_modified());
            }
            let (text, is_cell) = (doc.text.clone(), doc.notebook.is_some());
            (text, state.settings_for(uri), is_cell)
        };
        let mode = if settings.unsafe_fixes { FixMode::Unsafe } else { FixMode::Safe };
        let original = text.clone();
        let fixed = tokio::task::spawn_blocking(move || {
            catch_unwind(AssertUnwindSafe(|| {
                if is_cell {
                    // A cell's fixes were computed on the whole notebook: apply them as stored.
                    actions::apply_stored_fixes(&text, &stored.diagnostics, mode)
                } else {
                    memlint_linter::apply_fixes(&text, &settings.linter, mode).source
                }
            }))
            .map_err(|p| panic_message(&p))
        })
        .await
        .map_err(|e| Error { code: ErrorCode::InternalError, message: e.to_string().into(), data: None })?
        .map_err(|p| Error { code: ErrorCode::InternalError, message: format!("memlint: fixing crashed: {p}").into(), data: None })?;
        let state = self.state();
        let doc = state.docs.get(uri).ok_or_else(|| unknown_document(uri))?;
        if doc.version != version {
            return Err(content_modified());
        }
        let edits: Vec<TextEdit> =
            actions::minimal_edit(&original, &fixed).map(|e| text_edit(doc, &e, state.encoding)).into_iter().collect();
        Ok(WorkspaceEdit { changes: Some(HashMap::from([(uri.clone(), edits)])), ..WorkspaceEdit::default() })
    }
}

/// Does an action of `kind` pass the client's `only` filter (kinds are hierarchical)?
fn wanted(only: Option<&Vec<CodeActionKind>>, kind: &CodeActionKind) -> bool {
    match only {
        None => true,
        Some(only) => only.iter().any(|o| {
            kind.as_str() == o.as_str() || kind.as_str().starts_with(&format!("{}.", o.as_str())) || o.as_str().is_empty()
        }),
    }
}

impl LanguageServer for Server {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let caps = &params.capabilities;
        let utf8 = caps
            .general
            .as_ref()
            .and_then(|g| g.position_encodings.as_ref())
            .map(|encodings| encodings.contains(&lsp::PositionEncodingKind::UTF8))
            .unwrap_or(false);
        let encoding = if utf8 { Encoding::Utf8 } else { Encoding::Utf16 };
        let text_caps = caps.text_document.as_ref();
        let pull = text_caps.and_then(|t| t.diagnostic.as_ref()).is_some();
        let lazy_edits = text_caps
            .and_then(|t| t.code_action.as_ref())
            .and_then(|c| c.resolve_support.as_ref())
            .map(|r| r.properties.iter().any(|p| p == "edit"))
            .unwrap_or(false);
        let workspace = caps.workspace.as_ref();
        let refresh_support = self.raw_refresh_support.load(Ordering::SeqCst)
            || workspace.and_then(|w| w.diagnostic.as_ref()).and_then(|d| d.refresh_support).unwrap_or(false);
        let watch_dynamic = workspace
            .and_then(|w| w.did_change_watched_files.as_ref())
            .and_then(|d| d.dynamic_registration)
            .unwrap_or(false);
        #[allow(deprecated)] // rootUri is what older clients (Neovim 0.7) send.
        let mut roots: Vec<PathBuf> = match &params.workspace_folders {
            Some(folders) if !folders.is_empty() => folders.iter().filter_map(|f| file_path(&f.uri)).collect(),
            _ => params.root_uri.as_ref().and_then(file_path).into_iter().collect(),
        };
        roots.dedup();
        let client_settings = ClientSettings::from_value(params.initialization_options.as_ref());
        {
            let mut state = self.state();
            let (store, problems) = SettingsStore::new(client_settings, roots.clone());
            *state = State {
                encoding,
                pull,
                lazy_edits,
                refresh_support,
                watch_dynamic,
                roots,
                store,
                pending_messages: problems.into_iter().map(|p| (MessageType::ERROR, p)).collect(),
                summary_build: state.summary_build.take(),
                predict_after: state.predict_after,
                ..State::new()
            };
        }
        let notebook = NotebookDocumentSyncOptions {
            notebook_selector: vec![NotebookSelector::ByNotebook {
                notebook: lsp::Notebook::String("*".to_owned()),
                cells: Some(vec![NotebookCellSelector { language: "python".to_owned() }]),
            }],
            save: None,
        };
        let capabilities = ServerCapabilities {
            position_encoding: Some(encoding.kind()),
            text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                save: Some(lsp::TextDocumentSyncSaveOptions::Supported(true)),
                ..TextDocumentSyncOptions::default()
            })),
            notebook_document_sync: Some(OneOf::Left(notebook)),
            hover_provider: Some(HoverProviderCapability::Simple(true)),
            code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
                code_action_kinds: Some(vec![CodeActionKind::QUICKFIX, FIX_ALL]),
                resolve_provider: Some(true),
                ..CodeActionOptions::default()
            })),
            diagnostic_provider: pull.then(|| {
                DiagnosticServerCapabilities::Options(DiagnosticOptions {
                    identifier: Some("memlint".to_owned()),
                    inter_file_dependencies: true,
                    workspace_diagnostics: false,
                    ..DiagnosticOptions::default()
                })
            }),
            ..ServerCapabilities::default()
        };
        Ok(InitializeResult {
            capabilities,
            server_info: Some(ServerInfo { name: "memlint".to_owned(), version: Some(env!("CARGO_PKG_VERSION").to_owned()) }),
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        let watch = self.state().watch_dynamic;
        if watch {
            let watchers = WATCHED
                .iter()
                .map(|glob| FileSystemWatcher { glob_pattern: GlobPattern::String((*glob).to_owned()), kind: None })
                .collect();
            let registration = Registration {
                id: "memlint-config-files".to_owned(),
                method: lsp::notification::DidChangeWatchedFiles::METHOD.to_owned(),
                register_options: serde_json::to_value(DidChangeWatchedFilesRegistrationOptions { watchers }).ok(),
            };
            if let Err(e) = self.client.register_capability(vec![registration]).await {
                self.log(MessageType::WARNING, format!("memlint: cannot watch configuration files: {e}")).await;
            }
            // Python files: a changed module re-lints the open files that import it.
            let registration = Registration {
                id: "memlint-python-files".to_owned(),
                method: lsp::notification::DidChangeWatchedFiles::METHOD.to_owned(),
                register_options: serde_json::to_value(DidChangeWatchedFilesRegistrationOptions {
                    watchers: vec![FileSystemWatcher { glob_pattern: GlobPattern::String(PYTHON_FILES.to_owned()), kind: None }],
                })
                .ok(),
            };
            if let Err(e) = self.client.register_capability(vec![registration]).await {
                self.log(MessageType::WARNING, format!("memlint: cannot watch Python files: {e}")).await;
            }
        }
        self.flush_messages().await;
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let item = params.text_document;
        let uri = item.uri.clone();
        let pull = {
            let mut state = self.state();
            state.docs.insert(uri.clone(), Document::new(item.uri, item.text, item.version));
            state.lints.remove(&uri);
            state.baselines.remove(&uri);
            // Settings are re-resolved on open: the configuration may have changed
            // while the document was closed, without the client telling us.
            state.resolve_settings(&uri);
            state.pull
        };
        if !pull {
            self.schedule(uri);
        }
        self.flush_messages().await;
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri;
        let applied = {
            let mut state = self.state();
            let encoding = state.encoding;
            let pull = state.pull;
            state.docs.get_mut(&uri).map(|doc| {
                doc.apply_changes(params.content_changes, params.text_document.version, encoding);
                pull
            })
        };
        let Some(pull) = applied else {
            self.log(MessageType::WARNING, format!("memlint: change to a document that is not open: {}", uri.as_str())).await;
            return;
        };
        if !pull {
            self.schedule(uri);
        }
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        let known = {
            let mut state = self.state();
            state.lints.remove(&uri);
            state.baselines.remove(&uri);
            state.settings.remove(&uri);
            state.docs.remove(&uri).is_some()
        };
        if known {
            let _order = self.publish_lock.lock().await;
            self.clear(vec![uri]).await;
        } else {
            self.log(MessageType::WARNING, format!("memlint: close of a document that is not open: {}", uri.as_str())).await;
        }
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        {
            let mut state = self.state();
            let new = ClientSettings::from_value(Some(&params.settings));
            let old = state.store.client().clone();
            // Clients send their whole settings object, often empty (Neovim sends `{}`
            // right after initializing): only what is set replaces the current value.
            let merged = ClientSettings {
                select: new.select.or_else(|| old.select.clone()),
                ignore: new.ignore.or_else(|| old.ignore.clone()),
                unsafe_fixes: new.unsafe_fixes.or(old.unsafe_fixes),
                config_path: new.config_path.or_else(|| old.config_path.clone()),
                snapshot: new.snapshot.or_else(|| old.snapshot.clone()),
            };
            if merged == old {
                return;
            }
            state.reload(merged);
        }
        self.relint_all().await;
    }

    async fn did_change_watched_files(&self, params: DidChangeWatchedFilesParams) {
        if params.changes.is_empty() {
            return;
        }
        let (python, config): (Vec<_>, Vec<_>) = params.changes.iter().partition(|c| c.uri.path().as_str().ends_with(".py"));
        if !python.is_empty() {
            let created_or_deleted = python.iter().any(|c| c.typ != lsp::FileChangeType::CHANGED);
            let paths: Vec<PathBuf> = python.iter().filter_map(|c| file_path(&c.uri)).collect();
            self.modules_changed(&paths, created_or_deleted).await;
        }
        if config.is_empty() {
            return;
        }
        {
            let mut state = self.state();
            let client = state.store.client().clone();
            state.reload(client);
        }
        self.relint_all().await;
    }

    async fn did_save(&self, params: lsp::DidSaveTextDocumentParams) {
        if let Some(path) = file_path(&params.text_document.uri) {
            self.modules_changed(&[path], false).await;
        }
    }

    async fn diagnostic(&self, params: DocumentDiagnosticParams) -> Result<DocumentDiagnosticReportResult> {
        let uri = params.text_document.uri;
        self.current(&uri).await?;
        let state = self.state();
        let (version, items) = state.lsp_diagnostics(&uri).ok_or_else(content_modified)?;
        let result_id = format!("{}:{version}", state.generation);
        let report = if params.previous_result_id.as_deref() == Some(result_id.as_str()) {
            DocumentDiagnosticReport::Unchanged(RelatedUnchangedDocumentDiagnosticReport {
                related_documents: None,
                unchanged_document_diagnostic_report: UnchangedDocumentDiagnosticReport { result_id },
            })
        } else {
            DocumentDiagnosticReport::Full(RelatedFullDocumentDiagnosticReport {
                related_documents: None,
                full_document_diagnostic_report: FullDocumentDiagnosticReport { result_id: Some(result_id), items },
            })
        };
        Ok(DocumentDiagnosticReportResult::Report(report))
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri;
        let findings = self.current(&uri).await?;
        let only = params.context.only.as_ref();
        let (lazy, fix_all_version, mut actions) = {
            let mut state = self.state();
            let settings = state.settings_for(&uri);
            let encoding = state.encoding;
            let doc = state.docs.get(&uri).ok_or_else(|| unknown_document(&uri))?;
            let wanted_range = doc.byte_range(params.range, encoding);
            let mut fixes = Vec::new();
            let mut disables = Vec::new();
            let mut disabled_lines = HashSet::new();
            for (i, finding) in findings.diagnostics.iter().enumerate() {
                if finding.range.start > wanted_range.end || wanted_range.start > finding.range.end {
                    continue;
                }
                let diagnostic = to_lsp(doc, &findings, i, &state.docs, encoding);
                let code = finding.rule.code();
                if let Some(fix) = finding.fix.as_ref().filter(|f| !f.edits.is_empty()) {
                    let safe = fix.applicability == Applicability::Safe;
                    let title = format!("{}{} ({code})", fix.message, if safe { "" } else { " (unsafe)" });
                    let edits = fix.edits.iter().map(|e| text_edit(doc, e, encoding)).collect();
                    fixes.push(CodeAction {
                        title,
                        kind: Some(CodeActionKind::QUICKFIX),
                        diagnostics: Some(vec![diagnostic.clone()]),
                        edit: Some(WorkspaceEdit { changes: Some(HashMap::from([(uri.clone(), edits)])), ..WorkspaceEdit::default() }),
                        is_preferred: Some(safe),
                        ..CodeAction::default()
                    });
                }
                let line = doc.index.line_of(finding.range.start);
                if disabled_lines.insert((line, finding.rule)) {
                    if let Some(edit) = actions::noqa_edit(doc, finding.rule, line) {
                        disables.push(CodeAction {
                            title: format!("Disable {code} for this line"),
                            kind: Some(CodeActionKind::QUICKFIX),
                            diagnostics: Some(vec![diagnostic]),
                            edit: Some(WorkspaceEdit {
                                changes: Some(HashMap::from([(uri.clone(), vec![text_edit(doc, &edit, encoding)])])),
                                ..WorkspaceEdit::default()
                            }),
                            ..CodeAction::default()
                        });
                    }
                }
            }
            let mode = if settings.unsafe_fixes { FixMode::Unsafe } else { FixMode::Safe };
            let any_fixable = findings.diagnostics.iter().any(|d| d.fix.as_ref().map(|f| mode.allows(f.applicability)).unwrap_or(false));
            let fix_all_version = (any_fixable && wanted(only, &FIX_ALL)).then_some(doc.version);
            let mut actions: Vec<CodeAction> = Vec::new();
            if wanted(only, &CodeActionKind::QUICKFIX) {
                actions.extend(fixes);
                actions.extend(disables);
            }
            (state.lazy_edits, fix_all_version, actions)
        };
        if let Some(version) = fix_all_version {
            let mut action = CodeAction {
                title: "memlint: fix all auto-fixable problems".to_owned(),
                kind: Some(FIX_ALL),
                data: Some(json!({ "uri": uri.as_str(), "version": version })),
                ..CodeAction::default()
            };
            if !lazy {
                action.edit = Some(self.fix_all_edit(&uri, version).await?);
            }
            actions.push(action);
        }
        Ok(Some(actions.into_iter().map(CodeActionOrCommand::CodeAction).collect()))
    }

    async fn code_action_resolve(&self, mut action: CodeAction) -> Result<CodeAction> {
        if action.kind.as_ref() != Some(&FIX_ALL) || action.edit.is_some() {
            return Ok(action);
        }
        let data = action.data.clone().unwrap_or(Value::Null);
        let uri: Uri = data
            .get("uri")
            .and_then(Value::as_str)
            .and_then(|u| u.parse().ok())
            .ok_or_else(|| Error::invalid_params("memlint: the code action's data has no document"))?;
        let version = data
            .get("version")
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| Error::invalid_params("memlint: the code action's data has no version"))?;
        action.edit = Some(self.fix_all_edit(&uri, version).await?);
        Ok(action)
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let uri = params.text_document_position_params.text_document.uri;
        let position = params.text_document_position_params.position;
        let findings = self.current(&uri).await?;
        let (range, roots, path, under, places, rows, snapshot_setting) = {
            let state = self.state();
            let doc = state.docs.get(&uri).ok_or_else(|| unknown_document(&uri))?;
            let offset = doc.offset(position, state.encoding);
            let under: Vec<usize> = findings
                .diagnostics
                .iter()
                .enumerate()
                .filter(|(_, d)| d.range.start <= offset && offset <= d.range.end)
                .map(|(i, _)| i)
                .collect();
            let Some(first) = under.first() else { return Ok(None) };
            let range = doc.range(findings.diagnostics[*first].range.clone(), state.encoding);
            let path = file_path(doc.notebook.as_ref().unwrap_or(&uri));
            // 1-based rows of the findings (none in notebooks, whose rows count by cell)
            let rows: Vec<Option<u32>> = under
                .iter()
                .map(|i| doc.notebook.is_none().then(|| doc.range(findings.diagnostics[*i].range.clone(), state.encoding).start.line + 1))
                .collect();
            let places: Vec<Vec<Option<String>>> = under.iter().map(|i| findings.fact_places(*i, doc, &state)).collect();
            (range, state.roots.clone(), path, under, places, rows, state.store.client().snapshot.clone())
        };
        let dirs = hover::report_dirs(path.as_deref(), &roots);
        let report = hover::find_report(&dirs);
        let mut value = {
            let under: Vec<(&memlint_linter::Diagnostic, &[Option<String>])> =
                under.iter().zip(&places).map(|(i, p)| (&findings.diagnostics[*i], p.as_slice())).collect();
            hover::markdown(&under, report.as_ref())
        };
        if let (Some(doc_path), Some(snapshot)) = (path.as_deref(), hover::find_snapshot(snapshot_setting.as_deref(), &dirs, &roots)) {
            let loaded = hover::load_snapshot(&snapshot);
            let mut lines: Vec<u32> = rows.iter().flatten().copied().collect();
            lines.dedup();
            let measured: Vec<String> = lines.into_iter().filter_map(|l| hover::snapshot_markdown(&snapshot, &loaded, doc_path, l)).collect();
            if !measured.is_empty() {
                value = format!("{}\n\n---\n\n{value}", measured.join("\n\n"));
            }
        }
        Ok(Some(Hover { contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value }), range: Some(range) }))
    }

    async fn notebook_did_open(&self, params: DidOpenNotebookDocumentParams) {
        let nb_uri = params.notebook_document.uri;
        let pull = {
            let mut state = self.state();
            let cells = params
                .notebook_document
                .cells
                .iter()
                .map(|c| (c.document.clone(), c.kind == NotebookCellKind::Code))
                .collect();
            for item in params.cell_text_documents {
                if item.language_id != "python" {
                    continue;
                }
                let mut doc = Document::new(item.uri.clone(), item.text, item.version);
                doc.notebook = Some(nb_uri.clone());
                state.docs.insert(item.uri, doc);
            }
            state.notebooks.insert(nb_uri.clone(), NotebookDoc { cells });
            state.resolve_settings(&nb_uri);
            state.pull
        };
        self.flush_messages().await;
        self.schedule_notebook(&nb_uri, pull);
    }

    async fn notebook_did_change(&self, params: DidChangeNotebookDocumentParams) {
        let nb_uri = params.notebook_document.uri;
        let mut closed = Vec::new();
        let known = self.state().notebooks.contains_key(&nb_uri);
        if !known {
            self.log(MessageType::WARNING, format!("memlint: change to a notebook that is not open: {}", nb_uri.as_str())).await;
            return;
        }
        let pull = {
            let mut state = self.state();
            let encoding = state.encoding;
            if !state.notebooks.contains_key(&nb_uri) {
                return;
            }
            if let Some(cells) = params.change.cells {
                if let Some(structure) = cells.structure {
                    let nb = state.notebooks.get_mut(&nb_uri).expect("checked above");
                    let start = (structure.array.start as usize).min(nb.cells.len());
                    let end = (start + structure.array.delete_count as usize).min(nb.cells.len());
                    let new = structure.array.cells.unwrap_or_default();
                    nb.cells.splice(start..end, new.into_iter().map(|c| (c.document, c.kind == NotebookCellKind::Code)));
                    for item in structure.did_open.unwrap_or_default() {
                        if item.language_id != "python" {
                            continue;
                        }
                        let mut doc = Document::new(item.uri.clone(), item.text, item.version);
                        doc.notebook = Some(nb_uri.clone());
                        state.docs.insert(item.uri, doc);
                    }
                    for id in structure.did_close.unwrap_or_default() {
                        state.lints.remove(&id.uri);
                        if state.docs.remove(&id.uri).is_some() {
                            closed.push(id.uri);
                        }
                    }
                }
                if let Some(data) = cells.data {
                    let nb = state.notebooks.get_mut(&nb_uri).expect("checked above");
                    for cell in data {
                        if let Some(entry) = nb.cells.iter_mut().find(|(u, _)| *u == cell.document) {
                            entry.1 = cell.kind == NotebookCellKind::Code;
                        }
                    }
                }
                for content in cells.text_content.unwrap_or_default() {
                    if let Some(doc) = state.docs.get_mut(&content.document.uri) {
                        doc.apply_changes(content.changes, content.document.version, encoding);
                    }
                }
            }
            // Every cell's findings depend on the whole notebook: all are stale now.
            let cells: Vec<Uri> = state.notebooks[&nb_uri].cells.iter().map(|(u, _)| u.clone()).collect();
            for uri in &cells {
                state.lints.remove(uri);
            }
            state.pull
        };
        if !closed.is_empty() {
            let _order = self.publish_lock.lock().await;
            self.clear(closed).await;
        }
        self.schedule_notebook(&nb_uri, pull);
    }

    async fn notebook_did_close(&self, params: DidCloseNotebookDocumentParams) {
        let nb_uri = params.notebook_document.uri;
        let closed: Vec<Uri> = {
            let mut state = self.state();
            let mut cells: Vec<Uri> = state.notebooks.remove(&nb_uri).map(|nb| nb.cells.into_iter().map(|(u, _)| u).collect()).unwrap_or_default();
            cells.extend(params.cell_text_documents.into_iter().map(|c| c.uri));
            cells.sort_by(|a, b| a.as_str().cmp(b.as_str()));
            cells.dedup();
            state.settings.remove(&nb_uri);
            cells.into_iter().filter(|u| {
                state.lints.remove(u);
                state.docs.remove(u).is_some()
            }).collect()
        };
        let _order = self.publish_lock.lock().await;
        self.clear(closed).await;
    }
}

impl Server {
    /// Lints a notebook through any one of its open Python cells.
    fn schedule_notebook(&self, nb_uri: &Uri, pull: bool) {
        if pull {
            return;
        }
        let first = {
            let state = self.state();
            state.notebooks.get(nb_uri).and_then(|nb| nb.cells.iter().map(|(u, _)| u).find(|u| state.docs.contains_key(*u)).cloned())
        };
        if let Some(uri) = first {
            self.schedule(uri);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlint_linter::Rule;

    const TRAIN: &str = "import torch\n\ndef train(model, loader, optimizer):\n    total = 0\n    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n        total += loss\n        torch.cuda.empty_cache()\n    return total\n\nnet = torch.nn.Linear(4, 4)\ntrain(net, torch.utils.data.DataLoader(range(4)), torch.optim.SGD(net.parameters(), lr=0.1))\n";

    #[test]
    fn a_panicking_rule_loses_only_its_own_findings() {
        let settings = LinterSettings::default();
        // Stands in for a rule with a bug: any run that includes MEM002 panics.
        let run = |s: &LinterSettings| {
            if s.rules.is_enabled(Rule::AccumulatedLossTensor) {
                panic!("index out of bounds");
            }
            vec![memlint_linter::lint(TRAIN, s).diagnostics]
        };
        let (found, problems) = lint_guarded(&settings, 1, &run);
        let rules: Vec<Rule> = found[0].iter().map(|d| d.rule).collect();
        assert_eq!(rules, [Rule::EmptyCacheInLoop]);
        assert_eq!(
            problems,
            ["memlint: rule MEM002 (accumulated-loss-tensor) crashed and was skipped for this document: index out of bounds"]
        );
        let (found, problems) = lint_guarded(&settings, 1, &|s: &LinterSettings| vec![memlint_linter::lint(TRAIN, s).diagnostics]);
        assert_eq!(found[0].len(), 2);
        assert!(problems.is_empty());
    }
}
