//! Project-wide analysis in `memlint check`: the multi-file projects under
//! `tests/fixtures/project/`, each linted with and without `--no-project`, and the
//! results cache re-linting a file when a module it imports changes.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn memlint() -> Command {
    let mut cmd = Command::cargo_bin("memlint").unwrap();
    cmd.env("NO_COLOR", "1");
    cmd
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/project")
}

/// The findings of `memlint check` on fixture project `name`, as `file:line CODE`
/// (paths relative to the project, `/`-separated), sorted.
fn findings(name: &str, extra: &[&str]) -> Vec<String> {
    let dir = fixtures().join(name);
    let output = memlint()
        .current_dir(&dir)
        .args(["check", "--no-cache", "--output-format", "json"])
        .args(extra)
        .arg(".")
        .output()
        .unwrap();
    let code = output.status.code().unwrap();
    assert!(code == 0 || code == 1, "exit {code}: {}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut found: Vec<String> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let file = d["filename"].as_str().unwrap().trim_start_matches("./").replace('\\', "/");
            format!("{}:{} {}", file, d["location"]["row"], d["code"].as_str().unwrap())
        })
        .collect();
    found.sort();
    found
}

#[test]
fn classes_from_sibling_modules_relative_reexported_and_star_imported() {
    assert_eq!(
        findings("sibling", &[]),
        [
            // `from .models import Generator`; the constructor call on line 7 is not a forward pass.
            "gan/preview.py:10 MEM001",
            // `from gan import Critic`, re-exported by gan/__init__.py, its base in gan/base.py.
            "score.py:10 MEM001",
            // `from nets import *` with `__all__`.
            "star.py:8 MEM001",
        ]
    );
    // Alone, each file still shows these are networks by how they are used (`.eval()`,
    // a forward pass whose result is only printed); the project tells it from the classes.
    // `a_changed_sibling_module_relints_the_importing_file` has a case only the project decides.
    assert_eq!(findings("sibling", &["--no-project"]), findings("sibling", &[]));
}

#[test]
fn only_the_project_tells_these_classes_are_networks() {
    // Names that say nothing (`Enc`, `Blob`), no `.eval()`: the classes in nets.py and
    // gan/models.py derive `nn.Module`, reached through `from nets import *` (with
    // `__all__`), `from .models import` and a re-export by gan/__init__.py. `Opts` and
    // `Settings` are callable classes of something else: calling them is no forward pass.
    assert_eq!(findings("opaque", &[]), ["gan/rel.py:8 MEM001", "reexp.py:8 MEM001", "star.py:8 MEM001"]);
    assert!(findings("opaque", &["--no-project"]).is_empty(), "alone, nothing says they are networks");
}

#[test]
fn a_factory_in_another_module() {
    assert_eq!(findings("factory", &[]), ["run.py:15 MEM001", "run.py:8 MEM001"]);
    // Known by use alone too (`.eval()`, evaluation by behaviour).
    assert_eq!(findings("factory", &["--no-project"]), findings("factory", &[]));
}

#[test]
fn a_factory_in_another_module_handed_the_class_it_builds() {
    // `build(Blob, 8)` returns `model_cls(dim).cuda()`: an instance of `Blob`.
    assert_eq!(findings("factory_handed_class", &[]), ["run.py:18 MEM001"]);
    assert!(findings("factory_handed_class", &["--no-project"]).is_empty(), "alone, `build` returns something unknown");
}

#[test]
fn an_evaluation_function_called_only_under_no_grad_from_another_module_is_not_flagged() {
    assert!(findings("callers_no_grad", &[]).is_empty());
    assert_eq!(findings("callers_no_grad", &["--no-project"]), ["evaluation.py:5 MEM001"], "alone, it is flagged");
}

#[test]
fn a_method_called_only_under_no_grad_on_instances_in_another_module_is_not_flagged() {
    // train.py builds `ddpm = DDPM(...).to(device)` and samples under `torch.no_grad()`.
    assert!(findings("method_callers_no_grad", &[]).is_empty());
    assert_eq!(findings("method_callers_no_grad", &["--no-project"]), ["ddpm.py:18 MEM001"], "alone, it is flagged");
}

#[test]
fn an_evaluation_function_called_with_gradients_from_another_module_is_flagged() {
    assert_eq!(findings("callers_grad", &[]), ["evaluation.py:5 MEM001"]);
}

#[test]
fn a_function_called_here_only_under_no_grad_and_elsewhere_with_gradients_is_flagged() {
    // evaluation.py calls `score` only under `torch.no_grad()`, and `predict` only from
    // `score`; main.py calls `score` with gradients on. So `score` is no no-grad function,
    // and neither is `predict`, which was one only through it.
    assert_eq!(findings("local_no_grad_callers_grad", &[]), ["evaluation.py:6 MEM001"]);
    assert!(findings("local_no_grad_callers_grad", &["--no-project"]).is_empty(), "alone, both run only without gradients");
}

#[test]
fn accumulation_through_a_method_of_a_class_from_another_module() {
    assert_eq!(findings("meter", &[]), ["train.py:13 MEM002", "train.py:14 MEM002"]);
    assert!(findings("meter", &["--no-project"]).is_empty());
}

#[test]
fn a_class_from_another_module_that_loads_a_pretrained_network() {
    // `TruncatedVGG` (models.py) loads `vgg19(pretrained=True)` in its `__init__` and never
    // freezes it; train.py mentions no pretrained source of its own.
    assert_eq!(findings("pretrained", &[]), ["train.py:5 MEM012"]);
    assert!(findings("pretrained", &["--no-project"]).is_empty());
}

#[test]
fn a_data_parallel_subclass_from_another_module() {
    // exp/train.py never says `DataParallel`: the class from pkg/parallel.py derives it.
    assert_eq!(findings("parallel_subclass", &[]), ["exp/train.py:8 MEM007"]);
    assert!(findings("parallel_subclass", &["--no-project"]).is_empty(), "alone, nothing says it is one");
}

#[test]
fn a_library_module_brought_by_a_star_import() {
    // `nn` in main.py is model_3d's `import torch.nn as nn`, through `from model_3d import *`.
    assert_eq!(findings("star_library", &[]), ["main.py:6 MEM007"]);
    assert!(findings("star_library", &["--no-project"]).is_empty(), "alone, `nn` is unknown");
}

/// A network class, and a file that uses it with nothing of its own saying `g` is a
/// network (no `.eval()`, a name that says nothing): only models.py does.
const SYNTH_MODELS: &str = "import torch.nn as nn\n\n\nclass Synth(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.body = nn.Linear(8, 8)\n\n    def forward(self, z):\n        return self.body(z)\n";
const SYNTH_PREVIEW: &str = "from models import Synth\n\n\ndef show(loader):\n    g = Synth()\n    for z in loader:\n        print(g(z))\n";

/// A fresh folder with `models.py` and `preview.py` (the Synth texts), and the cache folder
/// the tests pass to `--cache-dir`.
fn synth_project() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("models.py"), SYNTH_MODELS).unwrap();
    fs::write(dir.path().join("preview.py"), SYNTH_PREVIEW).unwrap();
    let cache = dir.path().join("cache");
    (dir, cache)
}

#[test]
fn a_changed_sibling_module_relints_the_importing_file() {
    let (dir, cache) = synth_project();
    let models = SYNTH_MODELS;
    let run = || {
        let output = memlint()
            .current_dir(dir.path())
            .args(["check", "--output-format", "concise", "--cache-dir"])
            .arg(&cache)
            .arg("preview.py")
            .output()
            .unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    let first = run();
    assert!(first.contains("preview.py:7:15: MEM001"), "{first}");
    assert_eq!(run(), first, "unchanged: the cached findings");
    // Synth stops being a network: preview.py's text is the same, its finding goes.
    fs::write(dir.path().join("models.py"), models.replace("(nn.Module)", "")).unwrap();
    let after = run();
    assert!(!after.contains("MEM001"), "the importing file was linted again: {after}");
    // And back.
    fs::write(dir.path().join("models.py"), models).unwrap();
    assert!(run().contains("preview.py:7:15: MEM001"));
}

#[test]
fn a_module_that_starts_calling_a_function_relints_the_functions_module() {
    // evaluation.py's `score` runs its forward passes after `net.eval()`: reported while no
    // module calls it. Then main.py, which said nothing of it, calls it under `no_grad()`:
    // main.py was no module evaluation.py's lint read, yet its result must be redone.
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    fs::copy(fixtures().join("callers_no_grad/evaluation.py"), dir.path().join("evaluation.py")).unwrap();
    fs::write(dir.path().join("main.py"), "def main():\n    print('hello')\n").unwrap();
    let run = |cached: bool| {
        let output = memlint()
            .current_dir(dir.path())
            .args(["check", "--output-format", "concise"])
            .args(if cached { vec!["--cache-dir".into(), cache.clone().into_os_string()] } else { vec!["--no-cache".into()] })
            .arg(".")
            .output()
            .unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    assert!(run(true).contains("evaluation.py:5:15: MEM001"));
    fs::copy(fixtures().join("callers_no_grad/main.py"), dir.path().join("main.py")).unwrap();
    assert!(!run(false).contains("MEM001"), "a fresh run finds nothing");
    let rerun = run(true);
    assert!(!rerun.contains("MEM001"), "the cached result was redone: {rerun}");
}

#[test]
fn a_rerun_reads_the_summaries_of_unchanged_modules_from_the_cache() {
    let (dir, cache) = synth_project();
    // (findings, the project's statistics line)
    let run = |extra: &[&str]| {
        let output = memlint()
            .current_dir(dir.path())
            .env("MEMLINT_PROJECT_STATS", "1")
            .args(["check", "--output-format", "concise", "--cache-dir"])
            .arg(&cache)
            .args(extra)
            .arg("preview.py")
            .output()
            .unwrap();
        let stats = String::from_utf8(output.stderr).unwrap().lines().find(|l| l.starts_with("project:")).unwrap_or_default().to_owned();
        (String::from_utf8(output.stdout).unwrap(), stats)
    };
    let (first, stats) = run(&[]);
    assert!(first.contains("preview.py:7:15: MEM001"), "{first}");
    assert!(stats.contains("1 read and parsed for their summary alone") && stats.contains("0 summaries read from the cache"), "{stats}");
    // preview.py changes, models.py does not: its summary comes from the cache, unparsed.
    fs::write(dir.path().join("preview.py"), SYNTH_PREVIEW.replace("print(g(z))", "print(g(z))  # shown")).unwrap();
    let (second, stats) = run(&[]);
    assert!(second.contains("preview.py:7:15: MEM001"), "{second}");
    assert!(stats.contains("0 read and parsed for their summary alone") && stats.contains("1 summaries read from the cache"), "{stats}");
    // A damaged entry is not read: the module is parsed again, the findings are the same.
    let mut entries = 0;
    let mut stack = vec![cache.clone()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "summary") {
                fs::write(&p, b"\xff\x00 not a summary").unwrap();
                entries += 1;
            }
        }
    }
    assert!(entries >= 1, "summaries are kept in the cache folder");
    fs::write(dir.path().join("preview.py"), SYNTH_PREVIEW.replace("print(g(z))", "print(g(z))  # again")).unwrap();
    let (third, stats) = run(&[]);
    assert_eq!(third, second, "{stats}");
    assert!(stats.contains("1 read and parsed for their summary alone"), "{stats}");
    // `--no-cache` neither reads nor writes summaries.
    let (_, stats) = run(&["--no-cache"]);
    assert!(stats.contains("0 summaries read from the cache"), "{stats}");
}

#[test]
fn a_project_module_that_does_not_parse_or_read_is_unknown_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("models.py"), b"class Generator(nn.Module:\n  \xff\xfe broken").unwrap();
    fs::write(dir.path().join("cycle_a.py"), "from cycle_b import *\n").unwrap();
    fs::write(dir.path().join("cycle_b.py"), "from cycle_a import *\nfrom cycle_b import X\n").unwrap();
    fs::write(
        dir.path().join("use.py"),
        "from models import Generator\nfrom cycle_a import *\n\n\ndef show(loader):\n    g = Generator()\n    h = Missing()\n    g.eval()\n    for z in loader:\n        print(g(z), h(z))\n",
    )
    .unwrap();
    let output = memlint().current_dir(dir.path()).args(["check", "--no-cache", "use.py", "cycle_a.py", "cycle_b.py"]).output().unwrap();
    let code = output.status.code().unwrap();
    assert!(code == 0 || code == 1, "no crash on a broken module or an import cycle: {}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn the_prefilter_drops_no_finding_that_the_project_adds() {
    for name in ["sibling", "factory", "callers_no_grad", "callers_grad", "local_no_grad_callers_grad", "meter", "pretrained", "method_callers_no_grad"] {
        assert_eq!(findings(name, &[]), findings(name, &["--no-prefilter"]), "{name}");
    }
}

#[test]
fn modules_under_a_folder_the_script_puts_on_sys_path() {
    // `sys.path.append("../lib")` in examples/train.py: `from models import DGM` is
    // lib/models. `classify` runs a submodule (also in training, so it is reported where
    // validation only reads it); `sample` is inherited from lib/models/base.py's `VAE`;
    // `describe` only hands a submodule to `str`.
    assert_eq!(findings("sys_path", &[]), ["examples/train.py:17 MEM001", "examples/train.py:21 MEM001"]);
    // Without the project, what `DGM` is stays unknown.
    assert_eq!(findings("sys_path", &["--no-project"]), Vec::<String>::new());
}

#[test]
fn a_script_nobody_imports_is_never_parsed_for_its_summary() {
    // The pre-filter asks where examples/train.py's imports lead before its tree exists:
    // the folders it puts on `sys.path` come from its text, not from a summary of it
    // (which would parse it once more). Only the three modules under lib/ may be read for
    // their summary.
    let output = memlint()
        .current_dir(fixtures().join("sys_path"))
        .env("MEMLINT_PROJECT_STATS", "1")
        .args(["check", "--no-cache", "--output-format", "json", "."])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr.lines().find(|l| l.starts_with("project:")).unwrap_or_else(|| panic!("no project statistics in: {stderr}"));
    let parsed_alone: usize = line
        .split('(')
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected statistics line: {line}"));
    assert!(parsed_alone <= 3, "{line}");
    // And each of the four files is parsed once in all, whichever lint or question comes
    // first: lib/models/__init__.py (which no rule starts from) for its summary, the
    // others for their lints, whose trees give their summaries or come from them.
    let bytes: usize = ["examples/train.py", "lib/models/__init__.py", "lib/models/base.py", "lib/models/dgm.py"]
        .iter()
        .map(|f| std::fs::read(fixtures().join("sys_path").join(f)).unwrap().len())
        .sum();
    assert!(line.ends_with(&format!("; 4 parses of {bytes} bytes in all")), "{line}");
}

#[test]
fn the_files_a_run_parsed_are_listed_once_each_for_the_benchmark() {
    // MEMLINT_PARSED_FILES (scripts/bench-check.sh): every file the run parsed, for its
    // lint or for a summary alone. lib/models/__init__.py holds no word a rule starts
    // from, so it is not linted; it is parsed for its summary (train.py's import of
    // `models` leads through it). The other three are linted; a lint that took the tree
    // its summary was parsed into is not listed twice.
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("parsed.txt");
    let output = memlint()
        .current_dir(fixtures().join("sys_path"))
        .env("MEMLINT_PARSED_FILES", &list)
        .args(["check", "--no-cache", "--output-format", "json", "."])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let listed = std::fs::read_to_string(&list).expect("the list is written");
    let mut names: Vec<String> = listed
        .lines()
        .map(|l| {
            let path = std::path::Path::new(l);
            let parts: Vec<_> = path.components().rev().take(2).map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            format!("{}/{}", parts[1], parts[0])
        })
        .collect();
    names.sort();
    assert_eq!(names, ["examples/train.py", "models/__init__.py", "models/base.py", "models/dgm.py"], "{listed}");
}

/// A fresh folder holding `files` (name, text).
fn folder_of(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// `memlint check --no-cache` (concise) of folder `dir` with the project's statistics on
/// and `env` set: its exit status, its standard output, and the statistics line.
fn check_with_statistics(dir: &Path, env: &[(&str, &std::ffi::OsStr)]) -> (Option<i32>, String, String) {
    let mut command = memlint();
    command.current_dir(dir).env("MEMLINT_PROJECT_STATS", "1").args(["check", "--no-cache", "--output-format", "concise", "."]);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr.lines().find(|l| l.starts_with("project:")).unwrap_or_else(|| panic!("no project statistics in: {stderr}")).to_owned();
    (output.status.code(), stdout, line)
}

#[test]
fn a_module_no_other_file_imports_is_not_summarized_unless_asked() {
    // plot.py imports nothing of the project and no other file imports it, so its lint
    // makes no summary of it ("plot" written outside an import statement, in a comment of
    // train.py, does not count). Its own questions (what its star import of torch.nn
    // brings) are answered from its tree, not from a summary parsed for them. Nor is
    // train.py, which imports models.py but which no file imports: what it calls is asked
    // only when a lint asks who calls a function of models.py (none does here). models.py
    // is summarized.
    let dir = folder_of(&[
        ("models.py", "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n    def forward(self, x):\n        return self.fc(x)\n"),
        ("train.py", "# curves: see plot.py\nimport torch\nfrom models import Net\n\nnet = Net()\nopt = torch.optim.SGD(net.parameters(), lr=0.1)\nfor x in range(3):\n    loss = net(torch.randn(2, 4)).sum()\n    loss.backward()\n    opt.step()\n"),
        ("plot.py", "import torch\nfrom torch.nn import *\n\nnet = Linear(4, 2)\nnet.eval()\nx = torch.randn(3, 4)\nprint(net(x).argmax(1))\n"),
    ]);
    let parsed = dir.path().join("parsed.txt");
    let (_, stdout, line) = check_with_statistics(dir.path(), &[("MEMLINT_PARSED_FILES", parsed.as_os_str())]);
    assert!(stdout.contains("plot.py:7:7: MEM001"), "{stdout}");
    assert!(line.starts_with("project: 1 modules summarized for 3 files checked (0 read and parsed for their summary alone"), "{line}");
    assert!(line.contains("; 2 lints made no summary of a module no other file imports); 3 parses of "), "{line}");
    // Its lint parsed it all the same: the benchmark's list of parsed files has all three.
    let listed = std::fs::read_to_string(&parsed).expect("the list is written");
    let mut names: Vec<&str> = listed.lines().map(|l| l.rsplit('/').next().unwrap_or(l)).collect();
    names.sort();
    assert_eq!(names, ["models.py", "plot.py", "train.py"], "{listed}");
}

#[test]
fn a_caller_whose_lint_made_no_summary_is_read_when_asked_who_calls() {
    // a_main.py calls `score` only under `torch.no_grad()`; no file imports it, so its
    // lint (the first, on one thread; `empty_cache` lets it parse the file) makes no
    // summary of it. evaluation.py's lint then asks who calls `score`: a_main.py is read
    // and parsed again for its summary (and evaluation.py was parsed for the summary
    // a_main.py's lint asked for, its tree handed on to its own lint), and `score` is not
    // flagged, as when the caller's summary came from its lint.
    let dir = folder_of(&[
        ("evaluation.py", "def score(net, loader):\n    net.eval()\n    hits = 0\n    for x, y in loader:\n        out = net(x)\n        hits += (out.argmax(1) == y).sum().item()\n    return hits\n"),
        ("a_main.py", "import torch\n\nfrom evaluation import score\n\n\ndef main(net, val_loader):\n    with torch.no_grad():\n        print(score(net, val_loader))\n    torch.cuda.empty_cache()\n"),
    ]);
    let (status, stdout, line) = check_with_statistics(dir.path(), &[("RAYON_NUM_THREADS", "1".as_ref())]);
    assert_eq!(status, Some(0), "{stdout}{line}");
    assert!(line.starts_with("project: 2 modules summarized for 2 files checked (2 read and parsed for their summary alone, of which 1 trees"), "{line}");
    assert!(line.contains("; 1 lints made no summary of a module no other file imports); 3 parses of "), "{line}");
    // Alone, `score` is flagged: the caller's summary is what clears it.
    let alone = memlint().current_dir(dir.path()).args(["check", "--no-cache", "--no-project", "--output-format", "concise", "."]).output().unwrap();
    assert!(String::from_utf8_lossy(&alone.stdout).contains("evaluation.py:5:15: MEM001"), "{}", String::from_utf8_lossy(&alone.stdout));
}
