//! `memlint snapshot`: reads a PyTorch memory snapshot (crate `memlint_snapshot`), and
//! `check --snapshot`: joins its measured lines to findings by file and line.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memlint_linter::Diagnostic;
use memlint_snapshot::report::mib;
use memlint_snapshot::{Report, SourceMap};
use serde::Serialize;

use crate::check::FileReport;
use crate::exit;
use crate::source::SourceFile;

#[derive(clap::Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Record a snapshot without editing the script:\n  \
memlint record --steps 4 -- python train.py ARGS\n\
or in your training script:\n  \
torch.cuda.memory._record_memory_history(max_entries=100000)\n  \
... run some iterations ...\n  \
torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")\n\n\
The batch that fits: `--budget 24GiB` predicts the peak from half to 16 times the recorded \
batch size and finds the largest batch whose run fits the budget (the caching allocator \
limited to it, as torch.cuda.set_per_process_memory_fraction limits it: leave room for the \
CUDA context, about 0.5 GiB, on a real card).\n\n\
Exit status: 0 read and analysed, 2 the file could not be read (or, with --budget, no \
training loop could be modelled)."
)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    command: Option<SnapshotCommand>,
    /// The snapshot (`torch.cuda.memory._dump_snapshot(path)`, any pickle protocol).
    #[arg(value_name = "FILE.pickle")]
    file: Option<PathBuf>,
    /// Map the recorded paths (from the machine that ran the program) onto files under ROOT,
    /// by longest matching path suffix.
    #[arg(long, value_name = "ROOT")]
    source: Option<PathBuf>,
    /// text (for people), json (field names are a public contract) or html (one
    /// self-contained page: memory over time, the tables, links to memlint's findings on
    /// each line; the files are linted where they are found, see --source).
    #[arg(long, visible_alias = "output-format", value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write the report to this file instead of standard output (atomically).
    #[arg(long, short = 'o', visible_alias = "output-file", value_name = "OUT")]
    output: Option<PathBuf>,
    /// How many lines to list at the peak and at each out-of-memory error (0: all).
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Predict the peak at other batch sizes and find the largest batch whose run fits in
    /// this much memory (24GiB, 24G, 1.5GB, 8000000000): what the caching allocator may reserve.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    budget: Option<u64>,
    /// The recording's batch size, when the snapshot does not tell it (`memlint record` notes
    /// it; otherwise it is guessed from the sizes of the batch's tensors).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    batch: Option<u64>,
    /// With --budget: the micro-batch and gradient-accumulation steps that reach an effective
    /// batch of N within the budget, and the loss division they need (MEM011).
    #[arg(long, value_name = "N", requires = "budget", value_parser = clap::value_parser!(u64).range(1..))]
    effective_batch: Option<u64>,
}

fn parse_size(s: &str) -> Result<u64, String> {
    memlint_snapshot::batch::parse_bytes(s)
}

#[derive(clap::Subcommand, Debug)]
enum SnapshotCommand {
    /// The peak and retained bytes per line before and after a change: what a fix saves,
    /// measured on your own program.
    Diff {
        #[arg(value_name = "BEFORE.pickle")]
        before: PathBuf,
        #[arg(value_name = "AFTER.pickle")]
        after: PathBuf,
        /// Map the recorded paths onto files under ROOT, by longest matching path suffix.
        #[arg(long, value_name = "ROOT")]
        source: Option<PathBuf>,
        /// text or json (html is for one snapshot).
        #[arg(long, visible_alias = "output-format", value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write the report to this file instead of standard output.
        #[arg(long, short = 'o', visible_alias = "output-file", value_name = "OUT")]
        output: Option<PathBuf>,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    Html,
}

fn source_map(root: Option<&Path>) -> Result<Option<SourceMap>, u8> {
    match root {
        None => Ok(None),
        Some(r) => SourceMap::new(r).map(Some).map_err(|e| {
            eprintln!("error: --source {}: {e}", r.display());
            exit::ERROR
        }),
    }
}

fn load(path: &Path, map: Option<&SourceMap>, top: usize) -> Result<Report, u8> {
    memlint_snapshot::load(path, map, top).map_err(|e| {
        eprint!("{}", crate::report::render_error(&e));
        exit::ERROR
    })
}

fn write_out(output: Option<&Path>, text: &str) -> u8 {
    let result = match output {
        None => std::io::stdout().lock().write_all(text.as_bytes()),
        Some(path) => {
            let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            // as `check -o` creates files: mode 0666 less the umask (0644 under the usual
            // 022), or the mode of the file it replaces
            let mut builder = tempfile::Builder::new();
            #[cfg(unix)]
            let keep = std::fs::metadata(path).ok().map(|m| m.permissions());
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                builder.permissions(std::fs::Permissions::from_mode(0o666));
            }
            builder.tempfile_in(dir).and_then(|mut f| {
                f.write_all(text.as_bytes())?;
                #[cfg(unix)]
                if let Some(p) = keep {
                    f.as_file().set_permissions(p)?;
                }
                f.persist(path).map(|_| ()).map_err(|e| e.error)
            })
        }
    };
    match result {
        Ok(()) => exit::CLEAN,
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", output.map(|p| p.display().to_string()).unwrap_or("standard output".into()));
            exit::ERROR
        }
    }
}

pub fn run(args: SnapshotArgs) -> u8 {
    match args.command {
        Some(SnapshotCommand::Diff { before, after, source, format, output }) => {
            let map = match source_map(source.as_deref()) {
                Ok(m) => m,
                Err(s) => return s,
            };
            let (b, a) = match (load(&before, map.as_ref(), 0), load(&after, map.as_ref(), 0)) {
                (Ok(b), Ok(a)) => (b, a),
                (Err(s), _) | (_, Err(s)) => return s,
            };
            let d = memlint_snapshot::diff(&b, &a);
            let text = match format {
                Format::Text => d.to_text(),
                Format::Json => serde_json::to_string_pretty(&d).expect("serializes") + "\n",
                Format::Html => {
                    eprintln!("error: `snapshot diff` prints text or json");
                    return exit::ERROR;
                }
            };
            write_out(output.as_deref(), &text)
        }
        None => {
            let Some(file) = args.file else {
                eprintln!("error: memlint snapshot needs a FILE.pickle (or `memlint snapshot diff BEFORE AFTER`); see --help");
                return exit::ERROR;
            };
            let map = match source_map(args.source.as_deref()) {
                Ok(m) => m,
                Err(s) => return s,
            };
            let series = if args.format == Format::Html { memlint_snapshot::html::STACKED_LINES } else { 0 };
            let batch = (args.budget.is_some() || args.batch.is_some() || args.effective_batch.is_some()).then_some(memlint_snapshot::BatchRequest {
                batch: args.batch,
                budget: args.budget,
                effective_batch: args.effective_batch,
            });
            let r = match memlint_snapshot::load_with(&file, map.as_ref(), args.top, series, batch) {
                Ok(r) => r,
                Err(e) => {
                    eprint!("{}", crate::report::render_error(&e));
                    return exit::ERROR;
                }
            };
            let text = match args.format {
                Format::Text => r.to_text(),
                Format::Json => r.to_json() + "\n",
                Format::Html => match page_findings(&r) {
                    Ok(f) => memlint_snapshot::html::render(&r, &f),
                    Err(s) => return s,
                },
            };
            write_out(args.output.as_deref(), &text)
        }
    }
}

/// memlint's findings in the files the report names (those found on this machine), each with
/// what the run measured on its line.
fn page_findings(r: &Report) -> Result<Vec<memlint_snapshot::html::PageFinding>, u8> {
    let mut files: Vec<PathBuf> = Vec::new();
    for d in &r.devices {
        let lines = d.at_peak.iter().chain(&d.retained).chain(d.ooms.iter().flat_map(|o| &o.at_oom)).map(|l| l.file.as_str());
        let functions = d.retained_by_function.iter().map(|f| f.file.as_str());
        let inclusive = d.inclusive.iter().map(|f| f.file.as_str());
        files.extend(lines.chain(functions).chain(inclusive).map(PathBuf::from).filter(|p| p.is_file()));
    }
    files.sort();
    files.dedup();
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let found = crate::check::findings_for_verify(&files)?;
    let mut texts: std::collections::HashMap<PathBuf, String> = std::collections::HashMap::new();
    Ok(found
        .into_iter()
        .map(|f| {
            let text = texts.entry(f.path.clone()).or_insert_with(|| std::fs::read_to_string(&f.path).unwrap_or_default());
            let abs = std::path::absolute(&f.path).unwrap_or_else(|_| f.path.clone());
            let m = measured_at(r, &abs, text, f.row, &f.code);
            memlint_snapshot::html::PageFinding {
                file: f.path.display().to_string(),
                line: f.row as u32,
                url: memlint_linter::Rule::from_code_or_name(&f.code).map(|r| r.url()).unwrap_or_default(),
                measured: m.as_ref().map(Measured::describe),
                keeps: m.map(|m| m.kept_lines).unwrap_or_default(),
                code: f.code,
                name: f.name,
            }
        })
        .collect())
}

// ----- check --snapshot ----------------------------------------------------------------

static LOADED: OnceLock<Report> = OnceLock::new();

/// Reads the snapshot `check --snapshot` names, once, before linting.
pub fn load_for_findings(path: &Path, source: Option<&Path>) -> Result<(), u8> {
    let map = source_map(source)?;
    let r = load(path, map.as_ref(), 0)?;
    let _ = LOADED.set(r);
    Ok(())
}

/// What the user's run measured on a finding's line (the `snapshot` object of a JSON
/// finding: a public contract).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Measured {
    pub bytes_at_peak: u64,
    pub retained_bytes: u64,
    pub retained_count: u64,
    /// For a finding that says its line keeps a graph or tensors alive (MEM002, MEM005,
    /// MEM006): the bytes its fix would free, the retained blocks allocated under the
    /// line's function, still alive at the end of the recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_blocks: Option<u64>,
    /// How `kept_bytes` was derived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_derivation: Option<String>,
    /// The retained lines (recorded file, line) those blocks were allocated on.
    #[serde(skip)]
    pub kept_lines: Vec<(String, u32)>,
}

impl Measured {
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(k) = self.kept_bytes {
            parts.push(format!("keeps {} alive ({})", mib(k), self.kept_derivation.as_deref().unwrap_or("")));
        }
        if self.bytes_at_peak > 0 {
            parts.push(format!("{} alive at the peak", mib(self.bytes_at_peak)));
        }
        if self.retained_bytes > 0 {
            parts.push(format!("{} retained, piled up {} times", mib(self.retained_bytes), self.retained_count));
        }
        format!("{} (your run's memory snapshot)", parts.join(", "))
    }
}

/// Rules whose finding says the line keeps a graph or tensors alive across iterations.
const KEEPING_RULES: [&str; 3] = ["MEM002", "MEM005", "MEM006"];

/// The function whose body holds 1-based `row` of `text`: the nearest `def` above it, less
/// indented than the row; `<module>` (as Python names top-level code) when there is none.
pub fn enclosing_function(text: &str, row: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let Some(at) = lines.get(row.saturating_sub(1)) else { return "<module>".into() };
    let mut limit = indent(at);
    for l in lines[..row.saturating_sub(1)].iter().rev() {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let i = indent(l);
        if i < limit {
            let def = t.strip_prefix("async ").unwrap_or(t);
            if let Some(rest) = def.strip_prefix("def ") {
                return rest.split(|c: char| c == '(' || c.is_whitespace()).next().unwrap_or("").to_string();
            }
            if t.starts_with("class ") {
                return "<module>".into();
            }
            limit = i;
            if i == 0 {
                break;
            }
        }
    }
    "<module>".into()
}

/// The measured figures of a finding on `row` of `path` (text: the file's source).
fn measured_at(report: &Report, path: &Path, text: &str, row: usize, code: &str) -> Option<Measured> {
    let mut m = report
        .figures_for(path, row as u32)
        .map(|f| Measured { bytes_at_peak: f.bytes_at_peak, retained_bytes: f.retained_bytes, retained_count: f.retained_count, ..Default::default() })
        .unwrap_or_default();
    if KEEPING_RULES.contains(&code) {
        let function = enclosing_function(text, row);
        if let Some(k) = report.kept_by(path, &function) {
            let shown = if function == "<module>" { "the module's top level".to_string() } else { format!("`{function}()`") };
            m.kept_bytes = Some(k.bytes);
            m.kept_blocks = Some(k.blocks);
            m.kept_derivation = Some(format!(
                "{} blocks allocated under {shown}, piled up over {} iterations and still alive when the recording ended: what the fix frees",
                k.blocks, k.count
            ));
            m.kept_lines = k.lines;
        }
    }
    (m.bytes_at_peak > 0 || m.retained_bytes > 0 || m.kept_bytes.is_some()).then_some(m)
}

pub fn measured(file: &FileReport, source: Option<&SourceFile>, d: &Diagnostic) -> Option<Measured> {
    let report = LOADED.get()?;
    let source = source?;
    let loc = source.location(d.range.start);
    if loc.cell.is_some() {
        return None; // notebook rows count within cells; recorded lines do not
    }
    let path = std::path::absolute(&file.path).unwrap_or_else(|_| file.path.clone());
    measured_at(report, &path, source.text(), loc.row, d.rule.code())
}

/// `verify --snapshot`: each finding's figures from the user's own run, on standard error
/// (standard output carries verify's report, which may be JSON), before the reference loop
/// runs.
pub fn print_measured_for_verify(path: &Path, findings: &[memlint_verify::Finding]) -> Result<(), u8> {
    let r = load(path, None, 0)?;
    eprintln!("measured in your run ({}):", path.display());
    for f in findings {
        let abs = std::path::absolute(&f.path).unwrap_or_else(|_| f.path.clone());
        let text = std::fs::read_to_string(&f.path).unwrap_or_default();
        let what = match measured_at(&r, &abs, &text, f.row, &f.code) {
            Some(m) => m.describe(),
            None => "no memory recorded on this line".to_string(),
        };
        eprintln!("  {}:{}: {} {}: {what}", f.path.display(), f.row, f.code, f.name);
    }
    eprintln!("then the reference loop (memlint's built-in model, not your program):");
    Ok(())
}
