//! The build identity of the linter: a hash of the sources that decide findings (the
//! linter and parser crates, the rule queries, the lock file). `build.rs` computes it at
//! compile time (this file is included there) and the results cache keys on it, so a
//! rebuild that changes a rule invalidates cached results even when the version string
//! stays the same.

use std::fs;
use std::path::Path;

/// What decides findings, relative to the workspace root.
pub const LINTER_SOURCES: &[&str] = &[
    "crates/memlint_linter/src",
    "crates/memlint_linter/Cargo.toml",
    "crates/memlint_python/src",
    "crates/memlint_python/Cargo.toml",
    "queries",
    "Cargo.lock",
];

/// A hex hash of every file under `paths` (relative to `root`): each file's path and
/// contents, in sorted order, so it depends on nothing but the sources. A missing path
/// is hashed as missing.
pub fn hash_sources(root: &Path, paths: &[&str]) -> String {
    let mut files = Vec::new();
    for path in paths {
        collect(root, &root.join(path), &mut files);
        if !root.join(path).exists() {
            files.push((path.to_string(), None));
        }
    }
    files.sort();
    let mut hasher = blake3::Hasher::new();
    for (name, contents) in &files {
        hasher.update(name.as_bytes());
        hasher.update(&[0]);
        match contents {
            Some(bytes) => {
                hasher.update(&(bytes.len() as u64).to_le_bytes());
                hasher.update(bytes);
            }
            None => {
                hasher.update(b"missing");
            }
        }
    }
    hasher.finalize().to_hex()[..16].to_owned()
}

fn collect(root: &Path, path: &Path, out: &mut Vec<(String, Option<Vec<u8>>)>) {
    if path.is_dir() {
        if let Ok(entries) = fs::read_dir(path) {
            for entry in entries.flatten() {
                collect(root, &entry.path(), out);
            }
        }
    } else if path.is_file() {
        let name = path.strip_prefix(root).unwrap_or(path).to_string_lossy().replace('\\', "/");
        out.push((name, fs::read(path).ok()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_changes_with_any_source_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("src/rules")).unwrap();
        fs::write(root.join("src/rules/a.rs"), "fn a() {}").unwrap();
        fs::write(root.join("Cargo.lock"), "lock").unwrap();
        let paths = &["src", "Cargo.lock"];
        let first = hash_sources(root, paths);
        assert_eq!(first, hash_sources(root, paths), "the same sources, the same identity");
        fs::write(root.join("src/rules/a.rs"), "fn a() { 1; }").unwrap();
        let changed = hash_sources(root, paths);
        assert_ne!(changed, first, "a rule change is a new build");
        fs::write(root.join("src/rules/b.rs"), "").unwrap();
        assert_ne!(hash_sources(root, paths), changed, "a new file is a new build");
        fs::remove_file(root.join("Cargo.lock")).unwrap();
        assert_ne!(hash_sources(root, paths), changed);
    }

    #[test]
    fn the_binary_carries_the_identity_of_the_sources_it_was_built_from() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        assert_eq!(crate::cache::BUILD_ID, hash_sources(&root, LINTER_SOURCES));
    }
}
