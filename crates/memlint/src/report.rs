//! Printing findings: miette's graphical report, concise lines, JSON, SARIF, GitHub
//! workflow commands, JUnit XML, statistics and diffs.

use std::io::{IsTerminal, Write};

use memlint_linter::{Applicability, Diagnostic, Rule, Severity};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource, Report};
use serde::Serialize;

use crate::check::{FileProblem, FileReport};
use crate::source::{Location, SourceFile};

fn miette_severity(severity: Severity) -> miette::Severity {
    match severity {
        Severity::Error => miette::Severity::Error,
        Severity::Warning => miette::Severity::Warning,
        Severity::Info => miette::Severity::Advice,
    }
}

/// Renders an error (a broken configuration) for standard error.
pub fn render_error(error: &(dyn miette::Diagnostic + Send + Sync + 'static)) -> String {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let theme = if color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    let mut out = String::new();
    if GraphicalReportHandler::new_themed(theme).with_width(120).render_report(&mut out, error).is_err() {
        out = format!("error: {error}\n");
    }
    out
}

fn handler() -> GraphicalReportHandler {
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let theme = if color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    GraphicalReportHandler::new_themed(theme).with_links(false).with_width(TEXT_WIDTH)
}

fn render(handler: &GraphicalReportHandler, report: &Report) -> String {
    let mut out = String::new();
    if handler.render_report(&mut out, report.as_ref()).is_err() {
        out = format!("{report}\n");
    }
    out
}

fn location(source: Option<&SourceFile>, offset: usize) -> Location {
    source.map(|s| s.location(offset)).unwrap_or(Location { row: 1, column: 1, cell: None })
}

/// `path:row:col`, or for notebooks `path:cell 3:5:9` (cell 3, line 5 of the cell,
/// column 9), ruff's convention.
pub fn display_location(path: &str, loc: Location) -> String {
    match loc.cell {
        Some(cell) => format!("{path}:cell {cell}:{}:{}", loc.row, loc.column),
        None => format!("{path}:{}:{}", loc.row, loc.column),
    }
}

/// The graphical report of one finding. Its header is `path:row:col`, or for a notebook
/// `path:cell 4:7:5`: the source shown is then the finding's cell alone, so that the
/// header and the line numbers of the body count within the cell, as Jupyter shows it.
fn render_diagnostic(handler: &GraphicalReportHandler, file: &FileReport, source: &SourceFile, d: &Diagnostic) -> String {
    let label = match &d.fix {
        Some(fix) if fix.applicability == Applicability::Safe => format!("{} [fix: {}]", d.rule.name(), fix.message),
        Some(fix) => format!("{} [unsafe fix: {}]", d.rule.name(), fix.message),
        None => d.rule.name().to_owned(),
    };
    let mark = if file.fix_applies(d) { "[*] " } else { "" };
    let path = file.path.display().to_string();
    let (code, span) = match source.cell_range(d.range.start) {
        // The cell alone, its lines counted from 1; a span running into a later cell is
        // cut at the end of this one.
        Some((cell, range)) => {
            let end = d.range.end.clamp(d.range.start, range.end);
            let window = SourceWindow { name: format!("{path}:cell {cell}"), text: source.program()[range.clone()].to_owned(), offset: range.start, first_line: 0 };
            (window, d.range.start..end)
        }
        None => (SourceWindow::around(path, source, d.range.clone()), d.range.clone()),
    };
    let mut diagnostic = MietteDiagnostic::new(format!("{mark}{}", d.message))
        .with_code(format!("{} {}", d.rule.code(), d.rule.name()))
        .with_severity(miette_severity(d.severity))
        .with_url(d.rule.url())
        .with_label(LabeledSpan::at(span, label));
    if let Some(help) = &d.help {
        diagnostic = diagnostic.with_help(help.clone());
    }
    let report = Report::new(diagnostic).with_source_code(code);
    render(handler, &report)
}

/// The lines of a program around a span, for miette: it is handed this window, not the
/// whole program, so printing a finding costs the size of its context, not of the file
/// (a copy of the program per finding made text output quadratic in findings).
struct SourceWindow {
    name: String,
    text: String,
    /// Where the window starts in the program, in bytes and 0-based lines.
    offset: usize,
    first_line: usize,
}

impl SourceWindow {
    /// Lines of context miette may ask for on each side of a span (its default is 1).
    const CONTEXT_LINES: usize = 3;

    fn around(name: String, source: &SourceFile, span: std::ops::Range<usize>) -> SourceWindow {
        let program = source.program();
        let index = source.line_index();
        let first_line = index.line_of(span.start).saturating_sub(Self::CONTEXT_LINES);
        let last_line = index.line_of(span.end.max(span.start)) + Self::CONTEXT_LINES;
        let offset = index.line_start(first_line);
        let end = index.line_start(last_line + 1).min(program.len()).max(offset);
        SourceWindow { name, text: program[offset..end].to_owned(), offset, first_line }
    }
}

impl miette::SourceCode for SourceWindow {
    fn read_span<'a>(
        &'a self,
        span: &miette::SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        let start = span.offset().saturating_sub(self.offset).min(self.text.len());
        let local = miette::SourceSpan::new(start.into(), span.len().min(self.text.len() - start));
        let inner = self.text.read_span(&local, context_lines_before, context_lines_after)?;
        let shown = miette::SourceSpan::new((inner.span().offset() + self.offset).into(), inner.span().len());
        Ok(Box::new(miette::MietteSpanContents::new_named(
            self.name.clone(),
            inner.data(),
            shown,
            inner.line() + self.first_line,
            inner.column(),
            inner.line_count(),
        )))
    }
}

fn render_problem(handler: &GraphicalReportHandler, file: &FileReport, problem: &FileProblem) -> String {
    let path = file.path.display().to_string();
    match problem {
        FileProblem::Unreadable(reason) => format!("error: {path}: could not lint: {reason}\n"),
        FileProblem::FixNotApplied(reason) => format!("error: {path}: fix not applied: {reason}\n"),
        FileProblem::Syntax(errors) => {
            let errors = &errors[..errors.len().min(5)];
            // A notebook's errors are shown cell by cell, like its findings.
            let mut groups: Vec<(String, String, usize, Vec<&memlint_linter::SyntaxError>)> = Vec::new();
            for e in errors {
                let cell = file.source.as_ref().and_then(|s| s.cell_range(e.start));
                let (name, text, base) = match (&file.source, cell) {
                    (Some(source), Some((cell, range))) => (format!("{path}:cell {cell}"), source.program()[range.clone()].to_owned(), range.start),
                    (source, _) => (path.clone(), source.as_ref().map(|s| s.program().to_owned()).unwrap_or_default(), 0),
                };
                match groups.iter_mut().find(|g| g.0 == name) {
                    Some(group) => group.3.push(e),
                    None => groups.push((name, text, base, vec![e])),
                }
            }
            let mut out = String::new();
            for (name, text, base, errors) in groups {
                let mut diagnostic = MietteDiagnostic::new(format!(
                    "{path}: syntax error{}; findings in the broken code are not reported",
                    if errors.len() == 1 { "" } else { "s" }
                ))
                .with_code("syntax-error")
                .with_severity(miette::Severity::Error);
                for e in errors {
                    let start = e.start.saturating_sub(base).min(text.len());
                    let end = e.end.max(e.start).saturating_sub(base).clamp(start, text.len());
                    diagnostic = diagnostic.with_label(LabeledSpan::at(start..end, e.message.clone()));
                }
                let report = Report::new(diagnostic).with_source_code(NamedSource::new(name, text));
                out.push_str(&render(handler, &report));
            }
            out
        }
    }
}

/// Where a fact of a finding's evidence is, as `path:row:col` (`path:cell 2:3:5` in a
/// notebook); `None` for a fact with no place.
fn fact_location(path: &str, source: Option<&SourceFile>, fact: &memlint_python::Fact) -> Option<String> {
    fact.range.as_ref().map(|range| display_location(path, location(source, range.start)))
}

/// The lines that list a finding's evidence under its graphical report, as rustc and ruff
/// list notes: `  evidence:`, then one `    - path:row:col: fact` per fact (the place left
/// out for a fact that has none), wrapped at the report's width. Empty without evidence.
fn evidence_lines(path: &str, source: Option<&SourceFile>, d: &Diagnostic) -> String {
    if d.evidence.is_empty() {
        return String::new();
    }
    let mut out = String::from("  evidence:\n");
    for fact in &d.evidence {
        let line = match fact_location(path, source, fact) {
            Some(at) => format!("{at}: {}", fact.text),
            None => fact.text.clone(),
        };
        let options = textwrap::Options::new(TEXT_WIDTH).initial_indent("    - ").subsequent_indent("      ")
            .word_separator(textwrap::WordSeparator::AsciiSpace)
            .break_words(false);
        for wrapped in textwrap::wrap(&line, options) {
            out.push_str(&wrapped);
            out.push('\n');
        }
    }
    out
}

/// The width the text report is laid out for (miette's and the evidence lines').
const TEXT_WIDTH: usize = 100;

pub fn write_text(out: &mut dyn Write, files: &[FileReport]) -> std::io::Result<()> {
    let handler = handler();
    for file in files {
        for problem in &file.problems {
            write!(out, "{}", render_problem(&handler, file, problem))?;
        }
        if let Some(source) = &file.source {
            let path = file.path.display().to_string();
            for d in &file.diagnostics {
                write!(out, "{}", render_diagnostic(&handler, file, source, d))?;
                writeln!(out, "{}", evidence_lines(&path, Some(source), d))?;
                if let Some(m) = crate::snapshot::measured(file, Some(source), d) {
                    writeln!(out, "  measured: {}\n", m.describe())?;
                }
            }
        }
    }
    Ok(())
}

pub fn write_concise(out: &mut dyn Write, files: &[FileReport]) -> std::io::Result<()> {
    for file in files {
        let path = file.path.display().to_string();
        let source = file.source.as_ref();
        for problem in &file.problems {
            match problem {
                FileProblem::Unreadable(reason) => writeln!(out, "{path}:1:1: error: could not lint: {reason}")?,
                FileProblem::FixNotApplied(reason) => writeln!(out, "{path}:1:1: error: fix not applied: {reason}")?,
                FileProblem::Syntax(errors) => {
                    for e in errors {
                        writeln!(out, "{}: SyntaxError: {}", display_location(&path, location(source, e.start)), e.message)?;
                    }
                }
            }
        }
        for d in &file.diagnostics {
            // `path:row:col: CODE [*] [severity] message`: ruff's line (the code, then `[*]`
            // when `--fix` fixes it) with the severity before the message.
            let fixable = if file.fix_applies(d) { " [*]" } else { "" };
            writeln!(
                out,
                "{}: {}{fixable} [{}] {}",
                display_location(&path, location(source, d.range.start)),
                d.rule.code(),
                d.severity.as_str(),
                d.message
            )?;
            if let Some(m) = crate::snapshot::measured(file, source, d) {
                writeln!(out, "  measured: {}", m.describe())?;
            }
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct JsonLocation {
    row: usize,
    column: usize,
}

impl From<Location> for JsonLocation {
    fn from(l: Location) -> Self {
        JsonLocation { row: l.row, column: l.column }
    }
}

/// One fact of a finding's evidence in `--output-format json`: what it says, and where it
/// was read (`null` for a fact with no place), counted as the finding's own location is.
#[derive(Serialize)]
struct JsonFact {
    message: String,
    location: Option<JsonLocation>,
    end_location: Option<JsonLocation>,
    /// In a notebook, the cell the fact is in (rows then count within it).
    cell: Option<usize>,
}

fn json_evidence(source: Option<&SourceFile>, d: &Diagnostic) -> Vec<JsonFact> {
    d.evidence
        .iter()
        .map(|fact| {
            let start = fact.range.as_ref().map(|r| location(source, r.start));
            JsonFact {
                message: fact.text.clone(),
                location: start.map(Into::into),
                end_location: fact.range.as_ref().map(|r| location(source, r.end).into()),
                cell: start.and_then(|l| l.cell),
            }
        })
        .collect()
}

#[derive(Serialize)]
struct JsonEdit {
    content: String,
    location: JsonLocation,
    end_location: JsonLocation,
}

#[derive(Serialize)]
struct JsonFix {
    applicability: Applicability,
    message: String,
    edits: Vec<JsonEdit>,
}

/// One finding in `--output-format json`. The field names are ruff's and a public
/// contract: add fields, never rename or remove one. For notebooks, as in ruff, `cell`
/// is the cell and rows count within it.
#[derive(Serialize)]
struct JsonDiagnostic {
    code: Option<&'static str>,
    name: &'static str,
    message: String,
    severity: &'static str,
    filename: String,
    location: JsonLocation,
    end_location: JsonLocation,
    fix: Option<JsonFix>,
    url: Option<String>,
    help: Option<String>,
    noqa_row: Option<usize>,
    cell: Option<usize>,
    /// The facts the finding rests on, in order (empty for a file problem).
    evidence: Vec<JsonFact>,
    /// With `check --snapshot`: what the user's own run measured on this line.
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshot: Option<crate::snapshot::Measured>,
}

fn json_diagnostics(files: &[FileReport]) -> Vec<JsonDiagnostic> {
    let mut out = Vec::new();
    for file in files {
        let source = file.source.as_ref();
        let filename = file.path.display().to_string();
        let problem = |name: &'static str, message: String, start: usize, end: usize| {
            let loc = location(source, start);
            JsonDiagnostic {
                code: None,
                name,
                message,
                severity: "error",
                filename: filename.clone(),
                location: loc.into(),
                end_location: location(source, end).into(),
                fix: None,
                url: None,
                help: None,
                noqa_row: None,
                cell: loc.cell,
                evidence: Vec::new(),
                snapshot: None,
            }
        };
        for p in &file.problems {
            match p {
                FileProblem::Unreadable(reason) => out.push(problem("io-error", format!("could not lint: {reason}"), 0, 0)),
                FileProblem::FixNotApplied(reason) => out.push(problem("fix-error", format!("fix not applied: {reason}"), 0, 0)),
                FileProblem::Syntax(errors) => {
                    out.extend(errors.iter().map(|e| problem("syntax-error", format!("SyntaxError: {}", e.message), e.start, e.end)))
                }
            }
        }
        for d in &file.diagnostics {
            let start = location(source, d.range.start);
            out.push(JsonDiagnostic {
                code: Some(d.rule.code()),
                name: d.rule.name(),
                message: d.message.clone(),
                severity: d.severity.as_str(),
                filename: filename.clone(),
                location: start.into(),
                end_location: location(source, d.range.end).into(),
                fix: d.fix.as_ref().map(|f| JsonFix {
                    applicability: f.applicability,
                    message: f.message.clone(),
                    edits: f
                        .edits
                        .iter()
                        .map(|e| JsonEdit {
                            content: e.content.clone(),
                            location: location(source, e.range.start).into(),
                            end_location: location(source, e.range.end).into(),
                        })
                        .collect(),
                }),
                url: Some(d.rule.url()),
                help: d.help.clone(),
                noqa_row: Some(start.row),
                cell: start.cell,
                evidence: json_evidence(source, d),
                snapshot: crate::snapshot::measured(file, source, d),
            });
        }
    }
    out
}

/// Writes the JSON array's elements for these files (`started`: whether `[` is out).
pub fn write_json_elements(out: &mut dyn Write, files: &[FileReport], started: &mut bool) -> std::io::Result<()> {
    for entry in json_diagnostics(files) {
        out.write_all(if *started { b",\n" } else { b"[\n" })?;
        *started = true;
        let text = serde_json::to_string_pretty(&entry)?;
        for (i, line) in text.lines().enumerate() {
            if i > 0 {
                out.write_all(b"\n")?;
            }
            write!(out, "  {line}")?;
        }
    }
    Ok(())
}

/// Closes the JSON array (`[]` when nothing was written).
pub fn finish_json(out: &mut dyn Write, started: bool) -> std::io::Result<()> {
    if started {
        out.write_all(b"\n]\n")
    } else {
        out.write_all(b"[]\n")
    }
}

/// Adds these files' findings to the per-rule counts (rule, count, any fixed by `--fix`).
pub fn count_statistics(counts: &mut Vec<(Rule, usize, bool)>, files: &[FileReport]) {
    for file in files {
        for d in &file.diagnostics {
            let applies = file.fix_applies(d);
            match counts.iter_mut().find(|(r, _, _)| *r == d.rule) {
                Some((_, n, fixable)) => {
                    *n += 1;
                    *fixable |= applies;
                }
                None => counts.push((d.rule, 1, applies)),
            }
        }
    }
}

pub fn write_statistics(out: &mut dyn Write, counts: &[(Rule, usize, bool)], problems: usize) -> std::io::Result<()> {
    let mut counts = counts.to_vec();
    counts.sort_by_key(|(rule, n, _)| (std::cmp::Reverse(*n), *rule));
    for (rule, count, fixable) in counts {
        writeln!(out, "{count:>5}\t{}\t{}\t{}", rule.code(), rule.name(), if fixable { "[*]" } else { "" })?;
    }
    if problems > 0 {
        writeln!(out, "{problems:>5}\t-\tfile problems")?;
    }
    Ok(())
}

pub fn write_diffs(out: &mut dyn Write, files: &[FileReport]) -> std::io::Result<()> {
    for file in files {
        if let Some(diff) = &file.diff {
            write!(out, "{diff}")?;
        }
        for problem in &file.problems {
            if let FileProblem::FixNotApplied(reason) | FileProblem::Unreadable(reason) = problem {
                eprintln!("error: {}: {reason}", file.path.display());
            }
        }
    }
    Ok(())
}

// ----- GitHub Actions -------------------------------------------------------------------

/// Escapes a workflow command's message (`%`, CR, LF) or property (also `:` and `,`).
fn github_escape(text: &str, property: bool) -> String {
    let mut out = text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A");
    if property {
        out = out.replace(':', "%3A").replace(',', "%2C");
    }
    out
}

pub fn write_github(out: &mut dyn Write, files: &[FileReport]) -> std::io::Result<()> {
    for file in files {
        let path = github_escape(&file.path.display().to_string(), true);
        let source = file.source.as_ref();
        for problem in &file.problems {
            let (loc, message) = match problem {
                FileProblem::Unreadable(r) => (location(None, 0), format!("could not lint: {r}")),
                FileProblem::FixNotApplied(r) => (location(None, 0), format!("fix not applied: {r}")),
                FileProblem::Syntax(errors) => {
                    let e = &errors[0];
                    (location(source, e.start), format!("SyntaxError: {}", e.message))
                }
            };
            match loc.cell {
                Some(_) => {
                    let message = format!("{}: {message}", display_location(&file.path.display().to_string(), loc));
                    writeln!(out, "::error title=memlint,file={path}::{}", github_escape(&message, false))?
                }
                None => writeln!(out, "::error title=memlint,file={path},line={},col={}::{}", loc.row, loc.column, github_escape(&message, false))?,
            }
        }
        for d in &file.diagnostics {
            let start = location(source, d.range.start);
            let end = location(source, d.range.end);
            let level = match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Info => "notice",
            };
            let title = format!("memlint ({} {})", d.rule.code(), d.rule.name());
            let measured = crate::snapshot::measured(file, source, d).map(|m| format!(" (measured: {})", m.describe())).unwrap_or_default();
            match start.cell {
                // GitHub shows a notebook as its JSON, where no line is the cell's: the
                // annotation is the file's (no line), with the cell and line in its
                // title and message (ruff gives notebooks no line of the JSON either).
                Some(cell) => writeln!(
                    out,
                    "::{level} title={},file={path}::{}",
                    github_escape(&format!("{title} at cell {cell}, line {}", start.row), true),
                    github_escape(&format!("{}: {} {}{measured}", display_location(&file.path.display().to_string(), start), d.rule.code(), d.message), false)
                )?,
                None => writeln!(
                    out,
                    "::{level} title={},file={path},line={},col={},endLine={},endColumn={}::{}",
                    github_escape(&title, true),
                    start.row,
                    start.column,
                    end.row,
                    end.column,
                    github_escape(&format!("{}: {}{measured}", d.rule.code(), d.message), false)
                )?,
            }
        }
    }
    Ok(())
}

// ----- JUnit ------------------------------------------------------------------------------

/// One test suite per file with something to report.
pub fn junit_suites(files: &[FileReport]) -> Vec<quick_junit::TestSuite> {
    use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
    let mut suites = Vec::new();
    for file in files {
        let path = file.path.display().to_string();
        let mut suite = TestSuite::new(path.clone());
        let source = file.source.as_ref();
        for problem in &file.problems {
            let message = match problem {
                FileProblem::Unreadable(r) => format!("could not lint: {r}"),
                FileProblem::FixNotApplied(r) => format!("fix not applied: {r}"),
                FileProblem::Syntax(errors) => format!("SyntaxError: {}", errors[0].message),
            };
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
            status.set_message(message);
            suite.add_test_case(TestCase::new(format!("{path}: file"), status));
        }
        for d in &file.diagnostics {
            let loc = location(source, d.range.start);
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            match crate::snapshot::measured(file, source, d) {
                Some(m) => status.set_message(format!("{} (measured: {})", d.message, m.describe())),
                None => status.set_message(d.message.clone()),
            };
            status.set_type(d.rule.code());
            let mut description = format!("{}: {} {}: {}", display_location(&path, loc), d.rule.code(), d.rule.name(), d.message);
            if !d.evidence.is_empty() {
                description.push_str("\nevidence:");
                for fact in &d.evidence {
                    match fact_location(&path, source, fact) {
                        Some(at) => description.push_str(&format!("\n  - {at}: {}", fact.text)),
                        None => description.push_str(&format!("\n  - {}", fact.text)),
                    }
                }
            }
            status.set_description(description);
            let mut case = TestCase::new(format!("{}: {} {}", display_location(&path, loc), d.rule.code(), d.rule.name()), status);
            case.set_classname(format!("memlint.{}", d.rule.name()));
            suite.add_test_case(case);
        }
        if file.problems.is_empty() && file.diagnostics.is_empty() {
            continue;
        }
        suites.push(suite);
    }
    suites
}

pub fn write_junit(out: &mut dyn Write, suites: Vec<quick_junit::TestSuite>) -> std::io::Result<()> {
    use quick_junit::{Report as JunitReport, TestCase, TestCaseStatus, TestSuite};
    let mut report = JunitReport::new("memlint");
    report.add_test_suites(suites);
    if report.test_suites.is_empty() {
        // A report with one passing case, so CI shows that memlint ran.
        let mut suite = TestSuite::new("memlint");
        suite.add_test_case(TestCase::new("memlint check", TestCaseStatus::success()));
        report.add_test_suite(suite);
    }
    let xml = report.to_string().map_err(|e| std::io::Error::other(e.to_string()))?;
    out.write_all(xml.as_bytes())
}

// ----- SARIF ------------------------------------------------------------------------------

/// The SARIF results of these files.
pub fn sarif_results(files: &[FileReport]) -> Vec<serde_sarif::sarif::Result> {
    use serde_sarif::sarif::{
        ArtifactChange, ArtifactContent, ArtifactLocation, Fix, Location as SarifLocation, Message, PhysicalLocation, Region,
        Replacement, Result as SarifResult, ResultLevel,
    };
    let uri = |file: &FileReport| file.path.display().to_string().replace('\\', "/");
    let region = |source: Option<&SourceFile>, start: usize, end: usize| {
        let s = location(source, start);
        let e = location(source, end);
        Region::builder()
            .start_line(s.row as i64)
            .start_column(s.column as i64)
            .end_line(e.row as i64)
            .end_column(e.column as i64)
            .build()
    };
    let mut results = Vec::new();
    for file in files {
        let source = file.source.as_ref();
        for d in &file.diagnostics {
            let physical = PhysicalLocation::builder()
                .artifact_location(ArtifactLocation::builder().uri(uri(file)).build())
                .region(region(source, d.range.start, d.range.end))
                .build();
            let level = match d.severity {
                Severity::Error => ResultLevel::Error,
                Severity::Warning => ResultLevel::Warning,
                Severity::Info => ResultLevel::Note,
            };
            let fixes: Vec<Fix> = d
                .fix
                .iter()
                // SARIF replacements address the file's text; a notebook's fixes address
                // its program, so they are left out there.
                .filter(|_| source.map(|s| !s.is_notebook()).unwrap_or(false))
                .map(|fix| {
                    let replacements: Vec<Replacement> = fix
                        .edits
                        .iter()
                        .map(|e| {
                            Replacement::builder()
                                .deleted_region(region(source, e.range.start, e.range.end))
                                .inserted_content(ArtifactContent::builder().text(e.content.clone()).build())
                                .build()
                        })
                        .collect();
                    Fix::builder()
                        .description(Message::builder().text(fix.message.clone()).build())
                        .artifact_changes(vec![ArtifactChange::builder()
                            .artifact_location(ArtifactLocation::builder().uri(uri(file)).build())
                            .replacements(replacements)
                            .build()])
                        .build()
                })
                .collect();
            let rule_index = Rule::ALL.iter().position(|r| *r == d.rule).unwrap_or(0) as i64;
            let result = SarifResult::builder()
                .rule_id(d.rule.code())
                .rule_index(rule_index)
                .level(level)
                .message(Message::builder().text(d.message.clone()).build())
                .locations(vec![SarifLocation::builder().physical_location(physical).build()]);
            let mut result = if fixes.is_empty() { result.build() } else { result.fixes(fixes).build() };
            // The evidence: each fact with a place as a related location (its message the
            // fact), and every fact's text in `properties.evidence`, in order.
            let related: Vec<SarifLocation> = d
                .evidence
                .iter()
                .filter_map(|fact| fact.range.as_ref().map(|range| (fact, range)))
                .enumerate()
                .map(|(id, (fact, range))| {
                    SarifLocation::builder()
                        .id(id as i64)
                        .physical_location(
                            PhysicalLocation::builder()
                                .artifact_location(ArtifactLocation::builder().uri(uri(file)).build())
                                .region(region(source, range.start, range.end))
                                .build(),
                        )
                        .message(Message::builder().text(fact.text.clone()).build())
                        .build()
                })
                .collect();
            if !related.is_empty() {
                result.related_locations = Some(related);
            }
            let mut props = std::collections::BTreeMap::new();
            if !d.evidence.is_empty() {
                props.insert("evidence".to_string(), serde_json::json!(d.evidence.iter().map(|f| f.text.as_str()).collect::<Vec<_>>()));
            }
            if let Some(m) = crate::snapshot::measured(file, source, d) {
                props.insert("snapshot".to_string(), serde_json::to_value(&m).expect("serializes"));
            }
            if !props.is_empty() {
                result.properties = Some(serde_sarif::sarif::PropertyBag::builder().additional_properties(props).build());
            }
            results.push(result);
        }
    }
    results
}

pub fn write_sarif(out: &mut dyn Write, results: Vec<serde_sarif::sarif::Result>) -> std::io::Result<()> {
    use serde_sarif::sarif::{MultiformatMessageString, PropertyBag, ReportingDescriptor, Run, Sarif, Tool, ToolComponent};
    let rules: Vec<ReportingDescriptor> = Rule::ALL
        .iter()
        .map(|rule| {
            let doc = rule.doc();
            let mut descriptor = ReportingDescriptor::builder()
                .id(rule.code())
                .name(rule.name())
                .short_description(MultiformatMessageString::builder().text(rule.summary()).build())
                .full_description(
                    MultiformatMessageString::builder()
                        .text(doc.section("What it does").unwrap_or_else(|| rule.summary().to_owned()))
                        .build(),
                )
                .help(MultiformatMessageString::builder().text(doc.markdown.clone()).markdown(doc.markdown.clone()).build())
                .build();
            // SARIF wants an absolute URI in `helpUri`; while the rule's documentation is
            // `memlint rule <name>` (the command that prints it) it goes in the property
            // bag (`docs`) instead, and `help` carries the whole page.
            let url = rule.url();
            if url.contains("://") {
                descriptor.help_uri = Some(url.clone());
            }
            descriptor.properties = Some(PropertyBag { tags: None, additional_properties: [("docs".to_owned(), serde_json::json!(url))].into() });
            descriptor
        })
        .collect();
    let driver = ToolComponent::builder()
        .name("memlint")
        .version(env!("CARGO_PKG_VERSION"))
        .rules(rules)
        .build();
    let run = Run::builder().tool(Tool::builder().driver(driver).build()).results(results).build();
    let sarif = Sarif::builder()
        .schema("https://json.schemastore.org/sarif-2.1.0.json")
        .version(serde_json::json!("2.1.0"))
        .runs(vec![run])
        .build();
    serde_json::to_writer_pretty(&mut *out, &sarif)?;
    writeln!(out)
}
