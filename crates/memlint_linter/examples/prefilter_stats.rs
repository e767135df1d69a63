use memlint_linter::{lint, lint_unfiltered, prefilter::rules_that_could_fire, LinterSettings, Rule, RuleSelection};
fn main() {
    let dir = std::env::args().nth(1).unwrap();
    let compare = std::env::args().nth(2).is_some();
    let mut counts = vec![0usize; Rule::ALL.len()];
    let mut lines_pass = vec![0usize; Rule::ALL.len()];
    let (mut files, mut any, mut lines, mut any_lines, mut mismatches) = (0, 0, 0, 0, 0);
    let mut stack = vec![std::path::PathBuf::from(dir)];
    while let Some(p) = stack.pop() {
        if p.is_dir() { for e in std::fs::read_dir(&p).unwrap() { stack.push(e.unwrap().path()); } continue; }
        if p.extension().map(|e| e != "py").unwrap_or(true) { continue; }
        let Ok(src) = std::fs::read_to_string(&p) else { continue };
        files += 1; let n = src.lines().count(); lines += n;
        let sel = rules_that_could_fire(&src, &RuleSelection::all());
        if sel.any_enabled() { any += 1; any_lines += n; }
        for (i, r) in Rule::ALL.iter().enumerate() { if sel.is_enabled(*r) { counts[i] += 1; lines_pass[i] += n; } }
        if compare {
            let s = LinterSettings::default();
            let a = lint(&src, &s).diagnostics; let b = lint_unfiltered(&src, &s).diagnostics;
            if a != b { mismatches += 1; println!("MISMATCH {}: {} vs {}", p.display(), a.len(), b.len()); }
        }
    }
    println!("files {files} lines {lines}; parsed {any} files {any_lines} lines; mismatches {mismatches}");
    for (i, r) in Rule::ALL.iter().enumerate() { println!("{} {:5} files {:8} lines", r.code(), counts[i], lines_pass[i]); }
}
