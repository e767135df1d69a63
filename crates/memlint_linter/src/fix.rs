//! Applying fixes to source text: until nothing changes (bounded), never two overlapping
//! edits at once, and never a fix that breaks the file's syntax.

use crate::{Applicability, Diagnostic, Fix, LinterSettings, Rule};

/// Which fixes to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixMode {
    /// Safe fixes only (`--fix`).
    Safe,
    /// Safe and unsafe fixes (`--fix --unsafe-fixes`).
    Unsafe,
}

impl FixMode {
    pub fn allows(self, applicability: Applicability) -> bool {
        match self {
            FixMode::Safe => applicability == Applicability::Safe,
            FixMode::Unsafe => true,
        }
    }
}

/// A fix that was not applied because it would have broken the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedFix {
    pub rule: Rule,
    /// Byte offset of the finding in the source before fixing.
    pub offset: usize,
    pub reason: String,
}

/// The result of fixing one source text.
#[derive(Debug, Clone)]
pub struct FixOutcome {
    pub source: String,
    /// How many findings were fixed, per rule.
    pub fixed: Vec<(Rule, usize)>,
    pub rejected: Vec<RejectedFix>,
    /// What is left after fixing.
    pub remaining: Vec<Diagnostic>,
}

impl FixOutcome {
    pub fn fixed_count(&self) -> usize {
        self.fixed.iter().map(|(_, n)| n).sum()
    }
    pub fn changed(&self, original: &str) -> bool {
        self.source != original
    }
}

/// Passes over the file before giving up on fixes that keep producing new fixes.
const MAX_PASSES: usize = 8;

/// Lints `source` and applies the fixes `mode` allows, re-linting after each pass.
pub fn apply_fixes(source: &str, settings: &LinterSettings, mode: FixMode) -> FixOutcome {
    apply_fixes_in_project(source, settings, mode, &crate::NoProject)
}

/// [`apply_fixes`] for a file of a project (see [`crate::lint_in_project`]).
pub fn apply_fixes_in_project(source: &str, settings: &LinterSettings, mode: FixMode, project: &dyn crate::ProjectIndex) -> FixOutcome {
    let lint = |text: &str, settings: &LinterSettings| crate::lint_in_project(text, settings, project);
    let mut current = source.to_owned();
    let mut fixed: Vec<(Rule, usize)> = Vec::new();
    let mut rejected = Vec::new();
    let mut remaining = Vec::new();
    for pass in 0..MAX_PASSES {
        let result = lint(&current, settings);
        let baseline_errors = result.syntax_errors.len();
        let mut candidates: Vec<&Diagnostic> = result
            .diagnostics
            .iter()
            .filter(|d| d.fix.as_ref().map(|f| mode.allows(f.applicability) && !f.edits.is_empty()).unwrap_or(false))
            .filter(|d| !rejected.iter().any(|r: &RejectedFix| r.rule == d.rule && pass > 0 && r.offset == d.range.start))
            .collect();
        remaining = result.diagnostics.clone();
        if candidates.is_empty() {
            break;
        }
        // Later fixes first, so earlier offsets stay valid; skip any that overlaps one
        // already taken in this pass (it is retried on the next pass).
        candidates.sort_by_key(|d| std::cmp::Reverse(d.fix.as_ref().map(|f| f.span().start).unwrap_or(0)));
        let mut taken_from = usize::MAX;
        let mut applied_any = false;
        for diagnostic in candidates {
            let fix = diagnostic.fix.as_ref().expect("filtered above");
            let span = fix.span();
            if span.end > taken_from || (span.end == taken_from && span.start == span.end) {
                continue;
            }
            let candidate = apply_edits(&current, fix);
            let errors = memlint_python::syntax_errors(&memlint_python::parse_with(&candidate, None), &candidate).len();
            if errors > baseline_errors {
                rejected.push(RejectedFix {
                    rule: diagnostic.rule,
                    offset: diagnostic.range.start,
                    reason: format!("the fix ({}) would introduce a syntax error", fix.message),
                });
                continue;
            }
            current = candidate;
            taken_from = span.start;
            applied_any = true;
            match fixed.iter_mut().find(|(r, _)| *r == diagnostic.rule) {
                Some((_, n)) => *n += 1,
                None => fixed.push((diagnostic.rule, 1)),
            }
        }
        if !applied_any {
            break;
        }
        if pass + 1 == MAX_PASSES {
            remaining = lint(&current, settings).diagnostics;
        }
    }
    rejected.dedup_by(|a, b| a.rule == b.rule && a.offset == b.offset);
    fixed.sort();
    FixOutcome { source: current, fixed, rejected, remaining }
}

/// Applies one fix's edits (sorted, non-overlapping) to `source`.
pub fn apply_edits(source: &str, fix: &Fix) -> String {
    let mut out = String::with_capacity(source.len() + 64);
    let mut last = 0;
    for edit in &fix.edits {
        let start = edit.range.start.clamp(last, source.len());
        let end = edit.range.end.clamp(start, source.len());
        out.push_str(&source[last..start]);
        out.push_str(&edit.content);
        last = end;
    }
    out.push_str(&source[last..]);
    out
}
