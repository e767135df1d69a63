//! How long module summaries take to make, apart from parsing: every `*.py` file under
//! TREE is parsed once, then every tree is summarized (`ModuleSummary::new`) ROUNDS times
//! on one thread, and the best round is printed, with the best round of
//! `NamedNodes::of` alone (the one walk a summary starts with, which a lint shares). One
//! thread and the best of several rounds: steadier than `parse_tree --summarize`, whose
//! figure is mostly the parse.
//!
//! ```sh
//! cargo run --release -p memlint_python --example summary_time -- TREE [ROUNDS]
//! ```
use std::path::{Path, PathBuf};
use std::time::Instant;
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() { files(&p, out) } else if p.extension().is_some_and(|e| e == "py") { out.push(p) }
    }
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(tree) = args.get(1) else {
        eprintln!("usage: summary_time TREE [ROUNDS]");
        std::process::exit(2);
    };
    let mut all = Vec::new();
    files(Path::new(tree), &mut all);
    all.sort();
    let rounds: usize = match args.get(2).map(|r| r.parse::<usize>()) {
        None => 5,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("summary_time: ROUNDS must be a whole number above 0, not {:?}", args[2]);
            std::process::exit(2);
        }
    };
    let parsed: Vec<(String, memlint_python::tree_sitter::Tree)> = all.iter().filter_map(|p| {
        let b = std::fs::read(p).ok()?;
        if b.len() > 4 << 20 { return None; }
        let t = String::from_utf8_lossy(&b).into_owned();
        let tree = memlint_python::parse_with(&t, None);
        Some((t, tree))
    }).collect();
    let mut best = f64::MAX; let mut best_walk = f64::MAX;
    for _ in 0..rounds {
        let start = Instant::now();
        let mut n = 0;
        for (t, tree) in &parsed { n += memlint_python::ModuleSummary::new(tree, t).functions.len(); }
        best = best.min(start.elapsed().as_secs_f64());
        let start = Instant::now();
        let mut m = 0;
        for (_t, tree) in &parsed { m += memlint_python::NamedNodes::of(tree.root_node()).len(); }
        best_walk = best_walk.min(start.elapsed().as_secs_f64());
        std::hint::black_box((n, m));
    }
    println!("summaries of {} files: best {:.3} s; NamedNodes::of alone {:.3} s", parsed.len(), best, best_walk);
}
