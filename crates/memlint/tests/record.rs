//! `memlint record`: the injection (a sitecustomize on a temporary PYTHONPATH entry), with the
//! stand-in torch of tests/standin_torch (see its README: PyTorch and a GPU are not needed
//! here; tests/gpu/batch/run.sh runs the same recorder on the real PyTorch), the programs of
//! tests/record_programs, and python3 from PATH.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn python() -> Option<&'static str> {
    let ok = std::process::Command::new("python3").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !ok {
        eprintln!("python3 is not on PATH: the record tests that run a program are skipped");
    }
    ok.then_some("python3")
}

fn record(dir: &Path, args: &[&str], pythonpath: Option<&str>) -> Output {
    let mut cmd = Command::cargo_bin("memlint").unwrap();
    cmd.current_dir(dir).arg("record").args(args);
    let standin = tests_dir().join("standin_torch");
    let pp = match pythonpath {
        Some(extra) => format!("{}:{extra}", standin.display()),
        None => standin.display().to_string(),
    };
    cmd.env("PYTHONPATH", pp).env_remove("MEMLINT_RECORD_DIR");
    cmd.output().unwrap()
}

fn program(name: &str) -> String {
    tests_dir().join("record_programs").join(name).display().to_string()
}

fn snapshot_json(dir: &Path, file: &str) -> Value {
    let out = Command::cargo_bin("memlint").unwrap().current_dir(dir).args(["snapshot", file, "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

#[test]
fn steps_stop_the_program_cleanly_after_the_snapshot() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = record(dir.path(), &["--steps", "3", "-o", "run.pickle", "--", py, &program("train.py"), "10"], None);
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{so}{se}");
    // the first scaler.step() skipped the optimizer: still a step; stopped in the third
    assert_eq!(so, "step 0\nstep 1\nfinally ran\n", "{se}");
    assert!(se.contains("wrote run.pickle after 3 optimizer steps (--steps), then the program was stopped"), "{se}");
    assert!(se.contains("batch size seen by the forward passes: 16"), "{se}");
    // the report, tied to the findings of the script's folder
    assert!(se.contains("alive at the peak, by line:") && se.contains("train.py:20 (main)"), "{se}");
    assert!(se.contains("findings in ") && se.contains("record_programs"), "{se}");
    // check's report and summary follow the heading, on standard error: the program runs a
    // forward pass whose output nothing backpropagates (MEM001)
    let heading = se.find("findings in ").unwrap();
    assert!(se.find("MEM001 eval-without-no-grad").is_some_and(|i| i > heading), "{se}");
    assert!(se.find("Found 1 finding in 1 file.").is_some_and(|i| i > heading), "{se}");
    let v = snapshot_json(dir.path(), "run.pickle");
    assert_eq!(v["record"]["reason"], "steps");
    assert_eq!(v["record"]["steps"], 3);
    assert_eq!(v["record"]["batch"], 16);
    // the snapshot's peak is the one the (stand-in) allocator reported
    assert_eq!(v["devices"][0]["peak_allocated_bytes"], v["record"]["max_memory_allocated"]);
}

#[test]
fn exit_status_and_output_pass_through_and_the_snapshot_is_written_at_exit() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = record(dir.path(), &["--no-lint", "--", py, &program("train.py"), "2", "7"], None);
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(text(&out.stdout), "step 0\nstep 1\nfinally ran\n");
    let se = text(&out.stderr);
    assert!(se.contains("wrote .memlint/snapshot.pickle at exit; it exited with status 7"), "{se}");
    assert!(!se.contains("findings in"), "--no-lint: {se}");
    let v = snapshot_json(dir.path(), ".memlint/snapshot.pickle");
    assert_eq!(v["record"]["reason"], "exit");
    assert_eq!(v["devices"][0]["peak_allocated_bytes"], v["record"]["max_memory_allocated"]);
}

#[test]
fn an_out_of_memory_error_is_in_the_snapshot() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = record(dir.path(), &["--no-lint", "-o", "oom.pickle", "--", py, &program("train.py"), "2", "0", "--oom"], None);
    assert_eq!(out.status.code(), Some(1), "the program's traceback exit status");
    let se = text(&out.stderr);
    assert!(se.contains("OutOfMemoryError") && se.contains("at exit, after 1 out-of-memory error(s)"), "{se}");
    let v = snapshot_json(dir.path(), "oom.pickle");
    assert_eq!(v["devices"][0]["ooms"].as_array().unwrap().len(), 1);
    assert_eq!(v["devices"][0]["ooms"][0]["requested_bytes"], 1u64 << 40);
}

#[test]
fn an_existing_sitecustomize_still_runs() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("sitecustomize.py"), "import sys\nprint('their sitecustomize ran'); sys.theirs = True\n").unwrap();
    let out = record(dir.path(), &["--no-lint", "--", py, "-c", "import sys, sitecustomize; print(sys.theirs, sitecustomize.__file__)"], Some(theirs.to_str().unwrap()));
    let so = text(&out.stdout);
    assert!(so.starts_with("their sitecustomize ran\nTrue "), "{so}{}", text(&out.stderr));
    assert!(so.trim_end().ends_with("theirs/sitecustomize.py"), "sitecustomize is theirs afterwards: {so}");
    // and it is not run twice when the recorder is given its own folder first
    assert_eq!(so.matches("their sitecustomize ran").count(), 1);
}

#[test]
fn a_program_that_never_uses_cuda_gets_a_clear_message() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = record(dir.path(), &["--", py, &program("no_cuda.py")], None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "trained on the CPU\n");
    let se = text(&out.stderr);
    assert!(se.contains("memlint record: the program never used CUDA: PyTorch's CUDA was never initialized, so nothing was recorded"), "{se}");
    assert!(!dir.path().join(".memlint/snapshot.pickle").exists());
    // without torch at all
    let out = record(dir.path(), &["--", py, "-c", "print(1)"], None);
    assert!(text(&out.stderr).contains("the program never imported torch"), "{}", text(&out.stderr));
    // python -I ignores PYTHONPATH: the recorder is not loaded, and torch is not found
    let out = record(dir.path(), &["--", py, "-I", "-c", "print(1)"], None);
    assert!(text(&out.stderr).contains("the program did not load memlint's recorder"), "{}", text(&out.stderr));
}

#[test]
fn only_the_first_process_to_use_cuda_records() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = record(dir.path(), &["--no-lint", "-o", "k.pickle", "--", py, &program("train.py"), "2", "0", "--child"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v = snapshot_json(dir.path(), "k.pickle");
    // the parent's run (it used CUDA first): its two steps; the child made one and did not record
    assert_eq!(v["record"]["reason"], "exit");
    assert_eq!(v["record"]["steps"], 2);
    let text_report = Command::cargo_bin("memlint").unwrap().current_dir(dir.path()).args(["snapshot", "k.pickle"]).output().unwrap();
    assert!(text(&text_report.stdout).contains("train.py:20 (main)"));
}

#[test]
fn commands_memlint_cannot_run_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = record(dir.path(), &["--", "no-such-program-here"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot run `no-such-program-here`"));
    let out = record(dir.path(), &[], None);
    assert_eq!(out.status.code(), Some(2));
    let out = record(dir.path(), &["--steps", "0", "--", "python3"], None);
    assert_eq!(out.status.code(), Some(2));
}
