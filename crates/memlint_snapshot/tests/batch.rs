//! The batch model (`memlint_snapshot::batch`): on synthetic training loops whose memory at
//! other batch sizes is known (the same program run at those sizes), on the runs recorded on
//! an H100 (tests/snapshot/data), and on bad input.

use std::path::PathBuf;

use memlint_snapshot::analyse;
use memlint_snapshot::batch::{BatchModel, BatchSource};
use memlint_snapshot::read::{Action, Event, Frame, Snapshot, NO_STACK};
use memlint_snapshot::read_snapshot_with_free_stacks;
use memlint_snapshot::sim::AllocatorSim;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/snapshot/data")
}

/// Writes a trace as PyTorch's allocator would record it for a program of allocations and
/// frees: the blocks and segments come from the allocator simulation, the stacks from the
/// lines given.
struct Recorder {
    sim: AllocatorSim,
    events: Vec<Event>,
    live: std::collections::HashMap<u32, (u64, u64)>,
    clock: i64,
    steps: Vec<(i64, i64)>,
}

impl Recorder {
    fn new() -> Self {
        Recorder { sim: AllocatorSim::new(None, false), events: Vec::new(), live: Default::default(), clock: 1_000_000, steps: Vec::new() }
    }
    fn tick(&mut self) -> i64 {
        self.clock += 10;
        self.clock
    }
    /// Allocates tensor `id` of `size` bytes from line `stack` (an index of STACKS, or NO_STACK).
    fn alloc(&mut self, id: u32, size: u64, stack: u32) {
        let before = self.sim.reserved;
        let (addr, _) = self.sim.malloc(size).unwrap();
        if self.sim.reserved > before {
            let (seg, len) = self.sim.segment_of(addr).unwrap();
            let t = self.tick();
            self.events.push(Event { addr: seg, size: len, time_us: t, stack, action: Action::SegmentAlloc });
        }
        let t = self.tick();
        self.events.push(Event { addr, size, time_us: t, stack, action: Action::Alloc });
        assert!(self.live.insert(id, (addr, size)).is_none(), "tensor {id} allocated twice");
    }
    fn free(&mut self, id: u32) {
        let (addr, size) = self.live.remove(&id).unwrap();
        self.sim.free(addr);
        let t = self.tick();
        self.events.push(Event { addr, size, time_us: t, stack: NO_STACK, action: Action::FreeRequested });
        self.events.push(Event { addr, size, time_us: t, stack: NO_STACK, action: Action::FreeCompleted });
    }
    fn step_start(&mut self) {
        let t = self.tick();
        self.steps.push((t, i64::MAX));
    }
    fn step_end(&mut self) {
        let t = self.tick();
        self.steps.last_mut().unwrap().1 = t;
    }
    fn finish(self, annotations: bool) -> Snapshot {
        // stacks: 0 setup line, 1 batch line, 2 forward line, 3 loss line, 4 step line
        let frames = vec![
            Frame { file: "train.py".into(), line: 5, function: "<module>".into() },
            Frame { file: "train.py".into(), line: 10, function: "<module>".into() },
            Frame { file: "train.py".into(), line: 11, function: "<module>".into() },
            Frame { file: "train.py".into(), line: 12, function: "<module>".into() },
            Frame { file: "train.py".into(), line: 14, function: "<module>".into() },
        ];
        Snapshot {
            traces: vec![self.events],
            stacks: (0..frames.len() as u32).map(|i| vec![i]).collect(),
            frames,
            optimizer_steps: if annotations { vec![self.steps] } else { vec![] },
            has_annotations: annotations,
            ..Snapshot::default()
        }
    }
}

const SETUP: u32 = 0;
const BATCH: u32 = 1;
const FORWARD: u32 = 2;
const LOSS: u32 = 3;
const STEP: u32 = 4;

/// A two-layer MLP of width 1024 trained with Adam and autocast-like weight copies, written as
/// the allocator sees it at batch `b`: parameters before the loop; per iteration the batch, the
/// forward's activations (4 KiB per sample each: at batch 1024 as large as a weight), half-size
/// weight copies, a loss, the backward's gradients (parameter sizes, alive until the next
/// zero_grad) and activation gradients (no stack), the optimizer step with its state made once
/// and temporaries; a workspace made once in the first forward.
fn mlp_run(b: u64, iterations: u32, annotations: bool) -> Snapshot {
    let mut r = Recorder::new();
    let params: [u64; 5] = [1024 * 1024 * 4, 1024 * 4, 1024 * 1024 * 4, 1024 * 4, 10 * 1024 * 4];
    for (k, &p) in params.iter().enumerate() {
        r.alloc(100 + k as u32, p, SETUP);
    }
    for it in 0..iterations {
        // zero_grad(set_to_none=True) at the top
        if it > 0 {
            for k in 0..params.len() as u32 {
                r.free(200 + k);
            }
        }
        let prev_batch = it > 0;
        r.alloc(300, b * 1024 * 4, BATCH); // x (fresh id each iteration below)
        r.alloc(301, b * 8, BATCH); // labels
        if prev_batch {
            r.free(310);
            r.free(311);
        }
        r.alloc(320, 1024 * 1024 * 2, FORWARD); // fp16 copy of W1
        r.alloc(321, b * 1024 * 4, FORWARD); // h1
        r.alloc(322, 1024 * 1024 * 2, FORWARD); // fp16 copy of W2
        r.alloc(323, b * 1024 * 4, FORWARD); // h2
        if it == 0 {
            r.alloc(900, 8 << 20, FORWARD); // a workspace, made once and kept
        }
        r.alloc(324, b * 10 * 4, FORWARD); // logits
        r.alloc(325, 4, LOSS); // loss
        // backward
        r.alloc(330, b * 10 * 4, NO_STACK);
        r.alloc(204, params[4], NO_STACK);
        r.alloc(331, b * 1024 * 4, NO_STACK);
        r.free(330);
        r.alloc(202, params[2], NO_STACK);
        r.alloc(203, params[3], NO_STACK);
        r.free(323);
        r.free(322);
        r.alloc(200, params[0], NO_STACK);
        r.alloc(201, params[1], NO_STACK);
        r.free(331);
        r.free(321);
        r.free(320);
        r.free(324);
        // optimizer step: state once, temporaries every time
        r.step_start();
        if it == 0 {
            for (k, &p) in params.iter().enumerate() {
                r.alloc(400 + k as u32, p, STEP);
                r.alloc(500 + k as u32, p, STEP);
            }
        }
        for (k, &p) in params.iter().enumerate() {
            r.alloc(600 + k as u32, p, STEP);
        }
        for k in 0..params.len() as u32 {
            r.free(600 + k);
        }
        r.step_end();
        r.free(325);
        // the batch stays alive until the next one is made (rebinding `x, y = ...`)
        let (x, y) = (r.live.remove(&300).unwrap(), r.live.remove(&301).unwrap());
        r.live.insert(310, x);
        r.live.insert(311, y);
    }
    r.finish(annotations)
}

fn truth(snap: &Snapshot) -> (u64, u64) {
    let d = &analyse(snap, 0)[0];
    (d.peak_allocated_bytes, d.peak_reserved_bytes)
}

#[test]
fn predicts_the_peak_the_same_program_has_at_other_batch_sizes() {
    let recorded = mlp_run(1024, 5, true);
    let model = BatchModel::new(&recorded, Some(1024)).unwrap();
    assert_eq!(model.batch_source, BatchSource::Given);
    for b in [256, 512, 2048, 4096, 16384] {
        let want = truth(&mlp_run(b, 5, true));
        let got = model.replay(b, None);
        assert_eq!((got.peak_allocated, got.peak_reserved), want, "batch {b}");
    }
    // at the recorded batch, the split at the peak: the fixed part is everything but the batch's
    let at = model.replay(1024, None);
    assert_eq!(at.peak_allocated, truth(&recorded).0);
    assert!(at.batch_at_peak > 0 && at.fixed_at_peak > 0);
}

#[test]
fn without_step_annotations_same_size_activations_count_as_fixed_and_the_model_says_so() {
    // Older PyTorch writes no annotations: a block of a weight's size is taken as a gradient,
    // and at batch 1024 the activations are a weight's size: they are not scaled.
    let recorded = mlp_run(1024, 5, false);
    let model = BatchModel::new(&recorded, Some(1024)).unwrap();
    let want = truth(&mlp_run(4096, 5, false));
    let got = model.replay(4096, None);
    assert!(got.peak_allocated < want.0, "{got:?} vs {want:?}");
    // at another recorded batch there is no coincidence and the prediction is exact
    let recorded = mlp_run(1000, 5, false);
    let model = BatchModel::new(&recorded, Some(1000)).unwrap();
    assert_eq!(model.replay(4000, None).peak_allocated, truth(&mlp_run(4000, 5, false)).0);
}

#[test]
fn the_largest_batch_under_a_budget_is_the_largest_that_runs_under_the_limit() {
    let recorded = mlp_run(1024, 5, true);
    let model = BatchModel::new(&recorded, Some(1024)).unwrap();
    let budget = 512 << 20;
    let r = model.report(Some(budget), Some(100_000));
    let largest = r.largest_batch.unwrap();
    // the program itself, run with an allocator limited to the budget
    let runs = |b: u64| {
        let snap = mlp_run(b, 5, true);
        let m = BatchModel::new(&snap, Some(b)).unwrap();
        !m.replay(b, Some(budget)).out_of_memory
    };
    assert!(runs(largest) && !runs(largest + 1), "largest {largest}");
    assert!(r.largest_batch_without_retries.unwrap() <= largest);
    let e = r.effective_batch.as_ref().unwrap();
    assert!(e.batch <= largest && e.batch * e.accumulation_steps == e.effective && e.effective >= 100_000);
    assert!(e.loss_division.contains(&format!("loss / {}", e.accumulation_steps)));
    // the table: half to sixteen times the recorded batch, growing
    let batches: Vec<u64> = r.predictions.iter().map(|p| p.batch).collect();
    assert_eq!(batches, vec![512, 1024, 2048, 4096, 8192, 16384]);
    assert!(r.predictions.windows(2).all(|w| w[0].allocated_peak_bytes < w[1].allocated_peak_bytes));
    assert!(r.predictions.iter().all(|p| p.fits.is_some()));
    assert_eq!(r.confidence, "high", "{:?}", r.confidence_notes);
}

#[test]
fn a_budget_below_the_fixed_memory_is_a_clear_answer() {
    let recorded = mlp_run(1024, 5, true);
    let model = BatchModel::new(&recorded, Some(1024)).unwrap();
    let r = model.report(Some(16 << 20), Some(64));
    assert_eq!(r.largest_batch, None);
    assert_eq!(r.effective_batch, None);
    let why = r.no_fit.unwrap();
    assert!(why.contains("no batch size fits in 16.0 MiB") && why.contains("does not depend on the batch"), "{why}");
}

#[test]
fn no_loop_or_a_single_iteration_is_an_error_that_says_why() {
    let one = mlp_run(64, 1, true);
    let e = BatchModel::new(&one, Some(64)).err().unwrap();
    assert!(e.starts_with("no training loop found: "), "{e}");
    let two = mlp_run(64, 2, true);
    assert!(BatchModel::new(&two, Some(64)).is_err());
    let nothing = Snapshot { traces: vec![vec![]], ..Snapshot::default() };
    assert!(BatchModel::new(&nothing, Some(1)).err().unwrap().contains("0 allocation(s)"));
    // without --batch, the batch is guessed from its tensors: 64 x 4 KiB inputs, 64 labels
    let run = mlp_run(64, 5, true);
    let m = BatchModel::new(&run, None).unwrap();
    assert_eq!((m.recorded_batch, m.batch_source), (64, BatchSource::InputSizes));
    assert_eq!(m.report(None, None).confidence, "low");
    assert!(BatchModel::new(&mlp_run(64, 5, true), Some(0)).is_err());
}

/// On every run recorded on an H100, the model replayed at the recorded batch gives the
/// recorded allocated and reserved peaks (PyTorch's max_memory_allocated/reserved) exactly,
/// and its predictions grow with the batch.
#[test]
fn recorded_runs_replay_to_pytorchs_own_peaks() {
    for (name, batch) in [
        ("clean_loop", 256),
        ("summed_loss_bad", 256),
        ("retain_graph_bad", 256),
        ("collect_outputs_bad", 256),
        ("eval_no_grad_bad", 1024),
        ("cnn_fp32", 64),
        ("transformer_fp32", 16),
        ("transformer_fp16", 16),
        ("varlen_segments", 8),
    ] {
        let snap = read_snapshot_with_free_stacks(&data().join(format!("{name}.pickle"))).unwrap();
        let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(data().join(format!("{name}.json"))).unwrap()).unwrap();
        let model = BatchModel::new(&snap, Some(batch)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let at = model.replay(batch, None);
        assert_eq!(at.peak_allocated, t["max_memory_allocated"].as_u64().unwrap(), "{name}: allocated");
        assert_eq!(at.peak_reserved, t["max_memory_reserved"].as_u64().unwrap(), "{name}: reserved");
        let twice = model.replay(batch * 2, None);
        assert!(twice.peak_allocated > at.peak_allocated, "{name}");
    }
    // the batch guessed from the batch's tensors (inputs and 8-byte labels)
    for (name, batch) in [("clean_loop", 256), ("cnn_fp32", 64), ("eval_no_grad_bad", 1024)] {
        let snap = read_snapshot_with_free_stacks(&data().join(format!("{name}.pickle"))).unwrap();
        let model = BatchModel::new(&snap, None).unwrap();
        assert_eq!((model.recorded_batch, model.batch_source), (batch, BatchSource::InputSizes), "{name}");
    }
    // token ids and targets of the same size: no guess, and a message that asks for --batch
    let snap = read_snapshot_with_free_stacks(&data().join("transformer_fp32.pickle")).unwrap();
    let e = BatchModel::new(&snap, None).err().unwrap();
    assert!(e.contains("pass --batch N"), "{e}");
}


fn batch_data() -> PathBuf {
    data().join("batch")
}

/// The H100 recordings of tests/gpu/batch (`memlint record --steps 4` at batch 16: ResNet-18
/// under float16 autocast with a GradScaler, GPT-2 with AdamW, an MLP with Adam), against
/// PyTorch's max_memory_allocated at batch 8 to 256 and the largest batch that ran under
/// set_per_process_memory_fraction for 4 and 10 GiB (measure.py, in MODEL_measured.json): the
/// acceptance of issue 30 (allocated peak within 5% at 8 to 128; largest batch within 5%).
#[test]
fn gpu_recordings_predict_pytorchs_peaks_and_largest_batches() {
    for model in ["resnet18", "gpt2", "mlp"] {
        let snap = read_snapshot_with_free_stacks(&batch_data().join(format!("{model}_b16.pickle"))).unwrap();
        let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(batch_data().join(format!("{model}_measured.json"))).unwrap()).unwrap();
        let rec = snap.record.clone().expect("made by memlint record");
        assert_eq!((rec.batch, rec.reason.as_deref(), rec.steps), (Some(16), Some("steps"), Some(4)), "{model}");
        let model_ = BatchModel::new(&snap, None).unwrap();
        assert_eq!((model_.recorded_batch, model_.batch_source), (16, BatchSource::Recorded));
        for b in [8u64, 16, 32, 64, 128] {
            let want = m["by_batch"][b.to_string()]["max_memory_allocated"].as_u64().unwrap();
            let got = model_.replay(b, None).peak_allocated;
            let err = (got as f64 - want as f64).abs() / want as f64;
            assert!(err <= 0.05, "{model} batch {b}: predicted {got}, PyTorch {want} ({:.2}%)", err * 100.0);
        }
        for gib in [4u64, 10] {
            let r = model_.report(Some(gib << 30), None);
            let real = m["budgets"][format!("{gib}GiB")]["largest"].as_u64().unwrap();
            let got = r.largest_batch.unwrap();
            let err = (got as f64 - real as f64).abs() / real as f64;
            assert!(err <= 0.05 || (got > 4096 && real > 4096), "{model} {gib} GiB: predicted {got}, ran {real}");
            assert_eq!(r.confidence, "high", "{model}: {:?}", r.confidence_notes);
        }
    }
}

/// `memlint record` on the GPU: the snapshot's peak is PyTorch's max_memory_allocated noted
/// beside it, for a normal exit (tests/examples/generate_text.py), a script that fails
/// (train_classifier.py), an out-of-memory error and --steps.
#[test]
fn record_snapshots_peak_at_pytorchs_figure() {
    for (name, reason) in [
        ("ex_generate_text", "exit"),
        ("ex_train_classifier", "exit"),
        ("oom_gpt2_b1024", "exit"),
        ("resnet18_b16", "steps"),
        ("gpt2_b16", "steps"),
        ("mlp_b16", "steps"),
    ] {
        let snap = read_snapshot_with_free_stacks(&batch_data().join(format!("{name}.pickle"))).unwrap();
        let rec = snap.record.clone().unwrap();
        assert_eq!(rec.reason.as_deref(), Some(reason), "{name}");
        let d = &analyse(&snap, 0)[0];
        assert_eq!(Some(d.peak_allocated_bytes), rec.max_memory_allocated, "{name}");
        assert_eq!(d.ooms.len(), usize::from(name.starts_with("oom")), "{name}");
        // the recorder's own frames are not the user's code
        assert!(snap.frames.iter().all(|f| !f.file.ends_with("sitecustomize.py")), "{name}");
    }
}
