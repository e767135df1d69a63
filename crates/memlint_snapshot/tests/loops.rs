//! The loop of recorded runs (tests/snapshot/data, recorded on an H100): parameters and
//! activation bytes read from the trace, against PyTorch's own figures recorded beside each
//! snapshot (tests/gpu/from_snapshot and tests/snapshot/scripts).

use std::path::PathBuf;

use memlint_snapshot::read::{Action, Event, Frame, Snapshot, NO_STACK};
use memlint_snapshot::{find_loop, read_snapshot_with_free_stacks, LoopFigures};

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/snapshot/data")
}

fn figures(name: &str) -> LoopFigures {
    let snap = read_snapshot_with_free_stacks(&data().join(format!("{name}.pickle"))).unwrap();
    find_loop(&snap).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn torch(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(data().join(format!("{name}.json"))).unwrap()).unwrap()
}

fn rel(a: u64, b: u64) -> f64 {
    (a as f64 - b as f64).abs() / b as f64
}

/// The CNN and the transformers are not MLPs: their parameters are PyTorch's
/// `sum(p.numel() * p.element_size())` within 1.5% (blocks are rounded to 512 bytes and batch
/// norm's running statistics are buffers made before the loop too), and the rise of an
/// iteration above the top of the loop is PyTorch's `max_memory_allocated()` during it minus
/// `memory_allocated()` before it, to 0.1%.
#[test]
fn non_mlp_runs_read_as_pytorch_measured_them() {
    for name in ["cnn_fp32", "transformer_fp32", "transformer_fp16"] {
        let f = figures(name);
        let t = torch(name);
        let params = t["parameter_bytes"].as_u64().unwrap();
        let rise = t["activation_bytes_median_steady"].as_u64().unwrap();
        assert!(rel(f.parameter_bytes, params) < 0.015, "{name}: parameters {} vs PyTorch's {params}", f.parameter_bytes);
        assert!(rel(f.rise_bytes, rise) < 0.001, "{name}: rise {} vs PyTorch's {rise}", f.rise_bytes);
        assert!(f.measured_iterations >= 3, "{name}: {f:?}");
        assert_eq!(f.function.as_deref(), Some("train"), "{name}: the loop is _loop.py's train()");
        assert!(f.file.as_deref().unwrap().ends_with("from_snapshot/_loop.py"));
        // The loop's body spans make_batch() (line 35) to the step (line 45 or more).
        assert_eq!(f.first_line, Some(35), "{name}");
        assert!(!f.recording_starts_in_loop);
        // Activations: the forward pass's own bytes (the batch, outputs, what autograd saves).
        // Below the rise for the CNN, whose backward needs cuDNN workspaces on top.
        assert!(f.activation_bytes > 0 && f.activation_bytes_min == f.activation_bytes_max, "{name}: {f:?}");
    }
    // The CNN's forward: per image 32 channels at 32x32 (conv, batch norm, ReLU outputs, twice)
    // then 64 at 16x16 and 128 at 8x8, 4 bytes each, batch 64: 72 MB with the pooling outputs.
    let cnn = figures("cnn_fp32");
    assert!(cnn.activation_bytes > 60_000_000 && cnn.activation_bytes < 80_000_000, "{cnn:?}");
    assert!(cnn.rise_bytes > 2 * cnn.activation_bytes);
}

/// tests/snapshot/scripts' MLP (3 x Linear(1024, 1024) + Linear(1024, 16), fp32): its
/// parameters in 512-byte blocks, and one iteration's 5 MiB (batch 256: the input, three ReLU
/// outputs and the transient linear output, 1 MiB each, and the labels), whatever the loop:
/// a step function, a plain loop rebinding `loss`, `retain_graph=True`, an evaluation loop.
#[test]
fn mlp_runs_have_the_mlps_parameters_and_activations() {
    let block = |b: u64| b.div_ceil(512) * 512;
    let params = 3 * (block(1024 * 1024 * 4) + block(1024 * 4)) + block(1024 * 16 * 4) + block(16 * 4);
    for name in ["clean_loop", "summed_loss_bad", "summed_loss_fixed", "retain_graph_bad", "retain_graph_fixed", "collect_outputs_bad", "collect_outputs_fixed"] {
        let f = figures(name);
        assert_eq!(f.parameter_bytes, params, "{name}");
        assert_eq!(f.parameter_blocks, 8, "{name}");
        assert_eq!(f.activation_bytes, 5 * (1 << 20) + block(256 * 8), "{name}: {f:?}");
    }
    // PyTorch's figure for clean_loop, from its per-iteration record: the highest allocated
    // during iteration 1 minus what was allocated after iteration 0.
    let t = torch("clean_loop");
    let it = &t["per_iteration"];
    let pytorch_rise = it[1]["max_memory_allocated"].as_u64().unwrap() - it[0]["memory_allocated"].as_u64().unwrap();
    let f = figures("clean_loop");
    assert_eq!(f.rise_bytes, pytorch_rise);
    assert_eq!((f.function.as_deref(), f.first_line, f.last_line), (Some("step"), Some(16), Some(19)), "clean_loop.py's step(): batch() to the step");
    assert_eq!((f.iterations, f.measured_iterations), (6, 4), "6 iterations, the first and the last not measured");
}

/// Batches of varying length repeat the same statements: the loop is found, and the
/// parameters are the one Linear(512, 2048).
#[test]
fn varying_batches_still_make_a_loop() {
    let f = figures("varlen_segments");
    assert_eq!(f.parameter_bytes, 2048 * 512 * 4 + 2048 * 4);
    assert_eq!(f.iterations, 10);
    assert!(f.activation_bytes_min < f.activation_bytes_max);
}

fn frame(line: u32) -> Frame {
    Frame { file: "train.py".into(), line, function: "<module>".into() }
}

fn alloc(addr: u64, stack: u32) -> Event {
    Event { addr, size: 1 << 20, time_us: 0, stack, action: Action::Alloc }
}

#[test]
fn no_loop_is_an_error_that_says_why() {
    // Three allocations from three different lines: nothing repeats.
    let snap = Snapshot {
        traces: vec![vec![alloc(1 << 30, 0), alloc(2 << 30, 1), alloc(3 << 30, 2)]],
        frames: vec![frame(1), frame(2), frame(3)],
        stacks: vec![vec![0], vec![1], vec![2]],
        ..Snapshot::default()
    };
    let e = find_loop(&snap).unwrap_err();
    assert!(e.contains("no sequence of allocations repeats"), "{e}");
    // A loop seen twice only is not enough to measure an iteration that repeats.
    let twice = Snapshot {
        traces: vec![vec![alloc(1 << 30, 0), alloc(2 << 30, 1), alloc(3 << 30, 0), alloc(4 << 30, 1)]],
        frames: vec![frame(1), frame(2)],
        stacks: vec![vec![0], vec![1]],
        ..Snapshot::default()
    };
    assert!(find_loop(&twice).unwrap_err().contains("record at least 4 iterations"));
    let empty = Snapshot { traces: vec![vec![]], ..Snapshot::default() };
    assert!(find_loop(&empty).unwrap_err().contains("0 allocation(s)"));
    assert!(find_loop(&Snapshot::default()).is_err());
    let no_stacks = Snapshot { traces: vec![(0..8).map(|i| alloc(i << 30, NO_STACK)).collect()], ..Snapshot::default() };
    // Without stacks the same-size allocations repeat with period 1: a loop is found, by levels.
    let f = find_loop(&no_stacks).unwrap();
    assert_eq!(f.file, None);
}
