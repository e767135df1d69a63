//! Backends: where device memory comes from and where the reference loops' arithmetic runs.
//!
//! * [`cuda::CudaBackend`]: real device buffers (`cuMemAlloc`), cuBLAS GEMMs and NVRTC kernels.
//! * [`sim::SimBackend`]: a host model of a device that only accounts allocations. Its compute calls do
//!   nothing, so every figure it yields is an estimate of what the same loop would allocate.
//!
//! All operations work on raw device addresses handed out by the caching allocator
//! ([`crate::alloc`]); shapes are row-major.

pub mod cuda;
pub mod nccl;
pub mod sim;

use serde::Serialize;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    Fp32,
    Fp16,
    /// Class targets, as PyTorch's `int64`.
    #[value(skip)]
    I64,
    /// Comparison results, as PyTorch's `bool` (one byte).
    #[value(skip)]
    Bool,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::Fp32 => 4,
            DType::Fp16 => 2,
            DType::I64 => 8,
            DType::Bool => 1,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            DType::Fp32 => "fp32",
            DType::Fp16 => "fp16",
            DType::I64 => "int64",
            DType::Bool => "bool",
        }
    }
}

/// Errors of a backend. Out of memory is its own variant so that a scenario can report it and the
/// run can go on with the next one.
#[derive(Debug, thiserror::Error, Clone)]
pub enum DeviceError {
    #[error("out of memory: tried to allocate {} with {} allocated and {} reserved", crate::report::fmt_bytes(*requested as f64), crate::report::fmt_bytes(*allocated as f64), crate::report::fmt_bytes(*reserved as f64))]
    OutOfMemory { requested: usize, allocated: usize, reserved: usize },
    #[error("{0}")]
    Driver(String),
    #[error("{0}")]
    Unsupported(String),
    /// Misuse of the autograd graph, e.g. a second backward through a freed graph.
    #[error("{0}")]
    Usage(String),
}

/// Host-side data for uploads.
pub enum HostData<'a> {
    F32(&'a [f32]),
    I64(&'a [i64]),
}

/// One GEMM, column-major as cuBLAS sees it: `C(m×n) = op(A) · op(B)`, alpha 1, beta 0.
#[derive(Clone, Copy, Debug)]
pub struct Gemm {
    pub trans_a: bool,
    pub trans_b: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: u64,
    pub lda: usize,
    pub b: u64,
    pub ldb: usize,
    pub c: u64,
    pub ldc: usize,
}

/// Bytes in page-locked host memory that batches are copied from (a `DataLoader` with
/// `pin_memory=True` hands out such tensors). Made by [`Backend::pinned`].
pub trait HostBatch {
    fn bytes(&self) -> usize;
    fn as_any(&self) -> &dyn std::any::Any;
}

/// The device operations the reference loops need. Element counts are in elements, not bytes.
pub trait Backend {
    /// The concrete backend (the multi-device code reaches the CUDA contexts through it).
    fn as_any(&self) -> &dyn std::any::Any;
    /// `bytes` of page-locked host memory, written by `fill` (the simulator copies nothing and
    /// does not call it).
    fn pinned(&self, bytes: usize, fill: &dyn Fn(&mut [u8])) -> Result<Box<dyn HostBatch>, DeviceError>;
    /// `host[offset .. offset + bytes].cuda()`: copies into `dst` and waits for the copy, as a
    /// blocking `.cuda()` / `.to(device)` does (it waits for the device's earlier work too).
    fn upload_pinned(&self, dst: u64, host: &dyn HostBatch, offset: usize, bytes: usize) -> Result<(), DeviceError>;
    /// `"cuda"` or `"sim"`.
    fn name(&self) -> &'static str;
    /// Whether figures are estimates (no real device work happens).
    fn estimated(&self) -> bool;
    fn device_name(&self) -> String;
    /// (multiprocessors, most resident threads per multiprocessor): ATen's reduction kernels size
    /// their launch, and with it a global-memory staging buffer, from these.
    fn sm_info(&self) -> (usize, usize);
    /// (free, total) bytes of device memory as the driver reports them.
    fn mem_info(&self) -> Result<(usize, usize), DeviceError>;
    fn raw_alloc(&self, bytes: usize) -> Result<u64, DeviceError>;
    fn raw_free(&self, addr: u64) -> Result<(), DeviceError>;
    fn synchronize(&self) -> Result<(), DeviceError>;
    /// Tells the GEMM library to use this workspace (PyTorch hands cuBLAS one from its allocator too).
    fn set_gemm_workspace(&self, addr: u64, bytes: usize) -> Result<(), DeviceError>;

    /// Uploads host data, converting f32 to `dtype` (fp16 rounds to nearest).
    fn upload(&self, dst: u64, dtype: DType, data: HostData<'_>) -> Result<(), DeviceError>;
    /// Downloads `n` elements as f32 (synchronizes).
    fn download(&self, src: u64, dtype: DType, n: usize) -> Result<Vec<f32>, DeviceError>;
    fn copy(&self, dst: u64, src: u64, bytes: usize) -> Result<(), DeviceError>;
    fn fill(&self, dtype: DType, dst: u64, n: usize, value: f32) -> Result<(), DeviceError>;
    fn gemm(&self, dtype: DType, g: Gemm) -> Result<(), DeviceError>;
    /// `y[r, c] += bias[c]`.
    fn bias_add(&self, dtype: DType, y: u64, bias: u64, rows: usize, cols: usize) -> Result<(), DeviceError>;
    fn relu_fwd(&self, dtype: DType, x: u64, y: u64, n: usize) -> Result<(), DeviceError>;
    /// `gx = gy where y > 0 else 0`.
    fn relu_bwd(&self, dtype: DType, gy: u64, y: u64, gx: u64, n: usize) -> Result<(), DeviceError>;
    /// `out[c] = sum_r x[r, c]` (accumulated in f32).
    fn col_sum(&self, dtype: DType, x: u64, out: u64, rows: usize, cols: usize) -> Result<(), DeviceError>;
    /// Softmax cross-entropy with mean reduction: writes log-softmax, the loss and the total weight.
    #[allow(clippy::too_many_arguments)]
    fn ce_fwd(&self, dtype: DType, logits: u64, targets: u64, logsm: u64, loss: u64, total_weight: u64, rows: usize, classes: usize) -> Result<(), DeviceError>;
    /// `dlogits = (softmax - onehot) * grad_loss / rows`, `grad_loss` read from the device scalar.
    #[allow(clippy::too_many_arguments)]
    fn ce_bwd(&self, dtype: DType, logsm: u64, targets: u64, grad_loss: u64, dlogits: u64, rows: usize, classes: usize) -> Result<(), DeviceError>;
    /// `y += alpha * x` (SGD step with alpha = -lr; gradient accumulation with alpha = 1).
    fn axpy(&self, dtype: DType, y: u64, x: u64, alpha: f32, n: usize) -> Result<(), DeviceError>;
    /// `y = a + b`.
    fn add(&self, dtype: DType, a: u64, b: u64, y: u64, n: usize) -> Result<(), DeviceError>;
    /// `y = cast(x * scale)`; converts between fp32 and fp16.
    #[allow(clippy::too_many_arguments)]
    fn cast(&self, from: DType, to: DType, x: u64, y: u64, n: usize, scale: f32) -> Result<(), DeviceError>;
    /// GradScaler's unscale: `g *= inv_scale` in place (fp32) and sets `*found_inf = 1.0` on a non-finite value.
    fn unscale_check(&self, g: u64, n: usize, inv_scale: f32, found_inf: u64) -> Result<(), DeviceError>;
    /// Adds the number of elements equal to zero to the u64 counter at `counter`.
    fn count_zeros(&self, dtype: DType, x: u64, n: usize, counter: u64) -> Result<(), DeviceError>;
    /// Reads a u64 counter from the device (synchronizes).
    fn read_u64(&self, src: u64) -> Result<u64, DeviceError>;
    /// Fills with values uniform in [-bound, bound] from a counter-based hash of `seed` (PyTorch's
    /// default `nn.Linear` initialisation draws from such a range).
    fn init_uniform(&self, dtype: DType, dst: u64, n: usize, seed: u64, bound: f32) -> Result<(), DeviceError>;
    /// `out[r] = argmax_c x[r, c]` (int64; the first maximum).
    fn argmax_rows(&self, dtype: DType, x: u64, out: u64, rows: usize, cols: usize) -> Result<(), DeviceError>;
    /// `y = a == b` for int64 `a`, `b` into a bool tensor.
    fn eq_i64(&self, a: u64, b: u64, y: u64, n: usize) -> Result<(), DeviceError>;
    /// `out = x.sum()` of a bool tensor into an int64 scalar.
    fn sum_bool(&self, x: u64, n: usize, out: u64) -> Result<(), DeviceError>;
    /// `y = (a - b) ** 2` elementwise.
    fn sq_diff(&self, dtype: DType, a: u64, b: u64, y: u64, n: usize) -> Result<(), DeviceError>;
    /// `out = x.mean()` (a scalar of `dtype`).
    fn mean_all(&self, dtype: DType, x: u64, n: usize, out: u64) -> Result<(), DeviceError>;
    /// `y = norm * (a - b) * g` with `g` read from the device scalar (`mse_loss_backward`).
    #[allow(clippy::too_many_arguments)]
    fn mse_bwd(&self, dtype: DType, a: u64, b: u64, g: u64, y: u64, n: usize, norm: f32) -> Result<(), DeviceError>;
    /// Fills with standard normal values (as `torch.randn`).
    fn init_normal(&self, dtype: DType, dst: u64, n: usize, seed: u64) -> Result<(), DeviceError>;
}
