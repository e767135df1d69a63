//! What MEM007's loops do across devices: cross-device copies, and NCCL's broadcast, reduce and
//! all-reduce. [`CudaFabric`] does them on GPUs; [`SimFabric`] does nothing (the simulator's
//! devices hold no data), so that the same loops run on both backends and allocate the same.
//!
//! Ordering follows PyTorch. A cross-device copy (`tensor.to(other_device)`, DataParallel's
//! scatter and gather) runs on the source device's stream after a two-way barrier with the
//! destination's stream, as ATen's `copy_device_to_device` does. DataParallel's broadcast and
//! reduce (`torch.cuda.nccl`) run on every device's current stream. DDP's all-reduce runs on a
//! communication stream of its own per rank that first waits for the rank's compute stream, so it
//! overlaps the rest of the backward pass, and the compute stream waits for it before the
//! gradients are used (ProcessGroupNCCL's `syncStream` and `Work::wait`).

use std::sync::Arc;

use crate::autograd::Runtime;
use crate::backend::cuda::CudaBackend;
use crate::backend::nccl::{Clique, RankComm};
use crate::backend::{DType, DeviceError};

/// The cross-device operations of one run over devices `0..n`.
pub trait Fabric: Sync {
    /// Copies `bytes` from `src` on device `from` into `dst` on device `to`.
    fn copy(&self, rts: &[Runtime], to: usize, dst: u64, from: usize, src: u64, bytes: usize) -> Result<(), DeviceError>;
    /// Broadcast from device 0 in place: `bufs[i]` (on device i) gets device 0's `count` elements.
    fn broadcast(&self, rts: &[Runtime], bufs: &[u64], count: usize, dt: DType) -> Result<(), DeviceError>;
    /// Sum of `send[i]` (on device i) into `recv` on device 0.
    fn reduce(&self, rts: &[Runtime], send: &[u64], recv: u64, count: usize, dt: DType) -> Result<(), DeviceError>;
    /// Rank `i`'s all-reduce, for the thread that runs that rank on `rt`.
    fn rank<'a>(&'a self, i: usize, rt: &Runtime) -> Result<Box<dyn RankOps + 'a>, DeviceError>;
}

/// One DDP rank's communication.
pub trait RankOps {
    /// Starts an all-reduce (sum, in place) of `count` elements at `buf`, after the rank's work so far.
    fn all_reduce_start(&mut self, buf: u64, count: usize, dt: DType) -> Result<(), DeviceError>;
    /// Makes the rank's compute stream wait for every all-reduce started.
    fn wait_all(&mut self) -> Result<(), DeviceError>;
}

/// The simulator's devices: nothing moves.
pub struct SimFabric;

struct SimRank;

impl RankOps for SimRank {
    fn all_reduce_start(&mut self, _buf: u64, _count: usize, _dt: DType) -> Result<(), DeviceError> {
        Ok(())
    }
    fn wait_all(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }
}

impl Fabric for SimFabric {
    fn copy(&self, _: &[Runtime], _: usize, _: u64, _: usize, _: u64, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn broadcast(&self, _: &[Runtime], _: &[u64], _: usize, _: DType) -> Result<(), DeviceError> {
        Ok(())
    }
    fn reduce(&self, _: &[Runtime], _: &[u64], _: u64, _: usize, _: DType) -> Result<(), DeviceError> {
        Ok(())
    }
    fn rank<'a>(&'a self, _i: usize, _rt: &Runtime) -> Result<Box<dyn RankOps + 'a>, DeviceError> {
        Ok(Box::new(SimRank))
    }
}

fn cuda(rt: &Runtime) -> Result<&CudaBackend, DeviceError> {
    rt.dev.as_any().downcast_ref::<CudaBackend>().ok_or_else(|| DeviceError::Usage("the CUDA fabric needs CUDA runtimes".into()))
}

fn drv(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> DeviceError {
    move |e| DeviceError::Driver(format!("{what}: {e}"))
}

/// GPUs `0..n` of this process: peer access enabled between every pair that supports it, and an
/// NCCL communicator per device.
pub struct CudaFabric {
    clique: Clique,
    // Keeps each device's primary context retained while the communicators live.
    _contexts: Vec<Arc<cudarc::driver::CudaContext>>,
}

impl CudaFabric {
    pub fn new(n: usize) -> Result<CudaFabric, String> {
        use cudarc::driver::sys;
        let mut contexts = Vec::new();
        for i in 0..n {
            contexts.push(cudarc::driver::CudaContext::new(i).map_err(|e| format!("could not open GPU {i}: {e}"))?);
        }
        // PyTorch enables peer access on the first copy between two devices; do it up front.
        for (i, a) in contexts.iter().enumerate() {
            for (j, b) in contexts.iter().enumerate() {
                if i == j {
                    continue;
                }
                let mut can = 0;
                // SAFETY: plain queries and a context switch on this thread.
                unsafe {
                    sys::cuDeviceCanAccessPeer(&mut can, a.cu_device(), b.cu_device());
                }
                if can == 0 {
                    continue;
                }
                a.bind_to_thread().map_err(|e| format!("could not use GPU {i}: {e}"))?;
                // SAFETY: enables access from a's context to b's memory; "already enabled" is fine.
                let r = unsafe { sys::cuCtxEnablePeerAccess(b.cu_ctx(), 0) };
                if r != sys::CUresult::CUDA_SUCCESS && r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
                    return Err(format!("could not enable peer access from GPU {i} to GPU {j}: {r:?}"));
                }
            }
        }
        let clique = Clique::new(n)?;
        Ok(CudaFabric { clique, _contexts: contexts })
    }
}

impl Fabric for CudaFabric {
    fn copy(&self, rts: &[Runtime], to: usize, dst: u64, from: usize, src: u64, bytes: usize) -> Result<(), DeviceError> {
        let (d, s) = (cuda(&rts[to])?, cuda(&rts[from])?);
        if to == from {
            return rts[to].dev.copy(dst, src, bytes);
        }
        // The source's stream waits for the destination's earlier work, copies, and the
        // destination's stream waits for the copy.
        let dst_ready = d.stream().record_event(None).map_err(drv("event"))?;
        s.stream().wait(&dst_ready).map_err(drv("stream wait"))?;
        s.context().bind_to_thread().map_err(drv("binding the CUDA context"))?;
        // SAFETY: both blocks are live and at least `bytes` long; the copy is ordered by the events.
        unsafe { cudarc::driver::result::memcpy_peer_async(d.context().cu_ctx(), dst, s.context().cu_ctx(), src, bytes, s.stream().cu_stream()) }
            .map_err(drv("cuMemcpyPeerAsync"))?;
        let src_done = s.stream().record_event(None).map_err(drv("event"))?;
        d.stream().wait(&src_done).map_err(drv("stream wait"))
    }

    fn broadcast(&self, rts: &[Runtime], bufs: &[u64], count: usize, dt: DType) -> Result<(), DeviceError> {
        let streams = rts.iter().map(|r| cuda(r).map(|c| c.stream().cu_stream() as *mut std::ffi::c_void)).collect::<Result<Vec<_>, _>>()?;
        self.clique.broadcast(bufs, count, dt, &streams).map_err(DeviceError::Driver)
    }

    fn reduce(&self, rts: &[Runtime], send: &[u64], recv: u64, count: usize, dt: DType) -> Result<(), DeviceError> {
        let streams = rts.iter().map(|r| cuda(r).map(|c| c.stream().cu_stream() as *mut std::ffi::c_void)).collect::<Result<Vec<_>, _>>()?;
        self.clique.reduce(send, recv, count, dt, &streams).map_err(DeviceError::Driver)
    }

    fn rank<'a>(&'a self, i: usize, rt: &Runtime) -> Result<Box<dyn RankOps + 'a>, DeviceError> {
        let c = cuda(rt)?;
        // ProcessGroupNCCL's streams are high-priority streams of their own.
        let (_, high) = cudarc::driver::result::stream::get_priority_range().map_err(drv("stream priorities"))?;
        let comm_stream = c.context().new_stream_with_priority(high).map_err(drv("creating the communication stream"))?;
        Ok(Box::new(NcclRank { comm: self.clique.rank(i), compute: c.stream().clone(), comm_stream, done: Vec::new() }))
    }
}

struct NcclRank<'a> {
    comm: RankComm<'a>,
    compute: Arc<cudarc::driver::CudaStream>,
    comm_stream: Arc<cudarc::driver::CudaStream>,
    done: Vec<cudarc::driver::CudaEvent>,
}

impl RankOps for NcclRank<'_> {
    fn all_reduce_start(&mut self, buf: u64, count: usize, dt: DType) -> Result<(), DeviceError> {
        let ready = self.compute.record_event(None).map_err(drv("event"))?;
        self.comm_stream.wait(&ready).map_err(drv("stream wait"))?;
        self.comm_stream.context().bind_to_thread().map_err(drv("binding the CUDA context"))?;
        self.comm.all_reduce(buf, count, dt, self.comm_stream.cu_stream() as *mut std::ffi::c_void).map_err(DeviceError::Driver)?;
        self.done.push(self.comm_stream.record_event(None).map_err(drv("event"))?);
        Ok(())
    }

    fn wait_all(&mut self) -> Result<(), DeviceError> {
        for e in self.done.drain(..) {
            self.compute.wait(&e).map_err(drv("stream wait"))?;
        }
        Ok(())
    }
}
