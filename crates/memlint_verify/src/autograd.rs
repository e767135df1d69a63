//! Tensors, a small autograd engine and an MLP, keeping on the device exactly what PyTorch keeps.
//!
//! What matters for the measurements is *when* each buffer is allocated and released, so the rules
//! below follow PyTorch's and are relied upon by the scenarios:
//! * `Linear` saves its input (when the weight needs a gradient) and its weight (when the input needs
//!   one); `ReLU` saves its output; cross-entropy saves its log-softmax and total weight.
//! * A graph lives while something holds its output (a [`Tensor`] holds its node, nodes hold their
//!   inputs' nodes); saved tensors hold only the storage, never the node, so there are no cycles.
//! * `backward` frees each node's saved tensors right after the node ran, unless `retain_graph`.
//!   Nodes run in PyTorch's order (highest sequence number first), and parameter gradients are
//!   accumulated as soon as they are produced (PyTorch gives `AccumulateGrad` top priority).
//! * A parameter's first gradient is *stolen* (the freshly computed buffer becomes `.grad`); later
//!   ones are added in place and their temporary freed. `zero_grad(set_to_none=True)` frees `.grad`.
//! * Intermediate results are released when the last reference goes, as with Python's reference
//!   counting: code written as `h = layer(h)` frees the old `h` after the new one exists.

use std::cell::{Cell, RefCell};
use std::collections::{BinaryHeap, HashMap};
use std::rc::Rc;

use crate::alloc::{AllocRef, Buffer, CachingAllocator, Kind, MemStats};
use crate::backend::{Backend, DType, DeviceError, Gemm, HostData};

/// cuBLAS workspace, allocated through the caching allocator as PyTorch does on Hopper
/// (`CUBLAS_WORKSPACE_CONFIG` default `:4096:8`, i.e. 8 × 4 MiB).
pub const GEMM_WORKSPACE: usize = 32 << 20;

/// A device buffer with a shape (row-major, 2-D; scalars are 1×1). Several storages may share one
/// buffer at different offsets (views: a device's chunk of a batch, a parameter inside a flat
/// buffer); the buffer goes back to the allocator when the last of them is dropped.
pub struct Storage {
    pub buf: Rc<Buffer>,
    /// Byte offset of this tensor's first element in `buf`.
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub dtype: DType,
}

impl Storage {
    pub fn numel(&self) -> usize {
        self.rows * self.cols
    }
    pub fn addr(&self) -> u64 {
        self.buf.addr + self.offset as u64
    }
    pub fn bytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }
    /// A view of `rows × cols` elements of `dtype` starting `offset` bytes into `buf`.
    pub fn view_of(buf: &Rc<Buffer>, offset: usize, rows: usize, cols: usize, dtype: DType) -> Rc<Storage> {
        Rc::new(Storage { buf: buf.clone(), offset, rows, cols, dtype })
    }
    /// `t[row0 .. row0 + rows]` (a view sharing this storage's buffer).
    pub fn rows_view(&self, row0: usize, rows: usize) -> Rc<Storage> {
        Storage::view_of(&self.buf, self.offset + row0 * self.cols * self.dtype.size(), rows, self.cols, self.dtype)
    }
}

/// A tensor: storage plus the graph node that produced it (None for leaves and untracked results).
#[derive(Clone)]
pub struct Tensor {
    pub data: Rc<Storage>,
    pub grad_fn: Option<Rc<Node>>,
}

impl Tensor {
    pub fn requires_grad(&self) -> bool {
        self.grad_fn.is_some()
    }
    /// `tensor.detach()`: same storage, no graph.
    pub fn detach(&self) -> Tensor {
        Tensor { data: self.data.clone(), grad_fn: None }
    }
    pub fn dtype(&self) -> DType {
        self.data.dtype
    }
}

/// A storage saved by a graph node; counted as a saved activation while saved.
pub struct SavedTensor(Rc<Storage>);

impl SavedTensor {
    fn new(s: &Rc<Storage>) -> SavedTensor {
        s.buf.mark_saved();
        SavedTensor(s.clone())
    }
}

impl Drop for SavedTensor {
    fn drop(&mut self) {
        self.0.buf.unmark_saved();
    }
}

/// A trainable (or frozen) parameter.
pub struct Param {
    pub data: Rc<Storage>,
    pub grad: RefCell<Option<Rc<Storage>>>,
    pub requires_grad: Cell<bool>,
}

enum Op {
    Linear {
        input: Option<SavedTensor>,
        weight: Option<SavedTensor>,
        w: Rc<Param>,
        b: Rc<Param>,
        /// The weight and bias were cast to fp16 by autocast: their gradients are cast back to fp32.
        autocast: bool,
        input_needs_grad: bool,
    },
    Relu {
        output: Option<SavedTensor>,
    },
    CrossEntropy {
        logsm: Option<SavedTensor>,
        total_weight: Option<SavedTensor>,
        targets: Option<Rc<Storage>>,
    },
    Mse {
        a: Option<SavedTensor>,
        b: Option<SavedTensor>,
        a_needs_grad: bool,
        b_needs_grad: bool,
    },
    Cast {
        from: DType,
    },
    Scale {
        c: f32,
    },
    Add,
    /// `F.linear(x, w, b)` whose weight and bias are tensors with their own history rather than
    /// leaf parameters: a DataParallel replica's, which `replicate` makes as outputs of a broadcast.
    /// Next edges: the input's, the weight's and the bias's nodes.
    LinearT {
        input: Option<SavedTensor>,
        weight: Option<SavedTensor>,
        in_features: usize,
        needs: [bool; 3],
    },
    /// Where a replica parameter's gradient ends: it is kept in `slot` (PyTorch buffers it for the
    /// reduce that `replicate`'s broadcast has as its backward). Runs as soon as its gradient exists,
    /// like `AccumulateGrad`.
    Sink {
        slot: GradSlot,
    },
}

/// The gradient a [`Runtime::grad_sink`] collected.
pub type GradSlot = Rc<RefCell<Option<Rc<Storage>>>>;

/// Called after a parameter's gradient was accumulated into its `.grad` (a post-hook of
/// `AccumulateGrad`, as DDP's reducer registers one); see [`Runtime::backward_with_hook`].
pub type GradHook<'a> = &'a mut dyn FnMut(&Param) -> Result<(), DeviceError>;

/// A node of the backward graph.
pub struct Node {
    seq: u64,
    op: RefCell<Op>,
    released: Cell<bool>,
    next: Vec<Option<Rc<Node>>>,
}

impl Node {
    /// The parameters whose gradients this node produces (its edges to `AccumulateGrad`).
    fn params(&self) -> Vec<Rc<Param>> {
        match &*self.op.borrow() {
            Op::Linear { w, b, .. } => [w, b].into_iter().filter(|p| p.requires_grad.get()).cloned().collect(),
            _ => Vec::new(),
        }
    }
}

/// The reference runtime: a backend, its caching allocator and the autograd state.
pub struct Runtime {
    pub dev: Rc<dyn Backend>,
    pub alloc: AllocRef,
    grad_enabled: Cell<bool>,
    seq: Cell<u64>,
    _workspace: Vec<Buffer>,
}

fn freed_graph() -> DeviceError {
    DeviceError::Usage(
        "trying to backward through the graph a second time: its saved tensors were freed (use retain_graph)".into(),
    )
}

impl Runtime {
    pub fn new(dev: Rc<dyn Backend>) -> Result<Runtime, DeviceError> {
        Runtime::with_workspaces(dev, &[])
    }

    /// A runtime holding, beside the GEMM workspace, blocks of these sizes for the whole of its life
    /// (what a PyTorch process holds per device besides cuBLAS's workspace: cuBLASLt's, see
    /// [`crate::parallel::TORCH_EXTRA_WORKSPACES`]).
    pub fn with_workspaces(dev: Rc<dyn Backend>, extra: &[usize]) -> Result<Runtime, DeviceError> {
        let alloc: AllocRef = Rc::new(RefCell::new(CachingAllocator::new(dev.clone())));
        let ws = Buffer::new(&alloc, GEMM_WORKSPACE, Kind::Workspace)?;
        dev.set_gemm_workspace(ws.addr, GEMM_WORKSPACE)?;
        let mut held = vec![ws];
        for &b in extra {
            held.push(Buffer::new(&alloc, b, Kind::Workspace)?);
        }
        Ok(Runtime { dev, alloc, grad_enabled: Cell::new(true), seq: Cell::new(0), _workspace: held })
    }

    /// A node that keeps the gradient it receives in the returned slot (see [`Op::Sink`]).
    pub fn grad_sink(&self) -> (Rc<Node>, GradSlot) {
        let slot: GradSlot = Rc::new(RefCell::new(None));
        // Highest priority, like AccumulateGrad's: it runs as soon as its gradient is ready.
        let node = Rc::new(Node { seq: u64::MAX, op: RefCell::new(Op::Sink { slot: slot.clone() }), released: Cell::new(false), next: Vec::new() });
        (node, slot)
    }

    pub fn empty(&self, rows: usize, cols: usize, dtype: DType, kind: Kind) -> Result<Rc<Storage>, DeviceError> {
        let buf = Rc::new(Buffer::new(&self.alloc, rows * cols * dtype.size(), kind)?);
        Ok(Rc::new(Storage { buf, offset: 0, rows, cols, dtype }))
    }

    fn next_seq(&self) -> u64 {
        let s = self.seq.get() + 1;
        self.seq.set(s);
        s
    }

    fn node(&self, op: Op, next: Vec<Option<Rc<Node>>>) -> Rc<Node> {
        Rc::new(Node { seq: self.next_seq(), op: RefCell::new(op), released: Cell::new(false), next })
    }

    pub fn grad_enabled(&self) -> bool {
        self.grad_enabled.get()
    }

    /// Runs `f` as under `torch.no_grad()`.
    pub fn no_grad<R>(&self, f: impl FnOnce() -> R) -> R {
        let prev = self.grad_enabled.replace(false);
        let r = f();
        self.grad_enabled.set(prev);
        r
    }

    pub fn stats(&self) -> MemStats {
        self.alloc.borrow().stats()
    }
    pub fn reset_peak(&self) {
        self.alloc.borrow_mut().reset_peak()
    }
    /// `torch.cuda.empty_cache()`.
    pub fn empty_cache(&self) -> Result<(), DeviceError> {
        self.alloc.borrow_mut().empty_cache()
    }
    pub fn synchronize(&self) -> Result<(), DeviceError> {
        self.dev.synchronize()
    }

    /// `torch.randn(rows, cols)`.
    pub fn randn(&self, rows: usize, cols: usize, dtype: DType, seed: u64) -> Result<Tensor, DeviceError> {
        let s = self.empty(rows, cols, dtype, Kind::Output)?;
        self.dev.init_normal(dtype, s.addr(), s.numel(), seed)?;
        Ok(Tensor { data: s, grad_fn: None })
    }

    /// Class targets (int64, as `torch.randint`), drawn on the host from `seed`.
    pub fn targets(&self, rows: usize, classes: usize, seed: u64) -> Result<Rc<Storage>, DeviceError> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let host: Vec<i64> = (0..rows).map(|_| rng.random_range(0..classes as i64)).collect();
        let s = self.empty(rows, 1, DType::I64, Kind::Output)?;
        self.dev.upload(s.addr(), DType::I64, HostData::I64(&host))?;
        Ok(s)
    }

    /// A parameter uniform in ±1/sqrt(fan_in) (PyTorch's `nn.Linear` default range).
    pub fn param(&self, rows: usize, cols: usize, fan_in: usize, dtype: DType, seed: u64) -> Result<Rc<Param>, DeviceError> {
        let s = self.empty(rows, cols, dtype, Kind::Parameter)?;
        self.dev.init_uniform(dtype, s.addr(), s.numel(), seed, 1.0 / (fan_in as f32).sqrt())?;
        Ok(Rc::new(Param { data: s, grad: RefCell::new(None), requires_grad: Cell::new(true) }))
    }

    fn cast_storage(&self, x: &Storage, to: DType, scale: f32, kind: Kind) -> Result<Rc<Storage>, DeviceError> {
        let y = self.empty(x.rows, x.cols, to, kind)?;
        self.dev.cast(x.dtype, to, x.addr(), y.addr(), x.numel(), scale)?;
        Ok(y)
    }

    /// `x.to(dtype)`.
    pub fn cast(&self, x: &Tensor, to: DType) -> Result<Tensor, DeviceError> {
        let y = self.cast_storage(&x.data, to, 1.0, Kind::Output)?;
        let grad_fn = (self.grad_enabled() && x.requires_grad()).then(|| self.node(Op::Cast { from: x.dtype() }, vec![x.grad_fn.clone()]));
        Ok(Tensor { data: y, grad_fn })
    }

    /// `x * c` for a constant `c`.
    pub fn scale(&self, x: &Tensor, c: f32) -> Result<Tensor, DeviceError> {
        let y = self.cast_storage(&x.data, x.dtype(), c, Kind::Output)?;
        let grad_fn = (self.grad_enabled() && x.requires_grad()).then(|| self.node(Op::Scale { c }, vec![x.grad_fn.clone()]));
        Ok(Tensor { data: y, grad_fn })
    }

    /// `a + b` (same shape and dtype).
    pub fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor, DeviceError> {
        let y = self.empty(a.data.rows, a.data.cols, a.dtype(), Kind::Output)?;
        self.dev.add(a.dtype(), a.data.addr(), b.data.addr(), y.addr(), y.numel())?;
        let grad_fn = (self.grad_enabled() && (a.requires_grad() || b.requires_grad()))
            .then(|| self.node(Op::Add, vec![a.grad_fn.clone(), b.grad_fn.clone()]));
        Ok(Tensor { data: y, grad_fn })
    }

    /// `torch.zeros(())`.
    pub fn zeros_scalar(&self, dtype: DType) -> Result<Tensor, DeviceError> {
        let y = self.empty(1, 1, dtype, Kind::Output)?;
        self.dev.fill(dtype, y.addr(), 1, 0.0)?;
        Ok(Tensor { data: y, grad_fn: None })
    }

    /// `F.linear(x, w, b)`; under `autocast` the input, weight and bias are cast to fp16 first.
    pub fn linear(&self, x: &Tensor, w: &Rc<Param>, b: &Rc<Param>, autocast: bool) -> Result<Tensor, DeviceError> {
        let (xin, wuse, buse) = if autocast {
            let xin = if x.dtype() == DType::Fp16 { x.clone() } else { self.cast(x, DType::Fp16)? };
            let w16 = self.cast_storage(&w.data, DType::Fp16, 1.0, Kind::Output)?;
            let b16 = self.cast_storage(&b.data, DType::Fp16, 1.0, Kind::Output)?;
            (xin, w16, b16)
        } else {
            (x.clone(), w.data.clone(), b.data.clone())
        };
        let dt = xin.dtype();
        let (rows, inf, outf) = (xin.data.rows, xin.data.cols, wuse.rows);
        if wuse.cols != inf {
            return Err(DeviceError::Usage(format!("linear: input has {inf} features, weight expects {}", wuse.cols)));
        }
        let y = self.empty(rows, outf, dt, Kind::Output)?;
        self.dev.gemm(dt, Gemm { trans_a: true, trans_b: false, m: outf, n: rows, k: inf, a: wuse.addr(), lda: inf, b: xin.data.addr(), ldb: inf, c: y.addr(), ldc: outf })?;
        self.dev.bias_add(dt, y.addr(), buse.addr(), rows, outf)?;
        let (wg, bg, xg) = (w.requires_grad.get(), b.requires_grad.get(), xin.requires_grad());
        let grad_fn = (self.grad_enabled() && (wg || bg || xg)).then(|| {
            let op = Op::Linear {
                input: wg.then(|| SavedTensor::new(&xin.data)),
                weight: xg.then(|| SavedTensor::new(&wuse)),
                w: w.clone(),
                b: b.clone(),
                autocast,
                input_needs_grad: xg,
            };
            self.node(op, vec![xin.grad_fn.clone()])
        });
        Ok(Tensor { data: y, grad_fn })
    }

    /// `F.linear(x, w, b)` with a weight and bias that are tensors (a DataParallel replica's, whose
    /// gradients go to the nodes their history names instead of a `.grad`).
    pub fn linear_t(&self, x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor, DeviceError> {
        let dt = x.dtype();
        let (rows, inf, outf) = (x.data.rows, x.data.cols, w.data.rows);
        if w.data.cols != inf || w.dtype() != dt {
            return Err(DeviceError::Usage(format!("linear: input has {inf} features, weight expects {}", w.data.cols)));
        }
        let y = self.empty(rows, outf, dt, Kind::Output)?;
        self.dev.gemm(dt, Gemm { trans_a: true, trans_b: false, m: outf, n: rows, k: inf, a: w.data.addr(), lda: inf, b: x.data.addr(), ldb: inf, c: y.addr(), ldc: outf })?;
        self.dev.bias_add(dt, y.addr(), b.data.addr(), rows, outf)?;
        let (xg, wg, bg) = (x.requires_grad(), w.requires_grad(), b.requires_grad());
        let grad_fn = (self.grad_enabled() && (wg || bg || xg)).then(|| {
            let op = Op::LinearT {
                input: wg.then(|| SavedTensor::new(&x.data)),
                weight: xg.then(|| SavedTensor::new(&w.data)),
                in_features: inf,
                needs: [xg, wg, bg],
            };
            self.node(op, vec![x.grad_fn.clone(), w.grad_fn.clone(), b.grad_fn.clone()])
        });
        Ok(Tensor { data: y, grad_fn })
    }

    /// A copy of a storage into a new buffer of this runtime (`tensor.clone()`).
    pub fn clone_storage(&self, x: &Storage, kind: Kind) -> Result<Rc<Storage>, DeviceError> {
        let y = self.empty(x.rows, x.cols, x.dtype, kind)?;
        self.dev.copy(y.addr(), x.addr(), x.bytes())?;
        Ok(y)
    }

    /// `F.relu(x)` (not in place).
    pub fn relu(&self, x: &Tensor) -> Result<Tensor, DeviceError> {
        let y = self.empty(x.data.rows, x.data.cols, x.dtype(), Kind::Output)?;
        self.dev.relu_fwd(x.dtype(), x.data.addr(), y.addr(), y.numel())?;
        let grad_fn = (self.grad_enabled() && x.requires_grad())
            .then(|| self.node(Op::Relu { output: Some(SavedTensor::new(&y)) }, vec![x.grad_fn.clone()]));
        Ok(Tensor { data: y, grad_fn })
    }

    /// `F.cross_entropy(logits, targets)` with mean reduction.
    pub fn cross_entropy(&self, logits: &Tensor, targets: &Rc<Storage>) -> Result<Tensor, DeviceError> {
        let (rows, classes, dt) = (logits.data.rows, logits.data.cols, logits.dtype());
        let logsm = self.empty(rows, classes, dt, Kind::Output)?;
        let loss = self.empty(1, 1, dt, Kind::Output)?;
        let tw = self.empty(1, 1, dt, Kind::Output)?;
        self.dev.ce_fwd(dt, logits.data.addr(), targets.addr(), logsm.addr(), loss.addr(), tw.addr(), rows, classes)?;
        let grad_fn = (self.grad_enabled() && logits.requires_grad()).then(|| {
            let op = Op::CrossEntropy {
                logsm: Some(SavedTensor::new(&logsm)),
                total_weight: Some(SavedTensor::new(&tw)),
                targets: Some(targets.clone()),
            };
            self.node(op, vec![logits.grad_fn.clone()])
        });
        Ok(Tensor { data: loss, grad_fn })
    }

    /// `F.mse_loss(a, b)` with mean reduction. Like ATen, the elementwise squared differences are
    /// made first (a temporary of the inputs' size), then reduced; both inputs are saved.
    pub fn mse_loss(&self, a: &Tensor, b: &Tensor) -> Result<Tensor, DeviceError> {
        if (a.data.rows, a.data.cols) != (b.data.rows, b.data.cols) || a.dtype() != b.dtype() {
            return Err(DeviceError::Usage("mse_loss: the inputs differ in shape or dtype".into()));
        }
        let dt = a.dtype();
        let n = a.data.numel();
        let sq = self.empty(a.data.rows, a.data.cols, dt, Kind::Output)?;
        self.dev.sq_diff(dt, a.data.addr(), b.data.addr(), sq.addr(), n)?;
        let loss = self.empty(1, 1, dt, Kind::Output)?;
        self.dev.mean_all(dt, sq.addr(), n, loss.addr())?;
        drop(sq);
        let (an, bn) = (a.requires_grad(), b.requires_grad());
        let grad_fn = (self.grad_enabled() && (an || bn)).then(|| {
            let op = Op::Mse { a: Some(SavedTensor::new(&a.data)), b: Some(SavedTensor::new(&b.data)), a_needs_grad: an, b_needs_grad: bn };
            self.node(op, vec![a.grad_fn.clone(), b.grad_fn.clone()])
        });
        Ok(Tensor { data: loss, grad_fn })
    }

    /// `0 + t` (Python's `total = 0; total += t` on its first iteration): a new tensor.
    pub fn add_to_zero(&self, t: &Tensor) -> Result<Tensor, DeviceError> {
        let y = self.cast_storage(&t.data, t.dtype(), 1.0, Kind::Output)?;
        let grad_fn = (self.grad_enabled() && t.requires_grad()).then(|| self.node(Op::Scale { c: 1.0 }, vec![t.grad_fn.clone()]));
        Ok(Tensor { data: y, grad_fn })
    }

    /// `a += b` on a tensor (`Tensor.add_`): no new storage; `a`'s history now goes through an add.
    pub fn add_inplace(&self, a: &mut Tensor, b: &Tensor) -> Result<(), DeviceError> {
        self.dev.add(a.dtype(), a.data.addr(), b.data.addr(), a.data.addr(), a.data.numel())?;
        if self.grad_enabled() && (a.requires_grad() || b.requires_grad()) {
            a.grad_fn = Some(self.node(Op::Add, vec![a.grad_fn.clone(), b.grad_fn.clone()]));
        }
        Ok(())
    }

    /// `x.cuda()` of a host batch: a new device tensor.
    pub fn upload(&self, host: &[f32], rows: usize, cols: usize, dtype: DType) -> Result<Tensor, DeviceError> {
        let s = self.empty(rows, cols, dtype, Kind::Output)?;
        if !self.dev.estimated() {
            self.dev.upload(s.addr(), dtype, HostData::F32(host))?;
        }
        Ok(Tensor { data: s, grad_fn: None })
    }

    /// `y.cuda()` of host class targets.
    pub fn upload_targets(&self, host: &[i64]) -> Result<Rc<Storage>, DeviceError> {
        let s = self.empty(host.len(), 1, DType::I64, Kind::Output)?;
        if !self.dev.estimated() {
            self.dev.upload(s.addr(), DType::I64, HostData::I64(host))?;
        }
        Ok(s)
    }

    /// `out.argmax(1)` (int64, no graph).
    pub fn argmax_rows(&self, out: &Tensor) -> Result<Rc<Storage>, DeviceError> {
        let s = self.empty(out.data.rows, 1, DType::I64, Kind::Output)?;
        self.dev.argmax_rows(out.dtype(), out.data.addr(), s.addr(), out.data.rows, out.data.cols)?;
        Ok(s)
    }

    /// `a == b` for int64 tensors of one shape (bool).
    pub fn eq(&self, a: &Storage, b: &Storage) -> Result<Rc<Storage>, DeviceError> {
        if a.numel() != b.numel() || a.dtype != DType::I64 || b.dtype != DType::I64 {
            return Err(DeviceError::Usage("eq: int64 tensors of one shape expected".into()));
        }
        let s = self.empty(a.rows, a.cols, DType::Bool, Kind::Output)?;
        self.dev.eq_i64(a.addr(), b.addr(), s.addr(), a.numel())?;
        Ok(s)
    }

    /// `mask.sum()` of a bool tensor (an int64 scalar).
    pub fn sum_bool(&self, mask: &Storage) -> Result<Rc<Storage>, DeviceError> {
        let s = self.empty(1, 1, DType::I64, Kind::Output)?;
        // ATen sums a bool tensor in int64 (its result type): the input is converted first.
        let as_long = self.empty(mask.rows, mask.cols, DType::I64, Kind::Output)?;
        self.dev.sum_bool(mask.addr(), mask.numel(), s.addr())?;
        drop(as_long);
        Ok(s)
    }

    /// `tensor.item()`: waits for the device and reads the first element.
    pub fn item(&self, t: &Tensor) -> Result<f32, DeviceError> {
        Ok(self.dev.download(t.data.addr(), t.dtype(), 1)?.first().copied().unwrap_or(0.0))
    }

    /// `tensor.cpu()` as f32 values.
    pub fn to_host(&self, s: &Storage) -> Result<Vec<f32>, DeviceError> {
        self.dev.download(s.addr(), s.dtype, s.numel())
    }

    /// Accumulates a freshly computed gradient into `p.grad` (PyTorch's `AccumulateGrad`).
    fn accumulate(&self, p: &Param, g: Rc<Storage>, hook: &mut Option<GradHook<'_>>) -> Result<(), DeviceError> {
        if !p.requires_grad.get() {
            return Ok(());
        }
        {
            let mut slot = p.grad.borrow_mut();
            match slot.as_ref() {
                None => {
                    g.buf.set_kind(Kind::Gradient);
                    *slot = Some(g);
                }
                Some(existing) => {
                    self.dev.axpy(existing.dtype, existing.addr(), g.addr(), 1.0, g.numel())?;
                }
            }
        }
        match hook {
            Some(h) => h(p),
            None => Ok(()),
        }
    }

    /// `root.backward(retain_graph=retain)` for a scalar `root`.
    ///
    /// A parameter used by several nodes of the graph (a frozen network applied twice) gets one
    /// gradient only when all of them ran: as PyTorch's engine does for its `AccumulateGrad` node,
    /// the gradients are summed in a buffer (in place into the first) until the last arrives.
    pub fn backward(&self, root: &Tensor, retain: bool) -> Result<(), DeviceError> {
        let Some(root_fn) = root.grad_fn.clone() else {
            return Err(DeviceError::Usage("element 0 of tensors does not require grad and does not have a grad_fn".into()));
        };
        // The gradient of the root, as `torch.ones_like(loss)`.
        let g0 = self.empty(1, 1, root.dtype(), Kind::Output)?;
        self.dev.fill(root.dtype(), g0.addr(), 1, 1.0)?;
        self.backward_from(root_fn, g0, retain)
    }

    /// `torch.autograd.backward(output, grad)`: runs the graph below `root_fn` from the given
    /// gradient of its output (the multi-device scenario hands each device the gradient that the
    /// loss on device 0 scattered back to it).
    pub fn backward_from(&self, root_fn: Rc<Node>, g0: Rc<Storage>, retain: bool) -> Result<(), DeviceError> {
        self.backward_impl(root_fn, g0, retain, None)
    }

    /// `root.backward()` with `hook` called after each parameter's gradient was accumulated.
    pub fn backward_with_hook(&self, root: &Tensor, hook: GradHook<'_>) -> Result<(), DeviceError> {
        let Some(root_fn) = root.grad_fn.clone() else {
            return Err(DeviceError::Usage("element 0 of tensors does not require grad and does not have a grad_fn".into()));
        };
        let g0 = self.empty(1, 1, root.dtype(), Kind::Output)?;
        self.dev.fill(root.dtype(), g0.addr(), 1, 1.0)?;
        self.backward_impl(root_fn, g0, false, Some(hook))
    }

    fn backward_impl(&self, root_fn: Rc<Node>, g0: Rc<Storage>, retain: bool, mut hook: Option<GradHook<'_>>) -> Result<(), DeviceError> {

        type Key = *const Node;
        let mut deps: HashMap<Key, usize> = HashMap::new();
        let mut nodes: HashMap<Key, Rc<Node>> = HashMap::new();
        let mut param_deps: HashMap<*const Param, usize> = HashMap::new();
        let mut stack = vec![root_fn.clone()];
        nodes.insert(Rc::as_ptr(&root_fn), root_fn.clone());
        while let Some(n) = stack.pop() {
            for p in n.params() {
                *param_deps.entry(Rc::as_ptr(&p)).or_insert(0) += 1;
            }
            for next in n.next.iter().flatten() {
                let k = Rc::as_ptr(next);
                *deps.entry(k).or_insert(0) += 1;
                if let std::collections::hash_map::Entry::Vacant(e) = nodes.entry(k) {
                    e.insert(next.clone());
                    stack.push(next.clone());
                }
            }
        }
        let mut pending: HashMap<*const Param, Rc<Storage>> = HashMap::new();
        let mut grads: HashMap<Key, Rc<Storage>> = HashMap::new();
        let mut ready: BinaryHeap<(u64, usize)> = BinaryHeap::new();
        grads.insert(Rc::as_ptr(&root_fn), g0);
        ready.push((root_fn.seq, Rc::as_ptr(&root_fn) as usize));
        while let Some((_, key)) = ready.pop() {
            let key = key as Key;
            let Some(node) = nodes.get(&key).cloned() else { continue };
            let Some(g) = grads.remove(&key) else { continue };
            let (outs, param_grads) = self.apply(&node, g, retain)?;
            for (p, grad, view) in param_grads {
                let k = Rc::as_ptr(&p);
                let grad = match pending.remove(&k) {
                    None => grad,
                    // The engine adds in place into the buffered gradient when it holds the only
                    // reference to its storage; a weight's gradient is a view (`grad.t()` of
                    // TBackward), whose base shares the storage, so it is summed out of place.
                    Some(buf) if view => {
                        let sum = self.empty(buf.rows, buf.cols, buf.dtype, Kind::Output)?;
                        self.dev.add(buf.dtype, buf.addr(), grad.addr(), sum.addr(), sum.numel())?;
                        sum
                    }
                    Some(buf) => {
                        self.dev.axpy(buf.dtype, buf.addr(), grad.addr(), 1.0, grad.numel())?;
                        buf
                    }
                };
                let d = param_deps.entry(k).or_insert(1);
                *d = d.saturating_sub(1);
                if *d == 0 {
                    self.accumulate(&p, grad, &mut hook)?;
                } else {
                    pending.insert(k, grad);
                }
            }
            for (next, out) in node.next.iter().zip(outs) {
                let Some(next) = next else { continue };
                let k = Rc::as_ptr(next);
                if let Some(out) = out {
                    let merged = match grads.remove(&k) {
                        None => out,
                        Some(prev) => {
                            let sum = self.empty(prev.rows, prev.cols, prev.dtype, Kind::Output)?;
                            self.dev.add(prev.dtype, prev.addr(), out.addr(), sum.addr(), sum.numel())?;
                            sum
                        }
                    };
                    grads.insert(k, merged);
                }
                let d = deps.entry(k).or_insert(1);
                *d -= 1;
                if *d == 0 && grads.contains_key(&k) {
                    ready.push((next.seq, k as usize));
                }
            }
        }
        // Gradients of parameters whose other uses were not reached (cannot happen for a graph
        // built by this runtime, but never lose one).
        for (k, grad) in pending.drain() {
            if let Some(p) = nodes.values().flat_map(|n| n.params()).find(|p| Rc::as_ptr(p) == k) {
                self.accumulate(&p, grad, &mut hook)?;
            }
        }
        Ok(())
    }

    /// Runs one node: computes the gradients of its inputs, frees its incoming gradient, releases
    /// its saved tensors (unless `retain`) and accumulates parameter gradients, in PyTorch's order.
    #[allow(clippy::type_complexity)]
    fn apply(&self, node: &Node, g: Rc<Storage>, retain: bool) -> Result<(Vec<Option<Rc<Storage>>>, Vec<(Rc<Param>, Rc<Storage>, bool)>), DeviceError> {
        if node.released.get() {
            return Err(freed_graph());
        }
        let mut op = node.op.borrow_mut();
        // (parameter, gradient, autocast, the gradient is a view: a weight's, through TBackward)
        let mut param_grads: Vec<(Rc<Param>, Rc<Storage>, bool, bool)> = Vec::new();
        let outs = match &mut *op {
            Op::Linear { input, weight, w, b, autocast, input_needs_grad } => {
                let dt = g.dtype;
                let (rows, outf) = (g.rows, g.cols);
                let inf = w.data.cols;
                let dx = if *input_needs_grad {
                    let wt = weight.as_ref().ok_or_else(freed_graph)?;
                    let dx = self.empty(rows, inf, dt, Kind::Output)?;
                    self.dev.gemm(dt, Gemm { trans_a: false, trans_b: false, m: inf, n: rows, k: outf, a: wt.0.addr(), lda: inf, b: g.addr(), ldb: outf, c: dx.addr(), ldc: inf })?;
                    Some(dx)
                } else {
                    None
                };
                if w.requires_grad.get() {
                    let x = input.as_ref().ok_or_else(freed_graph)?;
                    let dw = self.empty(outf, inf, dt, Kind::Output)?;
                    self.dev.gemm(dt, Gemm { trans_a: false, trans_b: true, m: inf, n: outf, k: rows, a: x.0.addr(), lda: inf, b: g.addr(), ldb: outf, c: dw.addr(), ldc: inf })?;
                    param_grads.push((w.clone(), dw, *autocast, true));
                }
                if b.requires_grad.get() {
                    // The bias gradient is `grad.sum(0)`, made by the engine after the node's other
                    // outputs; ATen's reduction may stage partial sums in global memory.
                    let db = self.empty(1, outf, dt, Kind::Output)?;
                    let (staging, semaphores) = sum0_staging(rows, outf, dt, self.dev.sm_info());
                    let staging = (staging > 0).then(|| Buffer::new(&self.alloc, staging, Kind::Workspace)).transpose()?;
                    let semaphores = (semaphores > 0).then(|| Buffer::new(&self.alloc, semaphores, Kind::Workspace)).transpose()?;
                    self.dev.col_sum(dt, g.addr(), db.addr(), rows, outf)?;
                    drop((semaphores, staging));
                    param_grads.push((b.clone(), db, *autocast, false));
                }
                if !retain {
                    *input = None;
                    *weight = None;
                }
                vec![dx]
            }
            Op::LinearT { input, weight, in_features, needs } => {
                let dt = g.dtype;
                let (rows, outf, inf) = (g.rows, g.cols, *in_features);
                let [xg, wg, bg] = *needs;
                let dx = if xg {
                    let wt = weight.as_ref().ok_or_else(freed_graph)?;
                    let dx = self.empty(rows, inf, dt, Kind::Output)?;
                    self.dev.gemm(dt, Gemm { trans_a: false, trans_b: false, m: inf, n: rows, k: outf, a: wt.0.addr(), lda: inf, b: g.addr(), ldb: outf, c: dx.addr(), ldc: inf })?;
                    Some(dx)
                } else {
                    None
                };
                let dw = if wg {
                    let x = input.as_ref().ok_or_else(freed_graph)?;
                    let dw = self.empty(outf, inf, dt, Kind::Output)?;
                    self.dev.gemm(dt, Gemm { trans_a: false, trans_b: true, m: inf, n: outf, k: rows, a: x.0.addr(), lda: inf, b: g.addr(), ldb: outf, c: dw.addr(), ldc: inf })?;
                    Some(dw)
                } else {
                    None
                };
                let db = if bg {
                    let db = self.empty(1, outf, dt, Kind::Output)?;
                    let (staging, semaphores) = sum0_staging(rows, outf, dt, self.dev.sm_info());
                    let staging = (staging > 0).then(|| Buffer::new(&self.alloc, staging, Kind::Workspace)).transpose()?;
                    let semaphores = (semaphores > 0).then(|| Buffer::new(&self.alloc, semaphores, Kind::Workspace)).transpose()?;
                    self.dev.col_sum(dt, g.addr(), db.addr(), rows, outf)?;
                    drop((semaphores, staging));
                    Some(db)
                } else {
                    None
                };
                if !retain {
                    *input = None;
                    *weight = None;
                }
                vec![dx, dw, db]
            }
            Op::Sink { slot } => {
                let mut s = slot.borrow_mut();
                match s.as_ref() {
                    None => *s = Some(g.clone()),
                    Some(prev) => self.dev.axpy(prev.dtype, prev.addr(), g.addr(), 1.0, g.numel())?,
                }
                Vec::new()
            }
            Op::Relu { output } => {
                let y = output.as_ref().ok_or_else(freed_graph)?;
                let gx = self.empty(g.rows, g.cols, g.dtype, Kind::Output)?;
                self.dev.relu_bwd(g.dtype, g.addr(), y.0.addr(), gx.addr(), gx.numel())?;
                if !retain {
                    *output = None;
                }
                vec![Some(gx)]
            }
            Op::CrossEntropy { logsm, total_weight, targets } => {
                let ls = logsm.as_ref().ok_or_else(freed_graph)?;
                let tg = targets.as_ref().ok_or_else(freed_graph)?;
                let d = self.empty(ls.0.rows, ls.0.cols, ls.0.dtype, Kind::Output)?;
                // The incoming gradient is the loss's (a scalar of the loss's dtype).
                self.dev.ce_bwd(ls.0.dtype, ls.0.addr(), tg.addr(), g.addr(), d.addr(), ls.0.rows, ls.0.cols)?;
                if !retain {
                    // The targets are a saved variable of NllLossBackward too.
                    *logsm = None;
                    *total_weight = None;
                    *targets = None;
                }
                vec![Some(d)]
            }
            Op::Mse { a, b, a_needs_grad, b_needs_grad } => {
                let sa = a.as_ref().ok_or_else(freed_graph)?;
                let sb = b.as_ref().ok_or_else(freed_graph)?;
                let (dt, n) = (sa.0.dtype, sa.0.numel());
                let norm = 2.0 / n as f32;
                // mse_loss_backward(grad, self, target) for self; (grad, target, self) for target.
                let ga = if *a_needs_grad {
                    let ga = self.empty(sa.0.rows, sa.0.cols, dt, Kind::Output)?;
                    self.dev.mse_bwd(dt, sa.0.addr(), sb.0.addr(), g.addr(), ga.addr(), n, norm)?;
                    Some(ga)
                } else {
                    None
                };
                let gb = if *b_needs_grad {
                    let gb = self.empty(sb.0.rows, sb.0.cols, dt, Kind::Output)?;
                    self.dev.mse_bwd(dt, sb.0.addr(), sa.0.addr(), g.addr(), gb.addr(), n, norm)?;
                    Some(gb)
                } else {
                    None
                };
                if !retain {
                    *a = None;
                    *b = None;
                }
                vec![ga, gb]
            }
            Op::Cast { from } => vec![Some(self.cast_storage(&g, *from, 1.0, Kind::Output)?)],
            Op::Scale { c } => vec![Some(self.cast_storage(&g, g.dtype, *c, Kind::Output)?)],
            Op::Add => vec![Some(g.clone()), Some(g.clone())],
        };
        drop(op);
        // The incoming gradient is released when the node returns.
        drop(g);
        if !retain && !matches!(&*node.op.borrow(), Op::Add | Op::Cast { .. } | Op::Scale { .. } | Op::Sink { .. }) {
            node.released.set(true);
        }
        let mut ready = Vec::with_capacity(param_grads.len());
        for (p, grad, autocast, is_view) in param_grads {
            // Under autocast the fp16 gradient goes through the cast's backward to fp32 first
            // (a new tensor); otherwise a weight's gradient reaches AccumulateGrad as a view.
            let cast = autocast && grad.dtype != p.data.dtype;
            let grad = if cast { self.cast_storage(&grad, p.data.dtype, 1.0, Kind::Output)? } else { grad };
            ready.push((p, grad, is_view && !cast));
        }
        Ok((outs, ready))
    }

    /// `optimizer.step()` for plain SGD (no momentum, so no optimizer state): `p -= lr * p.grad`.
    pub fn sgd_step(&self, params: &[Rc<Param>], lr: f32) -> Result<(), DeviceError> {
        for p in params {
            if let Some(g) = p.grad.borrow().as_ref() {
                self.dev.axpy(p.data.dtype, p.data.addr(), g.addr(), -lr, p.data.numel())?;
            }
        }
        Ok(())
    }

    /// `optimizer.zero_grad(set_to_none=...)`.
    pub fn zero_grad(&self, params: &[Rc<Param>], set_to_none: bool) -> Result<(), DeviceError> {
        for p in params {
            if set_to_none {
                p.grad.replace(None);
            } else if let Some(g) = p.grad.borrow().as_ref() {
                self.dev.fill(g.dtype, g.addr(), g.numel(), 0.0)?;
            }
        }
        Ok(())
    }
}

/// `torch.optim.SGD(params, lr, momentum=m)` as its default (foreach) implementation runs on CUDA:
/// with momentum, each parameter's buffer is `grad.clone()` at the first step, then
/// `buf = momentum * buf + grad`; `p -= lr * buf`. No temporaries; the buffers are optimizer state
/// that lives on the parameters' device for good.
pub struct Sgd {
    pub lr: f32,
    pub momentum: f32,
    buffers: RefCell<Vec<Option<Rc<Storage>>>>,
}

impl Sgd {
    pub fn new(lr: f32, momentum: f32) -> Sgd {
        Sgd { lr, momentum, buffers: RefCell::new(Vec::new()) }
    }

    /// `optimizer.step()` over `params` (the same list, in the same order, at every step).
    pub fn step(&self, rt: &Runtime, params: &[Rc<Param>]) -> Result<(), DeviceError> {
        if self.momentum == 0.0 {
            return rt.sgd_step(params, self.lr);
        }
        let mut bufs = self.buffers.borrow_mut();
        bufs.resize_with(params.len(), || None);
        for (p, slot) in params.iter().zip(bufs.iter_mut()) {
            let grad = p.grad.borrow();
            let Some(g) = grad.as_ref() else { continue };
            let dt = p.data.dtype;
            match slot {
                None => *slot = Some(rt.clone_storage(g, Kind::OptimizerState)?),
                Some(b) => {
                    rt.dev.cast(dt, dt, b.addr(), b.addr(), b.numel(), self.momentum)?;
                    rt.dev.axpy(dt, b.addr(), g.addr(), 1.0, g.numel())?;
                }
            }
            let b = slot.as_ref().expect("set above");
            rt.dev.axpy(dt, p.data.addr(), b.addr(), -self.lr, p.data.numel())?;
        }
        Ok(())
    }
}

/// Bytes of global memory (staging buffer, semaphores) that ATen's reduction kernel allocates for
/// `x.sum(0)` of a contiguous `rows × cols` tensor, following `setReduceConfig` in
/// ATen/native/cuda/Reduce.cuh: the output is vectorized by up to 4 columns, a block is
/// `block_width × block_height` threads, and when each thread would still sum at least 256 values
/// and the grid is small, the rows are split over `ctas_per_output` blocks whose partial sums (of
/// the f32 accumulator) go through global memory.
pub fn sum0_staging(rows: usize, cols: usize, _dtype: DType, (sms, threads_per_sm): (usize, usize)) -> (usize, usize) {
    const ACC_BYTES: usize = 4;
    const MAX_REDUCE_THREADS: usize = 512;
    const WARP: usize = 32;
    if rows == 0 || cols == 0 {
        return (0, 0);
    }
    let mut vec = 4;
    while cols % vec != 0 {
        vec /= 2;
    }
    let last_pow2 = |n: usize| if n == 0 { 1 } else { 1usize << (usize::BITS - 1 - n.leading_zeros()) };
    let (dim0, dim1) = (cols / vec, rows);
    let max_threads = MAX_REDUCE_THREADS / vec;
    let dim0_pow2 = if dim0 < max_threads { last_pow2(dim0) } else { max_threads };
    let dim1_pow2 = if dim1 < max_threads { last_pow2(dim1) } else { max_threads };
    let block_width = dim0_pow2.min(WARP);
    let block_height = dim1_pow2.min(max_threads / block_width);
    let block_width = dim0_pow2.min(max_threads / block_height);
    let num_threads = block_width * block_height;
    // The output is split over the block's width; the rows over its height when each thread would
    // otherwise sum many values, else the outputs over its height too.
    let mut step_output = block_width;
    let mut values_per_thread = dim1;
    let split_rows = values_per_thread >= block_height * 16 || values_per_thread >= 256;
    if split_rows {
        values_per_thread = dim1.div_ceil(block_height);
    } else {
        step_output *= block_height;
    }
    let grid_x = dim0.div_ceil(step_output);
    let target_grid = sms * (threads_per_sm / num_threads.max(1)).max(1);
    if !(split_rows && values_per_thread >= 256 && grid_x <= target_grid) {
        return (0, 0);
    }
    let ctas = target_grid.div_ceil(grid_x).min(values_per_thread.div_ceil(16)).max(values_per_thread.div_ceil(256));
    if ctas <= 1 {
        return (0, 0);
    }
    (ACC_BYTES * cols * ctas * block_width * vec, 4 * grid_x)
}

/// One layer of a [`Sequential`].
pub enum Layer {
    Linear { w: Rc<Param>, b: Rc<Param> },
    Relu,
}

/// `nn.Sequential` of linear layers and ReLUs.
pub struct Sequential {
    pub layers: Vec<Layer>,
}

impl Sequential {
    /// `layers` × (Linear(width→width), ReLU), then Linear(width→classes) when `classes` is given.
    pub fn mlp(rt: &Runtime, width: usize, layers: usize, classes: Option<usize>, dtype: DType, seed: u64) -> Result<Sequential, DeviceError> {
        let mut v = Vec::new();
        let mut s = seed;
        let mut linear = |rt: &Runtime, inf: usize, outf: usize| -> Result<Layer, DeviceError> {
            s += 2;
            Ok(Layer::Linear { w: rt.param(outf, inf, inf, dtype, s)?, b: rt.param(1, outf, inf, dtype, s + 1)? })
        };
        for _ in 0..layers {
            v.push(linear(rt, width, width)?);
            v.push(Layer::Relu);
        }
        if let Some(c) = classes {
            v.push(linear(rt, width, c)?);
        }
        Ok(Sequential { layers: v })
    }

    pub fn params(&self) -> Vec<Rc<Param>> {
        self.layers
            .iter()
            .flat_map(|l| match l {
                Layer::Linear { w, b } => vec![w.clone(), b.clone()],
                Layer::Relu => vec![],
            })
            .collect()
    }

    pub fn param_bytes(&self) -> usize {
        self.params().iter().map(|p| p.data.buf.block_bytes).sum()
    }

    /// `model.half()` / `.float()`: each parameter is replaced by a converted copy, one at a time (the
    /// old storage is freed as soon as its copy exists, as `Module._apply` does).
    pub fn to_dtype(&mut self, rt: &Runtime, dtype: DType) -> Result<(), DeviceError> {
        for l in &mut self.layers {
            if let Layer::Linear { w, b } = l {
                for p in [w, b] {
                    if p.data.dtype != dtype {
                        let data = rt.cast_storage(&p.data, dtype, 1.0, Kind::Parameter)?;
                        *p = Rc::new(Param { data, grad: RefCell::new(None), requires_grad: Cell::new(p.requires_grad.get()) });
                    }
                }
            }
        }
        Ok(())
    }

    /// Marks every parameter as frozen or trainable (`requires_grad_`).
    pub fn set_requires_grad(&self, on: bool) {
        for p in self.params() {
            p.requires_grad.set(on);
        }
    }

    pub fn forward(&self, rt: &Runtime, x: &Tensor, autocast: bool) -> Result<Tensor, DeviceError> {
        let mut h = x.clone();
        for l in &self.layers {
            h = match l {
                Layer::Linear { w, b } => rt.linear(&h, w, b, autocast)?,
                Layer::Relu => rt.relu(&h)?,
            };
        }
        Ok(h)
    }
}
