//! Finding the files to lint: explicit files as given, folders walked with walkdir.

use std::path::{Path, PathBuf};

use walkdir::{DirEntry, WalkDir};

/// Folders never worth walking into: caches, virtual environments, installed packages.
const SKIPPED_DIRS: &[&str] = &["__pycache__", "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv"];

/// Does memlint lint files with this name when walking a folder?
pub fn is_python_file(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("py"))
}

fn is_skipped_dir(entry: &DirEntry) -> bool {
    if entry.depth() == 0 || !entry.file_type().is_dir() {
        return false;
    }
    let name = entry.file_name().to_string_lossy();
    name.starts_with('.')
        || SKIPPED_DIRS.contains(&name.as_ref())
        // A virtual environment or conda environment under any name.
        || entry.path().join("pyvenv.cfg").is_file()
        || entry.path().join("conda-meta").is_dir()
}

/// An argument that names nothing on disk.
#[derive(Debug)]
pub struct MissingPath(pub PathBuf);

/// Every file to lint under `paths`, sorted, without duplicates.
pub fn collect_files(paths: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<(PathBuf, String)>), Vec<MissingPath>> {
    let missing: Vec<MissingPath> = paths.iter().filter(|p| !p.exists()).map(|p| MissingPath(p.clone())).collect();
    if !missing.is_empty() {
        return Err(missing);
    }
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        if !path.is_dir() {
            // Named explicitly: linted whatever its extension.
            files.push(path.clone());
            continue;
        }
        let walker = WalkDir::new(path).follow_links(false).sort_by_file_name().into_iter();
        for entry in walker.filter_entry(|e| !is_skipped_dir(e)) {
            match entry {
                Ok(entry) if entry.file_type().is_file() && is_python_file(entry.path()) => {
                    files.push(entry.into_path())
                }
                Ok(_) => {}
                Err(e) => {
                    let at = e.path().map(Path::to_path_buf).unwrap_or_else(|| path.clone());
                    let reason = e.io_error().map(|io| io.to_string()).unwrap_or_else(|| e.to_string());
                    errors.push((at, reason));
                }
            }
        }
    }
    // `memlint check` walks `.`: report `src/a.py`, not `./src/a.py`, as ruff does.
    for file in &mut files {
        if let Ok(stripped) = file.strip_prefix(".") {
            if !stripped.as_os_str().is_empty() {
                *file = stripped.to_path_buf();
            }
        }
    }
    files.sort();
    files.dedup();
    Ok((files, errors))
}
