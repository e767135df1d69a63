//! memlint's linter: the rule registry, one module per rule under [`rules`], the
//! tree-sitter queries they start from (`queries/python/<rule-name>.scm`, embedded at
//! build time), diagnostics with fixes, and suppression comments.
//!
//! Invariant: this crate does no I/O. It takes source text and settings and returns
//! diagnostics; reading files, printing and writing fixes belong to the callers.

mod checker;
mod diagnostic;
pub mod fix;
mod noqa;
pub mod prefilter;
mod registry;
pub mod rules;
mod settings;

pub use diagnostic::{Applicability, Diagnostic, Edit, Fix, Severity};
pub use fix::{apply_fixes, apply_fixes_in_project, FixMode, FixOutcome};
pub use memlint_python::{LineIndex, NoProject, ProjectIndex, SourcePosition, SyntaxError};
pub use checker::{in_error_region, Suppressions};
pub use noqa::{Directive, DirectiveKind, Directives, ListedCode};
pub use registry::{Rule, RuleDoc, UnknownRule};
pub use settings::{LinterSettings, RuleSelection};

use memlint_python::tree_sitter::Tree;
use memlint_python::WalkedTree;

/// What linting one module found.
#[derive(Debug, Clone, Default)]
pub struct LintResult {
    /// Findings after suppression comments, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
    /// Syntax errors in the module (the rest of the module is still linted).
    pub syntax_errors: Vec<SyntaxError>,
    /// `# memlint: skip-file` was found.
    pub skipped: bool,
}

/// Lint Python `source` with `settings`, as a file on its own (no project around it):
/// [`lint_in_project`] with [`NoProject`].
pub fn lint(source: &str, settings: &LinterSettings) -> LintResult {
    lint_in_project(source, settings, &NoProject)
}

/// Lint Python `source` with `settings`, resolving the names it imports from its project
/// through `project`: the one entry point of the CLI, notebooks and the language server
/// (which passes the tree it keeps, see [`lint_tree_in_project`]).
///
/// The file is parsed only when some enabled rule's trigger holds for its words (see
/// [`prefilter`]); otherwise nothing is reported, syntax errors included. Triggers read
/// one file's words, and a class or factory imported from the project can be a network
/// whatever its name says: see `possible_in_project`.
pub fn lint_in_project(source: &str, settings: &LinterSettings, project: &dyn ProjectIndex) -> LintResult {
    let possible = possible_in_project(source, settings, project);
    if !possible.any_enabled() {
        // No tree is needed: one the project kept for this lint is freed.
        drop(project.parsed_tree(source));
        return LintResult::default();
    }
    let walked = project.parsed_tree(source).unwrap_or_else(|| project.parse(source));
    lint_possible(source, &walked, &LinterSettings { rules: possible, severity: settings.severity.clone() }, &settings.rules, project)
}

/// The rules that could fire on `source`. Triggers read one file's words; a name imported
/// from the project can make a value a network or an accumulator whatever it says (a
/// `torch.nn.Module` class, a factory returning one, a class whose methods store their
/// arguments), so when the triggers would let more rules through if the file had such a
/// name, the project is asked whether it has one: used by calling it, deriving from it,
/// or reaching it through an imported project module (`nets.Enc()`), or a star import of a
/// project module.
fn possible_in_project(source: &str, settings: &LinterSettings, project: &dyn ProjectIndex) -> RuleSelection {
    let mut words = prefilter::Words::scan(source);
    let possible = prefilter::possible_rules(&words, &settings.rules);
    if project.is_empty() || possible == settings.rules {
        return possible;
    }
    // The pre-filter may ask where the file's imports lead before its tree exists.
    project.note_source(source);
    words.set_project_values(true);
    let with_project = prefilter::possible_rules(&words, &settings.rules);
    if with_project == possible || !uses_project_names(source, &words, project) {
        return possible;
    }
    with_project
}

fn uses_project_names(source: &str, words: &prefilter::Words<'_>, project: &dyn ProjectIndex) -> bool {
    let used = |name: &str| called_or_handed_on(words, name);
    let matters = |qualified: &str| project.symbol(qualified).as_ref().map(memlint_python::project::symbol_matters);
    memlint_python::project::scan_imports(source).into_iter().any(|import| {
        if import.module == "torch" || import.module.starts_with("torch.") || !project.is_project_module(import.module) {
            return false;
        }
        import.star
            || import.locals.iter().any(|(qualified, local)| {
                if used(local) && matters(qualified) == Some(true) {
                    return true;
                }
                // `local.attr` (a module, or a class's attribute), followed one level further.
                let prefix = format!("{local}.");
                let bytes = source.as_bytes();
                memchr::memmem::find_iter(bytes, prefix.as_bytes()).any(|at| {
                    if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b'.') {
                        return false;
                    }
                    let rest = &source[at + prefix.len()..];
                    let attr_len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
                    let attr = &rest[..attr_len];
                    if attr.is_empty() {
                        return false;
                    }
                    match project.symbol(&format!("{qualified}.{attr}")) {
                        Some(memlint_python::Symbol::Module) => rest[attr_len..].starts_with('.'),
                        Some(symbol) => (words.called(attr) || used(attr)) && memlint_python::project::symbol_matters(&symbol),
                        None => false,
                    }
                })
            })
    })
}

/// Is `name` called, or handed on: `(name`, ` name)`, ` name,`? For an identifier, one
/// pass over its occurrences finds all three: the `(` or space before one is never inside
/// an earlier one, which the pass may have skipped over.
fn called_or_handed_on(words: &prefilter::Words<'_>, name: &str) -> bool {
    if words.called(name) {
        return true;
    }
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || !b.is_ascii()) {
        return words.contains(&format!("({name}")) || words.contains(&format!(" {name})")) || words.contains(&format!(" {name},"));
    }
    let text = words.text().as_bytes();
    memchr::memmem::find_iter(text, name.as_bytes()).any(|at| {
        let before = at.checked_sub(1).map(|i| text[i]);
        let after = text.get(at + name.len()).copied();
        before == Some(b'(') || (before == Some(b' ') && matches!(after, Some(b')' | b',')))
    })
}

/// [`lint`] without the pre-filter: every enabled rule runs on the parsed file (tests
/// and `memlint check --no-prefilter` compare the two).
pub fn lint_unfiltered(source: &str, settings: &LinterSettings) -> LintResult {
    lint_unfiltered_in_project(source, settings, &NoProject)
}

/// [`lint_in_project`] without the pre-filter.
pub fn lint_unfiltered_in_project(source: &str, settings: &LinterSettings, project: &dyn ProjectIndex) -> LintResult {
    if !settings.rules.any_enabled() {
        return LintResult::default();
    }
    let walked = project.parsed_tree(source).unwrap_or_else(|| project.parse(source));
    lint_possible(source, &walked, settings, &settings.rules, project)
}

/// Lint `source` whose tree is already parsed (the language server keeps trees).
/// The same pre-filter as [`lint`] applies, so the findings are the same.
pub fn lint_tree(source: &str, tree: &Tree, settings: &LinterSettings) -> LintResult {
    lint_tree_in_project(source, tree, settings, &NoProject)
}

/// [`lint_in_project`] on a tree already parsed (the language server keeps trees).
pub fn lint_tree_in_project(source: &str, tree: &Tree, settings: &LinterSettings, project: &dyn ProjectIndex) -> LintResult {
    let possible = possible_in_project(source, settings, project);
    if !possible.any_enabled() {
        // No tree is needed: one the project kept for this lint is freed.
        drop(project.parsed_tree(source));
        return LintResult::default();
    }
    // A tree is a counted reference: the copy walked here shares the server's.
    let walked = WalkedTree::walk(tree.clone());
    lint_possible(source, &walked, &LinterSettings { rules: possible, severity: settings.severity.clone() }, &settings.rules, project)
}

/// Runs the rules of `settings` (already narrowed by the pre-filter, or not) on `tree`;
/// `enabled` is what the settings enabled before narrowing.
///
/// Order: every rule's check; findings in code a syntax error mangled are dropped;
/// suppression comments drop theirs, recording which directive suppressed what; then
/// the rules that check suppression comments run on that record (their findings are
/// not suppressed again: a directive that lists such a rule exempts itself).
fn lint_possible(source: &str, walked: &WalkedTree, settings: &LinterSettings, enabled: &RuleSelection, project: &dyn ProjectIndex) -> LintResult {
    let (tree, nodes) = (walked.tree(), walked.nodes());
    let directives = Directives::from_tree(tree, source);
    if directives.skip_file {
        return LintResult { skipped: true, ..LintResult::default() };
    }
    let syntax_errors = memlint_python::syntax_errors(tree, source);
    // One walk of the tree (made with the parse), for the module's summary and its
    // semantic model.
    project.seed(walked, source);
    let query_roots = checker::query_root_kinds(&settings.rules);
    let model = memlint_python::SemanticModel::indexing_borrowed(nodes, source, project, &query_roots);
    let mut diagnostics = checker::run_rules(&model, settings);
    if !syntax_errors.is_empty() {
        diagnostics.retain(|d| !checker::in_error_region(tree, d.range.clone()));
    }
    let mut used: Vec<Vec<Rule>> = vec![Vec::new(); directives.directives.len()];
    // Lines are counted only when a directive could suppress a finding.
    if !directives.directives.is_empty() && !diagnostics.is_empty() {
        let line_index = LineIndex::new(source);
        diagnostics.retain(|d| {
            let mut suppressed = false;
            for (i, directive) in directives.on_line(line_index.line_of(d.range.start)) {
                if directive.suppresses(d.rule) {
                    suppressed = true;
                    if !used[i].contains(&d.rule) {
                        used[i].push(d.rule);
                    }
                }
            }
            !suppressed
        });
    }
    if settings.rules.iter().any(Rule::observes_suppressions) {
        let suppressions = Suppressions { directives: &directives, used: &used, enabled };
        let mut more = checker::run_rules_after_suppression(&model, settings, &suppressions);
        if !syntax_errors.is_empty() {
            more.retain(|d| !checker::in_error_region(tree, d.range.clone()));
        }
        diagnostics.append(&mut more);
    }
    for d in &mut diagnostics {
        if let Some(severity) = settings.severity.get(&d.rule) {
            d.severity = *severity;
        }
    }
    diagnostics.sort_by(|a, b| (a.range.start, a.rule).cmp(&(b.range.start, b.rule)));
    LintResult { diagnostics, syntax_errors, skipped: false }
}


#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_name_is_handed_on_where_three_searches_would_find_it() {
        let texts = [
            "f(net)", "f(a, net)", "f(a, net, b)", "f(network)", "f( net )", "x = net\n", "netnet(x)", "f(a, netnet)",
            "f(a,net)", "g(a, net.x)", " net", "(net", "nett, net,", "a anet) net)", "",
        ];
        for text in texts {
            let words = prefilter::Words::scan(text);
            for name in ["net", "netnet", "ne", "t", "a", "(x", "x)"] {
                let three = words.called(name)
                    || words.contains(&format!("({name}"))
                    || words.contains(&format!(" {name})"))
                    || words.contains(&format!(" {name},"));
                assert_eq!(called_or_handed_on(&words, name), three, "{name:?} in {text:?}");
            }
        }
    }

    /// A project that knows no name and counts how often a lint asks for its tree.
    #[derive(Default)]
    struct CountsTreeRequests {
        asked: AtomicUsize,
    }

    impl ProjectIndex for CountsTreeRequests {
        fn symbol(&self, _qualified: &str) -> Option<memlint_python::Symbol> {
            None
        }
        fn external_calls(&self, _function: &str) -> Vec<bool> {
            Vec::new()
        }
        fn is_project_module(&self, _module: &str) -> bool {
            false
        }
        fn parsed_tree(&self, _source: &str) -> Option<WalkedTree> {
            self.asked.fetch_add(1, Ordering::Relaxed);
            None
        }
    }

    /// A lint asks once for the tree the project may keep for it, also when the
    /// pre-filter skips the file: the project then frees the tree it kept.
    #[test]
    fn every_lint_asks_once_for_a_kept_tree() {
        let settings = LinterSettings::default();
        let skipped = CountsTreeRequests::default();
        assert!(lint_in_project("print('hello')\n", &settings, &skipped).diagnostics.is_empty());
        assert_eq!(skipped.asked.load(Ordering::Relaxed), 1);
        let linted = CountsTreeRequests::default();
        let source = "import torch\n\ndef evaluate(model, x):\n    return model(x).item()\n";
        lint_in_project(source, &settings, &linted);
        assert_eq!(linted.asked.load(Ordering::Relaxed), 1);
    }
}
