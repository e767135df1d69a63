//! `memlint snapshot`, `snapshot diff`, `check --snapshot` and `verify --snapshot` on
//! snapshots recorded with PyTorch on an H100 (tests/snapshot/data) from the scripts in
//! tests/snapshot/scripts, which memlint's rules flag.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

mod support;

fn memlint() -> Command {
    let mut cmd = Command::cargo_bin("memlint").unwrap();
    cmd.current_dir(repo()).env_remove("MEMLINT_OUTPUT_FORMAT");
    cmd
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

const DATA: &str = "tests/snapshot/data";
const SCRIPTS: &str = "tests/snapshot/scripts";

fn torch(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(repo().join(DATA).join(format!("{name}.json"))).unwrap()).unwrap()
}

fn json_of(args: &[&str]) -> Value {
    let out = memlint().args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn snapshot_json_peak_is_max_memory_allocated() {
    for name in ["eval_no_grad_bad", "summed_loss_bad", "oom_caught", "varlen_segments"] {
        let v = json_of(&["snapshot", &format!("{DATA}/{name}.pickle"), "--format", "json"]);
        assert_eq!(v["devices"][0]["peak_allocated_bytes"], torch(name)["max_memory_allocated"], "{name}");
    }
}

#[test]
fn snapshot_text_and_source_mapping() {
    let out = memlint().args(["snapshot", &format!("{DATA}/summed_loss_bad.pickle"), "--source", SCRIPTS]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("peak: 70.2 MiB allocated"), "{text}");
    assert!(text.contains("tests/snapshot/scripts/_model.py:14 (forward)"), "{text}");
    assert!(text.contains("retained (allocated again and again, never freed):"), "{text}");
    let text = String::from_utf8(memlint().args(["snapshot", &format!("{DATA}/varlen_segments.pickle")]).output().unwrap().stdout).unwrap();
    assert!(text.contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True could have saved up to"), "{text}");
}

#[test]
fn snapshot_errors_exit_2_and_name_the_file() {
    for (file, what) in [("README.md", "is not a pickle"), ("missing.pickle", "cannot read missing.pickle")] {
        let out = memlint().args(["snapshot", file]).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(what), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.pickle");
    let bytes = std::fs::read(repo().join(DATA).join("clean_loop.pickle")).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let out = memlint().args(["snapshot", cut.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("truncated"));
    let out = memlint().args(["check", "--snapshot", cut.to_str().unwrap(), SCRIPTS]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn snapshot_diff_shows_the_saving() {
    let v = json_of(&["snapshot", "diff", &format!("{DATA}/eval_no_grad_bad.pickle"), &format!("{DATA}/eval_no_grad_fixed.pickle"), "--format", "json"]);
    let before = torch("eval_no_grad_bad")["max_memory_allocated"].as_u64().unwrap();
    let after = torch("eval_no_grad_fixed")["max_memory_allocated"].as_u64().unwrap();
    assert_eq!(v["peak_allocated_bytes_before"].as_u64().unwrap() - v["peak_allocated_bytes_after"].as_u64().unwrap(), before - after);
    let forward = &v["lines"][0];
    assert!(forward["file"].as_str().unwrap().ends_with("_model.py"), "{v:#}");
    assert!(forward["saving_bytes"].as_i64().unwrap() > 0);
}

#[test]
fn check_with_a_snapshot_attaches_measured_bytes_in_every_format() {
    let snap = format!("{DATA}/eval_no_grad_bad.pickle");
    let file = format!("{SCRIPTS}/eval_no_grad_bad.py");
    let v = json_of_status(&["check", "--snapshot", &snap, &file, "--output-format", "json"], 1);
    let f = &v[0];
    assert_eq!(f["code"], "MEM001");
    let s = &f["snapshot"];
    assert!(s["bytes_at_peak"].as_u64().unwrap() > 20 << 20, "{s}");
    assert_eq!(s["retained_bytes"], 0);
    assert_eq!(s["retained_count"], 0);
    for (format, needle) in [
        ("text", "measured: "),
        ("concise", "  measured: "),
        ("github", "(measured: "),
        ("junit", "(measured: "),
        ("sarif", "\"bytes_at_peak\""),
    ] {
        let out = memlint().args(["check", "--snapshot", &snap, &file, "--output-format", format]).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(needle), "{format}: {text}");
    }
    // without --snapshot, nothing changes
    let v = json_of_status(&["check", &file, "--output-format", "json"], 1);
    assert!(v[0].get("snapshot").is_none());
    // a finding on a line that allocates nothing itself (`outputs.append(out)`) still
    // gets reported, with or without figures
    let v = json_of_status(&["check", "--snapshot", &format!("{DATA}/collect_outputs_bad.pickle"), &format!("{SCRIPTS}/collect_outputs_bad.py"), "--output-format", "json"], 1);
    assert_eq!(v[0]["code"], "MEM006");
}

#[test]
fn sarif_with_snapshot_still_validates() {
    let schema = support::sarif_schema();
    let out = memlint()
        .args(["check", "--snapshot", &format!("{DATA}/eval_no_grad_bad.pickle"), &format!("{SCRIPTS}/eval_no_grad_bad.py"), "--output-format", "sarif"])
        .output()
        .unwrap();
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&sarif), "{:?}", validator.iter_errors(&sarif).map(|e| e.to_string()).collect::<Vec<_>>());
    assert!(sarif["runs"][0]["results"][0]["properties"]["snapshot"]["bytes_at_peak"].as_u64().unwrap() > 0);
}

fn json_of_status(args: &[&str], status: i32) -> Value {
    let out = memlint().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(status), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn verify_prints_the_users_figures_first() {
    let out = memlint()
        .args(["verify", &format!("{SCRIPTS}/eval_no_grad_bad.py"), "--snapshot", &format!("{DATA}/eval_no_grad_bad.pickle"), "--backend", "sim", "--iters", "1", "--layers", "2", "--hidden", "64", "--batch", "8"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let mine = err.find("measured in your run").expect("the user's figures");
    let reference = err.find("then the reference loop").expect("the reference loop's label");
    assert!(mine < reference);
    assert!(err.contains("eval_no_grad_bad.py:12: MEM001 eval-without-no-grad: ") && err.contains("MiB alive at the peak"), "{err}");
}
