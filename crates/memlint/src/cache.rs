//! The results cache (like ruff's `.ruff_cache`): the findings of a file whose text and
//! settings have not changed are reused instead of parsing it again.
//!
//! One small file per entry, named by a hash of memlint's version, its build identity (a
//! hash of the linter's sources taken at compile time, `build.rs`: a rebuild with a
//! changed rule misses every old entry), the settings, whether the project around the file
//! was read, and the text, written on a thread of their own through a temporary file and a
//! rename (`memlint_project::WrittenBehind`): concurrent runs never see a half-written
//! entry, and an entry that does not decode (corrupt, or from another version) is ignored
//! and rewritten.
//!
//! A file's findings can also depend on the project's modules it imports (a class in a
//! sibling module that became a `torch.nn.Module`, a caller elsewhere that now runs under
//! `no_grad`): each entry lists the modules its lint read with their content hashes, and
//! is reused only while every one of them hashes the same.

use std::fs;
use std::path::{Path, PathBuf};

use memlint_linter::{Applicability, Diagnostic, Edit, Fix, LinterSettings, Rule, Severity, SyntaxError};
use serde::{Deserialize, Serialize};

pub struct Cache {
    dir: PathBuf,
    /// The build identity the entries belong to.
    build: String,
    /// Entries are written on a thread of their own (dropping the cache waits for them).
    writes: memlint_project::WrittenBehind,
}

/// This binary's build identity (see `build.rs`).
pub const BUILD_ID: &str = env!("MEMLINT_BUILD_ID");

#[derive(Serialize, Deserialize)]
struct Entry {
    diagnostics: Vec<CachedDiagnostic>,
    syntax_errors: Vec<(usize, usize, String)>,
    /// The project modules the lint read: (path, content hash).
    #[serde(default)]
    dependencies: Vec<(String, String)>,
}

#[derive(Serialize, Deserialize)]
struct CachedDiagnostic {
    code: String,
    message: String,
    help: Option<String>,
    start: usize,
    end: usize,
    severity: String,
    fix: Option<(bool, String, Vec<(usize, usize, String)>)>,
    /// The facts the finding rests on: (text, byte range).
    #[serde(default)]
    evidence: Vec<(String, Option<(usize, usize)>)>,
}

impl Cache {
    /// Opens (creating) the cache folder for this build; `None` when it cannot be created
    /// (memlint then simply lints everything).
    pub fn open(dir: &Path) -> Option<Cache> {
        Cache::open_for_build(dir, BUILD_ID)
    }

    /// Opens the cache for the entries of build `build`.
    fn open_for_build(dir: &Path, build: &str) -> Option<Cache> {
        let dir = dir.join(env!("CARGO_PKG_VERSION"));
        fs::create_dir_all(&dir).ok()?;
        let gitignore = dir.parent()?.join(".gitignore");
        if !gitignore.exists() {
            let _ = fs::write(gitignore, "# Automatically created by memlint.\n*\n");
        }
        Some(Cache { dir, build: build.to_owned(), writes: memlint_project::WrittenBehind::start()? })
    }

    pub fn key(&self, program: &str, settings: &LinterSettings, with_project: bool) -> String {
        let mut hasher = blake3::Hasher::new();
        hasher.update(if with_project { b"project\0" } else { b"alone\0" });
        hasher.update(env!("CARGO_PKG_VERSION").as_bytes());
        hasher.update(self.build.as_bytes());
        // The settings' Debug form covers the enabled rules and severities; sort the map.
        let mut severities: Vec<String> = settings.severity.iter().map(|(r, s)| format!("{}={}", r.code(), s.as_str())).collect();
        severities.sort();
        let rules: Vec<&str> = settings.rules.iter().map(|r| r.code()).collect();
        hasher.update(format!("{rules:?}{severities:?}").as_bytes());
        hasher.update(program.as_bytes());
        hasher.finalize().to_hex().to_string()
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    /// The entry of `key`, when every dependency still has the value recorded with it
    /// (`holds(dependency, recorded)`: a module's content hash, or a question of who calls
    /// a function, as `Project::dependency_holds` decides).
    pub fn get(&self, key: &str, holds: impl Fn(&str, &str) -> bool) -> Option<(Vec<Diagnostic>, Vec<SyntaxError>)> {
        let bytes = fs::read(self.path(key)).ok()?;
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        if entry.dependencies.iter().any(|(dependency, recorded)| !holds(dependency, recorded)) {
            return None;
        }
        let diagnostics = entry
            .diagnostics
            .into_iter()
            .map(|d| {
                let rule = Rule::from_code_or_name(&d.code).ok()?;
                let fix = d.fix.map(|(safe, message, edits)| {
                    let edits = edits.into_iter().map(|(s, e, c)| Edit::replace(s..e, c)).collect();
                    Fix::new(if safe { Applicability::Safe } else { Applicability::Unsafe }, message, edits)
                });
                Some(Diagnostic {
                    rule,
                    message: d.message,
                    help: d.help,
                    range: d.start..d.end,
                    severity: Severity::parse(&d.severity)?,
                    fix,
                    evidence: d.evidence.into_iter().map(|(text, range)| memlint_python::Fact { text, range: range.map(|(s, e)| s..e) }).collect(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let syntax_errors = entry.syntax_errors.into_iter().map(|(start, end, message)| SyntaxError { start, end, message }).collect();
        Some((diagnostics, syntax_errors))
    }

    pub fn put(&self, key: &str, diagnostics: &[Diagnostic], syntax_errors: &[SyntaxError], dependencies: &[(String, String)]) {
        let entry = Entry {
            diagnostics: diagnostics
                .iter()
                .map(|d| CachedDiagnostic {
                    code: d.rule.code().to_owned(),
                    message: d.message.clone(),
                    help: d.help.clone(),
                    start: d.range.start,
                    end: d.range.end,
                    severity: d.severity.as_str().to_owned(),
                    fix: d.fix.as_ref().map(|f| {
                        (
                            f.applicability == Applicability::Safe,
                            f.message.clone(),
                            f.edits.iter().map(|e| (e.range.start, e.range.end, e.content.clone())).collect(),
                        )
                    }),
                    evidence: d.evidence.iter().map(|f| (f.text.clone(), f.range.as_ref().map(|r| (r.start, r.end)))).collect(),
                })
                .collect(),
            syntax_errors: syntax_errors.iter().map(|e| (e.start, e.end, e.message.clone())).collect(),
            dependencies: dependencies.to_vec(),
        };
        let Ok(bytes) = serde_json::to_vec(&entry) else { return };
        // A failed write only costs a re-lint next time.
        self.writes.write(self.path(key), bytes);
    }

    /// Waits until the entries put so far are written.
    #[cfg(test)]
    fn flush(&self) {
        self.writes.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corrupt_entries() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let settings = LinterSettings::default();
        let source = "import torch\nloader = torch.utils.data.DataLoader(data)\nfor x in loader:\n    model(x)\n    torch.cuda.empty_cache()\n";
        let result = memlint_linter::lint(source, &settings);
        // Findings with evidence, facts with and without a place would both round-trip.
        assert!(result.diagnostics.iter().any(|d| d.evidence.iter().any(|f| f.range.is_some())), "{:?}", result.diagnostics);
        let key = cache.key(source, &settings, true);
        assert!(cache.get(&key, |_, _| false).is_none());
        cache.put(&key, &result.diagnostics, &result.syntax_errors, &[]);
        cache.flush();
        let (diagnostics, errors) = cache.get(&key, |_, _| false).unwrap();
        assert_eq!(diagnostics, result.diagnostics, "findings, fixes and evidence come back as they were");
        // A fact with no place comes back without one.
        let mut placeless = result.diagnostics.clone();
        placeless[0].evidence.push(memlint_python::Fact::plain("a fact with no place"));
        cache.put(&key, &placeless, &result.syntax_errors, &[]);
        cache.flush();
        assert_eq!(cache.get(&key, |_, _| false).unwrap().0, placeless);
        cache.put(&key, &result.diagnostics, &result.syntax_errors, &[]);
        cache.flush();
        assert!(errors.is_empty());
        fs::write(cache.path(&key), b"{ not json").unwrap();
        assert!(cache.get(&key, |_, _| false).is_none(), "a corrupt entry is a miss");
        let mut other = settings.clone();
        other.rules.disable(Rule::EmptyCacheInLoop);
        assert_ne!(cache.key(source, &other, true), key, "settings are part of the key");
        assert_ne!(cache.key(source, &settings, false), key, "reading the project or not is part of the key");
    }

    #[test]
    fn an_entry_is_reused_only_while_its_dependencies_hash_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let settings = LinterSettings::default();
        let source = "from .models import Net\n";
        let key = cache.key(source, &settings, true);
        cache.put(&key, &[], &[], &[("pkg/models.py".to_owned(), "aaaa".to_owned())]);
        cache.flush();
        assert!(cache.get(&key, |m, recorded| m == "pkg/models.py" && recorded == "aaaa").is_some(), "same module: a hit");
        assert!(cache.get(&key, |_, recorded| recorded == "bbbb").is_none(), "a changed module: a miss");
        assert!(cache.get(&key, |_, _| false).is_none(), "a module gone: a miss");
    }

    #[test]
    fn a_rebuild_misses_the_old_builds_entries() {
        assert_eq!(BUILD_ID.len(), 16, "build.rs embeds the identity: {BUILD_ID}");
        let dir = tempfile::tempdir().unwrap();
        let settings = LinterSettings::default();
        let source = "import torch\nfor x in loader:\n    model(x)\n    torch.cuda.empty_cache()\n";
        let result = memlint_linter::lint(source, &settings);
        let before = Cache::open(dir.path()).unwrap();
        before.put(&before.key(source, &settings, true), &result.diagnostics, &result.syntax_errors, &[]);
        drop(before);
        let same = Cache::open(dir.path()).unwrap();
        assert!(same.get(&same.key(source, &settings, true), |_, _| false).is_some(), "the same build hits");
        // The same version rebuilt with other linter sources: another identity.
        let rebuilt = Cache::open_for_build(dir.path(), "0123456789abcdef").unwrap();
        assert!(rebuilt.get(&rebuilt.key(source, &settings, true), |_, _| false).is_none(), "a rebuild misses");
    }
}
