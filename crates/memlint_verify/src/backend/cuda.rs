//! The CUDA backend: device memory from `cuMemAlloc`, GEMMs through cuBLAS, the rest as NVRTC kernels.
//!
//! cudarc is built with `dynamic-loading`: the binary carries no CUDA dependency and looks for
//! libcuda, NVRTC and cuBLAS when [`CudaBackend::new`] runs. cudarc panics when a library it needs is
//! missing, so [`probe`] checks each one first and `memlint verify` reports a clear error instead.
//! Everything runs on the legacy default stream, as PyTorch's current stream is by default, so block
//! reuse by the caching allocator is ordered with the kernels that used the block.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::cublas::{result as cublas, sys as cublas_sys};
use cudarc::driver::{result as drv, sys as drv_sys, CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};

use super::{Backend, DType, DeviceError, Gemm, HostData};

const KERNELS: &str = include_str!("kernels.cu");

/// Checks that the CUDA driver, NVRTC and cuBLAS libraries can be loaded, without panicking.
/// Returns a message naming what is missing.
pub fn probe() -> Result<(), String> {
    // SAFETY: these only try to dlopen the library under its usual names.
    let driver = unsafe { drv_sys::is_culib_present() };
    if !driver {
        return Err("no CUDA driver found: libcuda could not be loaded. `memlint verify` measures on an NVIDIA GPU \
                    and needs its driver; `--backend sim` gives estimates without one"
            .to_string());
    }
    let nvrtc = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    if !nvrtc {
        return Err("the CUDA driver was found but NVRTC (libnvrtc) was not: it compiles memlint's kernels at run time; \
                    install the CUDA runtime compiler library or add its folder to LD_LIBRARY_PATH"
            .to_string());
    }
    let blas = unsafe { cublas_sys::is_culib_present() };
    if !blas {
        return Err("the CUDA driver was found but cuBLAS (libcublas) was not: it runs the reference loops' matrix \
                    products; install cuBLAS or add its folder to LD_LIBRARY_PATH"
            .to_string());
    }
    Ok(())
}

/// Number of CUDA devices, after a successful [`probe`].
pub fn device_count() -> Result<usize, String> {
    probe()?;
    list_devices()
}

/// The driver's device count, with a readable reason when it has none to give.
fn list_devices() -> Result<usize, String> {
    match CudaContext::device_count() {
        Ok(n) => Ok(n.max(0) as usize),
        Err(e) if e.0 == drv_sys::cudaError_enum::CUDA_ERROR_NO_DEVICE => {
            let visible = std::env::var("CUDA_VISIBLE_DEVICES")
                .map(|v| format!(" (CUDA_VISIBLE_DEVICES={v:?} hides the others)"))
                .unwrap_or_default();
            Err(format!("the CUDA driver sees no GPU{visible}"))
        }
        Err(e) => Err(format!("the CUDA driver could not list devices: {e}")),
    }
}

fn drv_err(what: &str) -> impl Fn(drv::DriverError) -> DeviceError + '_ {
    move |e| DeviceError::Driver(format!("{what}: {e}"))
}

fn blas_err(e: cublas::CublasError) -> DeviceError {
    DeviceError::Driver(format!("cuBLAS: {e}"))
}

/// The kernels compiled for one architecture, once per process (several devices of a run share them).
fn compiled(major: i32, minor: i32) -> Result<cudarc::nvrtc::Ptx, String> {
    static CACHE: std::sync::Mutex<Vec<((i32, i32), cudarc::nvrtc::Ptx)>> = std::sync::Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, p)) = cache.iter().find(|(k, _)| *k == (major, minor)) {
        return Ok(p.clone());
    }
    let arch: &'static str = Box::leak(format!("compute_{major}{minor}").into_boxed_str());
    let opts = cudarc::nvrtc::CompileOptions { arch: Some(arch), ..Default::default() };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(KERNELS, opts).map_err(|e| format!("NVRTC could not compile memlint's kernels: {e}"))?;
    cache.push(((major, minor), ptx.clone()));
    Ok(ptx)
}

/// Page-locked host memory of one context.
struct CudaHostBatch(cudarc::driver::PinnedHostSlice<u8>);

impl super::HostBatch for CudaHostBatch {
    fn bytes(&self) -> usize {
        self.0.len()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: cublas_sys::cublasHandle_t,
    functions: HashMap<String, CudaFunction>,
    name: String,
}

impl CudaBackend {
    /// Opens device `ordinal`, compiles the kernels and creates the cuBLAS handle.
    /// Call [`probe`] first: cudarc panics if a library is missing.
    pub fn new(ordinal: usize) -> Result<CudaBackend, String> {
        probe()?;
        let count = list_devices()?;
        if count == 0 {
            return Err("the CUDA driver reports no GPU".to_string());
        }
        if ordinal >= count {
            return Err(format!("--device {ordinal}: the driver reports {count} GPU(s), numbered from 0"));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| format!("could not open GPU {ordinal}: {e}"))?;
        let stream = ctx.default_stream();
        let name = ctx.name().unwrap_or_else(|_| format!("GPU {ordinal}"));
        let (major, minor) = ctx.compute_capability().map_err(|e| format!("could not read the compute capability: {e}"))?;
        // Compile for the device's own architecture so the driver need not JIT a generic target.
        let ptx = compiled(major, minor)?;
        let module = ctx.load_module(ptx).map_err(|e| format!("the driver could not load memlint's kernels: {e}"))?;
        let mut functions = HashMap::new();
        let mut names: Vec<String> = Vec::new();
        for s in ["f32", "f16"] {
            for k in ["fill", "relu_fwd", "relu_bwd", "bias_add", "axpy", "add", "col_sum", "count_zeros", "ce_fwd", "ce_bwd", "init_uniform", "init_normal", "argmax_rows", "sq_diff", "mean_all", "mse_bwd"] {
                names.push(format!("{k}_{s}"));
            }
        }
        names.extend(["cast_f32_f16", "cast_f16_f32", "cast_f32_f32", "cast_f16_f16", "unscale_check_f32", "eq_i64", "sum_bool"].map(String::from));
        for n in names {
            let f = module.load_function(&n).map_err(|e| format!("kernel {n} missing from the compiled module: {e}"))?;
            functions.insert(n, f);
        }
        ctx.bind_to_thread().map_err(|e| format!("could not use GPU {ordinal}: {e}"))?;
        let blas = cublas::create_handle().map_err(|e| format!("could not create a cuBLAS handle: {e}"))?;
        // SAFETY: the handle was just created; the stream belongs to the context that stays alive with self.
        unsafe { cublas::set_stream(blas, stream.cu_stream() as _) }.map_err(|e| format!("cuBLAS: {e}"))?;
        Ok(CudaBackend { ctx, stream, blas, functions, name })
    }

    fn func(&self, name: &str) -> Result<&CudaFunction, DeviceError> {
        self.functions.get(name).ok_or_else(|| DeviceError::Driver(format!("kernel {name} not loaded")))
    }

    fn sfx(dtype: DType) -> Result<&'static str, DeviceError> {
        match dtype {
            DType::Fp32 => Ok("f32"),
            DType::Fp16 => Ok("f16"),
            DType::I64 | DType::Bool => Err(DeviceError::Unsupported(format!("{} arithmetic", dtype.name()))),
        }
    }

    fn grid(n: usize) -> LaunchConfig {
        let blocks = n.div_ceil(256).clamp(1, 8192) as u32;
        LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 }
    }

    fn bind(&self) -> Result<(), DeviceError> {
        self.ctx.bind_to_thread().map_err(drv_err("binding the CUDA context"))
    }

    /// The device's context (its primary context: NCCL, which uses the runtime API, shares it).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream every operation of this backend runs on (the legacy default stream).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // The handle belongs to this device's context: make it current first.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the handle is ours and no longer used. A failure here cannot be acted on.
        let _ = unsafe { cublas::destroy_handle(self.blas) };
    }
}

/// Launches `$name` with the given arguments (each bound to a local first, as launch args are
/// passed by reference until the launch call).
macro_rules! launch {
    ($self:ident, $name:expr, $cfg:expr, $($arg:expr),+ $(,)?) => {{
        let name: &str = &$name;
        let f = $self.func(name)?;
        let mut b = $self.stream.launch_builder(f);
        $( b.arg($arg); )+
        // SAFETY: every argument matches the kernel's parameter list in kernels.cu, and every
        // address comes from the caching allocator and is live for the stream-ordered launch.
        unsafe { b.launch($cfg) }.map(|_| ()).map_err(drv_err("kernel launch"))
    }};
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn pinned(&self, bytes: usize, fill: &dyn Fn(&mut [u8])) -> Result<Box<dyn super::HostBatch>, DeviceError> {
        self.bind()?;
        // SAFETY: page-locked memory of `bytes` bytes (PyTorch's pin_memory uses default flags too);
        // it is written below before any copy reads it.
        let mut h = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(bytes.max(1), 0) }.map_err(drv_err("cuMemHostAlloc"))?;
        fill(&mut h.as_mut_slice().map_err(drv_err("pinned memory"))?[..bytes]);
        Ok(Box::new(CudaHostBatch(h)))
    }
    fn upload_pinned(&self, dst: u64, host: &dyn super::HostBatch, offset: usize, bytes: usize) -> Result<(), DeviceError> {
        let h = host.as_any().downcast_ref::<CudaHostBatch>().ok_or_else(|| DeviceError::Usage("a host batch of another backend".into()))?;
        if offset + bytes > h.0.len() {
            return Err(DeviceError::Usage(format!("upload of {bytes} bytes at {offset} from a host batch of {}", h.0.len())));
        }
        self.bind()?;
        let src = h.0.as_slice().map_err(drv_err("pinned memory"))?;
        // SAFETY: dst is a live block of at least `bytes`; the source is page-locked and outlives the
        // copy, which is waited for right after (a blocking `.cuda()`).
        unsafe { drv::memcpy_htod_async(dst, &src[offset..offset + bytes], self.stream.cu_stream()) }.map_err(drv_err("upload"))?;
        self.synchronize()
    }
    fn estimated(&self) -> bool {
        false
    }
    fn device_name(&self) -> String {
        self.name.clone()
    }
    fn sm_info(&self) -> (usize, usize) {
        use cudarc::driver::sys::CUdevice_attribute as A;
        let get = |a| self.ctx.attribute(a).ok().filter(|v| *v > 0).map(|v| v as usize);
        (get(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).unwrap_or(132), get(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR).unwrap_or(2048))
    }
    fn mem_info(&self) -> Result<(usize, usize), DeviceError> {
        self.ctx.mem_get_info().map_err(drv_err("cuMemGetInfo"))
    }
    fn raw_alloc(&self, bytes: usize) -> Result<u64, DeviceError> {
        self.bind()?;
        // SAFETY: plain cuMemAlloc in the bound context.
        match unsafe { drv::malloc_sync(bytes) } {
            Ok(p) => Ok(p),
            Err(drv::DriverError(drv_sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY)) => {
                Err(DeviceError::OutOfMemory { requested: bytes, allocated: 0, reserved: 0 })
            }
            Err(e) => Err(DeviceError::Driver(format!("cuMemAlloc({bytes}): {e}"))),
        }
    }
    fn raw_free(&self, addr: u64) -> Result<(), DeviceError> {
        self.bind()?;
        // SAFETY: the allocator frees only segments it got from raw_alloc, after a synchronize.
        unsafe { drv::free_sync(addr) }.map_err(drv_err("cuMemFree"))
    }
    fn synchronize(&self) -> Result<(), DeviceError> {
        self.stream.synchronize().map_err(drv_err("synchronize"))
    }
    fn set_gemm_workspace(&self, addr: u64, bytes: usize) -> Result<(), DeviceError> {
        self.bind()?;
        // SAFETY: the workspace block stays allocated for the backend's lifetime (the runtime holds it).
        unsafe { cublas_sys::cublasSetWorkspace_v2(self.blas, addr as *mut _, bytes) }.result().map_err(blas_err)
    }
    fn upload(&self, dst: u64, dtype: DType, data: HostData<'_>) -> Result<(), DeviceError> {
        self.bind()?;
        // SAFETY: dst is a live block of at least the data's size (the runtime sizes it from the shape).
        unsafe {
            match (dtype, data) {
                (DType::Fp32, HostData::F32(v)) => drv::memcpy_htod_sync(dst, v),
                (DType::Fp16, HostData::F32(v)) => {
                    let h: Vec<u16> = v.iter().map(|x| half::f16::from_f32(*x).to_bits()).collect();
                    drv::memcpy_htod_sync(dst, &h)
                }
                (DType::I64, HostData::I64(v)) => drv::memcpy_htod_sync(dst, v),
                _ => return Err(DeviceError::Unsupported("upload: data does not match the tensor's dtype".into())),
            }
        }
        .map_err(drv_err("upload"))
    }
    fn download(&self, src: u64, dtype: DType, n: usize) -> Result<Vec<f32>, DeviceError> {
        self.synchronize()?;
        // SAFETY: src is a live block holding n elements of dtype.
        unsafe {
            match dtype {
                DType::Fp32 => {
                    let mut v = vec![0f32; n];
                    drv::memcpy_dtoh_sync(&mut v, src).map_err(drv_err("download"))?;
                    Ok(v)
                }
                DType::Fp16 => {
                    let mut h = vec![0u16; n];
                    drv::memcpy_dtoh_sync(&mut h, src).map_err(drv_err("download"))?;
                    Ok(h.into_iter().map(|b| half::f16::from_bits(b).to_f32()).collect())
                }
                DType::I64 => {
                    let mut v = vec![0i64; n];
                    drv::memcpy_dtoh_sync(&mut v, src).map_err(drv_err("download"))?;
                    Ok(v.into_iter().map(|x| x as f32).collect())
                }
                DType::Bool => {
                    let mut v = vec![0u8; n];
                    drv::memcpy_dtoh_sync(&mut v, src).map_err(drv_err("download"))?;
                    Ok(v.into_iter().map(f32::from).collect())
                }
            }
        }
    }
    fn copy(&self, dst: u64, src: u64, bytes: usize) -> Result<(), DeviceError> {
        self.bind()?;
        // SAFETY: both blocks are live and at least `bytes` long.
        unsafe { drv::memcpy_dtod_async(dst, src, bytes, self.stream.cu_stream()) }.map_err(drv_err("copy"))
    }
    fn fill(&self, dtype: DType, dst: u64, n: usize, value: f32) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("fill_{}", Self::sfx(dtype)?), Self::grid(n), &dst, &value, &n64)
    }
    fn gemm(&self, dtype: DType, g: Gemm) -> Result<(), DeviceError> {
        let ty = match dtype {
            DType::Fp32 => cublas_sys::cudaDataType::CUDA_R_32F,
            DType::Fp16 => cublas_sys::cudaDataType::CUDA_R_16F,
            DType::I64 | DType::Bool => return Err(DeviceError::Unsupported(format!("{} GEMM", dtype.name()))),
        };
        let op = |t: bool| if t { cublas_sys::cublasOperation_t::CUBLAS_OP_T } else { cublas_sys::cublasOperation_t::CUBLAS_OP_N };
        let (alpha, beta) = (1.0f32, 0.0f32);
        // cuBLAS launches into the current context: with several devices in one thread, make it ours.
        self.bind()?;
        // f32 accumulation for both types, as PyTorch does (TF32 off by default for matmul).
        // SAFETY: pointers are live device blocks sized by the callers from the same m, n, k.
        unsafe {
            cublas::gemm_ex(
                self.blas,
                op(g.trans_a),
                op(g.trans_b),
                g.m as i32,
                g.n as i32,
                g.k as i32,
                &alpha as *const f32 as *const _,
                g.a as *const _,
                ty,
                g.lda as i32,
                g.b as *const _,
                ty,
                g.ldb as i32,
                &beta as *const f32 as *const _,
                g.c as *mut _,
                ty,
                g.ldc as i32,
                cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(blas_err)
    }
    fn bias_add(&self, dtype: DType, y: u64, bias: u64, rows: usize, cols: usize) -> Result<(), DeviceError> {
        let (r, c) = (rows as u64, cols as u64);
        launch!(self, format!("bias_add_{}", Self::sfx(dtype)?), Self::grid(rows * cols), &y, &bias, &r, &c)
    }
    fn relu_fwd(&self, dtype: DType, x: u64, y: u64, n: usize) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("relu_fwd_{}", Self::sfx(dtype)?), Self::grid(n), &x, &y, &n64)
    }
    fn relu_bwd(&self, dtype: DType, gy: u64, y: u64, gx: u64, n: usize) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("relu_bwd_{}", Self::sfx(dtype)?), Self::grid(n), &gy, &y, &gx, &n64)
    }
    fn col_sum(&self, dtype: DType, x: u64, out: u64, rows: usize, cols: usize) -> Result<(), DeviceError> {
        let (r, c) = (rows as u64, cols as u64);
        launch!(self, format!("col_sum_{}", Self::sfx(dtype)?), Self::grid(cols), &x, &out, &r, &c)
    }
    fn ce_fwd(&self, dtype: DType, logits: u64, targets: u64, logsm: u64, loss: u64, total_weight: u64, rows: usize, classes: usize) -> Result<(), DeviceError> {
        let (r, c) = (rows as u64, classes as u64);
        let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        launch!(self, format!("ce_fwd_{}", Self::sfx(dtype)?), cfg, &logits, &targets, &logsm, &loss, &total_weight, &r, &c)
    }
    fn ce_bwd(&self, dtype: DType, logsm: u64, targets: u64, grad_loss: u64, dlogits: u64, rows: usize, classes: usize) -> Result<(), DeviceError> {
        let (r, c) = (rows as u64, classes as u64);
        launch!(self, format!("ce_bwd_{}", Self::sfx(dtype)?), Self::grid(rows * classes), &logsm, &targets, &grad_loss, &dlogits, &r, &c)
    }
    fn axpy(&self, dtype: DType, y: u64, x: u64, alpha: f32, n: usize) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("axpy_{}", Self::sfx(dtype)?), Self::grid(n), &y, &x, &alpha, &n64)
    }
    fn add(&self, dtype: DType, a: u64, b: u64, y: u64, n: usize) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("add_{}", Self::sfx(dtype)?), Self::grid(n), &a, &b, &y, &n64)
    }
    fn cast(&self, from: DType, to: DType, x: u64, y: u64, n: usize, scale: f32) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("cast_{}_{}", Self::sfx(from)?, Self::sfx(to)?), Self::grid(n), &x, &y, &n64, &scale)
    }
    fn unscale_check(&self, g: u64, n: usize, inv_scale: f32, found_inf: u64) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, "unscale_check_f32", Self::grid(n), &g, &n64, &inv_scale, &found_inf)
    }
    fn count_zeros(&self, dtype: DType, x: u64, n: usize, counter: u64) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("count_zeros_{}", Self::sfx(dtype)?), Self::grid(n), &x, &n64, &counter)
    }
    fn read_u64(&self, src: u64) -> Result<u64, DeviceError> {
        self.synchronize()?;
        let mut v = [0u64; 1];
        // SAFETY: src is a live 8-byte block.
        unsafe { drv::memcpy_dtoh_sync(&mut v, src) }.map_err(drv_err("download"))?;
        Ok(v[0])
    }
    fn init_uniform(&self, dtype: DType, dst: u64, n: usize, seed: u64, bound: f32) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("init_uniform_{}", Self::sfx(dtype)?), Self::grid(n), &dst, &n64, &seed, &bound)
    }
    fn init_normal(&self, dtype: DType, dst: u64, n: usize, seed: u64) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("init_normal_{}", Self::sfx(dtype)?), Self::grid(n), &dst, &n64, &seed)
    }
    fn argmax_rows(&self, dtype: DType, x: u64, out: u64, rows: usize, cols: usize) -> Result<(), DeviceError> {
        let (r, c) = (rows as u64, cols as u64);
        launch!(self, format!("argmax_rows_{}", Self::sfx(dtype)?), Self::grid(rows), &x, &out, &r, &c)
    }
    fn eq_i64(&self, a: u64, b: u64, y: u64, n: usize) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, "eq_i64", Self::grid(n), &a, &b, &y, &n64)
    }
    fn sum_bool(&self, x: u64, n: usize, out: u64) -> Result<(), DeviceError> {
        let n64 = n as u64;
        let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        launch!(self, "sum_bool", cfg, &x, &n64, &out)
    }
    fn sq_diff(&self, dtype: DType, a: u64, b: u64, y: u64, n: usize) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("sq_diff_{}", Self::sfx(dtype)?), Self::grid(n), &a, &b, &y, &n64)
    }
    fn mean_all(&self, dtype: DType, x: u64, n: usize, out: u64) -> Result<(), DeviceError> {
        let n64 = n as u64;
        let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        launch!(self, format!("mean_all_{}", Self::sfx(dtype)?), cfg, &x, &n64, &out)
    }
    fn mse_bwd(&self, dtype: DType, a: u64, b: u64, g: u64, y: u64, n: usize, norm: f32) -> Result<(), DeviceError> {
        let n64 = n as u64;
        launch!(self, format!("mse_bwd_{}", Self::sfx(dtype)?), Self::grid(n), &a, &b, &g, &y, &n64, &norm)
    }
}
