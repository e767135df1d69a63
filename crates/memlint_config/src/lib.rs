//! memlint's configuration: `[tool.memlint]` in `pyproject.toml`, or `memlint.toml` /
//! `.memlint.toml`, found from each linted file's folder upward (the closest wins, as in
//! ruff); `--config PATH` overrides discovery and `--isolated` ignores every file.
//!
//! ```toml
//! [tool.memlint]
//! select = ["MEM001", "accumulated-loss-tensor"]   # default: every rule
//! extend-select = []
//! ignore = ["MEM004"]
//! per-file-ignores = { "tests/*" = ["MEM001"] }
//! exclude = ["build", "third_party/**"]             # replaces the defaults
//! extend-exclude = ["generated"]
//! respect-gitignore = true
//! severity = { MEM003 = "error" }
//! unsafe-fixes = false
//! ```
//!
//! Unknown keys and bad values are errors that name the file, the key and what is
//! allowed, with the span in the TOML ([`ConfigError`] is a miette diagnostic).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use globset::{Glob, GlobMatcher, GlobSet, GlobSetBuilder};
use memlint_linter::{LinterSettings, Rule, RuleSelection, Severity};
use serde::Deserialize;
use toml::Spanned;

/// Folders never worth linting (ruff's defaults): caches, virtual environments, builds.
pub const DEFAULT_EXCLUDE: &[&str] = &[
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".memlint_cache", ".svn",
    ".tox", ".venv", ".vscode", "__pypackages__", "_build", "buck-out", "build", "dist",
    "node_modules", "site-packages", "venv", "__pycache__",
];

/// The configuration file names, most specific first.
pub const CONFIG_FILES: &[&str] = &[".memlint.toml", "memlint.toml", "pyproject.toml"];

/// The options as written in a configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Options {
    pub select: Option<Vec<Spanned<String>>>,
    pub extend_select: Option<Vec<Spanned<String>>>,
    pub ignore: Option<Vec<Spanned<String>>>,
    pub per_file_ignores: Option<BTreeMap<Spanned<String>, Vec<Spanned<String>>>>,
    pub exclude: Option<Vec<Spanned<String>>>,
    pub extend_exclude: Option<Vec<Spanned<String>>>,
    pub respect_gitignore: Option<bool>,
    pub severity: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
    pub unsafe_fixes: Option<bool>,
}

#[derive(Deserialize)]
struct PyProject {
    tool: Option<Tool>,
}

#[derive(Deserialize)]
struct Tool {
    memlint: Option<Options>,
}

/// A configuration file that memlint could not use: where, what, and what is allowed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: PathBuf,
    pub message: String,
    pub help: Option<String>,
    /// Byte range in the file, when the problem has a place.
    pub span: Option<std::ops::Range<usize>>,
    source_text: Arc<String>,
    named: Arc<miette::NamedSource<String>>,
}

impl ConfigError {
    fn new(path: &Path, text: &str, message: impl Into<String>, span: Option<std::ops::Range<usize>>, help: Option<String>) -> Self {
        let text = Arc::new(text.to_owned());
        ConfigError {
            path: path.to_owned(),
            message: message.into(),
            help,
            span,
            named: Arc::new(miette::NamedSource::new(path.display().to_string(), text.to_string())),
            source_text: text,
        }
    }

    fn io(path: &Path, error: std::io::Error) -> Self {
        ConfigError::new(path, "", format!("could not read the configuration file: {error}"), None, None)
    }

    /// The 1-based line of the problem, if it has a place.
    pub fn line(&self) -> Option<usize> {
        self.span.as_ref().map(|s| self.source_text[..s.start.min(self.source_text.len())].matches('\n').count() + 1)
    }
}

impl miette::Diagnostic for ConfigError {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new("config-error"))
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.help.as_ref().map(|h| Box::new(h.clone()) as Box<dyn std::fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.span.as_ref().map(|_| &*self.named as &dyn miette::SourceCode)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        let span = self.span.clone()?;
        Some(Box::new(std::iter::once(miette::LabeledSpan::at(span, "here"))))
    }
}

const KEYS: &str = "select, extend-select, ignore, per-file-ignores, exclude, extend-exclude, respect-gitignore, severity, unsafe-fixes";

/// Parses a configuration file's text. `pyproject.toml` without `[tool.memlint]` gives `None`.
pub fn parse_config(path: &Path, text: &str) -> Result<Option<Options>, ConfigError> {
    let is_pyproject = path.file_name().map(|n| n == "pyproject.toml").unwrap_or(false);
    let result = if is_pyproject {
        toml::from_str::<PyProject>(text).map(|p| p.tool.and_then(|t| t.memlint))
    } else {
        toml::from_str::<Options>(text).map(Some)
    };
    result.map_err(|e| {
        let message = e.message().trim().to_owned();
        let help = if message.starts_with("unknown field") {
            Some(format!("the keys memlint knows are: {KEYS}"))
        } else {
            None
        };
        ConfigError::new(path, text, format!("invalid configuration: {message}"), e.span(), help)
    })
}

/// Command-line settings that override the configuration files.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--select`: replaces the file's `select`.
    pub select: Option<Vec<Rule>>,
    /// `--extend-select`
    pub extend_select: Vec<Rule>,
    /// `--ignore`: added to the file's `ignore`.
    pub ignore: Vec<Rule>,
    /// `--unsafe-fixes` / `--no-unsafe-fixes`
    pub unsafe_fixes: Option<bool>,
    /// `--config PATH`: this file, no discovery.
    pub config: Option<PathBuf>,
    /// `--isolated`: no configuration file at all.
    pub isolated: bool,
}

/// Resolved settings for the files under one configuration file.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The configuration file these come from (`None`: defaults).
    pub config_file: Option<PathBuf>,
    /// Where relative patterns are anchored: the configuration file's folder.
    pub root: PathBuf,
    pub linter: LinterSettings,
    pub per_file_ignores: Vec<PerFileIgnore>,
    pub exclude: Vec<String>,
    exclude_set: ExcludeSet,
    pub respect_gitignore: bool,
    pub unsafe_fixes: bool,
}

/// `per-file-ignores` entry.
#[derive(Debug, Clone)]
pub struct PerFileIgnore {
    pub pattern: String,
    pub rules: Vec<Rule>,
    matcher: PathMatcher,
}

/// A glob matched like ruff: against the path relative to the root, and against the
/// file name alone when the pattern has no `/`.
#[derive(Debug, Clone)]
struct PathMatcher {
    absolute: GlobMatcher,
    basename: Option<GlobMatcher>,
}

impl PathMatcher {
    fn new(root: &Path, pattern: &str) -> Result<Self, globset::Error> {
        let anchored = if Path::new(pattern).is_absolute() { PathBuf::from(pattern) } else { root.join(pattern) };
        let absolute = Glob::new(&anchored.to_string_lossy())?.compile_matcher();
        let basename = if pattern.contains('/') { None } else { Some(Glob::new(pattern)?.compile_matcher()) };
        Ok(PathMatcher { absolute, basename })
    }

    fn is_match(&self, path: &Path) -> bool {
        self.absolute.is_match(path)
            || self
                .basename
                .as_ref()
                .map(|b| path.file_name().map(|n| b.is_match(n)).unwrap_or(false))
                .unwrap_or(false)
    }
}

#[derive(Debug, Clone)]
struct ExcludeSet {
    absolute: GlobSet,
    basename: GlobSet,
}

impl Settings {
    /// The defaults, with no configuration file.
    pub fn defaults(root: &Path, overrides: &Overrides) -> Settings {
        build_settings(None, root, Options::default(), overrides, "").expect("the defaults are valid")
    }

    /// The linter settings for one file (after `per-file-ignores`).
    pub fn linter_for(&self, path: &Path) -> LinterSettings {
        let mut linter = self.linter.clone();
        let absolute = absolutize(path);
        for entry in &self.per_file_ignores {
            if entry.matcher.is_match(&absolute) {
                for rule in &entry.rules {
                    linter.rules.disable(*rule);
                }
            }
        }
        linter
    }

    /// Is `path` (a file or folder) excluded by `exclude` / `extend-exclude`?
    pub fn is_excluded(&self, path: &Path) -> bool {
        let absolute = absolutize(path);
        self.exclude_set.absolute.is_match(&absolute)
            || absolute.file_name().map(|n| self.exclude_set.basename.is_match(n)).unwrap_or(false)
    }

    /// A human-readable dump for `--show-settings`.
    pub fn describe(&self, path: &Path) -> String {
        let linter = self.linter_for(path);
        let mut out = String::new();
        out.push_str(&format!("Resolved settings for: {}\n", path.display()));
        out.push_str(&format!(
            "Settings path: {}\n\n",
            self.config_file.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "(defaults)".to_owned())
        ));
        out.push_str("linter.rules.enabled = [\n");
        for rule in linter.rules.iter() {
            out.push_str(&format!("\t{} ({}),\n", rule.code(), rule.name()));
        }
        out.push_str("]\n");
        out.push_str("linter.severity = {\n");
        for rule in Rule::ALL {
            if let Some(s) = self.linter.severity.get(rule) {
                out.push_str(&format!("\t{} = {},\n", rule.code(), s.as_str()));
            }
        }
        out.push_str("}\n");
        out.push_str("per_file_ignores = {\n");
        for entry in &self.per_file_ignores {
            let codes: Vec<&str> = entry.rules.iter().map(|r| r.code()).collect();
            out.push_str(&format!("\t{:?} = [{}],\n", entry.pattern, codes.join(", ")));
        }
        out.push_str("}\n");
        out.push_str(&format!("exclude = {:?}\n", self.exclude));
        out.push_str(&format!("respect_gitignore = {}\n", self.respect_gitignore));
        out.push_str(&format!("unsafe_fixes = {}\n", self.unsafe_fixes));
        out.push_str(&format!("project_root = {}\n", self.root.display()));
        out
    }
}

fn absolutize(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_owned())
    };
    // Drop `.` components so messages say `/repo/memlint.toml`, not `/repo/./memlint.toml`.
    joined.components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect()
}

fn parse_rule_list(path: &Path, text: &str, key: &str, list: &[Spanned<String>]) -> Result<Vec<Rule>, ConfigError> {
    list.iter()
        .map(|item| {
            Rule::from_code_or_name(item.get_ref()).map_err(|e| {
                ConfigError::new(
                    path,
                    text,
                    format!("`{key}`: {e}"),
                    Some(item.span()),
                    Some(format!(
                        "rules are named by code or name: {}",
                        Rule::ALL.iter().map(|r| format!("{} ({})", r.code(), r.name())).collect::<Vec<_>>().join(", ")
                    )),
                )
            })
        })
        .collect()
}

fn build_settings(config_file: Option<&Path>, root: &Path, options: Options, overrides: &Overrides, text: &str) -> Result<Settings, ConfigError> {
    let path = config_file.unwrap_or(Path::new("<defaults>"));
    let select = match (&overrides.select, &options.select) {
        (Some(cli), _) => cli.clone(),
        (None, Some(list)) => parse_rule_list(path, text, "select", list)?,
        (None, None) => Vec::new(),
    };
    let mut extend_select = match &options.extend_select {
        Some(list) => parse_rule_list(path, text, "extend-select", list)?,
        None => Vec::new(),
    };
    extend_select.extend(overrides.extend_select.iter().copied());
    let mut ignore = match &options.ignore {
        Some(list) => parse_rule_list(path, text, "ignore", list)?,
        None => Vec::new(),
    };
    ignore.extend(overrides.ignore.iter().copied());
    let explicitly_selected = overrides.select.is_some() || options.select.is_some();
    let mut rules = if explicitly_selected && select.is_empty() {
        RuleSelection::none()
    } else {
        RuleSelection::from_select_ignore(&select, &[])
    };
    for rule in extend_select {
        rules.enable(rule);
    }
    for rule in ignore {
        rules.disable(rule);
    }

    let mut severity = HashMap::new();
    for (key, value) in options.severity.iter().flatten() {
        let rule = parse_rule_list(path, text, "severity", std::slice::from_ref(key))?[0];
        let level = Severity::parse(value.get_ref()).ok_or_else(|| {
            ConfigError::new(
                path,
                text,
                format!("`severity.{}`: unknown severity `{}`", key.get_ref(), value.get_ref()),
                Some(value.span()),
                Some("allowed: \"error\", \"warning\", \"info\"".to_owned()),
            )
        })?;
        severity.insert(rule, level);
    }

    let mut per_file_ignores = Vec::new();
    for (pattern, list) in options.per_file_ignores.iter().flatten() {
        let rules = parse_rule_list(path, text, "per-file-ignores", list)?;
        let matcher = PathMatcher::new(root, pattern.get_ref()).map_err(|e| {
            ConfigError::new(path, text, format!("`per-file-ignores`: invalid glob `{}`: {e}", pattern.get_ref()), Some(pattern.span()), None)
        })?;
        per_file_ignores.push(PerFileIgnore { pattern: pattern.get_ref().clone(), rules, matcher });
    }

    let mut exclude: Vec<Spanned<String>> = match options.exclude {
        Some(list) => list,
        None => DEFAULT_EXCLUDE.iter().map(|e| Spanned::new(0..0, (*e).to_owned())).collect(),
    };
    exclude.extend(options.extend_exclude.unwrap_or_default());
    let mut absolute = GlobSetBuilder::new();
    let mut basename = GlobSetBuilder::new();
    for pattern in &exclude {
        let invalid = |e: globset::Error| {
            ConfigError::new(path, text, format!("`exclude`: invalid glob `{}`: {e}", pattern.get_ref()), Some(pattern.span()), None)
        };
        let p = pattern.get_ref();
        let anchored = if Path::new(p).is_absolute() { PathBuf::from(p) } else { root.join(p) };
        absolute.add(Glob::new(&anchored.to_string_lossy()).map_err(invalid)?);
        if !p.contains('/') {
            basename.add(Glob::new(p).map_err(invalid)?);
        }
    }
    let exclude_set = ExcludeSet {
        absolute: absolute.build().map_err(|e| ConfigError::new(path, text, format!("`exclude`: {e}"), None, None))?,
        basename: basename.build().map_err(|e| ConfigError::new(path, text, format!("`exclude`: {e}"), None, None))?,
    };

    Ok(Settings {
        config_file: config_file.map(Path::to_owned),
        root: root.to_owned(),
        linter: LinterSettings { rules, severity },
        per_file_ignores,
        exclude: exclude.into_iter().map(|s| s.into_inner()).collect(),
        exclude_set,
        respect_gitignore: options.respect_gitignore.unwrap_or(true),
        unsafe_fixes: overrides.unsafe_fixes.or(options.unsafe_fixes).unwrap_or(false),
    })
}

/// Loads one configuration file. `Ok(None)`: a `pyproject.toml` without `[tool.memlint]`.
pub fn load_file(path: &Path, overrides: &Overrides) -> Result<Option<Settings>, ConfigError> {
    let text = fs::read_to_string(path).map_err(|e| ConfigError::io(path, e))?;
    let Some(options) = parse_config(path, &text)? else { return Ok(None) };
    let root = absolutize(path.parent().unwrap_or(Path::new(".")));
    build_settings(Some(path), &root, options, overrides, &text).map(Some)
}

/// Finds and caches the settings for each folder. Safe to share between threads.
pub struct Resolver {
    overrides: Overrides,
    explicit: Option<Arc<Settings>>,
    defaults: Arc<Settings>,
    by_dir: Mutex<HashMap<PathBuf, Result<Arc<Settings>, ConfigError>>>,
}

impl Resolver {
    pub fn new(overrides: Overrides) -> Result<Resolver, ConfigError> {
        let cwd = absolutize(Path::new("."));
        let explicit = match (&overrides.config, overrides.isolated) {
            (Some(path), false) => {
                let settings = load_file(path, &overrides)?.unwrap_or_else(|| Settings {
                    config_file: Some(path.clone()),
                    ..Settings::defaults(&absolutize(path.parent().unwrap_or(Path::new("."))), &overrides)
                });
                Some(Arc::new(settings))
            }
            _ => None,
        };
        let defaults = Arc::new(Settings::defaults(&cwd, &overrides));
        Ok(Resolver { overrides, explicit, defaults, by_dir: Mutex::new(HashMap::new()) })
    }

    /// The settings that apply to `path` (a file or a folder).
    pub fn settings_for(&self, path: &Path) -> Result<Arc<Settings>, ConfigError> {
        if let Some(explicit) = &self.explicit {
            return Ok(explicit.clone());
        }
        if self.overrides.isolated {
            return Ok(self.defaults.clone());
        }
        let absolute = absolutize(path);
        let dir = if absolute.is_dir() { absolute } else { absolute.parent().map(Path::to_owned).unwrap_or(absolute) };
        self.settings_for_dir(&dir)
    }

    fn settings_for_dir(&self, dir: &Path) -> Result<Arc<Settings>, ConfigError> {
        if let Some(found) = self.by_dir.lock().expect("no panics while holding the lock").get(dir) {
            return found.clone();
        }
        let mut found = None;
        for name in CONFIG_FILES {
            let candidate = dir.join(name);
            if candidate.is_file() {
                match load_file(&candidate, &self.overrides) {
                    Ok(Some(settings)) => {
                        found = Some(Ok(Arc::new(settings)));
                        break;
                    }
                    Ok(None) => continue,
                    Err(e) => {
                        found = Some(Err(e));
                        break;
                    }
                }
            }
        }
        let result = match found {
            Some(result) => result,
            None => match dir.parent() {
                Some(parent) => self.settings_for_dir(parent),
                None => Ok(self.defaults.clone()),
            },
        };
        self.by_dir.lock().expect("no panics while holding the lock").insert(dir.to_owned(), result.clone());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn closest_config_wins_and_pyproject_without_section_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "pyproject.toml", "[tool.memlint]\nignore = [\"MEM004\"]\n");
        write(dir.path(), "sub/pyproject.toml", "[project]\nname = \"x\"\n");
        write(dir.path(), "sub/inner/memlint.toml", "select = [\"MEM001\"]\n");
        let resolver = Resolver::new(Overrides::default()).unwrap();
        let top = resolver.settings_for(&dir.path().join("a.py")).unwrap();
        assert!(!top.linter.rules.is_enabled(Rule::EmptyCacheInLoop));
        let sub = resolver.settings_for(&dir.path().join("sub/b.py")).unwrap();
        assert_eq!(sub.config_file.as_deref(), Some(dir.path().join("pyproject.toml").as_path()));
        let inner = resolver.settings_for(&dir.path().join("sub/inner/c.py")).unwrap();
        assert_eq!(inner.linter.rules.iter().collect::<Vec<_>>(), vec![Rule::EvalWithoutNoGrad]);
    }

    #[test]
    fn dot_memlint_toml_beats_pyproject_in_the_same_folder() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "pyproject.toml", "[tool.memlint]\nignore = [\"MEM004\"]\n");
        write(dir.path(), ".memlint.toml", "ignore = [\"MEM001\"]\n");
        let resolver = Resolver::new(Overrides::default()).unwrap();
        let s = resolver.settings_for(&dir.path().join("a.py")).unwrap();
        assert!(!s.linter.rules.is_enabled(Rule::EvalWithoutNoGrad));
        assert!(s.linter.rules.is_enabled(Rule::EmptyCacheInLoop));
    }

    #[test]
    fn unknown_key_names_file_key_and_allowed_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "memlint.toml", "select = [\"MEM001\"]\nignores = [\"MEM002\"]\n");
        let err = load_file(&path, &Overrides::default()).unwrap_err();
        assert!(err.message.contains("unknown field `ignores`"), "{}", err.message);
        assert_eq!(err.line(), Some(2));
        assert!(err.help.unwrap().contains("per-file-ignores"));
        assert_eq!(err.path, path);
    }

    #[test]
    fn unknown_rule_and_bad_values_are_errors_with_spans() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "memlint.toml", "select = [\"MEM001\", \"MEM999\"]\n");
        let err = load_file(&path, &Overrides::default()).unwrap_err();
        assert!(err.message.contains("`select`: unknown rule `MEM999`"), "{}", err.message);
        assert_eq!(err.span, Some(20..28));
        let path = write(dir.path(), "memlint.toml", "respect-gitignore = \"yes\"\n");
        let err = load_file(&path, &Overrides::default()).unwrap_err();
        assert!(err.message.contains("invalid type"), "{}", err.message);
        let path = write(dir.path(), "memlint.toml", "[severity]\nMEM001 = \"fatal\"\n");
        let err = load_file(&path, &Overrides::default()).unwrap_err();
        assert!(err.message.contains("unknown severity `fatal`"), "{}", err.message);
        assert!(err.help.unwrap().contains("\"warning\""));
        let path = write(dir.path(), "pyproject.toml", "[tool.memlint]\nselect = 3\n");
        let err = load_file(&path, &Overrides::default()).unwrap_err();
        assert!(err.message.contains("invalid type"), "{}", err.message);
        assert_eq!(err.line(), Some(2));
    }

    #[test]
    fn per_file_ignores_and_exclude_match_like_ruff() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "memlint.toml",
            "extend-exclude = [\"generated\", \"vendor/**\"]\n[per-file-ignores]\n\"tests/*\" = [\"MEM001\"]\n\"conftest.py\" = [\"empty-cache-in-loop\"]\n",
        );
        let resolver = Resolver::new(Overrides::default()).unwrap();
        let s = resolver.settings_for(&dir.path().join("x.py")).unwrap();
        assert!(!s.linter_for(&dir.path().join("tests/test_a.py")).rules.is_enabled(Rule::EvalWithoutNoGrad));
        assert!(s.linter_for(&dir.path().join("src/a.py")).rules.is_enabled(Rule::EvalWithoutNoGrad));
        assert!(!s.linter_for(&dir.path().join("deep/conftest.py")).rules.is_enabled(Rule::EmptyCacheInLoop));
        assert!(s.is_excluded(&dir.path().join("generated")));
        assert!(s.is_excluded(&dir.path().join("a/generated")));
        assert!(s.is_excluded(&dir.path().join("vendor/x/y.py")));
        assert!(s.is_excluded(&dir.path().join(".venv")));
        assert!(!s.is_excluded(&dir.path().join("src/model.py")));
    }

    #[test]
    fn overrides_select_ignore_isolated_and_config() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "memlint.toml", "select = [\"MEM001\", \"MEM002\"]\nunsafe-fixes = true\n");
        let other = write(dir.path(), "other.toml", "ignore = [\"MEM003\"]\n");
        let overrides = Overrides { ignore: vec![Rule::AccumulatedLossTensor], ..Default::default() };
        let s = Resolver::new(overrides).unwrap().settings_for(&dir.path().join("a.py")).unwrap();
        assert_eq!(s.linter.rules.iter().collect::<Vec<_>>(), vec![Rule::EvalWithoutNoGrad]);
        assert!(s.unsafe_fixes);
        let isolated = Overrides { isolated: true, ..Default::default() };
        let s = Resolver::new(isolated).unwrap().settings_for(&dir.path().join("a.py")).unwrap();
        assert_eq!(s.linter.rules.iter().count(), Rule::ALL.len());
        assert!(s.config_file.is_none());
        let explicit = Overrides { config: Some(other.clone()), ..Default::default() };
        let s = Resolver::new(explicit).unwrap().settings_for(&dir.path().join("a.py")).unwrap();
        assert!(!s.linter.rules.is_enabled(Rule::HalfWithoutGradScaler));
        assert_eq!(s.config_file, Some(other));
    }
}
