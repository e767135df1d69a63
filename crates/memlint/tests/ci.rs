//! memlint in CI: configuration files, machine-readable reports, stdin, ignores, cache.

use std::fs;
use std::path::Path;

use assert_cmd::Command;

mod support;

fn memlint(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("memlint").unwrap();
    cmd.env("NO_COLOR", "1").current_dir(dir);
    cmd
}

const BAD: &str = "import torch\n\nfor x in loader:\n    model(x).sum().backward()\n    torch.cuda.empty_cache()\n";
/// An evaluation function: a network (built here) whose output it only reads.
const EVAL: &str = "import torch\nnet = torch.nn.Linear(4, 4)\n\ndef evaluate(x):\n    return net(x).argmax(1)\n";

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
    dir
}

fn run(cmd: &mut Command) -> (String, String, i32) {
    let output = cmd.output().unwrap();
    (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
        output.status.code().unwrap(),
    )
}

fn concise(dir: &Path, extra: &[&str]) -> (String, i32) {
    let (out, _, code) = run(memlint(dir).args(["check", "--no-cache", "-q", "--output-format", "concise"]).args(extra));
    (out, code)
}

#[test]
fn pyproject_section_and_closest_config_win() {
    let dir = tree(&[
        ("pyproject.toml", "[tool.memlint]\nignore = [\"MEM004\"]\n"),
        ("a.py", BAD),
        ("sub/memlint.toml", "select = [\"empty-cache-in-loop\"]\n"),
        ("sub/b.py", BAD),
    ]);
    let (out, code) = concise(dir.path(), &[]);
    assert_eq!(code, 1);
    assert_eq!(out.lines().collect::<Vec<_>>(), vec!["sub/b.py:5:5: MEM004 [*] [warning] `torch.cuda.empty_cache()` in the per-step loop returns cached blocks to the driver, so every later step pays for `cudaMalloc` again and synchronizes; it never lowers the peak"]);
    // --isolated ignores both files; --config uses one for everything.
    let (out, _) = concise(dir.path(), &["--isolated"]);
    assert_eq!(out.lines().count(), 2, "{out}");
    let (out, _) = concise(dir.path(), &["--config", "pyproject.toml"]);
    assert_eq!(out, "");
}

#[test]
fn per_file_ignores_and_extend_select() {
    let dir = tree(&[
        ("memlint.toml", "select = [\"MEM001\"]\nextend-select = [\"MEM004\"]\n[per-file-ignores]\n\"tests/*\" = [\"MEM001\", \"MEM004\"]\n"),
        ("tests/test_a.py", BAD),
        ("src/a.py", EVAL),
    ]);
    let (out, _) = concise(dir.path(), &[]);
    assert!(out.starts_with("src/a.py:5:12: MEM001"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
}

#[test]
fn broken_config_names_file_key_and_allowed_values() {
    let dir = tree(&[("memlint.toml", "select = [\"MEM001\"]\nseverty = { MEM001 = \"error\" }\n"), ("a.py", BAD)]);
    let (_, err, code) = run(memlint(dir.path()).args(["check", "--no-cache"]));
    assert_eq!(code, 2);
    assert!(err.contains("memlint.toml"), "{err}");
    assert!(err.contains("unknown field `severty`"), "{err}");
    assert!(err.contains("severity"), "the allowed keys are listed: {err}");
    assert!(err.contains("2 │ severty"), "the TOML line is shown: {err}");
    let dir = tree(&[("memlint.toml", "ignore = [\"MEM404\"]\n"), ("a.py", BAD)]);
    let (_, err, code) = run(memlint(dir.path()).args(["check", "--no-cache"]));
    assert_eq!(code, 2);
    assert!(err.contains("`ignore`: unknown rule `MEM404`"), "{err}");
}

#[test]
fn severity_override_shows_in_json() {
    let dir = tree(&[("memlint.toml", "[severity]\nempty-cache-in-loop = \"error\"\n"), ("a.py", BAD)]);
    let (out, _, _) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "json"]));
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(value[0]["severity"], "error");
}

#[test]
fn show_settings_prints_the_resolved_settings() {
    let dir = tree(&[("pyproject.toml", "[tool.memlint]\nignore = [\"MEM004\"]\nunsafe-fixes = true\n"), ("a.py", BAD)]);
    let (out, _, code) = run(memlint(dir.path()).args(["check", "--show-settings", "a.py"]));
    assert_eq!(code, 0);
    assert!(out.contains("Settings path: ") && out.contains("pyproject.toml"), "{out}");
    assert!(out.contains("MEM001 (eval-without-no-grad)"), "{out}");
    assert!(!out.contains("MEM004 (empty-cache-in-loop)"), "{out}");
    assert!(out.contains("unsafe_fixes = true"), "{out}");
}

#[test]
fn gitignore_and_exclude_are_honoured_unless_named_explicitly() {
    let dir = tree(&[
        (".gitignore", "generated/\n"),
        ("generated/a.py", BAD),
        ("memlint.toml", "extend-exclude = [\"legacy_*.py\"]\n"),
        ("legacy_train.py", BAD),
        ("train.py", BAD),
    ]);
    let (out, _) = concise(dir.path(), &[]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("train.py"), "{out}");
    let (out, _) = concise(dir.path(), &["legacy_train.py"]);
    assert_eq!(out.lines().count(), 1, "named explicitly: {out}");
    let (out, code) = concise(dir.path(), &["--force-exclude", "legacy_train.py"]);
    assert_eq!((out.as_str(), code), ("", 0));
    fs::write(dir.path().join("memlint.toml"), "respect-gitignore = false\n").unwrap();
    let (out, _) = concise(dir.path(), &[]);
    assert!(out.contains("generated/a.py"), "{out}");
}

#[test]
fn sarif_is_valid_against_the_schema() {
    let dir = tree(&[("a.py", BAD), ("b.py", EVAL)]);
    let (out, _, code) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "sarif"]));
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let schema = support::sarif_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&report).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "SARIF schema violations: {errors:#?}");
    let run = &report["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "memlint");
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(rules.iter().any(|r| r["id"] == "MEM001" && r["name"] == "eval-without-no-grad" && r["properties"]["docs"] == "memlint rule eval-without-no-grad"));
    // No public home yet: no helpUri (SARIF wants an absolute URI there), no informationUri.
    assert!(rules.iter().all(|r| r.get("helpUri").is_none()) && run["tool"]["driver"].get("informationUri").is_none());
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let mem004 = results.iter().find(|r| r["ruleId"] == "MEM004").unwrap();
    assert_eq!(mem004["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "a.py");
    assert_eq!(mem004["locations"][0]["physicalLocation"]["region"]["startLine"], 5);
    assert_eq!(mem004["fixes"][0]["artifactChanges"][0]["replacements"][0]["deletedRegion"]["startLine"], 5);
    // An invalid document is caught by the same validator (the test can fail).
    let mut broken = report.clone();
    broken["runs"][0]["results"][0]["level"] = serde_json::json!("catastrophic");
    assert!(!validator.is_valid(&broken));
}

/// Each SARIF result carries its evidence: a related location (with the fact as its
/// message) per fact that has a place, every fact's text in `properties.evidence`; the
/// document still validates against the SARIF 2.1.0 schema.
#[test]
fn sarif_results_carry_the_evidence_as_related_locations() {
    let dir = tree(&[("b.py", EVAL)]);
    let (out, _, code) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "sarif"]));
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let validator = jsonschema::validator_for(&support::sarif_schema()).unwrap();
    let errors: Vec<String> = validator.iter_errors(&report).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "SARIF schema violations: {errors:#?}");
    let result = &report["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "MEM001");
    let related = result["relatedLocations"].as_array().unwrap_or_else(|| panic!("no relatedLocations: {result:#}"));
    let texts: Vec<&str> = result["properties"]["evidence"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert!(!related.is_empty() && related.len() <= texts.len(), "{result:#}");
    for (i, location) in related.iter().enumerate() {
        assert_eq!(location["id"], i as u64, "ids number the related locations: {location}");
        assert_eq!(location["physicalLocation"]["artifactLocation"]["uri"], "b.py");
        assert!(texts.contains(&location["message"]["text"].as_str().unwrap()), "{location}");
    }
    // The network's construction, `torch.nn.Linear(4, 4)` on line 2 (columns 7 to 28).
    let built = related
        .iter()
        .find(|l| l["message"]["text"].as_str().unwrap().starts_with("built by `torch.nn.Linear(4, 4)`"))
        .unwrap_or_else(|| panic!("no construction among {related:#?}"));
    assert_eq!(built["physicalLocation"]["region"], serde_json::json!({"startLine": 2, "startColumn": 7, "endLine": 2, "endColumn": 28}));
}

#[test]
fn github_workflow_commands() {
    let dir = tree(&[("a.py", BAD)]);
    let (out, _, code) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "github"]));
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "::warning title=memlint (MEM004 empty-cache-in-loop),file=a.py,line=5,col=5,endLine=5,endColumn=29::MEM004: `torch.cuda.empty_cache()` in the per-step loop returns cached blocks to the driver, so every later step pays for `cudaMalloc` again and synchronizes; it never lowers the peak\n"
    );
}

#[test]
fn junit_report_is_xml_with_a_failure_per_finding() {
    let dir = tree(&[("a.py", BAD), ("b.py", EVAL)]);
    let (out, _, _) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "junit"]));
    let mut reader = quick_xml::Reader::from_str(&out);
    let mut failures = 0;
    let mut suites = 0;
    loop {
        match reader.read_event().expect("well-formed XML") {
            quick_xml::events::Event::Eof => break,
            quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e) => match e.name().as_ref() {
                b"failure" => failures += 1,
                b"testsuite" => suites += 1,
                _ => {}
            },
            _ => {}
        }
    }
    assert_eq!((suites, failures), (2, 2), "{out}");
    assert!(out.contains("a.py:5:5: MEM004 empty-cache-in-loop"), "{out}");
    // The failure's text lists the evidence, each fact with its place.
    assert!(out.contains("\nevidence:\n  - b.py:5:12: `net` is a network"), "{out}");
    assert!(out.contains("\n  - b.py:2:7: built by `torch.nn.Linear(4, 4)`"), "{out}");
}

#[test]
fn output_file_gets_the_report() {
    let dir = tree(&[("a.py", BAD)]);
    let (out, _, code) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "json", "--output-file", "reports/memlint.json"]));
    assert_eq!(code, 1);
    assert_eq!(out, "");
    let value: serde_json::Value = serde_json::from_str(&fs::read_to_string(dir.path().join("reports/memlint.json")).unwrap()).unwrap();
    assert_eq!(value[0]["code"], "MEM004");
}

#[test]
fn stdin_filename_reports_under_the_name_and_fix_writes_stdout() {
    let dir = tree(&[("memlint.toml", "[per-file-ignores]\n\"legacy/*\" = [\"MEM004\"]\n")]);
    let (out, _, code) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "concise", "-q", "--stdin-filename", "src/train.py"]).write_stdin(BAD));
    assert_eq!(code, 1);
    assert!(out.starts_with("src/train.py:5:5: MEM004"), "{out}");
    // Settings for the name apply.
    let (out, _, code) = run(memlint(dir.path()).args(["check", "--no-cache", "-q", "--stdin-filename", "legacy/train.py"]).write_stdin(BAD));
    assert_eq!((out.as_str(), code), ("", 0));
    let (out, err, code) = run(memlint(dir.path()).args(["check", "--fix", "--stdin-filename", "src/train.py"]).write_stdin(BAD));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "import torch\n\nfor x in loader:\n    model(x).sum().backward()\n");
}

#[test]
fn cache_reuses_results_and_survives_corruption() {
    let dir = tree(&[("a.py", BAD), ("b.py", EVAL)]);
    let first = run(memlint(dir.path()).args(["check", "--output-format", "json"]));
    let entries: Vec<_> = walk_files(&dir.path().join(".memlint_cache"));
    // The results of both files in one pack (the summaries are files of their own).
    let packs: Vec<_> = entries.iter().filter(|p| p.extension().is_some_and(|e| e == "pack")).collect();
    assert_eq!(packs.len(), 1, "{entries:?}");
    let second = run(memlint(dir.path()).args(["check", "--output-format", "json"]));
    assert_eq!(first, second);
    fs::write(packs[0], b"\x00garbage").unwrap();
    let third = run(memlint(dir.path()).args(["check", "--output-format", "json"]));
    assert_eq!(first, third, "a corrupt cache is ignored");
    // A changed file is linted again.
    fs::write(dir.path().join("a.py"), "x = 1\n").unwrap();
    let (out, _, _) = run(memlint(dir.path()).args(["check", "--output-format", "json"]));
    assert!(!out.contains("MEM004"), "{out}");
}

fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn notebook_fixture() -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/train.ipynb")).unwrap()
}

#[test]
fn notebooks_report_cells_and_lines() {
    let dir = tree(&[("train.ipynb", &notebook_fixture())]);
    let (out, code) = concise(dir.path(), &[]);
    assert_eq!(code, 1);
    insta::assert_snapshot!(out);
    let (json, _, _) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "json"]));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let first = &value[0];
    assert!(first["cell"].as_u64().unwrap() >= 1, "{first}");
    assert_eq!(first["filename"], "train.ipynb");
    // The text report: the header and the body's line numbers count within the cell.
    let (text, _, _) = run(memlint(dir.path()).args(["check", "--no-cache"]));
    assert!(text.contains("╭─[train.ipynb:cell 7:8:13]"), "{text}");
    assert!(text.contains("\n 8 │             torch.cuda.empty_cache()\n"), "{text}");
    assert!(!text.contains("train.ipynb:3"), "no line of the joined program: {text}");
    // Syntax errors too are shown in their cell.
    let broken = notebook_fixture().replacen("\"import torch\\n\",", "\"import torch\\n\",\n    \"x = )\\n\",", 1);
    assert_ne!(broken, notebook_fixture());
    fs::write(dir.path().join("train.ipynb"), broken).unwrap();
    let (text, _, _) = run(memlint(dir.path()).args(["check", "--no-cache"]));
    assert!(text.contains("╭─[train.ipynb:cell 3:2:"), "{text}");
    let (github, _, _) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "github"]));
    assert!(github.starts_with("::error title=memlint,file=train.ipynb::train.ipynb:cell 3:2:"), "{github}");
}

/// In a notebook each fact is located as its finding is: the cell it is in (counting every
/// cell, as Jupyter shows them) and the row within that cell, in JSON and in the text.
#[test]
fn notebook_evidence_points_at_the_cell_of_each_fact() {
    let notebook = serde_json::json!({
        "cells": [
            {"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": ["import torch\n", "net = torch.nn.Linear(4, 4)"]},
            {"cell_type": "markdown", "metadata": {}, "source": ["# Evaluation"]},
            {"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": ["def evaluate(x):\n", "    return net(x).argmax(1)"]}
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5
    });
    let dir = tree(&[("eval.ipynb", &notebook.to_string())]);
    let (json, _, code) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "json"]));
    assert_eq!(code, 1, "{json}");
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let finding = &value[0];
    assert_eq!((finding["code"].as_str(), finding["cell"].as_u64(), finding["location"]["row"].as_u64()), (Some("MEM001"), Some(3), Some(2)), "{json}");
    let evidence = finding["evidence"].as_array().unwrap();
    let built = evidence
        .iter()
        .find(|f| f["message"].as_str().unwrap().starts_with("built by `torch.nn.Linear(4, 4)`"))
        .unwrap_or_else(|| panic!("no construction among {evidence:#?}"));
    assert_eq!(built["cell"], 1, "{built}");
    assert_eq!((&built["location"], &built["end_location"]), (&serde_json::json!({"row": 2, "column": 7}), &serde_json::json!({"row": 2, "column": 28})));
    // Facts at the finding are in its cell.
    assert!(evidence.iter().any(|f| f["cell"] == 3 && f["location"] == finding["location"]), "{evidence:#?}");
    let (text, _, _) = run(memlint(dir.path()).args(["check", "--no-cache"]));
    assert!(text.contains("\n    - eval.ipynb:cell 1:2:7: built by `torch.nn.Linear(4, 4)`"), "{text}");
}

/// GitHub shows a notebook as its JSON: the annotation is the file's, the cell and line
/// in its title and message (no `line=` that would point into the JSON).
#[test]
fn github_annotations_point_at_the_notebook_cell() {
    let dir = tree(&[("train.ipynb", &notebook_fixture())]);
    let (out, _, code) = run(memlint(dir.path()).args(["check", "--no-cache", "--output-format", "github"]));
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "::warning title=memlint (MEM004 empty-cache-in-loop) at cell 7%2C line 8,file=train.ipynb::train.ipynb:cell 7:8:13: MEM004 `torch.cuda.empty_cache()` in the per-step loop returns cached blocks to the driver, so every later step pays for `cudaMalloc` again and synchronizes; it never lowers the peak\n"
    );
}

#[test]
fn notebook_fix_rewrites_only_changed_cells() {
    let original = notebook_fixture();
    let dir = tree(&[("train.ipynb", &original)]);
    let (_, err, code) = run(memlint(dir.path()).args(["check", "--no-cache", "--fix", "--select", "MEM004"]));
    assert_eq!(code, 0, "{err}");
    let fixed = fs::read_to_string(dir.path().join("train.ipynb")).unwrap();
    assert_ne!(fixed, original);
    let before: serde_json::Value = serde_json::from_str(&original).unwrap();
    let after: serde_json::Value = serde_json::from_str(&fixed).unwrap();
    // Outputs and metadata untouched; only sources changed.
    assert_eq!(before["metadata"], after["metadata"]);
    let cells_before = before["cells"].as_array().unwrap();
    let cells_after = after["cells"].as_array().unwrap();
    assert_eq!(cells_before.len(), cells_after.len());
    let mut changed = 0;
    for (b, a) in cells_before.iter().zip(cells_after) {
        assert_eq!(b["outputs"], a["outputs"]);
        assert_eq!(b["metadata"], a["metadata"]);
        if b["source"] != a["source"] {
            changed += 1;
        }
    }
    assert_eq!(changed, 1);
    // Formatting preserved: the unchanged prefix of the file is byte-identical.
    let first_difference = original.bytes().zip(fixed.bytes()).position(|(a, b)| a != b).unwrap();
    assert!(original[..first_difference].contains("\"cells\""));
    let (out, _) = concise(dir.path(), &["--select", "MEM004"]);
    assert_eq!(out, "");
}

/// `--add-noqa` suppresses every current finding (a comment per line, codes merged into an
/// existing `# noqa:` list), writes notebooks cell by cell, says what it could not do, and
/// leaves later findings reported.
#[test]
fn add_noqa_suppresses_every_current_finding() {
    let source = "import torch\n\nfor x in loader:\n    model(x).sum().backward()\n    torch.cuda.empty_cache()  # noqa: E501\n    state = torch.load(\"\"\"a\nb.pt\"\"\")\n";
    let dir = tree(&[("a.py", source), ("train.ipynb", &notebook_fixture()), ("clean.py", "x = 1\n")]);
    let (before, code) = concise(dir.path(), &[]);
    assert_eq!(code, 1);
    assert_eq!(before.lines().count(), 3, "{before}");
    let (_, err, code) = run(memlint(dir.path()).args(["check", "--add-noqa"]));
    // The torch.load line ends inside a string: no comment can go there.
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("warning: a.py:6:13: MEM008 not suppressed: the line ends inside a string"), "{err}");
    assert!(err.ends_with("Added 2 noqa directives.\n"), "{err}");
    let fixed = fs::read_to_string(dir.path().join("a.py")).unwrap();
    assert_eq!(fixed, source.replace("# noqa: E501", "# noqa: E501, MEM004"));
    let notebook = fs::read_to_string(dir.path().join("train.ipynb")).unwrap();
    assert!(notebook.contains("torch.cuda.empty_cache()  # noqa: MEM004"), "{notebook}");
    // Only that cell's source changed: outputs and formatting are the same text.
    let (old, new) = (notebook_fixture(), notebook.clone());
    assert_eq!(old.lines().count(), new.lines().count());
    assert_eq!(old.lines().zip(new.lines()).filter(|(a, b)| a != b).count(), 1);
    assert_eq!(fs::read_to_string(dir.path().join("clean.py")).unwrap(), "x = 1\n");
    let (after, _) = concise(dir.path(), &[]);
    assert_eq!(after.lines().count(), 1, "only the unsuppressible finding remains: {after}");
    assert!(after.contains("MEM008"), "{after}");
    // Again: nothing more to add; a new finding is reported as usual.
    let (_, err, _) = run(memlint(dir.path()).args(["check", "--add-noqa", "--select", "MEM004"]));
    assert!(err.ends_with("Added 0 noqa directives.\n"), "{err}");
    fs::write(dir.path().join("a.py"), format!("{fixed}    torch.cuda.empty_cache()\n")).unwrap();
    let (later, _) = concise(dir.path(), &["--select", "MEM004"]);
    assert_eq!(later.lines().count(), 1, "{later}");
    assert!(later.starts_with("a.py:8:5: MEM004"), "{later}");
    // It conflicts with fixing.
    let (_, err, code) = run(memlint(dir.path()).args(["check", "--add-noqa", "--fix"]));
    assert_eq!(code, 2, "{err}");
}

/// `--watch` lints, then lints again and reprints when a file changes: a real process, a
/// real file change, the second report read from its output.
#[test]
fn watch_relints_on_a_file_change() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let dir = tree(&[("a.py", BAD), ("b.py", "x = 1\n")]);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memlint"))
        .args(["check", "--watch", "--output-format", "concise", "."])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    // Every line up to (and including) the first one containing `until`.
    let read_until = |until: &str| -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match lines.recv_timeout(left) {
                Ok(line) => {
                    let done = line.contains(until);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(_) => break,
            }
        }
        panic!("no line containing {until:?} in {seen:#?}");
    };
    let first = read_until("Found 1 finding in 1 file.");
    assert!(first[0].ends_with("Starting linter in watch mode..."), "{first:#?}");
    assert!(first.iter().any(|l| l.starts_with("a.py:5:5: MEM004")), "{first:#?}");
    // A second finding, in the other file.
    fs::write(dir.path().join("b.py"), BAD).unwrap();
    let second = read_until("Found 2 findings in 2 files.");
    let _ = child.kill();
    let _ = child.wait();
    let start = second.iter().rposition(|l| l.ends_with("File change detected...")).unwrap_or_else(|| panic!("{second:#?}"));
    let report: Vec<&String> = second[start + 1..].iter().filter(|l| l.contains(": MEM")).collect();
    assert_eq!(report.len(), 2, "the whole report is printed again: {second:#?}");
    assert!(report[1].starts_with("b.py:5:5: MEM004"), "{report:#?}");
}
