//! How long tree-sitter alone takes to parse every `*.py` file under a tree, on every
//! core: the floor under `memlint check` on that tree (it parses each file the pre-filter
//! lets through at least once). `scripts/bench-check.sh` prints it beside memlint and ruff.
//!
//! ```sh
//! cargo run --release -p memlint_python --example parse_tree -- TREE
//! cargo run --release -p memlint_python --example parse_tree -- --files-from LIST
//! ```
//!
//! With `--files-from LIST` it parses the files named in LIST (one path a line) instead:
//! `scripts/bench-check.sh` gives it the files memlint reports findings in, the least that
//! any linter built on tree-sitter must parse to report them.
//!
//! With `--walk` (before the other arguments) each tree is also walked once after its
//! parse, every node visited with one `TreeCursor` and its kind and byte range read: what
//! one pass of analysis over a tree costs before it does anything, the unit in which
//! memlint's passes (the semantic model's walk, a summary's walks, the rules' own) add up.
//! `--walk-named` walks the way most of memlint's passes do, a stack of each node's named
//! children (`stack.extend(node.named_children(&mut cursor))`). `--summarize` also makes
//! each file's module summary (`ModuleSummary::new`, what the project pass reads of a
//! module): its cost in units of the parse.
//!
//! It parses with the allocators memlint runs with (`crates/memlint/src/main.rs`:
//! mimalloc for Rust and for tree-sitter), so the floor is the parse memlint itself does.

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

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // SAFETY: no tree-sitter object exists yet, and these four are one allocator's.
    unsafe {
        memlint_python::tree_sitter::set_allocator(Some(libmimalloc_sys::mi_malloc), Some(libmimalloc_sys::mi_calloc), Some(libmimalloc_sys::mi_realloc), Some(libmimalloc_sys::mi_free));
    }
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let summarize = args.first().is_some_and(|a| a == "--summarize");
    let walk = match args.first().map(String::as_str) {
        Some("--walk") => Some(false),
        Some("--walk-named") => Some(true),
        _ => None,
    };
    if walk.is_some() || summarize {
        args.remove(0);
    }
    let mut files = Vec::new();
    match args.as_slice() {
        [flag, list] if flag == "--files-from" => match std::fs::read_to_string(list) {
            Ok(text) => files.extend(text.lines().filter(|l| !l.trim().is_empty()).map(PathBuf::from)),
            Err(e) => {
                eprintln!("parse_tree: cannot read {list}: {e}");
                std::process::exit(2);
            }
        },
        [dir] if !dir.starts_with("--") => python_files(Path::new(dir), &mut files),
        _ => {
            eprintln!("usage: parse_tree [--walk | --walk-named | --summarize] (TREE | --files-from LIST)");
            std::process::exit(2);
        }
    }
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
                match walk {
                    Some(false) => {
                        std::hint::black_box(cursor_walk(&tree));
                    }
                    Some(true) => {
                        std::hint::black_box(named_stack_walk(&tree));
                    }
                    None => {}
                }
                if summarize {
                    std::hint::black_box(memlint_python::ModuleSummary::new(&tree, &text));
                }
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    let what = match walk {
        None if summarize => "parse and summarize",
        None => "parse alone",
        Some(false) => "parse and one cursor walk",
        Some(true) => "parse and one named-children walk",
    };
    println!("{what}: {} files, {} lines, {threads} threads: {seconds:.3} s", files.len(), lines.load(Ordering::Relaxed));
}

/// Every node once, with one cursor: the sum of their kinds and byte ranges.
fn cursor_walk(tree: &memlint_python::tree_sitter::Tree) -> usize {
    let mut cursor = tree.walk();
    let mut sum = 0usize;
    loop {
        let node = cursor.node();
        sum = sum.wrapping_add(node.kind_id() as usize + node.start_byte() + node.end_byte());
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return sum;
            }
        }
    }
}

/// Every named node once, through a stack of each node's named children.
fn named_stack_walk(tree: &memlint_python::tree_sitter::Tree) -> usize {
    let root = tree.root_node();
    let mut cursor = root.walk();
    let mut stack = vec![root];
    let mut sum = 0usize;
    while let Some(node) = stack.pop() {
        sum = sum.wrapping_add(node.kind_id() as usize + node.start_byte() + node.end_byte());
        stack.extend(node.named_children(&mut cursor));
    }
    sum
}
