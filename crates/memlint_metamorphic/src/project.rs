//! Projects to lint a case in: modules held in memory (a fixture case and the sibling
//! module a rewrite adds), and a project on disk with modules added in memory beside a
//! file (the corpus, where `factory-module` writes `_factory.py` next to the file without
//! touching the disk).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memlint_python::{parse, ModuleLoader, ModuleSummary};

/// Modules by path (`pkg/models.py`), resolved as Python resolves imports from files: an
/// absolute name from the project's root or the importing file's folder, a relative one
/// from the importing file's package.
pub struct Memory {
    files: HashMap<String, String>,
    summaries: Mutex<HashMap<String, Arc<ModuleSummary>>>,
}

impl Memory {
    pub fn new(files: impl IntoIterator<Item = (String, String)>) -> Memory {
        Memory { files: files.into_iter().collect(), summaries: Mutex::new(HashMap::new()) }
    }

    fn module_at(&self, dir: &str, parts: &[&str]) -> Option<String> {
        let join = |a: &str, b: &str| if a.is_empty() { b.to_owned() } else if b.is_empty() { a.to_owned() } else { format!("{a}/{b}") };
        let base = join(dir, &parts.join("/"));
        let file = format!("{base}.py");
        if !parts.is_empty() && self.files.contains_key(&file) {
            return Some(file);
        }
        let init = join(&base, "__init__.py");
        self.files.contains_key(&init).then_some(init)
    }
}

/// The folder of a module key (`a/b.py` → `a`).
fn folder(key: &str) -> &str {
    key.rfind('/').map_or("", |i| &key[..i])
}

/// `.x.y` → (1, ["x", "y"]).
fn split_dotted(dotted: &str) -> (usize, Vec<&str>) {
    let dots = dotted.len() - dotted.trim_start_matches('.').len();
    (dots, dotted[dots..].split('.').filter(|p| !p.is_empty()).collect())
}

impl ModuleLoader for Memory {
    fn resolve_module(&self, from: &str, dotted: &str) -> Option<String> {
        let (dots, parts) = split_dotted(dotted);
        if dots == 0 {
            return self.module_at("", &parts).or_else(|| self.module_at(folder(from), &parts));
        }
        let mut dir: Vec<&str> = folder(from).split('/').filter(|p| !p.is_empty()).collect();
        for _ in 1..dots {
            dir.pop()?;
        }
        self.module_at(&dir.join("/"), &parts)
    }
    fn summary(&self, key: &str) -> Option<Arc<ModuleSummary>> {
        let text = self.files.get(key)?;
        let mut cache = self.summaries.lock().unwrap_or_else(|e| e.into_inner());
        Some(
            cache
                .entry(key.to_owned())
                .or_insert_with(|| {
                    let parsed = parse(text);
                    Arc::new(ModuleSummary::new(&parsed.tree, text))
                })
                .clone(),
        )
    }
    fn candidate_callers(&self, key: &str, name: &str) -> Vec<String> {
        let mut keys: Vec<String> = self.files.iter().filter(|(k, t)| k.as_str() != key && t.contains(name)).map(|(k, _)| k.clone()).collect();
        keys.sort();
        keys
    }
}

/// A loader with modules added beside it: `added` (keys as the base's, file paths) are
/// found first, by the module's name in the importing file's folder.
pub struct Overlay<'a> {
    base: &'a dyn ModuleLoader,
    added: Memory,
}

impl<'a> Overlay<'a> {
    pub fn new(base: &'a dyn ModuleLoader, added: impl IntoIterator<Item = (String, String)>) -> Overlay<'a> {
        Overlay { base, added: Memory::new(added) }
    }
}

impl ModuleLoader for Overlay<'_> {
    fn resolve_module(&self, from: &str, dotted: &str) -> Option<String> {
        let (dots, parts) = split_dotted(dotted);
        if dots <= 1 {
            if let Some(key) = self.added.module_at(folder(from), &parts) {
                return Some(key);
            }
        }
        self.base.resolve_module(from, dotted)
    }
    fn summary(&self, key: &str) -> Option<Arc<ModuleSummary>> {
        self.added.summary(key).or_else(|| self.base.summary(key))
    }
    fn candidate_callers(&self, key: &str, name: &str) -> Vec<String> {
        let mut keys = self.base.candidate_callers(key, name);
        keys.extend(self.added.candidate_callers(key, name));
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_resolves_absolute_relative_and_packages() {
        let memory = Memory::new([
            ("case.py".to_owned(), String::new()),
            ("_factory.py".to_owned(), String::new()),
            ("pkg/__init__.py".to_owned(), String::new()),
            ("pkg/m.py".to_owned(), String::new()),
        ]);
        assert_eq!(memory.resolve_module("case.py", "_factory").as_deref(), Some("_factory.py"));
        assert_eq!(memory.resolve_module("pkg/m.py", ".").as_deref(), Some("pkg/__init__.py"));
        assert_eq!(memory.resolve_module("pkg/m.py", "pkg.m").as_deref(), Some("pkg/m.py"));
        assert_eq!(memory.resolve_module("case.py", "torch"), None);
        let overlay = Overlay::new(&memory, [("pkg/_factory.py".to_owned(), "x = 1\n".to_owned())]);
        assert_eq!(overlay.resolve_module("pkg/m.py", "._factory").as_deref(), Some("pkg/_factory.py"));
        assert_eq!(overlay.resolve_module("pkg/m.py", "_factory").as_deref(), Some("pkg/_factory.py"));
        assert_eq!(overlay.resolve_module("case.py", "_factory").as_deref(), Some("_factory.py"));
        assert!(overlay.summary("pkg/_factory.py").is_some());
    }
}
