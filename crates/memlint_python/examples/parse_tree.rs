//! How long tree-sitter alone takes to parse every `*.py` file under a tree, on every
//! core: the floor under `memlint check` on that tree (it parses each file the pre-filter
//! lets through at least once). `scripts/bench-check.sh` prints it beside memlint and ruff.
//!
//! ```sh
//! cargo run --release -p memlint_python --example parse_tree -- TREE
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

fn python_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let hidden = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            python_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "py") {
            out.push(path);
        }
    }
}

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: parse_tree TREE");
        std::process::exit(2);
    };
    let mut files = Vec::new();
    python_files(Path::new(&dir), &mut files);
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let lines = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = files.get(i) else { break };
                // Read as memlint reads a file: bytes, then text (lossy for bad UTF-8).
                let Ok(bytes) = std::fs::read(path) else { continue };
                let text = String::from_utf8_lossy(&bytes);
                lines.fetch_add(text.lines().count(), Ordering::Relaxed);
                let tree = memlint_python::parse_with(&text, None);
                std::hint::black_box(tree.root_node().child_count());
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    println!("parse alone: {} files, {} lines, {threads} threads: {seconds:.3} s", files.len(), lines.load(Ordering::Relaxed));
}
