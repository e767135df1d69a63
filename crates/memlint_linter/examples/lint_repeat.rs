//! Lints one file again and again over the tree parsed once, as the language server does
//! on each keystroke, and prints the median and minimum time of a lint: a steady loop to
//! profile (`perf record`) the linter alone, without start-up, parsing or output.
//!
//! ```text
//! cargo run --release -p memlint_linter --example lint_repeat -- FILE [RUNS]
//! ```

use std::time::Instant;

use memlint_linter::{lint_tree, LinterSettings};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: lint_repeat FILE [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = match args.next().map(|r| r.parse()) {
        None => 20,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("lint_repeat: RUNS must be a positive number");
            std::process::exit(2);
        }
    };
    let source = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lint_repeat: {path}: {e}");
            std::process::exit(2);
        }
    };
    let tree = memlint_python::parse_with(&source, None);
    let settings = LinterSettings::default();
    let mut times = Vec::with_capacity(runs);
    let mut findings = 0;
    for _ in 0..runs {
        let start = Instant::now();
        findings = lint_tree(&source, &tree, &settings).diagnostics.len();
        times.push(start.elapsed());
    }
    times.sort();
    println!("{path}: {findings} findings; lint median {:.1} ms, min {:.1} ms over {runs} runs", times[runs / 2].as_secs_f64() * 1e3, times[0].as_secs_f64() * 1e3);
}
