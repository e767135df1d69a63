//! NCCL, loaded at run time as the CUDA driver is: MEM007's loops broadcast, reduce and all-reduce
//! through it as PyTorch's `nn.DataParallel` (`torch.cuda.nccl`) and DDP (`ProcessGroupNCCL`) do.
//!
//! The library is looked for, in order: the file (or the folder holding `libnccl.so.2`) named by
//! `MEMLINT_NCCL`; `libnccl.so.2` and `libnccl.so` on the loader's path (`LD_LIBRARY_PATH`,
//! `ldconfig`); then in the `nvidia-nccl` wheel of `python3`'s site-packages (where a `pip install
//! torch` puts it: `nvidia/nccl/lib/libnccl.so.2`). Nothing of NCCL is needed to build memlint.
//!
//! Only the handful of functions memlint calls are bound (`nccl.h`'s C ABI: enums are `int`,
//! communicators opaque pointers, streams `CUstream`).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::OnceLock;

use super::DType;

/// The environment variable naming libnccl (a file, or a folder holding `libnccl.so.2`).
pub const ENV: &str = "MEMLINT_NCCL";

type Comm = *mut c_void;
type Stream = *mut c_void;
type NcclResult = c_int;

const NCCL_SUM: c_int = 0;
const NCCL_FLOAT16: c_int = 6;
const NCCL_FLOAT32: c_int = 7;

struct Api {
    _lib: libloading::Library,
    path: String,
    version: c_int,
    get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    comm_init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> NcclResult,
    comm_destroy: unsafe extern "C" fn(Comm) -> NcclResult,
    group_start: unsafe extern "C" fn() -> NcclResult,
    group_end: unsafe extern "C" fn() -> NcclResult,
    all_reduce: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, Stream) -> NcclResult,
    broadcast: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, Stream) -> NcclResult,
    reduce: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, c_int, Comm, Stream) -> NcclResult,
}

/// The places libnccl is looked for, in order (see the module documentation).
pub fn candidates() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os(ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_dir() {
            v.push(p.join("libnccl.so.2"));
            v.push(p.join("lib").join("libnccl.so.2"));
        } else {
            v.push(p);
        }
        // What the user named is the only place looked at: a wrong path must not be hidden by
        // another copy of the library.
        return v;
    }
    v.push(PathBuf::from("libnccl.so.2"));
    v.push(PathBuf::from("libnccl.so"));
    if let Some(dir) = python_nccl_dir() {
        v.push(dir.join("lib").join("libnccl.so.2"));
    }
    v
}

/// `nvidia.nccl`'s folder in python3's site-packages, if python3 has that wheel.
fn python_nccl_dir() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__ or '') or list(nvidia.nccl.__path__)[0])"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !s.is_empty()).then(|| PathBuf::from(s))
}

fn load() -> Result<Api, String> {
    let tried = candidates();
    let mut errors = Vec::new();
    for path in &tried {
        // SAFETY: loading NCCL runs its initialisers, which only set up its own state.
        match unsafe { libloading::Library::new(path) } {
            Ok(lib) => return bind(lib, path.display().to_string()),
            Err(e) => errors.push(format!("{}: {e}", path.display())),
        }
    }
    let how = if std::env::var_os(ENV).is_some_and(|p| !p.is_empty()) {
        format!("{ENV} names it, but it could not be loaded")
    } else {
        format!("set {ENV}=/path/to/libnccl.so.2 (or its folder), add its folder to LD_LIBRARY_PATH, or install PyTorch's `nvidia-nccl` wheel for python3")
    };
    Err(format!("NCCL (libnccl.so.2) was not found: MEM007's loops broadcast, reduce and all-reduce through it; {how}. Tried: {}", errors.join("; ")))
}

fn bind(lib: libloading::Library, path: String) -> Result<Api, String> {
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol has the signature of nccl.h (checked against NCCL 2.x's header).
            *unsafe { lib.get($name) }.map_err(|e| format!("{path} is not a usable NCCL: {e}"))?
        };
    }
    let get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult = sym!(b"ncclGetVersion\0");
    let mut version = 0;
    // SAFETY: writes one int.
    unsafe { get_version(&mut version) };
    Ok(Api {
        get_error_string: sym!(b"ncclGetErrorString\0"),
        comm_init_all: sym!(b"ncclCommInitAll\0"),
        comm_destroy: sym!(b"ncclCommDestroy\0"),
        group_start: sym!(b"ncclGroupStart\0"),
        group_end: sym!(b"ncclGroupEnd\0"),
        all_reduce: sym!(b"ncclAllReduce\0"),
        broadcast: sym!(b"ncclBroadcast\0"),
        reduce: sym!(b"ncclReduce\0"),
        version,
        path,
        _lib: lib,
    })
}

fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(|e| e.clone())
}

/// Checks that NCCL can be loaded; returns where it was found and its version (e.g. 22703).
pub fn probe() -> Result<(String, i32), String> {
    api().map(|a| (a.path.clone(), a.version))
}

fn check(a: &Api, r: NcclResult, what: &str) -> Result<(), String> {
    if r == 0 {
        return Ok(());
    }
    // SAFETY: NCCL returns a static string for every result code.
    let msg = unsafe { CStr::from_ptr((a.get_error_string)(r)) }.to_string_lossy().into_owned();
    Err(format!("NCCL {what}: {msg} (code {r})"))
}

fn dtype(d: DType) -> Result<c_int, String> {
    match d {
        DType::Fp32 => Ok(NCCL_FLOAT32),
        DType::Fp16 => Ok(NCCL_FLOAT16),
        other => Err(format!("NCCL: no {} reductions here", other.name())),
    }
}

/// One communicator per device of a clique made in this process (`ncclCommInitAll`).
pub struct Clique {
    comms: Vec<Comm>,
}

// SAFETY: an NCCL communicator may be used from any one thread at a time; each rank's is handed to
// the thread that runs that rank and used only there (or, for DataParallel, all from one thread).
unsafe impl Send for Clique {}
unsafe impl Sync for Clique {}

impl Clique {
    /// Communicators for devices `0..n` (the CUDA ordinals this process sees).
    pub fn new(n: usize) -> Result<Clique, String> {
        let a = api()?;
        let mut comms = vec![std::ptr::null_mut(); n];
        let devs: Vec<c_int> = (0..n as c_int).collect();
        // SAFETY: `comms` has room for n communicators; `devs` lists n devices.
        check(a, unsafe { (a.comm_init_all)(comms.as_mut_ptr(), n as c_int, devs.as_ptr()) }, "ncclCommInitAll")?;
        Ok(Clique { comms })
    }

    pub fn len(&self) -> usize {
        self.comms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.comms.is_empty()
    }

    /// `ncclBroadcast` from rank 0 in place: `bufs[i]` on device i, each `count` elements, each
    /// on its device's stream `streams[i]`.
    pub fn broadcast(&self, bufs: &[u64], count: usize, dt: DType, streams: &[Stream]) -> Result<(), String> {
        let a = api()?;
        let t = dtype(dt)?;
        self.group(a, |i, comm| {
            // SAFETY: bufs[i] is a live block of `count` elements on device i.
            unsafe { (a.broadcast)(bufs[i] as *const c_void, bufs[i] as *mut c_void, count, t, 0, comm, streams[i]) }
        }, "ncclBroadcast")
    }

    /// `ncclReduce` (sum) onto rank 0: `send[i]` on device i, the result into `recv` on device 0.
    pub fn reduce(&self, send: &[u64], recv: u64, count: usize, dt: DType, streams: &[Stream]) -> Result<(), String> {
        let a = api()?;
        let t = dtype(dt)?;
        self.group(a, |i, comm| {
            let out = if i == 0 { recv as *mut c_void } else { std::ptr::null_mut() };
            // SAFETY: send[i] holds `count` elements on device i; recv as many on device 0.
            unsafe { (a.reduce)(send[i] as *const c_void, out, count, t, NCCL_SUM, 0, comm, streams[i]) }
        }, "ncclReduce")
    }

    fn group(&self, a: &Api, mut call: impl FnMut(usize, Comm) -> NcclResult, what: &str) -> Result<(), String> {
        // SAFETY: group calls bracket one operation per communicator, issued from this thread.
        check(a, unsafe { (a.group_start)() }, "ncclGroupStart")?;
        let mut first_err = Ok(());
        for (i, &c) in self.comms.iter().enumerate() {
            if first_err.is_ok() {
                first_err = check(a, call(i, c), what);
            }
        }
        let end = check(a, unsafe { (a.group_end)() }, "ncclGroupEnd");
        first_err.and(end)
    }

    /// Rank `i`'s communicator, for the thread that runs rank `i`.
    pub fn rank(&self, i: usize) -> RankComm<'_> {
        RankComm { comm: self.comms[i] , _clique: std::marker::PhantomData }
    }
}

impl Drop for Clique {
    fn drop(&mut self) {
        if let Ok(a) = api() {
            for &c in &self.comms {
                if !c.is_null() {
                    // SAFETY: each communicator was made by ncclCommInitAll and is no longer used.
                    unsafe { (a.comm_destroy)(c) };
                }
            }
        }
    }
}

/// One rank's communicator (borrowed from its [`Clique`]).
pub struct RankComm<'a> {
    comm: Comm,
    _clique: std::marker::PhantomData<&'a Clique>,
}

// SAFETY: see Clique; a rank's communicator is used by one thread.
unsafe impl Send for RankComm<'_> {}

impl RankComm<'_> {
    /// `ncclAllReduce` (sum) in place of `count` elements at `buf`, on `stream`.
    pub fn all_reduce(&self, buf: u64, count: usize, dt: DType, stream: Stream) -> Result<(), String> {
        let a = api()?;
        let t = dtype(dt)?;
        // SAFETY: buf holds `count` elements on this rank's device, live until the stream passes.
        check(a, unsafe { (a.all_reduce)(buf as *const c_void, buf as *mut c_void, count, t, NCCL_SUM, self.comm, stream) }, "ncclAllReduce")
    }
}
