//! The test suite needs nothing outside the repository: a user's clone has no folder beside
//! it. Every test source, test script and editor test of the repository is scanned for
//! relative paths that climb above the repository's root (`../../../shared/...` from a
//! crate, `$here/../../../..` from a script, `ROOT.parent` or `parents[N]` in Python). A
//! path is read from the folder it is relative to: in Rust, the crate's folder (where
//! `CARGO_MANIFEST_DIR` points, and where `cargo test` runs a test), except in
//! `include_str!`, `include_bytes!` and `#[path]`, which are relative to the file; in the
//! other languages, the file's folder (the scripts start from `$(dirname "$0")`).
//!
//! What a test legitimately reads outside the tree is cargo's own package cache, found
//! through `cargo metadata` (the SARIF schema of `serde-sarif`): that comes from a
//! registry, as the crates do.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Folders whose files are test code or scripts the test command runs.
const SCANNED: &[&str] = &["crates", "tests", "scripts", "editors", ".ci"];
const EXTENSIONS: &[&str] = &["rs", "sh", "py", "js", "mjs", "ts", "lua", "el", "toml", "json"];
/// Never scanned: build outputs, installed packages, and inputs that tests lint or read as
/// data rather than run (their text is a Python program or a recording, not a path).
const SKIPPED_DIRS: &[&str] = &["target", "node_modules", "out", "fixtures", "snapshots", "data", ".vscode-test", "proptest-regressions"];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !SKIPPED_DIRS.contains(&name.as_str()) {
                files(&path, out);
            }
        } else if path.extension().is_some_and(|e| EXTENSIONS.contains(&e.to_string_lossy().as_ref())) || name == "run" {
            out.push(path);
        }
    }
}

/// How many folders deep `dir` is below the root.
fn depth(dir: &Path, root: &Path) -> usize {
    dir.strip_prefix(root).map(|rel| rel.components().count()).unwrap_or(0)
}

/// Does `path` (a token of the source), read from a folder `base_depth` below the root,
/// climb above the root?
fn climbs_out(path: &str, base_depth: usize) -> bool {
    let mut depth = base_depth as isize;
    for (i, part) in path.split('/').enumerate() {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            // A leading variable (`$here`, `${ROOT}`) stands for the base folder itself.
            p if i == 0 && (p.starts_with('$') || p.starts_with('{')) => {}
            _ => depth += 1,
        }
    }
    false
}

/// The relative paths in a text: maximal runs of path characters holding a `..` component.
fn dotdot_paths(text: &str) -> Vec<(usize, &str)> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./$-{}".contains(c);
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut start = None;
        for (i, c) in line.char_indices().chain(std::iter::once((line.len(), ' '))) {
            match (is_path_char(c), start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    let token = &line[s..i];
                    if token.split('/').any(|p| p == "..") {
                        found.push((n + 1, token));
                    }
                    start = None;
                }
                _ => {}
            }
        }
    }
    found
}

/// Python's ways of climbing: `ROOT.parent` (ROOT is the repository's root in this
/// repository's scripts) and `Path(__file__)...parents[N]` beyond the file's depth.
fn python_climbs(text: &str, file_depth: usize) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.contains("ROOT.parent") {
            found.push((n + 1, "ROOT.parent".to_string()));
        }
        if line.contains("__file__") {
            if let Some(at) = line.find("parents[") {
                let digits: String = line[at + 8..].chars().take_while(char::is_ascii_digit).collect();
                if digits.parse::<usize>().is_ok_and(|k| k > file_depth) {
                    found.push((n + 1, format!("parents[{digits}]")));
                }
            }
        }
    }
    found
}

fn crate_dir<'a>(file: &Path, root: &'a Path) -> Option<PathBuf> {
    let rel = file.strip_prefix(root).ok()?;
    let mut parts = rel.components();
    (parts.next()?.as_os_str() == "crates").then(|| root.join("crates").join(parts.next().unwrap().as_os_str()))
}

fn violations(root: &Path) -> Vec<String> {
    let mut all = Vec::new();
    for dir in SCANNED {
        files(&root.join(dir), &mut all);
    }
    let me = Path::new(file!()).file_name().unwrap();
    let mut bad = Vec::new();
    for file in all {
        if file.file_name() == Some(me) {
            continue; // this file's own examples
        }
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let dir = file.parent().unwrap();
        let file_depth = depth(dir, root);
        let crate_depth = file.extension().is_some_and(|e| e == "rs").then(|| crate_dir(&file, root)).flatten().map(|k| depth(&k, root));
        let lines: Vec<&str> = text.lines().collect();
        let rel = file.strip_prefix(root).unwrap().display().to_string();
        for (line, token) in dotdot_paths(&text) {
            let relative_to_file = ["include_str!", "include_bytes!", "include!", "#[path"].iter().any(|m| lines[line - 1].contains(m));
            let base = match crate_depth {
                Some(d) if !relative_to_file => d,
                _ => file_depth,
            };
            if climbs_out(token, base) {
                bad.push(format!("{rel}:{line}: `{token}` climbs above the repository"));
            }
        }
        if file.extension().is_some_and(|e| e == "py") {
            for (line, what) in python_climbs(&text, depth(dir, root)) {
                bad.push(format!("{rel}:{line}: `{what}` climbs above the repository"));
            }
        }
    }
    bad
}

#[test]
fn no_test_reads_outside_the_repository() {
    let bad = violations(&root());
    assert!(bad.is_empty(), "tests must need nothing beside the clone:\n{}", bad.join("\n"));
}

#[test]
fn the_scan_finds_what_climbs_out() {
    // The two reads that broke a fresh clone (issue 28), from crates/memlint/tests.
    assert!(!climbs_out("../../../shared/schemas/sarif-schema-2.1.0.json", 3));
    assert!(climbs_out("../../../shared/schemas/sarif-schema-2.1.0.json", 2));
    assert!(!climbs_out("../../tests/examples", 2));
    assert!(!climbs_out("$here/../../..", 3));
    assert!(climbs_out("$here/../../../..", 3));
    assert!(!climbs_out("/../..", 2));
    assert_eq!(dotdot_paths(r#"join("../../../shared/x.json")"#), vec![(1, "../../../shared/x.json")]);
    assert_eq!(dotdot_paths("a..b c...d"), Vec::<(usize, &str)>::new());
    assert_eq!(python_climbs("RESERVED = ROOT.parent / 'shared'", 2).len(), 1);
    assert_eq!(python_climbs("ROOT = Path(__file__).resolve().parents[2]", 2).len(), 0);
    assert_eq!(python_climbs("ROOT = Path(__file__).resolve().parents[3]", 2).len(), 1);

    // A scratch repository with one offending test is caught, one without is not.
    let scratch = tempfile::tempdir().unwrap();
    let tests = scratch.path().join("crates/demo/tests");
    std::fs::create_dir_all(&tests).unwrap();
    std::fs::write(tests.join("ok.rs"), "const P: &str = \"../../tests/examples\";\nconst Q: &str = include_str!(\"../../../tests/examples/a.py\");").unwrap();
    assert!(violations(scratch.path()).is_empty());
    std::fs::write(tests.join("bad.rs"), r#"const P: &str = "../../../shared/schemas/s.json";"#).unwrap();
    let bad = violations(scratch.path());
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].starts_with("crates/demo/tests/bad.rs:1:"), "{bad:?}");
}
