//! Every `*.py` file's [`memlint_python::ModuleSummary`] under the folders given, one
//! block per file (`== path`, then the summary's `Debug`), in path order: a change meant
//! to make summaries faster, not different, is checked by comparing this output of the
//! binaries before and after (`cmp`) on a large tree.
//!
//! ```sh
//! cargo run --release -p memlint_python --example summary_dump -- TREE... > after.txt
//! ```
use std::path::{Path, PathBuf};
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out)
        } else if p.extension().is_some_and(|e| e == "py") {
            out.push(p)
        }
    }
}
fn main() {
    let mut all = Vec::new();
    for d in std::env::args().skip(1) {
        files(Path::new(&d), &mut all);
    }
    all.sort();
    for p in all {
        let Ok(b) = std::fs::read(&p) else { continue };
        let t = String::from_utf8_lossy(&b);
        let tree = memlint_python::parse_with(&t, None);
        let s = memlint_python::ModuleSummary::new(&tree, &t);
        println!("== {}\n{:?}", p.display(), s);
    }
}
