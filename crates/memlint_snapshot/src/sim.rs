//! A simulation of PyTorch's CUDA caching allocator (`c10/cuda/CUDACachingAllocator.cpp`,
//! default settings), to replay a recorded trace with other allocation sizes: what the
//! allocator would have reserved, and whether it would have run out of memory under a limit
//! (`torch.cuda.set_per_process_memory_fraction`).
//!
//! What it follows, as the allocator does with its default configuration:
//! - requests are rounded up to 512 bytes; those of at most 1 MiB use the small pool, the
//!   others the large pool;
//! - a request takes the smallest free block of its pool that fits (the lowest address among
//!   equal sizes), and the block is split when the rest is at least 512 bytes (small pool) or
//!   more than 1 MiB (large pool); otherwise the whole block is handed out and counted as
//!   allocated;
//! - with no free block, a new segment is reserved: 2 MiB for the small pool, 20 MiB for
//!   requests under 10 MiB, else the request rounded up to 2 MiB;
//! - a freed block merges with its free neighbours in the same segment; segments stay reserved
//!   until `empty_cache()` or until a new segment would pass the limit, when every segment
//!   that is entirely free is released and the reservation is tried once more (then: out of
//!   memory).
//!
//! Not simulated: streams (one stream is assumed), `max_split_size_mb`,
//! `roundup_power2_divisions`, `garbage_collection_threshold`, CUDA graphs' private pools.
//! Expandable segments are approximated: one segment per pool that grows by 2 MiB (small) or
//! 20 MiB (large) pages, blocks split at 512 bytes in both pools.

use std::collections::{BTreeMap, BTreeSet};

pub const MIN_BLOCK: u64 = 512;
pub const SMALL_SIZE: u64 = 1 << 20;
const SMALL_BUFFER: u64 = 2 << 20;
const LARGE_BUFFER: u64 = 20 << 20;
const MIN_LARGE_ALLOC: u64 = 10 << 20;
const ROUND_LARGE: u64 = 2 << 20;

/// The size PyTorch's allocator rounds a request to.
pub fn round_size(size: u64) -> u64 {
    if size < MIN_BLOCK {
        MIN_BLOCK
    } else {
        size.div_ceil(MIN_BLOCK) * MIN_BLOCK
    }
}

/// The segment `cudaMalloc`ed for a rounded request that no free block fits.
pub fn allocation_size(size: u64) -> u64 {
    if size <= SMALL_SIZE {
        SMALL_BUFFER
    } else if size < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        size.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }
}

#[derive(Clone, Copy, Debug)]
struct SimBlock {
    size: u64,
    segment: u64,
    allocated: bool,
}

#[derive(Clone, Copy, Debug)]
struct SimSegment {
    size: u64,
    large: bool,
}

/// A request the allocator could not serve under its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    pub requested: u64,
    pub allocated: u64,
    pub reserved: u64,
}

/// The allocator's state.
#[derive(Clone, Debug, Default)]
pub struct AllocatorSim {
    limit: Option<u64>,
    expandable: bool,
    blocks: BTreeMap<u64, SimBlock>,
    /// Free blocks: (large pool, size, address), so that the first at or after (pool, size, 0)
    /// is the best fit.
    free: BTreeSet<(bool, u64, u64)>,
    segments: BTreeMap<u64, SimSegment>,
    /// Expandable segments: the one segment of each pool (small, large).
    grow: [Option<u64>; 2],
    next_address: u64,
    pub allocated: u64,
    pub reserved: u64,
    pub peak_allocated: u64,
    pub peak_reserved: u64,
    /// How many times memory had to be released to stay under the limit.
    pub releases: u64,
    /// Where the next segment goes (the address `cudaMalloc` returned in the recording).
    hint: Option<u64>,
}

impl AllocatorSim {
    /// An allocator that may reserve at most `limit` bytes (None: no limit).
    pub fn new(limit: Option<u64>, expandable: bool) -> Self {
        AllocatorSim { limit, expandable, next_address: 1 << 60, ..Default::default() }
    }

    fn fits(&self, more: u64) -> bool {
        self.limit.is_none_or(|l| self.reserved + more <= l)
    }

    /// Allocates `requested` bytes; returns the block's address and the bytes counted as
    /// allocated (what `torch.cuda.memory_allocated()` adds).
    pub fn malloc(&mut self, requested: u64) -> Result<(u64, u64), OutOfMemory> {
        let size = round_size(requested);
        let large = size > SMALL_SIZE;
        let found = self.free.range((large, size, 0)..).next().copied().filter(|f| f.0 == large);
        let (addr, block_size) = match found {
            Some((_, s, a)) => {
                self.free.remove(&(large, s, a));
                (a, s)
            }
            None => self.new_block(large, size).ok_or(OutOfMemory { requested, allocated: self.allocated, reserved: self.reserved })?,
        };
        let remaining = block_size - size;
        let split = if !large || self.expandable { remaining >= MIN_BLOCK } else { remaining > SMALL_SIZE };
        let segment = self.blocks[&addr].segment;
        let given = if split {
            self.blocks.insert(addr + size, SimBlock { size: remaining, segment, allocated: false });
            self.free.insert((large, remaining, addr + size));
            size
        } else {
            block_size
        };
        self.blocks.insert(addr, SimBlock { size: given, segment, allocated: true });
        self.allocated += given;
        self.peak_allocated = self.peak_allocated.max(self.allocated);
        Ok((addr, given))
    }

    /// A free block of at least `size` bytes from new memory (a new segment, or more pages of
    /// an expandable one), releasing cached segments first when the limit requires it.
    fn new_block(&mut self, large: bool, size: u64) -> Option<(u64, u64)> {
        if self.expandable {
            return self.grow_block(large, size);
        }
        let alloc = allocation_size(size);
        if !self.fits(alloc) {
            self.release_cached();
            self.releases += 1;
            if !self.fits(alloc) {
                return None;
            }
        }
        // the recorded address when it is free (best fit prefers lower addresses among blocks
        // of one size, so the order of segments matters), else a fresh one
        let hinted = self.hint.take().filter(|&h| {
            let end = h + alloc;
            self.segments.range(..end).next_back().is_none_or(|(a, s)| a + s.size.max(1) <= h) && h + alloc < (1 << 59)
        });
        let addr = match hinted {
            Some(h) => h,
            None => {
                let a = self.next_address;
                // leave a gap so that segments are never adjacent
                self.next_address += alloc.div_ceil(ROUND_LARGE) * ROUND_LARGE + ROUND_LARGE;
                a
            }
        };
        self.segments.insert(addr, SimSegment { size: alloc, large });
        self.blocks.insert(addr, SimBlock { size: alloc, segment: addr, allocated: false });
        self.reserve(alloc);
        Some((addr, alloc))
    }

    fn reserve(&mut self, bytes: u64) {
        self.reserved += bytes;
        self.peak_reserved = self.peak_reserved.max(self.reserved);
    }

    /// Expandable segments: map pages at the end of the pool's segment, merged with a free
    /// block that ends there.
    fn grow_block(&mut self, large: bool, size: u64) -> Option<(u64, u64)> {
        let page = if large { LARGE_BUFFER } else { SMALL_BUFFER };
        let pool = large as usize;
        let seg = match self.grow[pool] {
            Some(s) => s,
            None => {
                let addr = self.next_address;
                self.next_address += 1 << 44;
                self.segments.insert(addr, SimSegment { size: 0, large });
                self.grow[pool] = Some(addr);
                addr
            }
        };
        let end = seg + self.segments[&seg].size;
        // a free block at the end of the mapped range grows with the new pages
        let tail = self.blocks.range(..end).next_back().filter(|(a, b)| b.segment == seg && !b.allocated && **a + b.size == end).map(|(a, b)| (*a, b.size));
        let have = tail.map(|t| t.1).unwrap_or(0);
        let more = (size - have).div_ceil(page) * page;
        if !self.fits(more) {
            self.release_cached();
            self.releases += 1;
            if !self.fits(more) {
                return None;
            }
        }
        let end = seg + self.segments[&seg].size;
        let tail = self.blocks.range(..end).next_back().filter(|(a, b)| b.segment == seg && !b.allocated && **a + b.size == end).map(|(a, b)| (*a, b.size));
        let have = tail.map(|t| t.1).unwrap_or(0);
        let more = (size.saturating_sub(have)).div_ceil(page) * page;
        self.segments.get_mut(&seg).expect("the pool's segment").size += more;
        self.reserve(more);
        let (addr, len) = match tail {
            Some((a, l)) => {
                self.free.remove(&(large, l, a));
                (a, l + more)
            }
            None => (end, more),
        };
        self.blocks.insert(addr, SimBlock { size: len, segment: seg, allocated: false });
        Some((addr, len))
    }

    /// The address `cudaMalloc` gave the next segment in the recording: used for the next new
    /// segment when that range is free (addresses below 2^59 only; fresh ones are above).
    pub fn hint_next_segment(&mut self, addr: u64) {
        self.hint = Some(addr);
    }

    /// Frees the block at `addr` (as returned by [`AllocatorSim::malloc`]).
    pub fn free(&mut self, addr: u64) {
        let Some(mut b) = self.blocks.get(&addr).copied().filter(|b| b.allocated) else { return };
        self.allocated -= b.size;
        b.allocated = false;
        let large = self.segments[&b.segment].large;
        let mut start = addr;
        if let Some(n) = self.blocks.get(&(addr + b.size)).copied().filter(|n| n.segment == b.segment && !n.allocated) {
            self.free.remove(&(large, n.size, addr + b.size));
            self.blocks.remove(&(addr + b.size));
            b.size += n.size;
        }
        if let Some((&pa, &p)) = self.blocks.range(..addr).next_back() {
            if p.segment == b.segment && !p.allocated && pa + p.size == addr {
                self.free.remove(&(large, p.size, pa));
                self.blocks.remove(&addr);
                start = pa;
                b.size += p.size;
            }
        }
        self.blocks.insert(start, b);
        self.free.insert((large, b.size, start));
    }

    /// `torch.cuda.empty_cache()`: releases every segment that is entirely free (for
    /// expandable segments, the free pages at the end of each pool's segment).
    pub fn release_cached(&mut self) {
        if self.expandable {
            for seg in self.grow.iter().flatten().copied().collect::<Vec<_>>() {
                let s = self.segments[&seg];
                let end = seg + s.size;
                let tail = self.blocks.range(..end).next_back().filter(|(a, b)| b.segment == seg && !b.allocated && **a + b.size == end).map(|(a, b)| (*a, b.size));
                if let Some((a, l)) = tail {
                    self.free.remove(&(s.large, l, a));
                    self.blocks.remove(&a);
                    self.segments.get_mut(&seg).expect("segment").size -= l;
                    self.reserved -= l;
                }
            }
            return;
        }
        let whole: Vec<(u64, SimSegment)> = self
            .segments
            .iter()
            .filter(|(a, s)| self.blocks.get(a).is_some_and(|b| !b.allocated && b.size == s.size))
            .map(|(a, s)| (*a, *s))
            .collect();
        for (a, s) in whole {
            self.free.remove(&(s.large, s.size, a));
            self.blocks.remove(&a);
            self.segments.remove(&a);
            self.reserved -= s.size;
        }
    }

    /// The segment holding `addr`: its start and size.
    pub fn segment_of(&self, addr: u64) -> Option<(u64, u64)> {
        let seg = self.blocks.get(&addr)?.segment;
        Some((seg, self.segments.get(&seg)?.size))
    }

    /// Free bytes inside reserved segments.
    pub fn cached(&self) -> u64 {
        self.reserved - self.allocated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_requests_share_a_2_mib_segment_and_are_rounded() {
        let mut s = AllocatorSim::new(None, false);
        let (a, n) = s.malloc(100).unwrap();
        assert_eq!(n, 512);
        let (b, _) = s.malloc(1000).unwrap();
        assert_eq!(b, a + 512);
        assert_eq!(s.reserved, 2 << 20);
        assert_eq!(s.allocated, 512 + 1024);
    }

    #[test]
    fn large_requests_take_whole_blocks_when_the_rest_is_at_most_1_mib() {
        let mut s = AllocatorSim::new(None, false);
        // 19.5 MiB in a 20 MiB segment: the rest (0.5 MiB) is not split off
        let (_, n) = s.malloc(19 * (1 << 20) + (1 << 19)).unwrap();
        assert_eq!(n, 20 << 20);
        // 5 MiB in a new 20 MiB segment: split, 15 MiB left free
        let (a, n) = s.malloc(5 << 20).unwrap();
        assert_eq!(n, 5 << 20);
        assert_eq!(s.reserved, 40 << 20);
        s.free(a);
        // the freed 5 MiB merged back: a 20 MiB free block
        let (b, n) = s.malloc(12 << 20).unwrap();
        assert_eq!((b, n), (a, 12 << 20));
    }

    #[test]
    fn best_fit_takes_the_smallest_block_that_fits() {
        let mut s = AllocatorSim::new(None, false);
        let (x, _) = s.malloc(30 << 20).unwrap();
        let (y, _) = s.malloc(12 << 20).unwrap();
        s.free(x);
        s.free(y);
        let (z, _) = s.malloc(11 << 20).unwrap();
        assert_eq!(z, y);
    }

    #[test]
    fn a_limit_releases_cached_segments_then_runs_out() {
        let mut s = AllocatorSim::new(Some(64 << 20), false);
        let (a, _) = s.malloc(40 << 20).unwrap();
        s.free(a);
        // 50 MiB does not fit the cached 40 MiB block; 40 + 50 > 64: the cache is released
        let (_, n) = s.malloc(50 << 20).unwrap();
        assert_eq!(n, 50 << 20);
        assert_eq!(s.reserved, 50 << 20);
        assert_eq!(s.releases, 1);
        let e = s.malloc(20 << 20).unwrap_err();
        assert_eq!(e.reserved, 50 << 20);
    }

    #[test]
    fn empty_cache_keeps_segments_in_use() {
        let mut s = AllocatorSim::new(None, false);
        let (a, _) = s.malloc(4 << 20).unwrap();
        let (b, _) = s.malloc(30 << 20).unwrap();
        s.free(b);
        s.release_cached();
        assert_eq!(s.reserved, 20 << 20);
        s.free(a);
        s.release_cached();
        assert_eq!(s.reserved, 0);
        assert_eq!(s.peak_reserved, 50 << 20);
    }

    #[test]
    fn expandable_segments_grow_by_pages() {
        let mut s = AllocatorSim::new(None, true);
        s.malloc(30 << 20).unwrap();
        assert_eq!(s.reserved, 40 << 20);
        s.malloc(5 << 20).unwrap();
        assert_eq!(s.reserved, 40 << 20, "the 10 MiB left in the mapped pages serve it");
        s.malloc(100).unwrap();
        assert_eq!(s.reserved, 42 << 20);
    }
}
