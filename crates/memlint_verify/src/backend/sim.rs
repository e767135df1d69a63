//! The host simulator: a device of a given capacity that only accounts allocations.
//!
//! Nothing is computed: the scenario code runs unchanged and every allocation goes through the same
//! caching allocator and autograd as on a GPU, so the memory figures are what the reference loop
//! would allocate. Times and numerical results (MEM003's underflow fractions) are not available.

use std::cell::RefCell;
use std::collections::HashMap;

use super::{Backend, DType, DeviceError, Gemm, HostData};

/// An H100's memory, the default capacity of the simulated device.
pub const DEFAULT_CAPACITY: usize = 80 * (1 << 30);

pub struct SimBackend {
    capacity: usize,
    state: RefCell<SimState>,
}

struct SimState {
    next_addr: u64,
    used: usize,
    live: HashMap<u64, usize>,
}

impl SimBackend {
    pub fn new(capacity: usize) -> Self {
        SimBackend {
            capacity,
            // Addresses only need to be distinct and ordered; start away from 0 so that a null
            // address never appears.
            state: RefCell::new(SimState { next_addr: 1 << 40, used: 0, live: HashMap::new() }),
        }
    }
}

/// The simulator's host batches hold nothing: nothing is copied.
struct SimHostBatch(usize);

impl super::HostBatch for SimHostBatch {
    fn bytes(&self) -> usize {
        self.0
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Backend for SimBackend {
    fn name(&self) -> &'static str {
        "sim"
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn pinned(&self, bytes: usize, _fill: &dyn Fn(&mut [u8])) -> Result<Box<dyn super::HostBatch>, DeviceError> {
        Ok(Box::new(SimHostBatch(bytes)))
    }
    fn upload_pinned(&self, _dst: u64, host: &dyn super::HostBatch, offset: usize, bytes: usize) -> Result<(), DeviceError> {
        if offset + bytes > host.bytes() {
            return Err(DeviceError::Usage(format!("upload of {bytes} bytes at {offset} from a host batch of {}", host.bytes())));
        }
        Ok(())
    }
    fn estimated(&self) -> bool {
        true
    }
    fn device_name(&self) -> String {
        format!("simulated device ({} GiB, allocations only)", self.capacity >> 30)
    }
    fn sm_info(&self) -> (usize, usize) {
        // An H100 SXM, as the capacity.
        (132, 2048)
    }
    fn mem_info(&self) -> Result<(usize, usize), DeviceError> {
        let s = self.state.borrow();
        Ok((self.capacity - s.used, self.capacity))
    }
    fn raw_alloc(&self, bytes: usize) -> Result<u64, DeviceError> {
        let mut s = self.state.borrow_mut();
        if s.used + bytes > self.capacity {
            return Err(DeviceError::OutOfMemory { requested: bytes, allocated: 0, reserved: s.used });
        }
        let addr = s.next_addr;
        // Keep segments 2 MiB aligned like the driver's, so addresses never collide.
        s.next_addr += (bytes as u64).div_ceil(2 << 20) * (2 << 20);
        s.used += bytes;
        s.live.insert(addr, bytes);
        Ok(addr)
    }
    fn raw_free(&self, addr: u64) -> Result<(), DeviceError> {
        let mut s = self.state.borrow_mut();
        match s.live.remove(&addr) {
            Some(bytes) => {
                s.used -= bytes;
                Ok(())
            }
            None => Err(DeviceError::Driver(format!("sim: free of unknown address {addr:#x}"))),
        }
    }
    fn synchronize(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    fn set_gemm_workspace(&self, _addr: u64, _bytes: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn upload(&self, _dst: u64, _dtype: DType, _data: HostData<'_>) -> Result<(), DeviceError> {
        Ok(())
    }
    fn download(&self, _src: u64, _dtype: DType, n: usize) -> Result<Vec<f32>, DeviceError> {
        // Nothing was computed; zeros stand for the values so that host-side code keeps its shape.
        Ok(vec![0.0; n])
    }
    fn copy(&self, _dst: u64, _src: u64, _bytes: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn fill(&self, _dtype: DType, _dst: u64, _n: usize, _value: f32) -> Result<(), DeviceError> {
        Ok(())
    }
    fn gemm(&self, _dtype: DType, _g: Gemm) -> Result<(), DeviceError> {
        Ok(())
    }
    fn bias_add(&self, _: DType, _: u64, _: u64, _: usize, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn relu_fwd(&self, _: DType, _: u64, _: u64, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn relu_bwd(&self, _: DType, _: u64, _: u64, _: u64, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn col_sum(&self, _: DType, _: u64, _: u64, _: usize, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn ce_fwd(&self, _: DType, _: u64, _: u64, _: u64, _: u64, _: u64, _: usize, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn ce_bwd(&self, _: DType, _: u64, _: u64, _: u64, _: u64, _: usize, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn axpy(&self, _: DType, _: u64, _: u64, _: f32, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn add(&self, _: DType, _: u64, _: u64, _: u64, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn cast(&self, _: DType, _: DType, _: u64, _: u64, _: usize, _: f32) -> Result<(), DeviceError> {
        Ok(())
    }
    fn unscale_check(&self, _: u64, _: usize, _: f32, _: u64) -> Result<(), DeviceError> {
        Ok(())
    }
    fn count_zeros(&self, _: DType, _: u64, _: usize, _: u64) -> Result<(), DeviceError> {
        Ok(())
    }
    fn read_u64(&self, _src: u64) -> Result<u64, DeviceError> {
        Ok(0)
    }
    fn init_uniform(&self, _: DType, _: u64, _: usize, _: u64, _: f32) -> Result<(), DeviceError> {
        Ok(())
    }
    fn init_normal(&self, _: DType, _: u64, _: usize, _: u64) -> Result<(), DeviceError> {
        Ok(())
    }
    fn argmax_rows(&self, _: DType, _: u64, _: u64, _: usize, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn eq_i64(&self, _: u64, _: u64, _: u64, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn sum_bool(&self, _: u64, _: usize, _: u64) -> Result<(), DeviceError> {
        Ok(())
    }
    fn sq_diff(&self, _: DType, _: u64, _: u64, _: u64, _: usize) -> Result<(), DeviceError> {
        Ok(())
    }
    fn mean_all(&self, _: DType, _: u64, _: usize, _: u64) -> Result<(), DeviceError> {
        Ok(())
    }
    fn mse_bwd(&self, _: DType, _: u64, _: u64, _: u64, _: u64, _: usize, _: f32) -> Result<(), DeviceError> {
        Ok(())
    }
}
