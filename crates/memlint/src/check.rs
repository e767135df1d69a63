//! `memlint check`: find the files, lint them in parallel, report, and apply fixes.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, ValueEnum};
use memlint_config::{ConfigError, Overrides, Resolver, Settings};
use memlint_linter::{apply_fixes_in_project, lint_in_project, Applicability, Diagnostic, FixMode, LinterSettings, ProjectIndex, Rule, SyntaxError};
use memlint_project::{Project, SummaryStore};

use crate::cache::Cache;
use crate::exit;
use crate::report;
use crate::source::SourceFile;
use crate::walk::{self, FileToLint, WalkError};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Files and folders to lint. Folders are walked for `*.py` and `*.ipynb`, honouring
    /// `.gitignore` and `exclude`, skipping hidden folders and virtual environments.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,

    /// How to print findings.
    #[arg(long, visible_alias = "format", value_enum, default_value_t = OutputFormat::Text, env = "MEMLINT_OUTPUT_FORMAT")]
    pub output_format: OutputFormat,

    /// Write the report to this file instead of standard output.
    #[arg(long, short = 'o', visible_alias = "output", value_name = "PATH")]
    pub output_file: Option<PathBuf>,

    /// Only these rules (codes or names, comma-separated); replaces `select` from the configuration.
    #[arg(long, value_delimiter = ',', value_name = "RULE")]
    pub select: Option<Vec<String>>,

    /// Also these rules, on top of the selection.
    #[arg(long, value_delimiter = ',', value_name = "RULE")]
    pub extend_select: Vec<String>,

    /// Skip these rules (codes or names, comma-separated), on top of `ignore` from the configuration.
    #[arg(long, value_delimiter = ',', value_name = "RULE")]
    pub ignore: Vec<String>,

    /// Use this configuration file (a `memlint.toml`, or a `pyproject.toml` with `[tool.memlint]`)
    /// instead of discovering one per file.
    #[arg(long, value_name = "PATH", conflicts_with = "isolated")]
    pub config: Option<PathBuf>,

    /// Ignore every configuration file.
    #[arg(long)]
    pub isolated: bool,

    /// Print the settings that apply to FILE, and exit.
    #[arg(long, value_name = "FILE")]
    pub show_settings: Option<PathBuf>,

    /// Apply `exclude` even to files named on the command line (pre-commit passes every changed file).
    #[arg(long)]
    pub force_exclude: bool,

    /// Exit 0 even when there are findings.
    #[arg(long)]
    pub exit_zero: bool,

    /// Print how many findings each rule has, instead of the findings.
    #[arg(long)]
    pub statistics: bool,

    /// Apply safe fixes, writing the files in place (atomically; a fix that would break the
    /// syntax is dropped and reported).
    #[arg(long)]
    pub fix: bool,

    /// Also apply unsafe fixes (with --fix or --diff), and mark them `[*]` in the report.
    #[arg(long, overrides_with = "no_unsafe_fixes")]
    pub unsafe_fixes: bool,

    /// Never apply unsafe fixes, whatever the configuration says.
    #[arg(long, overrides_with = "unsafe_fixes", hide = true)]
    pub no_unsafe_fixes: bool,

    /// Add a `# noqa: MEM00x` comment to the line of every current finding (the files are
    /// written in place, atomically; notebooks in the cell), so that only new findings are
    /// reported from now on. Exits 1 when a finding could not be suppressed (its line ends
    /// inside a string or with a backslash).
    #[arg(long, conflicts_with_all = ["fix", "diff", "stdin_filename", "statistics", "show_settings"])]
    pub add_noqa: bool,

    /// Print a unified diff of the fixes instead of writing them; exit 1 when there is something to fix.
    #[arg(long, conflicts_with = "fix")]
    pub diff: bool,

    /// Read the source from standard input and report it under NAME (with --fix, the fixed
    /// source goes to standard output).
    #[arg(long, value_name = "NAME")]
    pub stdin_filename: Option<PathBuf>,

    /// Run every enabled rule on every file, without the pre-filter that skips files no
    /// rule could fire in (for checking that the pre-filter changes nothing).
    #[arg(long, hide = true)]
    pub no_prefilter: bool,

    /// Lint each file on its own: do not read the modules it imports from its project
    /// (classes and factories from sibling modules, callers in other files).
    #[arg(long)]
    pub no_project: bool,

    /// Lint every file again instead of reusing the results cached for unchanged files
    /// (nor the summaries cached for unchanged project modules: every module read is
    /// parsed).
    #[arg(long, env = "MEMLINT_NO_CACHE")]
    pub no_cache: bool,

    /// Where to keep the cache (results of files and summaries of project modules).
    #[arg(long, value_name = "DIR", env = "MEMLINT_CACHE_DIR", default_value = ".memlint_cache")]
    pub cache_dir: PathBuf,

    /// A PyTorch memory snapshot of a run of this code (`torch.cuda.memory._dump_snapshot`):
    /// findings on lines that held memory at the peak or retained it get the measured bytes.
    #[arg(long, value_name = "FILE.pickle")]
    pub snapshot: Option<PathBuf>,

    /// With --snapshot: the folder the snapshot's recorded paths are mapped onto (by longest
    /// matching path suffix).
    #[arg(long, value_name = "ROOT", requires = "snapshot")]
    pub snapshot_source: Option<PathBuf>,

    /// Print only the findings: no summary, and no warning when no Python file or notebook
    /// is found.
    #[arg(long, short)]
    pub quiet: bool,

    /// Lint, then watch the paths and lint again whenever a Python file, notebook or
    /// configuration file changes, clearing the screen first (as `ruff check --watch`).
    /// Unchanged files' results come from the cache. Stop it with Ctrl-C.
    #[arg(long, conflicts_with_all = ["fix", "diff", "add_noqa", "stdin_filename", "show_settings", "output_file"])]
    pub watch: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Each finding with its source lines, the rule and the help text.
    Text,
    /// One line a finding: `path:row:col: MEM001 [warning] message` (`MEM004 [*] [warning]`
    /// when --fix fixes it).
    Concise,
    /// A JSON array with ruff's field names.
    Json,
    /// SARIF 2.1.0, for code scanning.
    Sarif,
    /// GitHub Actions workflow commands (`::error file=…`), shown as annotations.
    Github,
    /// JUnit XML, for CI systems that show test reports.
    Junit,
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
    /// The text the findings refer to (after fixes, if any were written). Kept only for
    /// files with something to report, so memory does not grow with the tree.
    pub source: Option<SourceFile>,
    pub diagnostics: Vec<Diagnostic>,
    pub problems: Vec<FileProblem>,
    /// Findings fixed in this file.
    pub fixed: usize,
    /// The unified diff of the fixes (with `--diff`).
    pub diff: Option<String>,
    /// Whether `--fix` applies unsafe fixes to this file (`--unsafe-fixes` or the
    /// configuration): then its unsafe fixes are marked `[*]` too, as ruff marks them.
    pub unsafe_fixes: bool,
}

impl FileReport {
    fn unreadable(path: &Path, reason: String) -> Self {
        FileReport { path: path.to_owned(), source: None, diagnostics: Vec::new(), problems: vec![FileProblem::Unreadable(reason)], fixed: 0, diff: None, unsafe_fixes: false }
    }

    /// Whether `--fix` (with the unsafe fixes this file allows) would apply `d`'s fix:
    /// what `[*]` means.
    pub fn fix_applies(&self, d: &Diagnostic) -> bool {
        d.fix.as_ref().map(|f| f.applicability == Applicability::Safe || self.unsafe_fixes).unwrap_or(false)
    }

    pub fn has_output(&self) -> bool {
        !self.diagnostics.is_empty() || !self.problems.is_empty() || self.diff.is_some()
    }
}

fn parse_rules(names: &[String]) -> Result<Vec<Rule>, memlint_linter::UnknownRule> {
    names.iter().filter(|n| !n.trim().is_empty()).map(|n| Rule::from_code_or_name(n)).collect()
}

/// Prints a broken configuration the way miette shows it, naming the file and the key.
pub fn print_config_error(error: &ConfigError) {
    eprint!("{}", report::render_error(error));
}

pub fn run(args: CheckArgs) -> u8 {
    if args.watch {
        return crate::watch::run(&args);
    }
    run_once(&args)
}

/// One `memlint check` over `args` (with `--watch`, once per change).
pub fn run_once(args: &CheckArgs) -> u8 {
    // For scripts/bench-check.sh: how long tree-sitter took on each text this run parsed.
    let parse_times_file = std::env::var_os("MEMLINT_PARSE_TIMES");
    if parse_times_file.is_some() {
        memlint_python::time_parses();
    }
    if let Some(path) = &args.snapshot {
        if let Err(status) = crate::snapshot::load_for_findings(path, args.snapshot_source.as_deref()) {
            return status;
        }
    }
    let overrides = match build_overrides(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::ERROR;
        }
    };
    let resolver = match Resolver::new(overrides) {
        Ok(r) => Arc::new(r),
        Err(e) => {
            print_config_error(&e);
            return exit::ERROR;
        }
    };
    if let Some(file) = &args.show_settings {
        return match resolver.settings_for(file) {
            Ok(settings) => {
                print!("{}", settings.describe(file));
                exit::CLEAN
            }
            Err(e) => {
                print_config_error(&e);
                exit::ERROR
            }
        };
    }
    if let Some(name) = &args.stdin_filename {
        return check_stdin(args, &resolver, name);
    }
    let (files, walk_errors) = match walk::collect_files(&args.paths, &resolver, args.force_exclude) {
        Ok(found) => found,
        Err(WalkError::Missing(missing)) => {
            for m in missing {
                eprintln!("error: path `{}` does not exist", m.display());
            }
            return exit::ERROR;
        }
        Err(WalkError::Config(e)) => {
            print_config_error(&e);
            return exit::ERROR;
        }
    };
    if files.is_empty() && walk_errors.is_empty() && !args.quiet {
        // As ruff warns (and still exits 0): a wrong path or an `exclude` that takes
        // everything should not pass silently as "All checks passed!".
        eprintln!("warning: No Python files found under the given path(s)");
    }
    if args.add_noqa {
        return crate::add_noqa::run(&files, walk_errors);
    }
    let cache = if args.no_cache || args.no_prefilter || args.fix || args.diff { None } else { Cache::open(&args.cache_dir) };
    let mut output = match Output::open(args) {
        Ok(o) => o,
        Err(e) => return write_failed(args, e),
    };
    // The summaries of the project's modules are kept beside the results, and like them
    // only when the cache is on: a re-run parses the files that changed, not the modules
    // around them.
    let summary_store = || cache.as_ref().and_then(|_| SummaryStore::open(&args.cache_dir.join(env!("CARGO_PKG_VERSION")), crate::cache::BUILD_ID));
    let project = (!args.no_project).then(|| crate::project::for_files(&files).with_summary_store(summary_store()));
    let checked = check_in_order(&files, |file| {
        let mode = fix_mode(args, &file.settings);
        let mut report = check_file(file, mode, args.diff, cache.as_ref(), args.no_prefilter, project.as_ref());
        if !report.has_output() {
            report.source = None;
        }
        report
    }, |reports| output.chunk(reports));
    if let Err(e) = checked {
        return write_failed(args, e);
    }
    let unreadable: Vec<FileReport> = walk_errors.into_iter().map(|(path, reason)| FileReport::unreadable(&path, reason)).collect();
    if let Err(e) = output.chunk(&unreadable) {
        return write_failed(args, e);
    }
    if let (Some(p), Some(_)) = (&project, std::env::var_os("MEMLINT_PROJECT_STATS")) {
        let (parses, parsed_bytes) = memlint_python::parses_so_far();
        eprintln!(
            "project: {} modules summarized for {} files checked ({} read and parsed for their summary alone, of which {} trees went on to their file's lint; {} summaries read from the cache; {} lints made no summary of a module no other file imports); {} parses of {} bytes in all",
            p.modules_summarized(),
            files.len(),
            p.modules_parsed_for_summary(),
            p.trees_handed_to_lint(),
            p.summaries_read_from_store(),
            p.seeds_deferred(),
            parses,
            parsed_bytes
        );
    }
    // For scripts/bench-check.sh: the files this run parsed, to time tree-sitter on them.
    if let (Some(p), Some(list)) = (&project, std::env::var_os("MEMLINT_PARSED_FILES")) {
        let paths: String = p.files_parsed().iter().map(|f| format!("{}\n", f.display())).collect();
        if let Err(e) = std::fs::write(&list, paths) {
            eprintln!("warning: MEMLINT_PARSED_FILES: could not write {}: {e}", Path::new(&list).display());
        }
    }
    if let Some(file) = &parse_times_file {
        let lines: String = memlint_python::parse_times().iter().map(|t| format!("{:016x}\t{}\t{}\n", t.text_hash, t.bytes, t.nanos)).collect();
        if let Err(e) = std::fs::write(file, lines) {
            eprintln!("warning: MEMLINT_PARSE_TIMES: could not write {}: {e}", Path::new(file).display());
        }
    }
    if project.as_ref().map(Project::limit_reached).unwrap_or(false) {
        eprintln!(
            "warning: the project has more than {} modules: names imported from the modules past that were treated as unknown",
            memlint_project::DEFAULT_MODULE_LIMIT
        );
    }
    // Freeing the summaries of thousands of modules takes a noticeable moment on one
    // core: done beside the rest, so a run that ends here does not wait for it.
    if let Some(project) = project {
        // Its summaries are written on a thread of their own: wait for them (the results'
        // pack is written when the cache is dropped, after the report).
        project.flush_writes();
        std::thread::spawn(move || drop(project));
    }
    output.finish(files.len())
}

/// Lints `paths` (with their configuration) for `memlint verify`; Err is the exit status.
pub fn findings_for_verify(paths: &[PathBuf]) -> Result<Vec<memlint_verify::Finding>, u8> {
    let resolver = Arc::new(Resolver::new(Overrides::default()).map_err(|e| {
        print_config_error(&e);
        exit::ERROR
    })?);
    let (files, unreadable) = match walk::collect_files(paths, &resolver, false) {
        Ok(found) => found,
        Err(WalkError::Missing(missing)) => {
            for m in missing {
                eprintln!("error: path `{}` does not exist", m.display());
            }
            return Err(exit::ERROR);
        }
        Err(WalkError::Config(e)) => {
            print_config_error(&e);
            return Err(exit::ERROR);
        }
    };
    for (path, reason) in unreadable {
        eprintln!("warning: {}: {reason}", path.display());
    }
    // The same findings `memlint check` reports: each file with the project around it.
    let project = crate::project::for_files(&files);
    let mut findings = Vec::new();
    for file in &files {
        let report = check_file(file, None, false, None, false, Some(&project));
        for problem in &report.problems {
            if let FileProblem::Unreadable(reason) = problem {
                eprintln!("error: {}: could not lint: {reason}", file.path.display());
                return Err(exit::ERROR);
            }
        }
        let Some(source) = &report.source else { continue };
        for d in &report.diagnostics {
            let loc = source.location(d.range.start);
            findings.push(memlint_verify::Finding {
                path: file.path.clone(),
                row: loc.row,
                column: loc.column,
                code: d.rule.code().to_owned(),
                name: d.rule.name().to_owned(),
                message: d.message.clone(),
            });
        }
    }
    Ok(findings)
}

fn build_overrides(args: &CheckArgs) -> Result<Overrides, memlint_linter::UnknownRule> {
    Ok(Overrides {
        select: args.select.as_deref().map(parse_rules).transpose()?,
        extend_select: parse_rules(&args.extend_select)?,
        ignore: parse_rules(&args.ignore)?,
        unsafe_fixes: if args.unsafe_fixes {
            Some(true)
        } else if args.no_unsafe_fixes {
            Some(false)
        } else {
            None
        },
        config: args.config.clone(),
        isolated: args.isolated,
    })
}

fn fix_mode(args: &CheckArgs, settings: &Settings) -> Option<FixMode> {
    match (args.fix || args.diff, settings.unsafe_fixes) {
        (false, _) => None,
        (true, false) => Some(FixMode::Safe),
        (true, true) => Some(FixMode::Unsafe),
    }
}

/// Where the report goes, and what has been seen so far. Files are checked and written
/// in chunks, so memory holds one chunk's sources, not the whole tree's.
struct Output<'a> {
    args: &'a CheckArgs,
    out: Box<dyn Write>,
    summary: Summary,
    has_diffs: bool,
    statistics: Vec<(Rule, usize, bool)>,
    json_started: bool,
    sarif_results: Vec<serde_sarif::sarif::Result>,
    junit_suites: Vec<quick_junit::TestSuite>,
}

/// Reports written at a time.
const CHUNK: usize = 64;

/// What to say about a file whose linting panicked: a bug in memlint, reported for that
/// file (exit 1) rather than taking the whole run down (exit 101).
fn panic_reason(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    format!("memlint panicked while linting this file (a bug in memlint; please report it with the file): {message}")
}

/// Checks `files` on one thread per core, each taking the next file when it is done
/// (files differ wildly in size: splitting the list up front, or waiting for a batch to
/// finish, leaves a core idle behind a large file), and hands the reports to `write`
/// in the files' order, a few at a time, as they come: only reports that finished
/// before an earlier file's are held. The first write error stops the checking.
fn check_in_order<F, W>(files: &[FileToLint], check: F, mut write: W) -> std::io::Result<()>
where
    F: Fn(&FileToLint) -> FileReport + Sync,
    W: FnMut(&[FileReport]) -> std::io::Result<()>,
{
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let threads = rayon::current_num_threads().clamp(1, files.len().max(1));
    let (sender, receiver) = std::sync::mpsc::sync_channel::<(usize, FileReport)>(threads * 4);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let sender = sender.clone();
            let (next, stop, check) = (&next, &stop, &check);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(file) = files.get(i) else { break };
                    let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(file)))
                        .unwrap_or_else(|panic| FileReport::unreadable(&file.path, panic_reason(panic.as_ref())));
                    if sender.send((i, report)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        let mut early: std::collections::BTreeMap<usize, FileReport> = std::collections::BTreeMap::new();
        let mut ready = Vec::with_capacity(CHUNK);
        let mut expected = 0;
        let mut result = Ok(());
        for (i, report) in receiver {
            if result.is_err() {
                continue; // drain, so no sender blocks
            }
            early.insert(i, report);
            while let Some(report) = early.remove(&expected) {
                ready.push(report);
                expected += 1;
            }
            if ready.len() >= CHUNK {
                result = write(&ready);
                ready.clear();
                if result.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        }
        result?;
        write(&ready)
    })
}

impl<'a> Output<'a> {
    fn open(args: &'a CheckArgs) -> std::io::Result<Output<'a>> {
        let out: Box<dyn Write> = match &args.output_file {
            Some(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    fs::create_dir_all(dir)?;
                }
                Box::new(std::io::BufWriter::new(fs::File::create(path)?))
            }
            None => Box::new(std::io::BufWriter::new(std::io::stdout())),
        };
        Ok(Output {
            args,
            out,
            summary: Summary::default(),
            has_diffs: false,
            statistics: Vec::new(),
            json_started: false,
            sarif_results: Vec::new(),
            junit_suites: Vec::new(),
        })
    }

    fn chunk(&mut self, reports: &[FileReport]) -> std::io::Result<()> {
        let args = self.args;
        let s = &mut self.summary;
        s.findings += reports.iter().map(|r| r.diagnostics.len()).sum::<usize>();
        s.files_with_findings += reports.iter().filter(|r| !r.diagnostics.is_empty()).count();
        s.problems += reports.iter().map(|r| r.problems.len()).sum::<usize>();
        s.fixed += reports.iter().map(|r| r.fixed).sum::<usize>();
        for report in reports {
            for d in &report.diagnostics {
                if report.fix_applies(d) {
                    s.fixable += 1;
                } else if d.fix.is_some() {
                    s.unsafe_fixable += 1;
                }
            }
        }
        self.has_diffs |= reports.iter().any(|r| r.diff.is_some());
        let out = &mut self.out;
        if args.diff {
            return report::write_diffs(out, reports);
        }
        if args.statistics {
            report::count_statistics(&mut self.statistics, reports);
            return Ok(());
        }
        match args.output_format {
            OutputFormat::Text => report::write_text(out, reports),
            OutputFormat::Concise => report::write_concise(out, reports),
            OutputFormat::Github => report::write_github(out, reports),
            OutputFormat::Json => report::write_json_elements(out, reports, &mut self.json_started),
            OutputFormat::Sarif => {
                self.sarif_results.extend(report::sarif_results(reports));
                Ok(())
            }
            OutputFormat::Junit => {
                self.junit_suites.extend(report::junit_suites(reports));
                Ok(())
            }
        }
    }

    /// Closes the report, prints the summary, and returns the exit status.
    fn finish(mut self, files: usize) -> u8 {
        let args = self.args;
        self.summary.files = files;
        let result = (|| -> std::io::Result<()> {
            if args.statistics && !args.diff {
                report::write_statistics(&mut self.out, &self.statistics, self.summary.problems)?;
            } else if !args.diff {
                match args.output_format {
                    OutputFormat::Json => report::finish_json(&mut self.out, self.json_started)?,
                    OutputFormat::Sarif => report::write_sarif(&mut self.out, std::mem::take(&mut self.sarif_results))?,
                    OutputFormat::Junit => report::write_junit(&mut self.out, std::mem::take(&mut self.junit_suites))?,
                    _ => {}
                }
            }
            let human = matches!(args.output_format, OutputFormat::Text | OutputFormat::Concise) || args.statistics;
            if !args.quiet && human && !args.diff {
                // With --output-file the summary still goes to the terminal.
                if args.output_file.is_some() {
                    self.summary.write(&mut std::io::stderr(), args.fix)?;
                } else {
                    self.summary.write(&mut self.out, args.fix)?;
                }
            }
            self.out.flush()
        })();
        if let Err(e) = result {
            return write_failed(args, e);
        }
        if args.exit_zero {
            exit::CLEAN
        } else if args.diff {
            if self.has_diffs || self.summary.problems > 0 { exit::FINDINGS } else { exit::CLEAN }
        } else if self.summary.findings > 0 || self.summary.problems > 0 {
            exit::FINDINGS
        } else {
            exit::CLEAN
        }
    }
}

fn write_failed(args: &CheckArgs, e: std::io::Error) -> u8 {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return exit::CLEAN;
    }
    let target = args.output_file.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "standard output".into());
    eprintln!("error: could not write the report to {target}: {e}");
    exit::ERROR
}

/// Writes one finished set of reports (standard input's) and returns the exit status.
fn finish(args: &CheckArgs, reports: &[FileReport], files: usize) -> u8 {
    let mut output = match Output::open(args) {
        Ok(o) => o,
        Err(e) => return write_failed(args, e),
    };
    if let Err(e) = output.chunk(reports) {
        return write_failed(args, e);
    }
    output.finish(files)
}

#[derive(Default)]
struct Summary {
    findings: usize,
    files_with_findings: usize,
    problems: usize,
    fixed: usize,
    /// Findings `--fix` would fix (`[*]`), unsafe ones included where they are enabled.
    fixable: usize,
    /// Findings whose only fix is unsafe and not enabled.
    unsafe_fixable: usize,
    files: usize,
}

impl Summary {
    fn write(&self, out: &mut dyn Write, fixing: bool) -> std::io::Result<()> {
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
        if self.fixable > 0 {
            writeln!(out, "[*] {} fixable with `--fix`.", self.fixable)?;
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
pub fn read_text(path: &Path) -> Result<String, String> {
    let bytes = fs::read(path).map_err(|e| e.to_string())?;
    decode(bytes)
}

fn decode(bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| format!("not valid UTF-8 (invalid byte at offset {})", e.utf8_error().valid_up_to()))
}

fn syntax_problem(errors: Vec<SyntaxError>) -> Vec<FileProblem> {
    if errors.is_empty() { Vec::new() } else { vec![FileProblem::Syntax(errors)] }
}

fn check_file(file: &FileToLint, fix_mode: Option<FixMode>, diff_only: bool, cache: Option<&Cache>, no_prefilter: bool, project: Option<&Project>) -> FileReport {
    let path = &file.path;
    let resolver = crate::project::index(project, path, fix_mode.is_none());
    let index = crate::project::as_index(&resolver);
    let lint = |program: &str, settings: &LinterSettings| lint_in_project(program, settings, index);
    let text = match read_text(path) {
        Ok(t) => t,
        Err(reason) => return FileReport::unreadable(path, reason),
    };
    let source = match SourceFile::new(path, text) {
        Ok(s) => s,
        Err(reason) => return FileReport::unreadable(path, reason),
    };
    let settings = file.settings.linter_for(path);
    let unsafe_fixes = file.settings.unsafe_fixes;
    let Some(mode) = fix_mode else {
        let (diagnostics, syntax_errors) = if no_prefilter {
            let result = memlint_linter::lint_unfiltered_in_project(source.program(), &settings, index);
            (result.diagnostics, result.syntax_errors)
        } else {
            lint_cached(&source, &settings, cache, project, &resolver)
        };
        return FileReport { path: path.to_owned(), source: Some(source), diagnostics, problems: syntax_problem(syntax_errors), fixed: 0, diff: None, unsafe_fixes };
    };
    let outcome = apply_fixes_in_project(source.program(), &settings, mode, index);
    let mut problems: Vec<FileProblem> = outcome
        .rejected
        .iter()
        .map(|r| FileProblem::FixNotApplied(format!("{} {}: {}", r.rule.code(), r.rule.name(), r.reason)))
        .collect();
    let fixed_source = if outcome.changed(source.program()) {
        match source.with_fixed_program(&outcome.source) {
            Ok(fixed) => Some(fixed),
            Err(reason) => {
                problems.push(FileProblem::FixNotApplied(reason));
                None
            }
        }
    } else {
        None
    };
    let original_result = || lint(source.program(), &settings);
    if diff_only {
        // Nothing is written: the findings refer to the original text.
        let result = original_result();
        problems.extend(syntax_problem(result.syntax_errors));
        let diff = fixed_source.as_ref().map(|fixed| unified_diff(path, source.text(), fixed.text()));
        return FileReport { path: path.to_owned(), source: Some(source), diagnostics: result.diagnostics, problems, fixed: 0, diff, unsafe_fixes };
    }
    let Some(fixed) = fixed_source else {
        let result = original_result();
        problems.extend(syntax_problem(result.syntax_errors));
        return FileReport { path: path.to_owned(), source: Some(source), diagnostics: result.diagnostics, problems, fixed: 0, diff: None, unsafe_fixes };
    };
    match write_atomically(path, source.text(), fixed.text()) {
        Ok(()) => {
            let remaining = lint(fixed.program(), &settings);
            problems.extend(syntax_problem(remaining.syntax_errors));
            FileReport { path: path.to_owned(), source: Some(fixed), diagnostics: remaining.diagnostics, problems, fixed: outcome.fixed_count(), diff: None, unsafe_fixes }
        }
        Err(reason) => {
            // Nothing was written: report the findings against the text on disk.
            problems.push(FileProblem::FixNotApplied(reason));
            let result = original_result();
            problems.extend(syntax_problem(result.syntax_errors));
            FileReport { path: path.to_owned(), source: Some(source), diagnostics: result.diagnostics, problems, fixed: 0, diff: None, unsafe_fixes }
        }
    }
}

/// Lints with the results cache: an entry is reused when the file's text, its settings
/// and the content of every project module its lint read are unchanged.
fn lint_cached(
    source: &SourceFile,
    settings: &LinterSettings,
    cache: Option<&Cache>,
    project: Option<&Project>,
    resolver: &Option<memlint_python::ProjectResolver<'_>>,
) -> (Vec<Diagnostic>, Vec<SyntaxError>) {
    let key = cache.map(|c| c.key(source.program(), settings, project.is_some()));
    if let (Some(cache), Some(key)) = (cache, &key) {
        let holds = |dependency: &str, recorded: &str| project.is_some_and(|p| p.dependency_holds(dependency, recorded));
        if let Some(hit) = cache.get(key, holds) {
            return hit;
        }
    }
    let result = lint_in_project(source.program(), settings, crate::project::as_index(resolver));
    if let (Some(cache), Some(key)) = (cache, &key) {
        cache.put(key, &result.diagnostics, &result.syntax_errors, &crate::project::dependencies(project, resolver));
    }
    (result.diagnostics, result.syntax_errors)
}

fn check_stdin(args: &CheckArgs, resolver: &Resolver, name: &Path) -> u8 {
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("error: could not read standard input: {e}");
        return exit::ERROR;
    }
    let settings = match resolver.settings_for(name) {
        Ok(s) => s,
        Err(e) => {
            print_config_error(&e);
            return exit::ERROR;
        }
    };
    if args.force_exclude && name.ancestors().any(|a| !a.as_os_str().is_empty() && settings.is_excluded(a)) {
        if args.fix {
            // Excluded: hand the input back unchanged.
            let _ = std::io::stdout().write_all(&bytes);
        }
        return exit::CLEAN;
    }
    let project = (!args.no_project).then(|| crate::project::for_stdin(settings.config_file.as_ref().map(|_| settings.root.clone())));
    let resolver = crate::project::index(project.as_ref(), name, false);
    let index: &dyn ProjectIndex = crate::project::as_index(&resolver);
    let lint = |program: &str, settings: &LinterSettings| lint_in_project(program, settings, index);
    let report = match decode(bytes).and_then(|text| SourceFile::new(name, text)) {
        Err(reason) => FileReport::unreadable(name, reason),
        Ok(source) => {
            let linter = settings.linter_for(name);
            match fix_mode(args, &settings) {
                Some(mode) if args.fix => {
                    let outcome = apply_fixes_in_project(source.program(), &linter, mode, index);
                    let fixed = if outcome.changed(source.program()) { source.with_fixed_program(&outcome.source) } else { Ok(source.clone()) };
                    let (fixed, problem) = match fixed {
                        Ok(f) => (f, None),
                        Err(reason) => (source.clone(), Some(FileProblem::FixNotApplied(reason))),
                    };
                    // The fixed source goes to standard output; the findings to standard error.
                    if std::io::stdout().write_all(fixed.text().as_bytes()).is_err() {
                        return exit::ERROR;
                    }
                    let result = lint(fixed.program(), &linter);
                    let fixed_count = if problem.is_some() { 0 } else { outcome.fixed_count() };
                    let report = FileReport {
                        path: name.to_owned(),
                        source: Some(fixed),
                        diagnostics: result.diagnostics,
                        problems: problem.into_iter().chain(syntax_problem(result.syntax_errors)).collect(),
                        fixed: fixed_count,
                        diff: None,
                        unsafe_fixes: settings.unsafe_fixes,
                    };
                    let mut err = std::io::stderr();
                    let _ = report::write_concise(&mut err, std::slice::from_ref(&report));
                    return if !args.exit_zero && (!report.diagnostics.is_empty() || !report.problems.is_empty()) { exit::FINDINGS } else { exit::CLEAN };
                }
                _ => {
                    let result = lint(source.program(), &linter);
                    FileReport { path: name.to_owned(), source: Some(source), diagnostics: result.diagnostics, problems: syntax_problem(result.syntax_errors), fixed: 0, diff: None, unsafe_fixes: settings.unsafe_fixes }
                }
            }
        }
    };
    finish(args, std::slice::from_ref(&report), 1)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_changed_on_disk_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.py");
        fs::write(&path, "x = 1\n").unwrap();
        let err = write_atomically(&path, "x = 0\n", "x = 2\n").unwrap_err();
        assert!(err.contains("changed on disk"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "x = 1\n");
        write_atomically(&path, "x = 1\n", "x = 2\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "x = 2\n");
    }

    #[test]
    fn a_notebook_cell_range_covers_the_cells_lines_only() {
        let nb = r#"{"cells": [
            {"cell_type": "code", "source": ["a = 1\n", "b = 2"], "metadata": {}, "outputs": [], "execution_count": null},
            {"cell_type": "markdown", "source": ["text"], "metadata": {}},
            {"cell_type": "code", "source": ["c = 3\n", "d = 4\n", "e = 5"], "metadata": {}, "outputs": [], "execution_count": null}
        ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}"#;
        let source = SourceFile::new(Path::new("a.ipynb"), nb.into()).unwrap();
        let program = source.program();
        assert_eq!(program, "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n");
        let first = source.cell_range(program.find("b =").unwrap()).unwrap();
        assert_eq!((first.0, &program[first.1]), (1, "a = 1\nb = 2\n"));
        let third = source.cell_range(program.find("d = 4").unwrap() + 2).unwrap();
        assert_eq!((third.0, &program[third.1.clone()]), (3, "c = 3\nd = 4\ne = 5\n"));
        assert_eq!(source.cell_range(program.find("c").unwrap()).unwrap().1, third.1, "the first byte of a cell");
        assert_eq!(source.cell_range(program.len()).unwrap().1, third.1, "the end of the program: the last cell");
        assert!(SourceFile::new(Path::new("a.py"), "x = 1\n".into()).unwrap().cell_range(0).is_none());
    }

    #[test]
    fn notebooks_are_told_by_their_extension() {
        assert!(!SourceFile::new(Path::new("a.py"), "x = 1\n".into()).unwrap().is_notebook());
        let nb = r#"{"cells": [{"cell_type": "code", "source": ["x = 1"], "metadata": {}, "outputs": [], "execution_count": null}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}"#;
        assert!(SourceFile::new(Path::new("a.ipynb"), nb.into()).unwrap().is_notebook());
        assert!(SourceFile::new(Path::new("a.ipynb"), "not json".into()).is_err());
    }

    /// A panic while linting one file is reported for that file; the others are
    /// checked and the run goes on (it used to exit 101).
    #[test]
    fn a_panic_in_one_file_is_reported_for_that_file() {
        let settings = Arc::new(memlint_config::Settings::defaults(Path::new("."), &memlint_config::Overrides::default()));
        let files: Vec<FileToLint> = ["a.py", "boom.py", "c.py"]
            .iter()
            .map(|p| FileToLint { path: PathBuf::from(p), settings: settings.clone() })
            .collect();
        let mut seen = Vec::new();
        check_in_order(
            &files,
            |file| {
                if file.path.ends_with("boom.py") {
                    panic!("begin > end");
                }
                FileReport { path: file.path.clone(), source: None, diagnostics: Vec::new(), problems: Vec::new(), fixed: 0, diff: None, unsafe_fixes: false }
            },
            |reports| {
                seen.extend(reports.iter().map(|r| (r.path.clone(), r.problems.clone())));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen.iter().map(|(p, _)| p.to_str().unwrap()).collect::<Vec<_>>(), ["a.py", "boom.py", "c.py"]);
        match &seen[1].1[..] {
            [FileProblem::Unreadable(reason)] => assert!(reason.contains("panicked") && reason.contains("begin > end"), "{reason}"),
            other => panic!("expected one problem, got {other:?}"),
        }
        assert!(seen[0].1.is_empty() && seen[2].1.is_empty());
    }
}
