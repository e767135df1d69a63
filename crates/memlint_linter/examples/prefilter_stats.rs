//! How much of a tree the pre-filter lets through, per rule, and (with `compare`) whether
//! filtering changed any finding:
//!
//! ```sh
//! cargo run --release -p memlint_linter --example prefilter_stats -- TREE [compare | list]
//! ```
//!
//! Exits 1 when `compare` finds a file where `lint` and `lint_unfiltered` disagree. With
//! `list` it prints only the paths of the files the pre-filter lets through (every rule,
//! no project; hidden folders left out, as `parse_tree` leaves them): `scripts/bench-check.sh`
//! times tree-sitter's parse of them, the least `memlint check --no-project` parses.

use std::path::PathBuf;

use memlint_linter::prefilter::rules_that_could_fire;
use memlint_linter::{lint, lint_unfiltered, LinterSettings, Rule, RuleSelection};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: prefilter_stats TREE [compare | list]");
        std::process::exit(2);
    };
    let mode = args.next();
    let compare = mode.as_deref() == Some("compare");
    let list = mode.as_deref() == Some("list");
    let settings = LinterSettings::default();
    let mut files_through = vec![0usize; Rule::ALL.len()];
    let mut lines_through = vec![0usize; Rule::ALL.len()];
    let (mut files, mut lines, mut parsed_files, mut parsed_lines, mut mismatches) = (0, 0, 0, 0, 0);
    let root = PathBuf::from(dir);
    let mut stack = vec![root.clone()];
    while let Some(path) = stack.pop() {
        let hidden = path.as_path() != root.as_path() && path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
        if list && hidden {
            continue;
        }
        if path.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
            continue;
        }
        if path.extension().map_or(true, |e| e != "py") {
            continue;
        }
        let Ok(source) = std::fs::read_to_string(&path) else { continue };
        let n = source.lines().count();
        files += 1;
        lines += n;
        let possible = rules_that_could_fire(&source, &RuleSelection::all());
        if possible.any_enabled() {
            parsed_files += 1;
            parsed_lines += n;
            if list {
                println!("{}", path.display());
            }
        }
        for (i, rule) in Rule::ALL.iter().enumerate() {
            if possible.is_enabled(*rule) {
                files_through[i] += 1;
                lines_through[i] += n;
            }
        }
        if compare {
            let filtered = lint(&source, &settings).diagnostics;
            let unfiltered = lint_unfiltered(&source, &settings).diagnostics;
            if filtered != unfiltered {
                mismatches += 1;
                println!("MISMATCH {}: {} findings filtered, {} unfiltered", path.display(), filtered.len(), unfiltered.len());
            }
        }
    }
    if list {
        return;
    }
    println!("files {files} lines {lines}; parsed {parsed_files} files {parsed_lines} lines");
    for (i, rule) in Rule::ALL.iter().enumerate() {
        println!("{} {:5} files {:8} lines", rule.code(), files_through[i], lines_through[i]);
    }
    if compare {
        println!("mismatches {mismatches}");
        if mismatches > 0 {
            std::process::exit(1);
        }
    }
}
