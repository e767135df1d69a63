//! A caching device allocator modelled on PyTorch's `CUDACachingAllocator`, and the tracker that
//! accounts every device byte the reference loops use.
//!
//! Why a copy of PyTorch's policy rather than a plain `cuMemAlloc` per tensor: the figures memlint
//! prints are compared with `torch.cuda.max_memory_allocated()`, which counts *blocks* of the caching
//! allocator (sizes rounded to 512 bytes, blocks that were not split count whole). Using the same
//! rounding, pools, segment sizes and split rules makes "allocated" mean the same thing on both sides,
//! and makes `empty_cache` cost what it costs in PyTorch (a device sync plus `cuMemFree` of every
//! unused segment, then fresh `cuMemAlloc`s).
//!
//! The allocator is backend-agnostic: segments come from [`Backend::raw_alloc`], so the same code runs
//! against real device memory (cuda backend) and against the host simulator (sim backend).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde::Serialize;

use crate::backend::{Backend, DeviceError};

/// Smallest block; every request is rounded up to a multiple of this (PyTorch `kMinBlockSize`).
pub const MIN_BLOCK: usize = 512;
/// Requests up to this size come from the small pool (PyTorch `kSmallSize`).
pub const SMALL_SIZE: usize = 1 << 20;
/// Segment size of the small pool (PyTorch `kSmallBuffer`).
pub const SMALL_BUFFER: usize = 2 << 20;
/// Segment size for large requests under [`MIN_LARGE_ALLOC`] (PyTorch `kLargeBuffer`).
pub const LARGE_BUFFER: usize = 20 << 20;
/// Large requests from this size get a segment of their own (PyTorch `kMinLargeAlloc`).
pub const MIN_LARGE_ALLOC: usize = 10 << 20;
/// Own segments are rounded up to this (PyTorch `kRoundLarge`).
pub const ROUND_LARGE: usize = 2 << 20;

/// What a device allocation is for. A tensor's kind can change while it lives: an output that a
/// graph node saves for backward counts as [`Kind::Saved`] while it is saved, and a gradient tensor
/// stolen by a parameter's `.grad` becomes [`Kind::Gradient`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Parameter,
    Gradient,
    Saved,
    Output,
    Workspace,
    /// An optimizer's state (SGD's momentum buffers).
    OptimizerState,
}

impl Kind {
    pub const ALL: [Kind; 6] = [Kind::Parameter, Kind::Gradient, Kind::Saved, Kind::Output, Kind::Workspace, Kind::OptimizerState];
    fn index(self) -> usize {
        match self {
            Kind::Parameter => 0,
            Kind::Gradient => 1,
            Kind::Saved => 2,
            Kind::Output => 3,
            Kind::Workspace => 4,
            Kind::OptimizerState => 5,
        }
    }
}

/// Bytes per [`Kind`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KindBytes {
    pub parameters: usize,
    pub gradients: usize,
    pub saved_activations: usize,
    pub outputs: usize,
    pub workspace: usize,
    pub optimizer_state: usize,
}

impl KindBytes {
    fn from_array(a: [usize; 6]) -> Self {
        KindBytes { parameters: a[0], gradients: a[1], saved_activations: a[2], outputs: a[3], workspace: a[4], optimizer_state: a[5] }
    }
}

/// A snapshot of the tracker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemStats {
    /// Bytes in allocated blocks now (PyTorch `memory_allocated`).
    pub allocated: usize,
    /// Highest `allocated` since the last [`CachingAllocator::reset_peak`] (PyTorch `max_memory_allocated`).
    pub peak_allocated: usize,
    /// Bytes obtained from the driver and not yet returned (PyTorch `memory_reserved`).
    pub reserved: usize,
    pub peak_reserved: usize,
    /// Live bytes by kind now.
    pub by_kind: KindBytes,
    /// Live bytes by kind at the moment of the peak.
    pub at_peak: KindBytes,
    /// Calls to the driver's allocate / free since the allocator was made.
    pub driver_mallocs: u64,
    pub driver_frees: u64,
}

#[derive(Debug)]
struct Block {
    size: usize,
    segment: u64,
    small: bool,
    allocated: bool,
    kind: Kind,
}

/// PyTorch's caching allocator policy over a [`Backend`]'s raw allocations.
pub struct CachingAllocator {
    dev: Rc<dyn Backend>,
    /// Every block, free or allocated, by address.
    blocks: BTreeMap<u64, Block>,
    /// Free blocks by (size, address): best fit is the first entry at or after the request.
    free_small: BTreeSet<(usize, u64)>,
    free_large: BTreeSet<(usize, u64)>,
    /// Segment base address -> size.
    segments: BTreeMap<u64, usize>,
    allocated: usize,
    peak_allocated: usize,
    reserved: usize,
    peak_reserved: usize,
    by_kind: [usize; 6],
    at_peak: [usize; 6],
    driver_mallocs: u64,
    driver_frees: u64,
}

/// Rounds a request like PyTorch's `round_size` (no power-of-two divisions configured).
pub fn round_size(bytes: usize) -> usize {
    if bytes < MIN_BLOCK {
        MIN_BLOCK
    } else {
        bytes.div_ceil(MIN_BLOCK) * MIN_BLOCK
    }
}

/// Size of the segment requested from the driver for a rounded request (PyTorch `get_allocation_size`).
pub fn segment_size(rounded: usize) -> usize {
    if rounded <= SMALL_SIZE {
        SMALL_BUFFER
    } else if rounded < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        rounded.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }
}

impl CachingAllocator {
    pub fn new(dev: Rc<dyn Backend>) -> Self {
        CachingAllocator {
            dev,
            blocks: BTreeMap::new(),
            free_small: BTreeSet::new(),
            free_large: BTreeSet::new(),
            segments: BTreeMap::new(),
            allocated: 0,
            peak_allocated: 0,
            reserved: 0,
            peak_reserved: 0,
            by_kind: [0; 6],
            at_peak: [0; 6],
            driver_mallocs: 0,
            driver_frees: 0,
        }
    }

    /// Allocates a block for `bytes` and returns (address, block size).
    pub fn malloc(&mut self, bytes: usize, kind: Kind) -> Result<(u64, usize), DeviceError> {
        let size = round_size(bytes);
        let small = size <= SMALL_SIZE;
        let found = {
            let pool = if small { &mut self.free_small } else { &mut self.free_large };
            let hit = pool.range((size, 0)..).next().copied();
            if let Some(h) = hit {
                pool.remove(&h);
            }
            hit
        };
        let (block_size, addr) = match found {
            Some(hit) => hit,
            None => {
                let seg = segment_size(size);
                let ptr = match self.dev.raw_alloc(seg) {
                    Ok(p) => p,
                    // Like PyTorch: on a failed driver allocation, give every unused cached segment
                    // back and try once more before reporting out of memory.
                    Err(DeviceError::OutOfMemory { .. }) => {
                        self.release_cached()?;
                        self.dev.raw_alloc(seg).map_err(|e| match e {
                            DeviceError::OutOfMemory { .. } => DeviceError::OutOfMemory {
                                requested: bytes,
                                allocated: self.allocated,
                                reserved: self.reserved,
                            },
                            other => other,
                        })?
                    }
                    Err(e) => return Err(e),
                };
                self.driver_mallocs += 1;
                self.segments.insert(ptr, seg);
                self.reserved += seg;
                self.peak_reserved = self.peak_reserved.max(self.reserved);
                self.blocks.insert(ptr, Block { size: seg, segment: ptr, small, allocated: false, kind });
                (seg, ptr)
            }
        };
        let remaining = block_size - size;
        // PyTorch splits small blocks when at least one minimal block is left, large ones only when
        // more than a small-pool request is left; otherwise the whole block is handed out and counted.
        let split = if small { remaining >= MIN_BLOCK } else { remaining > SMALL_SIZE };
        let seg = self.blocks.get(&addr).map(|b| b.segment).unwrap_or(addr);
        let handed = if split {
            self.blocks.insert(addr + size as u64, Block { size: remaining, segment: seg, small, allocated: false, kind });
            self.pool_mut(small).insert((remaining, addr + size as u64));
            size
        } else {
            block_size
        };
        let b = self.blocks.entry(addr).or_insert(Block { size: handed, segment: seg, small, allocated: true, kind });
        b.size = handed;
        b.allocated = true;
        b.kind = kind;
        self.allocated += handed;
        self.by_kind[kind.index()] += handed;
        if self.allocated > self.peak_allocated {
            self.peak_allocated = self.allocated;
            self.at_peak = self.by_kind;
        }
        Ok((addr, handed))
    }

    fn pool_mut(&mut self, small: bool) -> &mut BTreeSet<(usize, u64)> {
        if small {
            &mut self.free_small
        } else {
            &mut self.free_large
        }
    }

    /// Returns a block to its pool, merging it with free neighbours of the same segment.
    /// Pure bookkeeping (no device call), so it cannot fail; unknown addresses are ignored.
    pub fn free(&mut self, addr: u64) {
        let (mut start, mut size, seg, small, kind) = match self.blocks.get_mut(&addr) {
            Some(b) if b.allocated => {
                b.allocated = false;
                (addr, b.size, b.segment, b.small, b.kind)
            }
            _ => return,
        };
        self.allocated -= size;
        self.by_kind[kind.index()] -= size;
        // Merge with the previous block.
        let prev = self.blocks.range(..start).next_back().map(|(a, b)| (*a, b.size, b.segment, b.allocated));
        if let Some((pa, ps, pseg, palloc)) = prev {
            if pseg == seg && !palloc && pa + ps as u64 == start {
                self.pool_mut(small).remove(&(ps, pa));
                self.blocks.remove(&start);
                start = pa;
                size += ps;
            }
        }
        // Merge with the next block.
        let next_addr = start + size as u64;
        let next = self.blocks.get(&next_addr).map(|b| (b.size, b.segment, b.allocated));
        if let Some((ns, nseg, nalloc)) = next {
            if nseg == seg && !nalloc {
                self.pool_mut(small).remove(&(ns, next_addr));
                self.blocks.remove(&next_addr);
                size += ns;
            }
        }
        if let Some(b) = self.blocks.get_mut(&start) {
            b.size = size;
            b.allocated = false;
        }
        self.pool_mut(small).insert((size, start));
    }

    /// Moves an allocated block's bytes from one kind to another.
    pub fn set_kind(&mut self, addr: u64, kind: Kind) {
        if let Some(b) = self.blocks.get_mut(&addr) {
            if b.allocated && b.kind != kind {
                self.by_kind[b.kind.index()] -= b.size;
                self.by_kind[kind.index()] += b.size;
                b.kind = kind;
            }
        }
    }

    fn release_cached(&mut self) -> Result<(), DeviceError> {
        let whole_free: Vec<(u64, usize)> = self
            .segments
            .iter()
            .filter(|(base, size)| matches!(self.blocks.get(base), Some(b) if !b.allocated && b.size == **size))
            .map(|(b, s)| (*b, *s))
            .collect();
        if whole_free.is_empty() {
            return Ok(());
        }
        // PyTorch synchronizes before freeing: queued kernels may still use the memory.
        self.dev.synchronize()?;
        for (base, size) in whole_free {
            let small = self.blocks.get(&base).map(|b| b.small).unwrap_or(false);
            self.pool_mut(small).remove(&(size, base));
            self.blocks.remove(&base);
            self.segments.remove(&base);
            self.reserved -= size;
            self.dev.raw_free(base)?;
            self.driver_frees += 1;
        }
        Ok(())
    }

    /// `torch.cuda.empty_cache()`: returns every unused segment to the driver.
    pub fn empty_cache(&mut self) -> Result<(), DeviceError> {
        self.release_cached()
    }

    /// `torch.cuda.reset_peak_memory_stats()`.
    pub fn reset_peak(&mut self) {
        self.peak_allocated = self.allocated;
        self.peak_reserved = self.reserved;
        self.at_peak = self.by_kind;
    }

    pub fn stats(&self) -> MemStats {
        MemStats {
            allocated: self.allocated,
            peak_allocated: self.peak_allocated,
            reserved: self.reserved,
            peak_reserved: self.peak_reserved,
            by_kind: KindBytes::from_array(self.by_kind),
            at_peak: KindBytes::from_array(self.at_peak),
            driver_mallocs: self.driver_mallocs,
            driver_frees: self.driver_frees,
        }
    }

    pub fn backend(&self) -> &Rc<dyn Backend> {
        &self.dev
    }
}

/// Shared handle to the allocator; device buffers give their block back through it when dropped.
pub type AllocRef = Rc<RefCell<CachingAllocator>>;

/// One allocated block. Dropping it returns the block to the cache (never to the driver).
pub struct Buffer {
    alloc: AllocRef,
    pub addr: u64,
    /// Block size as counted by the allocator (rounded, maybe unsplit).
    pub block_bytes: usize,
    /// Bytes the tensor itself uses.
    pub bytes: usize,
    base_kind: std::cell::Cell<Kind>,
    saved: std::cell::Cell<u32>,
}

impl Buffer {
    pub fn new(alloc: &AllocRef, bytes: usize, kind: Kind) -> Result<Buffer, DeviceError> {
        let (addr, block_bytes) = alloc.borrow_mut().malloc(bytes, kind)?;
        Ok(Buffer {
            alloc: alloc.clone(),
            addr,
            block_bytes,
            bytes,
            base_kind: std::cell::Cell::new(kind),
            saved: std::cell::Cell::new(0),
        })
    }

    /// Changes what the buffer counts as when it is not saved for backward.
    pub fn set_kind(&self, kind: Kind) {
        self.base_kind.set(kind);
        if self.saved.get() == 0 {
            self.alloc.borrow_mut().set_kind(self.addr, kind);
        }
    }

    /// A graph node saved this buffer for backward.
    pub fn mark_saved(&self) {
        self.saved.set(self.saved.get() + 1);
        // Parameters stay parameters when a node saves them: they cost nothing extra.
        if self.base_kind.get() != Kind::Parameter {
            self.alloc.borrow_mut().set_kind(self.addr, Kind::Saved);
        }
    }

    /// A graph node released this buffer.
    pub fn unmark_saved(&self) {
        let n = self.saved.get().saturating_sub(1);
        self.saved.set(n);
        if n == 0 {
            self.alloc.borrow_mut().set_kind(self.addr, self.base_kind.get());
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.alloc.borrow_mut().free(self.addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::SimBackend;

    fn alloc(capacity: usize) -> AllocRef {
        Rc::new(RefCell::new(CachingAllocator::new(Rc::new(SimBackend::new(capacity)))))
    }

    #[test]
    fn rounding_and_segment_sizes_follow_pytorch() {
        assert_eq!(round_size(1), 512);
        assert_eq!(round_size(512), 512);
        assert_eq!(round_size(513), 1024);
        assert_eq!(segment_size(512), SMALL_BUFFER);
        assert_eq!(segment_size(SMALL_SIZE), SMALL_BUFFER);
        assert_eq!(segment_size(SMALL_SIZE + 512), LARGE_BUFFER);
        assert_eq!(segment_size(MIN_LARGE_ALLOC), MIN_LARGE_ALLOC);
        assert_eq!(segment_size(MIN_LARGE_ALLOC + 1), MIN_LARGE_ALLOC + ROUND_LARGE);
    }

    #[test]
    fn blocks_are_split_reused_and_merged() {
        let a = alloc(1 << 30);
        let b1 = Buffer::new(&a, 8 << 20, Kind::Output).unwrap();
        let b2 = Buffer::new(&a, 8 << 20, Kind::Output).unwrap();
        // Both 8 MiB requests come from one 20 MiB segment, split.
        let st = a.borrow().stats();
        assert_eq!(st.reserved, LARGE_BUFFER);
        assert_eq!(st.allocated, 16 << 20);
        assert_eq!(st.driver_mallocs, 1);
        // 3 MiB from the 4 MiB left would leave 1 MiB, not more than a small request: the block is
        // handed out whole and counts 4 MiB.
        let b3 = Buffer::new(&a, 3 << 20, Kind::Output).unwrap();
        assert_eq!(b3.block_bytes, 4 << 20);
        assert_eq!(a.borrow().stats().allocated, 20 << 20);
        // Nothing is left in the segment: the next request needs a new one.
        let b4 = Buffer::new(&a, (512 << 10) + (1 << 20), Kind::Output).unwrap();
        assert_eq!(b4.block_bytes, (512 << 10) + (1 << 20));
        assert_eq!(a.borrow().stats().driver_mallocs, 2);
        drop(b4);
        drop((b1, b2, b3));
        let st = a.borrow().stats();
        assert_eq!(st.allocated, 0);
        assert_eq!(st.reserved, 2 * LARGE_BUFFER, "freed blocks stay cached");
        // A 20 MiB request fits the merged segment exactly: no new driver allocation.
        let big = Buffer::new(&a, LARGE_BUFFER, Kind::Output).unwrap();
        assert_eq!(a.borrow().stats().driver_mallocs, 2);
        drop(big);
        a.borrow_mut().empty_cache().unwrap();
        let st = a.borrow().stats();
        assert_eq!(st.reserved, 0);
        assert_eq!(st.driver_frees, 2);
    }

    #[test]
    fn unsplit_block_counts_whole() {
        let a = alloc(1 << 30);
        let first = Buffer::new(&a, 19 << 20, Kind::Output).unwrap();
        drop(first);
        // 18.5 MiB from the cached 20 MiB block leaves 1.5 MiB (> 1 MiB): split.
        let b = Buffer::new(&a, (18 << 20) + (512 << 10), Kind::Output).unwrap();
        assert_eq!(b.block_bytes, (18 << 20) + (512 << 10));
        drop(b);
        // 19.5 MiB leaves 0.5 MiB: not split, the whole 20 MiB counts as allocated.
        let c = Buffer::new(&a, (19 << 20) + (512 << 10), Kind::Output).unwrap();
        assert_eq!(c.block_bytes, LARGE_BUFFER);
        assert_eq!(a.borrow().stats().allocated, LARGE_BUFFER);
    }

    #[test]
    fn kinds_and_peak_breakdown() {
        let a = alloc(1 << 30);
        let p = Buffer::new(&a, 1 << 20, Kind::Parameter).unwrap();
        let o = Buffer::new(&a, 1 << 20, Kind::Output).unwrap();
        o.mark_saved();
        let st = a.borrow().stats();
        assert_eq!(st.by_kind.parameters, 1 << 20);
        assert_eq!(st.by_kind.saved_activations, 1 << 20);
        assert_eq!(st.by_kind.outputs, 0);
        o.unmark_saved();
        assert_eq!(a.borrow().stats().by_kind.outputs, 1 << 20);
        drop(o);
        let st = a.borrow().stats();
        assert_eq!(st.allocated, 1 << 20);
        assert_eq!(st.peak_allocated, 2 << 20);
        assert_eq!(st.at_peak.parameters + st.at_peak.outputs, 2 << 20);
        drop(p);
    }

    #[test]
    fn out_of_memory_releases_cache_then_fails_cleanly() {
        let a = alloc(64 << 20);
        let x = Buffer::new(&a, 40 << 20, Kind::Output).unwrap();
        drop(x);
        // 40 MiB cached; a 50 MiB request fails at the driver, the cache is released, the retry fits.
        let y = Buffer::new(&a, 50 << 20, Kind::Output).unwrap();
        assert_eq!(a.borrow().stats().driver_frees, 1);
        // Now nothing fits: a clean out-of-memory error, and the allocator stays consistent.
        match Buffer::new(&a, 30 << 20, Kind::Output) {
            Err(DeviceError::OutOfMemory { requested, .. }) => assert_eq!(requested, 30 << 20),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("64 MiB device held 50 MiB and granted 30 more"),
        }
        drop(y);
        assert_eq!(a.borrow().stats().allocated, 0);
    }
}
