//! `memlint check`: lint files in parallel, report, and apply fixes.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use memlint_linter::{apply_fixes, lint, Diagnostic, FixMode, LintResult, LinterSettings, Rule, RuleSelection, SyntaxError};
use rayon::prelude::*;

use crate::exit;
use crate::report;
use crate::walk;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Files and folders to lint (folders are walked for `*.py`, skipping hidden folders,
    /// `__pycache__`, virtual environments and `site-packages`).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    /// How to print findings.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,

    /// Only these rules (codes or names, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "RULE")]
    pub select: Vec<String>,

    /// Skip these rules (codes or names, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "RULE")]
    pub ignore: Vec<String>,

    /// Exit 0 even when there are findings.
    #[arg(long)]
    pub exit_zero: bool,

    /// Print how many findings each rule has, instead of the findings.
    #[arg(long)]
    pub statistics: bool,

    /// Apply safe fixes, writing the files in place.
    #[arg(long)]
    pub fix: bool,

    /// Also apply unsafe fixes (with --fix or --diff), and count them in the summary.
    #[arg(long)]
    pub unsafe_fixes: bool,

    /// Print a unified diff of the fixes instead of writing them; exit 1 when there is something to fix.
    #[arg(long, conflicts_with = "fix")]
    pub diff: bool,

    /// Print only the findings, no summary.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Each finding with its source lines, the rule and the help text.
    Text,
    /// One line a finding: `path:row:col: MEM001 message`.
    Concise,
    /// A JSON array with ruff's field names.
    Json,
}

/// Why a file could not be linted (or was only partly linted).
#[derive(Debug, Clone)]
pub enum FileProblem {
    Unreadable(String),
    /// Syntax errors: the rest of the file was linted.
    Syntax(Vec<SyntaxError>),
    /// A fix was dropped because it would have broken the file, or the file could not be written.
    FixNotApplied(String),
}

/// What checking one file produced.
#[derive(Debug)]
pub struct FileReport {
    pub path: PathBuf,
    /// The text the findings refer to (after fixes, if any were applied).
    pub source: String,
    pub diagnostics: Vec<Diagnostic>,
    pub problems: Vec<FileProblem>,
    /// Findings fixed in this file.
    pub fixed: usize,
    /// The unified diff of the fixes (with `--diff`).
    pub diff: Option<String>,
}

impl FileReport {
    fn unreadable(path: &Path, reason: String) -> Self {
        FileReport { path: path.to_owned(), source: String::new(), diagnostics: Vec::new(), problems: vec![FileProblem::Unreadable(reason)], fixed: 0, diff: None }
    }
}

fn parse_rules(names: &[String]) -> Result<Vec<Rule>, memlint_linter::UnknownRule> {
    names.iter().filter(|n| !n.trim().is_empty()).map(|n| Rule::from_code_or_name(n)).collect()
}

pub fn run(args: CheckArgs) -> u8 {
    let (select, ignore) = match (parse_rules(&args.select), parse_rules(&args.ignore)) {
        (Ok(s), Ok(i)) => (s, i),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return exit::ERROR;
        }
    };
    let settings = LinterSettings { rules: RuleSelection::from_select_ignore(&select, &ignore), ..Default::default() };
    let (files, walk_errors) = match walk::collect_files(&args.paths) {
        Ok(found) => found,
        Err(missing) => {
            for m in missing {
                eprintln!("error: path `{}` does not exist", m.0.display());
            }
            return exit::ERROR;
        }
    };
    let fix_mode = match (args.fix || args.diff, args.unsafe_fixes) {
        (false, _) => None,
        (true, false) => Some(FixMode::Safe),
        (true, true) => Some(FixMode::Unsafe),
    };
    // One file per task: files differ wildly in size, and rayon's default splitting
    // would leave a core idle behind one large file.
    let mut reports: Vec<FileReport> = files
        .par_iter()
        .with_max_len(1)
        .map(|path| check_file(path, &settings, fix_mode, args.diff))
        .collect();
    for (path, reason) in walk_errors {
        reports.push(FileReport::unreadable(&path, reason));
    }
    reports.sort_by(|a, b| a.path.cmp(&b.path));

    // How many more findings unsafe fixes would fix, for the summary.
    let unsafe_fixable = if args.unsafe_fixes { 0 } else { count_fixable(&reports, memlint_linter::Applicability::Unsafe) };
    let safe_fixable = count_fixable(&reports, memlint_linter::Applicability::Safe);

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let written = if args.diff {
        report::write_diffs(&mut out, &reports)
    } else if args.statistics {
        report::write_statistics(&mut out, &reports)
    } else {
        match args.output_format {
            OutputFormat::Text => report::write_text(&mut out, &reports),
            OutputFormat::Concise => report::write_concise(&mut out, &reports),
            OutputFormat::Json => report::write_json(&mut out, &reports),
        }
    };
    let summary = Summary {
        findings: reports.iter().map(|r| r.diagnostics.len()).sum(),
        files_with_findings: reports.iter().filter(|r| !r.diagnostics.is_empty()).count(),
        problems: reports.iter().map(|r| r.problems.len()).sum(),
        fixed: reports.iter().map(|r| r.fixed).sum(),
        safe_fixable,
        unsafe_fixable,
        files: files.len(),
    };
    let human = matches!(args.output_format, OutputFormat::Text | OutputFormat::Concise) || args.statistics;
    let written = written.and_then(|_| {
        if !args.quiet && human && !args.diff {
            summary.write(&mut out, args.fix)
        } else {
            Ok(())
        }
    });
    if let Err(e) = written.and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: could not write the report: {e}");
            return exit::ERROR;
        }
    }
    let has_diffs = reports.iter().any(|r| r.diff.is_some());
    if args.exit_zero {
        exit::CLEAN
    } else if args.diff {
        if has_diffs { exit::FINDINGS } else { exit::CLEAN }
    } else if summary.findings > 0 || summary.problems > 0 {
        exit::FINDINGS
    } else {
        exit::CLEAN
    }
}

fn count_fixable(reports: &[FileReport], applicability: memlint_linter::Applicability) -> usize {
    reports
        .iter()
        .flat_map(|r| &r.diagnostics)
        .filter(|d| d.fix.as_ref().map(|f| f.applicability == applicability).unwrap_or(false))
        .count()
}

struct Summary {
    findings: usize,
    files_with_findings: usize,
    problems: usize,
    fixed: usize,
    safe_fixable: usize,
    unsafe_fixable: usize,
    files: usize,
}

impl Summary {
    fn write(&self, out: &mut impl Write, fixing: bool) -> std::io::Result<()> {
        if self.fixed > 0 || fixing {
            writeln!(out, "Fixed {} finding{}, {} remaining.", self.fixed, plural(self.fixed), self.findings)?;
        }
        if self.findings == 0 && self.problems == 0 {
            if !fixing {
                writeln!(out, "All checks passed! ({} file{} checked)", self.files, plural(self.files))?;
            }
            return Ok(());
        }
        if self.findings > 0 && !fixing {
            writeln!(
                out,
                "Found {} finding{} in {} file{}.",
                self.findings,
                plural(self.findings),
                self.files_with_findings,
                plural(self.files_with_findings)
            )?;
        }
        if self.safe_fixable > 0 {
            writeln!(out, "[*] {} fixable with `--fix`.", self.safe_fixable)?;
        }
        if self.unsafe_fixable > 0 {
            writeln!(out, "{} more fixable with `--fix --unsafe-fixes`.", self.unsafe_fixable)?;
        }
        if self.problems > 0 {
            writeln!(out, "{} file problem{} (see above).", self.problems, plural(self.problems))?;
        }
        Ok(())
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Reads a file as UTF-8, with a reason people understand when it is not.
pub fn read_source(path: &Path) -> Result<String, String> {
    let bytes = fs::read(path).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| {
        format!("not valid UTF-8 (invalid byte at offset {})", e.utf8_error().valid_up_to())
    })
}

fn check_file(path: &Path, settings: &LinterSettings, fix_mode: Option<FixMode>, diff_only: bool) -> FileReport {
    let source = match read_source(path) {
        Ok(s) => s,
        Err(reason) => return FileReport::unreadable(path, reason),
    };
    let Some(mode) = fix_mode else {
        let LintResult { diagnostics, syntax_errors, .. } = lint(&source, settings);
        let problems = if syntax_errors.is_empty() { Vec::new() } else { vec![FileProblem::Syntax(syntax_errors)] };
        return FileReport { path: path.to_owned(), source, diagnostics, problems, fixed: 0, diff: None };
    };
    let outcome = apply_fixes(&source, settings, mode);
    let mut problems: Vec<FileProblem> = outcome
        .rejected
        .iter()
        .map(|r| FileProblem::FixNotApplied(format!("{} {}: {}", r.rule.code(), r.rule.name(), r.reason)))
        .collect();
    let syntax_errors = memlint_python::syntax_errors(&memlint_python::parse_with(&outcome.source, None), &outcome.source);
    if !syntax_errors.is_empty() {
        problems.push(FileProblem::Syntax(syntax_errors));
    }
    let changed = outcome.changed(&source);
    let mut report = FileReport {
        path: path.to_owned(),
        source: outcome.source.clone(),
        diagnostics: outcome.remaining.clone(),
        problems,
        fixed: outcome.fixed_count(),
        diff: None,
    };
    if diff_only {
        // Nothing is written: the findings refer to the original text.
        report.source = source.clone();
        report.diagnostics = lint(&source, settings).diagnostics;
        report.fixed = 0;
        if changed {
            report.diff = Some(unified_diff(path, &source, &outcome.source));
        }
        return report;
    }
    if changed {
        if let Err(reason) = write_atomically(path, &source, &outcome.source) {
            // Nothing was written: report the findings against the text on disk.
            report.problems.push(FileProblem::FixNotApplied(reason));
            report.source = source.clone();
            report.diagnostics = lint(&source, settings).diagnostics;
            report.fixed = 0;
        }
    }
    report
}

fn unified_diff(path: &Path, before: &str, after: &str) -> String {
    let name = path.display().to_string();
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&name, &name)
        .to_string()
}

/// Writes `fixed` over `path` through a temporary file in the same folder and a rename,
/// keeping the file's permissions; refuses when the file changed since it was read.
pub fn write_atomically(path: &Path, original: &str, fixed: &str) -> Result<(), String> {
    let on_disk = fs::read(path).map_err(|e| format!("could not re-read the file before writing: {e}"))?;
    if on_disk != original.as_bytes() {
        return Err("the file changed on disk while memlint ran; not overwritten".to_owned());
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let permissions = fs::metadata(path).map_err(|e| e.to_string())?.permissions();
    let mut temp = tempfile::Builder::new()
        .prefix(".memlint-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| format!("could not create a temporary file in {}: {e}", dir.display()))?;
    temp.write_all(fixed.as_bytes()).map_err(|e| format!("could not write the fixed file: {e}"))?;
    temp.as_file().sync_all().map_err(|e| format!("could not write the fixed file: {e}"))?;
    fs::set_permissions(temp.path(), permissions).map_err(|e| format!("could not keep the file's permissions: {e}"))?;
    temp.persist(path).map_err(|e| format!("could not replace the file: {}", e.error))?;
    Ok(())
}
