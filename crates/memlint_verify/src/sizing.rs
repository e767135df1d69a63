//! `--from-snapshot FILE.pickle`: the reference MLP sized after a recorded run.
//!
//! What the snapshot says is read by [`memlint_snapshot::find_loop`] (see its module
//! documentation for the method): the bytes allocated before the loop and alive throughout it
//! (the parameters) and the bytes one iteration allocates up to its backward pass (the
//! activations of one batch). The MLP is then sized so that its own figures, measured the same
//! way by [`footprint`] — the reference runtime on the simulator, the allocator and autograd
//! every scenario uses — match them:
//!
//! 1. the number of layers stays at `--layers` (8 by default), unless `--hidden` is given and
//!    `--layers` is not: then the layers are solved for the parameters;
//! 2. the width is solved for the parameters (unless `--hidden` sets it);
//! 3. the batch is solved for the activations (unless `--batch` sets it).
//!
//! A flag given on the command line always wins for what it sets; what it leaves the others to
//! match is reported. The snapshot does not record element types: `--dtype` (fp32 by default)
//! decides the MLP's, and with it how many elements the bytes make.

use std::path::Path;
use std::rc::Rc;

use serde::Serialize;

use crate::autograd::{Runtime, Sequential};
use crate::backend::{sim::SimBackend, DType, DeviceError};
use crate::scenarios::{Workload, CLASSES, LR};

/// The simulated device the sizing runs on: large enough that no candidate runs out of memory
/// (nothing is allocated on the host).
const SIZING_CAPACITY: usize = 1 << 50;
/// Largest width, batch and layer count the solver tries (the CLI's limits).
const MAX_DIM: usize = 1 << 20;
const MAX_LAYERS: usize = 4096;

/// The reference MLP's figures, measured as [`memlint_snapshot::find_loop`] measures a recorded run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Footprint {
    /// Bytes of the model's parameters (allocated blocks).
    pub parameter_bytes: u64,
    /// The highest the training step's own allocations reach before its backward pass: the
    /// batch, every layer's output and what autograd saves of it, the loss.
    pub activation_bytes: u64,
    /// The highest allocated during the whole step minus what was allocated before it.
    pub rise_bytes: u64,
}

/// Runs the reference training loop (`loss = criterion(model(x), y); loss.backward();
/// optimizer.step()`, a fresh batch every step, gradients accumulating in place as in MEM005's
/// fixed loop) for three steps on the simulator and reads the third, so that gradients already
/// exist as they do in a recorded run's later iterations.
pub fn footprint(wl: &Workload) -> Result<Footprint, DeviceError> {
    let rt = Runtime::new(Rc::new(SimBackend::new(SIZING_CAPACITY)))?;
    let m = Sequential::mlp(&rt, wl.hidden, wl.layers, Some(wl.classes), wl.dtype, 1)?;
    let parameter_bytes = rt.stats().by_kind.parameters as u64;
    let params = m.params();
    let (mut activation_bytes, mut rise_bytes) = (0, 0);
    for step in 0..3u64 {
        rt.synchronize()?;
        let before = rt.stats().allocated;
        rt.reset_peak();
        let x = rt.randn(wl.batch, wl.hidden, wl.dtype, 2 * step + 10)?;
        let y = rt.targets(wl.batch, wl.classes, 2 * step + 11)?;
        let loss = rt.cross_entropy(&m.forward(&rt, &x, false)?, &y)?;
        activation_bytes = (rt.stats().peak_allocated - before) as u64;
        rt.backward(&loss, false)?;
        rt.sgd_step(&params, LR)?;
        drop((x, y, loss));
        rise_bytes = (rt.stats().peak_allocated - before) as u64;
    }
    Ok(Footprint { parameter_bytes, activation_bytes, rise_bytes })
}

/// Parameter bytes of the reference MLP (the same allocator as [`footprint`], without a step).
fn parameter_bytes(layers: usize, hidden: usize, dtype: DType) -> Result<u64, DeviceError> {
    let rt = Runtime::new(Rc::new(SimBackend::new(SIZING_CAPACITY)))?;
    let _m = Sequential::mlp(&rt, hidden, layers, Some(CLASSES), dtype, 1)?;
    Ok(rt.stats().by_kind.parameters as u64)
}

/// The workload flags given on the command line (None: not given).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Given {
    pub layers: Option<usize>,
    pub hidden: Option<usize>,
    pub batch: Option<usize>,
    pub dtype: Option<DType>,
}

/// What `--from-snapshot` read and chose: the `from_snapshot` field of the JSON report.
#[derive(Clone, Debug, Serialize)]
pub struct SnapshotSizing {
    /// The snapshot file as given.
    pub file: String,
    /// What was read from it (bytes as PyTorch's allocator counts them).
    pub read: memlint_snapshot::LoopFigures,
    /// Element type of the recorded run: a snapshot does not record it (always null).
    pub recorded_dtype: Option<String>,
    /// The workload chosen (iterations and classes are not sized).
    pub layers: usize,
    pub hidden: usize,
    pub batch: usize,
    pub dtype: DType,
    /// Workload flags given on the command line, which were kept as given.
    pub set_by_flags: Vec<String>,
    /// The chosen MLP's own figures ([`footprint`]).
    pub reference: Footprint,
    /// Reference over recorded, minus 1 (null when the recorded figure is 0).
    pub parameter_difference: Option<f64>,
    pub activation_difference: Option<f64>,
    pub rise_difference: Option<f64>,
}

fn difference(reference: u64, read: u64) -> Option<f64> {
    (read > 0).then(|| reference as f64 / read as f64 - 1.0)
}

/// The value in `lo..=hi` whose `f` is closest to `target`, for an `f` that grows with its
/// argument (a value whose evaluation fails, as out of memory, counts as too large).
fn closest(lo: usize, hi: usize, target: u64, f: impl Fn(usize) -> Result<u64, DeviceError>) -> Result<usize, DeviceError> {
    let at = |v: usize| -> Result<Option<u64>, DeviceError> {
        match f(v) {
            Ok(x) => Ok(Some(x)),
            Err(DeviceError::OutOfMemory { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    };
    // The smallest value whose figure reaches the target (every smaller one falls short).
    let (mut a, mut b) = (lo, hi);
    while a < b {
        let mid = a + (b - a) / 2;
        match at(mid)? {
            Some(x) if x < target => a = mid + 1,
            _ => b = mid,
        }
    }
    if a == lo {
        return Ok(a);
    }
    let below = at(a - 1)?.unwrap_or(0);
    Ok(match at(a)? {
        Some(above) if above.saturating_sub(target) < target.saturating_sub(below) => a,
        Some(_) => a - 1,
        None => a - 1,
    })
}

/// Reads `path`, finds its loop, and sizes the workload; `iters` is kept. The error is the
/// message for exit status 2 and names the file.
pub fn size_from_snapshot(path: &Path, given: Given, iters: usize) -> Result<(Workload, SnapshotSizing), String> {
    let snap = memlint_snapshot::read_snapshot_with_free_stacks(path).map_err(|e| e.to_string())?;
    let read = memlint_snapshot::find_loop(&snap).map_err(|e| format!("{}: no training loop found: {e}", path.display()))?;
    drop(snap);
    let dtype = given.dtype.unwrap_or(DType::Fp32);
    let device_err = |e: DeviceError| format!("{}: sizing the reference MLP failed: {e}", path.display());
    let (layers, hidden) = match (given.layers, given.hidden) {
        (Some(l), Some(h)) => (l, h),
        (l, None) => {
            let l = l.unwrap_or(Workload::default().layers);
            (l, closest(1, MAX_DIM, read.parameter_bytes, |h| parameter_bytes(l, h, dtype)).map_err(device_err)?)
        }
        (None, Some(h)) => (closest(1, MAX_LAYERS, read.parameter_bytes, |l| parameter_bytes(l, h, dtype)).map_err(device_err)?, h),
    };
    let wl_with = |batch: usize| Workload { layers, hidden, batch, iters, dtype, classes: CLASSES };
    let batch = match given.batch {
        Some(b) => b,
        None => closest(1, MAX_DIM, read.activation_bytes, |b| footprint(&wl_with(b)).map(|f| f.activation_bytes)).map_err(device_err)?,
    };
    let wl = wl_with(batch);
    let reference = footprint(&wl).map_err(device_err)?;
    let set_by_flags = [("--layers", given.layers.is_some()), ("--hidden", given.hidden.is_some()), ("--batch", given.batch.is_some()), ("--dtype", given.dtype.is_some())]
        .iter()
        .filter(|(_, g)| *g)
        .map(|(f, _)| f.to_string())
        .collect();
    let sizing = SnapshotSizing {
        file: path.display().to_string(),
        parameter_difference: difference(reference.parameter_bytes, read.parameter_bytes),
        activation_difference: difference(reference.activation_bytes, read.activation_bytes),
        rise_difference: difference(reference.rise_bytes, read.rise_bytes),
        read,
        recorded_dtype: None,
        layers,
        hidden,
        batch,
        dtype,
        set_by_flags,
        reference,
    };
    Ok((wl, sizing))
}

/// The lines the text report prints about the sizing.
pub fn render_lines(s: &SnapshotSizing) -> Vec<String> {
    use crate::report::fmt_bytes;
    let r = &s.read;
    let b = |x: u64| fmt_bytes(x as f64);
    let pct = |d: Option<f64>| d.map(|d| format!("{:+.1}%", d * 100.0)).unwrap_or_else(|| "-".into());
    let place = match (&r.file, &r.function, r.first_line, r.last_line) {
        (Some(f), Some(func), Some(a), Some(z)) => format!("the loop in {func}() at {f}:{a}-{z}"),
        _ => "a loop (no Python stacks recorded: iterations told apart by memory level)".into(),
    };
    let mut v = vec![
        format!(
            "from snapshot {}: {place} on device {}, {} iterations, {} measured ({} allocations each)",
            s.file, r.device, r.iterations, r.measured_iterations, r.allocations_per_iteration
        ),
        format!(
            "  read: parameters {} ({} blocks allocated before the loop and alive throughout{}); activations {} per batch (an iteration's own bytes up to its backward pass{}); rise {} (max_memory_allocated() during an iteration minus memory_allocated() before it); element type not recorded in a snapshot",
            b(r.parameter_bytes),
            r.parameter_blocks,
            if r.recording_starts_in_loop { "; the recording starts inside the loop, so this may include gradients and optimizer state" } else { "" },
            b(r.activation_bytes),
            if r.activation_bytes_min != r.activation_bytes_max { format!(", {} to {} across iterations", b(r.activation_bytes_min), b(r.activation_bytes_max)) } else { String::new() },
            b(r.rise_bytes),
        ),
    ];
    let how = |flag: &str, sized: &str| if s.set_by_flags.iter().any(|f| f == flag) { format!("({flag})") } else { sized.to_string() };
    v.push(format!(
        "  reference MLP: {} layers {}, width {} {}, batch {} {}, {} {}: parameters {} ({}), activations {} ({}), rise {} ({})",
        s.layers,
        how("--layers", if s.set_by_flags.iter().any(|f| f == "--hidden") { "(sized for the parameters)" } else { "(default)" }),
        s.hidden,
        how("--hidden", "(sized for the parameters)"),
        s.batch,
        how("--batch", "(sized for the activations)"),
        s.dtype.name(),
        how("--dtype", "(default)"),
        b(s.reference.parameter_bytes),
        pct(s.parameter_difference),
        b(s.reference.activation_bytes),
        pct(s.activation_difference),
        b(s.reference.rise_bytes),
        pct(s.rise_difference),
    ));
    v
}
