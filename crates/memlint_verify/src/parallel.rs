//! MEM007 (`data-parallel`): `nn.DataParallel` against `DistributedDataParallel` on N devices.
//!
//! Each device has its own runtime (backend, caching allocator, cuBLAS workspace), so every figure
//! is per device. Both loops train the workload's MLP with plain SGD on a global batch of
//! `--batch` rows split as `torch.chunk` splits it (chunks of `ceil(batch / N)` rows).
//!
//! The DataParallel step, as `nn.DataParallel.forward` and its backward do it, with the loader's
//! batch, the model and its gradients on device 0:
//! 1. `optimizer.zero_grad()` (set to none); `x, y` of the step on device 0;
//! 2. scatter: device `i ≥ 1` receives a copy of its chunk of `x` (device 0's chunk is a view);
//! 3. replicate: device `i ≥ 1` receives a copy of every parameter (device 0's replica is the model);
//! 4. forward of each replica on its chunk (activations saved on each device);
//! 5. gather: the outputs are copied into one `batch × classes` tensor on device 0 and the
//!    per-device outputs released; cross-entropy and its backward on device 0;
//! 6. the output gradient is scattered back (device 0's chunk a view, the others copies) and each
//!    replica runs its backward on its own device;
//! 7. reduce: per parameter, a result buffer on device 0 receives the sum of every replica's
//!    gradient and becomes `.grad`; the replicas' gradients and parameters are released; SGD step.
//!
//! The DDP step: one process per device, each with its own replica and a `batch / N` chunk of the
//! data loaded on its device; forward, loss and backward locally; the gradients are all-reduced in
//! place in the reducer's buckets, which DDP allocates at construction (`gradient_as_bucket_view`
//! false, its default: a flat buffer per bucket, 1 MiB first bucket then 25 MiB, filled with the
//! parameters in reverse order; a parameter larger than the cap is a bucket of its own).
//!
//! Known approximations (the PyTorch comparison measures them): device 0's chunk of `x` and of the
//! output gradient is a separate buffer of the chunk's rows instead of a view of the whole (equal
//! allocated bytes when a row is a multiple of 512 bytes, the allocator's rounding); the replicas'
//! parameters stay alive until the end of backward (PyTorch releases those no graph node saves,
//! the first layer's weight and the biases, once the replicas go out of scope after forward).

use std::rc::Rc;

use serde::Serialize;

use crate::alloc::{Kind, KindBytes};
use crate::autograd::{Runtime, Sequential, Storage};
use crate::backend::DeviceError;
use crate::scenarios::{Workload, LR};

const SEED_MODEL: u64 = 2000;
const SEED_DATA: u64 = 17;
/// DDP's `dist._DEFAULT_FIRST_BUCKET_BYTES` and default `bucket_cap_mb`.
pub const DDP_FIRST_BUCKET: usize = 1 << 20;
pub const DDP_BUCKET_CAP: usize = 25 << 20;

/// What one device measured during a loop.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct DevicePeak {
    pub index: usize,
    /// Highest allocated bytes during the loop (as `torch.cuda.max_memory_allocated(index)`).
    pub peak_bytes: u64,
    /// Allocated bytes right after the loop.
    pub held_bytes: u64,
    pub at_peak: KindBytes,
}

/// The MEM007 comparison, in the JSON report's `parallel` field.
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
    /// DataParallel's device-0 peak minus DDP's highest per-device peak.
    pub saving_bytes: i64,
    pub saving_summary: String,
    pub error: Option<String>,
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

/// DDP's bucket sizes in bytes for parameters of these byte sizes (given in `model.parameters()`
/// order; buckets are filled in reverse order).
pub fn ddp_buckets(param_bytes: &[usize]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut cur = 0;
    for &b in param_bytes.iter().rev() {
        cur += b;
        let cap = if out.is_empty() { DDP_FIRST_BUCKET } else { DDP_BUCKET_CAP };
        if cur >= cap {
            out.push(cur);
            cur = 0;
        }
    }
    if cur > 0 {
        out.push(cur);
    }
    out
}

fn start(rts: &[Runtime]) -> Result<(), DeviceError> {
    for rt in rts {
        rt.synchronize()?;
        rt.reset_peak();
    }
    Ok(())
}

fn finish(rts: &[Runtime]) -> Result<Vec<DevicePeak>, DeviceError> {
    rts.iter()
        .enumerate()
        .map(|(i, rt)| {
            rt.synchronize()?;
            let st = rt.stats();
            Ok(DevicePeak { index: i, peak_bytes: st.peak_allocated as u64, held_bytes: st.allocated as u64, at_peak: st.at_peak })
        })
        .collect()
}

fn mlp(rt: &Runtime, wl: &Workload) -> Result<Sequential, DeviceError> {
    Sequential::mlp(rt, wl.hidden, wl.layers, Some(wl.classes), wl.dtype, SEED_MODEL)
}

/// The DataParallel loop (steps in the module documentation); one figure per device.
pub fn data_parallel(rts: &[Runtime], wl: &Workload) -> Result<Vec<DevicePeak>, DeviceError> {
    let n = rts.len();
    let rows = chunk_rows(wl.batch, n).map_err(DeviceError::Usage)?;
    let (r0, dt, h, c) = (&rts[0], wl.dtype, wl.hidden, wl.classes);
    let model = mlp(r0, wl)?;
    let params = model.params();
    start(rts)?;
    // The loop's variables: the batch on device 0 (chunk 0, the rest, targets) and the loss.
    let mut batch: Option<(Rc<Storage>, Option<Rc<Storage>>, Rc<Storage>)> = None;
    let mut loss: Option<Rc<Storage>> = None;
    for it in 0..wl.iters {
        let seed = SEED_DATA + it as u64;
        let x0 = r0.randn(rows[0], h, dt, seed)?.data;
        let rest = if n > 1 { Some(r0.empty(wl.batch - rows[0], h, dt, Kind::Output)?) } else { None };
        let y = r0.targets(wl.batch, c, seed)?;
        batch = Some((x0, rest, y));
        let (x0, _, y) = batch.as_ref().expect("just set");
        r0.zero_grad(&params, true)?;
        // scatter, then replicate
        let mut inputs = vec![crate::autograd::Tensor { data: x0.clone(), grad_fn: None }];
        for (i, rt) in rts.iter().enumerate().skip(1) {
            inputs.push(rt.randn(rows[i], h, dt, seed)?);
        }
        let mut replicas = Vec::new();
        for rt in rts.iter().skip(1) {
            replicas.push(mlp(rt, wl)?);
        }
        // parallel_apply
        let mut outputs = vec![model.forward(r0, &inputs[0], false)?];
        for i in 1..n {
            outputs.push(replicas[i - 1].forward(&rts[i], &inputs[i], false)?);
        }
        drop(inputs);
        // gather onto device 0; the per-device outputs go, their graphs stay
        let logits = r0.empty(wl.batch, c, dt, Kind::Output)?;
        let nodes: Vec<_> = outputs.iter().map(|o| o.grad_fn.clone()).collect();
        drop(outputs);
        // criterion(out, y) on device 0, as `Runtime::cross_entropy` allocates it
        let logsm = r0.empty(wl.batch, c, dt, Kind::Saved)?;
        let new_loss = r0.empty(1, 1, dt, Kind::Output)?;
        let tw = r0.empty(1, 1, dt, Kind::Saved)?;
        loss = Some(new_loss);
        drop(logits);
        // loss.backward(): ones_like(loss), the logits' gradient, then its scatter
        let g0 = r0.empty(1, 1, dt, Kind::Output)?;
        let d0 = r0.empty(rows[0], c, dt, Kind::Output)?;
        let drest = if n > 1 { Some(r0.empty(wl.batch - rows[0], c, dt, Kind::Output)?) } else { None };
        drop((g0, logsm, tw));
        let mut grads = vec![d0];
        for (i, rt) in rts.iter().enumerate().skip(1) {
            grads.push(rt.empty(rows[i], c, dt, Kind::Output)?);
        }
        // device 0's chunk is a view of the whole gradient: the rest lives until its backward ran
        let mut drest = drest;
        for (i, (node, g)) in nodes.into_iter().zip(grads).enumerate() {
            let node = node.ok_or_else(|| DeviceError::Usage("internal: replica output without a graph".into()))?;
            let rt = &rts[i];
            rt.backward_from(node, g, false)?;
            if i == 0 {
                drest = None;
            }
        }
        drop(drest);
        // reduce the gradients onto device 0, parameter by parameter
        let replica_params: Vec<_> = replicas.iter().map(|r| r.params()).collect();
        for (k, p) in params.iter().enumerate() {
            let sum = r0.empty(p.data.rows, p.data.cols, dt, Kind::Gradient)?;
            p.grad.replace(Some(sum));
            for rp in &replica_params {
                rp[k].grad.replace(None);
            }
        }
        drop(replica_params);
        drop(replicas);
        r0.sgd_step(&params, LR)?;
        let _ = y;
    }
    let m = finish(rts)?;
    drop((batch, loss));
    Ok(m)
}

/// The DDP loop: every rank independently (one process per device).
pub fn ddp(rts: &[Runtime], wl: &Workload) -> Result<Vec<DevicePeak>, DeviceError> {
    let n = rts.len();
    let rows = chunk_rows(wl.batch, n).map_err(DeviceError::Usage)?;
    let mut out = Vec::new();
    for (i, rt) in rts.iter().enumerate() {
        let model = mlp(rt, wl)?;
        let params = model.params();
        let sizes: Vec<usize> = params.iter().map(|p| p.data.numel() * p.data.dtype.size()).collect();
        let _buckets: Vec<Rc<Storage>> = ddp_buckets(&sizes)
            .into_iter()
            .map(|b| rt.empty(1, b / wl.dtype.size(), wl.dtype, Kind::Gradient))
            .collect::<Result<_, _>>()?;
        start(std::slice::from_ref(rt))?;
        let mut batch = None;
        let mut loss = None;
        for it in 0..wl.iters {
            let seed = SEED_DATA + (it * n + i) as u64;
            batch = Some((rt.randn(rows[i], wl.hidden, wl.dtype, seed)?, rt.targets(rows[i], wl.classes, seed)?));
            let (x, y) = batch.as_ref().expect("just set");
            rt.zero_grad(&params, true)?;
            loss = Some(rt.cross_entropy(&model.forward(rt, x, false)?, y)?);
            rt.backward(loss.as_ref().expect("just set"), false)?;
            rt.sgd_step(&params, LR)?;
        }
        let mut m = finish(std::slice::from_ref(rt))?;
        m[0].index = i;
        out.push(m.remove(0));
        drop((batch, loss));
    }
    Ok(out)
}

fn imbalance(m: &[DevicePeak]) -> f64 {
    let others = m.iter().skip(1).map(|d| d.peak_bytes).max();
    match others {
        Some(o) if o > 0 => m[0].peak_bytes as f64 / o as f64,
        _ => 1.0,
    }
}

/// Runs both loops on fresh runtimes made by `make(device_index)` and compares them.
pub fn run(devices: usize, wl: &Workload, make: &dyn Fn(usize) -> Result<Runtime, String>) -> Result<ParallelReport, String> {
    let rows = chunk_rows(wl.batch, devices)?;
    let fresh = || (0..devices).map(make).collect::<Result<Vec<Runtime>, String>>();
    let mut report = ParallelReport {
        code: "MEM007",
        name: "data-parallel",
        devices,
        chunk_rows: rows,
        data_parallel: Vec::new(),
        ddp: Vec::new(),
        imbalance_data_parallel: 0.0,
        imbalance_ddp: 0.0,
        saving_bytes: 0,
        saving_summary: String::new(),
        error: None,
    };
    let dp = data_parallel(&fresh()?, wl);
    let dd = ddp(&fresh()?, wl);
    match (dp, dd) {
        (Ok(dp), Ok(dd)) => {
            report.imbalance_data_parallel = imbalance(&dp);
            report.imbalance_ddp = imbalance(&dd);
            let worst_ddp = dd.iter().map(|d| d.peak_bytes).max().unwrap_or(0);
            report.saving_bytes = dp[0].peak_bytes as i64 - worst_ddp as i64;
            let (amount, side) = if report.saving_bytes >= 0 { (report.saving_bytes, "below") } else { (-report.saving_bytes, "above") };
            report.saving_summary = format!(
                "DDP's highest per-device peak is {} {side} DataParallel's device-0 peak ({}){}; DataParallel's device 0 peaks at {:.2}x the other devices",
                crate::report::fmt_bytes(amount as f64),
                crate::report::fmt_bytes(dp[0].peak_bytes as f64),
                if side == "above" { " (DDP's gradient buckets, gradient_as_bucket_view=False by default, hold a second copy of the gradients on every device)" } else { "" },
                report.imbalance_data_parallel
            );
            report.data_parallel = dp;
            report.ddp = dd;
        }
        (a, b) => {
            let e = a.err().or(b.err()).map(|e| e.to_string()).unwrap_or_default();
            report.error = Some(e);
        }
    }
    Ok(report)
}

/// Text lines of the report.
pub fn render_text(p: &ParallelReport) -> String {
    use crate::report::fmt_bytes;
    let mut s = format!("MEM007 data-parallel on {} devices (rows per device: {:?}):\n", p.devices, p.chunk_rows);
    if let Some(e) = &p.error {
        s.push_str(&format!("  error: {e}\n"));
        return s;
    }
    s.push_str("  device  DataParallel peak  DDP peak\n");
    for (a, b) in p.data_parallel.iter().zip(&p.ddp) {
        s.push_str(&format!("  {:<6}  {:>17}  {:>8}\n", a.index, fmt_bytes(a.peak_bytes as f64), fmt_bytes(b.peak_bytes as f64)));
    }
    s.push_str(&format!("  device-0 imbalance: DataParallel {:.2}x, DDP {:.2}x\n  {}\n", p.imbalance_data_parallel, p.imbalance_ddp, p.saving_summary));
    s
}
