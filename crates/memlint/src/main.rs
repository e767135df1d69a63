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
Rules: `memlint rule --all`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Lint Python files and folders.
    Check(check::CheckArgs),
    /// Print a rule's documentation (by code or name), or every rule's with --all.
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
struct RuleArgs {
    /// A rule code (`MEM001`) or name (`eval-without-no-grad`).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    rule: Option<String>,
    /// Print every rule's documentation.
    #[arg(long)]
    all: bool,
}

fn main() -> ExitCode {
    // Parsed through the matches so that `verify` can tell flags given from defaults.
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let status = match cli.command {
        Command::Check(args) => check::run(args),
        Command::Rule(args) => rule(args),
        Command::Server(_) => memlint_server::run_stdio(),
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
    if args.all {
        let pages: Vec<String> = memlint_linter::Rule::ALL.iter().map(|r| r.doc().render()).collect();
        println!("{}", pages.join("\n---\n\n"));
        return exit::CLEAN;
    }
    let name = args.rule.expect("clap requires a rule without --all");
    match memlint_linter::Rule::from_code_or_name(&name) {
        Ok(rule) => {
            print!("{}", rule.doc().render());
            exit::CLEAN
        }
        Err(e) => {
            eprintln!("error: {e}");
            exit::ERROR
        }
    }
}
