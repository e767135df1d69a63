//! Every rule documents itself in ruff's sections, in its own source file.

use memlint_linter::Rule;

#[test]
fn every_rule_has_the_documentation_sections() {
    for rule in Rule::ALL {
        let doc = rule.doc();
        for section in ["What it does", "Why is this bad?", "Example"] {
            let body = doc.section(section).unwrap_or_default();
            assert!(!body.is_empty(), "{} ({}) has no `## {section}` section", rule.code(), rule.name());
        }
        assert!(doc.markdown.contains("Use instead:"), "{} has no `Use instead:` example", rule.code());
        assert!(
            doc.markdown.matches("```python").count() >= 2,
            "{} needs a python example and its fix",
            rule.code()
        );
        if rule.fixable() {
            assert!(
                doc.section("Fix safety").map(|s| !s.is_empty()).unwrap_or(false),
                "{} has a fix but no `## Fix safety` section",
                rule.code()
            );
        }
        assert!(!rule.summary().is_empty());
    }
}

#[test]
fn codes_and_names_are_unique_and_well_formed() {
    let mut codes: Vec<&str> = Rule::ALL.iter().map(|r| r.code()).collect();
    let mut names: Vec<&str> = Rule::ALL.iter().map(|r| r.name()).collect();
    for (code, name) in codes.iter().zip(&names) {
        assert!(code.len() == 6 && code.starts_with("MEM") && code[3..].chars().all(|c| c.is_ascii_digit()), "{code}");
        assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{name}");
    }
    codes.sort();
    codes.dedup();
    names.sort();
    names.dedup();
    assert_eq!(codes.len(), Rule::ALL.len());
    assert_eq!(names.len(), Rule::ALL.len());
}

/// The public contract: these codes keep these names forever.
#[test]
fn codes_are_never_renumbered() {
    let expected = [
        ("MEM001", "eval-without-no-grad"),
        ("MEM002", "accumulated-loss-tensor"),
        ("MEM003", "half-without-grad-scaler"),
        ("MEM004", "empty-cache-in-loop"),
        ("MEM005", "retain-graph-in-loop"),
        ("MEM006", "gpu-tensors-collected"),
        ("MEM007", "data-parallel"),
        ("MEM008", "torch-load-without-map-location"),
        ("MEM009", "zero-grad-keeps-memory"),
        ("MEM010", "deprecated-cuda-amp"),
        ("MEM011", "accumulation-without-loss-division"),
        ("MEM012", "frozen-network-tracks-grad"),
        ("MEM013", "unused-noqa"),
    ];
    for (code, name) in expected {
        let rule = Rule::from_code_or_name(code).unwrap();
        assert_eq!(rule.name(), name);
        assert_eq!(Rule::from_code_or_name(name).unwrap(), rule);
    }
}

/// `docs/rules/<name>.md` (the pages `memlint rule <name>` prints, kept for reading in
/// the repository) is generated from the rule files. Regenerate with `MEMLINT_UPDATE_DOCS=1 cargo test -p memlint_linter --test docs`.
#[test]
fn published_rule_pages_match_the_rule_files() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/rules");
    let update = std::env::var_os("MEMLINT_UPDATE_DOCS").is_some();
    if update {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut index = String::from("# memlint rules\n\n| Code | Name | Summary |\n|------|------|---------|\n");
    for rule in Rule::ALL {
        let path = dir.join(format!("{}.md", rule.name()));
        let expected = rule.doc().render();
        index.push_str(&format!("| {} | [`{}`]({}.md) | {} |\n", rule.code(), rule.name(), rule.name(), rule.summary()));
        if update {
            std::fs::write(&path, &expected).unwrap();
            continue;
        }
        let actual = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("{} is missing; run MEMLINT_UPDATE_DOCS=1 cargo test -p memlint_linter --test docs", path.display()));
        assert_eq!(actual, expected, "{} is stale; run MEMLINT_UPDATE_DOCS=1 cargo test -p memlint_linter --test docs", path.display());
    }
    let index_path = dir.join("README.md");
    if update {
        std::fs::write(&index_path, &index).unwrap();
    } else {
        assert_eq!(std::fs::read_to_string(&index_path).unwrap_or_default(), index, "docs/rules/README.md is stale");
    }
}

/// The project README's rule table lists the registry's rules, in order, each linking to
/// its page (the table's other columns are prose; the codes and names are the registry's).
#[test]
fn readme_rule_table_follows_the_registry() {
    let readme = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let rows: Vec<(String, String)> = readme
        .lines()
        .filter(|l| l.starts_with("| MEM"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].to_owned(), cells[2].to_owned())
        })
        .collect();
    let expected: Vec<(String, String)> = Rule::ALL
        .iter()
        .map(|r| (r.code().to_owned(), format!("[`{}`](docs/rules/{}.md)", r.name(), r.name())))
        .collect();
    assert_eq!(rows, expected, "README.md's rule table differs from the registry");
}
