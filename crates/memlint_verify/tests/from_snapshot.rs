//! `memlint verify --from-snapshot FILE.pickle` on the simulator: the reference MLP sized after
//! the recorded runs of tests/snapshot/data (H100, torch 2.11), explicit flags winning over the
//! sizing, and clear errors for files that are no snapshot or have no loop.

use std::path::PathBuf;

use memlint_verify::scenarios::{Workload, CLASSES};
use memlint_verify::sizing::footprint;
use memlint_verify::{run_with, BackendKind, Format, Given, VerifyArgs};
use serde_json::Value;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/snapshot/data").join(name)
}

/// MEM001 only, one iteration: the sizing is what is tested here.
fn args(snapshot: PathBuf) -> VerifyArgs {
    VerifyArgs { backend: BackendKind::Sim, format: Format::Json, rules: vec!["MEM001".into()], iters: 1, from_snapshot: Some(snapshot), ..VerifyArgs::default() }
}

fn run(a: &VerifyArgs) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_with(a, None, &mut out, &mut err, false);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

fn report(a: &VerifyArgs) -> Value {
    let (code, out, err) = run(a);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn workload(r: &Value) -> (u64, u64, u64, String) {
    let w = &r["workload"];
    (w["layers"].as_u64().unwrap(), w["hidden"].as_u64().unwrap(), w["batch"].as_u64().unwrap(), w["dtype"].as_str().unwrap().to_string())
}

/// Tolerances: the width moves the parameters by about 2/width per step and the batch the
/// activations by about 1/batch; blocks are rounded as PyTorch's allocator rounds them.
const PARAMETER_TOLERANCE: f64 = 0.01;
const ACTIVATION_TOLERANCE: f64 = 0.05;

/// Every recorded training or evaluation loop: the sized MLP's parameters within 1% and its
/// activations within 5% of what was read from the snapshot, the workload the scenarios ran is
/// the one reported, and its figures are the simulator's own for that workload.
#[test]
fn sized_workload_matches_each_recorded_run() {
    for name in ["cnn_fp32", "transformer_fp32", "transformer_fp16", "clean_loop", "summed_loss_bad", "retain_graph_bad", "eval_no_grad_bad", "eval_no_grad_fixed", "collect_outputs_bad", "varlen_segments"] {
        let r = report(&args(data(&format!("{name}.pickle"))));
        let s = &r["from_snapshot"];
        let (read_p, read_a) = (s["read"]["parameter_bytes"].as_u64().unwrap(), s["read"]["activation_bytes"].as_u64().unwrap());
        let (ref_p, ref_a) = (s["reference"]["parameter_bytes"].as_u64().unwrap(), s["reference"]["activation_bytes"].as_u64().unwrap());
        let dp = (ref_p as f64 / read_p as f64 - 1.0).abs();
        let da = (ref_a as f64 / read_a as f64 - 1.0).abs();
        println!("{name}: parameters {read_p} -> {ref_p} ({dp:.4}), activations {read_a} -> {ref_a} ({da:.4}), workload {:?}", workload(&r));
        assert!(dp < PARAMETER_TOLERANCE, "{name}: {s}");
        assert!(da < ACTIVATION_TOLERANCE, "{name}: {s}");
        assert!((s["parameter_difference"].as_f64().unwrap() - (ref_p as f64 / read_p as f64 - 1.0)).abs() < 1e-9);
        let (layers, hidden, batch, dtype) = workload(&r);
        assert_eq!((s["layers"].as_u64(), s["hidden"].as_u64(), s["batch"].as_u64()), (Some(layers), Some(hidden), Some(batch)));
        assert_eq!((layers, dtype.as_str()), (8, "fp32"), "{name}: layers and dtype keep their defaults");
        assert_eq!(s["set_by_flags"], serde_json::json!([]));
        assert_eq!(s["recorded_dtype"], Value::Null, "a snapshot does not record element types");
        // The shape the crate documentation lists.
        for k in ["file", "read", "layers", "hidden", "batch", "dtype", "set_by_flags", "reference", "parameter_difference", "activation_difference", "rise_difference"] {
            assert!(s.get(k).is_some(), "from_snapshot.{k}");
        }
        for k in ["device", "file", "function", "first_line", "last_line", "iterations", "measured_iterations", "allocations_per_iteration", "parameter_bytes", "parameter_blocks", "recording_starts_in_loop", "activation_bytes", "activation_bytes_min", "activation_bytes_max", "rise_bytes", "level_at_top_bytes"] {
            assert!(s["read"].get(k).is_some(), "from_snapshot.read.{k}");
        }
        let wl = Workload { layers: layers as usize, hidden: hidden as usize, batch: batch as usize, iters: 1, dtype: memlint_verify::backend::DType::Fp32, classes: CLASSES };
        let f = footprint(&wl).unwrap();
        assert_eq!((f.parameter_bytes, f.activation_bytes), (ref_p, ref_a), "{name}: the report's figures are footprint()'s");
        // The chosen width is the closest: one narrower or wider is further from the parameters.
        for other in [hidden - 1, hidden + 1] {
            let g = footprint(&Workload { hidden: other as usize, ..wl }).unwrap();
            assert!((g.parameter_bytes as f64 - read_p as f64).abs() >= (ref_p as f64 - read_p as f64).abs(), "{name}: width {other} is closer");
        }
    }
}

/// The non-MLP runs size to different MLPs: the CNN's small parameters and large activations
/// make a narrow MLP with a large batch, the transformer's a wider one.
#[test]
fn different_runs_give_different_workloads() {
    let cnn = workload(&report(&args(data("cnn_fp32.pickle"))));
    let tf = workload(&report(&args(data("transformer_fp32.pickle"))));
    assert!(cnn.1 < tf.1, "{cnn:?} {tf:?}");
    assert!(cnn.2 > 1000, "{cnn:?}");
}

/// Flags given with --from-snapshot win for what they set; the rest is sized around them.
#[test]
fn explicit_flags_win() {
    let path = data("transformer_fp32.pickle");
    let sized = workload(&report(&args(path.clone())));
    // --hidden: kept; the layers are solved for the parameters instead.
    let r = report(&VerifyArgs { hidden: 512, given: Given { hidden: true, ..Given::default() }, ..args(path.clone()) });
    let w = workload(&r);
    assert_eq!(w.1, 512);
    assert!(w.0 > 8, "narrower layers need more of them for the same parameters: {w:?}");
    assert_eq!(r["from_snapshot"]["set_by_flags"], serde_json::json!(["--hidden"]));
    assert!(r["from_snapshot"]["parameter_difference"].as_f64().unwrap().abs() < 0.1);
    // --layers: kept; the width is solved for it.
    let w = workload(&report(&VerifyArgs { layers: 2, given: Given { layers: true, ..Given::default() }, ..args(path.clone()) }));
    assert_eq!(w.0, 2);
    assert!(w.1 > sized.1, "fewer layers, wider: {w:?} vs {sized:?}");
    // --batch: kept; the activations then differ and the report says by how much.
    let r = report(&VerifyArgs { batch: 64, given: Given { batch: true, ..Given::default() }, ..args(path.clone()) });
    assert_eq!((workload(&r).1, workload(&r).2), (sized.1, 64));
    assert!(r["from_snapshot"]["activation_difference"].as_f64().unwrap() < -0.9);
    // --dtype fp16: two bytes an element, so a wider MLP for the same bytes.
    let w = workload(&report(&VerifyArgs { dtype: memlint_verify::backend::DType::Fp16, given: Given { dtype: true, ..Given::default() }, ..args(path.clone()) }));
    assert_eq!(w.3, "fp16");
    assert!(w.1 as f64 > sized.1 as f64 * 1.35, "{w:?} vs {sized:?}");
    // All four: nothing is sized; the differences are still reported.
    let all = Given { layers: true, hidden: true, batch: true, dtype: true };
    let r = report(&VerifyArgs { layers: 3, hidden: 100, batch: 10, given: all, ..args(path.clone()) });
    assert_eq!(workload(&r), (3, 100, 10, "fp32".into()));
    assert_eq!(r["from_snapshot"]["set_by_flags"], serde_json::json!(["--layers", "--hidden", "--batch", "--dtype"]));
    // Values equal to the defaults but not given are sized: the defaults do not count as given.
    let r = report(&VerifyArgs { layers: 8, hidden: 4096, batch: 512, ..args(path) });
    assert_eq!(workload(&r), sized);
}

/// The text report says what was read, what was chosen and how close it is.
#[test]
fn text_report_says_what_was_read_and_chosen() {
    let (code, out, err) = run(&VerifyArgs { format: Format::Text, ..args(data("clean_loop.pickle")) });
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("from snapshot ") && out.contains("clean_loop.pickle: the loop in step() at "), "{out}");
    assert!(out.contains("read: parameters 12.1 MiB (8 blocks allocated before the loop and alive throughout); activations 5.0 MiB per batch"), "{out}");
    assert!(out.contains("element type not recorded in a snapshot"), "{out}");
    assert!(out.contains("reference MLP: 8 layers (default), width ") && out.contains("(sized for the parameters), batch "), "{out}");
    assert!(out.contains("sized after ") || !out.contains("The figures are for"), "{out}");
}

fn error_of(bytes: &[u8]) -> (i32, String, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.pickle");
    std::fs::write(&path, bytes).unwrap();
    let (code, out, err) = run(&args(path.clone()));
    assert!(out.is_empty(), "{out}");
    (code, err, path)
}

#[test]
fn bad_files_are_clear_errors_naming_the_file() {
    // Not a pickle.
    let (code, err, path) = error_of(b"def train():\n    pass\n");
    assert_eq!(code, 2);
    assert!(err.contains(&format!("{} is not a pickle", path.display())), "{err}");
    // A pickle, but a list (python3 -c 'import pickle; print(pickle.dumps([1, 2], protocol=2))').
    let (code, err, path) = error_of(b"\x80\x02]q\x00(K\x01K\x02e.");
    assert_eq!(code, 2);
    assert!(err.contains(&format!("{} is not a PyTorch memory snapshot", path.display())), "{err}");
    // A snapshot with one allocation and its free: no iterations
    // (pickle.dumps({'device_traces': [[alloc, free_requested, free_completed]], 'segments': []}, protocol=2)).
    let one = b"\x80\x02}q\x00(X\r\x00\x00\x00device_tracesq\x01]q\x02]q\x03(}q\x04(X\x06\x00\x00\x00actionq\x05X\x05\x00\x00\x00allocq\x06X\x04\x00\x00\x00addrq\x07J\x00\x00\x00@X\x04\x00\x00\x00sizeq\x08M\x00\x10X\x06\x00\x00\x00framesq\t]q\nu}q\x0b(h\x05X\x0e\x00\x00\x00free_requestedq\x0ch\x07J\x00\x00\x00@h\x08M\x00\x10h\t]q\ru}q\x0e(h\x05X\x0e\x00\x00\x00free_completedq\x0fh\x07J\x00\x00\x00@h\x08M\x00\x10h\t]q\x10ueaX\x08\x00\x00\x00segmentsq\x11]q\x12u.";
    let (code, err, path) = error_of(one);
    assert_eq!(code, 2);
    assert!(err.contains(&format!("{}: no training loop found: device 0's trace has 1 allocation(s)", path.display())), "{err}");
    // Truncated.
    let (code, err, path) = error_of(&one[..60]);
    assert_eq!(code, 2);
    assert!(err.contains(&path.display().to_string()), "{err}");
    // Missing.
    let (code, _, err) = run(&args(PathBuf::from("/nonexistent/run.pickle")));
    assert_eq!(code, 2);
    assert!(err.contains("cannot read /nonexistent/run.pickle"), "{err}");
}
