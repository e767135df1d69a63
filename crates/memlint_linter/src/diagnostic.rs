//! Diagnostics and the fixes they carry.

use std::ops::Range;

use serde::Serialize;

use crate::Rule;

/// How sure memlint is that a fix keeps the program's meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Applicability {
    /// May change behaviour; applied only with `--unsafe-fixes`.
    Unsafe,
    /// Never changes what the program computes; applied by `--fix`.
    Safe,
}

/// One text replacement, in byte offsets of the source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Edit {
    pub range: Range<usize>,
    pub content: String,
}

impl Edit {
    pub fn replace(range: Range<usize>, content: impl Into<String>) -> Self {
        Edit { range, content: content.into() }
    }
    pub fn insert(at: usize, content: impl Into<String>) -> Self {
        Edit { range: at..at, content: content.into() }
    }
    pub fn delete(range: Range<usize>) -> Self {
        Edit { range, content: String::new() }
    }
}

/// A set of edits that together fix one finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    pub applicability: Applicability,
    /// What the fix does, for people (`Wrap the loop in \`with torch.no_grad():\``).
    pub message: String,
    /// Non-overlapping edits, sorted by position.
    pub edits: Vec<Edit>,
}

impl Fix {
    pub fn new(applicability: Applicability, message: impl Into<String>, mut edits: Vec<Edit>) -> Self {
        edits.sort_by_key(|e| (e.range.start, e.range.end));
        Fix { applicability, message: message.into(), edits }
    }
    pub fn safe(message: impl Into<String>, edits: Vec<Edit>) -> Self {
        Fix::new(Applicability::Safe, message, edits)
    }
    pub fn unsafe_(message: impl Into<String>, edits: Vec<Edit>) -> Self {
        Fix::new(Applicability::Unsafe, message, edits)
    }
    /// The byte range every edit of this fix falls in.
    pub fn span(&self) -> Range<usize> {
        let start = self.edits.iter().map(|e| e.range.start).min().unwrap_or(0);
        let end = self.edits.iter().map(|e| e.range.end).max().unwrap_or(0);
        start..end
    }
}

/// How bad a finding is. Rules pick one per finding; settings may override it per rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn parse(text: &str) -> Option<Severity> {
        match text {
            "info" | "information" | "hint" => Some(Severity::Info),
            "warning" | "warn" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One finding of one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub rule: Rule,
    /// What is wrong here and what it costs, in one or two sentences.
    pub message: String,
    /// What to do about it.
    pub help: Option<String>,
    /// Byte range of the offending code.
    pub range: Range<usize>,
    pub severity: Severity,
    pub fix: Option<Fix>,
    /// The facts the finding rests on, in order (what the value is and why, the gradient
    /// context, where the output goes), each with the place it was read from.
    pub evidence: Vec<memlint_python::Fact>,
}

impl Diagnostic {
    pub fn new(rule: Rule, range: Range<usize>, message: impl Into<String>) -> Self {
        Diagnostic { rule, message: message.into(), help: None, range, severity: Severity::Warning, fix: None, evidence: Vec::new() }
    }
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
    pub fn with_severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }
    pub fn with_fix(mut self, fix: Option<Fix>) -> Self {
        self.fix = fix;
        self
    }
    pub fn with_evidence(mut self, evidence: Vec<memlint_python::Fact>) -> Self {
        self.evidence = evidence;
        self
    }
}
