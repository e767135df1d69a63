//! Settings: the client's (`initializationOptions`, `workspace/didChangeConfiguration`)
//! layered over the project's configuration files, found from each document's folder by
//! `memlint_config` exactly as the CLI finds them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memlint_config::{ConfigError, Overrides, Resolver};
use memlint_linter::{LinterSettings, Rule};
use serde::Deserialize;
use serde_json::Value;

/// What the client may set. Every field is optional; unknown fields are ignored so that
/// clients sending their whole settings tree do not break anything.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientSettings {
    #[serde(default, deserialize_with = "lenient")]
    pub select: Option<Vec<String>>,
    #[serde(default, deserialize_with = "lenient")]
    pub ignore: Option<Vec<String>>,
    #[serde(default, alias = "unsafe-fixes", deserialize_with = "lenient")]
    pub unsafe_fixes: Option<bool>,
    #[serde(default, alias = "config", alias = "config-path", deserialize_with = "lenient")]
    pub config_path: Option<String>,
    /// A PyTorch memory snapshot (`torch.cuda.memory._dump_snapshot`) whose measured bytes
    /// hover shows on findings; relative to the first workspace folder. Without it,
    /// `.memlint/snapshot.pickle` is looked for next to the document and in the workspace.
    #[serde(default, deserialize_with = "lenient")]
    pub snapshot: Option<String>,
}

/// A field of the wrong type counts as unset rather than rejecting every other setting.
fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

impl ClientSettings {
    /// Reads `{ "memlint": {...} }` or the bare object; anything else is "no settings".
    pub fn from_value(value: Option<&Value>) -> ClientSettings {
        let Some(value) = value else { return ClientSettings::default() };
        let inner = value.get("memlint").unwrap_or(value);
        if !inner.is_object() {
            return ClientSettings::default();
        }
        serde_json::from_value(inner.clone()).unwrap_or_default()
    }

    /// The CLI-style overrides, and a message per rule name memlint does not know.
    pub fn overrides(&self, roots: &[PathBuf]) -> (Overrides, Vec<String>) {
        let mut problems = Vec::new();
        let mut rules = |names: &Option<Vec<String>>, key: &str| -> Option<Vec<Rule>> {
            names.as_ref().map(|names| {
                names
                    .iter()
                    .filter_map(|n| match Rule::from_code_or_name(n) {
                        Ok(rule) => Some(rule),
                        Err(e) => {
                            problems.push(format!("memlint setting `{key}`: {e}"));
                            None
                        }
                    })
                    .collect()
            })
        };
        let select = rules(&self.select, "select");
        let ignore = rules(&self.ignore, "ignore").unwrap_or_default();
        let config = self.config_path.as_ref().filter(|p| !p.is_empty()).map(|p| {
            let path = PathBuf::from(p);
            // A relative path means relative to the (first) workspace folder.
            match roots.first() {
                Some(root) if path.is_relative() => root.join(path),
                _ => path,
            }
        });
        let overrides = Overrides { select, ignore, unsafe_fixes: self.unsafe_fixes, config, ..Overrides::default() };
        (overrides, problems)
    }
}

/// The settings one document is linted with.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentSettings {
    pub linter: LinterSettings,
    pub unsafe_fixes: bool,
}

/// Resolves settings per document, keeping the last good settings per folder so that a
/// broken configuration file does not change what the user sees until it is fixed.
pub struct SettingsStore {
    client: ClientSettings,
    roots: Vec<PathBuf>,
    resolver: Result<Resolver, ConfigError>,
    last_good: HashMap<PathBuf, Arc<DocumentSettings>>,
    fallback: Arc<DocumentSettings>,
}

impl SettingsStore {
    /// Returns the store and the problems to show the user.
    pub fn new(client: ClientSettings, roots: Vec<PathBuf>) -> (SettingsStore, Vec<String>) {
        let (overrides, mut problems) = client.overrides(&roots);
        let fallback_root = roots.first().cloned().unwrap_or_else(|| PathBuf::from("."));
        let fallback = Arc::new(DocumentSettings {
            linter: memlint_config::Settings::defaults(&fallback_root, &overrides).linter,
            unsafe_fixes: overrides.unsafe_fixes.unwrap_or(false),
        });
        let resolver = Resolver::new(overrides);
        if let Err(e) = &resolver {
            problems.push(describe(e));
        }
        (SettingsStore { client, roots, resolver, last_good: HashMap::new(), fallback }, problems)
    }

    pub fn client(&self) -> &ClientSettings {
        &self.client
    }

    /// A fresh store (configuration files changed, or the client's settings did) that
    /// remembers this one's last good settings.
    pub fn reload(&self, client: ClientSettings) -> (SettingsStore, Vec<String>) {
        let (mut store, problems) = SettingsStore::new(client, self.roots.clone());
        if store.client == self.client {
            store.last_good = self.last_good.clone();
        }
        (store, problems)
    }

    /// The settings for a document at `path` (`None`: not a file, e.g. an untitled
    /// buffer); `Err` carries the message to show, with the settings to use meanwhile.
    pub fn for_path(&mut self, path: Option<&Path>) -> Result<Arc<DocumentSettings>, (String, Arc<DocumentSettings>)> {
        let Some(path) = path else { return Ok(self.fallback.clone()) };
        let folder = path.parent().map(Path::to_owned).unwrap_or_default();
        let resolved = match &self.resolver {
            Ok(resolver) => resolver.settings_for(path),
            Err(e) => Err(e.clone()),
        };
        match resolved {
            Ok(settings) => {
                let result = Arc::new(DocumentSettings {
                    linter: settings.linter_for(path),
                    unsafe_fixes: settings.unsafe_fixes,
                });
                self.last_good.insert(folder, result.clone());
                Ok(result)
            }
            Err(e) => {
                let keep = self.last_good.get(&folder).cloned().unwrap_or_else(|| self.fallback.clone());
                Err((describe(&e), keep))
            }
        }
    }
}

/// One line for `window/showMessage`: the file, the line, what is wrong and what is allowed.
fn describe(e: &ConfigError) -> String {
    let mut message = format!("memlint: {}", e.path.display());
    if let Some(line) = e.line() {
        message.push_str(&format!(":{line}"));
    }
    message.push_str(&format!(": {}", e.message));
    if let Some(help) = &e.help {
        message.push_str(&format!(" ({help})"));
    }
    message.push_str("; the last good settings stay in force");
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_nested_flat_and_wrong_typed_settings() {
        let nested = ClientSettings::from_value(Some(&json!({"memlint": {"select": ["MEM001"], "unsafeFixes": true}})));
        assert_eq!(nested.select, Some(vec!["MEM001".to_owned()]));
        assert_eq!(nested.unsafe_fixes, Some(true));
        let flat = ClientSettings::from_value(Some(&json!({"ignore": ["MEM004"], "configPath": "x.toml"})));
        assert_eq!(flat.ignore, Some(vec!["MEM004".to_owned()]));
        assert_eq!(flat.config_path.as_deref(), Some("x.toml"));
        let wrong = ClientSettings::from_value(Some(&json!({"select": "MEM001", "unsafeFixes": "yes", "ignore": ["MEM002"]})));
        assert_eq!(wrong.select, None);
        assert_eq!(wrong.unsafe_fixes, None);
        assert_eq!(wrong.ignore, Some(vec!["MEM002".to_owned()]));
        assert_eq!(ClientSettings::from_value(Some(&json!(null))), ClientSettings::default());
        assert_eq!(ClientSettings::from_value(Some(&json!([1, 2]))), ClientSettings::default());
    }

    #[test]
    fn unknown_rules_are_reported_and_skipped() {
        let settings = ClientSettings { select: Some(vec!["MEM001".into(), "MEM999".into()]), ..Default::default() };
        let (overrides, problems) = settings.overrides(&[]);
        assert_eq!(overrides.select, Some(vec![Rule::EvalWithoutNoGrad]));
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("MEM999"), "{problems:?}");
    }
}
