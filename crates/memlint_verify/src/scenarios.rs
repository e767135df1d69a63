//! The reference loops: each rule's documentation example (the anti-pattern, "bad") and its
//! `Use instead:` ("fixed"), driven by the reference runtime on the same workload.
//!
//! A scenario carries the Python it runs ([`ScenarioDef::python_bad`], [`ScenarioDef::python_fixed`]):
//! for the rows marked [`ScenarioDef::from_doc`] that is the rule's `## Example` and `Use instead:`
//! verbatim (a test compares them with the linter's rule documentation and with
//! `torch/verify_torch.py`, which runs the same statements in PyTorch). Each Rust loop below follows
//! its Python statement by statement with Python's lifetimes: a loader gives a fresh batch every
//! step (`for x, y in loader` rebinds `x` once the next batch exists), `a = f(...)` frees the old `a`
//! after the new value exists, a temporary such as `model(x.cuda())`'s `x.cuda()` lives until the
//! call returns, and what the loop leaves bound stays alive until the figures are read.

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
/// initialisation. The examples' criterion is scaled by this factor to stand for that stage.
pub const LATE_LOSS_FACTOR: f32 = 1.0 / 64.0;
/// MEM003: `torch.amp.GradScaler("cuda")` defaults.
pub const SCALER_INIT: f32 = 65536.0;
pub const SCALER_GROWTH_INTERVAL: usize = 2000;
/// MEM004: untimed steps before the timed repetitions, and how many repetitions (median taken).
pub const WARMUP_STEPS: usize = 2;
pub const TIMING_REPS: usize = 5;

const SEED_MODEL: u64 = 1000;
const SEED_DATA: u64 = 7;

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
    /// Segments requested from the driver during the loop (MEM004: during the timed repetitions).
    pub driver_mallocs: u64,
    /// MEM004: segments requested from the driver per timed step.
    pub mallocs_per_step: Option<f64>,
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

/// Runs one loop of a scenario (`bad` picks the anti-pattern).
pub type RunFn = fn(&Runtime, &Workload, bool, &Baseline) -> Result<Measure, DeviceError>;

/// One scenario: a rule, a variant of its loop, and the function running it.
pub struct ScenarioDef {
    pub code: &'static str,
    pub name: &'static str,
    pub variant: &'static str,
    pub description: &'static str,
    pub metric: Metric,
    /// The Python the bad loop runs.
    pub python_bad: &'static str,
    /// The Python the fixed loop runs.
    pub python_fixed: &'static str,
    /// `python_bad` and `python_fixed` are the rule documentation's `## Example` and `Use instead:`
    /// verbatim; otherwise the scenario is a variant of them, described in `description`.
    pub from_doc: bool,
    /// Lines of the documentation example that the harness stands in for (a pretrained network
    /// from torchvision is an MLP of the workload here).
    pub stand_ins: &'static [&'static str],
    /// The element type this row runs in whatever the workload's (MEM004's fp16 rows); such rows
    /// are left out when the workload already has that type.
    pub dtype: Option<DType>,
    pub run: RunFn,
    /// MEM003: a reference loop (fp32) whose fraction of zero gradient elements is reported beside.
    pub reference: Option<RunFn>,
    /// Why the row's figures look as if the fix did not help (what it buys instead), said when the
    /// fix saves less than 1 MiB on the row's metric or costs memory (see [`crate::report::caveat`]).
    pub caveat: Option<&'static str>,
}

/// Device state at the start of the run, for the tracker-vs-driver cross-check.
#[derive(Clone, Copy, Debug, Default)]
pub struct Baseline {
    pub free: Option<usize>,
    pub reserved: usize,
}

const MEM001_BAD: &str = r#"def evaluate(model, val_loader):
    model.eval()
    correct = 0
    for x, y in val_loader:
        out = model(x.cuda())
        correct += (out.argmax(1) == y.cuda()).sum().item()
    return correct"#;
const MEM001_FIXED: &str = r#"@torch.no_grad()
def evaluate(model, val_loader):
    model.eval()
    correct = 0
    for x, y in val_loader:
        out = model(x.cuda())
        correct += (out.argmax(1) == y.cuda()).sum().item()
    return correct"#;
const MEM002_BAD: &str = r#"total_loss = 0
for x, y in train_loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss"#;
const MEM002_FIXED: &str = r#"total_loss = 0
for x, y in train_loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss.item()"#;
const MEM002_EVAL_BAD: &str = r#"model.eval()
total_loss = 0
for x, y in val_loader:
    loss = criterion(model(x), y)
    total_loss += loss"#;
const MEM002_EVAL_FIXED: &str = r#"model.eval()
total_loss = 0
with torch.no_grad():
    for x, y in val_loader:
        loss = criterion(model(x), y)
        total_loss += loss.item()"#;
const MEM003_BAD: &str = r#"model = Net().cuda().half()
for x, y in loader:
    loss = criterion(model(x.half()), y)
    loss.backward()
    optimizer.step()"#;
const MEM003_FIXED: &str = r#"model = Net().cuda()
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()"#;
const MEM003_AUTOCAST_BAD: &str = r#"model = Net().cuda()
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()"#;
const MEM004_BAD: &str = r#"for x, y in train_loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    torch.cuda.empty_cache()"#;
const MEM004_FIXED: &str = r#"for x, y in train_loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()"#;
const MEM004_DEL_BAD: &str = r#"for x, y in train_loader:
    outputs = model(x)
    loss = criterion(outputs, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    del outputs, loss
    torch.cuda.empty_cache()"#;
const MEM004_DEL_FIXED: &str = r#"for x, y in train_loader:
    outputs = model(x)
    loss = criterion(outputs, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    del outputs, loss"#;
const MEM005_BAD: &str = r#"for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward(retain_graph=True)
    optimizer.step()"#;
const MEM005_FIXED: &str = r#"for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()"#;
const MEM005_GROWTH_BAD: &str = r#"total_loss = 0
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward(retain_graph=True)
    optimizer.step()
    total_loss += loss"#;
const MEM005_GROWTH_FIXED: &str = r#"total_loss = 0
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss.item()"#;
const MEM006_BAD: &str = r#"preds = []
for x, _ in test_loader:
    preds.append(model(x.cuda()))"#;
const MEM006_FIXED: &str = r#"preds = []
with torch.no_grad():
    for x, _ in test_loader:
        preds.append(model(x.cuda()).cpu())"#;
const MEM006_DETACHED_BAD: &str = r#"preds = []
with torch.no_grad():
    for x, _ in test_loader:
        preds.append(model(x.cuda()))"#;
const MEM008_BAD: &str = r#"checkpoint = torch.load("last.pt")
model.load_state_dict(checkpoint["model"])"#;
const MEM008_FIXED: &str = r#"checkpoint = torch.load("last.pt", map_location="cpu")
model.load_state_dict(checkpoint["model"])"#;
const MEM009_BAD: &str = r#"for x, y in loader:
    optimizer.zero_grad(set_to_none=False)
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()"#;
const MEM009_FIXED: &str = r#"for x, y in loader:
    optimizer.zero_grad(set_to_none=True)
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()"#;
const MEM012_BAD: &str = r#"vgg = torchvision.models.vgg16(weights="IMAGENET1K_V1").features[:16].eval().cuda()
optimizer = torch.optim.Adam(generator.parameters())
for x, target in loader:
    fake = generator(x)
    loss = F.mse_loss(vgg(fake), vgg(target))
    loss.backward()"#;
const MEM012_FIXED: &str = r#"vgg = torchvision.models.vgg16(weights="IMAGENET1K_V1").features[:16].eval().cuda()
vgg.requires_grad_(False)
optimizer = torch.optim.Adam(generator.parameters())
for x, target in loader:
    fake = generator(x)
    loss = F.mse_loss(vgg(fake), vgg(target))
    loss.backward()"#;
const MEM012_STAND_INS: &[&str] = &[r#"vgg = torchvision.models.vgg16(weights="IMAGENET1K_V1").features[:16].eval().cuda()"#];

#[allow(clippy::too_many_arguments)]
const fn def(
    code: &'static str,
    name: &'static str,
    variant: &'static str,
    description: &'static str,
    metric: Metric,
    (python_bad, python_fixed, from_doc): (&'static str, &'static str, bool),
    run: RunFn,
) -> ScenarioDef {
    ScenarioDef { code, name, variant, description, metric, python_bad, python_fixed, from_doc, stand_ins: &[], dtype: None, run, reference: None, caveat: None }
}

/// Every scenario, in report order.
pub fn all() -> Vec<ScenarioDef> {
    let doc = |b, f| (b, f, true);
    let var = |b, f| (b, f, false);
    vec![
        def("MEM001", "eval-without-no-grad", "eval", "the documented evaluate(): tracking gradients vs @torch.no_grad()", Metric::Peak, doc(MEM001_BAD, MEM001_FIXED), mem001),
        ScenarioDef {
            caveat: Some("with the model alive, what the summed loss keeps (its graph's ends: every parameter and its gradient) is held by the model anyway, so the memory comes back only once the model is dropped (the train-model-dropped row)"),
            ..def("MEM002", "accumulated-loss-tensor", "train", "the documented training loop: total_loss += loss vs loss.item(), model alive", Metric::Held, doc(MEM002_BAD, MEM002_FIXED), mem002_train)
        },
        def("MEM002", "accumulated-loss-tensor", "train-model-dropped", "the documented training loop, then the model and optimizer dropped while total_loss lives", Metric::Held, doc(MEM002_BAD, MEM002_FIXED), mem002_train_dropped),
        def("MEM002", "accumulated-loss-tensor", "eval", "variant: the same accumulation in an evaluation pass vs .item() under torch.no_grad()", Metric::Held, var(MEM002_EVAL_BAD, MEM002_EVAL_FIXED), mem002_eval),
        ScenarioDef {
            reference: Some(mem003_fp32),
            caveat: Some("autocast keeps the fp32 master weights and makes fp16 copies of them for each step, where .half() had only fp16 weights; what the fix buys is gradients that do not underflow to zero"),
            ..def("MEM003", "half-without-grad-scaler", "half", "the documented .half() model (fp16 weights and gradients, no scaling) vs autocast + GradScaler, late-training loss", Metric::Underflow, doc(MEM003_BAD, MEM003_FIXED), mem003_half)
        },
        ScenarioDef {
            reference: Some(mem003_fp32),
            caveat: Some("the GradScaler keeps its scale and inf-check tensors; what the fix buys is gradients that do not underflow to zero"),
            ..def("MEM003", "half-without-grad-scaler", "autocast", "variant: fp16 autocast without a GradScaler vs the documented autocast + GradScaler, late-training loss", Metric::Underflow, var(MEM003_AUTOCAST_BAD, MEM003_FIXED), mem003_autocast)
        },
        def("MEM004", "empty-cache-in-loop", "train", "the documented loop: torch.cuda.empty_cache() after zero_grad() every step vs not", Metric::StepTime, doc(MEM004_BAD, MEM004_FIXED), mem004_train),
        def("MEM004", "empty-cache-in-loop", "del", "variant: del outputs, loss then torch.cuda.empty_cache() after step() vs not", Metric::StepTime, var(MEM004_DEL_BAD, MEM004_DEL_FIXED), mem004_del),
        ScenarioDef { dtype: Some(DType::Fp16), ..def("MEM004", "empty-cache-in-loop", "train-fp16", "the documented loop on an fp16 model", Metric::StepTime, doc(MEM004_BAD, MEM004_FIXED), mem004_train_fp16) },
        ScenarioDef { dtype: Some(DType::Fp16), ..def("MEM004", "empty-cache-in-loop", "del-fp16", "variant: the del outputs, loss form on an fp16 model", Metric::StepTime, var(MEM004_DEL_BAD, MEM004_DEL_FIXED), mem004_del_fp16) },
        def("MEM005", "retain-graph-in-loop", "peak", "the documented loop: backward(retain_graph=True) every step vs backward()", Metric::Peak, doc(MEM005_BAD, MEM005_FIXED), mem005_peak),
        def("MEM005", "retain-graph-in-loop", "growth", "variant: the documented loop with its losses summed, so every retained graph stays alive", Metric::Held, var(MEM005_GROWTH_BAD, MEM005_GROWTH_FIXED), mem005_growth),
        def("MEM006", "gpu-tensors-collected", "graphs", "the documented loop: outputs collected on the GPU with their graphs vs .cpu() under no_grad", Metric::Held, doc(MEM006_BAD, MEM006_FIXED), mem006_graphs),
        def("MEM006", "gpu-tensors-collected", "detached", "variant: outputs without graphs (under no_grad) collected on the GPU vs .cpu()", Metric::Held, var(MEM006_DETACHED_BAD, MEM006_FIXED), mem006_detached),
        def("MEM008", "torch-load-without-map-location", "restore", "the documented restore: torch.load onto the saving device vs map_location=\"cpu\"", Metric::Peak, doc(MEM008_BAD, MEM008_FIXED), mem008),
        def("MEM009", "zero-grad-keeps-memory", "train", "the documented loop: zero_grad(set_to_none=False) vs set_to_none=True", Metric::Peak, doc(MEM009_BAD, MEM009_FIXED), mem009),
        ScenarioDef {
            stand_ins: MEM012_STAND_INS,
            ..def("MEM012", "frozen-network-tracks-grad", "frozen", "the documented perceptual loss: a frozen feature network (an MLP of the workload) tracking gradients vs requires_grad_(False)", Metric::Peak, doc(MEM012_BAD, MEM012_FIXED), mem012)
        },
    ]
}

/// The scenarios for a workload: rows pinned to the workload's own element type are left out.
pub fn for_workload(wl: &Workload) -> Vec<ScenarioDef> {
    all().into_iter().filter(|d| d.dtype.is_none_or(|t| t != wl.dtype)).collect()
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
            mallocs_per_step: None,
            underflow: None,
            reserved_delta: st.reserved as i64 - self.base.reserved as i64,
            driver_used_delta,
        })
    }
}

/// `model = MLP().cuda()` of the workload, in `dtype`.
fn model(rt: &Runtime, wl: &Workload, dtype: DType) -> Result<Sequential, DeviceError> {
    Sequential::mlp(rt, wl.hidden, wl.layers, Some(wl.classes), dtype, SEED_MODEL)
}

fn none() -> DeviceError {
    DeviceError::Usage("internal: loop variable unset".into())
}

/// A loop variable's current value.
fn cur<T>(v: &Option<T>) -> Result<&T, DeviceError> {
    v.as_ref().ok_or_else(none)
}

/// What a loader gives beside the input: class targets, or a tensor like the input (MEM012).
enum Target {
    Classes(Rc<Storage>),
    Values(Tensor),
}

impl Target {
    fn classes(&self) -> Result<&Rc<Storage>, DeviceError> {
        match self {
            Target::Classes(s) => Ok(s),
            Target::Values(_) => Err(DeviceError::Usage("internal: the loader gives tensors, not classes".into())),
        }
    }
    fn values(&self) -> Result<&Tensor, DeviceError> {
        match self {
            Target::Values(t) => Ok(t),
            Target::Classes(_) => Err(DeviceError::Usage("internal: the loader gives classes, not tensors".into())),
        }
    }
}

/// A loader that gives a fresh batch on the device every step, made when the loop asks for it
/// (`device_loader` in the PyTorch script): the examples that use `x` as it comes.
struct DeviceLoader<'a> {
    rt: &'a Runtime,
    wl: Workload,
    dtype: DType,
    left: usize,
    seed: u64,
    targets_like_x: bool,
}

impl<'a> DeviceLoader<'a> {
    fn new(rt: &'a Runtime, wl: &Workload, dtype: DType, steps: usize) -> Self {
        DeviceLoader { rt, wl: *wl, dtype, left: steps, seed: SEED_DATA, targets_like_x: false }
    }
    fn targets_like_x(mut self) -> Self {
        self.targets_like_x = true;
        self
    }
    /// `next(loader)`: the batch `(x, y)`, allocated while the loop's previous batch is still bound.
    fn next(&mut self) -> Result<Option<(Tensor, Target)>, DeviceError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        self.seed += 2;
        let (b, h) = (self.wl.batch, self.wl.hidden);
        let x = self.rt.randn(b, h, self.dtype, self.seed)?;
        let y = if self.targets_like_x {
            Target::Values(self.rt.randn(b, h, self.dtype, self.seed + 1)?)
        } else {
            Target::Classes(self.rt.targets(b, self.wl.classes, self.seed + 1)?)
        };
        Ok(Some((x, y)))
    }
}

/// A loader whose batches are on the host (`host_loader` in the PyTorch script): the examples that
/// call `x.cuda()`. Each step's `x.cuda()` and `y.cuda()` make new device tensors from them.
struct HostLoader {
    x: Vec<f32>,
    y: Vec<i64>,
    left: usize,
}

impl HostLoader {
    fn new(rt: &Runtime, wl: &Workload, steps: usize) -> Self {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(SEED_DATA);
        // The simulator computes nothing, so the batch's values are not needed there.
        let n = if rt.dev.estimated() { 0 } else { wl.batch * wl.hidden };
        let x = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let y = (0..wl.batch).map(|_| rng.random_range(0..wl.classes as i64)).collect();
        HostLoader { x, y, left: steps }
    }
    fn next(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }
    /// `x.cuda()`.
    fn x_cuda(&self, rt: &Runtime, wl: &Workload, dtype: DType) -> Result<Tensor, DeviceError> {
        rt.upload(&self.x, wl.batch, wl.hidden, dtype)
    }
    /// `y.cuda()`.
    fn y_cuda(&self, rt: &Runtime) -> Result<Rc<Storage>, DeviceError> {
        rt.upload_targets(&self.y)
    }
}

/// `total_loss = 0` then `total_loss += loss` (a tensor: a new one the first time, then in place) or
/// `total_loss += loss.item()` (a Python float).
enum Total {
    Zero,
    Float(f64),
    Tensor(Tensor),
}

impl Total {
    fn add_tensor(&mut self, rt: &Runtime, t: &Tensor) -> Result<(), DeviceError> {
        match self {
            Total::Zero | Total::Float(_) => *self = Total::Tensor(rt.add_to_zero(t)?),
            Total::Tensor(a) => rt.add_inplace(a, t)?,
        }
        Ok(())
    }
    fn add_item(&mut self, rt: &Runtime, t: &Tensor) -> Result<(), DeviceError> {
        let v = rt.item(t)? as f64;
        match self {
            Total::Zero => *self = Total::Float(v),
            Total::Float(f) => *f += v,
            Total::Tensor(_) => return Err(DeviceError::Usage("internal: a tensor total cannot take .item()".into())),
        }
        Ok(())
    }
}

/// MEM001: the documented `evaluate(model, val_loader)`, with gradients tracked (bad) or under
/// `@torch.no_grad()` (fixed). The figures are read inside the function, before it returns.
fn mem001(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let m = model(rt, wl, wl.dtype)?;
    let mut val_loader = HostLoader::new(rt, wl, wl.iters);
    let meter = Meter::start(rt, base)?;
    let evaluate = || -> Result<Measure, DeviceError> {
        // model.eval(): an MLP has no layer that behaves differently in evaluation.
        let mut correct = 0i64;
        let mut out: Option<Tensor> = None;
        while val_loader.next() {
            out = Some(m.forward(rt, &val_loader.x_cuda(rt, wl, wl.dtype)?, false)?);
            // correct += (out.argmax(1) == y.cuda()).sum().item()
            let a = rt.argmax_rows(cur(&out)?)?;
            let y = val_loader.y_cuda(rt)?;
            let eq = rt.eq(&a, &y)?;
            drop((a, y));
            let s = rt.sum_bool(&eq)?;
            drop(eq);
            correct += rt.dev.download(s.addr(), DType::I64, 1)?.first().copied().unwrap_or(0.0) as i64;
        }
        let r = meter.finish(wl.iters);
        drop((out, correct));
        r
    };
    if bad {
        evaluate()
    } else {
        rt.no_grad(evaluate)
    }
}

/// MEM002: the documented training loop (no `zero_grad` in it, so gradients accumulate), summing
/// the loss tensor (bad) or `loss.item()` (fixed). Returns the figures and `total_loss`.
fn mem002_loop(rt: &Runtime, wl: &Workload, m: &Sequential, params: &[Rc<Param>], bad: bool, meter: Meter<'_>) -> Result<(Measure, Total), DeviceError> {
    let mut train_loader = DeviceLoader::new(rt, wl, wl.dtype, wl.iters);
    let mut total_loss = Total::Zero;
    let (mut x, mut y, mut loss) = (None, None, None);
    while let Some((nx, ny)) = train_loader.next()? {
        (x, y) = (Some(nx), Some(ny));
        loss = Some(rt.cross_entropy(&m.forward(rt, cur(&x)?, false)?, cur(&y)?.classes()?)?);
        rt.backward(cur(&loss)?, false)?;
        rt.sgd_step(params, LR)?;
        if bad {
            total_loss.add_tensor(rt, cur(&loss)?)?;
        } else {
            total_loss.add_item(rt, cur(&loss)?)?;
        }
    }
    let r = meter.finish(wl.iters)?;
    drop((x, y, loss));
    Ok((r, total_loss))
}

fn mem002_train(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let m = model(rt, wl, wl.dtype)?;
    let params = m.params();
    let meter = Meter::start(rt, base)?;
    Ok(mem002_loop(rt, wl, &m, &params, bad, meter)?.0)
}

/// MEM002 when the training function returns `total_loss` and the model and optimizer go out of
/// scope: a summed loss keeps its graph, whose `AccumulateGrad` edges keep every parameter and its
/// gradient alive. Held is read after the model is dropped.
fn mem002_train_dropped(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let m = model(rt, wl, wl.dtype)?;
    let params = m.params();
    let meter = Meter::start(rt, base)?;
    let (mut r, total_loss) = mem002_loop(rt, wl, &m, &params, bad, meter)?;
    drop((m, params));
    let st = rt.stats();
    r.held = st.allocated;
    r.peak = st.peak_allocated;
    drop(total_loss);
    Ok(r)
}

/// MEM002 in an evaluation pass: the loss summed as a tensor with gradients tracked (bad), or
/// `loss.item()` under `torch.no_grad()` (fixed).
fn mem002_eval(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let m = model(rt, wl, wl.dtype)?;
    let meter = Meter::start(rt, base)?;
    let mut val_loader = DeviceLoader::new(rt, wl, wl.dtype, wl.iters);
    let mut total_loss = Total::Zero;
    let (mut x, mut y, mut loss) = (None, None, None);
    let mut body = || -> Result<(), DeviceError> {
        while let Some((nx, ny)) = val_loader.next()? {
            (x, y) = (Some(nx), Some(ny));
            loss = Some(rt.cross_entropy(&m.forward(rt, cur(&x)?, false)?, cur(&y)?.classes()?)?);
            if bad {
                total_loss.add_tensor(rt, cur(&loss)?)?;
            } else {
                total_loss.add_item(rt, cur(&loss)?)?;
            }
        }
        Ok(())
    };
    if bad {
        body()?;
    } else {
        rt.no_grad(body)?;
    }
    let r = meter.finish(wl.iters);
    drop((x, y, loss, total_loss));
    r
}

/// The precision of a MEM003 loop.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Amp {
    /// `model = Net().cuda().half()`: fp16 weights, activations and gradients, no scaling.
    Half,
    /// fp32 weights under fp16 autocast, no scaling.
    Autocast,
    /// fp32 weights under fp16 autocast with `GradScaler("cuda")`.
    Scaled,
    /// Everything in fp32: the gradient elements that are zero anyway (ReLU zeros).
    Fp32,
}

/// Fraction of gradient elements equal to zero over all parameters (`(p.grad == 0).sum()`; a
/// parameter without a gradient counts as all zeros).
fn zero_fraction(rt: &Runtime, params: &[Rc<Param>], counter: &Storage) -> Result<f64, DeviceError> {
    rt.dev.fill(DType::Fp32, counter.addr(), 2, 0.0)?;
    let mut total = 0usize;
    let mut missing = 0usize;
    for p in params {
        total += p.data.numel();
        match p.grad.borrow().as_ref() {
            Some(g) => {
                // `p.grad == 0` is a bool tensor of the gradient's size; `.sum()` converts it to
                // int64 (the sum's type) before reducing.
                let mask = rt.empty(g.rows, g.cols, DType::Bool, crate::alloc::Kind::Output)?;
                let as_long = rt.empty(g.rows, g.cols, DType::I64, crate::alloc::Kind::Output)?;
                rt.dev.count_zeros(g.dtype, g.addr(), g.numel(), counter.addr())?;
                drop((as_long, mask));
            }
            None => missing += p.data.numel(),
        }
    }
    let zeros = rt.dev.read_u64(counter.addr())? as usize + missing;
    Ok(zeros as f64 / total.max(1) as f64)
}

/// MEM003's loops: the documentation's (no `zero_grad` in them, so gradients accumulate), with a
/// criterion that scales the cross-entropy by [`LATE_LOSS_FACTOR`]; the fraction of zero gradient
/// elements is read after every step.
fn mem003_run(rt: &Runtime, wl: &Workload, amp: Amp, base: &Baseline) -> Result<Measure, DeviceError> {
    let meter = Meter::start(rt, base)?;
    // model = Net().cuda()  (then .half())
    let mut m = Sequential::mlp(rt, wl.hidden, wl.layers, Some(wl.classes), DType::Fp32, SEED_MODEL)?;
    if amp == Amp::Half {
        m.to_dtype(rt, DType::Fp16)?;
    }
    let params = m.params();
    // The count of zero elements: 8 bytes (two fp32 words, so that the fp32 fill can zero it).
    let counter = rt.empty(1, 2, DType::Fp32, crate::alloc::Kind::Output)?;
    let mut scaler_state: Option<(Rc<Storage>, Rc<Storage>)> = None;
    let mut scale = SCALER_INIT;
    let mut growth_tracker = 0usize;
    let mut frac_sum = 0.0f64;
    let mut loader = DeviceLoader::new(rt, wl, DType::Fp32, wl.iters);
    let (mut x, mut y, mut loss) = (None, None, None);
    while let Some((nx, ny)) = loader.next()? {
        (x, y) = (Some(nx), Some(ny));
        let yc = cur(&y)?.classes()?;
        loss = Some(match amp {
            Amp::Half => {
                // criterion(model(x.half()), y): cross-entropy of the fp16 logits, in fp16.
                let out = m.forward(rt, &rt.cast(cur(&x)?, DType::Fp16)?, false)?;
                rt.scale(&rt.cross_entropy(&out, yc)?, LATE_LOSS_FACTOR)?
            }
            Amp::Autocast | Amp::Scaled => {
                // Under autocast the linear layers run in fp16 and cross_entropy casts to fp32.
                let out = m.forward(rt, cur(&x)?, true)?;
                rt.scale(&rt.cross_entropy(&rt.cast(&out, DType::Fp32)?, yc)?, LATE_LOSS_FACTOR)?
            }
            Amp::Fp32 => rt.scale(&rt.cross_entropy(&m.forward(rt, cur(&x)?, false)?, yc)?, LATE_LOSS_FACTOR)?,
        });
        let l = cur(&loss)?;
        if amp == Amp::Scaled {
            // scaler.scale(loss) creates the scaler's scale and growth tracker on first use.
            if scaler_state.is_none() {
                scaler_state = Some((rt.empty(1, 1, DType::Fp32, crate::alloc::Kind::Output)?, rt.empty(1, 1, DType::Fp32, crate::alloc::Kind::Output)?));
            }
            rt.backward(&rt.scale(l, scale)?, false)?;
            // scaler.step(optimizer): unscale the gradients in place, skip the step on inf/nan.
            let found_inf = rt.zeros_scalar(DType::Fp32)?;
            for p in &params {
                if let Some(g) = p.grad.borrow().as_ref() {
                    rt.dev.unscale_check(g.addr(), g.numel(), 1.0 / scale, found_inf.data.addr())?;
                }
            }
            let inf = rt.item(&found_inf)? != 0.0;
            if !inf {
                rt.sgd_step(&params, LR)?;
            }
            // scaler.update(): halve on inf/nan, double after an interval of good steps.
            if inf {
                scale *= 0.5;
                growth_tracker = 0;
            } else {
                growth_tracker += 1;
                if growth_tracker == SCALER_GROWTH_INTERVAL {
                    scale *= 2.0;
                    growth_tracker = 0;
                }
            }
        } else {
            rt.backward(l, false)?;
            rt.sgd_step(&params, LR)?;
        }
        frac_sum += zero_fraction(rt, &params, &counter)?;
    }
    // The PyTorch script reads the figures after the example's function returned: held is what is
    // left once its model, loader and scaler are gone.
    drop((x, y, loss, scaler_state, params, m, counter, loader));
    let mut r = meter.finish(wl.iters)?;
    r.underflow = (!rt.dev.estimated()).then(|| frac_sum / wl.iters.max(1) as f64);
    Ok(r)
}

fn mem003_half(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem003_run(rt, wl, if bad { Amp::Half } else { Amp::Scaled }, base)
}

fn mem003_autocast(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem003_run(rt, wl, if bad { Amp::Autocast } else { Amp::Scaled }, base)
}

fn mem003_fp32(rt: &Runtime, wl: &Workload, _bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem003_run(rt, wl, Amp::Fp32, base)
}

/// One pass of a MEM004 loop over `train_loader`; its variables are freed when it returns.
fn mem004_loop(rt: &Runtime, m: &Sequential, params: &[Rc<Param>], train_loader: &mut DeviceLoader<'_>, del_form: bool, empty_cache: bool) -> Result<(), DeviceError> {
    let (mut x, mut y, mut loss, mut outputs) = (None, None, None, None);
    while let Some((nx, ny)) = train_loader.next()? {
        (x, y) = (Some(nx), Some(ny));
        if del_form {
            outputs = Some(m.forward(rt, cur(&x)?, false)?);
            loss = Some(rt.cross_entropy(cur(&outputs)?, cur(&y)?.classes()?)?);
            rt.zero_grad(params, true)?;
            rt.backward(cur(&loss)?, false)?;
            rt.sgd_step(params, LR)?;
            // del outputs, loss
            drop((outputs.take(), loss.take()));
        } else {
            loss = Some(rt.cross_entropy(&m.forward(rt, cur(&x)?, false)?, cur(&y)?.classes()?)?);
            rt.backward(cur(&loss)?, false)?;
            rt.sgd_step(params, LR)?;
            rt.zero_grad(params, true)?;
        }
        if empty_cache {
            rt.empty_cache()?;
        }
    }
    drop((x, y, loss, outputs));
    Ok(())
}

/// MEM004: [`WARMUP_STEPS`] untimed steps, then [`TIMING_REPS`] timed passes of the workload's
/// iterations, each between two device synchronizations; the step time is the median pass's.
fn mem004(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline, del_form: bool, dtype: DType) -> Result<Measure, DeviceError> {
    let m = model(rt, wl, dtype)?;
    let params = m.params();
    let meter = Meter::start(rt, base)?;
    mem004_loop(rt, &m, &params, &mut DeviceLoader::new(rt, wl, dtype, WARMUP_STEPS), del_form, bad)?;
    rt.synchronize()?;
    let mallocs0 = rt.stats().driver_mallocs;
    let mut times = Vec::with_capacity(TIMING_REPS);
    for _ in 0..TIMING_REPS {
        let mut train_loader = DeviceLoader::new(rt, wl, dtype, wl.iters);
        rt.synchronize()?;
        let t0 = Instant::now();
        mem004_loop(rt, &m, &params, &mut train_loader, del_form, bad)?;
        rt.synchronize()?;
        times.push(t0.elapsed().as_secs_f64() * 1e3 / wl.iters.max(1) as f64);
    }
    let mallocs = rt.stats().driver_mallocs - mallocs0;
    let mut r = meter.finish(wl.iters)?;
    times.sort_by(f64::total_cmp);
    r.step_ms = (!rt.dev.estimated()).then(|| times[times.len() / 2]);
    r.driver_mallocs = mallocs;
    r.mallocs_per_step = Some(mallocs as f64 / (TIMING_REPS * wl.iters.max(1)) as f64);
    Ok(r)
}

fn mem004_train(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem004(rt, wl, bad, base, false, wl.dtype)
}

fn mem004_del(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem004(rt, wl, bad, base, true, wl.dtype)
}

fn mem004_train_fp16(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem004(rt, wl, bad, base, false, DType::Fp16)
}

fn mem004_del_fp16(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem004(rt, wl, bad, base, true, DType::Fp16)
}

/// MEM005: the documented loop (no `zero_grad` in it), `retain_graph=True` (bad) or not; with
/// `keep_losses`, the losses are summed as in MEM002's example (`.item()` in the fixed loop).
fn mem005(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline, keep_losses: bool) -> Result<Measure, DeviceError> {
    let m = model(rt, wl, wl.dtype)?;
    let params = m.params();
    let meter = Meter::start(rt, base)?;
    let mut loader = DeviceLoader::new(rt, wl, wl.dtype, wl.iters);
    let mut total_loss = Total::Zero;
    let (mut x, mut y, mut loss) = (None, None, None);
    while let Some((nx, ny)) = loader.next()? {
        (x, y) = (Some(nx), Some(ny));
        loss = Some(rt.cross_entropy(&m.forward(rt, cur(&x)?, false)?, cur(&y)?.classes()?)?);
        rt.backward(cur(&loss)?, bad)?;
        rt.sgd_step(&params, LR)?;
        if keep_losses {
            if bad {
                total_loss.add_tensor(rt, cur(&loss)?)?;
            } else {
                total_loss.add_item(rt, cur(&loss)?)?;
            }
        }
    }
    let r = meter.finish(wl.iters);
    drop((x, y, loss, total_loss));
    r
}

fn mem005_peak(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem005(rt, wl, bad, base, false)
}

fn mem005_growth(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem005(rt, wl, bad, base, true)
}

/// MEM006: `preds.append(model(x.cuda()))` over a test loader. `track`: gradients tracked (the
/// documented anti-pattern); `to_host`: `.cpu()` (the documented fix, under no_grad).
fn mem006(rt: &Runtime, wl: &Workload, base: &Baseline, track: bool, to_host: bool) -> Result<Measure, DeviceError> {
    let m = model(rt, wl, wl.dtype)?;
    let mut test_loader = HostLoader::new(rt, wl, wl.iters);
    let meter = Meter::start(rt, base)?;
    let mut on_device: Vec<Tensor> = Vec::new();
    let mut on_host: Vec<Vec<f32>> = Vec::new();
    let mut body = || -> Result<(), DeviceError> {
        while test_loader.next() {
            let out = m.forward(rt, &test_loader.x_cuda(rt, wl, wl.dtype)?, false)?;
            if to_host {
                on_host.push(rt.to_host(&out.data)?);
            } else {
                on_device.push(out);
            }
        }
        Ok(())
    };
    if track {
        body()?;
    } else {
        rt.no_grad(body)?;
    }
    let r = meter.finish(wl.iters);
    drop((on_device, on_host));
    r
}

fn mem006_graphs(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem006(rt, wl, base, bad, !bad)
}

fn mem006_detached(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    mem006(rt, wl, base, false, !bad)
}

/// MEM008: `torch.save({"model": model.state_dict()}, "last.pt")` before the measured region;
/// `checkpoint = torch.load("last.pt")` restores every storage onto the device it was saved from
/// (bad) or onto the host (fixed), then `model.load_state_dict(checkpoint["model"])`. Measured while
/// `checkpoint` is alive.
fn mem008(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let model = model(rt, wl, wl.dtype)?;
    let params = model.params();
    // The checkpoint's bytes on the host. The simulator computes nothing, so it keeps no copy.
    let ckpt: Vec<Vec<f32>> = if rt.dev.estimated() {
        vec![Vec::new(); params.len()]
    } else {
        params.iter().map(|p| rt.to_host(&p.data)).collect::<Result<_, _>>()?
    };
    let meter = Meter::start(rt, base)?;
    let mut checkpoint: Vec<Rc<Storage>> = Vec::new();
    if bad {
        for (p, host) in params.iter().zip(&ckpt) {
            let s = rt.empty(p.data.rows, p.data.cols, p.data.dtype, crate::alloc::Kind::Output)?;
            if !host.is_empty() {
                rt.dev.upload(s.addr(), s.dtype, crate::backend::HostData::F32(host))?;
            }
            checkpoint.push(s);
        }
        // load_state_dict: param.copy_(checkpoint["model"][name])
        for (p, s) in params.iter().zip(&checkpoint) {
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
    drop(checkpoint);
    r
}

/// MEM009: the documented loop, `zero_grad(set_to_none=False)` (bad) or `True` (fixed).
fn mem009(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let m = model(rt, wl, wl.dtype)?;
    let params = m.params();
    let meter = Meter::start(rt, base)?;
    let mut loader = DeviceLoader::new(rt, wl, wl.dtype, wl.iters);
    let (mut x, mut y, mut loss) = (None, None, None);
    while let Some((nx, ny)) = loader.next()? {
        (x, y) = (Some(nx), Some(ny));
        rt.zero_grad(&params, !bad)?;
        loss = Some(rt.cross_entropy(&m.forward(rt, cur(&x)?, false)?, cur(&y)?.classes()?)?);
        rt.backward(cur(&loss)?, false)?;
        rt.sgd_step(&params, LR)?;
    }
    let r = meter.finish(wl.iters);
    drop((x, y, loss));
    r
}

/// MEM012: the documented perceptual loss. `generator` is one Linear(hidden, hidden); the pretrained
/// feature network (torchvision's VGG in the example) is an MLP of the workload's layers without a
/// head, made inside the measured region as the example does. The example never steps its Adam
/// optimizer, so Adam holds no state, and never calls zero_grad, so gradients accumulate.
fn mem012(rt: &Runtime, wl: &Workload, bad: bool, base: &Baseline) -> Result<Measure, DeviceError> {
    let generator = Sequential::mlp(rt, wl.hidden, 0, Some(wl.hidden), wl.dtype, SEED_MODEL + 500)?;
    let mut loader = DeviceLoader::new(rt, wl, wl.dtype, wl.iters).targets_like_x();
    let meter = Meter::start(rt, base)?;
    let vgg = Sequential::mlp(rt, wl.hidden, wl.layers, None, wl.dtype, SEED_MODEL)?;
    if !bad {
        vgg.set_requires_grad(false);
    }
    let (mut x, mut target, mut fake, mut loss) = (None, None, None, None);
    while let Some((nx, nt)) = loader.next()? {
        (x, target) = (Some(nx), Some(nt));
        fake = Some(generator.forward(rt, cur(&x)?, false)?);
        loss = Some(rt.mse_loss(&vgg.forward(rt, cur(&fake)?, false)?, &vgg.forward(rt, cur(&target)?.values()?, false)?)?);
        rt.backward(cur(&loss)?, false)?;
    }
    let r = meter.finish(wl.iters);
    drop((x, target, fake, loss));
    r
}
