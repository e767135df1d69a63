//! The `memlint` command line: output formats, exit statuses, fixes, errors.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn memlint() -> Command {
    let mut cmd = Command::cargo_bin("memlint").unwrap();
    cmd.env("NO_COLOR", "1");
    cmd
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/examples")
}

const BAD: &str = "import torch\n\nfor x in loader:\n    model(x).sum().backward()\n    torch.cuda.empty_cache()\n";
const CLEAN: &str = "import torch\n\nx = torch.zeros(3)\n";

fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
    dir
}

fn stdout(cmd: &mut Command) -> (String, i32) {
    let output = cmd.output().unwrap();
    (String::from_utf8(output.stdout).unwrap(), output.status.code().unwrap())
}

#[test]
fn exit_zero_without_findings() {
    let dir = tree(&[("clean.py", CLEAN.as_bytes())]);
    let (out, code) = stdout(memlint().arg("check").arg(dir.path()));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("All checks passed!"), "{out}");
}

#[test]
fn exit_one_with_findings_and_zero_with_exit_zero() {
    let dir = tree(&[("bad.py", BAD.as_bytes())]);
    memlint().arg("check").arg(dir.path()).assert().code(1);
    memlint().args(["check", "--exit-zero"]).arg(dir.path()).assert().code(0);
}

#[test]
fn exit_two_for_a_missing_path() {
    let output = memlint().args(["check", "does/not/exist.py"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8(output.stderr).unwrap();
    assert!(err.contains("does/not/exist.py") && err.contains("does not exist"), "{err}");
}

#[test]
fn exit_two_for_an_unknown_rule() {
    let output = memlint().args(["check", "--select", "MEM999", "."]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8(output.stderr).unwrap().contains("unknown rule `MEM999`"));
    memlint().args(["check", "--output-format", "yaml"]).assert().code(2);
}

#[test]
fn text_output_shows_source_rule_and_help() {
    let dir = tree(&[("bad.py", BAD.as_bytes())]);
    let (out, _) = stdout(memlint().arg("check").arg(dir.path().join("bad.py")));
    assert!(out.contains("MEM004 empty-cache-in-loop"), "{out}");
    assert!(out.contains("torch.cuda.empty_cache()"), "{out}");
    assert!(out.contains("help: remove it"), "{out}");
    assert!(out.contains("bad.py:5:5"), "{out}");
    assert!(out.contains("Found 1 finding in 1 file."), "{out}");
}

#[test]
fn concise_output_one_line_per_finding() {
    let dir = tree(&[("a/bad.py", BAD.as_bytes()), ("b/clean.py", CLEAN.as_bytes())]);
    let (out, code) = stdout(memlint().current_dir(dir.path()).args(["check", "--output-format", "concise", "-q"]));
    assert_eq!(code, 1);
    insta::assert_snapshot!(out, @"a/bad.py:5:5: MEM004 [*] [warning] `torch.cuda.empty_cache()` in the per-step loop returns cached blocks to the driver, so every later step pays for `cudaMalloc` again and synchronizes; it never lowers the peak");
}

#[test]
fn json_output_has_ruffs_fields() {
    let source = "import torch\n# é😀\nfor x in torch.utils.data.DataLoader(data):\n    train(x); torch.cuda.empty_cache()\n";
    let dir = tree(&[("bad.py", source.as_bytes())]);
    let (out, code) = stdout(memlint().current_dir(dir.path()).args(["check", "--output-format", "json", "bad.py"]));
    assert_eq!(code, 1);
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    insta::assert_json_snapshot!(value, @r###"
    [
      {
        "cell": null,
        "code": "MEM004",
        "end_location": {
          "column": 39,
          "row": 4
        },
        "evidence": [
          {
            "cell": null,
            "end_location": {
              "column": 39,
              "row": 4
            },
            "location": {
              "column": 1,
              "row": 3
            },
            "message": "the loop on line 3 goes over a `DataLoader`: one iteration per batch"
          },
          {
            "cell": null,
            "end_location": {
              "column": 39,
              "row": 4
            },
            "location": {
              "column": 15,
              "row": 4
            },
            "message": "`torch.cuda.empty_cache()` resolves to `torch.cuda.empty_cache`"
          }
        ],
        "filename": "bad.py",
        "fix": null,
        "help": "remove it, or call `torch.cuda.empty_cache()` once after the loop",
        "location": {
          "column": 15,
          "row": 4
        },
        "message": "`torch.cuda.empty_cache()` in the per-step loop returns cached blocks to the driver, so every later step pays for `cudaMalloc` again and synchronizes; it never lowers the peak",
        "name": "empty-cache-in-loop",
        "noqa_row": 4,
        "severity": "warning",
        "url": "memlint rule empty-cache-in-loop"
      }
    ]
    "###);
}

#[test]
fn json_fix_edits_have_locations() {
    let dir = tree(&[("bad.py", BAD.as_bytes())]);
    let (out, _) = stdout(memlint().current_dir(dir.path()).args(["check", "--output-format", "json", "bad.py"]));
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    insta::assert_json_snapshot!(value[0]["fix"], @r###"
    {
      "applicability": "safe",
      "edits": [
        {
          "content": "",
          "end_location": {
            "column": 1,
            "row": 6
          },
          "location": {
            "column": 1,
            "row": 5
          }
        }
      ],
      "message": "Remove the `empty_cache()` call"
    }
    "###);
}

#[test]
fn select_and_ignore_take_codes_and_names() {
    let dir = tree(&[("bad.py", BAD.as_bytes())]);
    memlint().args(["check", "--select", "MEM001"]).arg(dir.path()).assert().code(0);
    memlint().args(["check", "--select", "empty-cache-in-loop"]).arg(dir.path()).assert().code(1);
    memlint().args(["check", "--ignore", "MEM002,empty-cache-in-loop"]).arg(dir.path()).assert().code(0);
}

#[test]
fn statistics_count_per_rule() {
    let dir = tree(&[("a.py", BAD.as_bytes()), ("b.py", BAD.as_bytes())]);
    let (out, code) = stdout(memlint().args(["check", "--statistics", "-q"]).arg(dir.path()));
    assert_eq!(code, 1);
    assert_eq!(out, "    2\tMEM004\tempty-cache-in-loop\t[*]\n");
}

#[test]
fn unreadable_and_broken_files_are_reported_and_others_linted() {
    let dir = tree(&[
        ("bad.py", BAD.as_bytes()),
        ("latin1.py", b"x = '\xe9'\n"),
        ("broken.py", b"def f(:\n    pass\nfor x in loader:\n    torch.cuda.empty_cache()\n"),
    ]);
    let (out, code) = stdout(memlint().current_dir(dir.path()).args(["check", "--output-format", "concise", "-q", "."]));
    assert_eq!(code, 1);
    assert!(out.contains("latin1.py:1:1: error: could not lint: not valid UTF-8 (invalid byte at offset 5)"), "{out}");
    assert!(out.contains("broken.py:1:7: SyntaxError:"), "{out}");
    assert!(out.contains("bad.py:5:5: MEM004"), "{out}");
}

#[test]
fn walking_skips_hidden_cache_and_virtualenv_folders() {
    let dir = tree(&[
        ("src/bad.py", BAD.as_bytes()),
        (".hidden/bad.py", BAD.as_bytes()),
        ("__pycache__/bad.py", BAD.as_bytes()),
        ("myenv/pyvenv.cfg", b"home = /usr\n"),
        ("myenv/lib/bad.py", BAD.as_bytes()),
        ("lib/site-packages/bad.py", BAD.as_bytes()),
        ("notes.txt", BAD.as_bytes()),
    ]);
    let (out, _) = stdout(memlint().current_dir(dir.path()).args(["check", "--output-format", "concise", "-q"]));
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("./src/bad.py") || out.starts_with("src/bad.py"), "{out}");
    // A file named explicitly is linted whatever its name.
    memlint().current_dir(dir.path()).args(["check", "notes.txt"]).assert().code(1);
}

#[test]
fn fix_writes_safe_fixes_and_keeps_permissions() {
    let dir = tree(&[("bad.py", BAD.as_bytes())]);
    let path = dir.path().join("bad.py");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o754)).unwrap();
    }
    let (out, code) = stdout(memlint().args(["check", "--fix"]).arg(&path));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Fixed 1 finding, 0 remaining."), "{out}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "import torch\n\nfor x in loader:\n    model(x).sum().backward()\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o754);
    }
    // No temporary file is left behind.
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn unsafe_fixes_need_the_flag() {
    let source = "import torch\nmodel, criterion = torch.nn.Linear(4, 4), torch.nn.MSELoss()\ntotal = 0\nfor x, y in train_loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    total += loss\n";
    let dir = tree(&[("t.py", source.as_bytes())]);
    let path = dir.path().join("t.py");
    let (out, code) = stdout(memlint().args(["check", "--fix"]).arg(&path));
    assert_eq!(code, 1);
    assert!(out.contains("1 more fixable with `--fix --unsafe-fixes`"), "{out}");
    assert_eq!(fs::read_to_string(&path).unwrap(), source);
    memlint().args(["check", "--fix", "--unsafe-fixes"]).arg(&path).assert().code(0);
    assert!(fs::read_to_string(&path).unwrap().contains("total += loss.item()"));
}

/// `[*]` marks what `--fix` will apply (ruff's convention): a safe fix always, an unsafe
/// one only when unsafe fixes are on (`--unsafe-fixes` or `unsafe-fixes = true`).
#[test]
fn fix_marks_only_what_fix_applies() {
    // MEM004 (safe fix) and MEM002 (`.item()`: unsafe fix) in one file.
    let source = "import torch\nmodel, criterion = torch.nn.Linear(4, 4), torch.nn.MSELoss()\ntotal = 0\nfor x, y in train_loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    total += loss\n    torch.cuda.empty_cache()\n";
    let dir = tree(&[("t.py", source.as_bytes())]);
    let lines = |extra: &[&str]| {
        let (out, code) = stdout(memlint().current_dir(dir.path()).args(["check", "--no-cache", "--output-format", "concise"]).args(extra));
        assert_eq!(code, 1, "{out}");
        out
    };
    let out = lines(&[]);
    let mem002 = out.lines().find(|l| l.contains("MEM002")).unwrap_or_else(|| panic!("{out}"));
    let mem004 = out.lines().find(|l| l.contains("MEM004")).unwrap_or_else(|| panic!("{out}"));
    assert!(mem004.contains("MEM004 [*] "), "{mem004}");
    assert!(!mem002.contains("[*]"), "an unsafe-only fix is not marked: {mem002}");
    assert!(out.contains("[*] 1 fixable with `--fix`.") && out.contains("1 more fixable with `--fix --unsafe-fixes`."), "{out}");

    let out = lines(&["--unsafe-fixes"]);
    assert!(out.lines().filter(|l| l.contains("MEM00")).all(|l| l.contains(" [*] ")), "{out}");
    assert!(out.contains("[*] 2 fixable with `--fix`.") && !out.contains("more fixable"), "{out}");

    // The text report marks the message the same way and says which fix is unsafe.
    let (text, _) = stdout(memlint().current_dir(dir.path()).args(["check", "--no-cache"]));
    let blocks: Vec<&str> = text.split("\n\n").collect();
    let block = |code: &str| blocks.iter().position(|b| b.starts_with(code)).map(|i| format!("{}\n{}", blocks[i], blocks[i + 1])).unwrap_or_else(|| panic!("{text}"));
    assert!(block("MEM004").contains("⚠ [*] "), "{text}");
    assert!(!block("MEM002").contains("[*]"), "{text}");
    assert!(block("MEM002").contains("[unsafe fix: "), "{text}");
    let (text, _) = stdout(memlint().current_dir(dir.path()).args(["check", "--no-cache", "--unsafe-fixes"]));
    assert_eq!(text.matches("⚠ [*] ").count(), 2, "{text}");

    // `unsafe-fixes = true` in the configuration marks them too; `--statistics` agrees.
    fs::write(dir.path().join("memlint.toml"), "unsafe-fixes = true\n").unwrap();
    let out = lines(&[]);
    assert!(out.lines().filter(|l| l.contains("MEM00")).all(|l| l.contains(" [*] ")), "{out}");
    fs::remove_file(dir.path().join("memlint.toml")).unwrap();
    let (stats, _) = stdout(memlint().current_dir(dir.path()).args(["check", "--no-cache", "--statistics"]));
    let row = |code: &str| stats.lines().find(|l| l.contains(code)).unwrap_or_else(|| panic!("{stats}")).to_owned();
    assert!(row("MEM004").ends_with("[*]") && !row("MEM002").contains("[*]"), "{stats}");
}

#[test]
fn diff_prints_and_writes_nothing() {
    let dir = tree(&[("bad.py", BAD.as_bytes())]);
    let path = dir.path().join("bad.py");
    let (out, code) = stdout(memlint().args(["check", "--diff"]).arg(&path));
    assert_eq!(code, 1);
    assert!(out.contains("-    torch.cuda.empty_cache()"), "{out}");
    assert_eq!(fs::read_to_string(&path).unwrap(), BAD);
    let clean = tree(&[("c.py", CLEAN.as_bytes())]);
    memlint().args(["check", "--diff"]).arg(clean.path()).assert().code(0);
}

#[test]
fn rule_prints_documentation_by_code_name_or_all() {
    let (by_code, code) = stdout(memlint().args(["rule", "MEM001"]));
    assert_eq!(code, 0);
    assert!(by_code.starts_with("# eval-without-no-grad (MEM001)"), "{by_code}");
    assert!(by_code.contains("## Why is this bad?"));
    let (by_name, _) = stdout(memlint().args(["rule", "eval-without-no-grad"]));
    assert_eq!(by_code, by_name);
    let (all, _) = stdout(memlint().args(["rule", "--all"]));
    for code in ["MEM001", "MEM002", "MEM003", "MEM004"] {
        assert!(all.contains(&format!("({code})")), "{code}");
    }
    memlint().args(["rule", "MEM999"]).assert().code(2);
}

#[test]
fn bundled_examples_have_findings_and_a_clean_file() {
    let (out, code) = stdout(memlint().args(["check", "--output-format", "concise", "-q"]).arg(examples()));
    assert_eq!(code, 1);
    assert!(!out.contains("clean_training.py"), "{out}");
    for code in ["MEM001", "MEM002", "MEM003", "MEM004"] {
        assert!(out.contains(code), "{code} missing from the examples:\n{out}");
    }
}

#[test]
fn help_explains_commands() {
    let (out, _) = stdout(memlint().arg("--help"));
    assert!(out.contains("check") && out.contains("rule") && out.contains("Exit status"), "{out}");
    let (out, _) = stdout(memlint().args(["check", "--help"]));
    assert!(out.contains("--output-format") && out.contains("--select") && out.contains("--fix"), "{out}");
}

#[test]
fn verify_lints_files_then_measures_on_the_simulator() {
    let (out, code) = stdout(memlint().args(["verify", "--backend", "sim", "--layers", "2", "--hidden", "128", "--batch", "16", "--iters", "2"]).arg(examples().join("train_classifier.py")));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("train_classifier.py:42:18: MEM001 eval-without-no-grad"), "{out}");
    // The linter's finding in the training loop is measured by the training variant, the one in
    // the evaluation loop by the evaluation variant.
    let at = |prefix: &str| out.lines().find(|l| l.contains(prefix)).unwrap_or_default().to_string();
    let train = at("train_classifier.py:32:9: MEM002");
    assert!(train.contains("train:") && !train.contains("eval:"), "{out}");
    let eval = at("train_classifier.py:43:9: MEM002");
    assert!(eval.contains("eval:") && !eval.contains("train:"), "{out}");
    assert!(out.contains("ESTIMATE"), "sim figures are marked as estimates: {out}");
    memlint().args(["verify", "--backend", "sim", "missing.py"]).assert().code(2);
}

#[test]
fn verify_without_a_gpu_driver_exits_two_with_a_message() {
    // CI machines have no NVIDIA driver: memlint must say so, not panic.
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    let output = memlint().args(["verify", "--rule", "MEM001"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8(output.stderr).unwrap();
    assert!(err.contains("no CUDA driver found"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

// ----- unused-noqa (MEM013) ----------------------------------------------------------

fn concise_lines(dir: &Path, extra: &[&str]) -> (Vec<String>, i32) {
    let (out, code) = stdout(memlint().current_dir(dir).args(["check", "--output-format", "concise", "-q", "--no-cache"]).args(extra));
    (out.lines().map(str::to_owned).collect(), code)
}

/// A directive that suppresses nothing and an unknown code are reported, with which
/// codes are unused; other tools' codes and a bare `# noqa` are not.
#[test]
fn unused_noqa_and_unknown_codes_are_reported() {
    // (The program uses CUDA, so the load is a finding.)
    let source = "import torch\nx = 1  # noqa: MEM004, E501\nstate = torch.load(\"a.pt\")  # noqa: MEM1\ny = 2  # noqa: E501\nz = 3  # noqa\nnet.cuda()\n";
    let dir = tree(&[("a.py", source.as_bytes())]);
    let (lines, code) = concise_lines(dir.path(), &[]);
    assert_eq!(code, 1);
    assert!(lines.iter().any(|l| l == "a.py:2:8: MEM013 [*] [warning] Unused `noqa` directive (unused: `MEM004`)"), "{lines:#?}");
    assert!(lines.iter().any(|l| l == "a.py:3:29: MEM013 [*] [warning] Unused `noqa` directive (unknown: `MEM1`)"), "{lines:#?}");
    assert!(lines.iter().any(|l| l.starts_with("a.py:3:9: MEM008")), "the misspelled code suppresses nothing: {lines:#?}");
    assert_eq!(lines.len(), 3, "{lines:#?}");
    // Named by code or name in --select / --ignore like any rule.
    let (lines, code) = concise_lines(dir.path(), &["--ignore", "unused-noqa"]);
    assert_eq!((lines.len(), code), (1, 1), "{lines:#?}");
    // With MEM004 not selected, its code is reported as not enabled (ruff's wording).
    let (lines, _) = concise_lines(dir.path(), &["--select", "MEM013"]);
    assert!(lines.contains(&"a.py:2:8: MEM013 [*] [warning] Unused `noqa` directive (non-enabled: `MEM004`)".to_owned()), "{lines:#?}");
    // `memlint rule` documents it.
    let (doc, code) = stdout(memlint().args(["rule", "unused-noqa"]));
    assert_eq!(code, 0);
    assert!(doc.contains("# unused-noqa (MEM013)") && doc.contains("## Fix safety"), "{doc}");
}

/// `--fix` removes the unused codes (keeping other tools' codes) or the whole directive,
/// atomically; what is left is only the finding the misspelled code never suppressed.
#[test]
fn fix_removes_unused_noqa() {
    let source = "import torch\nx = 1  # noqa: MEM004, E501\nstate = torch.load(\"a.pt\")  # type: ignore  # noqa: MEM1\nz = 3  # memlint: ignore\nnet.cuda()\n";
    let dir = tree(&[("a.py", source.as_bytes())]);
    let path = dir.path().join("a.py");
    let (out, code) = stdout(memlint().args(["check", "--fix", "--no-cache"]).arg(&path));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Fixed 3 findings, 1 remaining."), "{out}");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "import torch\nx = 1  # noqa: E501\nstate = torch.load(\"a.pt\")  # type: ignore\nz = 3\nnet.cuda()\n"
    );
    let (lines, _) = concise_lines(dir.path(), &[]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("MEM008"), "{lines:#?}");
}

/// `--add-noqa` adds only directives MEM013 accepts: checking afterwards is clean. An
/// unused directive already there is not kept with another comment (as ruff does): it
/// is left for `--fix`, and the summary says so.
#[test]
fn add_noqa_then_check_is_clean() {
    let source = "import torch\n\nfor x in loader:\n    model(x).sum().backward()\n    torch.cuda.empty_cache()  # noqa: E501 long line\n    state = torch.load(\"a.pt\")  # memlint: ignore[MEM002]\n";
    let dir = tree(&[("a.py", source.as_bytes())]);
    let (before, code) = concise_lines(dir.path(), &[]);
    assert_eq!(code, 1);
    assert_eq!(before.len(), 3, "{before:#?}");
    let output = memlint().current_dir(dir.path()).args(["check", "--add-noqa", "--no-cache"]).output().unwrap();
    let err = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(err.contains("note: 1 unused suppression comment left as it is: `memlint check --fix` removes it."), "{err}");
    assert!(err.ends_with("Added 2 noqa directives.\n"), "{err}");
    let added = fs::read_to_string(dir.path().join("a.py")).unwrap();
    assert!(added.contains("torch.cuda.empty_cache()  # noqa: E501, MEM004 long line\n"), "{added}");
    assert!(added.contains("# memlint: ignore[MEM002]  # noqa: MEM008\n"), "{added}");
    let (after, _) = concise_lines(dir.path(), &[]);
    assert_eq!(after.len(), 1, "only the unused directive that was there before: {after:#?}");
    assert!(after[0].contains("MEM013") && after[0].contains("unused: `MEM002`"), "{after:#?}");
    memlint().current_dir(dir.path()).args(["check", "--fix", "--no-cache", "-q"]).assert().code(0);
    let (after, code) = concise_lines(dir.path(), &[]);
    assert_eq!((after.len(), code), (0, 0), "{after:#?}");
    assert!(fs::read_to_string(dir.path().join("a.py")).unwrap().contains("torch.load(\"a.pt\")  # noqa: MEM008\n"));
}

/// verify's rule table lists every rule of the registry, in order.
#[test]
fn verify_rule_table_lists_every_rule() {
    let registry: Vec<(&str, &str)> = memlint_linter::Rule::ALL.iter().map(|r| (r.code(), r.name())).collect();
    let verify: Vec<(&str, &str)> = memlint_verify::rules().iter().map(|(c, n, _)| (*c, *n)).collect();
    assert_eq!(registry, verify);
}

/// An evaluation function whose network is built by `nn.Linear` on line 4: MEM001 fires on
/// `net(x)` (line 8), and its evidence goes back to the construction.
const EVAL_LINEAR: &str = "import torch\nfrom torch import nn\n\nnet = nn.Linear(4, 2)\n\n\ndef evaluate(x):\n    return net(x).argmax(1)\n";

#[test]
fn json_evidence_names_the_construction_line() {
    let dir = tree(&[("eval.py", EVAL_LINEAR.as_bytes())]);
    let (out, code) = stdout(memlint().current_dir(dir.path()).args(["check", "--no-cache", "--output-format", "json", "eval.py"]));
    assert_eq!(code, 1, "{out}");
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(value.as_array().unwrap().len(), 1, "{out}");
    assert_eq!(value[0]["code"], "MEM001");
    let evidence = value[0]["evidence"].as_array().unwrap();
    // The construction: a fact at `nn.Linear(4, 2)`, line 4, columns 7 to 22, naming it.
    let built = evidence.iter().find(|f| f["location"]["row"] == 4).unwrap_or_else(|| panic!("no fact on line 4: {evidence:#?}"));
    assert_eq!(built["location"], serde_json::json!({"row": 4, "column": 7}));
    assert_eq!(built["end_location"], serde_json::json!({"row": 4, "column": 22}));
    assert!(built["message"].as_str().unwrap().contains("`nn.Linear(4, 2)`"), "{built}");
    assert_eq!(built["cell"], serde_json::Value::Null);
    // Every fact has a message, and a location and end location together (or neither).
    for fact in evidence {
        assert!(!fact["message"].as_str().unwrap().is_empty(), "{fact}");
        assert_eq!(fact["location"].is_null(), fact["end_location"].is_null(), "{fact}");
    }
    insta::assert_json_snapshot!(evidence, @r###"
    [
      {
        "cell": null,
        "end_location": {
          "column": 15,
          "row": 8
        },
        "location": {
          "column": 12,
          "row": 8
        },
        "message": "`net` is a network (a `torch.nn.Module` instance)"
      },
      {
        "cell": null,
        "end_location": {
          "column": 22,
          "row": 4
        },
        "location": {
          "column": 7,
          "row": 4
        },
        "message": "assigned `nn.Linear(4, 2)` (line 4)"
      },
      {
        "cell": null,
        "end_location": {
          "column": 22,
          "row": 4
        },
        "location": {
          "column": 7,
          "row": 4
        },
        "message": "built by `nn.Linear(4, 2)` (line 4): `torch.nn.Linear`"
      },
      {
        "cell": null,
        "end_location": {
          "column": 18,
          "row": 8
        },
        "location": {
          "column": 12,
          "row": 8
        },
        "message": "gradients are on in `evaluate()`: no `torch.no_grad()` around the call, on the function, or in every caller"
      },
      {
        "cell": null,
        "end_location": {
          "column": 18,
          "row": 8
        },
        "location": {
          "column": 12,
          "row": 8
        },
        "message": "the output of `net(x)` reaches no backward pass and nothing with its history leaves the function"
      }
    ]
    "###);
}

/// A file problem (a syntax error, a file that is not UTF-8) has an empty evidence list:
/// the field is always there.
#[test]
fn json_evidence_is_empty_for_file_problems() {
    let dir = tree(&[("broken.py", b"def f(:\n    pass\nfor x in loader:\n    torch.cuda.empty_cache()\n"), ("latin1.py", b"x = '\xe9'\n")]);
    let (out, _) = stdout(memlint().current_dir(dir.path()).args(["check", "--no-cache", "--output-format", "json", "broken.py", "latin1.py"]));
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    let problems: Vec<&serde_json::Value> = value.as_array().unwrap().iter().filter(|e| e["code"].is_null()).collect();
    let names: Vec<&str> = problems.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["syntax-error", "io-error"], "{out}");
    assert!(problems.iter().all(|p| p["evidence"] == serde_json::json!([])), "{out}");
}

/// The text report lists the facts under the finding, each with `path:row:col`; the
/// concise report stays one line per finding.
#[test]
fn text_output_lists_the_evidence_and_concise_does_not() {
    let dir = tree(&[("eval.py", EVAL_LINEAR.as_bytes())]);
    let (out, _) = stdout(memlint().current_dir(dir.path()).args(["check", "--no-cache", "eval.py"]));
    let start = out.find("\n  evidence:\n").unwrap_or_else(|| panic!("no evidence section: {out}"));
    let section = &out[start + 1..];
    let section = &section[..section.find("\n\n").unwrap() + 1];
    // After the help, before the blank line that ends the finding.
    assert!(out[..start].contains("  help: run evaluation under"), "{out}");
    insta::assert_snapshot!(section, @r###"
      evidence:
        - eval.py:8:12: `net` is a network (a `torch.nn.Module` instance)
        - eval.py:4:7: assigned `nn.Linear(4, 2)` (line 4)
        - eval.py:4:7: built by `nn.Linear(4, 2)` (line 4): `torch.nn.Linear`
        - eval.py:8:12: gradients are on in `evaluate()`: no `torch.no_grad()` around the call, on the
          function, or in every caller
        - eval.py:8:12: the output of `net(x)` reaches no backward pass and nothing with its history
          leaves the function
    "###);
    // Wrapped at the report's width (100 columns).
    assert!(section.lines().all(|l| l.chars().count() <= 100), "{section}");
    let (concise, _) = stdout(memlint().current_dir(dir.path()).args(["check", "--no-cache", "-q", "--output-format", "concise", "eval.py"]));
    assert_eq!(concise.lines().count(), 1, "{concise}");
    assert!(concise.starts_with("eval.py:8:12: MEM001 ") && !concise.contains("evidence"), "{concise}");
}
