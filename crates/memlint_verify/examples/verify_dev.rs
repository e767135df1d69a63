//! Development driver for `memlint verify` before the CLI wires it in:
//! `cargo run --release -p memlint_verify --example verify_dev -- [verify flags]`.
//! It parses exactly the flags the CLI's `verify` subcommand takes and calls [`memlint_verify::run`].

use clap::Parser;

#[derive(Parser)]
#[command(name = "verify_dev", about = "memlint verify, without the linter (no FILES support)")]
struct Cli {
    #[command(flatten)]
    args: memlint_verify::VerifyArgs,
}

fn main() {
    let cli = Cli::parse();
    if !cli.args.files.is_empty() {
        eprintln!("error: verify_dev does not lint files; run `memlint verify FILES` for that");
        std::process::exit(2);
    }
    std::process::exit(memlint_verify::run(&cli.args, None));
}
