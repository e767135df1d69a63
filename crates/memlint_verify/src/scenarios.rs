//! The reference loops: for each rule, the anti-pattern ("bad") and its fix on the same workload.
//!
//! Each loop is written to have the same variable lifetimes as the Python loop beside it in
//! `torch/verify_torch.py` (a Rust `x = f(...)` frees the old `x` after the new value exists, as a
//! Python rebinding does), so that the two measure the same thing. The Python form of each loop is
//! quoted in the doc comment of its function.

use std::rc::Rc;
use std::time::Instant;

use crate::alloc::KindBytes;
use crate::autograd::{Param, Runtime, Sequential, Storage, Tensor};
use crate::backend::{DType, DeviceError};

/// Number of classes of the workload's classifier.
pub const CLASSES: usize = 10;
/// SGD learning rate of the training loops.
pub const LR: f32 = 1e-3;
/// MEM003: late in training the loss, and every gradient with it, is far smaller than at
/// initialisation. The scenario multiplies the loss by this factor to stand for that stage.
pub const LATE_LOSS_FACTOR: f32 = 1.0 / 64.0;
/// MEM003: `torch.amp.GradScaler` defaults.
pub const SCALER_INIT: f32 = 65536.0;
pub const SCALER_GROWTH_INTERVAL: usize = 2000;

const SEED_MODEL: u64 = 1000;
const SEED_X: u64 = 7;
const SEED_Y: u64 = 11;

/// The workload the scenarios run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Workload {
    pub layers: usize,
    pub hidden: usize,
    pub batch: usize,
    pub iters: usize,
    pub dtype: DType,
    pub classes: usize,
}

impl Default for Workload {
    fn default() -> Self {
        Workload { layers: 8, hidden: 4096, batch: 512, iters: 20, dtype: DType::Fp32, classes: CLASSES }
    }
}

/// What one loop measured.
#[derive(Clone, Debug, Default)]
pub struct Measure {
    /// Highest allocated bytes during the loop (everything alive counted: model, data, workspace).
    pub peak: usize,
    /// Allocated bytes right after the loop, with the loop's variables still alive.
    pub held: usize,
    /// Milliseconds per step (None on the simulator, which runs nothing).
    pub step_ms: Option<f64>,
    /// Live bytes by kind at the peak.
    pub at_peak: KindBytes,
    /// Segments requested from the driver during the loop.
    pub driver_mallocs: u64,
    /// MEM003: mean fraction of gradient elements equal to zero.
    pub underflow: Option<f64>,
    /// Bytes reserved by the allocator and, where a driver exists, what the driver says is in use,
    /// both relative to the start of the run (the tracker's cross-check against `cuMemGetInfo`).
    pub reserved_delta: i64,
    pub driver_used_delta: Option<i64>,
}

/// Which figure the saving of a scenario is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Peak,
    Held,
    StepTime,
    Underflow,
}

/// One scenario: a rule, a variant of its loop, and the function running it (`bad` picks the loop).
pub struct ScenarioDef {
    pub code: &'static str,
    pub name: &'static str,
    pub variant: &'static str,
    pub description: &'static str,
    pub metric: Metric,
    pub run: fn(&Runtime, &Workload, bool, &Baseline) -> Result<Measure, DeviceError>,
}

/// Device state at the start of the run, for the tracker-vs-driver cross-check.
#[derive(Clone, Copy, Debug, Default)]
pub struct Baseline {
    pub free: Option<usize>,
    pub reserved: usize,
}

/// Every scenario, in report order.
pub fn all() -> Vec<ScenarioDef> {
    vec![
        ScenarioDef { code: "MEM001", name: "eval-without-no-grad", variant: "eval", description: "evaluation loop tracking gradients vs under torch.no_grad()", metric: Metric::Peak, run: mem001 },
        ScenarioDef { code: "MEM002", name: "accumulated-loss-tensor", variant: "eval", description: "loss tensor summed across an evaluation loop vs loss.item()", metric: Metric::Held, run: mem002_eval },
        ScenarioDef { code: "MEM002", name: "accumulated-loss-tensor", variant: "train", description: "loss tensor summed across a training loop after backward vs loss.item()", metric: Metric::Held, run: mem002_train },
        ScenarioDef { code: "MEM003", name: "half-without-grad-scaler", variant: "fp16", description: "fp16 autocast training, loss scale 1 vs dynamic loss scaling (late-training loss)", metric: Metric::Underflow, run: mem003 },
        ScenarioDef { code: "MEM004", name: "empty-cache-in-loop", variant: "train", description: "training loop calling torch.cuda.empty_cache() every step vs not", metric: Metric::StepTime, run: mem004 },
        ScenarioDef { code: "MEM005", name: "retain-graph-in-loop", variant: "peak", description: "backward(retain_graph=True) every step vs backward()", metric: Metric::Peak, run: mem005_peak },
        ScenarioDef { code: "MEM005", name: "retain-graph-in-loop", variant: "growth", description: "retain_graph=True with the loss tensor kept vs backward() and loss.item()", metric: Metric::Held, run: mem005_growth },
        ScenarioDef { code: "MEM006", name: "gpu-tensors-collected", variant: "graphs", description: "outputs collected on the GPU with their graphs vs moved to the host", metric: Metric::Held, run: mem006_graphs },
        ScenarioDef { code: "MEM006", name: "gpu-tensors-collected", variant: "detached", description: "outputs collected on the GPU detached vs moved to the host", metric: Metric::Held, run: mem006_detached },
        ScenarioDef { code: "MEM008", name: "torch-load-without-map-location", variant: "restore", description: "checkpoint restored onto the device vs onto the host (map_location='cpu')", metric: Metric::Peak, run: mem008 },
        ScenarioDef { code: "MEM009", name: "zero-grad-keeps-memory", variant: "train", description: "zero_grad(set_to_none=False) vs set_to_none=True", metric: Metric::Peak, run: mem009 },
        ScenarioDef { code: "MEM012", name: "frozen-network-tracks-grad", variant: "frozen", description: "frozen feature network tracking gradients vs under torch.no_grad()", metric: Metric::Peak, run: mem012 },
    ]
}

/// Starts a measured region: waits for the device, resets the peak, starts the clock.
struct Meter<'a> {
    rt: &'a Runtime,
    base: &'a Baseline,
    t0: Instant,
    mallocs0: u64,
}

impl<'a> Meter<'a> {
    fn start(rt: &'a Runtime, base: &'a Baseline) -> Result<Meter<'a>, DeviceError> {
        rt.synchronize()?;
        rt.reset_peak();
        Ok(Meter { rt, base, t0: Instant::now(), mallocs0: rt.stats().driver_mallocs })
    }

    /// Restarts the clock (after warm-up steps), keeping the peak.
    fn restart_clock(&mut self) -> Result<(), DeviceError> {
        self.rt.synchronize()?;
        self.t0 = Instant::now();
        self.mallocs0 = self.rt.stats().driver_mallocs;
        Ok(())
    }

    /// Ends the region after `steps` steps; call it while the loop's variables are still alive.
    fn finish(self, steps: usize) -> Result<Measure, DeviceError> {
        self.rt.synchronize()?;
        let elapsed = self.t0.elapsed().as_secs_f64() * 1e3;
        let st = self.rt.stats();
        let driver_used_delta = if self.rt.dev.estimated() {
            None
        } else {
            match (self.base.free, self.rt.dev.mem_info()) {
                (Some(f0), Ok((f, _))) => Some(f0 as i64 - f as i64),
                _ => None,
            }
        };
        Ok(Measure {
            peak: st.peak_allocated,
            held: st.allocated,
            step_ms: (!self.rt.dev.estimated()).then(|| elapsed / steps.max(1) as f64),
            at_peak: st.at_peak,
            driver_mallocs: st.driver_mallocs - self.mallocs0,
            underflow: None,
            reserved_delta: st.reserved as i64 - self.base.reserved as i64,
            driver_used_delta,
        })
    }
}

/// `model = MLP().cuda(); x = torch.randn(batch, hidden); y = torch.randint(classes, (batch,))`.
fn setup(rt: &Runtime, wl: &Workload, dtype: DType) -> Result<(Sequential, Tensor, Rc<Storage>), DeviceError> {
    let model = Sequential::mlp(rt, wl.hidden, wl.layers, Some(wl.classes), dtype, SEED_MODEL)?;
    let x = rt.randn(wl.batch, wl.hidden, dtype, SEED_X)?;
    let y = rt.targets(wl.batch, wl.classes, SEED_Y)?;
    Ok((model, x, y))
}

/// One training step: `opt.zero_grad(set_to_none); out = model(x); loss = F.cross_entropy(out, y);
/// loss.backward(retain_graph); opt.step()`. Returns (out, loss) for the caller to keep alive.
fn train_step(rt: &Runtime, m: &Sequential, params: &[Rc<Param>], x: &Tensor, y: &Rc<Storage>, set_to_none: bool, retain: bool) -> Result<(Tensor, Tensor), DeviceError> {
    rt.zero_grad(params, set_to_none)?;
    let out = m.forward(rt, x, false)?;
    let loss = rt.cross_entropy(&out, y)?;
    rt.backward(&loss, retain)?;
    rt.sgd_step(params, LR)?;
    Ok((out, loss))
}

/// ```python
/// for _ in range(iters):            # bad: grad tracked / fixed: inside `with torch.no_grad():`
///     out = model(x); loss = F.cross_entropy(out, y); s += loss.item()
/// ```
fn mem001(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let (m, x, y) = setup(rt, wl, wl.dtype)?;
    let body = || -> Result<Measure, DeviceError> {
        let meter = Meter::start(rt, base)?;
        let mut out: Option<Tensor> = None;
        let mut loss: Option<Tensor> = None;
        let mut s = 0.0f32;
        for _ in 0..wl.iters {
            out = Some(m.forward(rt, &x, false)?);
            loss = Some(rt.cross_entropy(out.as_ref().ok_or_else(none)?, &y)?);
            s += rt.item(loss.as_ref().ok_or_else(none)?)?;
        }
        let r = meter.finish(wl.iters);
        drop((out, loss, s));
        r
    };
    if bad {
        body()
    } else {
        rt.no_grad(body)
    }
}

fn none() -> DeviceError {
    DeviceError::Usage("internal: loop variable unset".into())
}

/// ```python
/// total = torch.zeros(())                # fixed: total = 0.0
/// for _ in range(iters):
///     out = model(x); loss = F.cross_entropy(out, y)
///     total = total + loss               # fixed: total += loss.item()
/// ```
fn mem002_eval(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let (m, x, y) = setup(rt, wl, wl.dtype)?;
    let meter = Meter::start(rt, base)?;
    let mut total_t = if bad { Some(rt.zeros_scalar(wl.dtype)?) } else { None };
    let mut total_f = 0.0f32;
    let mut out: Option<Tensor> = None;
    let mut loss: Option<Tensor> = None;
    for _ in 0..wl.iters {
        out = Some(m.forward(rt, &x, false)?);
        loss = Some(rt.cross_entropy(out.as_ref().ok_or_else(none)?, &y)?);
        let l = loss.as_ref().ok_or_else(none)?;
        match total_t.take() {
            Some(t) => total_t = Some(rt.add(&t, l)?),
            None => total_f += rt.item(l)?,
        }
    }
    let r = meter.finish(wl.iters);
    drop((out, loss, total_t, total_f));
    r
}

/// ```python
/// total = torch.zeros(())                # fixed: total = 0.0
/// for _ in range(iters):
///     opt.zero_grad(); out = model(x); loss = F.cross_entropy(out, y); loss.backward(); opt.step()
///     total = total + loss               # fixed: total += loss.item()
/// ```
fn mem002_train(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let (m, x, y) = setup(rt, wl, wl.dtype)?;
    let params = m.params();
    let meter = Meter::start(rt, base)?;
    let mut total_t = if bad { Some(rt.zeros_scalar(wl.dtype)?) } else { None };
    let mut total_f = 0.0f32;
    let mut kept: Option<(Tensor, Tensor)> = None;
    for _ in 0..wl.iters {
        kept = Some(train_step(rt, &m, &params, &x, &y, true, false)?);
        let l = &kept.as_ref().ok_or_else(none)?.1;
        match total_t.take() {
            Some(t) => total_t = Some(rt.add(&t, l)?),
            None => total_f += rt.item(l)?,
        }
    }
    let r = meter.finish(wl.iters);
    drop((kept, total_t, total_f));
    r
}

/// ```python
/// scaler = torch.amp.GradScaler(init_scale=2**16)      # bad: no scaler (scale 1)
/// for _ in range(iters):
///     opt.zero_grad()
///     with torch.autocast("cuda", dtype=torch.float16):
///         out = model(x)
///     loss = F.cross_entropy(out.float(), y) * LATE_LOSS_FACTOR
///     scaler.scale(loss).backward(); scaler.unscale_(opt)   # bad: loss.backward()
///     fraction of p.grad elements == 0 over all parameters
///     scaler.step(opt); scaler.update()                     # bad: opt.step()
/// ```
fn mem003(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    // Master weights and inputs in fp32; autocast runs the linear layers in fp16.
    let (m, x, y) = setup(rt, wl, DType::Fp32)?;
    let params = m.params();
    let total: usize = params.iter().map(|p| p.data.numel()).sum();
    let mut scale = if bad { 1.0f32 } else { SCALER_INIT };
    let mut growth_tracker = 0usize;
    // An 8-byte counter for count_zeros (allocated as two fp32 so the fp32 fill can zero it).
    let counter = rt.empty(1, 2, DType::Fp32, crate::alloc::Kind::Output)?;
    let mut frac_sum = 0.0f64;
    let meter = Meter::start(rt, base)?;
    // `out` and `loss` are rebound where Python rebinds them.
    let mut out: Option<Tensor> = None;
    let mut loss: Option<Tensor> = None;
    for _ in 0..wl.iters {
        rt.zero_grad(&params, true)?;
        out = Some(m.forward(rt, &x, true)?);
        let out32 = rt.cast(out.as_ref().ok_or_else(none)?, DType::Fp32)?;
        loss = Some(rt.scale(&rt.cross_entropy(&out32, &y)?, LATE_LOSS_FACTOR)?);
        drop(out32);
        let l = loss.as_ref().ok_or_else(none)?;
        let mut found_inf = false;
        if bad {
            rt.backward(l, false)?;
        } else {
            let scaled = rt.scale(l, scale)?;
            rt.backward(&scaled, false)?;
            let inf = rt.zeros_scalar(DType::Fp32)?;
            for p in &params {
                if let Some(g) = p.grad.borrow().as_ref() {
                    rt.dev.unscale_check(g.addr(), g.numel(), 1.0 / scale, inf.data.addr())?;
                }
            }
            found_inf = rt.item(&inf)? != 0.0;
        }
        rt.dev.fill(DType::Fp32, counter.addr(), 2, 0.0)?;
        for p in &params {
            if let Some(g) = p.grad.borrow().as_ref() {
                rt.dev.count_zeros(g.dtype, g.addr(), g.numel(), counter.addr())?;
            } else {
                // A parameter that got no gradient at all counts as all zeros.
                return Err(DeviceError::Usage("MEM003: a parameter received no gradient".into()));
            }
        }
        let zeros = rt.dev.read_u64(counter.addr())?;
        frac_sum += zeros as f64 / total as f64;
        // GradScaler.step/update: skip the step and halve the scale on inf/nan, grow after an interval.
        if found_inf {
            scale *= 0.5;
            growth_tracker = 0;
        } else {
            rt.sgd_step(&params, LR)?;
            if !bad {
                growth_tracker += 1;
                if growth_tracker == SCALER_GROWTH_INTERVAL {
                    scale *= 2.0;
                    growth_tracker = 0;
                }
            }
        }
    }
    let mut r = meter.finish(wl.iters)?;
    drop((out, loss));
    r.underflow = (!rt.dev.estimated()).then(|| frac_sum / wl.iters.max(1) as f64);
    Ok(r)
}

/// ```python
/// for _ in range(iters):   # no .item(): nothing waits for the GPU inside the loop
///     opt.zero_grad(); out = model(x); loss = F.cross_entropy(out, y); loss.backward(); opt.step()
///     torch.cuda.empty_cache()          # fixed: not called
/// ```
/// One untimed warm-up step runs first, so that both variants start from a warm cache.
fn mem004(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let (m, x, y) = setup(rt, wl, wl.dtype)?;
    let params = m.params();
    let mut meter = Meter::start(rt, base)?;
    let mut kept = Some(train_step(rt, &m, &params, &x, &y, true, false)?);
    meter.restart_clock()?;
    for _ in 0..wl.iters {
        kept = Some(train_step(rt, &m, &params, &x, &y, true, false)?);
        if bad {
            rt.empty_cache()?;
        }
    }
    let r = meter.finish(wl.iters);
    drop(kept);
    r
}

/// ```python
/// for _ in range(iters):
///     opt.zero_grad(); out = model(x); loss = F.cross_entropy(out, y)
///     loss.backward(retain_graph=True)  # fixed: loss.backward()
///     opt.step()
/// ```
fn mem005_peak(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let (m, x, y) = setup(rt, wl, wl.dtype)?;
    let params = m.params();
    let meter = Meter::start(rt, base)?;
    let mut kept: Option<(Tensor, Tensor)> = None;
    for _ in 0..wl.iters {
        kept = Some(train_step(rt, &m, &params, &x, &y, true, bad)?);
    }
    let r = meter.finish(wl.iters);
    drop(kept);
    r
}

/// ```python
/// total = torch.zeros(())               # fixed: total = 0.0
/// for _ in range(iters):
///     opt.zero_grad(); out = model(x); loss = F.cross_entropy(out, y)
///     loss.backward(retain_graph=True); opt.step(); total = total + loss
///     # fixed: loss.backward(); opt.step(); total += loss.item()
/// ```
fn mem005_growth(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let (m, x, y) = setup(rt, wl, wl.dtype)?;
    let params = m.params();
    let meter = Meter::start(rt, base)?;
    let mut total_t = if bad { Some(rt.zeros_scalar(wl.dtype)?) } else { None };
    let mut total_f = 0.0f32;
    let mut kept: Option<(Tensor, Tensor)> = None;
    for _ in 0..wl.iters {
        kept = Some(train_step(rt, &m, &params, &x, &y, true, bad)?);
        let l = &kept.as_ref().ok_or_else(none)?.1;
        match total_t.take() {
            Some(t) => total_t = Some(rt.add(&t, l)?),
            None => total_f += rt.item(l)?,
        }
    }
    let r = meter.finish(wl.iters);
    drop((kept, total_t, total_f));
    r
}

/// ```python
/// outs = []
/// for _ in range(iters):
///     outs.append(model(x))                 # fixed: outs.append(model(x).detach().cpu())
/// ```
fn mem006_graphs(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem006(rt, wl, bad, base, false)
}

/// ```python
/// outs = []
/// for _ in range(iters):
///     outs.append(model(x).detach())        # fixed: outs.append(model(x).detach().cpu())
/// ```
fn mem006_detached(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem006(rt, wl, bad, base, true)
}

fn mem006(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline, detach: bool) -> Result<Measure, DeviceError> {
    let (m, x, _y) = setup(rt, wl, wl.dtype)?;
    let meter = Meter::start(rt, base)?;
    let mut on_device: Vec<Tensor> = Vec::new();
    let mut on_host: Vec<Vec<f32>> = Vec::new();
    for _ in 0..wl.iters {
        let out = m.forward(rt, &x, false)?;
        if !bad {
            on_host.push(rt.to_host(&out.data)?);
        } else if detach {
            on_device.push(out.detach());
        } else {
            on_device.push(out);
        }
    }
    let r = meter.finish(wl.iters);
    drop((on_device, on_host));
    r
}

/// ```python
/// torch.save(model.state_dict(), path)          # before the measured region
/// sd = torch.load(path)                         # fixed: torch.load(path, map_location="cpu")
/// model.load_state_dict(sd)                     # measured while sd is alive
/// ```
fn mem008(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let model = Sequential::mlp(rt, wl.hidden, wl.layers, Some(wl.classes), wl.dtype, SEED_MODEL)?;
    let params = model.params();
    // The checkpoint's bytes on the host. The simulator computes nothing, so it keeps no copy.
    let ckpt: Vec<Vec<f32>> = if rt.dev.estimated() {
        vec![Vec::new(); params.len()]
    } else {
        params.iter().map(|p| rt.to_host(&p.data)).collect::<Result<_, _>>()?
    };
    let meter = Meter::start(rt, base)?;
    let mut sd: Vec<Rc<Storage>> = Vec::new();
    if bad {
        // torch.load restores each storage onto the device it was saved from.
        for (p, host) in params.iter().zip(&ckpt) {
            let s = rt.empty(p.data.rows, p.data.cols, p.data.dtype, crate::alloc::Kind::Output)?;
            if !host.is_empty() {
                rt.dev.upload(s.addr(), s.dtype, crate::backend::HostData::F32(host))?;
            }
            sd.push(s);
        }
        // load_state_dict: param.copy_(sd[name])
        for (p, s) in params.iter().zip(&sd) {
            rt.dev.copy(p.data.addr(), s.addr(), p.data.numel() * p.data.dtype.size())?;
        }
    } else {
        for (p, host) in params.iter().zip(&ckpt) {
            if !host.is_empty() {
                rt.dev.upload(p.data.addr(), p.data.dtype, crate::backend::HostData::F32(host))?;
            }
        }
    }
    let r = meter.finish(1);
    drop(sd);
    r
}

/// ```python
/// for _ in range(iters):
///     opt.zero_grad(set_to_none=False)      # fixed: set_to_none=True (PyTorch's default)
///     out = model(x); loss = F.cross_entropy(out, y); loss.backward(); opt.step()
/// ```
fn mem009(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let (m, x, y) = setup(rt, wl, wl.dtype)?;
    let params = m.params();
    let meter = Meter::start(rt, base)?;
    let mut kept: Option<(Tensor, Tensor)> = None;
    for _ in 0..wl.iters {
        kept = Some(train_step(rt, &m, &params, &x, &y, !bad, false)?);
    }
    let r = meter.finish(wl.iters);
    drop(kept);
    r
}

/// ```python
/// frozen = nn.Sequential(layers x (Linear(h, h), ReLU)); head = nn.Linear(h, classes)
/// opt = SGD(head.parameters())
/// for _ in range(iters):
///     opt.zero_grad()
///     feats = frozen(x)                     # fixed: with torch.no_grad(): feats = frozen(x)
///     loss = F.cross_entropy(head(feats), y); loss.backward(); opt.step()
/// ```
fn mem012(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let frozen = Sequential::mlp(rt, wl.hidden, wl.layers, None, wl.dtype, SEED_MODEL)?;
    let head = Sequential::mlp(rt, wl.hidden, 0, Some(wl.classes), wl.dtype, SEED_MODEL + 500)?;
    let x = rt.randn(wl.batch, wl.hidden, wl.dtype, SEED_X)?;
    let y = rt.targets(wl.batch, wl.classes, SEED_Y)?;
    let head_params = head.params();
    let meter = Meter::start(rt, base)?;
    // Separate variables rebound where Python rebinds them: the previous `feats` is freed as soon
    // as the new one exists, not at the end of the iteration.
    let mut feats: Option<Tensor> = None;
    let mut out: Option<Tensor> = None;
    let mut loss: Option<Tensor> = None;
    for _ in 0..wl.iters {
        rt.zero_grad(&head_params, true)?;
        feats = Some(if bad { frozen.forward(rt, &x, false)? } else { rt.no_grad(|| frozen.forward(rt, &x, false))? });
        out = Some(head.forward(rt, feats.as_ref().ok_or_else(none)?, false)?);
        loss = Some(rt.cross_entropy(out.as_ref().ok_or_else(none)?, &y)?);
        rt.backward(loss.as_ref().ok_or_else(none)?, false)?;
        rt.sgd_step(&head_params, LR)?;
    }
    let r = meter.finish(wl.iters);
    drop((feats, out, loss));
    r
}
