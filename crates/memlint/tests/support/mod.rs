//! Helpers shared by the CLI's integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The SARIF 2.1.0 JSON schema, as shipped by the `serde-sarif` crate (a dependency of
/// memlint, so cargo has already downloaded it from crates.io). Its folder is found through
/// `cargo metadata`, never outside cargo's own package cache: a clone alone has everything
/// the test needs.
pub fn sarif_schema() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let out = Command::new(&cargo)
        // Only the host's packages: cargo has downloaded those to build the tests, so no
        // network is needed (other platforms' crates may never have been fetched).
        .args(["metadata", "--format-version", "1", "--locked", "--offline", "--filter-platform", host_triple(), "--manifest-path"])
        .arg(&manifest)
        .output()
        .unwrap_or_else(|e| panic!("{cargo} metadata: {e}"));
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let package = metadata["packages"]
        .as_array()
        .and_then(|packages| packages.iter().find(|p| p["name"] == "serde-sarif"))
        .expect("serde-sarif among memlint's dependencies");
    let schema_path = PathBuf::from(package["manifest_path"].as_str().unwrap()).with_file_name("src").join("schema.json");
    let text = std::fs::read_to_string(&schema_path).unwrap_or_else(|e| panic!("{}: {e}", schema_path.display()));
    // The crate's copy predates the OASIS errata (errata01), which corrected the language
    // tag's pattern: the old one is not a valid regular expression, so a validator refuses
    // the whole schema. The corrected pattern is the errata's, character for character.
    const OLD_LANGUAGE_PATTERN: &str = r#""^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$""#;
    const ERRATA_LANGUAGE_PATTERN: &str = r#""^[a-zA-Z]{2}(-[a-zA-Z]{2})?$""#;
    let text = text.replace(OLD_LANGUAGE_PATTERN, ERRATA_LANGUAGE_PATTERN);
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(
        schema["title"].as_str().is_some_and(|t| t.contains("SARIF") && t.contains("2.1.0")),
        "{} is not the SARIF 2.1.0 schema",
        schema_path.display()
    );
    schema
}

/// The triple of the machine the tests run on (rustc's host, which is cargo's default target).
fn host_triple() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        let out = Command::new(&rustc).arg("-vV").output().unwrap_or_else(|e| panic!("{rustc} -vV: {e}"));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("host: "))
            .expect("rustc -vV names the host")
            .trim()
            .to_string()
    })
}
