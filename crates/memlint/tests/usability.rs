//! What a new user meets first (issue 28, item 8): README's examples are the real output,
//! both spellings of the report options work in every command, `memlint rule` lists the
//! rules, an empty folder warns, concise lines show the severity, and rule links work
//! outside memlint's repository.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use memlint_linter::Rule;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `memlint` as a user runs it: no colour, no results cache written into the tree.
fn memlint() -> Command {
    let mut cmd = Command::cargo_bin("memlint").unwrap();
    cmd.env("NO_COLOR", "1").env("MEMLINT_NO_CACHE", "true").env_remove("MEMLINT_OUTPUT_FORMAT");
    cmd
}

struct Ran {
    out: String,
    err: String,
    code: i32,
}

fn run(cmd: &mut Command) -> Ran {
    let o = cmd.output().unwrap();
    Ran { out: String::from_utf8(o.stdout).unwrap(), err: String::from_utf8(o.stderr).unwrap(), code: o.status.code().unwrap() }
}

const BAD: &str = "import torch\n\nfor x in loader:\n    model(x).sum().backward()\n    torch.cuda.empty_cache()\n";

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

/// The ```text blocks of a Markdown file that show a `$ memlint ...` command and its
/// output: (command line, output).
fn shown_runs(markdown: &str) -> Vec<(String, String)> {
    let mut runs = Vec::new();
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "```text" {
            continue;
        }
        let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        if let Some(command) = block.first().and_then(|l| l.strip_prefix("$ memlint ")) {
            runs.push((command.to_owned(), block[1..].iter().map(|l| format!("{l}\n")).collect()));
        }
    }
    runs
}

/// README's examples are what the command prints (it showed `[fix: ...]` where memlint
/// says `[unsafe fix: ...]`, for a `train.py` that is not in the repository).
#[test]
fn readme_examples_are_the_real_output() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let runs = shown_runs(&readme);
    assert!(runs.len() >= 2, "README shows no `$ memlint` runs in ```text blocks: {runs:#?}");
    assert!(readme.find("```text\n$ memlint check").unwrap() < readme.find("## Quick start").unwrap(), "the headline is one of them");
    for (command, shown) in runs {
        let ran = run(memlint().current_dir(repo()).args(command.split_whitespace()));
        assert!(ran.code == 0 || ran.code == 1, "`memlint {command}` exited {}: {}", ran.code, ran.err);
        let printed: String = ran.out.lines().map(|l| format!("{}\n", l.trim_end())).collect();
        let shown: String = shown.lines().map(|l| format!("{}\n", l.trim_end())).collect();
        assert_eq!(printed, shown, "README shows other output than `memlint {command}` prints");
    }
}

/// `check` spelled `--output-format`/`--output-file`, `snapshot` and `verify`
/// `--format`/`--output`: each command takes both, and its --help says so.
#[test]
fn both_spellings_of_format_and_output_work_everywhere() {
    let dir = tree(&[("bad.py", BAD)]);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    for (i, spelling) in [["--output-format", "--output-file"], ["--format", "--output"], ["--format", "-o"]].iter().enumerate() {
        let file = format!("check{i}.json");
        let ran = run(memlint().current_dir(dir.path()).args(["check", "bad.py", spelling[0], "json", spelling[1], &file]));
        assert_eq!(ran.code, 1, "{spelling:?}: {}", ran.err);
        let v: Value = serde_json::from_str(&read(&file)).unwrap();
        assert_eq!(v[0]["code"], "MEM004", "{spelling:?}");
    }

    let pickle = repo().join("tests/snapshot/data/eval_no_grad_bad.pickle");
    let mut reports = Vec::new();
    for (i, spelling) in [["--format", "--output"], ["--output-format", "--output-file"]].iter().enumerate() {
        let file = format!("snapshot{i}.json");
        let ran = run(memlint().current_dir(dir.path()).arg("snapshot").arg(&pickle).args([spelling[0], "json", spelling[1], &file]));
        assert_eq!(ran.code, 0, "{spelling:?}: {}", ran.err);
        reports.push(serde_json::from_str::<Value>(&read(&file)).unwrap());
        let file = format!("diff{i}.json");
        let ran = run(memlint().current_dir(dir.path()).args(["snapshot", "diff"]).arg(&pickle).arg(&pickle).args([spelling[0], "json", spelling[1], &file]));
        assert_eq!(ran.code, 0, "diff {spelling:?}: {}", ran.err);
        serde_json::from_str::<Value>(&read(&file)).unwrap();
    }
    assert_eq!(reports[0], reports[1]);

    // verify on the simulator (no GPU), on a small workload.
    for (i, spelling) in [["--format", "--output"], ["--output-format", "--output-file"]].iter().enumerate() {
        let file = format!("verify{i}.json");
        let ran = run(memlint().current_dir(dir.path()).args(["verify", "--backend", "sim", "--rule", "MEM004", "--layers", "1", "--hidden", "64"]).args([
            "--batch", "8", "--iters", "2", spelling[0], "json", spelling[1], &file,
        ]));
        assert_eq!(ran.code, 0, "{spelling:?}: {}", ran.err);
        assert_eq!(serde_json::from_str::<Value>(&ran.out).unwrap()["backend"], "sim", "{spelling:?}: the JSON report on stdout");
        assert_eq!(serde_json::from_str::<Value>(&read(&file)).unwrap()["backend"], "sim", "{spelling:?}");
    }

    for (command, aliases) in [
        (&["check"][..], ["[aliases: --format]", "[aliases: --output]"]),
        (&["snapshot"][..], ["[aliases: --output-format]", "[aliases: --output-file]"]),
        (&["snapshot", "diff"][..], ["[aliases: --output-format]", "[aliases: --output-file]"]),
        (&["verify"][..], ["[aliases: --output-format]", "[aliases: --output-file]"]),
        (&["rule"][..], ["[aliases: --format]", ""]),
    ] {
        let help = run(memlint().args(command).arg("--help")).out.replace('\n', " ");
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ").replace("[alias:", "[aliases:");
        for alias in aliases {
            assert!(help.contains(alias), "`memlint {} --help` does not show {alias}: {help}", command.join(" "));
        }
    }
}

/// `memlint rule` alone names --all and --list; --list prints one line per rule, in text
/// and JSON, with what the registry says.
#[test]
fn rule_list_and_rule_alone() {
    let alone = run(memlint().arg("rule"));
    assert_eq!(alone.code, 2);
    assert!(alone.err.contains("--all") && alone.err.contains("--list"), "{}", alone.err);

    let list = run(memlint().args(["rule", "--list"]));
    assert_eq!(list.code, 0, "{}", list.err);
    let lines: Vec<&str> = list.out.lines().collect();
    assert_eq!(lines.len(), Rule::ALL.len(), "{}", list.out);
    for (line, rule) in lines.iter().zip(Rule::ALL) {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&words[..2], [rule.code(), rule.name()], "{line}");
        assert_eq!(words[2] == "[*]", rule.fixable(), "{line}");
        assert!(line.ends_with(rule.summary()), "{line}");
    }
    let column = |l: &str| l.find(Rule::ALL[0].summary().split_whitespace().next().unwrap());
    assert_eq!(column(lines[0]), Some(Rule::ALL.iter().map(|r| r.name().len()).max().unwrap() + 12), "summaries are aligned: {}", list.out);

    for format in ["--output-format", "--format"] {
        let json = run(memlint().args(["rule", "--list", format, "json"]));
        assert_eq!(json.code, 0, "{}", json.err);
        let v: Vec<Value> = serde_json::from_str(&json.out).unwrap();
        assert_eq!(v.len(), Rule::ALL.len());
        for (entry, rule) in v.iter().zip(Rule::ALL) {
            assert_eq!(entry["code"], rule.code());
            assert_eq!(entry["name"], rule.name());
            assert_eq!(entry["summary"], rule.summary());
            assert_eq!(entry["fixable"], rule.fixable());
            assert_eq!(entry["url"], rule.url());
            assert!(entry.get("explanation").is_none(), "{entry}");
        }
    }
    let one: Value = serde_json::from_str(&run(memlint().args(["rule", "MEM004", "--output-format", "json"])).out).unwrap();
    assert_eq!(one["name"], "empty-cache-in-loop");
    assert_eq!(one["explanation"], Rule::EmptyCacheInLoop.doc().markdown);
    let all: Vec<Value> = serde_json::from_str(&run(memlint().args(["rule", "--all", "--output-format", "json"])).out).unwrap();
    assert_eq!(all.len(), Rule::ALL.len());
    assert!(all.iter().all(|e| e["explanation"].as_str().is_some_and(|t| t.contains("## What it does"))));
    // The text of one rule and of --all are as before.
    assert!(run(memlint().args(["rule", "MEM004"])).out.starts_with("# empty-cache-in-loop (MEM004)\n"));
    assert_eq!(run(memlint().args(["rule", "--all"])).out.matches("\n---\n").count(), Rule::ALL.len() - 1);
    // An unknown rule points to the list.
    let unknown = run(memlint().args(["rule", "MEM999"]));
    assert_eq!(unknown.code, 2);
    assert!(unknown.err.contains("`memlint rule --list`"), "{}", unknown.err);
}

/// As ruff: a folder with no Python file or notebook passes (exit 0), with a warning on
/// standard error; `-q` leaves it out; a folder with a file says nothing.
#[test]
fn an_empty_folder_warns() {
    const WARNING: &str = "warning: No Python files found under the given path(s)\n";
    let dir = tree(&[("notes.txt", "not python\n"), ("sub/README.md", "# hi\n")]);
    let text = run(memlint().arg("check").arg(dir.path()));
    assert_eq!(text.code, 0);
    assert_eq!(text.err, WARNING);
    assert!(text.out.contains("All checks passed! (0 files checked)"), "{}", text.out);
    let json = run(memlint().args(["check", "--output-format", "json"]).arg(dir.path().join("sub")));
    assert_eq!((json.code, json.out.as_str(), json.err.as_str()), (0, "[]\n", WARNING));
    let quiet = run(memlint().args(["check", "-q"]).arg(dir.path()));
    assert_eq!((quiet.code, quiet.out.as_str(), quiet.err.as_str()), (0, "", ""));
    // A file named on the command line and excluded with --force-exclude (pre-commit) is
    // the same case, as in ruff.
    std::fs::write(dir.path().join("a.py"), "x = 1\n").unwrap();
    std::fs::write(dir.path().join("memlint.toml"), "extend-exclude = [\"a.py\"]\n").unwrap();
    let excluded = run(memlint().current_dir(dir.path()).args(["check", "--force-exclude", "a.py"]));
    assert_eq!((excluded.code, excluded.err.as_str()), (0, WARNING), "{}", excluded.out);
    let named = run(memlint().current_dir(dir.path()).args(["check", "a.py"]));
    assert_eq!((named.code, named.err.as_str()), (0, ""), "{}", named.out);
    assert!(named.out.contains("(1 file checked)"), "{}", named.out);
}

/// Concise lines show the severity after ruff's `path:row:col: CODE [*]`.
#[test]
fn concise_lines_show_the_severity() {
    let source = "import torch\n\nfor x in loader:\n    model(x).sum().backward()\n    torch.cuda.empty_cache()\n    ckpt = torch.load('a.pt')\n";
    let dir = tree(&[("a.py", source), ("pyproject.toml", "[tool.memlint]\nseverity = { MEM008 = \"error\", MEM004 = \"info\" }\n")]);
    let ran = run(memlint().current_dir(dir.path()).args(["check", "--output-format", "concise", "-q", "a.py"]));
    assert_eq!(ran.code, 1, "{}", ran.err);
    let lines: Vec<&str> = ran.out.lines().collect();
    assert!(lines[0].starts_with("a.py:5:5: MEM004 [*] [info] `torch.cuda.empty_cache()`"), "{lines:#?}");
    assert!(lines[1].starts_with("a.py:6:12: MEM008 [error] `torch.load"), "{lines:#?}");
    std::fs::remove_file(dir.path().join("pyproject.toml")).unwrap();
    let ran = run(memlint().current_dir(dir.path()).args(["check", "--output-format", "concise", "-q", "a.py"]));
    assert!(ran.out.lines().all(|l| l.contains(" [warning] ")), "{}", ran.out);
}

/// Rule links are `memlint rule <name>`: a command that prints the documentation wherever
/// memlint is installed, not a path inside memlint's repository.
#[test]
fn rule_links_work_outside_the_repository() {
    let dir = tree(&[("bad.py", BAD)]);
    for rule in Rule::ALL {
        let url = rule.url();
        assert_eq!(url, format!("memlint rule {}", rule.name()));
        let args: Vec<&str> = url.split_whitespace().skip(1).collect();
        let ran = run(memlint().current_dir(dir.path()).args(&args));
        assert_eq!(ran.code, 0, "`{url}`: {}", ran.err);
        assert!(ran.out.contains(rule.doc().markdown.trim()), "`{url}` prints the documentation");
    }
    let json: Value = serde_json::from_str(&run(memlint().current_dir(dir.path()).args(["check", "--output-format", "json"])).out).unwrap();
    assert_eq!(json[0]["url"], "memlint rule empty-cache-in-loop");
    let text = run(memlint().current_dir(dir.path()).arg("check")).out;
    assert!(text.contains("MEM004 empty-cache-in-loop (memlint rule empty-cache-in-loop)"), "{text}");
    let sarif: Value = serde_json::from_str(&run(memlint().current_dir(dir.path()).args(["check", "--output-format", "sarif"])).out).unwrap();
    let rules = sarif["runs"][0]["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(rules.iter().all(|r| r["properties"]["docs"] == format!("memlint rule {}", r["name"].as_str().unwrap())), "{rules:#?}");
    for report in [json.to_string(), text, sarif.to_string()] {
        assert!(!report.contains("docs/rules"), "{report}");
    }
}

/// The snapshot page names the command for a finding's rule instead of linking to a path
/// that is not there.
#[test]
fn the_snapshot_page_names_the_rule_command() {
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("page.html");
    let ran = run(memlint().current_dir(repo()).args(["snapshot", "tests/snapshot/data/retain_graph_bad.pickle", "--format", "html", "--source"]).arg(repo().join("tests/snapshot/scripts")).arg("-o").arg(&page));
    assert_eq!(ran.code, 0, "{}", ran.err);
    let html = std::fs::read_to_string(&page).unwrap();
    let findings = &html[html.find("<h2>Findings in these files</h2>").expect("the findings section")..];
    let items: Vec<&str> = findings.split("<li id=\"finding-").skip(1).collect();
    assert!(!items.is_empty(), "{findings}");
    assert!(findings.contains("MEM005 retain-graph-in-loop (documentation: <code>memlint rule retain-graph-in-loop</code>)"), "{findings}");
    for item in items {
        assert!(item.contains("(documentation: <code>memlint rule ") && !item.contains("href"), "{item}");
    }
    assert!(!html.contains("docs/rules"), "{findings}");
}
