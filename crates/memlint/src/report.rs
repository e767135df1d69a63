//! Printing findings: miette's graphical report, concise lines, JSON, statistics, diffs.

use std::io::{IsTerminal, Write};

use memlint_linter::{Diagnostic, LineIndex, Rule, Severity};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource, Report};
use serde::Serialize;

use crate::check::{FileProblem, FileReport};

fn miette_severity(severity: Severity) -> miette::Severity {
    match severity {
        Severity::Error => miette::Severity::Error,
        Severity::Warning => miette::Severity::Warning,
        Severity::Info => miette::Severity::Advice,
    }
}

fn handler() -> GraphicalReportHandler {
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let theme = if color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    GraphicalReportHandler::new_themed(theme).with_links(false).with_width(100)
}

fn render(handler: &GraphicalReportHandler, report: &Report) -> String {
    let mut out = String::new();
    if handler.render_report(&mut out, report.as_ref()).is_err() {
        out = format!("{report}\n");
    }
    out
}

/// The graphical report of one finding.
pub fn render_diagnostic(handler: &GraphicalReportHandler, file: &FileReport, d: &Diagnostic) -> String {
    let label = match &d.fix {
        Some(fix) => format!("{} [fix: {}]", d.rule.name(), fix.message),
        None => d.rule.name().to_owned(),
    };
    let mut diagnostic = MietteDiagnostic::new(d.message.clone())
        .with_code(format!("{} {}", d.rule.code(), d.rule.name()))
        .with_severity(miette_severity(d.severity))
        .with_url(d.rule.url())
        .with_label(LabeledSpan::at(d.range.clone(), label));
    if let Some(help) = &d.help {
        diagnostic = diagnostic.with_help(help.clone());
    }
    let report = Report::new(diagnostic).with_source_code(NamedSource::new(file.path.display().to_string(), file.source.clone()));
    render(handler, &report)
}

fn render_problem(handler: &GraphicalReportHandler, file: &FileReport, problem: &FileProblem) -> String {
    let path = file.path.display().to_string();
    match problem {
        FileProblem::Unreadable(reason) => format!("error: {path}: could not lint: {reason}\n"),
        FileProblem::FixNotApplied(reason) => format!("error: {path}: fix not applied: {reason}\n"),
        FileProblem::Syntax(errors) => {
            let mut diagnostic = MietteDiagnostic::new(format!(
                "{path}: syntax error{}; findings in the broken code are not reported",
                if errors.len() == 1 { "" } else { "s" }
            ))
            .with_code("syntax-error")
            .with_severity(miette::Severity::Error);
            for e in errors.iter().take(5) {
                diagnostic = diagnostic.with_label(LabeledSpan::at(e.start..e.end.max(e.start), e.message.clone()));
            }
            let report = Report::new(diagnostic).with_source_code(NamedSource::new(path, file.source.clone()));
            render(handler, &report)
        }
    }
}

pub fn write_text(out: &mut impl Write, files: &[FileReport]) -> std::io::Result<()> {
    let handler = handler();
    for file in files {
        for problem in &file.problems {
            write!(out, "{}", render_problem(&handler, file, problem))?;
        }
        for d in &file.diagnostics {
            writeln!(out, "{}", render_diagnostic(&handler, file, d))?;
        }
    }
    Ok(())
}

pub fn write_concise(out: &mut impl Write, files: &[FileReport]) -> std::io::Result<()> {
    for file in files {
        let index = LineIndex::new(&file.source);
        let path = file.path.display();
        for problem in &file.problems {
            match problem {
                FileProblem::Unreadable(reason) => writeln!(out, "{path}:1:1: error: could not lint: {reason}")?,
                FileProblem::FixNotApplied(reason) => writeln!(out, "{path}:1:1: error: fix not applied: {reason}")?,
                FileProblem::Syntax(errors) => {
                    for e in errors {
                        let p = index.position(e.start, &file.source);
                        writeln!(out, "{path}:{}:{}: SyntaxError: {}", p.row, p.column, e.message)?;
                    }
                }
            }
        }
        for d in &file.diagnostics {
            let p = index.position(d.range.start, &file.source);
            let fixable = if d.fix.is_some() { " [*]" } else { "" };
            writeln!(out, "{path}:{}:{}: {}{fixable} {}", p.row, p.column, d.rule.code(), d.message)?;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct JsonLocation {
    row: usize,
    column: usize,
}

#[derive(Serialize)]
struct JsonEdit {
    content: String,
    location: JsonLocation,
    end_location: JsonLocation,
}

#[derive(Serialize)]
struct JsonFix {
    applicability: memlint_linter::Applicability,
    message: String,
    edits: Vec<JsonEdit>,
}

/// One finding in `--output-format json`. The field names are ruff's and a public
/// contract: add fields, never rename or remove one.
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
    /// The notebook cell (1-based) for notebooks, else null.
    cell: Option<usize>,
}

fn location(index: &LineIndex, source: &str, offset: usize) -> JsonLocation {
    let p = index.position(offset, source);
    JsonLocation { row: p.row, column: p.column }
}

pub fn json_diagnostics(files: &[FileReport]) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for file in files {
        let index = LineIndex::new(&file.source);
        let filename = file.path.display().to_string();
        let problem = |name: &'static str, message: String, start: usize, end: usize| JsonDiagnostic {
            code: None,
            name,
            message,
            severity: "error",
            filename: filename.clone(),
            location: location(&index, &file.source, start),
            end_location: location(&index, &file.source, end),
            fix: None,
            url: None,
            help: None,
            noqa_row: None,
            cell: None,
        };
        for p in &file.problems {
            let entries = match p {
                FileProblem::Unreadable(reason) => vec![problem("io-error", format!("could not lint: {reason}"), 0, 0)],
                FileProblem::FixNotApplied(reason) => vec![problem("fix-error", format!("fix not applied: {reason}"), 0, 0)],
                FileProblem::Syntax(errors) => errors
                    .iter()
                    .map(|e| problem("syntax-error", format!("SyntaxError: {}", e.message), e.start, e.end))
                    .collect(),
            };
            out.extend(entries.into_iter().map(|e| serde_json::to_value(e).expect("plain data serializes")));
        }
        for d in &file.diagnostics {
            let entry = JsonDiagnostic {
                code: Some(d.rule.code()),
                name: d.rule.name(),
                message: d.message.clone(),
                severity: d.severity.as_str(),
                filename: filename.clone(),
                location: location(&index, &file.source, d.range.start),
                end_location: location(&index, &file.source, d.range.end),
                fix: d.fix.as_ref().map(|f| JsonFix {
                    applicability: f.applicability,
                    message: f.message.clone(),
                    edits: f
                        .edits
                        .iter()
                        .map(|e| JsonEdit {
                            content: e.content.clone(),
                            location: location(&index, &file.source, e.range.start),
                            end_location: location(&index, &file.source, e.range.end),
                        })
                        .collect(),
                }),
                url: Some(d.rule.url()),
                help: d.help.clone(),
                noqa_row: Some(index.position(d.range.start, &file.source).row),
                cell: None,
            };
            out.push(serde_json::to_value(entry).expect("plain data serializes"));
        }
    }
    out
}

pub fn write_json(out: &mut impl Write, files: &[FileReport]) -> std::io::Result<()> {
    let value = serde_json::Value::Array(json_diagnostics(files));
    serde_json::to_writer_pretty(&mut *out, &value)?;
    writeln!(out)
}

pub fn write_statistics(out: &mut impl Write, files: &[FileReport]) -> std::io::Result<()> {
    for rule in Rule::ALL {
        let count = files.iter().flat_map(|f| &f.diagnostics).filter(|d| d.rule == *rule).count();
        if count == 0 {
            continue;
        }
        let fixable = files.iter().flat_map(|f| &f.diagnostics).any(|d| d.rule == *rule && d.fix.is_some());
        writeln!(out, "{count:>5}\t{}\t{}\t{}", rule.code(), rule.name(), if fixable { "[*]" } else { "" })?;
    }
    let problems: usize = files.iter().map(|f| f.problems.len()).sum();
    if problems > 0 {
        writeln!(out, "{problems:>5}\t-\tfile problems")?;
    }
    Ok(())
}

pub fn write_diffs(out: &mut impl Write, files: &[FileReport]) -> std::io::Result<()> {
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
