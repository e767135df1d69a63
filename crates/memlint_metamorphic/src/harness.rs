//! The harness: lint a case and each of its rewrites with every rule enabled, follow each
//! finding of the original into the rewrite, and compare.
//!
//! A finding of the original is followed by the byte where it starts ([`Rewrite::map_offset`]:
//! moved code is found where it went, a renamed name at its new spelling), falling back to
//! its line ([`Rewrite::line_map`]). The rewrite is **invariant** when the set of
//! (rule, line) of its findings equals the set of the original's, followed. A finding
//! of the original missing from the rewrite is *lost*, one of the rewrite not expected is
//! *gained*.
//!
//! How a case is linted: a fixture case or an example on its own ([`memlint_linter::lint`]),
//! except for rewrites that add a module beside the file (`factory-module`), which are
//! linted with [`memlint_linter::lint_in_project`] in a project held in memory
//! ([`crate::project::Memory`]: the case as `case.py` and the added module), compared with
//! the original linted in the same project without the added module. A file of a folder
//! is always linted in the folder's project ([`memlint_project::Project`], as `memlint
//! check` does), the added module laid over it in memory ([`crate::project::Overlay`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use memlint_linter::{lint, lint_in_project, Diagnostic, LinterSettings};
use memlint_project::Project;
use memlint_python::ProjectResolver;
use rayon::prelude::*;
use serde::Serialize;

use crate::cases::Case;
use crate::project::{Memory, Overlay};
use crate::rewrite::{line_of, line_start_offsets};
use crate::transform::Transformation;
use crate::Rewrite;

/// The key of the module a case is linted as in a project held in memory.
const CASE_KEY: &str = "case.py";

/// One finding, located.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Finding {
    pub rule: &'static str,
    /// 1-based line: of the original for a lost finding, of the rewrite for a gained one.
    pub line: usize,
    /// For a gained finding in a module the rewrite added beside the case, its name.
    pub file: Option<String>,
    /// For a lost finding, the rewrite's line it was expected on.
    pub expected_line: Option<usize>,
    /// ... and the added module it was expected in, when its code moved there.
    pub expected_file: Option<String>,
    pub message: String,
    /// The code on `line` (trimmed).
    pub code: String,
    /// For a lost finding, the rewrite's code on `expected_line`.
    pub rewritten_code: Option<String>,
}

/// What one transformation did to one case.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub case: String,
    pub transformation: &'static str,
    /// Findings of the original.
    pub findings: usize,
    /// The rewrite (or a module it adds) does not parse: a transformation's bug.
    pub broken: bool,
    pub lost: Vec<Finding>,
    pub gained: Vec<Finding>,
}

impl Outcome {
    pub fn invariant(&self) -> bool {
        !self.broken && self.lost.is_empty() && self.gained.is_empty()
    }
}

/// Counts for one transformation (or all).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub name: String,
    /// Cases the transformation was tried on.
    pub cases: usize,
    /// Rewrites made (it applied).
    pub applied: usize,
    pub invariant: usize,
    pub broken: usize,
    /// Rewrites of cases that have findings, and of those the invariant ones.
    pub applied_with_findings: usize,
    pub invariant_with_findings: usize,
    /// Findings of the originals of applied rewrites, and how many were lost / gained.
    pub findings: usize,
    pub lost: usize,
    pub gained: usize,
}

impl Tally {
    pub fn invariance(&self) -> f64 {
        if self.applied == 0 {
            1.0
        } else {
            self.invariant as f64 / self.applied as f64
        }
    }
    fn add(&mut self, o: &Outcome) {
        self.applied += 1;
        self.invariant += o.invariant() as usize;
        self.broken += o.broken as usize;
        if o.findings > 0 {
            self.applied_with_findings += 1;
            self.invariant_with_findings += o.invariant() as usize;
        }
        self.findings += o.findings;
        self.lost += o.lost.len();
        self.gained += o.gained.len();
    }
}

/// The harness's result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub cases: usize,
    /// Cases not rewritten: the original has syntax errors.
    pub skipped: Vec<String>,
    /// Findings of all originals.
    pub findings: usize,
    pub per_transformation: Vec<Tally>,
    pub overall: Tally,
    /// Every rewrite that is not invariant.
    pub failures: Vec<Outcome>,
}

/// A group of lost or gained findings with the same rule and message shape, under one
/// transformation.
#[derive(Debug, Clone, Serialize)]
pub struct Cause {
    pub transformation: &'static str,
    pub rule: &'static str,
    pub change: &'static str,
    /// The message with its quoted code replaced by `…`.
    pub message: String,
    pub count: usize,
    /// Up to three examples: case, line and code.
    pub examples: Vec<String>,
}

impl Report {
    /// Lost and gained findings grouped by transformation, rule and message shape, most
    /// frequent first.
    pub fn causes(&self) -> Vec<Cause> {
        let mut groups: BTreeMap<(&'static str, &'static str, &'static str, String), Cause> = BTreeMap::new();
        for o in &self.failures {
            for (change, list) in [("lost", &o.lost), ("gained", &o.gained)] {
                for f in list {
                    let message = template(&f.message);
                    let cause = groups.entry((o.transformation, f.rule, change, message.clone())).or_insert_with(|| Cause {
                        transformation: o.transformation,
                        rule: f.rule,
                        change,
                        message,
                        count: 0,
                        examples: Vec::new(),
                    });
                    cause.count += 1;
                    if cause.examples.len() < 3 {
                        let after = f.rewritten_code.as_deref().map(|c| format!("  =>  {c}")).unwrap_or_default();
                        let at = match &f.file {
                            Some(file) => format!("{}, {file}:{}", o.case, f.line),
                            None => format!("{}:{}", o.case, f.line),
                        };
                        cause.examples.push(format!("{at}  {}{after}", f.code));
                    }
                }
            }
            if o.broken {
                let cause = groups.entry((o.transformation, "-", "broken", "the rewrite does not parse".to_owned())).or_insert_with(|| {
                    Cause { transformation: o.transformation, rule: "-", change: "broken", message: "the rewrite does not parse".to_owned(), count: 0, examples: Vec::new() }
                });
                cause.count += 1;
                if cause.examples.len() < 3 {
                    cause.examples.push(o.case.clone());
                }
            }
        }
        let mut causes: Vec<Cause> = groups.into_values().collect();
        causes.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.transformation.cmp(b.transformation)).then_with(|| a.rule.cmp(b.rule)));
        causes
    }
}

/// A message's shape: quoted code replaced by `…`, cut at its first sentence.
fn template(message: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in message.chars() {
        if c == '`' {
            if !quoted {
                out.push_str("`…`");
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    let cut = out.find(": ").or_else(|| out.find(". ")).unwrap_or(out.len());
    out[..cut].chars().take(110).collect()
}

/// How the cases are linted.
enum Place<'a> {
    /// On its own (fixtures, examples).
    Alone,
    /// A file of a project on disk, under its key.
    Disk(&'a Project, String),
}

struct Linted {
    rule: &'static str,
    /// 0: the case's module; `i + 1`: the module `i` a rewrite added beside it.
    file: usize,
    start: usize,
    line: usize,
    message: String,
}

fn located(source: &str, file: usize, diagnostics: Vec<Diagnostic>) -> Vec<Linted> {
    let starts = line_start_offsets(source);
    diagnostics
        .into_iter()
        .map(|d| Linted { rule: d.rule.code(), file, start: d.range.start, line: line_of(&starts, d.range.start), message: d.message })
        .collect()
}

/// Lints `source` where the case lives, and each module `added` beside it (in the same
/// project, so each sees the others).
fn lint_at(place: &Place, source: &str, added: &[(String, String)], settings: &LinterSettings) -> Vec<Linted> {
    match place {
        Place::Alone if added.is_empty() => located(source, 0, lint(source, settings).diagnostics),
        Place::Alone => {
            let mut files = vec![(CASE_KEY.to_owned(), source.to_owned())];
            files.extend(added.iter().cloned());
            let memory = Memory::new(files);
            let mut found = located(source, 0, lint_in_project(source, settings, &ProjectResolver::new(&memory, CASE_KEY)).diagnostics);
            for (i, (name, text)) in added.iter().enumerate() {
                let diagnostics = lint_in_project(text, settings, &ProjectResolver::new(&memory, name.clone())).diagnostics;
                found.extend(located(text, i + 1, diagnostics));
            }
            found
        }
        Place::Disk(project, key) if added.is_empty() => {
            located(source, 0, lint_in_project(source, settings, &ProjectResolver::new(*project, key.clone())).diagnostics)
        }
        Place::Disk(project, key) => {
            let dir = Path::new(key).parent().unwrap_or(Path::new(""));
            let keys: Vec<String> = added.iter().map(|(name, _)| Project::key(&dir.join(name))).collect();
            let overlay = Overlay::new(*project, keys.iter().cloned().zip(added.iter().map(|(_, text)| text.clone())));
            let mut found = located(source, 0, lint_in_project(source, settings, &ProjectResolver::new(&overlay, key.clone())).diagnostics);
            for (i, ((_, text), module_key)) in added.iter().zip(&keys).enumerate() {
                let diagnostics = lint_in_project(text, settings, &ProjectResolver::new(&overlay, module_key.clone())).diagnostics;
                found.extend(located(text, i + 1, diagnostics));
            }
            found
        }
    }
}

fn code_line(text: &str, line: usize) -> String {
    text.lines().nth(line.wrapping_sub(1)).unwrap_or("").trim().to_owned()
}

/// Compares the original's findings, followed into `rewrite` (and the modules it adds),
/// with the rewrite's.
fn compare(case: &str, t: &'static str, original: &str, before: &[Linted], rewrite: &Rewrite, after: &[Linted]) -> Outcome {
    let texts: Vec<&str> = std::iter::once(rewrite.text.as_str()).chain(rewrite.modules.iter().map(|(_, t)| t.as_str())).collect();
    let starts: Vec<Vec<usize>> = texts.iter().map(|t| line_start_offsets(t)).collect();
    let file_name = |file: usize| (file > 0).then(|| rewrite.modules[file - 1].0.clone());
    let expected: Vec<(&Linted, usize, Option<usize>)> = before
        .iter()
        .map(|f| match rewrite.map_offset_to_module(f.start) {
            Some((module, at)) => (f, module + 1, Some(line_of(&starts[module + 1], at))),
            None => (f, 0, rewrite.map_offset(f.start).map(|o| line_of(&starts[0], o)).or_else(|| rewrite.map_line(f.line))),
        })
        .collect();
    let expected_keys: BTreeSet<(&str, usize, Option<usize>)> = expected.iter().map(|(f, file, l)| (f.rule, *file, *l)).collect();
    let actual_keys: BTreeSet<(&str, usize, Option<usize>)> = after.iter().map(|f| (f.rule, f.file, Some(f.line))).collect();
    let mut lost = Vec::new();
    let mut seen = BTreeSet::new();
    for (f, file, l) in &expected {
        if !actual_keys.contains(&(f.rule, *file, *l)) && seen.insert((f.rule, f.line)) {
            lost.push(Finding {
                rule: f.rule,
                line: f.line,
                file: None,
                expected_line: *l,
                expected_file: file_name(*file),
                message: f.message.clone(),
                code: code_line(original, f.line),
                rewritten_code: l.map(|l| code_line(texts[*file], l)),
            });
        }
    }
    let mut gained = Vec::new();
    let mut seen = BTreeSet::new();
    for f in after {
        if !expected_keys.contains(&(f.rule, f.file, Some(f.line))) && seen.insert((f.rule, f.file, f.line)) {
            gained.push(Finding {
                rule: f.rule,
                line: f.line,
                file: file_name(f.file),
                expected_line: None,
                expected_file: None,
                message: f.message.clone(),
                code: code_line(texts[f.file], f.line),
                rewritten_code: None,
            });
        }
    }
    Outcome { case: case.to_owned(), transformation: t, findings: before.len(), broken: false, lost, gained }
}

fn parses(text: &str) -> bool {
    !memlint_python::parse_with(text, None).root_node().has_error()
}

/// Runs `transformations` on every case. `project`: the folder's project, for cases that
/// live on disk.
pub fn run(cases: &[Case], transformations: &[&'static Transformation], project: Option<&Project>) -> Report {
    let settings = LinterSettings::default();
    let results: Vec<(Option<String>, usize, Vec<Outcome>)> = cases
        .par_iter()
        .map(|case| {
            if !parses(&case.source) {
                return (Some(case.name.clone()), 0, Vec::new());
            }
            let place = match (&case.path, project) {
                (Some(path), Some(project)) => Place::Disk(project, Project::key(path)),
                _ => Place::Alone,
            };
            let before = lint_at(&place, &case.source, &[], &settings);
            let mut before_in_memory: Option<Vec<Linted>> = None;
            let mut outcomes = Vec::new();
            for t in transformations {
                let Some(rewrite) = (t.apply)(&case.source, &case.context) else { continue };
                if !parses(&rewrite.text) || rewrite.modules.iter().any(|(_, text)| !parses(text)) {
                    outcomes.push(Outcome {
                        case: case.name.clone(),
                        transformation: t.name,
                        findings: before.len(),
                        broken: true,
                        lost: Vec::new(),
                        gained: Vec::new(),
                    });
                    continue;
                }
                let after = lint_at(&place, &rewrite.text, &rewrite.modules, &settings);
                let baseline = if rewrite.modules.is_empty() || !matches!(place, Place::Alone) {
                    &before
                } else {
                    before_in_memory.get_or_insert_with(|| {
                        let memory = Memory::new([(CASE_KEY.to_owned(), case.source.clone())]);
                        located(&case.source, 0, lint_in_project(&case.source, &settings, &ProjectResolver::new(&memory, CASE_KEY)).diagnostics)
                    })
                };
                outcomes.push(compare(&case.name, t.name, &case.source, baseline, &rewrite, &after));
            }
            (None, before.len(), outcomes)
        })
        .collect();
    let mut report = Report { cases: cases.len(), ..Report::default() };
    let mut tallies: Vec<Tally> = transformations.iter().map(|t| Tally { name: t.name.to_owned(), ..Tally::default() }).collect();
    report.overall.name = "overall".to_owned();
    for (skipped, findings, outcomes) in results {
        match skipped {
            Some(name) => report.skipped.push(name),
            None => {
                report.findings += findings;
                for tally in &mut tallies {
                    tally.cases += 1;
                }
                report.overall.cases += 1;
            }
        }
        for o in outcomes {
            if let Some(tally) = tallies.iter_mut().find(|t| t.name == o.transformation) {
                tally.add(&o);
            }
            report.overall.add(&o);
            if !o.invariant() {
                report.failures.push(o);
            }
        }
    }
    report.per_transformation = tallies;
    report
}

/// The per-transformation table and the overall invariance, as text.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{} cases ({} skipped: syntax errors), {} findings in the originals\n\n",
        report.cases,
        report.skipped.len(),
        report.findings
    ));
    out.push_str(&format!(
        "{:<18} {:>7} {:>9} {:>10}   {:>13} {:>10} {:>8} {:>6} {:>6} {:>6}\n",
        "transformation", "applied", "invariant", "invariance", "with findings", "invariance", "findings", "lost", "gained", "broken"
    ));
    for t in report.per_transformation.iter().chain(std::iter::once(&report.overall)) {
        if t.name == "overall" {
            out.push_str(&format!("{}\n", "-".repeat(104)));
        }
        let with = if t.applied_with_findings == 0 { 1.0 } else { t.invariant_with_findings as f64 / t.applied_with_findings as f64 };
        out.push_str(&format!(
            "{:<18} {:>7} {:>9} {:>10.3}   {:>6}/{:<6} {:>10.3} {:>8} {:>6} {:>6} {:>6}\n",
            t.name,
            t.applied,
            t.invariant,
            t.invariance(),
            t.invariant_with_findings,
            t.applied_with_findings,
            with,
            t.findings,
            t.lost,
            t.gained,
            t.broken
        ));
    }
    out
}

/// Every rewrite that is not invariant, with the findings lost and gained.
pub fn details(report: &Report) -> String {
    let mut out = String::new();
    for o in &report.failures {
        out.push_str(&format!("{}  {}{}\n", o.transformation, o.case, if o.broken { "  (the rewrite does not parse)" } else { "" }));
        for f in &o.lost {
            let to = f.expected_line.map_or("?".to_owned(), |l| l.to_string());
            let to = match &f.expected_file {
                Some(file) => format!("{file}:{to}"),
                None => format!("L{to}"),
            };
            out.push_str(&format!("  lost   {} L{} (expected at {to}): {}\n", f.rule, f.line, short(&f.message)));
            out.push_str(&format!("         | {}\n", f.code));
            if let Some(r) = &f.rewritten_code {
                out.push_str(&format!("         > {r}\n"));
            }
        }
        for f in &o.gained {
            let at = match &f.file {
                Some(file) => format!("{file}:{}", f.line),
                None => format!("L{}", f.line),
            };
            out.push_str(&format!("  gained {} {at}: {}\n", f.rule, short(&f.message)));
            out.push_str(&format!("         > {}\n", f.code));
        }
    }
    out
}

/// The `n` most frequent causes, as text.
pub fn causes_table(report: &Report, n: usize) -> String {
    let mut out = String::new();
    for (i, c) in report.causes().iter().take(n).enumerate() {
        out.push_str(&format!("{:>2}. {:>4}x  {} {} after {}: {}\n", i + 1, c.count, c.rule, c.change, c.transformation, c.message));
        for e in &c.examples {
            out.push_str(&format!("           {e}\n"));
        }
    }
    out
}

fn short(message: &str) -> String {
    let first: String = message.chars().take(100).collect();
    if first.len() < message.len() {
        format!("{first}…")
    } else {
        first
    }
}
