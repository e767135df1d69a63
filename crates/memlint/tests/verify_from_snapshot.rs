//! `memlint verify --from-snapshot FILE.pickle` through the binary (simulator backend): the
//! command line's workload flags win over the sizing (clap tells given flags from defaults),
//! `--help` explains the method, and bad files exit 2 naming the file.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn memlint() -> Command {
    let mut cmd = Command::cargo_bin("memlint").unwrap();
    cmd.current_dir(repo()).env_remove("MEMLINT_OUTPUT_FORMAT");
    cmd
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

const SNAP: &str = "tests/snapshot/data/transformer_fp32.pickle";
const BASE: &[&str] = &["verify", "--backend", "sim", "--rule", "MEM001", "--iters", "1", "--from-snapshot", SNAP];

fn json(extra: &[&str]) -> Value {
    let out = memlint().args(BASE).args(["--format", "json"]).args(extra).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sizes_the_workload_and_flags_win() {
    let sized = json(&[]);
    let s = &sized["from_snapshot"];
    assert_eq!(s["set_by_flags"], serde_json::json!([]));
    assert_eq!(sized["workload"]["layers"], 8);
    assert!(s["parameter_difference"].as_f64().unwrap().abs() < 0.01, "{s}");
    assert!(s["activation_difference"].as_f64().unwrap().abs() < 0.05, "{s}");
    // --layers 8 given on the command line (the default's value) still counts as given.
    let given = json(&["--layers", "8", "--batch", "32"]);
    assert_eq!(given["from_snapshot"]["set_by_flags"], serde_json::json!(["--layers", "--batch"]));
    assert_eq!(given["workload"]["batch"], 32);
    assert_eq!(given["workload"]["hidden"], sized["workload"]["hidden"]);
    // --hidden: the layers are solved instead.
    let h = json(&["--hidden", "256"]);
    assert_eq!(h["workload"]["hidden"], 256);
    assert!(h["workload"]["layers"].as_u64().unwrap() > 8);
}

#[test]
fn text_output_prints_what_was_read_first() {
    let out = memlint().args(BASE).args(["--hidden", "256"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let read = text.find("  read: parameters 16.0 MiB").expect(&text);
    let chosen = text.find("  reference MLP: ").expect(&text);
    assert!(read < chosen && chosen < text.find("MEM001").unwrap(), "{text}");
    assert!(text.contains("layers (sized for the parameters), width 256 (--hidden)"), "{text}");
}

#[test]
fn help_explains_the_method() {
    let out = memlint().args(["verify", "--help"]).output().unwrap();
    // clap wraps long help to the terminal's width: compare with the words rejoined.
    let help = String::from_utf8(out.stdout).unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("--from-snapshot <FILE.pickle>"), "{help}");
    for words in ["allocated before the loop and", "up to its backward pass", "win", "fp32 unless --dtype", "4 iterations or more"] {
        assert!(help.contains(words), "{words}: {help}");
    }
}

#[test]
fn bad_input_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.pickle");
    std::fs::write(&notes, "not a pickle at all\n").unwrap();
    let out = memlint().args(["verify", "--backend", "sim", "--from-snapshot"]).arg(&notes).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(&format!("{} is not a pickle", notes.display())), "{err}");
    assert!(out.stdout.is_empty());
    let out = memlint().args(["verify", "--backend", "sim", "--from-snapshot", "missing.pickle"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read missing.pickle"));
}
