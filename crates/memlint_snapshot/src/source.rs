//! `--source ROOT`: recorded paths come from the machine that ran the program; each is
//! mapped onto the file under ROOT that shares the longest suffix of path components
//! with it (at least the file name).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::analysis::{Device, Line};

pub struct SourceMap {
    root: PathBuf,
    /// Files under ROOT by file name.
    by_name: HashMap<String, Vec<PathBuf>>,
    cache: RefCell<HashMap<String, Option<PathBuf>>>,
}

const SKIP_DIRS: &[&str] = &[".git", "node_modules", "__pycache__", ".venv", "venv", "site-packages", "target"];

impl SourceMap {
    /// Lists the Python files under `root` (hidden folders and virtual environments left out).
    pub fn new(root: &Path) -> std::io::Result<SourceMap> {
        let meta = std::fs::metadata(root)?;
        if !meta.is_dir() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{} is not a folder", root.display())));
        }
        let mut by_name: HashMap<String, Vec<PathBuf>> = HashMap::new();
        let mut todo = vec![root.to_path_buf()];
        while let Some(dir) = todo.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                let Ok(ft) = entry.file_type() else { continue };
                if ft.is_dir() {
                    if !name.starts_with('.') && !SKIP_DIRS.contains(&name.as_str()) {
                        todo.push(entry.path());
                    }
                } else if name.ends_with(".py") || name.ends_with(".ipynb") {
                    by_name.entry(name).or_default().push(entry.path());
                }
            }
        }
        Ok(SourceMap { root: root.to_path_buf(), by_name, cache: RefCell::new(HashMap::new()) })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file under ROOT a recorded path stands for, if any.
    pub fn resolve(&self, recorded: &str) -> Option<PathBuf> {
        if let Some(hit) = self.cache.borrow().get(recorded) {
            return hit.clone();
        }
        let parts: Vec<&str> = recorded.split(['/', '\\']).filter(|p| !p.is_empty()).collect();
        let found = parts.last().and_then(|name| self.by_name.get(*name)).and_then(|cands| {
            let score = |c: &PathBuf| {
                let rel = c.strip_prefix(&self.root).unwrap_or(c);
                let cp: Vec<String> = rel.components().map(|x| x.as_os_str().to_string_lossy().to_string()).collect();
                cp.iter().rev().zip(parts.iter().rev()).take_while(|(a, b)| a.as_str() == **b).count()
            };
            let best = cands.iter().map(|c| (score(c), c)).max_by_key(|(s, _)| *s)?;
            // ambiguous when another candidate matches as long a suffix
            let ties = cands.iter().filter(|c| score(c) == best.0).count();
            (ties == 1).then(|| best.1.clone())
        });
        self.cache.borrow_mut().insert(recorded.to_string(), found.clone());
        found
    }

    fn map_line(&self, l: &mut Line) {
        if let Some(p) = self.resolve(&l.file) {
            l.recorded_file = Some(std::mem::replace(&mut l.file, p.display().to_string()));
        }
    }

    /// Rewrites every file of a device's report onto ROOT.
    pub fn apply(&self, d: &mut Device) {
        d.at_peak.iter_mut().chain(d.retained.iter_mut()).for_each(|l| self.map_line(l));
        for f in &mut d.inclusive {
            if let Some(p) = self.resolve(&f.file) {
                f.file = p.display().to_string();
            }
        }
        for o in &mut d.ooms {
            o.at_oom.iter_mut().for_each(|l| self.map_line(l));
        }
        for f in &mut d.retained_by_function {
            if let Some(p) = self.resolve(&f.file) {
                f.file = p.display().to_string();
            }
            for (file, _) in &mut f.lines {
                if let Some(p) = self.resolve(file) {
                    *file = p.display().to_string();
                }
            }
        }
    }
}
