//! The test command itself (scripts/test-all.sh): every step runs whatever failed before
//! it, a table of the steps ends the run, and the exit status says whether all passed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn steps(script: &str) -> (String, String, i32) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source scripts/lib/steps.sh; {script}"))
        .current_dir(root())
        .output()
        .expect("bash");
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned(), out.status.code().unwrap_or(-1))
}

#[test]
fn a_failing_step_does_not_stop_the_others_and_the_summary_names_it() {
    let (out, err, code) = steps("run_step first true; run_step second false; run_step third 'echo' ran; skip_step fourth 'no binary'; summary");
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("==> third\nran"), "the step after a failure still ran: {out}");
    let table = &out[out.find("==> summary").expect("a summary table")..];
    for (step, result) in [("first", "passed"), ("second", "FAILED (exit 1)"), ("third", "passed"), ("fourth", "SKIPPED: no binary")] {
        let row = table.lines().find(|l| l.starts_with(step)).unwrap_or_else(|| panic!("no row for {step}: {table}"));
        assert!(row.contains(result), "{row}");
    }
    assert!(err.contains("2 of 4 steps did not pass"), "{err}");
}

#[test]
fn all_steps_passing_exits_zero() {
    let (out, err, code) = steps("run_step a true; run_step b true; summary");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("all 2 steps passed"), "{out}");
}

#[test]
fn the_test_command_runs_every_step_and_every_test_binary() {
    let script = std::fs::read_to_string(root().join("scripts/test-all.sh")).unwrap();
    assert!(script.contains("source scripts/lib/steps.sh"), "test-all.sh records its steps");
    assert!(!script.lines().any(|l| l.trim_start().starts_with("set -e") || l.contains("set -euo")), "no step may stop the run");
    assert!(script.contains("--no-fail-fast"), "cargo test must run every test binary");
    assert!(script.trim_end().ends_with("summary"), "the run ends with the summary and its status");
}
