//! `memlint`: find the lines of PyTorch code that cause GPU out-of-memory errors.

#[cfg(test)]
mod build_id;
mod add_noqa;
mod cache;
mod check;
mod project;
mod record;
mod report;
mod snapshot;
mod source;
mod walk;
mod watch;

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Exit statuses: a public contract (CI configurations depend on them).
pub mod exit {
    /// No findings.
    pub const CLEAN: u8 = 0;
    /// Findings (or files memlint could not lint) remain.
    pub const FINDINGS: u8 = 1;
    /// memlint itself could not do its job: bad arguments, a missing path.
    pub const ERROR: u8 = 2;
}

#[derive(Parser, Debug)]
#[command(
    name = "memlint",
    version,
    about = "Find the lines of PyTorch code that cause GPU out-of-memory errors",
    long_about = "memlint finds the GPU-memory anti-patterns of PyTorch training code (evaluation \
without torch.no_grad(), loss tensors summed across iterations, float16 without a GradScaler, \
torch.cuda.empty_cache() in the hot loop, ...), explains what each costs, and fixes most of them.",
    after_help = "Exit status: 0 no findings, 1 findings, 2 memlint could not do its job.\n\
Rules: `memlint rule --list`; a rule's documentation: `memlint rule MEM001`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Lint Python files and folders.
    Check(check::CheckArgs),
    /// Print a rule's documentation (by code or name), every rule's with --all, or one
    /// line per rule with --list.
    Rule(RuleArgs),
    /// Run the language server on standard input and output (for editors).
    Server(ServerArgs),
    /// Measure on the GPU what each rule's fix saves (reference training loops, cudarc).
    Verify(memlint_verify::VerifyArgs),
    /// Read a PyTorch memory snapshot: the peak and the lines holding it, lines whose
    /// memory piles up, fragmentation, out-of-memory events, the batch size that fits a budget
    /// (`--budget`); or compare two (`snapshot diff`).
    Snapshot(snapshot::SnapshotArgs),
    /// Run a PyTorch program unchanged with its CUDA memory history recorded
    /// (`memlint record -- python train.py ARGS`), then report the snapshot.
    Record(record::RecordArgs),
}

#[derive(clap::Args, Debug)]
struct ServerArgs {
    /// Accepted for clients that pass it (vscode-languageclient's stdio transport does);
    /// stdio is the only transport.
    #[arg(long)]
    stdio: bool,
}

#[derive(clap::Args, Debug)]
#[command(
    group = clap::ArgGroup::new("which").required(true).args(["rule", "all", "list"]),
    after_help = "Examples:\n  memlint rule --list                 one line per rule\n  \
memlint rule MEM001                 its documentation (also by name: eval-without-no-grad)\n  \
memlint rule --all                  every rule's documentation\n  \
memlint rule --list --format json   for tools"
)]
struct RuleArgs {
    /// A rule code (`MEM001`) or name (`eval-without-no-grad`).
    rule: Option<String>,
    /// Print every rule's documentation.
    #[arg(long)]
    all: bool,
    /// One line per rule: code, name, `[*]` when the rule can fix (some of) its findings,
    /// and what it finds.
    #[arg(long)]
    list: bool,
    /// text, or json: for a rule an object with `code`, `name`, `summary`, `fixable`,
    /// `url` and `explanation` (the documentation in Markdown); an array of them with
    /// --all, and without `explanation` with --list.
    #[arg(long, visible_alias = "format", value_enum, default_value_t = RuleFormat::Text)]
    output_format: RuleFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum RuleFormat {
    Text,
    Json,
}

/// Turns transparent huge pages off for this process. mimalloc asks the kernel for them,
/// and a lint takes and frees memory over and over: each huge page taken again is cleared
/// whole, which was 2 to 4% of the CPU time of a check of the benchmark tree (`perf`:
/// `clear_page_erms`; 0.1% without them). mimalloc's own switch (`MIMALLOC_ALLOW_THP=0`)
/// is read before `main` runs. Only for `check` and `server`: the setting is inherited,
/// and `record` runs the user's program.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE sets one flag of this process and reads no memory.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn main() -> ExitCode {
    // tree-sitter allocates its trees through the C library's malloc unless told
    // otherwise; on mimalloc too, a check of the benchmark tree took 4% less time
    // (`scripts/bench-compare.sh`). First thing: nothing tree-sitter allocated may be
    // freed by another allocator.
    // SAFETY: no tree-sitter object exists yet, and these four are one allocator's.
    unsafe {
        memlint_python::tree_sitter::set_allocator(Some(libmimalloc_sys::mi_malloc), Some(libmimalloc_sys::mi_calloc), Some(libmimalloc_sys::mi_realloc), Some(libmimalloc_sys::mi_free));
    }
    // Parsed through the matches so that `verify` can tell flags given from defaults.
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let status = match cli.command {
        Command::Check(args) => {
            no_transparent_huge_pages();
            check::run(args)
        }
        Command::Rule(args) => rule(args),
        Command::Server(_) => {
            no_transparent_huge_pages();
            memlint_server::run_stdio(memlint_server::Options { summary_build: Some(crate::cache::BUILD_ID.to_owned()), ..Default::default() })
        }
        Command::Verify(mut args) => {
            if let Some(("verify", m)) = matches.subcommand() {
                args.note_given(m);
            }
            verify(args)
        }
        Command::Snapshot(args) => snapshot::run(args),
        Command::Record(args) => record::run(args),
    };
    ExitCode::from(status)
}

/// `memlint verify [FILES]`: lint the files first, then measure the rules that fired.
fn verify(args: memlint_verify::VerifyArgs) -> u8 {
    let findings = if args.files.is_empty() {
        None
    } else {
        match check::findings_for_verify(&args.files) {
            Ok(found) => Some(found),
            Err(status) => return status,
        }
    };
    if let (Some(path), Some(found)) = (&args.snapshot, &findings) {
        if let Err(status) = snapshot::print_measured_for_verify(path, found) {
            return status;
        }
    }
    memlint_verify::run(&args, findings).clamp(0, 255) as u8
}

fn rule(args: RuleArgs) -> u8 {
    use memlint_linter::Rule;
    let json = args.output_format == RuleFormat::Json;
    /// A rule in `--output-format json` (field names are a public contract; ruff's where
    /// ruff has one: `explanation` is the documentation).
    #[derive(serde::Serialize)]
    struct Entry {
        code: &'static str,
        name: &'static str,
        summary: &'static str,
        fixable: bool,
        url: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        explanation: Option<String>,
    }
    let entry = |rule: Rule, explain: bool| Entry {
        code: rule.code(),
        name: rule.name(),
        summary: rule.summary(),
        fixable: rule.fixable(),
        url: rule.url(),
        explanation: explain.then(|| rule.doc().markdown),
    };
    let text = if args.list || args.all {
        if json {
            serde_json::to_string_pretty(&Rule::ALL.iter().map(|r| entry(*r, args.all)).collect::<Vec<_>>()).expect("serializes") + "\n"
        } else if args.all {
            let pages: Vec<String> = Rule::ALL.iter().map(|r| r.doc().render()).collect();
            pages.join("\n---\n\n") + "\n"
        } else {
            let width = Rule::ALL.iter().map(|r| r.name().len()).max().unwrap_or(0);
            Rule::ALL
                .iter()
                .map(|r| format!("{} {:width$} {} {}\n", r.code(), r.name(), if r.fixable() { "[*]" } else { "   " }, r.summary()))
                .collect()
        }
    } else {
        let name = args.rule.expect("clap requires a rule, --all or --list");
        match Rule::from_code_or_name(&name) {
            Ok(rule) if json => serde_json::to_string_pretty(&entry(rule, true)).expect("serializes") + "\n",
            Ok(rule) => rule.doc().render(),
            Err(e) => {
                eprintln!("error: {e}");
                return exit::ERROR;
            }
        }
    };
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("error: could not write to standard output: {e}");
            exit::ERROR
        }
        _ => exit::CLEAN,
    }
}
