//! How `memlint_linter::lint` scales with the length of a file: time per 1,000 lines for
//! files of 100 to 50,000 lines built from the bundled examples (`tests/examples/*.py`),
//! and the ratio of the largest per-1k figure to the smallest (1.0 is linear time).
//!
//! Two kinds of file are built for each size:
//! - `distinct`: copies of the examples, each copy's top-level names (functions, classes,
//!   module-level assignments) suffixed with the copy's number, so every definition is new;
//! - `same names`: plain copies, so the same functions are defined again and again and
//!   `model(...)` is called everywhere, as in real test files.
//!
//! ```text
//! cargo run --release -p memlint_linter --example scaling [-- --sizes 100,1000,... --budget-ms 1500]
//! ```
//! Each file is linted until `--budget-ms` is spent (3 to 20 runs; once or twice when one run
//! takes longer than the budget); the figure is the median run. The host's load inflates
//! every figure alike: compare the per-1k figures of one run, not across runs.

use std::time::{Duration, Instant};

use memlint_linter::{lint, LinterSettings};

/// Top-level names defined in `text`: `def NAME`, `class NAME`, `NAME = ...` at column 0.
fn top_level_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text.lines() {
        let rest = line.strip_prefix("def ").or_else(|| line.strip_prefix("async def ")).or_else(|| line.strip_prefix("class "));
        let name: String = match rest {
            Some(rest) => rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect(),
            None => {
                let name: String = line.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                let after = line[name.len()..].trim_start();
                if !name.is_empty() && after.starts_with('=') && !after.starts_with("==") && !name.starts_with("__") {
                    name
                } else {
                    String::new()
                }
            }
        };
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// `text` with every identifier in `names` given `suffix` (whole words only; strings and
/// comments are renamed too, which changes nothing that is measured).
fn rename(text: &str, names: &[String], suffix: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(word);
        if names.iter().any(|n| n == word) {
            out.push_str(suffix);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// A file of at least `lines` lines made of copies of `examples` in turn.
fn build(examples: &[String], lines: usize, distinct: bool) -> String {
    let names: Vec<Vec<String>> = examples.iter().map(|e| top_level_names(e)).collect();
    let mut text = String::new();
    let mut count = 0;
    let mut copy = 0;
    while count < lines {
        let i = copy % examples.len();
        let piece = if distinct { rename(&examples[i], &names[i], &format!("_{copy}")) } else { examples[i].clone() };
        count += piece.lines().count();
        text.push_str(&piece);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        copy += 1;
    }
    text
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    let n = times.len();
    if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2
    }
}

/// Median time of linting `text`: runs until `budget` is spent (at least 3 runs, at most
/// 20), except that a file whose runs take more than the budget is linted once or twice
/// (a superlinear engine would otherwise take minutes on the largest files).
fn time_lint(text: &str, settings: &LinterSettings, budget: Duration) -> (Duration, usize, usize) {
    let started = Instant::now();
    let mut times = Vec::new();
    let mut findings = 0;
    while times.is_empty()
        || (times.len() < 20 && started.elapsed() < budget)
        || (times.len() < 3 && started.elapsed() < budget * 2)
    {
        let t = Instant::now();
        let result = lint(text, settings);
        times.push(t.elapsed());
        findings = result.diagnostics.len();
    }
    let runs = times.len();
    (median(times), runs, findings)
}

fn main() {
    let mut sizes = vec![100, 1_000, 5_000, 10_000, 20_000, 50_000];
    let mut budget = Duration::from_millis(1500);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next();
        match (arg.as_str(), value) {
            ("--sizes", Some(v)) => match v.split(',').map(|s| s.trim().parse::<usize>()).collect::<Result<Vec<_>, _>>() {
                Ok(s) if !s.is_empty() && s.iter().all(|n| *n > 0) => sizes = s,
                _ => fail(&format!("--sizes: `{v}` is not a comma-separated list of line counts")),
            },
            ("--budget-ms", Some(v)) => match v.parse::<u64>() {
                Ok(ms) => budget = Duration::from_millis(ms),
                Err(_) => fail(&format!("--budget-ms: `{v}` is not a whole number")),
            },
            ("-h" | "--help", _) => {
                println!("usage: scaling [--sizes 100,1000,5000,10000,20000,50000] [--budget-ms 1500]");
                return;
            }
            (other, _) => fail(&format!("unknown or incomplete option `{other}` (see --help)")),
        }
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/examples");
    let mut paths: Vec<_> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == "py")).collect(),
        Err(e) => fail(&format!("{}: {e}", dir.display())),
    };
    paths.sort();
    let examples: Vec<String> =
        paths.iter().map(|p| std::fs::read_to_string(p).unwrap_or_else(|e| fail(&format!("{}: {e}", p.display())))).collect();
    if examples.is_empty() {
        fail(&format!("{}: no .py examples", dir.display()));
    }
    let settings = LinterSettings::default();
    println!("memlint_linter::lint, every rule, files built from {} examples in {}", examples.len(), dir.display());
    println!("{:<11} {:>7} {:>9} {:>5} {:>11} {:>11}", "names", "lines", "findings", "runs", "median ms", "ms / 1k");
    for distinct in [true, false] {
        let label = if distinct { "distinct" } else { "same names" };
        let mut per_k = Vec::new();
        for &size in &sizes {
            let text = build(&examples, size, distinct);
            let lines = text.lines().count();
            let (time, runs, findings) = time_lint(&text, &settings, budget);
            let ms = time.as_secs_f64() * 1000.0;
            let k = ms / (lines as f64 / 1000.0);
            per_k.push(k);
            println!("{label:<11} {lines:>7} {findings:>9} {runs:>5} {ms:>11.2} {k:>11.3}");
        }
        let smallest = per_k.iter().cloned().fold(f64::INFINITY, f64::min);
        let largest = per_k.iter().cloned().fold(0.0, f64::max);
        println!(
            "{label}: per-1k time from {smallest:.3} to {largest:.3} ms; largest / smallest = {:.2} (largest size / smallest size: {:.2})",
            largest / smallest,
            per_k.last().unwrap_or(&0.0) / per_k.first().unwrap_or(&1.0)
        );
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2);
}
