//! MEM007 (`data-parallel`): `nn.DataParallel` against `DistributedDataParallel` on N devices.
//!
//! Each device has its own runtime (backend, caching allocator, cuBLAS workspace), so every figure
//! is per device; cross-device work goes through a [`Fabric`] (peer copies and NCCL on GPUs,
//! nothing on the simulator), so the same code runs on both backends and allocates the same. Both
//! loops train the workload's MLP, with plain SGD and with SGD with momentum, on a global batch of
//! `--batch` rows from page-locked host memory, written as users write them:
//!
//! ```python
//! model = nn.DataParallel(Net()).cuda()          # or DDP(Net().cuda(rank), device_ids=[rank])
//! for x, y in loader:                             # pin_memory=True
//!     optimizer.zero_grad()
//!     loss = criterion(model(x.cuda()), y.cuda())
//!     loss.backward()
//!     optimizer.step()
//! ```
//!
//! after [`WARMUP_STEPS`] warm-up steps (the peak statistics are reset after them), `--iters` timed
//! steps; per device the peak and the bytes held after the loop, and the mean step time.
//!
//! The DataParallel step, as `nn.DataParallel.forward` and autograd run it, the model, its
//! gradients and the optimizer's state on device 0:
//! 1. `x.cuda()`, `y.cuda()` onto device 0 (blocking copies); `zero_grad()` frees the gradients;
//! 2. scatter: device 0's chunk of `x` is a view, device `i ≥ 1` receives a copy of its rows
//!    (`torch.chunk`: chunks of `ceil(batch / N)` rows);
//! 3. replicate (`Broadcast`, i.e. `comm.broadcast_coalesced` with 10 MiB buffers): the parameters,
//!    grouped as ATen's `take_tensors` groups them, are flattened on device 0 (a temporary for
//!    groups of several tensors) and broadcast through NCCL into one flat buffer per group on each
//!    other device; a replica's parameters are views of those buffers (device 0's, of the model's);
//! 4. each replica's forward on its device; the replicas are dropped, so a replica's buffer lives
//!    only while a layer's saved weight refers to it (the first layer's weight is not saved);
//! 5. gather: a `batch × classes` tensor on device 0 receives every replica's output;
//!    the loss and its backward on device 0; the output gradient is scattered back (device 0's
//!    chunk a view, the others copies) and every replica runs its backward on its device;
//! 6. `Broadcast`'s backward (`ReduceAddCoalesced`, 10 MiB groups as Python's `_take_tensors`
//!    makes them): per group a new buffer on device 0 receives the NCCL reduce of every replica's
//!    gradients, and views of it become the parameters' `.grad`; the replicas' gradients, kept
//!    until then on every device, are freed; the optimizer step on device 0.
//!
//! The DDP step: one rank per device (a thread here, a process in PyTorch), each with the whole
//! model and its `torch.chunk` share of the batch. DDP's reducer puts every parameter into one
//! bucket at construction (buckets are only sized by the backward's order once that is known);
//! after the first backward it rebuilds them in the order the gradients became ready: a first
//! bucket of at least 1 MiB, then 25 MiB (`bucket_cap_mb`), a flat buffer each. As each gradient
//! is accumulated, a hook copies it, divided by N, into its place in the bucket; a full bucket is
//! all-reduced through NCCL on a communication stream, overlapping the rest of the backward; at the
//! end of the backward the compute stream waits for the all-reduces and the bucket is copied back
//! into the gradients. With `gradient_as_bucket_view=True` the gradient is replaced by its view
//! of the bucket instead (the freshly computed one is freed), so no second copy is kept and
//! nothing is copied back.
//!
//! What the figures leave out is listed in each report's `left_out` (NCCL's own device buffers,
//! which PyTorch's allocator statistics do not count either; DDP's construction-time broadcast of
//! rank 0's parameters, before the measured steps; on the simulator, the step times).

use std::rc::Rc;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::alloc::{Kind, KindBytes};
use crate::autograd::{GradSlot, Param, Runtime, Sequential, Sgd, Storage, Tensor};
use crate::backend::{DType, DeviceError, HostBatch};
use crate::fabric::{Fabric, RankOps};
use crate::scenarios::{Workload, LR};

const SEED_MODEL: u64 = 2000;
const SEED_DATA: u64 = 17;
/// DDP's `dist._DEFAULT_FIRST_BUCKET_BYTES` and default `bucket_cap_mb`.
pub const DDP_FIRST_BUCKET: usize = 1 << 20;
pub const DDP_BUCKET_CAP: usize = 25 << 20;
/// `comm.broadcast_coalesced` and `comm.reduce_add_coalesced`'s default `buffer_size`.
pub const COALESCE_BYTES: usize = 10 << 20;
/// Untimed steps before the peaks are reset and the steps are timed (DDP rebuilds its buckets in
/// the second; the momentum buffers are made in the first).
pub const WARMUP_STEPS: usize = 2;
/// SGD's momentum in the "SGD with momentum" runs.
pub const MOMENTUM: f32 = 0.9;
/// What a PyTorch process holds on each device besides the cuBLAS workspace every runtime allocates
/// ([`crate::autograd::GEMM_WORKSPACE`], 32 MiB): PyTorch keeps a workspace per cuBLAS handle, and
/// a handle per thread, so the forward (the main thread, or DataParallel's `parallel_apply`
/// thread) and the backward (autograd's thread for the device) each allocate a 32 MiB cuBLAS
/// workspace and a 1 MiB cuBLASLt one through the caching allocator (a memory snapshot of
/// PyTorch 2.11 on an H100 shows the first `nn.Linear` of a replica allocating 32 MiB and 1 MiB;
/// `memory_allocated()` after the loops is 66 MiB on every device). Counted so that per-device
/// peaks compare with `torch.cuda.max_memory_allocated`.
pub const TORCH_EXTRA_WORKSPACES: &[usize] = &[1 << 20, 32 << 20, 1 << 20];

/// The optimizer of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Optimizer {
    /// `torch.optim.SGD(params, lr)`: no state.
    #[serde(rename = "sgd")]
    Sgd,
    /// `torch.optim.SGD(params, lr, momentum=0.9)`: a momentum buffer per parameter, on the
    /// parameters' device (device 0 under DataParallel, every device under DDP).
    #[serde(rename = "sgd-momentum")]
    SgdMomentum,
}

impl Optimizer {
    pub const ALL: [Optimizer; 2] = [Optimizer::SgdMomentum, Optimizer::Sgd];
    pub fn momentum(self) -> f32 {
        match self {
            Optimizer::Sgd => 0.0,
            Optimizer::SgdMomentum => MOMENTUM,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Optimizer::Sgd => "sgd",
            Optimizer::SgdMomentum => "sgd-momentum",
        }
    }
    pub fn describe(self) -> &'static str {
        match self {
            Optimizer::Sgd => "plain SGD",
            Optimizer::SgdMomentum => "SGD with momentum",
        }
    }
}

/// What one device measured during a loop.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DevicePeak {
    pub index: usize,
    /// Highest allocated bytes during the timed steps (as `torch.cuda.max_memory_allocated(index)`).
    pub peak_bytes: u64,
    /// Allocated bytes right after the loop, its variables alive.
    pub held_bytes: u64,
    pub at_peak: KindBytes,
    /// Mean step time on this device's rank (DDP) or of the whole step (DataParallel); null on
    /// the simulator.
    pub step_ms: Option<f64>,
    /// The host's time issuing a step on this rank (see [`LoopReport::host_ms`]).
    pub host_ms: Option<f64>,
}

/// One loop on every device.
#[derive(Clone, Debug, Serialize, Default)]
pub struct LoopReport {
    pub devices: Vec<DevicePeak>,
    /// Mean step time (DDP: the slowest rank's); null on the simulator.
    pub step_ms: Option<f64>,
    /// Of a step, the host's time issuing it: from the return of the blocking `x.cuda()` to the
    /// return of `optimizer.step()`, less the time blocked in `y.cuda()` (which waits for the
    /// forward); DDP: the slowest rank's. Close to `step_ms`, the step waits for the host.
    pub host_ms: Option<f64>,
    /// Why the loop has no figures (out of memory, ...).
    pub error: Option<String>,
}

impl LoopReport {
    fn failed(e: String) -> LoopReport {
        LoopReport { devices: Vec::new(), step_ms: None, host_ms: None, error: Some(e) }
    }
    fn max_peak(&self) -> u64 {
        self.devices.iter().map(|d| d.peak_bytes).max().unwrap_or(0)
    }
}

/// Both loops with one optimizer.
#[derive(Clone, Debug, Serialize)]
pub struct ParallelRun {
    pub optimizer: Optimizer,
    pub momentum: f32,
    pub data_parallel: LoopReport,
    /// DDP with its default buckets (`gradient_as_bucket_view=False`).
    pub ddp: LoopReport,
    /// DDP with `gradient_as_bucket_view=True`.
    pub ddp_bucket_view: LoopReport,
    /// DataParallel's step time over DDP's (default buckets).
    pub step_time_ratio: Option<f64>,
    pub step_time_ratio_bucket_view: Option<f64>,
}

/// The MEM007 comparison, in the JSON report's `parallel` field. The fields up to `error` describe
/// the first run (SGD with momentum, DDP's default buckets); `runs` has every optimizer.
#[derive(Clone, Debug, Serialize)]
pub struct ParallelReport {
    pub code: &'static str,
    pub name: &'static str,
    pub devices: usize,
    /// Rows of the global batch on each device.
    pub chunk_rows: Vec<usize>,
    pub data_parallel: Vec<DevicePeak>,
    pub ddp: Vec<DevicePeak>,
    /// Device 0's peak over the highest peak of the other devices (1.0 on one device).
    pub imbalance_data_parallel: f64,
    pub imbalance_ddp: f64,
    /// DataParallel's device-0 peak minus DDP's highest per-device peak (negative: DDP's is higher).
    pub saving_bytes: i64,
    /// What the measurement says, in one sentence (the finding lines and the editor's hover show it).
    pub saving_summary: String,
    pub error: Option<String>,
    /// Figures of the simulator (no step times).
    pub estimated: bool,
    /// The optimizer of the fields above.
    pub optimizer: Optimizer,
    pub ddp_bucket_view: Vec<DevicePeak>,
    pub step_ms_data_parallel: Option<f64>,
    pub step_ms_ddp: Option<f64>,
    pub step_ms_ddp_bucket_view: Option<f64>,
    /// DataParallel's step time over DDP's.
    pub step_time_ratio: Option<f64>,
    pub runs: Vec<ParallelRun>,
    /// What the figures do not count.
    pub left_out: Vec<String>,
    /// `--compare-torch`: PyTorch's figures for the same loops.
    pub torch: Option<TorchParallel>,
}

/// What `torch/verify_torch_parallel.py` printed, and memlint's figures against it.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct TorchParallel {
    pub python: Option<String>,
    pub torch_version: Option<String>,
    #[serde(default)]
    pub devices: Vec<String>,
    #[serde(default)]
    pub chunk_rows: Option<Vec<usize>>,
    /// Bytes PyTorch held on each device after its loops (its cuBLAS/cuBLASLt workspaces).
    #[serde(default)]
    pub workspace_bytes: Option<Vec<u64>>,
    #[serde(default)]
    pub runs: Vec<TorchRun>,
    pub error: Option<String>,
    /// Filled in by memlint: the largest |memlint / PyTorch - 1| of a device's peak, over every
    /// device of every loop, and of the DataParallel / DDP step-time ratios.
    #[serde(default)]
    pub max_peak_difference: Option<f64>,
    #[serde(default)]
    pub max_step_time_ratio_difference: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct TorchRun {
    pub optimizer: String,
    #[serde(default)]
    pub data_parallel: TorchLoop,
    #[serde(default)]
    pub ddp: TorchLoop,
    #[serde(default)]
    pub ddp_bucket_view: TorchLoop,
    /// Filled in by memlint.
    #[serde(default)]
    pub step_time_ratio: Option<f64>,
    #[serde(default)]
    pub step_time_ratio_bucket_view: Option<f64>,
    /// memlint's ratio over PyTorch's, minus 1.
    #[serde(default)]
    pub step_time_ratio_difference: Option<f64>,
    #[serde(default)]
    pub step_time_ratio_bucket_view_difference: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct TorchLoop {
    #[serde(default)]
    pub devices: Vec<TorchDevice>,
    pub step_ms: Option<f64>,
    /// The host's time issuing a step, measured as memlint's [`LoopReport::host_ms`] (the slowest
    /// rank's): Python issuing the step's work.
    #[serde(default)]
    pub host_ms: Option<f64>,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct TorchDevice {
    pub index: usize,
    pub peak_bytes: u64,
    pub held_bytes: u64,
    #[serde(default)]
    pub step_ms: Option<f64>,
    /// Bytes that went while the script waited after the warm-up steps (NCCL's watchdog letting go
    /// of finished collectives' tensors), before the peaks were reset.
    #[serde(default)]
    pub released_after_warmup_bytes: Option<i64>,
    /// Filled in by memlint: memlint's peak on this device over PyTorch's, minus 1.
    #[serde(default)]
    pub peak_difference: Option<f64>,
}

/// Rows per device as `torch.chunk(batch, n)` gives them; an error when that yields fewer than
/// `n` chunks (DataParallel would then leave devices idle).
pub fn chunk_rows(batch: usize, n: usize) -> Result<Vec<usize>, String> {
    if n == 0 {
        return Err("--devices must be at least 1".into());
    }
    let size = batch.div_ceil(n);
    let mut v = Vec::new();
    let mut left = batch;
    while left > 0 {
        let s = size.min(left);
        v.push(s);
        left -= s;
    }
    if v.len() != n {
        return Err(format!("--batch {batch} does not split into {n} chunks as torch.chunk splits it (it gives {}): use a batch of at least {} rows", v.len(), (n - 1) * size + 1));
    }
    Ok(v)
}

/// The message when fewer GPUs are visible than `--devices` asks for (`visible`: the value of
/// `CUDA_VISIBLE_DEVICES`, if set).
pub fn check_device_count(count: usize, n: usize, visible: Option<&str>) -> Result<(), String> {
    if count >= n {
        return Ok(());
    }
    let visible = visible.map(|v| format!(" (CUDA_VISIBLE_DEVICES={v:?})")).unwrap_or_default();
    let instead = if count >= 2 { format!("run it with --devices {count}, ") } else { String::new() };
    Err(format!(
        "it compares DataParallel and DDP on --devices {n} GPUs, but the CUDA driver sees {count}{visible}: {instead}run it on a machine with {n} GPUs, or with --backend sim for estimates"
    ))
}

/// DDP's bucket sizes in bytes for gradients of these byte sizes, given in the order the
/// gradients become ready (`compute_bucket_assignment_by_size` as the rebuild calls it: the
/// first bucket closes at 1 MiB, the others at 25 MiB; a tensor never splits).
pub fn ddp_buckets(ready_bytes: &[usize]) -> Vec<usize> {
    ddp_bucket_groups(ready_bytes).iter().map(|g| g.iter().map(|&i| ready_bytes[i]).sum()).collect()
}

/// The same as [`ddp_buckets`], as lists of indices into `ready_bytes`.
pub fn ddp_bucket_groups(ready_bytes: &[usize]) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut size = 0;
    for (i, &b) in ready_bytes.iter().enumerate() {
        cur.push(i);
        size += b;
        let cap = if out.is_empty() { DDP_FIRST_BUCKET } else { DDP_BUCKET_CAP };
        if size >= cap {
            out.push(std::mem::take(&mut cur));
            size = 0;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// ATen's `take_tensors(tensors, 10 MiB)` (C++, `broadcast_coalesced`): tensors are appended to a
/// group, which is closed once it reaches the limit.
pub fn take_tensors_cpp(bytes: &[usize], limit: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut size = 0;
    for (i, &b) in bytes.iter().enumerate() {
        cur.push(i);
        size += b;
        if size >= limit {
            out.push(std::mem::take(&mut cur));
            size = 0;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Python's `torch._utils._take_tensors(tensors, 10 MiB)` (`reduce_add_coalesced`): a tensor that
/// would take a non-empty group past the limit starts the next group.
pub fn take_tensors_py(bytes: &[usize], limit: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let mut size = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if size + b > limit && size > 0 {
            out.push(std::mem::take(&mut cur));
            size = 0;
        }
        cur.push(i);
        size += b;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn mlp(rt: &Runtime, wl: &Workload) -> Result<Sequential, DeviceError> {
    Sequential::mlp(rt, wl.hidden, wl.layers, Some(wl.classes), wl.dtype, SEED_MODEL)
}

/// A data set's batch in page-locked host memory: `rows` rows of the global batch from `row0` on
/// (inputs, then int64 targets), the same values on every backend that computes.
struct HostData {
    x: Box<dyn HostBatch>,
    y: Box<dyn HostBatch>,
    rows: usize,
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl HostData {
    fn new(rt: &Runtime, wl: &Workload, row0: usize, rows: usize) -> Result<HostData, DeviceError> {
        let (h, dt) = (wl.hidden, wl.dtype);
        let esize = dt.size();
        let x = rt.dev.pinned(rows * h * esize, &|buf: &mut [u8]| {
            for r in 0..rows {
                for c in 0..h {
                    // Standard normal values (Box-Muller) from a hash of the element's place in the
                    // global batch, so every rank reads the rows DataParallel would scatter to it.
                    let i = ((row0 + r) * h + c) as u64;
                    let a = splitmix(SEED_DATA ^ (i << 1));
                    let b = splitmix(SEED_DATA ^ ((i << 1) | 1));
                    let u1 = ((a >> 40) as f32 + 1.0) / 16_777_216.0;
                    let u2 = (b >> 40) as f32 / 16_777_216.0;
                    let v = (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos();
                    let o = (r * h + c) * esize;
                    match dt {
                        DType::Fp16 => buf[o..o + 2].copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes()),
                        _ => buf[o..o + 4].copy_from_slice(&v.to_le_bytes()),
                    }
                }
            }
        })?;
        let classes = wl.classes as u64;
        let y = rt.dev.pinned(rows * 8, &|buf: &mut [u8]| {
            for r in 0..rows {
                let t = (splitmix(SEED_DATA.wrapping_mul(31) ^ (row0 + r) as u64) % classes) as i64;
                buf[r * 8..r * 8 + 8].copy_from_slice(&t.to_le_bytes());
            }
        })?;
        Ok(HostData { x, y, rows })
    }

    /// `x.cuda()` (blocking: it waits for the device's earlier work too).
    fn x(&self, rt: &Runtime, wl: &Workload) -> Result<Rc<Storage>, DeviceError> {
        let x = rt.empty(self.rows, wl.hidden, wl.dtype, Kind::Output)?;
        rt.dev.upload_pinned(x.addr(), &*self.x, 0, x.bytes())?;
        Ok(x)
    }

    /// `y.cuda()`, which `criterion(model(x.cuda()), y.cuda())` evaluates after the forward pass
    /// (so it waits for the forward's work); also returns the host's time blocked in it.
    fn y(&self, rt: &Runtime) -> Result<(Rc<Storage>, f64), DeviceError> {
        let t = Instant::now();
        let y = rt.empty(self.rows, 1, DType::I64, Kind::Output)?;
        rt.dev.upload_pinned(y.addr(), &*self.y, 0, y.bytes())?;
        Ok((y, t.elapsed().as_secs_f64() * 1000.0))
    }

    /// `x.cuda(), y.cuda()` one after the other.
    fn to_device(&self, rt: &Runtime, wl: &Workload) -> Result<(Rc<Storage>, Rc<Storage>), DeviceError> {
        let x = self.x(rt, wl)?;
        Ok((x, self.y(rt)?.0))
    }
}

fn peaks(rts: &[Runtime], step_ms: Option<f64>) -> Result<Vec<DevicePeak>, DeviceError> {
    rts.iter()
        .enumerate()
        .map(|(i, rt)| {
            rt.synchronize()?;
            let st = rt.stats();
            Ok(DevicePeak { index: i, peak_bytes: st.peak_allocated as u64, held_bytes: st.allocated as u64, at_peak: st.at_peak, step_ms, host_ms: None })
        })
        .collect()
}

/// The host's clock for timed steps; none on the simulator.
fn clock(rt: &Runtime) -> Option<Instant> {
    (!rt.dev.estimated()).then(Instant::now)
}

fn ms_per_step(t0: Option<Instant>, steps: usize) -> Option<f64> {
    t0.map(|t| t.elapsed().as_secs_f64() * 1000.0 / steps.max(1) as f64)
}

/// What a DataParallel loop leaves: its figures and, if asked, device 0's parameters afterwards.
pub struct Outcome {
    pub report: LoopReport,
    pub params: Option<Vec<Vec<f32>>>,
}

fn read_params(rt: &Runtime, params: &[Rc<Param>]) -> Result<Vec<Vec<f32>>, DeviceError> {
    params.iter().map(|p| rt.to_host(&p.data)).collect()
}

/// One replica: per layer its weight and bias as tensors whose gradients go to `slots`.
struct Replica {
    layers: Vec<(Tensor, Tensor)>,
    slots: Vec<GradSlot>,
}

impl Replica {
    fn forward(&self, rt: &Runtime, x: &Tensor) -> Result<Tensor, DeviceError> {
        let mut h = x.clone();
        let last = self.layers.len() - 1;
        for (i, (w, b)) in self.layers.iter().enumerate() {
            h = rt.linear_t(&h, w, b)?;
            if i != last {
                h = rt.relu(&h)?;
            }
        }
        Ok(h)
    }
}

/// `replicate(module, devices)`: `Broadcast.apply` of the parameters (see the module documentation).
fn replicate(rts: &[Runtime], fab: &dyn Fabric, params: &[Rc<Param>], dt: DType) -> Result<Vec<Replica>, DeviceError> {
    let n = rts.len();
    let sizes: Vec<usize> = params.iter().map(|p| p.data.bytes()).collect();
    // Per device, per parameter: its storage on that device.
    let mut storages: Vec<Vec<Option<Rc<Storage>>>> = vec![vec![None; params.len()]; n];
    for (k, p) in params.iter().enumerate() {
        storages[0][k] = Some(p.data.clone());
    }
    for group in take_tensors_cpp(&sizes, COALESCE_BYTES) {
        let total: usize = group.iter().map(|&k| sizes[k]).sum();
        let elems = total / dt.size();
        // flatten_dense_tensors: a single tensor is its own flat view, several are concatenated.
        let tmp = if group.len() == 1 {
            None
        } else {
            let t = rts[0].empty(1, elems, dt, Kind::Output)?;
            let mut off = 0;
            for &k in &group {
                rts[0].dev.copy(t.addr() + off as u64, params[k].data.addr(), sizes[k])?;
                off += sizes[k];
            }
            Some(t)
        };
        let src = tmp.as_ref().map(|t| t.addr()).unwrap_or_else(|| params[group[0]].data.addr());
        let mut flats = Vec::new();
        for rt in rts.iter().skip(1) {
            flats.push(rt.empty(1, elems, dt, Kind::Parameter)?);
        }
        let bufs: Vec<u64> = std::iter::once(src).chain(flats.iter().map(|f| f.addr())).collect();
        fab.broadcast(rts, &bufs, elems, dt)?;
        drop(tmp);
        for (i, flat) in flats.iter().enumerate() {
            let mut off = 0;
            for &k in &group {
                let p = &params[k].data;
                storages[i + 1][k] = Some(Storage::view_of(&flat.buf, flat.offset + off, p.rows, p.cols, dt));
                off += sizes[k];
            }
        }
    }
    let mut out = Vec::new();
    for (i, rt) in rts.iter().enumerate() {
        let mut layers = Vec::new();
        let mut slots = Vec::new();
        let mut tensors = Vec::new();
        for s in storages[i].iter_mut() {
            let (node, slot) = rt.grad_sink();
            slots.push(slot);
            tensors.push(Tensor { data: s.take().expect("every parameter was broadcast"), grad_fn: Some(node) });
        }
        let mut it = tensors.into_iter();
        while let (Some(w), Some(b)) = (it.next(), it.next()) {
            layers.push((w, b));
        }
        out.push(Replica { layers, slots });
    }
    Ok(out)
}

/// `ReduceAddCoalesced`: the replicas' gradients summed onto device 0, views of the sums becoming
/// the parameters' `.grad`.
fn reduce_gradients(rts: &[Runtime], fab: &dyn Fabric, params: &[Rc<Param>], slots: &[Vec<GradSlot>], dt: DType) -> Result<(), DeviceError> {
    let sizes: Vec<usize> = params.iter().map(|p| p.data.bytes()).collect();
    let grad = |i: usize, k: usize| -> Result<Rc<Storage>, DeviceError> {
        slots[i][k].borrow().clone().ok_or_else(|| DeviceError::Usage(format!("internal: replica {i} has no gradient for parameter {k}")))
    };
    for group in take_tensors_py(&sizes, COALESCE_BYTES) {
        let total: usize = group.iter().map(|&k| sizes[k]).sum();
        let elems = total / dt.size();
        let mut flats = Vec::new();
        let mut send = Vec::new();
        for (i, rt) in rts.iter().enumerate() {
            if group.len() == 1 {
                send.push(grad(i, group[0])?.addr());
            } else {
                let f = rt.empty(1, elems, dt, Kind::Output)?;
                let mut off = 0;
                for &k in &group {
                    rt.dev.copy(f.addr() + off as u64, grad(i, k)?.addr(), sizes[k])?;
                    off += sizes[k];
                }
                send.push(f.addr());
                flats.push(f);
            }
        }
        let recv = rts[0].empty(1, elems, dt, Kind::Gradient)?;
        fab.reduce(rts, &send, recv.addr(), elems, dt)?;
        drop(flats);
        let mut off = 0;
        for &k in &group {
            let p = &params[k].data;
            params[k].grad.replace(Some(Storage::view_of(&recv.buf, recv.offset + off, p.rows, p.cols, dt)));
            off += sizes[k];
        }
    }
    Ok(())
}

/// The DataParallel loop on `rts` (device 0 first). `keep_params`: also return the model's
/// parameters after the loop (the GPU tests compare them with a one-device run).
pub fn data_parallel(rts: &[Runtime], fab: &dyn Fabric, wl: &Workload, opt: Optimizer, keep_params: bool) -> Result<Outcome, DeviceError> {
    let n = rts.len();
    let rows = chunk_rows(wl.batch, n).map_err(DeviceError::Usage)?;
    let (r0, dt, h, c) = (&rts[0], wl.dtype, wl.hidden, wl.classes);
    let model = mlp(r0, wl)?;
    let params = model.params();
    let sgd = Sgd::new(LR, opt.momentum());
    let data = HostData::new(r0, wl, 0, wl.batch)?;
    let offsets: Vec<usize> = rows.iter().scan(0, |acc, r| {
        let o = *acc;
        *acc += r;
        Some(o)
    }).collect();
    let mut loss: Option<Tensor> = None;
    let mut t0 = None;
    let mut host = 0.0;
    for step in 0..WARMUP_STEPS + wl.iters {
        if step == WARMUP_STEPS {
            for rt in rts {
                rt.synchronize()?;
                rt.reset_peak();
            }
            t0 = clock(r0);
        }
        r0.zero_grad(&params, true)?;
        // criterion(model(x.cuda()), y.cuda())
        let x = data.x(r0, wl)?;
        let issued = clock(r0);
        // scatter
        let mut inputs = vec![Tensor { data: x.rows_view(0, rows[0]), grad_fn: None }];
        for i in 1..n {
            let xi = rts[i].empty(rows[i], h, dt, Kind::Output)?;
            fab.copy(rts, i, xi.addr(), 0, x.rows_view(offsets[i], rows[i]).addr(), xi.bytes())?;
            inputs.push(Tensor { data: xi, grad_fn: None });
        }
        drop(x);
        let replicas = replicate(rts, fab, &params, dt)?;
        // parallel_apply
        let mut outputs = Vec::new();
        for (i, rt) in rts.iter().enumerate() {
            outputs.push(replicas[i].forward(rt, &inputs[i])?);
        }
        drop(inputs);
        let slots: Vec<Vec<GradSlot>> = replicas.into_iter().map(|r| r.slots).collect();
        // gather onto device 0
        let out = r0.empty(wl.batch, c, dt, Kind::Output)?;
        for (i, o) in outputs.iter().enumerate() {
            fab.copy(rts, 0, out.rows_view(offsets[i], rows[i]).addr(), i, o.data.addr(), o.data.bytes())?;
        }
        let nodes: Vec<_> = outputs.into_iter().map(|o| o.grad_fn).collect();
        let (y, blocked) = data.y(r0)?;
        // criterion(out, y) and loss.backward() down to the gathered output's gradient
        let (gather, dl_slot) = r0.grad_sink();
        let out = Tensor { data: out, grad_fn: Some(gather) };
        let l = r0.cross_entropy(&out, &y)?;
        drop((out, y));
        loss = Some(l);
        r0.backward(loss.as_ref().expect("just set"), false)?;
        let dl = dl_slot.borrow_mut().take().ok_or_else(|| DeviceError::Usage("internal: no gradient reached the gathered output".into()))?;
        // Gather's backward scatters the gradient: device 0's chunk a view, the others copies.
        let mut grads = vec![dl.rows_view(0, rows[0])];
        for i in 1..n {
            let g = rts[i].empty(rows[i], c, dt, Kind::Output)?;
            fab.copy(rts, i, g.addr(), 0, dl.rows_view(offsets[i], rows[i]).addr(), g.bytes())?;
            grads.push(g);
        }
        drop(dl);
        // Every replica's backward (devices 1.. first: they wait for nothing on device 0).
        let mut grads: Vec<Option<Rc<Storage>>> = grads.into_iter().map(Some).collect();
        for i in (1..n).chain([0]) {
            let node = nodes[i].clone().ok_or_else(|| DeviceError::Usage("internal: replica output without a graph".into()))?;
            let g = grads[i].take().expect("one gradient per replica");
            rts[i].backward_from(node, g, false)?;
        }
        drop(nodes);
        reduce_gradients(rts, fab, &params, &slots, dt)?;
        drop(slots);
        sgd.step(r0, &params)?;
        if step >= WARMUP_STEPS {
            host += issued.map(|t| t.elapsed().as_secs_f64() * 1000.0 - blocked).unwrap_or(0.0);
        }
    }
    for rt in rts {
        rt.synchronize()?;
    }
    let step_ms = ms_per_step(t0, wl.iters);
    let host_ms = step_ms.map(|_| host / wl.iters.max(1) as f64);
    let mut devices = peaks(rts, step_ms)?;
    for d in &mut devices {
        d.host_ms = host_ms;
    }
    drop(loss);
    let params_out = if keep_params { Some(read_params(r0, &params)?) } else { None };
    Ok(Outcome { report: LoopReport { devices, step_ms, host_ms, error: None }, params: params_out })
}

/// The same training without parallelism, on one device and the whole batch: the parameters
/// before and after `steps` steps (the GPU tests compare DataParallel's and DDP's with these).
pub fn single_device(rt: &Runtime, wl: &Workload, opt: Optimizer, steps: usize) -> Result<(Vec<Vec<f32>>, Vec<Vec<f32>>), DeviceError> {
    let model = mlp(rt, wl)?;
    let params = model.params();
    let before = read_params(rt, &params)?;
    let sgd = Sgd::new(LR, opt.momentum());
    let data = HostData::new(rt, wl, 0, wl.batch)?;
    for _ in 0..steps {
        let (x, y) = data.to_device(rt, wl)?;
        rt.zero_grad(&params, true)?;
        let out = model.forward(rt, &Tensor { data: x, grad_fn: None }, false)?;
        let loss = rt.cross_entropy(&out, &y)?;
        drop((out, y));
        rt.backward(&loss, false)?;
        sgd.step(rt, &params)?;
    }
    Ok((before, read_params(rt, &params)?))
}

/// A barrier for the ranks' threads that any rank can break by failing (so that the others stop
/// waiting instead of hanging).
pub struct RankBarrier {
    state: Mutex<(usize, usize, bool)>,
    cv: Condvar,
    n: usize,
}

impl RankBarrier {
    pub fn new(n: usize) -> RankBarrier {
        RankBarrier { state: Mutex::new((0, 0, false)), cv: Condvar::new(), n }
    }
    /// Waits for every rank; an error once a rank failed.
    pub fn wait(&self) -> Result<(), DeviceError> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.2 {
            return Err(DeviceError::Usage("another rank failed".into()));
        }
        let gen = s.1;
        s.0 += 1;
        if s.0 == self.n {
            s.0 = 0;
            s.1 += 1;
            self.cv.notify_all();
            return Ok(());
        }
        while s.1 == gen && !s.2 {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.2 {
            Err(DeviceError::Usage("another rank failed".into()))
        } else {
            Ok(())
        }
    }
    pub fn fail(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.2 = true;
        self.cv.notify_all();
    }
}

/// DDP's reducer on one rank (see the module documentation).
struct Reducer {
    n: usize,
    dt: DType,
    bucket_view: bool,
    /// Parameter (by address) → (bucket, view of its place in the bucket).
    place: std::collections::HashMap<*const Param, (usize, Rc<Storage>)>,
    buckets: Vec<Rc<Storage>>,
    /// Parameters per bucket, and how many of them are still to come in this backward.
    members: Vec<usize>,
    pending: Vec<usize>,
    next_bucket: usize,
    /// The order the gradients became ready in, until the buckets are rebuilt.
    ready_order: Option<Vec<*const Param>>,
}

impl Reducer {
    fn new(rt: &Runtime, params: &[Rc<Param>], n: usize, dt: DType, bucket_view: bool) -> Result<Reducer, DeviceError> {
        let mut r = Reducer {
            n,
            dt,
            bucket_view,
            place: Default::default(),
            buckets: Vec::new(),
            members: Vec::new(),
            pending: Vec::new(),
            next_bucket: 0,
            ready_order: Some(Vec::new()),
        };
        // At construction every parameter goes into one bucket (DDP learns the order first).
        let all: Vec<&Rc<Param>> = params.iter().collect();
        r.set_buckets(rt, &[all])?;
        Ok(r)
    }

    fn set_buckets(&mut self, rt: &Runtime, groups: &[Vec<&Rc<Param>>]) -> Result<(), DeviceError> {
        let mut place = std::collections::HashMap::new();
        let mut buckets = Vec::new();
        let mut members = Vec::new();
        for (b, group) in groups.iter().enumerate() {
            let elems: usize = group.iter().map(|p| p.data.numel()).sum();
            let flat = rt.empty(1, elems, self.dt, Kind::Gradient)?;
            let mut off = 0;
            for p in group {
                place.insert(Rc::as_ptr(p), (b, Storage::view_of(&flat.buf, flat.offset + off, p.data.rows, p.data.cols, self.dt)));
                off += p.data.bytes();
            }
            members.push(group.len());
            buckets.push(flat);
        }
        // The new buckets exist before the old ones go, as in Reducer::initialize_buckets.
        self.place = place;
        self.buckets = buckets;
        self.pending = members.clone();
        self.members = members;
        Ok(())
    }

    /// `_rebuild_buckets()` at the second forward: buckets in gradient-ready order.
    fn rebuild(&mut self, rt: &Runtime, params: &[Rc<Param>]) -> Result<(), DeviceError> {
        let Some(order) = self.ready_order.take() else { return Ok(()) };
        let ready: Vec<&Rc<Param>> = order.iter().filter_map(|q| params.iter().find(|p| Rc::as_ptr(p) == *q)).collect();
        if ready.len() != params.len() {
            return Err(DeviceError::Usage("internal: not every parameter got a gradient in the first backward".into()));
        }
        let sizes: Vec<usize> = ready.iter().map(|p| p.data.bytes()).collect();
        let groups: Vec<Vec<&Rc<Param>>> = ddp_bucket_groups(&sizes).into_iter().map(|g| g.into_iter().map(|i| ready[i]).collect()).collect();
        self.set_buckets(rt, &groups)
    }

    fn prepare_for_backward(&mut self) {
        self.pending = self.members.clone();
        self.next_bucket = 0;
    }

    /// The hook after `p`'s gradient was accumulated (`Reducer::autograd_hook`).
    fn ready(&mut self, rt: &Runtime, comm: &mut dyn RankOps, p: &Param) -> Result<(), DeviceError> {
        let key = p as *const Param;
        let (b, view) = self.place.get(&key).cloned().ok_or_else(|| DeviceError::Usage("internal: a gradient of a parameter DDP does not know".into()))?;
        if let Some(order) = self.ready_order.as_mut() {
            order.push(key);
        }
        {
            let grad = p.grad.borrow();
            let g = grad.as_ref().ok_or_else(|| DeviceError::Usage("internal: hook without a gradient".into()))?;
            if !Rc::ptr_eq(&g.buf, &view.buf) {
                // at::mul_out(bucket_view, grad, 1 / world_size)
                rt.dev.cast(self.dt, self.dt, g.addr(), view.addr(), g.numel(), 1.0 / self.n as f32)?;
            } else {
                rt.dev.cast(self.dt, self.dt, view.addr(), view.addr(), view.numel(), 1.0 / self.n as f32)?;
            }
        }
        if self.bucket_view {
            // The gradient becomes its view of the bucket; the one just computed is freed.
            p.grad.replace(Some(view));
        }
        self.pending[b] -= 1;
        // Buckets are all-reduced in order, each once complete.
        while self.next_bucket < self.buckets.len() && self.pending[self.next_bucket] == 0 {
            let bucket = &self.buckets[self.next_bucket];
            comm.all_reduce_start(bucket.addr(), bucket.numel(), self.dt)?;
            self.next_bucket += 1;
        }
        Ok(())
    }

    /// `finalize_backward`: wait for the all-reduces; copy the averaged gradients back.
    fn finalize(&mut self, rt: &Runtime, comm: &mut dyn RankOps, params: &[Rc<Param>]) -> Result<(), DeviceError> {
        if self.next_bucket != self.buckets.len() {
            return Err(DeviceError::Usage("internal: a bucket was not all-reduced".into()));
        }
        comm.wait_all()?;
        if !self.bucket_view {
            for p in params {
                let (_, view) = &self.place[&Rc::as_ptr(p)];
                if let Some(g) = p.grad.borrow().as_ref() {
                    rt.dev.copy(g.addr(), view.addr(), view.bytes())?;
                }
            }
        }
        Ok(())
    }
}

/// One DDP rank (runs in the rank's own thread).
#[allow(clippy::too_many_arguments)]
pub fn ddp_rank(rt: &Runtime, comm: &mut dyn RankOps, wl: &Workload, opt: Optimizer, bucket_view: bool, rank: usize, n: usize, barrier: &RankBarrier, keep_params: bool) -> Result<(DevicePeak, Option<Vec<Vec<f32>>>), DeviceError> {
    let rows = chunk_rows(wl.batch, n).map_err(DeviceError::Usage)?;
    let row0: usize = rows[..rank].iter().sum();
    let model = mlp(rt, wl)?;
    let params = model.params();
    let sgd = Sgd::new(LR, opt.momentum());
    let data = HostData::new(rt, wl, row0, rows[rank])?;
    let mut reducer = Reducer::new(rt, &params, n, wl.dtype, bucket_view)?;
    let mut loss: Option<Tensor> = None;
    let mut t0 = None;
    let mut host = 0.0;
    let result = (|| -> Result<(), DeviceError> {
        for step in 0..WARMUP_STEPS + wl.iters {
            if step == WARMUP_STEPS {
                rt.synchronize()?;
                barrier.wait()?;
                rt.reset_peak();
                t0 = clock(rt);
            }
            rt.zero_grad(&params, true)?;
            // criterion(model(x.cuda()), y.cuda())
            let x = data.x(rt, wl)?;
            let issued = clock(rt);
            if step == 1 {
                reducer.rebuild(rt, &params)?;
            }
            let out = model.forward(rt, &Tensor { data: x, grad_fn: None }, false)?;
            let (y, blocked) = data.y(rt)?;
            let l = rt.cross_entropy(&out, &y)?;
            drop((out, y));
            loss = Some(l);
            reducer.prepare_for_backward();
            rt.backward_with_hook(loss.as_ref().expect("just set"), &mut |p: &Param| reducer.ready(rt, comm, p))?;
            reducer.finalize(rt, comm, &params)?;
            sgd.step(rt, &params)?;
            if step >= WARMUP_STEPS {
                host += issued.map(|t| t.elapsed().as_secs_f64() * 1000.0 - blocked).unwrap_or(0.0);
            }
        }
        rt.synchronize()
    })();
    if let Err(e) = result {
        barrier.fail();
        return Err(e);
    }
    let step_ms = ms_per_step(t0, wl.iters);
    let mut d = peaks(std::slice::from_ref(rt), step_ms)?.remove(0);
    d.index = rank;
    d.host_ms = step_ms.map(|_| host / wl.iters.max(1) as f64);
    drop(loss);
    let kept = if keep_params { Some(read_params(rt, &params)?) } else { None };
    Ok((d, kept))
}

/// How the runtimes of a run are made, and the fabric between them.
pub struct Setup<'a> {
    pub devices: usize,
    /// A fresh runtime on device `i` (called on the thread that uses it).
    pub make: &'a (dyn Fn(usize) -> Result<Runtime, String> + Sync),
    pub fabric: &'a dyn Fabric,
    pub estimated: bool,
}

fn fresh(setup: &Setup) -> Result<Vec<Runtime>, String> {
    (0..setup.devices).map(setup.make).collect()
}

/// Runs the DataParallel loop on fresh runtimes.
pub fn run_data_parallel(setup: &Setup, wl: &Workload, opt: Optimizer, keep_params: bool) -> Result<Outcome, String> {
    let rts = fresh(setup)?;
    match data_parallel(&rts, setup.fabric, wl, opt, keep_params) {
        Ok(o) => Ok(o),
        Err(DeviceError::Usage(e)) if e.starts_with("internal") => Err(e),
        Err(e) => Ok(Outcome { report: LoopReport::failed(e.to_string()), params: None }),
    }
}

/// Runs the DDP ranks, one thread each, on fresh runtimes.
pub fn run_ddp(setup: &Setup, wl: &Workload, opt: Optimizer, bucket_view: bool, keep_params: bool) -> Result<Outcome, String> {
    let n = setup.devices;
    let barrier = RankBarrier::new(n);
    let results: Vec<Result<(DevicePeak, Option<Vec<Vec<f32>>>), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let barrier = &barrier;
                s.spawn(move || -> Result<(DevicePeak, Option<Vec<Vec<f32>>>), String> {
                    let rt = match (setup.make)(rank) {
                        Ok(r) => r,
                        Err(e) => {
                            barrier.fail();
                            return Err(e);
                        }
                    };
                    let mut comm = match setup.fabric.rank(rank, &rt) {
                        Ok(c) => c,
                        Err(e) => {
                            barrier.fail();
                            return Err(e.to_string());
                        }
                    };
                    ddp_rank(&rt, &mut *comm, wl, opt, bucket_view, rank, n, barrier, keep_params && rank == 0).map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a DDP rank's thread panicked".into()))).collect()
    });
    let mut devices = Vec::new();
    let mut params = None;
    let mut errors = Vec::new();
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok((d, p)) => {
                devices.push(d);
                if p.is_some() {
                    params = p;
                }
            }
            Err(e) if e == "another rank failed" => {}
            Err(e) => errors.push(format!("rank {rank}: {e}")),
        }
    }
    if !errors.is_empty() {
        return Ok(Outcome { report: LoopReport::failed(errors.join("; ")), params: None });
    }
    let slowest = |f: fn(&DevicePeak) -> Option<f64>| devices.iter().filter_map(f).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let (step_ms, host_ms) = (slowest(|d| d.step_ms), slowest(|d| d.host_ms));
    Ok(Outcome { report: LoopReport { devices, step_ms, host_ms, error: None }, params })
}

fn imbalance(m: &[DevicePeak]) -> f64 {
    let others = m.iter().skip(1).map(|d| d.peak_bytes).max();
    match (m.first(), others) {
        (Some(d0), Some(o)) if o > 0 => d0.peak_bytes as f64 / o as f64,
        _ => 1.0,
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// Runs every loop (both optimizers; DataParallel, DDP, DDP with bucket views) and compares them.
/// `tick` is called before each loop. An error is a failure to set up (exit status 2); a loop that
/// fails (out of memory) is reported in the report's `error`.
pub fn run(setup: &Setup, wl: &Workload, tick: &mut dyn FnMut(&str)) -> Result<ParallelReport, String> {
    let rows = chunk_rows(wl.batch, setup.devices)?;
    let mut runs = Vec::new();
    for opt in Optimizer::ALL {
        tick(&format!("MEM007 DataParallel ({})", opt.describe()));
        let dp = run_data_parallel(setup, wl, opt, false)?.report;
        tick(&format!("MEM007 DDP ({})", opt.describe()));
        let ddp = run_ddp(setup, wl, opt, false, false)?.report;
        tick(&format!("MEM007 DDP, gradient_as_bucket_view=True ({})", opt.describe()));
        let ddpv = run_ddp(setup, wl, opt, true, false)?.report;
        runs.push(ParallelRun {
            optimizer: opt,
            momentum: opt.momentum(),
            step_time_ratio: ratio(dp.step_ms, ddp.step_ms),
            step_time_ratio_bucket_view: ratio(dp.step_ms, ddpv.step_ms),
            data_parallel: dp,
            ddp,
            ddp_bucket_view: ddpv,
        });
    }
    Ok(report_from_runs(setup.devices, rows, setup.estimated, runs))
}

/// The report's fields from its runs (the first run fills the top-level fields).
pub fn report_from_runs(devices: usize, chunk_rows: Vec<usize>, estimated: bool, runs: Vec<ParallelRun>) -> ParallelReport {
    let first = runs[0].clone();
    let errors: Vec<String> = runs
        .iter()
        .flat_map(|r| {
            [("DataParallel", &r.data_parallel), ("DDP", &r.ddp), ("DDP with gradient_as_bucket_view=True", &r.ddp_bucket_view)]
                .into_iter()
                .filter_map(move |(what, l)| l.error.as_ref().map(|e| format!("{what} ({}): {e}", r.optimizer.describe())))
        })
        .collect();
    let mut left_out = vec![
        "NCCL's own device buffers (NCCL allocates them outside the caching allocator; torch.cuda.max_memory_allocated leaves them out too)".to_string(),
        "DDP's broadcast of rank 0's parameters at construction (before the measured steps; every rank starts from the same seed)".to_string(),
    ];
    if estimated {
        left_out.push("step times: the simulator runs nothing, so DataParallel's per-step copies and DDP's overlap are not timed".into());
    }
    let mut report = ParallelReport {
        code: "MEM007",
        name: "data-parallel",
        devices,
        chunk_rows,
        data_parallel: first.data_parallel.devices.clone(),
        ddp: first.ddp.devices.clone(),
        imbalance_data_parallel: imbalance(&first.data_parallel.devices),
        imbalance_ddp: imbalance(&first.ddp.devices),
        saving_bytes: 0,
        saving_summary: String::new(),
        error: (!errors.is_empty()).then(|| errors.join("; ")),
        estimated,
        optimizer: first.optimizer,
        ddp_bucket_view: first.ddp_bucket_view.devices.clone(),
        step_ms_data_parallel: first.data_parallel.step_ms,
        step_ms_ddp: first.ddp.step_ms,
        step_ms_ddp_bucket_view: first.ddp_bucket_view.step_ms,
        step_time_ratio: first.step_time_ratio,
        runs,
        left_out,
        torch: None,
    };
    if report.error.is_none() {
        report.saving_bytes = first.data_parallel.devices[0].peak_bytes as i64 - first.ddp.max_peak() as i64;
        report.saving_summary = summary(&report);
    } else {
        report.saving_summary = format!("not measured: {}", report.error.clone().unwrap_or_default());
    }
    report
}

/// The sentence the finding lines and the hover show: whose memory each loop costs, and how much
/// time, as measured.
pub fn summary(p: &ParallelReport) -> String {
    use crate::report::fmt_bytes;
    let est = if p.estimated { "~" } else { "" };
    let b = |v: u64| format!("{est}{}", fmt_bytes(v as f64));
    let r = &p.runs[0];
    let dp0 = r.data_parallel.devices[0].peak_bytes;
    let others = r.data_parallel.devices.iter().skip(1).map(|d| d.peak_bytes).max();
    let ddp = r.ddp.max_peak();
    let ddpv = r.ddp_bucket_view.max_peak();
    let mut s = format!("with {} on {} devices, DataParallel peaks at {} on device 0", r.optimizer.describe(), p.devices, b(dp0));
    if let Some(o) = others {
        let pct = o as f64 / dp0.max(1) as f64 * 100.0;
        let unused = if pct < 75.0 { ": what device 0 holds beyond that stays unused on each of them" } else { "" };
        s.push_str(&format!(" and {} on the others ({pct:.0}% of device 0's peak{unused})", b(o)));
    }
    let diff = ddp as i64 - dp0 as i64;
    s.push_str(&format!(
        "; DDP peaks at {} on every device, {} {} DataParallel's device 0 (each rank keeps the whole model, its gradients, optimizer state and gradient buckets), {} with gradient_as_bucket_view=True",
        b(ddp),
        fmt_bytes(diff.unsigned_abs() as f64),
        if diff >= 0 { "above" } else { "below" },
        b(ddpv)
    ));
    match (r.data_parallel.step_ms, r.ddp.step_ms, r.step_time_ratio) {
        (Some(a), Some(d), Some(q)) => s.push_str(&format!("; a step takes {a:.2} ms with DataParallel and {d:.2} ms with DDP ({q:.2}x)")),
        _ => s.push_str("; step times need GPUs (the simulator runs nothing)"),
    }
    s
}

/// Fills in the comparison of memlint's figures with PyTorch's.
pub fn attach_torch(p: &mut ParallelReport, mut t: TorchParallel) {
    let mut max_peak: Option<f64> = None;
    let mut max_ratio: Option<f64> = None;
    let upd = |m: &mut Option<f64>, v: f64| *m = Some(m.map_or(v.abs(), |x: f64| x.max(v.abs())));
    for tr in &mut t.runs {
        let Some(ours) = p.runs.iter().find(|r| r.optimizer.name() == tr.optimizer) else { continue };
        for (theirs, mine) in [(&mut tr.data_parallel, &ours.data_parallel), (&mut tr.ddp, &ours.ddp), (&mut tr.ddp_bucket_view, &ours.ddp_bucket_view)] {
            for d in &mut theirs.devices {
                if let Some(m) = mine.devices.iter().find(|m| m.index == d.index) {
                    if d.peak_bytes > 0 {
                        let v = m.peak_bytes as f64 / d.peak_bytes as f64 - 1.0;
                        d.peak_difference = Some(v);
                        upd(&mut max_peak, v);
                    }
                }
            }
        }
        tr.step_time_ratio = ratio(tr.data_parallel.step_ms, tr.ddp.step_ms);
        tr.step_time_ratio_bucket_view = ratio(tr.data_parallel.step_ms, tr.ddp_bucket_view.step_ms);
        tr.step_time_ratio_difference = ratio(ours.step_time_ratio, tr.step_time_ratio).map(|x| x - 1.0);
        tr.step_time_ratio_bucket_view_difference = ratio(ours.step_time_ratio_bucket_view, tr.step_time_ratio_bucket_view).map(|x| x - 1.0);
        for v in [tr.step_time_ratio_difference, tr.step_time_ratio_bucket_view_difference].into_iter().flatten() {
            upd(&mut max_ratio, v);
        }
    }
    t.max_peak_difference = max_peak;
    t.max_step_time_ratio_difference = max_ratio;
    p.torch = Some(t);
}

/// Text lines of the report.
pub fn render_text(p: &ParallelReport) -> String {
    use crate::report::fmt_bytes;
    let est = if p.estimated { "~" } else { "" };
    let b = |v: u64| format!("{est}{}", fmt_bytes(v as f64));
    let step = |l: &LoopReport| match (l.step_ms, l.host_ms) {
        (Some(t), Some(h)) => format!("{t:.2} ms (host {h:.2} ms)"),
        (Some(t), None) => format!("{t:.2} ms"),
        _ => "-".into(),
    };
    let mut s = format!(
        "MEM007 data-parallel on {} devices (rows per device: {:?}){}:\n",
        p.devices,
        p.chunk_rows,
        if p.estimated { " [ESTIMATES: the simulator runs nothing]" } else { "" }
    );
    if let Some(e) = &p.error {
        s.push_str(&format!("  error: {e}\n"));
    }
    for r in &p.runs {
        s.push_str(&format!("  {}:\n", r.optimizer.describe()));
        s.push_str("    device  DataParallel peak / held     DDP peak / held              DDP bucket-view peak / held\n");
        for i in 0..p.devices {
            let cell = |l: &LoopReport| l.devices.iter().find(|d| d.index == i).map(|d| format!("{} / {}", b(d.peak_bytes), b(d.held_bytes))).unwrap_or_else(|| "-".into());
            s.push_str(&format!("    {:<6}  {:<27}  {:<27}  {}\n", i, cell(&r.data_parallel), cell(&r.ddp), cell(&r.ddp_bucket_view)));
        }
        s.push_str(&format!(
            "    step    {:<27}  {:<27}  {}   DataParallel / DDP: {}\n",
            step(&r.data_parallel),
            step(&r.ddp),
            step(&r.ddp_bucket_view),
            r.step_time_ratio.map(|x| format!("{x:.2}x")).unwrap_or_else(|| "-".into())
        ));
    }
    if p.error.is_none() {
        s.push_str(&format!("  device-0 imbalance: DataParallel {:.2}x, DDP {:.2}x\n  {}\n", p.imbalance_data_parallel, p.imbalance_ddp, p.saving_summary));
    }
    s.push_str(&format!("  not counted: {}\n", p.left_out.join("; ")));
    if let Some(t) = &p.torch {
        s.push_str(&render_torch(p, t));
    }
    s
}

fn render_torch(p: &ParallelReport, t: &TorchParallel) -> String {
    use crate::report::fmt_bytes;
    if let Some(e) = &t.error {
        return format!("  PyTorch comparison unavailable: {e}\n");
    }
    let pct = |v: Option<f64>| v.map(|x| format!("{:+.1}%", x * 100.0)).unwrap_or_else(|| "-".into());
    let mut s = format!(
        "  PyTorch {} (torch.cuda.max_memory_allocated per device; workspaces held: {}):\n",
        t.torch_version.clone().unwrap_or_default(),
        t.workspace_bytes.as_ref().map(|w| w.iter().map(|b| fmt_bytes(*b as f64)).collect::<Vec<_>>().join(", ")).unwrap_or_else(|| "-".into())
    );
    s.push_str("    optimizer     loop                  device  memlint peak  PyTorch peak  difference\n");
    for tr in &t.runs {
        let Some(ours) = p.runs.iter().find(|r| r.optimizer.name() == tr.optimizer) else { continue };
        for (name, theirs, mine) in [("DataParallel", &tr.data_parallel, &ours.data_parallel), ("DDP", &tr.ddp, &ours.ddp), ("DDP bucket view", &tr.ddp_bucket_view, &ours.ddp_bucket_view)] {
            if let Some(e) = &theirs.error {
                s.push_str(&format!("    {:<12}  {:<20}  error: {e}\n", tr.optimizer, name));
                continue;
            }
            for d in &theirs.devices {
                let m = mine.devices.iter().find(|m| m.index == d.index).map(|m| fmt_bytes(m.peak_bytes as f64)).unwrap_or_else(|| "-".into());
                s.push_str(&format!("    {:<12}  {:<20}  {:<6}  {:<12}  {:<12}  {}\n", tr.optimizer, name, d.index, m, fmt_bytes(d.peak_bytes as f64), pct(d.peak_difference)));
            }
        }
        let st = |v: Option<f64>| v.map(|x| format!("{x:.2} ms")).unwrap_or_else(|| "-".into());
        s.push_str(&format!(
            "    {:<12}  step time             DataParallel {} / DDP {} / bucket view {} (PyTorch) vs {} / {} / {} (memlint); ratio {} vs {} ({}), bucket view {} vs {} ({})\n",
            tr.optimizer,
            st(tr.data_parallel.step_ms),
            st(tr.ddp.step_ms),
            st(tr.ddp_bucket_view.step_ms),
            st(ours.data_parallel.step_ms),
            st(ours.ddp.step_ms),
            st(ours.ddp_bucket_view.step_ms),
            tr.step_time_ratio.map(|x| format!("{x:.2}x")).unwrap_or_else(|| "-".into()),
            ours.step_time_ratio.map(|x| format!("{x:.2}x")).unwrap_or_else(|| "-".into()),
            pct(tr.step_time_ratio_difference),
            tr.step_time_ratio_bucket_view.map(|x| format!("{x:.2}x")).unwrap_or_else(|| "-".into()),
            ours.step_time_ratio_bucket_view.map(|x| format!("{x:.2}x")).unwrap_or_else(|| "-".into()),
            pct(tr.step_time_ratio_bucket_view_difference),
        ));
        s.push_str(&format!(
            "    {:<12}  host time per step    DataParallel {} / DDP {} / bucket view {} (PyTorch) vs {} / {} / {} (memlint)\n",
            tr.optimizer,
            st(tr.data_parallel.host_ms),
            st(tr.ddp.host_ms),
            st(tr.ddp_bucket_view.host_ms),
            st(ours.data_parallel.host_ms),
            st(ours.ddp.host_ms),
            st(ours.ddp_bucket_view.host_ms),
        ));
    }
    s.push_str(&format!("    largest peak difference {}, largest step-time-ratio difference {}\n", pct(t.max_peak_difference), pct(t.max_step_time_ratio_difference)));
    s
}
