//! How often the server's first answer after an edit (`memlint_server::incremental`) is
//! already the complete lint's, on real files: in each `.py` file under each PATH, at up
//! to EDITS places spread over the file, one letter typed into a word (as
//! `stdio_latency` types), the prediction made from the file's complete lint is compared
//! with a complete lint of the edited text.
//!
//! ```text
//! cargo run --release -p memlint_server --example predict_edits -- [--edits 20] [--show] PATH...
//! ```
//!
//! Prints, over all edits: how many the prediction followed (an edit inside one
//! definition's body that adds no line, where at least a quarter of the file is left
//! out), how many of those it got exactly right, the
//! files and places of the others, and the median times of both answers.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memlint_linter::{lint_tree, Diagnostic, LinterSettings};
use memlint_server::incremental::{predict, Baseline};

fn python_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for e in entries {
            if !e.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
                python_files(&e, out);
            }
        }
    } else if path.extension().is_some_and(|e| e == "py") {
        out.push(path.to_owned());
    }
}

/// Byte offsets just after the first letter of a word of 3 or more letters, on up to
/// `count` lines spread evenly over the text.
fn typing_places(text: &str, count: usize) -> Vec<usize> {
    let starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let step = (starts.len() / count.max(1)).max(1);
    let mut places = Vec::new();
    for &start in starts.iter().step_by(step) {
        let line = &text[start..text[start..].find('\n').map_or(text.len(), |e| start + e)];
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
                let word = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if i - word >= 3 {
                    places.push(start + word + 1);
                    break;
                }
            } else {
                i += 1;
            }
        }
    }
    places.truncate(count);
    places
}

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times.get(times.len() / 2).map_or(0.0, |t| t.as_secs_f64() * 1e3)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut edits = 20;
    // --show: print each finding that differs whole (message, evidence, fix).
    let show = args.iter().any(|a| a == "--show");
    args.retain(|a| a != "--show");
    if let Some(i) = args.iter().position(|a| a == "--edits") {
        edits = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or_else(|| {
            eprintln!("predict_edits: --edits takes a number");
            std::process::exit(2)
        });
        args.drain(i..i + 2);
    }
    if args.is_empty() {
        eprintln!("usage: predict_edits [--edits N] [--show] PATH...");
        std::process::exit(2);
    }
    let mut files = Vec::new();
    for a in &args {
        python_files(Path::new(a), &mut files);
    }
    let settings = LinterSettings::default();
    let lint_text = |text: &str| -> Vec<Diagnostic> {
        let tree = memlint_python::parse_with(text, None);
        lint_tree(text, &tree, &settings).diagnostics
    };
    let (mut total, mut followed, mut exact) = (0usize, 0usize, 0usize);
    let (mut full_times, mut predicted_times) = (Vec::new(), Vec::new());
    let mut wrong = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let tree = memlint_python::parse_with(&text, None);
        let baseline = Baseline { text: text.clone(), diagnostics: lint_tree(&text, &tree, &settings).diagnostics, tree, generation: 0 };
        for at in typing_places(&text, edits) {
            total += 1;
            let mut edited = text.clone();
            edited.insert(at, 'x');
            let mut tree = baseline.tree.clone();
            let point = |offset: usize| {
                let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
                memlint_python::tree_sitter::Point { row: text[..offset].matches('\n').count(), column: offset - line_start }
            };
            tree.edit(&memlint_python::tree_sitter::InputEdit {
                start_byte: at,
                old_end_byte: at,
                new_end_byte: at + 1,
                start_position: point(at),
                old_end_position: point(at),
                new_end_position: memlint_python::tree_sitter::Point { row: point(at).row, column: point(at).column + 1 },
            });
            let tree = memlint_python::parse_with(&edited, Some(&tree));
            let start = Instant::now();
            let full = lint_tree(&edited, &tree, &settings).diagnostics;
            let full_time = start.elapsed();
            let start = Instant::now();
            let Some(predicted) = predict(&baseline, &edited, &tree, &|s| Some(lint_text(s))) else {
                continue;
            };
            predicted_times.push(start.elapsed());
            full_times.push(full_time);
            followed += 1;
            if predicted == full {
                exact += 1;
            } else {
                let line = text[..at].matches('\n').count() + 1;
                if show {
                    for d in predicted.iter().filter(|d| !full.contains(d)) {
                        println!("predicted only: {d:#?}");
                    }
                    for d in full.iter().filter(|d| !predicted.contains(d)) {
                        println!("complete only: {d:#?}");
                    }
                }
                let only = |a: &[Diagnostic], b: &[Diagnostic]| -> Vec<String> {
                    a.iter()
                        .filter(|d| !b.contains(d))
                        .map(|d| format!("{} line {}", d.rule.code(), edited[..d.range.start].matches('\n').count() + 1))
                        .collect()
                };
                wrong.push(format!(
                    "{}:{line}: predicted {} findings, the complete lint {} (only predicted: {:?}; only complete: {:?})",
                    file.display(),
                    predicted.len(),
                    full.len(),
                    only(&predicted, &full),
                    only(&full, &predicted)
                ));
            }
        }
    }
    println!("{} files, {total} edits (one letter typed into a word)", files.len());
    println!("followed by the prediction: {followed} ({:.1}%)", 100.0 * followed as f64 / total.max(1) as f64);
    println!("exact: {exact} of {followed} ({:.2}%)", 100.0 * exact as f64 / followed.max(1) as f64);
    println!("median time of the edits followed: complete lint {:.2} ms, prediction {:.2} ms", median(full_times), median(predicted_times));
    for w in &wrong {
        println!("  differs: {w}");
    }
}
