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
mod outline;
pub mod prefilter;
mod registry;
pub mod rules;
mod settings;
mod skip;

pub use diagnostic::{Applicability, Diagnostic, Edit, Fix, Severity};
pub use fix::{apply_fixes, FixMode, FixOutcome};
pub use memlint_python::{LineIndex, SourcePosition, SyntaxError};
pub use noqa::Directives;
pub use registry::{Rule, RuleDoc, UnknownRule, RULE_DOCS_URL};
pub use settings::{LinterSettings, RuleSelection};

use memlint_python::tree_sitter::Tree;

/// `ranges` sorted, with overlapping or touching ones merged and empty ones dropped.
pub(crate) fn merge_ranges(ranges: impl IntoIterator<Item = std::ops::Range<usize>>) -> Vec<std::ops::Range<usize>> {
    let mut sorted: Vec<std::ops::Range<usize>> = ranges.into_iter().filter(|r| r.start < r.end).collect();
    sorted.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<usize>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

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

/// Lint Python `source` with `settings`.
///
/// The file is parsed only when some enabled rule could fire in it (a cheap word scan
/// decides); otherwise nothing is reported, syntax errors included. Function bodies in
/// which nothing could be reported, and which nothing reported elsewhere depends on, are
/// left out of parsing (see `skip.rs`); a syntax error inside one is not reported.
pub fn lint(source: &str, settings: &LinterSettings) -> LintResult {
    let words = prefilter::FileWords::scan(source);
    let possible = prefilter::possible_rules(source, &words, &settings.rules);
    if !possible.any_enabled() {
        return LintResult::default();
    }
    let narrowed = LinterSettings { rules: possible, severity: settings.severity.clone() };
    if let Some(blanked) = skip::blank_irrelevant_bodies(source, &words, &narrowed.rules) {
        if let Some(tree) = blanked.parse().filter(|tree| skip::parsed_as_blanked(tree, &blanked)) {
            let result = lint_tree(source, &tree, &narrowed);
            // A finding or fix never touches a blanked body; if one did, the tree would
            // not be the file's, so the file is linted whole.
            let touches_blanked = |range: &std::ops::Range<usize>| {
                blanked.bodies.iter().any(|b| range.start < b.range.end && b.range.start < range.end.max(range.start + 1))
            };
            let sound = result.diagnostics.iter().all(|d| {
                !touches_blanked(&d.range) && d.fix.as_ref().map(|f| f.edits.iter().all(|e| !touches_blanked(&e.range))).unwrap_or(true)
            });
            if sound {
                return result;
            }
        }
    }
    let tree = memlint_python::parse_with(source, None);
    lint_tree(source, &tree, &narrowed)
}

/// [`lint`] without the word pre-filter: every enabled rule runs on the parsed file.
pub fn lint_unfiltered(source: &str, settings: &LinterSettings) -> LintResult {
    if !settings.rules.any_enabled() {
        return LintResult::default();
    }
    let tree = memlint_python::parse_with(source, None);
    lint_tree(source, &tree, settings)
}

/// Lint `source` whose tree is already parsed (the language server keeps trees).
pub fn lint_tree(source: &str, tree: &Tree, settings: &LinterSettings) -> LintResult {
    let directives = Directives::from_tree(tree, source);
    if directives.skip_file {
        return LintResult { skipped: true, ..LintResult::default() };
    }
    let syntax_errors = memlint_python::syntax_errors(tree, source);
    let model = memlint_python::SemanticModel::new(tree, source);
    let mut diagnostics = checker::run_rules(&model, settings);
    if !syntax_errors.is_empty() {
        diagnostics.retain(|d| !checker::in_error_region(tree, d.range.clone()));
    }
    let line_index = LineIndex::new(source);
    diagnostics.retain(|d| !directives.suppresses(d.rule, line_index.line_of(d.range.start)));
    for d in &mut diagnostics {
        if let Some(severity) = settings.severity.get(&d.rule) {
            d.severity = *severity;
        }
    }
    diagnostics.sort_by(|a, b| (a.range.start, a.rule).cmp(&(b.range.start, b.rule)));
    LintResult { diagnostics, syntax_errors, skipped: false }
}

