//! The project around the files `memlint check` lints (see `memlint_project` for how
//! import names map to files): one [`Project`] per run, shared by the threads, reading
//! and summarizing each imported module once, and a [`ProjectResolver`] per linted file,
//! which records the modules it read for the results cache.

use std::path::{Path, PathBuf};

use memlint_linter::ProjectIndex;
use memlint_project::Project;
use memlint_python::ProjectResolver;

use crate::walk::FileToLint;

/// The project of a run: absolute imports may also resolve under each configuration's
/// folder, and under the current folder when the files linted are in it (where Python
/// finds them when the program is started from there: `python -m`, pytest); callers of a
/// function are looked for among the files of the run.
pub fn for_files(files: &[FileToLint]) -> Project {
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir().and_then(|d| d.canonicalize()) {
        if files.iter().any(|f| f.path.canonicalize().is_ok_and(|p| p.starts_with(&cwd))) {
            roots.push(cwd);
        }
    }
    for f in files {
        if f.settings.config_file.is_some() && !roots.contains(&f.settings.root) {
            roots.push(f.settings.root.clone());
        }
    }
    Project::new(roots, files.iter().map(|f| f.path.clone()).collect()).keeping_trees()
}

/// The project of a file given on standard input (its folder's modules are read from
/// disk; no other file of a run calls its functions).
pub fn for_stdin(root: Option<PathBuf>) -> Project {
    Project::new(root.into_iter().collect(), Vec::new())
}

/// The index of one linted file of `project`, or none (`--no-project`). `on_disk`: the
/// text linted is the file's (not a fix pass's, nor standard input's), so its parse can
/// also give its summary.
pub fn index<'p>(project: Option<&'p Project>, path: &Path, on_disk: bool) -> Option<ProjectResolver<'p>> {
    project.map(|p| {
        let resolver = ProjectResolver::new(p, Project::key(path));
        if on_disk { resolver.seeding() } else { resolver }
    })
}

/// The index to lint with: the file's, or the empty one.
pub fn as_index<'a>(resolver: &'a Option<ProjectResolver<'_>>) -> &'a dyn ProjectIndex {
    match resolver {
        Some(r) => r,
        None => &memlint_linter::NoProject,
    }
}

/// The modules a linted file read, with their content hashes, and the questions of who
/// calls a function of another module it asked, with a hash of their candidate callers
/// (the results cache keys the file on them: see [`Project::dependency_hash`]).
pub fn dependencies(project: Option<&Project>, resolver: &Option<ProjectResolver<'_>>) -> Vec<(String, String)> {
    let (Some(project), Some(resolver)) = (project, resolver) else { return Vec::new() };
    let callers = resolver.callers_asked().into_iter().map(|(key, name)| Project::callers_dependency(&key, &name));
    resolver.modules_read().into_iter().chain(callers).filter_map(|key| project.dependency_hash(&key).map(|h| (key, h))).collect()
}
