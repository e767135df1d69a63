//! Finding the files to lint: explicit files as given, folders walked honouring
//! `.gitignore` / `.ignore` (the `ignore` crate, ripgrep's walker) and the configured
//! `exclude`, skipping hidden folders and virtual environments.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use memlint_config::{ConfigError, Resolver, Settings};

/// Does memlint lint files with this name when walking a folder?
pub fn is_lintable(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("py" | "ipynb"))
}

/// A virtual environment or conda environment under any name.
fn is_environment(dir: &Path) -> bool {
    dir.join("pyvenv.cfg").is_file() || dir.join("conda-meta").is_dir()
}

/// One file to lint and the settings that apply to it.
pub struct FileToLint {
    pub path: PathBuf,
    pub settings: Arc<Settings>,
}

pub enum WalkError {
    /// Arguments that name nothing on disk.
    Missing(Vec<PathBuf>),
    /// A configuration file on the way is broken.
    Config(ConfigError),
}

/// Every file to lint under `paths` (sorted, without duplicates), and the folders that
/// could not be read.
pub fn collect_files(
    paths: &[PathBuf],
    resolver: &Arc<Resolver>,
    force_exclude: bool,
) -> Result<(Vec<FileToLint>, Vec<(PathBuf, String)>), WalkError> {
    let missing: Vec<PathBuf> = paths.iter().filter(|p| !p.exists()).cloned().collect();
    if !missing.is_empty() {
        return Err(WalkError::Missing(missing));
    }
    let mut files = Vec::new();
    let mut unreadable = Vec::new();
    let config_errors: Arc<Mutex<Vec<ConfigError>>> = Arc::default();
    for path in paths {
        let settings = resolver.settings_for(path).map_err(WalkError::Config)?;
        if !path.is_dir() {
            // Named explicitly: linted whatever its name, and even when excluded unless
            // `--force-exclude` (pre-commit passes every changed file explicitly).
            let excluded = force_exclude && path.ancestors().any(|a| !a.as_os_str().is_empty() && settings.is_excluded(a));
            if !excluded {
                files.push(FileToLint { path: normalize(path), settings });
            }
            continue;
        }
        let filter_resolver = resolver.clone();
        let filter_errors = config_errors.clone();
        let root = path.clone();
        let walker = ignore::WalkBuilder::new(path)
            .hidden(true)
            .git_ignore(settings.respect_gitignore)
            .git_global(settings.respect_gitignore)
            .git_exclude(settings.respect_gitignore)
            .ignore(settings.respect_gitignore)
            .parents(settings.respect_gitignore)
            .require_git(false)
            .follow_links(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(move |entry| {
                if entry.path() == root {
                    return true;
                }
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                if is_dir && is_environment(entry.path()) {
                    return false;
                }
                match filter_resolver.settings_for(entry.path()) {
                    Ok(s) => !s.is_excluded(entry.path()),
                    Err(e) => {
                        filter_errors.lock().expect("no panic under the lock").push(e);
                        false
                    }
                }
            })
            .build();
        for entry in walker {
            match entry {
                Ok(entry) => {
                    let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
                    if is_file && is_lintable(entry.path()) {
                        let settings = resolver.settings_for(entry.path()).map_err(WalkError::Config)?;
                        files.push(FileToLint { path: normalize(entry.path()), settings });
                    }
                }
                Err(e) => {
                    let at = match &e {
                        ignore::Error::WithPath { path, .. } => path.clone(),
                        _ => path.clone(),
                    };
                    unreadable.push((at, e.to_string()));
                }
            }
        }
    }
    if let Some(error) = config_errors.lock().expect("no panic under the lock").drain(..).next() {
        return Err(WalkError::Config(error));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files.dedup_by(|a, b| a.path == b.path);
    Ok((files, unreadable))
}

/// `memlint check` walks `.`: report `src/a.py`, not `./src/a.py`, as ruff does.
fn normalize(path: &Path) -> PathBuf {
    match path.strip_prefix(".") {
        Ok(stripped) if !stripped.as_os_str().is_empty() => stripped.to_path_buf(),
        _ => path.to_path_buf(),
    }
}
