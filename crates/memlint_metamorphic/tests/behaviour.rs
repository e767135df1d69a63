//! Every transformation keeps what a program does: the programs of `tests/programs` (plain
//! Python shaped like training code: classes with `__call__`, loops with accumulations and
//! gates, closures, globals, comprehensions, generators, decorators, keyword arguments)
//! are run with `python3` before and after each rewrite, and must print the same.
//!
//! Without `python3` on the machine the runs are skipped with a notice; the unit tests of
//! each transformation (its output text) still run.

use std::path::{Path, PathBuf};
use std::process::Command;

use memlint_metamorphic::transform::{self, Context};

fn programs() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let mut found: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    found.sort();
    assert!(found.len() >= 2, "programs not found in {}", dir.display());
    found
}

fn python() -> Option<&'static str> {
    ["python3", "python"].into_iter().find(|p| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()))
}

/// Runs `main` (with `modules` beside it) in a fresh folder; stdout, or the error.
fn run(python: &str, dir: &Path, main: &str, modules: &[(String, String)]) -> Result<String, String> {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("main.py"), main).unwrap();
    for (name, text) in modules {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let out = Command::new(python).arg("main.py").current_dir(dir).env("PYTHONDONTWRITEBYTECODE", "1").output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn every_transformation_applies_to_the_programs() {
    for t in transform::ALL {
        let applied = programs().iter().filter(|(_, source)| (t.apply)(source, &Context::default()).is_some()).count();
        assert!(applied > 0, "{} applies to none of the programs", t.name);
    }
}

#[test]
fn rewritten_programs_print_what_the_originals_print() {
    let Some(python) = python() else {
        eprintln!("python3 not found: the rewritten programs are not run (the transformations' unit tests still check their output)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for (name, source) in programs() {
        let base: PathBuf = tmp.path().join(name.trim_end_matches(".py"));
        let expected = run(python, &base.join("original"), &source, &[]).unwrap_or_else(|e| panic!("{name} fails as it is: {e}"));
        for t in transform::ALL {
            let Some(rewrite) = (t.apply)(&source, &Context::default()) else { continue };
            let got = run(python, &base.join(t.name), &rewrite.text, &rewrite.modules)
                .unwrap_or_else(|e| panic!("{name} after {}: fails:\n{e}\n{}", t.name, rewrite.text));
            assert_eq!(got, expected, "{name} after {} prints something else:\n{}", t.name, rewrite.text);
            compared += 1;
        }
    }
    assert!(compared >= transform::ALL.len(), "only {compared} rewrites run");
}

/// CPython accepts every rewrite of every fixture case and example (tree-sitter is more
/// lenient: it parses inconsistent tabs, and `"` inside an f-string's braces): each is
/// compiled with `compile()`, without running it (they need PyTorch).
#[test]
fn cpython_compiles_every_rewrite_of_the_fixtures_and_examples() {
    let Some(python) = python() else {
        eprintln!("python3 not found: the rewrites are not compiled (the harness still checks that tree-sitter parses them)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut count = 0;
    for case in memlint_metamorphic::cases::builtin().unwrap() {
        for t in transform::ALL {
            let Some(rewrite) = (t.apply)(&case.source, &case.context) else { continue };
            let dir = tmp.path().join(format!("{count}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("case.py"), format!("# {} after {}\n{}", case.name, t.name, rewrite.text)).unwrap();
            for (name, text) in &rewrite.modules {
                std::fs::write(dir.join(name), text).unwrap();
            }
            count += 1;
        }
    }
    assert!(count > 1000, "only {count} rewrites");
    let script = "import pathlib, sys\nbad = []\nfor p in sorted(pathlib.Path(sys.argv[1]).rglob('*.py')):\n    try:\n        compile(p.read_text(), str(p), 'exec')\n    except SyntaxError as e:\n        bad.append(f'{p}: {e}: ' + p.read_text().splitlines()[0])\nprint('\\n'.join(bad))\nsys.exit(1 if bad else 0)\n";
    let out = Command::new(python).arg("-W").arg("ignore").arg("-c").arg(script).arg(tmp.path()).output().unwrap();
    assert!(out.status.success(), "rewrites CPython rejects:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}
