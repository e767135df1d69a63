//! CPU-only tests: the scenarios' logic on the simulator, the report, and the exit statuses.
//! Workloads are tiny so that these run in well under a second.

use std::rc::Rc;

use memlint_verify::alloc::round_size;
use memlint_verify::backend::sim::{SimBackend, DEFAULT_CAPACITY};
use memlint_verify::backend::{Backend, DType};
use memlint_verify::report::ScenarioReport;
use memlint_verify::scenarios::{self, Workload};
use memlint_verify::{run_scenarios, run_with, BackendKind, Finding, Format, VerifyArgs};

fn sim() -> Rc<dyn Backend> {
    Rc::new(SimBackend::new(DEFAULT_CAPACITY))
}

fn small(layers: usize, iters: usize) -> Workload {
    Workload { layers, hidden: 256, batch: 64, iters, dtype: DType::Fp32, classes: 10 }
}

fn run(wl: &Workload, code: &str, variant: &str) -> ScenarioReport {
    let defs: Vec<_> = scenarios::all().into_iter().filter(|d| d.code == code && d.variant == variant).collect();
    assert_eq!(defs.len(), 1, "{code}/{variant} exists");
    let mut r = run_scenarios(sim(), wl, &defs, |_| {}).expect("sim runtime");
    let r = r.remove(0);
    assert!(r.error.is_none(), "{code}/{variant}: {:?}", r.error);
    r
}

/// Bytes of one batch of activations (batch × hidden fp32), as the allocator rounds them.
fn bh(wl: &Workload) -> u64 {
    round_size(wl.batch * wl.hidden * 4) as u64
}

#[test]
fn mem001_saving_equals_saved_activations_counted_by_hand() {
    // One iteration, so no earlier graph is alive. With gradients tracked, every ReLU output is kept
    // for backward: at the last ReLU, outputs r1..r(L-1) are saved and z_L, r_L are being made,
    // (L+1) activations above the model and data. Under no_grad only the current layer's input and
    // output live: 2 activations. The fix saves L-1 activations.
    for layers in [2, 3, 5] {
        let wl = small(layers, 1);
        let r = run(&wl, "MEM001", "eval");
        assert_eq!(r.saving_bytes, Some(((layers as u64 - 1) * bh(&wl)) as i64), "layers={layers}");
        // At that moment the saved activations are the first Linear's input x and r1..r(L-1).
        let at_peak = r.at_peak_bad.expect("figures");
        assert_eq!(at_peak.saved_activations as u64, layers as u64 * bh(&wl));
        assert_eq!(r.at_peak_fixed.expect("figures").saved_activations, 0);
    }
}

#[test]
fn mem001_with_more_iterations_also_keeps_the_previous_graph() {
    // The documented evaluate() keeps `out`, and with it its graph, until the next forward has
    // made the new `out`: its batch (x.cuda() of that step, saved by the first Linear) and its L
    // ReLU outputs. The new forward peaks at its last ReLU with x, r1..rL and z_L alive (L + 2
    // activations); under no_grad only x, a layer's input and its output live (3).
    let layers = 3u64;
    let wl = small(layers as usize, 4);
    let r = run(&wl, "MEM001", "eval");
    let graph = (layers + 1) * bh(&wl);
    assert_eq!(r.saving_bytes, Some((graph + (layers + 2) * bh(&wl) - 3 * bh(&wl)) as i64));
}

#[test]
fn mem002_eval_holds_one_graph_per_iteration() {
    let wl = small(2, 6);
    let r = run(&wl, "MEM002", "eval");
    // Each summed loss keeps its graph: its batch x (saved by the first Linear), L ReLU outputs,
    // the log-softmax, the total weight and the targets y. The last batch's x, y and loss are bound
    // in both loops; the running total is one scalar block (then added to in place).
    let logsm = round_size(wl.batch * wl.classes * 4) as u64;
    let y = round_size(wl.batch * 8) as u64;
    let graph = bh(&wl) + 2 * bh(&wl) + logsm + 512 + y;
    assert_eq!(r.saving_bytes, Some((wl.iters as u64 * graph - bh(&wl) - y + 512) as i64));
}

#[test]
fn mem002_train_with_the_model_dropped_keeps_parameters_and_gradients() {
    // After `del model, optimizer`, the summed loss's graph still reaches every parameter (its
    // AccumulateGrad edges) and so every gradient; the fixed loop's float keeps nothing.
    let wl = small(2, 4);
    let r = run(&wl, "MEM002", "train-model-dropped");
    let w = round_size(wl.hidden * wl.hidden * 4) as u64;
    let b = round_size(wl.hidden * 4) as u64;
    let head = round_size(wl.classes * wl.hidden * 4) as u64 + round_size(wl.classes * 4) as u64;
    let params = 2 * (w + b) + head;
    assert_eq!(r.saving_bytes, Some((2 * params + 512) as i64));
    // With the model alive the same loops differ by the total's scalar block only.
    assert_eq!(run(&wl, "MEM002", "train").saving_bytes, Some(512));
}

#[test]
fn mem002_train_holds_only_the_total_after_backward() {
    // backward() already freed the saved tensors: what stays is the running total's scalar block.
    let r = run(&small(2, 5), "MEM002", "train");
    assert_eq!(r.saving_bytes, Some(512));
}

#[test]
fn mem002_train_says_the_memory_comes_back_once_the_model_is_dropped() {
    // Issue 28, item 7: 512 B freed looks as if the fix did nothing; the summary says why.
    let r = run(&small(2, 3), "MEM002", "train");
    assert_eq!(r.saving_bytes, Some(512));
    assert!(r.saving_summary.contains("only once the model is dropped"), "{}", r.saving_summary);
    assert!(r.saving_summary.contains("train-model-dropped"), "{}", r.saving_summary);
    // Where the fix frees a lot, no such note.
    let dropped = run(&small(2, 3), "MEM002", "train-model-dropped");
    assert!(!dropped.saving_summary.contains("why so little"), "{}", dropped.saving_summary);
}

#[test]
fn mem003_says_what_the_fix_buys_when_its_peak_is_higher() {
    // Issue 28, item 7: autocast + GradScaler peaks higher than the .half() model (fp32 master
    // weights); the summary says so and that the fix buys gradients that do not underflow.
    let r = run(&small(2, 2), "MEM003", "half");
    assert!(r.saving_bytes.expect("figures") < 0, "{r:?}");
    assert!(r.saving_summary.contains("the fix's peak is") && r.saving_summary.contains("higher"), "{}", r.saving_summary);
    assert!(r.saving_summary.contains("fp32 master weights"), "{}", r.saving_summary);
    assert!(r.saving_summary.contains("gradients that do not underflow"), "{}", r.saving_summary);
}

#[test]
fn mem008_saving_is_one_copy_of_the_parameters() {
    let wl = small(3, 1);
    let r = run(&wl, "MEM008", "restore");
    let w = round_size(wl.hidden * wl.hidden * 4) as u64;
    let b = round_size(wl.hidden * 4) as u64;
    let head = round_size(wl.classes * wl.hidden * 4) as u64 + round_size(wl.classes * 4) as u64;
    assert_eq!(r.saving_bytes, Some((3 * (w + b) + head) as i64));
}

#[test]
fn mem012_bad_loop_allocates_gradients_of_the_frozen_network() {
    let wl = small(3, 3);
    let r = run(&wl, "MEM012", "frozen");
    // Held after the loop: the frozen network's accumulated .grad is the whole difference (the
    // generator's gradient, the batch, fake and loss are alive in both loops).
    let frozen_grads = 3 * (round_size(wl.hidden * wl.hidden * 4) + round_size(wl.hidden * 4)) as u64;
    assert_eq!(r.held_bytes_bad.expect("figures") - r.held_bytes_fixed.expect("figures"), frozen_grads);
    assert!(r.saving_bytes.expect("figures") as u64 > frozen_grads, "the peak adds the target branch's graph: {r:?}");
    assert_eq!(r.at_peak_fixed.expect("figures").gradients as u64, round_size(wl.hidden * wl.hidden * 4) as u64 + round_size(wl.hidden * 4) as u64, "fixed: only the generator's gradients");
}

#[test]
fn a_parameter_used_twice_gets_its_gradients_summed_once_both_arrived() {
    // MEM012's bad loop runs the frozen network on fake and on target: each weight's two
    // gradients are buffered until both exist, and (being views) summed out of place, so at the
    // backward's peak the target branch's L weight gradients wait in buffers.
    let wl = small(3, 1);
    let r = run(&wl, "MEM012", "frozen");
    let w = round_size(wl.hidden * wl.hidden * 4) as u64;
    let bad = r.at_peak_bad.expect("figures");
    assert!(bad.outputs as u64 >= 3 * w, "pending weight gradients at the peak: {bad:?}");
}

#[test]
fn sum0_staging_follows_atens_reduce_config() {
    use memlint_verify::autograd::sum0_staging;
    use memlint_verify::backend::DType;
    let h100 = (132, 2048);
    // The bias gradient of a 1024-wide layer at batch 1024: 16 blocks per output column group,
    // 32 × 4 columns each, f32 partial sums; 8 groups of semaphores.
    assert_eq!(sum0_staging(1024, 1024, DType::Fp32, h100), (8 << 20, 32));
    // Fewer rows per thread: no global reduction.
    assert_eq!(sum0_staging(512, 4096, DType::Fp32, h100), (0, 0));
    assert_eq!(sum0_staging(256, 2048, DType::Fp32, h100), (0, 0));
    assert_eq!(sum0_staging(1024, 10, DType::Fp32, h100), (0, 0));
}

#[test]
fn mem003_has_both_variants_and_an_fp32_reference_that_needs_a_gpu() {
    let wl = small(2, 2);
    for variant in ["half", "autocast"] {
        let r = run(&wl, "MEM003", variant);
        assert!(r.underflow_fraction_bad.is_none() && r.underflow_fraction_fp32.is_none(), "the simulator computes nothing: {r:?}");
    }
    // The .half() model's training holds fp16 parameters and gradients: half the fixed loop's.
    let r = run(&wl, "MEM003", "half");
    assert!(r.held_bytes_bad.is_some());
}

#[test]
fn mem004_rows_time_both_loop_shapes_and_fp16_unless_the_workload_is_fp16() {
    let fp32: Vec<_> = scenarios::for_workload(&small(2, 2)).into_iter().filter(|d| d.code == "MEM004").map(|d| d.variant).collect();
    assert_eq!(fp32, ["train", "del", "train-fp16", "del-fp16"]);
    let fp16: Vec<_> = scenarios::for_workload(&Workload { dtype: DType::Fp16, ..small(2, 2) }).into_iter().filter(|d| d.code == "MEM004").map(|d| d.variant).collect();
    assert_eq!(fp16, ["train", "del"]);
    // The documented loop frees the gradients (zero_grad) before empty_cache: on the simulator the
    // segments it returns are requested again every step; the fixed loop requests none. (Large
    // blocks: with tiny tensors everything shares one small segment that stays in use.)
    let r = run(&Workload { hidden: 2048, batch: 256, ..small(2, 3) }, "MEM004", "train");
    assert!(r.mallocs_per_step_bad.expect("per step") >= 1.0, "{r:?}");
    assert_eq!(r.mallocs_per_step_fixed, Some(0.0));
}

#[test]
fn mem005_growth_keeps_every_graph() {
    let wl = small(2, 5);
    let r = run(&wl, "MEM005", "growth");
    let logsm = round_size(wl.batch * wl.classes * 4) as u64;
    // A retained graph keeps L ReLU outputs, the first layer's input copy is the user's x (not
    // extra), log-softmax and total weight.
    let graph = 2 * bh(&wl) + logsm + 512;
    let s = r.saving_bytes.expect("figures") as u64;
    assert!(s >= (wl.iters as u64 - 1) * graph, "saving {s} < {} graphs of {graph}", wl.iters - 1);
}

#[test]
fn mem009_and_mem005_fixes_lower_the_peak() {
    for (code, variant) in [("MEM009", "train"), ("MEM005", "peak")] {
        let r = run(&small(3, 3), code, variant);
        assert!(r.saving_bytes.expect("figures") > 0, "{code}: {r:?}");
    }
}

#[test]
fn out_of_memory_is_reported_per_scenario_and_the_others_still_run() {
    let wl = Workload { layers: 2, hidden: 1024, batch: 256, iters: 4, dtype: DType::Fp32, classes: 10 };
    let all = run_scenarios(sim(), &wl, &scenarios::all(), |_| {}).expect("runtime");
    let max_peak = all.iter().filter_map(|s| s.peak_bytes_bad).max().expect("peaks");
    // A device a little smaller than the largest loop needs.
    let capacity = (max_peak as usize - (2 << 20)) / (2 << 20) * (2 << 20);
    let small_dev: Rc<dyn Backend> = Rc::new(SimBackend::new(capacity));
    let rows = run_scenarios(small_dev, &wl, &scenarios::all(), |_| {}).expect("runtime");
    assert_eq!(rows.len(), scenarios::all().len(), "every scenario has a row");
    let failed: Vec<_> = rows.iter().filter(|r| r.error.is_some()).collect();
    assert!(!failed.is_empty(), "some loop must run out of memory on {capacity} bytes");
    assert!(failed.iter().all(|r| r.error.as_deref().unwrap_or("").contains("out of memory")), "{failed:?}");
    assert!(rows.iter().any(|r| r.error.is_none()), "the smaller scenarios still run");
}

fn args_sim() -> VerifyArgs {
    VerifyArgs { backend: BackendKind::Sim, layers: 2, hidden: 256, batch: 64, iters: 3, ..VerifyArgs::default() }
}

fn run_capture(args: &VerifyArgs, findings: Option<Vec<Finding>>) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = run_with(args, findings, &mut out, &mut err, false);
    (code, String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned())
}

#[test]
fn json_report_has_the_documented_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("verify.json");
    let args = VerifyArgs { format: Format::Json, output: Some(path.clone()), ..args_sim() };
    let (code, out, err) = run_capture(&args, None);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is JSON");
    let saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("-o file")).expect("file is JSON");
    assert_eq!(v["scenarios"], saved["scenarios"], "-o saves the same report");
    assert_eq!(v["tool"], "memlint verify");
    assert_eq!(v["schema"], 1);
    assert!(v["version"].is_string());
    assert_eq!(v["backend"], "sim");
    assert_eq!(v["estimated"], true);
    for k in ["name", "total_bytes", "free_bytes"] {
        assert!(!v["device"][k].is_null(), "device.{k}");
    }
    assert_eq!(v["workload"]["layers"], 2);
    assert_eq!(v["workload"]["hidden"], 256);
    assert_eq!(v["workload"]["batch"], 64);
    assert_eq!(v["workload"]["iters"], 3);
    assert_eq!(v["workload"]["dtype"], "fp32");
    assert!(v.get("from_snapshot").is_some_and(|f| f.is_null()), "from_snapshot is null without --from-snapshot");
    let rows = v["scenarios"].as_array().expect("scenarios array");
    assert_eq!(rows.len(), 17, "every scenario, MEM004's fp16 rows included on an fp32 workload");
    let keys = [
        "code", "name", "variant", "scenario", "metric", "peak_bytes_bad", "peak_bytes_fixed", "held_bytes_bad", "held_bytes_fixed",
        "step_ms_bad", "step_ms_fixed", "saving_bytes", "saving_fraction", "saving_summary", "underflow_fraction_bad",
        "underflow_fraction_fixed", "underflow_fraction_fp32", "at_peak_bad", "at_peak_fixed", "mallocs_per_step_bad", "mallocs_per_step_fixed", "error",
    ];
    for r in rows {
        for k in keys {
            assert!(r.get(k).is_some(), "scenario {} lacks {k}", r["code"]);
        }
        assert!(r["error"].is_null());
        assert!(r["peak_bytes_bad"].is_u64());
        // The simulator runs nothing: no times, no underflow fractions.
        assert!(r["step_ms_bad"].is_null());
        assert!(r["underflow_fraction_bad"].is_null());
        assert!(r["saving_summary"].as_str().is_some_and(|s| !s.is_empty()));
    }
    let codes: Vec<&str> = rows.iter().filter_map(|r| r["code"].as_str()).collect();
    for c in ["MEM001", "MEM002", "MEM003", "MEM004", "MEM005", "MEM006", "MEM008", "MEM009", "MEM012"] {
        assert!(codes.contains(&c), "{c} missing");
    }
    assert!(v["torch"].is_null());
    assert!(v["findings"].is_null());
}

#[test]
fn text_and_markdown_tables_mark_estimates() {
    let (code, out, _) = run_capture(&VerifyArgs { rules: vec!["MEM001".into(), "retain-graph-in-loop".into()], ..args_sim() }, None);
    assert_eq!(code, 0);
    assert!(out.contains("ESTIMATE"), "{out}");
    assert!(out.contains("MEM001 eval-without-no-grad"));
    assert!(out.contains("MEM005 retain-graph-in-loop"));
    assert!(!out.contains("MEM009"), "only the asked rules run");
    assert!(out.contains("~"), "figures carry the estimate mark");
    let (code, md, _) = run_capture(&VerifyArgs { format: Format::Markdown, rules: vec!["MEM001".into()], ..args_sim() }, None);
    assert_eq!(code, 0);
    assert!(md.contains("| rule | scenario | peak bad |"), "{md}");
    assert!(md.contains("|---|"));
}

#[test]
fn findings_select_the_scenarios_and_are_printed_per_line() {
    let findings = vec![
        Finding { path: "train.py".into(), row: 12, column: 5, code: "MEM001".into(), name: "eval-without-no-grad".into(), message: String::new() },
        Finding { path: "train.py".into(), row: 30, column: 1, code: "MEM007".into(), name: "data-parallel".into(), message: String::new() },
    ];
    let (code, out, err) = run_capture(&args_sim(), Some(findings));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("train.py:12:5: MEM001 eval-without-no-grad: eval: fix saves"), "{out}");
    // MEM007 runs on the simulator's devices (2 by default): its line carries the comparison.
    assert!(out.contains("train.py:30:1: MEM007 data-parallel: 2 devices: with SGD with momentum on 2 devices, DataParallel peaks at"), "{out}");
    assert!(!out.contains("no reference scenario for: MEM007"), "{out}");
    assert!(!out.contains("MEM009"), "rules that did not fire do not run");
}

#[test]
fn each_finding_runs_the_variant_that_matches_it() {
    let f = |row, code: &str, name: &str, message: &str| Finding { path: "t.py".into(), row, column: 1, code: code.into(), name: name.into(), message: message.into() };
    let findings = vec![
        f(10, "MEM002", "accumulated-loss-tensor", "`total += loss` keeps each step's graph nodes and loss tensor alive after `backward()`: ..."),
        f(20, "MEM003", "half-without-grad-scaler", "`model.half()` trains in float16 without loss scaling: ..."),
    ];
    let (code, out, err) = run_capture(&args_sim(), Some(findings));
    assert_eq!(code, 0, "{err}");
    let line = |row: usize| out.lines().find(|l| l.starts_with(&format!("t.py:{row}:"))).unwrap_or_default().to_string();
    assert!(line(10).contains("train:") && line(10).contains("train-model-dropped:") && !line(10).contains("eval:"), "{out}");
    assert!(line(20).contains("half:") && !line(20).contains("autocast:"), "{out}");
    assert!(!out.contains(" eval "), "the evaluation variant did not run: {out}");
    assert!(out.contains("reference workload (an MLP of 2 layers of width 256, batch 64, 3 iterations, fp32)"), "{out}");
    let eval = vec![
        f(5, "MEM002", "accumulated-loss-tensor", "`total += loss` keeps every batch's activations on the GPU: ... in a loop with no `backward()` and no `torch.no_grad()`"),
        f(6, "MEM003", "half-without-grad-scaler", "`torch.autocast(\"cuda\")` runs the forward pass in float16 and this code calls `backward()` without a `GradScaler`"),
    ];
    let (code, out, _) = run_capture(&args_sim(), Some(eval));
    assert_eq!(code, 0);
    assert!(line_of(&out, 5).contains("eval:") && !line_of(&out, 5).contains("train:"), "{out}");
    assert!(line_of(&out, 6).contains("autocast:") && !line_of(&out, 6).contains("half:"), "{out}");
}

fn line_of(out: &str, row: usize) -> String {
    out.lines().find(|l| l.starts_with(&format!("t.py:{row}:"))).unwrap_or_default().to_string()
}

#[test]
fn no_findings_means_nothing_to_verify() {
    let (code, out, _) = run_capture(&args_sim(), Some(Vec::new()));
    assert_eq!(code, 0);
    assert!(out.contains("nothing to verify"));
}

#[test]
fn bad_flag_values_exit_2_with_a_message() {
    let (code, _, err) = run_capture(&VerifyArgs { rules: vec!["MEM099".into()], ..args_sim() }, None);
    assert_eq!(code, 2);
    assert!(err.contains("unknown rule 'MEM099'"), "{err}");
    let (code, _, err) = run_capture(&VerifyArgs { iters: 0, ..args_sim() }, None);
    assert_eq!(code, 2);
    assert!(err.contains("--iters must be at least 1"), "{err}");
}

#[test]
fn unwritable_report_path_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = VerifyArgs { output: Some(dir.path().join("missing-dir").join("r.json")), rules: vec!["MEM001".into()], ..args_sim() };
    let (code, _, err) = run_capture(&args, None);
    assert_eq!(code, 2);
    assert!(err.contains("could not write the report"), "{err}");
}

#[test]
fn without_a_cuda_driver_verify_exits_2_and_does_not_panic() {
    if memlint_verify::backend::cuda::probe().is_ok() {
        println!("skipped: a CUDA driver is present on this machine, the no-driver path cannot be exercised");
        return;
    }
    let args = VerifyArgs { backend: BackendKind::Cuda, ..VerifyArgs::default() };
    let (code, out, err) = run_capture(&args, None);
    assert_eq!(code, 2);
    assert!(err.contains("no CUDA driver found"), "{err}");
    assert!(err.contains("--backend sim"), "the message names the way out: {err}");
    assert!(out.is_empty());
}

// ---- MEM007: DataParallel vs DDP on N simulated devices ----

use memlint_verify::autograd::{Runtime, GEMM_WORKSPACE};
use memlint_verify::fabric::SimFabric;
use memlint_verify::parallel::{self, Optimizer, Setup, TORCH_EXTRA_WORKSPACES};

/// The runtimes MEM007 runs on: the GEMM workspace and PyTorch's cuBLASLt one.
fn sim_runtime(_i: usize) -> Result<Runtime, String> {
    Runtime::with_workspaces(sim(), TORCH_EXTRA_WORKSPACES).map_err(|e| e.to_string())
}

fn sim_runtimes(n: usize) -> Vec<Runtime> {
    (0..n).map(|i| sim_runtime(i).expect("sim runtime")).collect()
}

fn sim_setup(n: usize) -> Setup<'static> {
    Setup { devices: n, make: &sim_runtime, fabric: &SimFabric, estimated: true }
}

/// 1 hidden layer of width 128 (a row is 512 bytes, the allocator's rounding), batch 4, 10 classes.
fn tiny(iters: usize) -> Workload {
    Workload { layers: 1, hidden: 128, batch: 4, iters, dtype: DType::Fp32, classes: 10 }
}

/// Parameter bytes of `tiny`, counted by hand: w1 128×128×4, b1 128×4, w2 10×128×4, b2 10×4 → 512.
const TINY_PARAMS: u64 = 65536 + 512 + 5120 + 512;
/// The same four parameters in one flat buffer (71,208 bytes, rounded to 512).
const TINY_FLAT: u64 = 71680;
/// The cuBLAS workspace and, as PyTorch holds them, a second cuBLAS and two cuBLASLt ones: 66 MiB.
const WORKSPACES: u64 = (GEMM_WORKSPACE + 34 * (1 << 20)) as u64;

#[test]
fn mem007_chunks_follow_torch_chunk() {
    assert_eq!(parallel::chunk_rows(10, 4).unwrap(), vec![3, 3, 3, 1]);
    assert_eq!(parallel::chunk_rows(4, 2).unwrap(), vec![2, 2]);
    // torch.chunk(5 rows, 4) gives 3 chunks of 2, 2, 1: one device would be idle.
    let e = parallel::chunk_rows(5, 4).unwrap_err();
    assert!(e.contains("does not split into 4 chunks"), "{e}");
    assert!(parallel::chunk_rows(8, 0).is_err());
}

#[test]
fn mem007_groups_follow_pytorchs_coalescing_and_ddps_buckets() {
    let mib = 1usize << 20;
    // 8 × Linear(4096, 4096) + Linear(4096, 10): weights of 64 MiB, biases of 16 KiB.
    let mut sizes = Vec::new();
    for _ in 0..8 {
        sizes.extend([64 * mib, 16 << 10]);
    }
    sizes.extend([160 << 10, 40]);
    // broadcast_coalesced (ATen's take_tensors): a group closes once it reaches 10 MiB, so each
    // bias rides with the next weight.
    let cpp = parallel::take_tensors_cpp(&sizes, parallel::COALESCE_BYTES);
    assert_eq!(cpp.len(), 9);
    assert_eq!(cpp[0], vec![0]);
    assert_eq!(cpp[1], vec![1, 2]);
    assert_eq!(cpp[8], vec![15, 16, 17]);
    // reduce_add_coalesced (Python's _take_tensors): a tensor that would pass 10 MiB starts a
    // new group, so every large tensor is alone.
    let py = parallel::take_tensors_py(&sizes, parallel::COALESCE_BYTES);
    assert_eq!(py.len(), 16);
    assert_eq!(py[1], vec![1]);
    assert_eq!(py[15], vec![15, 16, 17]);
    // DDP's rebuilt buckets, in gradient-ready order: the first closes at 1 MiB, the others at 25
    // MiB; a tensor never splits.
    assert_eq!(parallel::ddp_buckets(&[512, 4 * mib, 512, 30 * mib]), vec![4 * mib + 512, 30 * mib + 512]);
    assert_eq!(parallel::ddp_buckets(&[5120, 512, 65536, 512]), vec![5120 + 512 + 65536 + 512]);
    assert_eq!(parallel::ddp_buckets(&[20 * mib, 10 * mib, 10 * mib, 10 * mib]), vec![20 * mib, 30 * mib]);
}

#[test]
fn mem007_held_bytes_per_device_counted_by_hand() {
    let wl = tiny(3);
    let fab = SimFabric;
    for (opt, states) in [(Optimizer::Sgd, 0), (Optimizer::SgdMomentum, 1)] {
        // DataParallel, device 0 after the loop: workspaces, the model, its gradients (views of
        // the one buffer the reduce filled: all four fit one 10 MiB group), the momentum buffers
        // (one per parameter) and the loss.
        let dp = parallel::data_parallel(&sim_runtimes(2), &fab, &wl, opt, false).expect("dp").report;
        assert_eq!(dp.devices[0].held_bytes, WORKSPACES + TINY_PARAMS + TINY_FLAT + states * TINY_PARAMS + 512, "{opt:?} {dp:?}");
        // Device 1 keeps nothing but its workspaces: replica, inputs and gradients are gone.
        assert_eq!(dp.devices[1].held_bytes, WORKSPACES, "{opt:?}");
        // Its peak: the replica (one flat buffer), its 2 input rows, activations, gradients.
        assert!(dp.devices[1].peak_bytes >= WORKSPACES + TINY_FLAT + 1024, "{dp:?}");
        assert!(dp.devices[0].peak_bytes > dp.devices[1].peak_bytes, "{dp:?}");
        // DDP, every rank: workspaces, the model, its bucket (rebuilt in gradient-ready order: one
        // bucket, under 1 MiB), its gradients, the momentum buffers and the loss.
        for bucket_view in [false, true] {
            let ddp = parallel::run_ddp(&sim_setup(2), &wl, opt, bucket_view, false).expect("ddp").report;
            assert!(ddp.error.is_none(), "{ddp:?}");
            // With gradient_as_bucket_view=True the gradients are the bucket: one copy less.
            let grads = if bucket_view { 0 } else { TINY_PARAMS };
            for d in &ddp.devices {
                assert_eq!(d.held_bytes, WORKSPACES + TINY_PARAMS + TINY_FLAT + grads + states * TINY_PARAMS + 512, "{opt:?} view={bucket_view} {ddp:?}");
            }
            assert_eq!(ddp.devices[0].peak_bytes, ddp.devices[1].peak_bytes, "ranks are symmetric");
        }
    }
}

#[test]
fn mem007_default_workload_matches_the_structure_pytorch_measured() {
    // 8 × 4096, batch 512, 2 devices (issue 29's first workload). DataParallel's device 0 holds
    // the model, the replicas' gradients and the reduced ones at once, its optimizer state too;
    // device 1 a replica and its share of the activations. DDP: every rank the model, gradients,
    // buckets and optimizer state.
    let wl = Workload { iters: 2, ..Workload::default() };
    let r = parallel::run(&sim_setup(2), &wl, &mut |_| {}).expect("run");
    assert!(r.error.is_none(), "{:?}", r.error);
    let params = 8 * (64 << 20) as u64 + 8 * (16 << 10) + (160 << 10) + 512;
    let m = &r.runs[0];
    assert_eq!(m.optimizer, Optimizer::SgdMomentum);
    let dp0 = m.data_parallel.devices[0].peak_bytes;
    let dp1 = m.data_parallel.devices[1].peak_bytes;
    assert!(dp0 > 4 * params && dp0 < 4 * params + (200 << 20), "{dp0}");
    assert!(dp1 > params && dp1 < params + (200 << 20), "{dp1}");
    let ddp = m.ddp.devices[0].peak_bytes;
    let view = m.ddp_bucket_view.devices[0].peak_bytes;
    assert!(ddp > 4 * params && ddp < 4 * params + (200 << 20), "{ddp}");
    // Bucket views save one copy of the gradients; the two peaks come at different moments of
    // the backward (the view's while activations are still alive), so less than that.
    assert!(ddp - view > params - (128 << 20) && ddp - view <= params, "{ddp} {view}");
    // Plain SGD: no momentum buffers, on device 0 (DataParallel) or every device (DDP).
    let s = &r.runs[1];
    assert_eq!(s.optimizer, Optimizer::Sgd);
    assert_eq!(dp0 - s.data_parallel.devices[0].peak_bytes, params);
    assert_eq!(s.data_parallel.devices[1].peak_bytes, dp1);
    assert_eq!(ddp - s.ddp.devices[1].peak_bytes, params);
    assert!(r.imbalance_data_parallel > 3.0, "{r:?}");
    assert_eq!(r.imbalance_ddp, 1.0);
    assert_eq!(r.saving_bytes, dp0 as i64 - ddp as i64);
    // The summary says whose memory each loop costs and how much, and that times need GPUs.
    let t = &r.saving_summary;
    assert!(t.contains("DataParallel peaks at ~") && t.contains("on device 0") && t.contains("of device 0's peak: what device 0 holds beyond that stays unused on each of them"), "{t}");
    assert!(t.contains("DDP peaks at ~") && t.contains("on every device") && t.contains("gradient_as_bucket_view=True"), "{t}");
    assert!(t.contains("step times need GPUs"), "{t}");
    assert!(r.left_out.iter().any(|l| l.contains("NCCL's own device buffers")), "{:?}", r.left_out);
    assert!(r.left_out.iter().any(|l| l.starts_with("step times")), "{:?}", r.left_out);
}

#[test]
fn mem007_json_and_text_reports_show_per_device_peaks() {
    let args = VerifyArgs { rules: vec!["MEM007".into()], format: Format::Json, devices: 3, batch: 48, ..args_sim() };
    let (code, out, err) = run_capture(&args, None);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is JSON");
    let p = &v["parallel"];
    assert_eq!(p["code"], "MEM007");
    assert_eq!(p["devices"], 3);
    assert_eq!(p["estimated"], true);
    assert_eq!(p["optimizer"], "sgd-momentum");
    assert_eq!(p["chunk_rows"], serde_json::json!([16, 16, 16]));
    for k in ["data_parallel", "ddp", "ddp_bucket_view"] {
        let devs = p[k].as_array().expect("per-device array");
        assert_eq!(devs.len(), 3);
        for (i, d) in devs.iter().enumerate() {
            assert_eq!(d["index"], i);
            assert!(d["peak_bytes"].as_u64().unwrap() >= d["held_bytes"].as_u64().unwrap());
            assert!(d["step_ms"].is_null(), "no times on the simulator");
        }
    }
    let runs = p["runs"].as_array().expect("runs");
    assert_eq!(runs.iter().map(|r| r["optimizer"].as_str().unwrap()).collect::<Vec<_>>(), ["sgd-momentum", "sgd"]);
    assert!(p["step_time_ratio"].is_null());
    assert!(p["imbalance_data_parallel"].as_f64().unwrap() > 1.0);
    assert!(v["rules_without_scenario"].as_array().unwrap().is_empty(), "MEM007 ran on sim");
    let (code, text, _) = run_capture(&VerifyArgs { format: Format::Text, ..args }, None);
    assert_eq!(code, 0);
    assert!(text.contains("MEM007 data-parallel on 3 devices"), "{text}");
    assert!(text.contains("SGD with momentum:") && text.contains("plain SGD:"), "{text}");
    assert!(text.contains("DDP bucket-view peak / held"), "{text}");
    assert!(text.contains("device-0 imbalance: DataParallel"), "{text}");
    assert!(text.contains("not counted: NCCL's own device buffers"), "{text}");
}

#[test]
fn mem007_batch_that_cannot_feed_every_device_is_a_clear_exit_2() {
    let args = VerifyArgs { rules: vec!["data-parallel".into()], devices: 4, batch: 5, ..args_sim() };
    let (code, _, err) = run_capture(&args, None);
    assert_eq!(code, 2);
    assert!(err.contains("MEM007 (data-parallel)") && err.contains("does not split into 4 chunks"), "{err}");
    let (code, _, err) = run_capture(&VerifyArgs { devices: 0, ..args }, None);
    assert_eq!(code, 2);
    assert!(err.contains("--devices must be at least 1"), "{err}");
}

#[test]
fn mem007_with_fewer_gpus_than_devices_says_so() {
    let e = parallel::check_device_count(1, 2, Some("0")).unwrap_err();
    assert!(e.contains("--devices 2 GPUs, but the CUDA driver sees 1 (CUDA_VISIBLE_DEVICES=\"0\")"), "{e}");
    assert!(e.contains("--backend sim"), "{e}");
    assert!(!e.contains("run it with --devices 1"), "one GPU compares nothing: {e}");
    let e = parallel::check_device_count(2, 4, None).unwrap_err();
    assert!(e.contains("run it with --devices 2"), "{e}");
    assert!(parallel::check_device_count(4, 2, None).is_ok());
}

#[test]
fn mem007_on_the_cuda_backend_without_gpus_is_exit_2_not_a_panic() {
    // On a machine without the GPUs (CI): no driver, or fewer GPUs than --devices: exit 2 and a
    // message naming MEM007 and what it needs.
    let enough = memlint_verify::backend::cuda::device_count().map(|n| n >= 2).unwrap_or(false);
    if enough {
        println!("skipped: this machine has 2 GPUs, so MEM007 would run (tests/cuda.rs runs it)");
        return;
    }
    let args = VerifyArgs { backend: BackendKind::Cuda, rules: vec!["MEM007".into()], devices: 2, ..args_sim() };
    let (code, out, err) = run_capture(&args, None);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.starts_with("error: MEM007 (data-parallel): it compares DataParallel and DDP on --devices 2 GPUs, but "), "{err}");
    assert!(out.is_empty(), "{out}");
    // Not asked for by name: the other rules run and MEM007 is noted as not run.
    if memlint_verify::backend::cuda::probe().is_err() {
        return;
    }
    let args = VerifyArgs { backend: BackendKind::Cuda, rules: vec![], devices: 2, iters: 1, ..args_sim() };
    let (_, _, err) = run_capture(&args, None);
    assert!(err.contains("note: MEM007 (data-parallel) not run"), "{err}");
}

#[test]
fn mem007_torch_script_splits_the_batch_as_memlint_does() {
    // The PyTorch half runs only on GPUs; here its argument checks and JSON shape run without torch.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/torch/verify_torch_parallel.py");
    for (batch, n) in [(512usize, 2usize), (10, 4), (5, 4)] {
        let out = match std::process::Command::new("python3").args([script, "--batch", &batch.to_string(), "--devices", &n.to_string()]).output() {
            Ok(o) => o,
            Err(e) => {
                eprintln!("SKIPPED: python3 cannot be run ({e}); chunk_rows is tested on its own above");
                return;
            }
        };
        assert!(out.status.success(), "the script exits 0 and reports in JSON: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        for k in ["python", "torch_version", "devices", "chunk_rows", "workspace_bytes", "runs", "data_parallel", "ddp", "error"] {
            assert!(v.get(k).is_some(), "{k} missing: {v}");
        }
        match parallel::chunk_rows(batch, n) {
            Ok(rows) => assert_eq!(v["chunk_rows"], serde_json::json!(rows)),
            Err(_) => assert!(v["error"].as_str().unwrap_or("").contains("does not split"), "{v}"),
        }
    }
}

#[test]
fn mem007_torch_figures_are_compared_device_by_device() {
    // What the script prints (shape as on a GPU machine) against a simulated report.
    let wl = tiny(2);
    let mut r = parallel::run(&sim_setup(2), &wl, &mut |_| {}).expect("run");
    let peak = |l: &parallel::LoopReport, i: usize| l.devices[i].peak_bytes;
    let m = r.runs[0].clone();
    let torch_json = serde_json::json!({
        "python": "3.12", "torch_version": "2.11.0", "devices": ["GPU", "GPU"], "chunk_rows": [2, 2],
        "workspace_bytes": [WORKSPACES, WORKSPACES], "error": null,
        "runs": [{"optimizer": "sgd-momentum",
                  "data_parallel": {"devices": [{"index": 0, "peak_bytes": peak(&m.data_parallel, 0) * 2, "held_bytes": 0}, {"index": 1, "peak_bytes": peak(&m.data_parallel, 1), "held_bytes": 0}], "step_ms": 12.0, "error": null},
                  "ddp": {"devices": [{"index": 0, "peak_bytes": peak(&m.ddp, 0), "held_bytes": 0}, {"index": 1, "peak_bytes": peak(&m.ddp, 1), "held_bytes": 0}], "step_ms": 10.0, "error": null},
                  "ddp_bucket_view": {"devices": [], "step_ms": null, "error": "CUDA out of memory"}}]
    });
    let t: parallel::TorchParallel = serde_json::from_value(torch_json).expect("the script's shape");
    parallel::attach_torch(&mut r, t);
    let t = r.torch.as_ref().expect("attached");
    let tr = &t.runs[0];
    assert_eq!(tr.data_parallel.devices[0].peak_difference, Some(-0.5));
    assert_eq!(tr.data_parallel.devices[1].peak_difference, Some(0.0));
    assert_eq!(tr.step_time_ratio, Some(1.2));
    // The simulator has no step times: no ratio to compare.
    assert_eq!(tr.step_time_ratio_difference, None);
    assert_eq!(t.max_peak_difference, Some(0.5));
    let text = parallel::render_text(&r);
    assert!(text.contains("DataParallel") && text.contains("-50.0%"), "{text}");
    assert!(text.contains("error: CUDA out of memory"), "{text}");
}
