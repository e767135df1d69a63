//! The results cache (like ruff's `.ruff_cache`): the findings of a file whose text and
//! settings have not changed are reused instead of parsing it again.
//!
//! Each entry is keyed by a hash of memlint's version, its build identity (a hash of the
//! linter's sources taken at compile time, `build.rs`: a rebuild with a changed rule
//! misses every old entry), the settings, whether the project around the file was read,
//! and the text. The entries live in one pack per build (`results-<build>.pack`, postcard),
//! read once when the cache opens and written once when it is dropped, as ruff keeps one
//! file per package: one file per entry cost a first run with the cache on a third more
//! than `--no-cache` on ext4 after a folder of old entries was deleted (the file system
//! searching for free inodes), and a warm run read thousands of files.
//!
//! The pack is written whole to a temporary file and renamed over the old one: a
//! concurrent run never reads half a pack, and what another run added since this one
//! opened is read again and kept. A pack that does not decode (corrupt, or from another
//! version) is an empty cache, written anew. An entry not used for a week is dropped when
//! the pack is written; so is the pack of another build unused for a week, when a cache
//! opens.
//!
//! A file's findings can also depend on the project's modules it imports (a class in a
//! sibling module that became a `torch.nn.Module`, a caller elsewhere that now runs under
//! `no_grad`): each entry lists the modules its lint read with their content hashes, and
//! is reused only while every one of them hashes the same.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use memlint_linter::{Applicability, Diagnostic, Edit, Fix, LinterSettings, Rule, Severity, SyntaxError};
use serde::{Deserialize, Serialize};

pub struct Cache {
    /// The folder of this version (`<cache dir>/<version>`).
    dir: PathBuf,
    /// The build identity the entries belong to.
    build: String,
    /// The day (since the Unix epoch) this run counts as today.
    today: u32,
    /// The entries of the pack as the cache opened it, each marked when a lint used it.
    stored: HashMap<String, (Packed, AtomicBool)>,
    /// The entries this run made.
    added: Mutex<HashMap<String, Entry>>,
}

/// This binary's build identity (see `build.rs`).
pub const BUILD_ID: &str = env!("MEMLINT_BUILD_ID");

/// An entry unused for this many days is dropped when the pack is written; a pack of
/// another build unused that long is deleted when a cache opens (as the summaries of
/// another build are).
const KEEP_DAYS: u32 = (memlint_project::STALE_BUILD_AFTER.as_secs() / 86_400) as u32;

/// The pack's layout; a pack of another layout is an empty cache.
const PACK_FORMAT: u32 = 1;

#[derive(Serialize, Deserialize, Default)]
struct Pack {
    format: u32,
    entries: Vec<(String, Packed)>,
}

#[derive(Serialize, Deserialize, Clone)]
struct Packed {
    /// The day it was last made or used.
    day: u32,
    entry: Entry,
}

#[derive(Serialize, Deserialize, Clone)]
struct Entry {
    diagnostics: Vec<CachedDiagnostic>,
    syntax_errors: Vec<(usize, usize, String)>,
    /// The project modules the lint read: (path, content hash).
    dependencies: Vec<(String, String)>,
}

#[derive(Serialize, Deserialize, Clone)]
struct CachedDiagnostic {
    code: String,
    message: String,
    help: Option<String>,
    start: usize,
    end: usize,
    severity: String,
    fix: Option<(bool, String, Vec<(usize, usize, String)>)>,
    /// The facts the finding rests on: (text, byte range).
    evidence: Vec<(String, Option<(usize, usize)>)>,
}

fn today() -> u32 {
    let since_epoch = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    (since_epoch.as_secs() / 86_400) as u32
}

impl Cache {
    /// Opens (creating) the cache folder for this build; `None` when it cannot be created
    /// (memlint then simply lints everything).
    pub fn open(dir: &Path) -> Option<Cache> {
        Cache::open_for_build(dir, BUILD_ID, today())
    }

    /// Opens the cache for the entries of build `build`, on day `today`.
    fn open_for_build(dir: &Path, build: &str, today: u32) -> Option<Cache> {
        let dir = dir.join(env!("CARGO_PKG_VERSION"));
        fs::create_dir_all(&dir).ok()?;
        let gitignore = dir.parent()?.join(".gitignore");
        if !gitignore.exists() {
            let _ = fs::write(gitignore, "# Automatically created by memlint.\n*\n");
        }
        let pack = Cache::pack_path_in(&dir, build);
        remove_stale(&dir, &pack);
        let stored = read_pack(&pack).into_iter().map(|(key, packed)| (key, (packed, AtomicBool::new(false)))).collect();
        Some(Cache { dir, build: build.to_owned(), today, stored, added: Mutex::new(HashMap::new()) })
    }

    fn pack_path_in(dir: &Path, build: &str) -> PathBuf {
        dir.join(format!("results-{build}.pack"))
    }

    fn pack_path(&self) -> PathBuf {
        Cache::pack_path_in(&self.dir, &self.build)
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

    /// The entry of `key`, when every dependency still has the value recorded with it
    /// (`holds(dependency, recorded)`: a module's content hash, or a question of who calls
    /// a function, as `Project::dependency_holds` decides).
    pub fn get(&self, key: &str, holds: impl Fn(&str, &str) -> bool) -> Option<(Vec<Diagnostic>, Vec<SyntaxError>)> {
        let still_holds = |entry: &Entry| entry.dependencies.iter().all(|(dependency, recorded)| holds(dependency, recorded));
        // Made this run: two files of the same text and settings share an entry.
        let added = lock(&self.added).get(key).cloned();
        let entry = match added {
            Some(entry) if still_holds(&entry) => entry,
            Some(_) => return None,
            None => {
                let (packed, used) = self.stored.get(key)?;
                if !still_holds(&packed.entry) {
                    return None;
                }
                used.store(true, Ordering::Relaxed);
                packed.entry.clone()
            }
        };
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
        lock(&self.added).insert(key.to_owned(), entry);
    }

    /// Writes the pack when this run made an entry, used one not used yet today, or holds
    /// one to drop: what another run wrote since this one opened, then this run's entries
    /// (today's), less those unused for [`KEEP_DAYS`]. A failed write only costs re-lints
    /// next time. Dropping the cache calls this.
    fn persist(&mut self) {
        let added = std::mem::take(self.added.get_mut().unwrap_or_else(|e| e.into_inner()));
        let stored = std::mem::take(&mut self.stored);
        let fresh = |day: u32| day + KEEP_DAYS >= self.today;
        let changed = !added.is_empty()
            || stored.values().any(|(packed, used)| (used.load(Ordering::Relaxed) && packed.day < self.today) || !fresh(packed.day));
        if !changed {
            return;
        }
        let path = self.pack_path();
        let mut entries: HashMap<String, Packed> = read_pack(&path).into_iter().collect();
        for (key, (packed, used)) in stored {
            let day = if used.into_inner() { self.today } else { packed.day };
            let newer = entries.get(&key).map_or(true, |on_disk| on_disk.day <= day);
            if newer {
                entries.insert(key, Packed { day, entry: packed.entry });
            }
        }
        for (key, entry) in added {
            entries.insert(key, Packed { day: self.today, entry });
        }
        let mut entries: Vec<(String, Packed)> = entries.into_iter().filter(|(_, packed)| fresh(packed.day)).collect();
        // In key order: the same entries give the same bytes.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let Ok(bytes) = postcard::to_stdvec(&Pack { format: PACK_FORMAT, entries }) else { return };
        let _ = memlint_project::write_atomically(&path, &bytes);
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.persist();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The entries of the pack at `path`; none when it is missing or does not decode.
fn read_pack(path: &Path) -> Vec<(String, Packed)> {
    let Ok(bytes) = fs::read(path) else { return Vec::new() };
    match postcard::from_bytes::<Pack>(&bytes) {
        Ok(pack) if pack.format == PACK_FORMAT => pack.entries,
        _ => Vec::new(),
    }
}

/// Deletes, in the version folder `dir`, the packs of other builds unused for
/// [`KEEP_DAYS`], and the folders of entries that earlier versions of memlint wrote one
/// file each (named by two hex digits). What it cannot read or delete is left as it is.
fn remove_stale(dir: &Path, current: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() && name.len() == 2 && name.chars().all(|c| c.is_ascii_hexdigit()) {
            let _ = fs::remove_dir_all(&path);
        } else if kind.is_file() && name.starts_with("results-") && name.ends_with(".pack") && path != current {
            let stale = entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > memlint_project::STALE_BUILD_AFTER));
            if stale {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "import torch\nloader = torch.utils.data.DataLoader(data)\nfor x in loader:\n    model(x)\n    torch.cuda.empty_cache()\n";
    const DAY: u32 = 20_000;

    fn open_on(dir: &Path, today: u32) -> Cache {
        Cache::open_for_build(dir, BUILD_ID, today).unwrap()
    }

    /// Puts an entry with no findings for `program` (and the given dependencies).
    fn put_empty(cache: &Cache, program: &str, dependencies: &[(String, String)]) -> String {
        let key = cache.key(program, &LinterSettings::default(), true);
        cache.put(&key, &[], &[], dependencies);
        key
    }

    fn hit(cache: &Cache, key: &str) -> bool {
        cache.get(key, |_, _| false).is_some()
    }

    /// The names in the version folder.
    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir.join(env!("CARGO_PKG_VERSION"))).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn findings_fixes_and_evidence_come_back_from_the_pack() {
        let dir = tempfile::tempdir().unwrap();
        let settings = LinterSettings::default();
        let result = memlint_linter::lint(SOURCE, &settings);
        // Findings with evidence, facts with and without a place would both round-trip.
        assert!(result.diagnostics.iter().any(|d| d.evidence.iter().any(|f| f.range.is_some())), "{:?}", result.diagnostics);
        let mut placeless = result.diagnostics.clone();
        placeless[0].evidence.push(memlint_python::Fact::plain("a fact with no place"));
        let cache = Cache::open(dir.path()).unwrap();
        let key = cache.key(SOURCE, &settings, true);
        assert!(!hit(&cache, &key));
        cache.put(&key, &placeless, &result.syntax_errors, &[]);
        assert_eq!(cache.get(&key, |_, _| false).unwrap().0, placeless, "an entry made this run serves the run");
        drop(cache);
        let cache = Cache::open(dir.path()).unwrap();
        let (diagnostics, errors) = cache.get(&key, |_, _| false).unwrap();
        assert_eq!(diagnostics, placeless, "findings, fixes and evidence come back as they were");
        assert!(errors.is_empty());
        let mut other = settings.clone();
        other.rules.disable(Rule::EmptyCacheInLoop);
        assert_ne!(cache.key(SOURCE, &other, true), key, "settings are part of the key");
        assert_ne!(cache.key(SOURCE, &settings, false), key, "reading the project or not is part of the key");
    }

    #[test]
    fn a_corrupt_pack_is_an_empty_cache_and_is_written_anew() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let key = put_empty(&cache, "x = 1\n", &[]);
        let pack = cache.pack_path();
        drop(cache);
        fs::write(&pack, b"\x00garbage").unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        assert!(!hit(&cache, &key), "a pack that does not decode holds nothing");
        put_empty(&cache, "x = 1\n", &[]);
        drop(cache);
        assert!(hit(&Cache::open(dir.path()).unwrap(), &key));
    }

    #[test]
    fn an_entry_is_reused_only_while_its_dependencies_hash_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let key = put_empty(&cache, "from .models import Net\n", &[("pkg/models.py".to_owned(), "aaaa".to_owned())]);
        drop(cache);
        let cache = Cache::open(dir.path()).unwrap();
        assert!(cache.get(&key, |m, recorded| m == "pkg/models.py" && recorded == "aaaa").is_some(), "same module: a hit");
        assert!(cache.get(&key, |_, recorded| recorded == "bbbb").is_none(), "a changed module: a miss");
        assert!(cache.get(&key, |_, _| false).is_none(), "a module gone: a miss");
    }

    #[test]
    fn a_rebuild_misses_the_old_builds_entries() {
        assert_eq!(BUILD_ID.len(), 16, "build.rs embeds the identity: {BUILD_ID}");
        let dir = tempfile::tempdir().unwrap();
        let before = Cache::open(dir.path()).unwrap();
        let key = put_empty(&before, SOURCE, &[]);
        drop(before);
        let same = Cache::open(dir.path()).unwrap();
        assert!(hit(&same, &key), "the same build hits");
        // The same version rebuilt with other linter sources: another identity.
        let rebuilt = Cache::open_for_build(dir.path(), "0123456789abcdef", today()).unwrap();
        assert!(!hit(&rebuilt, &rebuilt.key(SOURCE, &LinterSettings::default(), true)), "a rebuild misses");
    }

    #[test]
    fn entries_unused_for_a_week_are_dropped_and_used_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = open_on(dir.path(), DAY);
        let (used, unused) = (put_empty(&cache, "a = 1\n", &[]), put_empty(&cache, "b = 1\n", &[]));
        drop(cache);
        let cache = open_on(dir.path(), DAY + 5);
        assert!(hit(&cache, &used));
        drop(cache);
        // Day 9: the unused entry is 9 days old, the used one 4.
        let cache = open_on(dir.path(), DAY + 9);
        drop(cache);
        let cache = open_on(dir.path(), DAY + 9);
        assert!(hit(&cache, &used), "used on day 5: kept");
        assert!(!hit(&cache, &unused), "unused since day 0: dropped");
    }

    #[test]
    fn two_runs_writing_at_once_keep_each_others_entries() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (Cache::open(dir.path()).unwrap(), Cache::open(dir.path()).unwrap());
        let a = put_empty(&first, "a = 1\n", &[]);
        let b = put_empty(&second, "b = 1\n", &[]);
        drop(first);
        drop(second);
        let cache = Cache::open(dir.path()).unwrap();
        assert!(hit(&cache, &a) && hit(&cache, &b));
        drop(cache);
        assert_eq!(files_in(dir.path()), vec![format!("results-{BUILD_ID}.pack")], "one pack, no temporary file left");
        // Made as any file is (the umask decides), not private as a `tempfile` is.
        let pack = cache_pack(dir.path());
        let sibling = dir.path().join("sibling");
        fs::write(&sibling, b"").unwrap();
        assert_eq!(fs::metadata(pack).unwrap().permissions(), fs::metadata(sibling).unwrap().permissions());
    }

    fn cache_pack(dir: &Path) -> PathBuf {
        Cache::pack_path_in(&dir.join(env!("CARGO_PKG_VERSION")), BUILD_ID)
    }

    #[test]
    fn a_run_that_changes_nothing_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let key = put_empty(&cache, "a = 1\n", &[]);
        let pack = cache.pack_path();
        drop(cache);
        // Used again the day it was made: nothing to write (the pack's removal shows it).
        let cache = Cache::open(dir.path()).unwrap();
        assert!(hit(&cache, &key));
        fs::remove_file(&pack).unwrap();
        drop(cache);
        assert!(!pack.exists());
    }

    #[test]
    fn opening_deletes_old_single_entry_folders_and_other_builds_stale_packs() {
        let dir = tempfile::tempdir().unwrap();
        let version = dir.path().join(env!("CARGO_PKG_VERSION"));
        fs::create_dir_all(version.join("ab")).unwrap();
        fs::write(version.join("ab").join("abcd.json"), b"{}").unwrap();
        fs::create_dir_all(version.join("summaries")).unwrap();
        for name in ["results-0000000000000000.pack", "results-1111111111111111.pack"] {
            fs::write(version.join(name), b"").unwrap();
        }
        let month_ago = SystemTime::now() - std::time::Duration::from_secs(30 * 86_400);
        fs::File::options().write(true).open(version.join("results-0000000000000000.pack")).unwrap().set_modified(month_ago).unwrap();
        drop(Cache::open(dir.path()).unwrap());
        assert_eq!(files_in(dir.path()), vec!["results-1111111111111111.pack", "summaries"]);
    }
}
