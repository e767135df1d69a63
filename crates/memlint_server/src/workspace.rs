//! The workspace's Python files: where the project index looks for callers of a function
//! (the modules themselves are found by their import names, see `memlint_project`).

use std::path::PathBuf;

/// At most this many files are listed (a huge workspace keeps the rest out of the caller
/// search; imports still resolve).
const MAX_FILES: usize = 50_000;

/// The `.py` files under the workspace folders, as `memlint check` walks a tree:
/// `.gitignore` respected, hidden folders skipped.
pub fn python_files(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for root in roots {
        let walker = ignore::WalkBuilder::new(root).hidden(true).git_ignore(true).require_git(false).build();
        for entry in walker.flatten() {
            if files.len() >= MAX_FILES {
                return files;
            }
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "py") && entry.file_type().is_some_and(|t| t.is_file()) {
                files.push(path.to_owned());
            }
        }
    }
    files
}
