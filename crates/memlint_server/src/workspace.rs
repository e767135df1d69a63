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

/// The summary store of the workspace's cache, shared with `memlint check`: under the
/// first root whose cache folder (`.memlint_cache`, or `MEMLINT_CACHE_DIR`: absolute, or
/// relative to the root) already has a folder for this version. `None` without one (the
/// server creates no cache of its own in a workspace) or with `MEMLINT_NO_CACHE` set.
pub fn summary_store(roots: &[PathBuf], build: &str) -> Option<memlint_project::SummaryStore> {
    // As `memlint check --no-cache` reads the variable (clap's falsey values are "off").
    let off = std::env::var("MEMLINT_NO_CACHE").is_ok_and(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "n" | "no" | "f" | "false" | "off"));
    if off {
        return None;
    }
    let cache_dir = std::env::var_os("MEMLINT_CACHE_DIR").filter(|d| !d.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".memlint_cache"));
    summary_store_in(roots, &cache_dir, build)
}

/// [`summary_store`] with the cache folder given.
pub fn summary_store_in(roots: &[PathBuf], cache_dir: &std::path::Path, build: &str) -> Option<memlint_project::SummaryStore> {
    roots.iter().find_map(|root| {
        let versioned = root.join(cache_dir).join(env!("CARGO_PKG_VERSION"));
        if versioned.is_dir() {
            memlint_project::SummaryStore::open(&versioned, build)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_is_the_existing_cache_folder_of_a_root_and_none_is_created() {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path().to_path_buf();
        assert!(summary_store_in(&[root.clone()], std::path::Path::new(".memlint_cache"), "build").is_none());
        assert!(!root.join(".memlint_cache").exists(), "the server created a cache folder");
        let versioned = root.join(".memlint_cache").join(env!("CARGO_PKG_VERSION"));
        std::fs::create_dir_all(&versioned).unwrap();
        assert!(summary_store_in(&[root.clone()], std::path::Path::new(".memlint_cache"), "build").is_some());
        assert!(versioned.join("summaries").is_dir(), "the store's folder is in the existing cache");
        // An absolute cache folder is taken as it is.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(elsewhere.path().join(env!("CARGO_PKG_VERSION"))).unwrap();
        assert!(summary_store_in(&[root], elsewhere.path(), "build").is_some());
    }
}
