//! `memlint verify`: measures what each memory rule's fix saves, on a real GPU.
//!
//! For each rule with a scenario, a reference training loop runs twice on the same workload — the
//! anti-pattern ("bad") and its fix — and the device memory (peak and held after the loop) and step
//! time of both are reported. The runtime is this crate's own: device buffers through a caching
//! allocator modelled on PyTorch's ([`alloc`]), an autograd that keeps what PyTorch keeps
//! ([`autograd`]), cuBLAS GEMMs and NVRTC kernels ([`backend::cuda`]), or a host simulator that only
//! accounts allocations ([`backend::sim`], `--backend sim`, every figure marked estimated).
//! This is the only crate of memlint that links cudarc; it loads CUDA at run time, so the binary
//! builds and runs without CUDA and `verify` exits with status 2 and a clear message when no driver
//! is found.
//!
//! # Entry point
//! [`run`] with [`VerifyArgs`] (a `clap::Args`, to flatten into the CLI's `verify` subcommand) and,
//! when files were linted, the [`Finding`]s. Exit status: 0 every scenario ran; 1 at least one
//! scenario failed (for example out of memory: it is reported in its row and the others still run);
//! 2 memlint could not do its job (no CUDA driver, NVRTC or cuBLAS; a bad flag value; the report
//! file could not be written). An unavailable `--compare-torch` (no python3, no torch, no CUDA in
//! torch) is reported in the output and does not change the status.
//!
//! # Scenarios
//! Default workload: an MLP of 8 hidden layers of width 4096 with ReLU and 10 classes, batch 512,
//! 20 iterations, fp32. Each scenario runs its rule's documentation example (see [`scenarios`]).
//! Rows (`code`/`variant`): MEM001/eval, MEM002/train, MEM002/train-model-dropped, MEM002/eval,
//! MEM003/half, MEM003/autocast, MEM004/train, MEM004/del, MEM004/train-fp16, MEM004/del-fp16
//! (the fp16 rows only on an fp32 workload), MEM005/peak, MEM005/growth, MEM006/graphs,
//! MEM006/detached, MEM008/restore, MEM009/train, MEM012/frozen. Rules MEM010 and MEM011 have no
//! scenario (they do not change device memory) and are listed as such. MEM007 (`data-parallel`)
//! compares `nn.DataParallel` with DDP (default buckets and `gradient_as_bucket_view=True`), with
//! plain SGD and SGD with momentum, on `--devices N` devices (default 2), per device
//! ([`parallel`], [`fabric`]): on N GPUs through NCCL (loaded at run time, [`backend::nccl`]), or
//! on the simulator. Asked for by name (`--rule MEM007`, or a finding) without N GPUs or NCCL, it
//! exits 2 with a message; in a run of every rule it is then left out with a note.
//! MEM013 has none either (it checks suppression comments).
//!
//! # The JSON report (`--format json`, `-o FILE`)
//! Stable shape, read by the language server to show measured savings in hovers (it parses the
//! JSON; it must not depend on this crate). `schema` is bumped on incompatible changes; fields are
//! only added. Bytes are integers; absent figures are `null`.
//!
//! | field | meaning |
//! |---|---|
//! | `tool` | always `"memlint verify"` |
//! | `version` | memlint's version |
//! | `schema` | version of this shape (1) |
//! | `backend` | `"cuda"` or `"sim"` |
//! | `estimated` | `true` for `sim`: figures are what the loops would allocate, nothing ran |
//! | `device` | `{index, name, total_bytes, free_bytes}` (free at the start) |
//! | `workload` | `{layers, hidden, batch, iters, dtype, classes}` |
//! | `from_snapshot` | `null`, or with `--from-snapshot`: `{file, read: {device, file, function, first_line, last_line, iterations, measured_iterations, allocations_per_iteration, parameter_bytes, parameter_blocks, recording_starts_in_loop, activation_bytes, activation_bytes_min, activation_bytes_max, rise_bytes, level_at_top_bytes}, recorded_dtype (always null), layers, hidden, batch, dtype, set_by_flags, reference: {parameter_bytes, activation_bytes, rise_bytes}, parameter_difference, activation_difference, rise_difference}` (differences: reference over read, minus 1; see [`sizing`]) |
//! | `scenarios[]` | one per row, see below |
//! | `rules_without_scenario` | codes asked for that have no scenario |
//! | `findings` | `null`, or per linted finding `{path, row, column, code, name, measured: [summary…]}` |
//! | `torch` | `null`, or the `--compare-torch` figures (below) |
//! | `parallel` | `null`, or MEM007's `{code, name, devices, chunk_rows, data_parallel: [{index, peak_bytes, held_bytes, at_peak, step_ms, host_ms}], ddp: [same], imbalance_data_parallel, imbalance_ddp, saving_bytes, saving_summary, error, estimated, optimizer, ddp_bucket_view: [same], step_ms_data_parallel, step_ms_ddp, step_ms_ddp_bucket_view, step_time_ratio, runs: [{optimizer, momentum, data_parallel: {devices: [same], step_ms, host_ms, error}, ddp: {…}, ddp_bucket_view: {…}, step_time_ratio, step_time_ratio_bucket_view}], left_out: [text], torch}` (the fields before `runs` are the first run's: SGD with momentum, DDP's default buckets; imbalance: device 0's peak over the highest of the others; `saving_bytes`: DataParallel's device-0 peak minus DDP's highest, negative when DDP's is higher; `torch`: null, or with `--compare-torch` `{python, torch_version, devices, chunk_rows, workspace_bytes, runs: [{optimizer, data_parallel: {devices: [{index, peak_bytes, held_bytes, step_ms, host_ms, released_after_warmup_bytes, peak_difference}], step_ms, host_ms, error}, ddp, ddp_bucket_view, step_time_ratio, step_time_ratio_bucket_view, step_time_ratio_difference, step_time_ratio_bucket_view_difference}], error, max_peak_difference, max_step_time_ratio_difference}`, differences being memlint's over PyTorch's, minus 1; `host_ms`: the host's time issuing a step, from the blocking `x.cuda()` to `optimizer.step()`'s return less the time blocked in `y.cuda()`, on both sides) |
//! | `elapsed_s` | wall time of the whole run |
//!
//! Each `scenarios[]` entry: `code` (`"MEM001"`), `name` (`"eval-without-no-grad"`), `variant`,
//! `scenario` (short description), `metric` (`"peak"`, `"held"`, `"step_time"` or `"underflow"`:
//! what the saving is about), `peak_bytes_bad`, `peak_bytes_fixed` (highest
//! allocated bytes during the loop, model and data included, as `torch.cuda.max_memory_allocated`),
//! `held_bytes_bad`, `held_bytes_fixed` (allocated right after the loop, its variables alive),
//! `step_ms_bad`, `step_ms_fixed` (null on `sim`), `saving_bytes` (bad minus fixed on the metric;
//! the peak difference for `step_time`/`underflow` rows), `saving_fraction` (of the bad figure),
//! `saving_summary` (one sentence), `underflow_fraction_bad`, `underflow_fraction_fixed` (MEM003:
//! mean fraction of gradient elements that are zero; null elsewhere and on `sim`), `at_peak_bad`,
//! `at_peak_fixed` (bytes by kind at the peak: `parameters`, `gradients`, `saved_activations`,
//! `outputs`, `workspace`, `optimizer_state`), `driver_mallocs_bad`, `driver_mallocs_fixed` (segments allocated from
//! the driver during the loop; MEM004: during its timed passes), `mallocs_per_step_bad`,
//! `mallocs_per_step_fixed` (MEM004: per timed step), `underflow_fraction_fp32` (MEM003: the
//! fraction of zero gradient elements in an fp32 run of the loop), `tracker_reserved_delta_bytes`, `driver_used_delta_bytes` (the
//! tracker's cross-check with `cuMemGetInfo`, since the start of the run; null on `sim`), and
//! `error` (null, or why the row has no figures, e.g. out of memory).
//!
//! `torch`: `{python, torch_version, device, workspace_bytes, error, scenarios: [{code, variant,
//! peak_bytes_bad, peak_bytes_fixed, held_bytes_bad, held_bytes_fixed, step_ms_bad, step_ms_fixed,
//! underflow_fraction_bad, underflow_fraction_fixed, underflow_fraction_fp32, mallocs_per_step_bad,
//! mallocs_per_step_fixed, error, saving_bytes, saving_difference_bytes,
//! saving_relative_difference}]}` where `saving_difference_bytes` is memlint's saving minus
//! PyTorch's and `saving_relative_difference` is that over |PyTorch's saving| (null when PyTorch's
//! saving is under 1 MiB, where a ratio says nothing).
//!
//! ```json
//! {
//!   "tool": "memlint verify", "version": "0.1.0", "schema": 1, "backend": "cuda", "estimated": false,
//!   "device": {"index": 0, "name": "NVIDIA H100 80GB HBM3", "total_bytes": 85017493504, "free_bytes": 84393787392},
//!   "workload": {"layers": 8, "hidden": 4096, "batch": 512, "iters": 20, "dtype": "fp32", "classes": 10},
//!   "from_snapshot": null,
//!   "scenarios": [{
//!     "code": "MEM001",
//!     "name": "eval-without-no-grad",
//!     "variant": "eval",
//!     "scenario": "evaluation loop tracking gradients vs under torch.no_grad()",
//!     "metric": "peak",
//!     "peak_bytes_bad": 721761792,
//!     "peak_bytes_fixed": 595911680,
//!     "held_bytes_bad": 646264320,
//!     "held_bytes_fixed": 579134464,
//!     "step_ms_bad": 2.979,
//!     "step_ms_fixed": 2.977,
//!     "saving_bytes": 125850112,
//!     "saving_fraction": 0.174,
//!     "saving_summary": "fix saves 120.0 MiB of peak device memory (17%)",
//!     "underflow_fraction_bad": null,
//!     "underflow_fraction_fixed": null,
//!     "at_peak_bad": {"parameters": 537166336, "gradients": 0, "saved_activations": 134238720, "outputs": 16802304, "workspace": 33554432},
//!     "at_peak_fixed": {"parameters": 537166336, "gradients": 0, "saved_activations": 0, "outputs": 25190912, "workspace": 33554432},
//!     "driver_mallocs_bad": 8,
//!     "driver_mallocs_fixed": 1,
//!     "tracker_reserved_delta_bytes": 580911104,
//!     "driver_used_delta_bytes": 580911104,
//!     "error": null
//!   }],
//!   "rules_without_scenario": [], "findings": null, "torch": null, "elapsed_s": 5.2
//! }
//! ```
//! (The MEM001 row of `memlint verify -o report.json` on an H100, other rows left out.)

pub mod alloc;
pub mod autograd;
pub mod backend;
pub mod fabric;
pub mod parallel;
pub mod report;
pub mod scenarios;
pub mod sizing;
pub mod torch;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use backend::{Backend, DType};
use report::{DeviceInfo, FindingReport, Report, ScenarioReport};
use scenarios::{Baseline, ScenarioDef, Workload};

/// Every rule: (code, kebab name, has a scenario), in the linter registry's order. The
/// codes and names come from the registry (one list for the whole project); whether a
/// rule has a scenario, from [`scenarios::all`].
pub fn rules() -> &'static [(&'static str, &'static str, bool)] {
    static RULES: std::sync::OnceLock<Vec<(&'static str, &'static str, bool)>> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        let scenarios = scenarios::all();
        memlint_linter::Rule::ALL
            .iter()
            .map(|r| (r.code(), r.name(), scenarios.iter().any(|s| s.code == r.code())))
            .collect()
    })
}

/// Output format of the report on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Markdown,
}

/// Where the reference loops run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// A real NVIDIA GPU through the CUDA driver (loaded at run time).
    Cuda,
    /// A host simulator that only accounts allocations; every figure is an estimate.
    Sim,
}

/// Arguments of `memlint verify`.
#[derive(clap::Args, Debug, Clone)]
pub struct VerifyArgs {
    /// Python files: linted first, then the scenarios of the rules that fired run.
    #[arg(value_name = "FILES")]
    pub files: Vec<PathBuf>,

    /// A PyTorch memory snapshot of your own run of FILES (`torch.cuda.memory._dump_snapshot`):
    /// each finding's measured bytes from that run are printed first, the reference loop's second.
    #[arg(long, value_name = "FILE.pickle", requires = "files")]
    pub snapshot: Option<PathBuf>,
    /// Rules to verify, as codes (MEM001) or names (eval-without-no-grad); comma-separated, repeatable.
    #[arg(long = "rule", value_name = "RULE", value_delimiter = ',')]
    pub rules: Vec<String>,
    /// CUDA device index.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub device: usize,
    /// Report format on stdout.
    #[arg(long, visible_alias = "output-format", value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also save the JSON report to FILE (the language server reads it for hovers).
    #[arg(short = 'o', long = "output", visible_alias = "output-file", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Where the loops run: a GPU, or a simulator that estimates memory without one.
    #[arg(long, value_enum, default_value_t = BackendKind::Cuda)]
    pub backend: BackendKind,
    /// Size the reference MLP after your own run: a PyTorch memory snapshot of 4 iterations or more
    /// of its loop (torch.cuda.memory._record_memory_history(), the loop, then
    /// torch.cuda.memory._dump_snapshot(path)).
    ///
    /// From the snapshot: the loop's iterations (the allocations' stacks repeat; an iteration
    /// starts at the loop body's first line), the parameters (bytes allocated before the loop and
    /// alive throughout it) and the activations of one batch (the bytes an iteration allocates up
    /// to its backward pass: the batch, the forward's outputs and what autograd saves). The MLP's
    /// width is then solved for the parameters and its batch for the activations, measured the
    /// same way on the reference runtime; --layers, --hidden, --batch and --dtype given with it win
    /// for what they set (with --hidden and no --layers, the layers are solved). What was read, the
    /// workload chosen and how close it is are printed first. A snapshot has no element types:
    /// the MLP is fp32 unless --dtype says otherwise.
    #[arg(long, value_name = "FILE.pickle")]
    pub from_snapshot: Option<PathBuf>,
    /// Hidden layers of the workload's MLP.
    #[arg(long, default_value_t = 8)]
    pub layers: usize,
    /// Width of the hidden layers.
    #[arg(long, default_value_t = 4096)]
    pub hidden: usize,
    /// Batch size.
    #[arg(long, default_value_t = 512)]
    pub batch: usize,
    /// Iterations of each loop.
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// Element type of the model and data (MEM003 always trains fp16 under autocast).
    #[arg(long, value_enum, default_value_t = DType::Fp32)]
    pub dtype: DType,
    /// Which of --layers, --hidden, --batch and --dtype were given on the command line (they win
    /// over --from-snapshot's sizing); the CLI fills it from clap's matches
    /// ([`VerifyArgs::note_given`]), a library caller sets it.
    #[arg(skip)]
    pub given: Given,
    /// Run the same loops through PyTorch (python3 with torch and CUDA) and show its figures beside ours.
    #[arg(long)]
    pub compare_torch: bool,
    /// Devices of MEM007 (data-parallel): nn.DataParallel against DDP (default buckets and
    /// gradient_as_bucket_view=True), with plain SGD and SGD with momentum, on GPUs 0..N: per-device
    /// peak and held memory and the step time of each. Needs N GPUs and NCCL (libnccl.so.2, found on
    /// the loader's path, in python3's nvidia-nccl wheel, or where MEMLINT_NCCL points).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub devices: usize,
}

impl Default for VerifyArgs {
    fn default() -> Self {
        let w = Workload::default();
        VerifyArgs {
            files: Vec::new(),
            snapshot: None,
            rules: Vec::new(),
            device: 0,
            format: Format::Text,
            output: None,
            backend: BackendKind::Cuda,
            from_snapshot: None,
            layers: w.layers,
            hidden: w.hidden,
            batch: w.batch,
            iters: w.iters,
            dtype: w.dtype,
            given: Given::default(),
            compare_torch: false,
            devices: 2,
        }
    }
}

/// Which workload flags were given on the command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Given {
    pub layers: bool,
    pub hidden: bool,
    pub batch: bool,
    pub dtype: bool,
}

impl VerifyArgs {
    /// Records which workload flags the command line gave (`matches`: the `verify`
    /// subcommand's), so that they win over `--from-snapshot`'s sizing.
    pub fn note_given(&mut self, matches: &clap::ArgMatches) {
        let on = |id: &str| matches!(matches.value_source(id), Some(clap::parser::ValueSource::CommandLine));
        self.given = Given { layers: on("layers"), hidden: on("hidden"), batch: on("batch"), dtype: on("dtype") };
    }
}

/// A finding of the linter, as the CLI hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    pub row: usize,
    pub column: usize,
    /// Rule code, e.g. "MEM001".
    pub code: String,
    /// Rule name, e.g. "eval-without-no-grad".
    pub name: String,
    /// The linter's message: it says which form of the anti-pattern was found (a summed loss in a
    /// training or an evaluation loop, a `.half()` model or fp16 autocast), and with it which
    /// variant of the rule's scenario measures it. Empty: every variant.
    pub message: String,
}

impl Finding {
    /// The scenario variants that measure this finding (None: all of its rule's).
    pub fn variants(&self) -> Option<&'static [&'static str]> {
        if self.message.is_empty() {
            return None;
        }
        match resolve_rule(&self.code).map(|r| r.0) {
            // The linter says a summed loss outlives `backward()` only in a training loop.
            Some("MEM002") if self.message.contains("after `backward()`") => Some(&["train", "train-model-dropped"]),
            Some("MEM002") => Some(&["eval"]),
            // Its autocast finding "runs the forward pass in float16"; the other is a conversion.
            Some("MEM003") if self.message.contains("runs the forward pass in float16") => Some(&["autocast"]),
            Some("MEM003") => Some(&["half"]),
            _ => None,
        }
    }

    fn measured_by(&self, code: &str, variant: &str) -> bool {
        resolve_rule(&self.code).map(|r| r.0) == Some(code) && self.variants().is_none_or(|v| v.contains(&variant))
    }
}

/// Runs the scenarios and prints the report on stdout (progress and errors on stderr).
///
/// `findings`: None when no files were given (every scenario, or those of `--rule`); Some when files
/// were linted (the scenarios of the rules that fired, with a line per finding). Returns the exit
/// status described in the crate documentation.
pub fn run(args: &VerifyArgs, findings: Option<Vec<Finding>>) -> i32 {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let progress = std::io::stderr().is_terminal();
    run_with(args, findings, &mut stdout.lock(), &mut stderr.lock(), progress)
}

/// Resolves a rule given as a code or a kebab name.
pub fn resolve_rule(s: &str) -> Option<(&'static str, &'static str, bool)> {
    let t = s.trim();
    rules().iter().copied().find(|(c, n, _)| c.eq_ignore_ascii_case(t) || n.eq_ignore_ascii_case(t))
}

/// Largest width/batch accepted: cuBLAS takes 32-bit dimensions and such sizes exceed any GPU anyway.
const MAX_DIM: usize = 1 << 20;

fn workload(args: &VerifyArgs) -> Result<(Workload, Option<sizing::SnapshotSizing>), String> {
    for (flag, v) in [("--layers", args.layers), ("--hidden", args.hidden), ("--batch", args.batch), ("--iters", args.iters)] {
        if v == 0 {
            return Err(format!("{flag} must be at least 1"));
        }
    }
    if args.hidden > MAX_DIM || args.batch > MAX_DIM || args.layers > 4096 {
        return Err(format!("workload too large: --hidden and --batch at most {MAX_DIM}, --layers at most 4096"));
    }
    if !matches!(args.dtype, DType::Fp32 | DType::Fp16) {
        return Err("--dtype must be fp32 or fp16".into());
    }
    if let Some(path) = &args.from_snapshot {
        let g = args.given;
        let given = sizing::Given {
            layers: g.layers.then_some(args.layers),
            hidden: g.hidden.then_some(args.hidden),
            batch: g.batch.then_some(args.batch),
            dtype: g.dtype.then_some(args.dtype),
        };
        let (wl, s) = sizing::size_from_snapshot(path, given, args.iters)?;
        return Ok((wl, Some(s)));
    }
    Ok((Workload { layers: args.layers, hidden: args.hidden, batch: args.batch, iters: args.iters, dtype: args.dtype, classes: scenarios::CLASSES }, None))
}

/// The rule codes to verify, in rule order, and those among them without a scenario.
fn selected_rules(args: &VerifyArgs, findings: &Option<Vec<Finding>>) -> Result<(Vec<&'static str>, Vec<String>), String> {
    let mut asked: Vec<&'static str> = Vec::new();
    for r in &args.rules {
        if r.trim().is_empty() {
            continue;
        }
        match resolve_rule(r) {
            Some((c, _, _)) => asked.push(c),
            None => {
                let known: Vec<String> = rules().iter().map(|(c, n, _)| format!("{c} ({n})")).collect();
                return Err(format!("unknown rule '{r}'; known rules: {}", known.join(", ")));
            }
        }
    }
    let fired: Option<Vec<&'static str>> = findings.as_ref().map(|fs| fs.iter().filter_map(|f| resolve_rule(&f.code).map(|r| r.0)).collect());
    let chosen: Vec<&'static str> = rules()
        .iter()
        .map(|r| r.0)
        .filter(|c| match (&fired, asked.is_empty()) {
            (Some(f), true) => f.contains(c),
            (Some(f), false) => f.contains(c) && asked.contains(c),
            (None, true) => true,
            (None, false) => asked.contains(c),
        })
        .collect();
    let explicit = fired.is_some() || !asked.is_empty();
    let without: Vec<String> = if explicit {
        chosen.iter().filter(|c| rules().iter().any(|r| r.0 == **c && !r.2)).map(|c| c.to_string()).collect()
    } else {
        Vec::new()
    };
    Ok((chosen, without))
}

/// Builds the backend; the error is the message for exit status 2.
pub fn make_backend(kind: BackendKind, device: usize) -> Result<Rc<dyn Backend>, String> {
    match kind {
        BackendKind::Sim => Ok(Rc::new(backend::sim::SimBackend::new(backend::sim::DEFAULT_CAPACITY))),
        BackendKind::Cuda => {
            // Probe before any other cudarc call: cudarc panics when a library is missing.
            backend::cuda::probe()?;
            // A missing *symbol* in an old driver also panics inside cudarc; keep that from
            // escaping as a crash of memlint.
            match std::panic::catch_unwind(|| backend::cuda::CudaBackend::new(device)) {
                Ok(Ok(b)) => Ok(Rc::new(b)),
                Ok(Err(e)) => Err(e),
                Err(p) => Err(format!(
                    "the CUDA libraries could not be used: {}",
                    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
                )),
            }
        }
    }
}

/// MEM007 on `--devices` devices of the chosen backend (and PyTorch beside it with
/// `--compare-torch`). An error is why it could not run at all.
fn run_parallel(args: &VerifyArgs, wl: &Workload, progress: bool, err: &mut dyn Write) -> Result<parallel::ParallelReport, String> {
    let n = args.devices;
    let mut tick = |m: &str| {
        if progress {
            let _ = writeln!(err, "memlint verify: {m}");
        }
    };
    let rows = parallel::chunk_rows(wl.batch, n)?;
    let mut report = match args.backend {
        BackendKind::Sim => {
            let make = |_i: usize| -> Result<autograd::Runtime, String> {
                let b: Rc<dyn Backend> = Rc::new(backend::sim::SimBackend::new(backend::sim::DEFAULT_CAPACITY));
                autograd::Runtime::with_workspaces(b, parallel::TORCH_EXTRA_WORKSPACES).map_err(|e| format!("could not set up the runtime: {e}"))
            };
            let setup = parallel::Setup { devices: n, make: &make, fabric: &fabric::SimFabric, estimated: true };
            parallel::run(&setup, wl, &mut tick)?
        }
        BackendKind::Cuda => {
            let count = backend::cuda::device_count().map_err(|e| format!("it compares DataParallel and DDP on --devices {n} GPUs, but {e}"))?;
            parallel::check_device_count(count, n, std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref())?;
            let (lib, version) = backend::nccl::probe()?;
            tick(&format!("MEM007: NCCL {version} from {lib}"));
            let fab = fabric::CudaFabric::new(n)?;
            let make = |i: usize| -> Result<autograd::Runtime, String> {
                let b = make_backend(BackendKind::Cuda, i)?;
                autograd::Runtime::with_workspaces(b, parallel::TORCH_EXTRA_WORKSPACES).map_err(|e| format!("could not set up the runtime on GPU {i}: {e}"))
            };
            let setup = parallel::Setup { devices: n, make: &make, fabric: &fab, estimated: false };
            parallel::run(&setup, wl, &mut tick)?
        }
    };
    debug_assert_eq!(report.chunk_rows, rows);
    if args.compare_torch {
        tick("MEM007: PyTorch's DataParallel and DDP (python3)");
        let t = torch::run_torch_parallel("python3", wl, n);
        parallel::attach_torch(&mut report, t);
    }
    Ok(report)
}

/// Runs the given scenarios on a backend and returns their reports. `tick` is called after each loop.
pub fn run_scenarios(dev: Rc<dyn Backend>, wl: &Workload, defs: &[ScenarioDef], mut tick: impl FnMut(&str)) -> Result<Vec<ScenarioReport>, String> {
    let rt = autograd::Runtime::new(dev.clone()).map_err(|e| format!("could not set up the runtime: {e}"))?;
    // The simulator runs nothing, so there is nothing to warm up. A warm-up that runs out of memory
    // is skipped: the scenarios then report their own out-of-memory rows.
    if !dev.estimated() {
        match warm_up(&rt, wl, defs) {
            Ok(()) | Err(backend::DeviceError::OutOfMemory { .. }) => rt.empty_cache().map_err(|e| e.to_string())?,
            Err(e) => return Err(format!("could not run a warm-up step on the device: {e}")),
        }
    }
    let base = Baseline { free: if dev.estimated() { None } else { dev.mem_info().ok().map(|m| m.0) }, reserved: rt.stats().reserved };
    let mut out = Vec::new();
    let mut reference_fractions: Vec<(usize, Option<f64>)> = Vec::new();
    for def in defs {
        let mut one = |bad: bool| -> Result<scenarios::Measure, String> {
            tick(&format!("{} {} ({})", def.code, def.variant, if bad { "bad" } else { "fixed" }));
            // Each loop starts from an empty cache, as a fresh process would.
            rt.empty_cache().map_err(|e| e.to_string())?;
            let r = (def.run)(&rt, wl, bad, &base).map_err(|e| e.to_string());
            rt.empty_cache().map_err(|e| e.to_string())?;
            r
        };
        let bad = one(true);
        let fixed = one(false);
        let mut row = report::scenario_report(def, bad, fixed, dev.estimated(), wl.iters);
        if let Some(reference) = def.reference {
            // The same reference loop serves every row that names it: run it once.
            let key = reference as usize;
            let frac = match reference_fractions.iter().find(|(k, _)| *k == key) {
                Some((_, f)) => *f,
                None => {
                    tick(&format!("{} {} (reference)", def.code, def.variant));
                    rt.empty_cache().map_err(|e| e.to_string())?;
                    let f = reference(&rt, wl, false, &base).ok().and_then(|m| m.underflow);
                    rt.empty_cache().map_err(|e| e.to_string())?;
                    reference_fractions.push((key, f));
                    f
                }
            };
            row.underflow_fraction_fp32 = frac;
            row.saving_summary = report::underflow_summary(&row);
        }
        report::caveat(&mut row, def);
        out.push(row);
    }
    Ok(out)
}

/// One training step on the workload's shapes before anything is measured: the first use of a GEMM
/// shape loads cuBLAS kernels and picks algorithms, which would otherwise be timed in whichever loop
/// runs first. Its memory is released before the baseline is taken. The PyTorch script warms up too.
fn warm_up(rt: &autograd::Runtime, wl: &Workload, defs: &[ScenarioDef]) -> Result<(), backend::DeviceError> {
    let mut modes = vec![(wl.dtype, false)];
    for d in defs {
        if let Some(t) = d.dtype {
            if !modes.contains(&(t, false)) {
                modes.push((t, false));
            }
        }
    }
    if defs.iter().any(|d| d.code == "MEM003") {
        for m in [(DType::Fp32, true), (DType::Fp16, false), (DType::Fp32, false)] {
            if !modes.contains(&m) {
                modes.push(m);
            }
        }
    }
    for (dtype, autocast) in modes {
        let m = autograd::Sequential::mlp(rt, wl.hidden, wl.layers, Some(wl.classes), dtype, 1)?;
        let x = rt.randn(wl.batch, wl.hidden, dtype, 2)?;
        let y = rt.targets(wl.batch, wl.classes, 3)?;
        let out = m.forward(rt, &x, autocast)?;
        let out = if autocast { rt.cast(&out, DType::Fp32)? } else { out };
        let loss = rt.cross_entropy(&out, &y)?;
        rt.backward(&loss, false)?;
        rt.sgd_step(&m.params(), scenarios::LR)?;
        rt.synchronize()?;
    }
    rt.empty_cache()
}

/// [`run`] with explicit output streams; `progress` shows the progress bar on stderr.
pub fn run_with(args: &VerifyArgs, findings: Option<Vec<Finding>>, out: &mut dyn Write, err: &mut dyn Write, progress: bool) -> i32 {
    let started = Instant::now();
    let (wl, from_snapshot) = match workload(args) {
        Ok(w) => w,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return 2;
        }
    };
    let (codes, without) = match selected_rules(args, &findings) {
        Ok(x) => x,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return 2;
        }
    };
    if let Some(fs) = &findings {
        if fs.is_empty() {
            let _ = writeln!(out, "no findings in the given files: nothing to verify");
            return 0;
        }
    }
    // MEM007 runs on its own runtimes, one per device.
    let mut without = without;
    let mut parallel_report = None;
    let mut failed_parallel = false;
    if codes.contains(&"MEM007") {
        let explicit = without.iter().any(|c| c == "MEM007");
        without.retain(|c| c != "MEM007");
        if let Err(e) = parallel::chunk_rows(wl.batch, args.devices) {
            let _ = writeln!(err, "error: MEM007 (data-parallel): {e}");
            return 2;
        }
        match run_parallel(args, &wl, progress, err) {
            Ok(p) => {
                failed_parallel = p.error.is_some();
                parallel_report = Some(p);
            }
            Err(e) if explicit => {
                let _ = writeln!(err, "error: MEM007 (data-parallel): {e}");
                return 2;
            }
            // Not asked for by name (every rule runs): the other rules still run.
            Err(e) => {
                let _ = writeln!(err, "note: MEM007 (data-parallel) not run: {e}");
            }
        }
    }
    let dev = match make_backend(args.backend, args.device) {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return 2;
        }
    };
    let (free, total) = match dev.mem_info() {
        Ok(m) => m,
        Err(e) => {
            let _ = writeln!(err, "error: could not read device memory: {e}");
            return 2;
        }
    };
    let defs: Vec<ScenarioDef> = scenarios::for_workload(&wl)
        .into_iter()
        .filter(|d| codes.contains(&d.code))
        // With linted files, only the variants that measure what was found.
        .filter(|d| findings.as_ref().is_none_or(|fs| fs.iter().any(|f| f.measured_by(d.code, d.variant))))
        .collect();

    let bar = if progress { indicatif::ProgressBar::new((defs.len() * 2) as u64 + args.compare_torch as u64) } else { indicatif::ProgressBar::hidden() };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.println(format!("memlint verify: {} — {} free of {}", dev.device_name(), report::fmt_bytes(free as f64), report::fmt_bytes(total as f64)));
    let scenarios = match run_scenarios(dev.clone(), &wl, &defs, |m| {
        bar.set_message(m.to_string());
        bar.inc(1);
    }) {
        Ok(s) => s,
        Err(e) => {
            bar.finish_and_clear();
            let _ = writeln!(err, "error: {e}");
            return 2;
        }
    };
    let torch = if args.compare_torch && !defs.is_empty() {
        bar.set_message("PyTorch comparison (python3)");
        let mut codes: Vec<&str> = defs.iter().map(|d| d.code).collect();
        codes.dedup();
        let mut t = torch::run_torch("python3", &wl, args.device, &codes);
        torch::attach(&mut t, &scenarios);
        bar.inc(1);
        Some(t)
    } else {
        None
    };
    bar.finish_and_clear();

    let findings_report = findings.map(|fs| {
        fs.iter()
            .map(|f| {
                let code = resolve_rule(&f.code).map(|r| r.0.to_string()).unwrap_or_else(|| f.code.clone());
                FindingReport {
                    path: f.path.display().to_string(),
                    row: f.row,
                    column: f.column,
                    code: code.clone(),
                    name: f.name.clone(),
                    measured: scenarios
                        .iter()
                        .filter(|s| f.measured_by(&s.code, &s.variant))
                        .map(|s| format!("{}: {}", s.variant, s.error.clone().map(|e| format!("error: {e}")).unwrap_or_else(|| s.saving_summary.clone())))
                        .chain(parallel_report.as_ref().filter(|_| code == "MEM007").map(|p| {
                            format!("{} devices: {}", p.devices, p.error.clone().map(|e| format!("error: {e}")).unwrap_or_else(|| p.saving_summary.clone()))
                        }))
                        .collect(),
                }
            })
            .collect()
    });
    let failed = failed_parallel || scenarios.iter().any(|s| s.error.is_some());
    let report = Report {
        tool: "memlint verify",
        version: env!("CARGO_PKG_VERSION"),
        schema: report::SCHEMA_VERSION,
        backend: dev.name(),
        estimated: dev.estimated(),
        device: DeviceInfo { index: args.device, name: dev.device_name(), total_bytes: total as u64, free_bytes: free as u64 },
        workload: wl,
        from_snapshot,
        scenarios,
        rules_without_scenario: without,
        findings: findings_report,
        torch,
        parallel: parallel_report,
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    let json = match serde_json::to_string_pretty(&report) {
        Ok(j) => j,
        Err(e) => {
            let _ = writeln!(err, "error: could not serialise the report: {e}");
            return 2;
        }
    };
    if let Some(path) = &args.output {
        if let Err(e) = std::fs::write(path, format!("{json}\n")) {
            let _ = writeln!(err, "error: could not write the report to {}: {e}", path.display());
            return 2;
        }
    }
    let text = match args.format {
        Format::Json => format!("{json}\n"),
        Format::Text => report::render_text(&report),
        Format::Markdown => report::render_markdown(&report),
    };
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        // The report is the job's product: not delivering it is a failure to do the job.
        let _ = writeln!(err, "error: could not write the report: {e}");
        return 2;
    }
    if failed {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod rule_table_tests {
    /// Each scenario names its rule as the registry does (the scenario list spells code
    /// and name; the registry is the one list that decides them).
    #[test]
    fn scenarios_name_their_rules_as_the_registry_does() {
        for s in crate::scenarios::all() {
            let rule = memlint_linter::Rule::from_code_or_name(s.code).expect("a scenario's code is a rule's");
            assert_eq!(rule.name(), s.name, "scenario {} {}", s.code, s.variant);
        }
        let table = crate::rules();
        assert_eq!(table.len(), memlint_linter::Rule::ALL.len());
        assert!(table.iter().any(|r| r.2) && table.iter().any(|r| !r.2));
    }
}
