//! Replays `device_traces` the way PyTorch's caching allocator does its accounting.
//!
//! The trace records the *requested* size of each allocation, while PyTorch's statistics
//! (`memory_allocated`, `max_memory_allocated`) count the *block* a request was given: the
//! request rounded up to 512 bytes, or a whole free block when the rest would be too small
//! to split off (less than 512 bytes in the small pool and with expandable segments, at
//! most 1 MiB in the large pool). The replay keeps the free ranges of every segment the
//! trace created (or mapped) to apply the same rule, so its peak is PyTorch's own.
//! Blocks freed in the trace but allocated before it started (the history is a ring
//! buffer) and blocks alive in the final `segments` that the trace never touches are
//! counted as alive from the start.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::read::{Action, BlockState, Event, Snapshot, NO_STACK};

const SMALL_SIZE: u64 = 1 << 20;
const MIN_BLOCK: u64 = 512;
/// A line's allocations count as piling up when blocks it allocated in at least this
/// many separate rounds are still alive at the end of the trace.
pub const MIN_REPEATS: usize = 3;

fn round_size(size: u64) -> u64 {
    if size < MIN_BLOCK {
        MIN_BLOCK
    } else {
        size.div_ceil(MIN_BLOCK) * MIN_BLOCK
    }
}

/// Bytes and blocks by innermost user frame (a frame index; `u32::MAX` for none).
#[derive(Clone, Debug, Serialize)]
pub struct Line {
    pub file: String,
    pub line: u32,
    pub function: String,
    pub bytes: u64,
    pub blocks: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The recorded path, when `--source` mapped `file` onto another one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded_file: Option<String>,
    #[serde(skip)]
    pub frame: u32,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Fragmentation {
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub free_in_segments_bytes: u64,
    pub largest_free_block_bytes: u64,
    pub segments: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct FragmentationReport {
    pub at_peak_reserved: Fragmentation,
    pub at_end: Fragmentation,
    /// Set when free-but-unusable memory at the peak of reserved memory is large and
    /// expandable segments are off: the bytes they could have saved (at most).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expandable_segments_saving_bytes: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Oom {
    pub time_us: i64,
    /// Microseconds since the first event of the device's trace.
    pub time_since_start_us: i64,
    pub requested_bytes: u64,
    pub allocated_bytes: u64,
    pub at_oom: Vec<Line>,
}

/// A point of the memory-over-time series (the HTML page draws it).
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    pub time_us: i64,
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Device {
    pub device: usize,
    pub events: usize,
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub peak_time_us: i64,
    /// When the peak was reached, in microseconds since the first event of the trace.
    pub peak_time_since_start_us: i64,
    /// The trace's first event (µs, PyTorch's clock).
    pub start_time_us: i64,
    pub at_peak: Vec<Line>,
    pub retained: Vec<Line>,
    pub fragmentation: FragmentationReport,
    pub ooms: Vec<Oom>,
    #[serde(skip)]
    pub series: Vec<Sample>,
    /// With [`analyse_with_series`]: at each sample of `series`, the bytes of the first
    /// `at_peak` lines (as many as were asked for; `<no user code>` among them).
    #[serde(skip)]
    pub line_series: Vec<Vec<u64>>,
    /// The frames of `line_series`' columns (`u32::MAX`: `<no user code>`).
    #[serde(skip)]
    pub line_series_frames: Vec<u32>,
    /// Retained blocks by the functions on their stacks: what a line of that function that
    /// keeps them (a summed loss, collected outputs) holds.
    #[serde(skip)]
    pub retained_by_function: Vec<FunctionRetained>,
    /// Per user frame anywhere on the stack (not only the innermost): what the CLI and the
    /// server attach to a finding on that line.
    #[serde(skip)]
    pub inclusive: Vec<LineFigures>,
}

/// The measured figures of one line, counting every block with that line on its stack.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LineFigures {
    pub file: String,
    pub line: u32,
    pub bytes_at_peak: u64,
    pub retained_bytes: u64,
    pub retained_count: u64,
}

/// Retained blocks (those of the `retained` lines) whose stack passes through one function.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FunctionRetained {
    pub file: String,
    pub function: String,
    pub bytes: u64,
    pub blocks: u64,
    /// The most rounds any of its lines piled up in.
    pub count: u64,
    /// The lines (innermost frames) that allocated them.
    pub lines: Vec<(String, u32)>,
}

struct Live {
    size: u64,
    stack: u32,
    round: u32,
    in_trace: bool,
}

/// The allocator state during a replay.
#[derive(Default)]
struct State {
    /// Segments whose layout the replay knows (created or mapped in the trace): start -> len.
    segs: BTreeMap<u64, u64>,
    /// Free ranges inside known segments: start -> len.
    free: BTreeMap<u64, u64>,
    live: HashMap<u64, Live>,
    allocated: u64,
    reserved: i64,
}

impl State {
    fn seg_of(&self, addr: u64) -> Option<u64> {
        self.segs.range(..=addr).next_back().filter(|(s, l)| addr < *s + *l).map(|(s, _)| *s)
    }
    /// Gives back [start, start+len) as free, merged with free neighbours in the same
    /// segment (any neighbour, for expandable segments, whose mappings are contiguous).
    fn release(&mut self, mut start: u64, mut len: u64, expandable: bool) {
        let seg = self.seg_of(start);
        if let Some(&next_len) = self.free.get(&(start + len)) {
            if expandable || self.seg_of(start + len) == seg {
                self.free.remove(&(start + len));
                len += next_len;
            }
        }
        if let Some((&ps, &pl)) = self.free.range(..start).next_back() {
            if ps + pl == start && (expandable || self.seg_of(ps) == seg) {
                self.free.remove(&ps);
                start = ps;
                len += pl;
            }
        }
        self.free.insert(start, len);
    }
    fn remove_range(&mut self, start: u64, len: u64) {
        let end = start + len;
        let hits: Vec<(u64, u64)> = self.free.range(..end).rev().take_while(|(s, l)| *s + *l > start).map(|(s, l)| (*s, *l)).collect();
        for (s, l) in hits {
            self.free.remove(&s);
            if s < start {
                self.free.insert(s, start - s);
            }
            if s + l > end {
                self.free.insert(end, s + l - end);
            }
        }
    }
    /// The block size PyTorch gives a request of `req` bytes at `addr`.
    fn take(&mut self, addr: u64, req: u64, expandable: bool) -> u64 {
        let r = round_size(req);
        let Some(free_len) = self.free.remove(&addr) else {
            return r;
        };
        let remaining = free_len.saturating_sub(r);
        let split = if r <= SMALL_SIZE || expandable { remaining >= MIN_BLOCK } else { remaining > SMALL_SIZE };
        if split {
            if remaining > 0 {
                self.free.insert(addr + r, remaining);
            }
            r
        } else {
            free_len
        }
    }
    fn fragmentation(&self) -> Fragmentation {
        let reserved = self.reserved.max(0) as u64;
        Fragmentation {
            reserved_bytes: reserved,
            allocated_bytes: self.allocated,
            free_in_segments_bytes: reserved.saturating_sub(self.allocated),
            largest_free_block_bytes: self.free.values().copied().max().unwrap_or(0),
            segments: self.segs.len() as u64,
        }
    }
}

/// Analyses every device of a snapshot. `top` limits the `at_peak`/`at_oom` lists (0: all).
pub fn analyse(snap: &Snapshot, top: usize) -> Vec<Device> {
    analyse_with_series(snap, top, 0)
}

/// [`analyse`], plus the bytes over time of the first `series_lines` lines at the peak.
pub fn analyse_with_series(snap: &Snapshot, top: usize, series_lines: usize) -> Vec<Device> {
    (0..snap.traces.len())
        .filter(|&d| !snap.traces[d].is_empty() || snap.segments.iter().any(|s| s.device == d))
        .map(|d| analyse_device(snap, d, top, series_lines))
        .collect()
}

/// Replays events on `st` (allocations and frees of blocks, segments), calling `after`
/// with each event's index and, for an allocation or a free, the block's stack and the
/// change of allocated bytes.
fn replay(events: &[Event], st: &mut State, expandable: bool, mut after: impl FnMut(usize, Option<(u32, i64)>)) {
    for (i, e) in events.iter().enumerate() {
        let mut change = None;
        match e.action {
            Action::Alloc => {
                let size = st.take(e.addr, e.size, expandable);
                st.live.insert(e.addr, Live { size, stack: e.stack, round: 0, in_trace: true });
                st.allocated += size;
                change = Some((e.stack, size as i64));
            }
            Action::FreeCompleted => {
                if let Some(b) = st.live.remove(&e.addr) {
                    st.allocated -= b.size;
                    if st.seg_of(e.addr).is_some() {
                        st.release(e.addr, b.size, expandable);
                    }
                    change = Some((b.stack, -(b.size as i64)));
                }
            }
            Action::SegmentAlloc | Action::SegmentMap => {
                if e.action == Action::SegmentAlloc || !expandable || st.seg_of(e.addr).is_none() {
                    st.segs.insert(e.addr, e.size);
                }
                st.release(e.addr, e.size, expandable);
            }
            Action::SegmentFree | Action::SegmentUnmap => {
                st.remove_range(e.addr, e.size);
                if e.action == Action::SegmentFree {
                    st.segs.remove(&e.addr);
                }
            }
            _ => {}
        }
        after(i, change);
    }
}

fn group(snap: &Snapshot, blocks: impl Iterator<Item = (u64, u32)>, top: usize) -> Vec<Line> {
    let mut by: HashMap<u32, (u64, u64)> = HashMap::new();
    for (size, stack) in blocks {
        let frame = if stack == NO_STACK { u32::MAX } else { snap.stacks[stack as usize][0] };
        let e = by.entry(frame).or_default();
        e.0 += size;
        e.1 += 1;
    }
    let mut lines: Vec<Line> = by.into_iter().map(|(frame, (bytes, blocks))| line(snap, frame, bytes, blocks)).collect();
    sort_lines(&mut lines);
    if top > 0 {
        lines.truncate(top);
    }
    lines
}

fn sort_lines(lines: &mut [Line]) {
    lines.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.file.cmp(&b.file)).then(a.line.cmp(&b.line)));
}

fn line(snap: &Snapshot, frame: u32, bytes: u64, blocks: u64) -> Line {
    match snap.frames.get(frame as usize) {
        Some(f) => Line { file: f.file.to_string(), line: f.line, function: f.function.to_string(), bytes, blocks, count: None, recorded_file: None, frame },
        None => Line { file: "<no user code>".into(), line: 0, function: String::new(), bytes, blocks, count: None, recorded_file: None, frame: u32::MAX },
    }
}

/// Where the replay of one device starts: the blocks alive before the trace began (freed in
/// the trace without an allocation in it, or alive in the final `segments` and never touched
/// by it) and the bytes reserved then.
struct Start {
    expandable: bool,
    initial: Vec<(u64, u64)>,
    initial_stacks: HashMap<u64, u32>,
    reserved: i64,
}

impl Start {
    fn of(snap: &Snapshot, device: usize) -> Start {
        let events: &[Event] = snap.traces.get(device).map(|v| &v[..]).unwrap_or(&[]);
        let segments: Vec<_> = snap.segments.iter().filter(|s| s.device == device).collect();
        let expandable = snap.expandable_segments || segments.iter().any(|s| s.is_expandable);
        let mut seen: HashSet<u64> = HashSet::new();
        let mut touched: HashSet<u64> = HashSet::new();
        let mut initial: Vec<(u64, u64)> = Vec::new();
        let mut reserved_delta: i64 = 0;
        for e in events {
            match e.action {
                Action::Alloc => {
                    seen.insert(e.addr);
                    touched.insert(e.addr);
                }
                Action::FreeCompleted => {
                    if !seen.remove(&e.addr) {
                        initial.push((e.addr, round_size(e.size)));
                    }
                    touched.insert(e.addr);
                }
                Action::SegmentAlloc | Action::SegmentMap => reserved_delta += e.size as i64,
                Action::SegmentFree | Action::SegmentUnmap => reserved_delta -= e.size as i64,
                _ => {}
            }
        }
        let final_reserved: u64 = segments.iter().map(|s| s.total_size).sum();
        let mut initial_stacks: HashMap<u64, u32> = HashMap::new();
        for s in &segments {
            for b in &s.blocks {
                if b.state != BlockState::Inactive && !touched.contains(&b.address) {
                    initial.push((b.address, b.size));
                    initial_stacks.insert(b.address, b.stack);
                }
            }
        }
        let reserved = if segments.is_empty() { 0 } else { final_reserved as i64 - reserved_delta };
        Start { expandable, initial, initial_stacks, reserved }
    }

    fn fresh(&self, st: &mut State) {
        st.live.clear();
        st.allocated = 0;
        for &(addr, size) in &self.initial {
            st.live.insert(addr, Live { size, stack: self.initial_stacks.get(&addr).copied().unwrap_or(NO_STACK), round: 0, in_trace: false });
            st.allocated += size;
        }
        st.reserved = self.reserved;
    }
}

/// A device's trace replayed with PyTorch's block sizes (see the module documentation).
pub(crate) struct Levels {
    /// Bytes allocated before the first event (blocks alive before the trace began).
    pub start: u64,
    /// The blocks alive before the trace began: address and block bytes.
    pub initial: Vec<(u64, u64)>,
    /// Bytes allocated after each event.
    pub after: Vec<u64>,
    /// For an `alloc` event, the bytes of the block it was given; 0 for other events.
    pub block: Vec<u64>,
}

/// Replays `device`'s trace and returns the allocated bytes after every event, as
/// `torch.cuda.memory_allocated()` would have read them.
pub(crate) fn levels(snap: &Snapshot, device: usize) -> Levels {
    let events: &[Event] = snap.traces.get(device).map(|v| &v[..]).unwrap_or(&[]);
    let start = Start::of(snap, device);
    let mut st = State::default();
    start.fresh(&mut st);
    let level0 = st.allocated;
    let mut level = level0 as i64;
    let mut after = Vec::with_capacity(events.len());
    let mut block = vec![0u64; events.len()];
    replay(events, &mut st, start.expandable, |i, change| {
        if let Some((_, delta)) = change {
            level += delta;
            if delta > 0 && events[i].action == Action::Alloc {
                block[i] = delta as u64;
            }
        }
        after.push(level.max(0) as u64);
    });
    Levels { start: level0, initial: start.initial, after, block }
}

fn analyse_device(snap: &Snapshot, device: usize, top: usize, series_lines: usize) -> Device {
    let events: &[Event] = snap.traces.get(device).map(|v| &v[..]).unwrap_or(&[]);
    let segments: Vec<_> = snap.segments.iter().filter(|s| s.device == device).collect();
    let final_reserved: u64 = segments.iter().map(|s| s.total_size).sum();
    let start = Start::of(snap, device);
    let expandable = start.expandable;
    let fresh = |st: &mut State| start.fresh(st);

    // Pass 1: the peaks, the series, the allocation rounds, the OOMs.
    let mut st = State::default();
    fresh(&mut st);
    let start_time = events.first().map(|e| e.time_us).unwrap_or(0);
    let mut peak_alloc = (st.allocated, 0usize, start_time);
    let mut peak_res = (st.reserved.max(0) as u64, 0usize);
    let mut frag_at_peak_res = st.fragmentation();
    let mut res_pending = false;
    let mut ooms = Vec::new();
    let mut round: u32 = 0;
    let mut last_stack = NO_STACK - 1;
    let mut series = Vec::new();
    let stride = (events.len() / 4000).max(1);
    for (i, e) in events.iter().enumerate() {
        match e.action {
            Action::Alloc => {
                let size = st.take(e.addr, e.size, expandable);
                if e.stack != last_stack {
                    round += 1;
                    last_stack = e.stack;
                }
                st.live.insert(e.addr, Live { size, stack: e.stack, round, in_trace: true });
                st.allocated += size;
                if st.allocated > peak_alloc.0 {
                    peak_alloc = (st.allocated, i + 1, e.time_us);
                }
            }
            Action::FreeCompleted => {
                if let Some(b) = st.live.remove(&e.addr) {
                    st.allocated -= b.size;
                    if st.seg_of(e.addr).is_some() {
                        st.release(e.addr, b.size, expandable);
                    }
                }
            }
            Action::SegmentAlloc | Action::SegmentMap => {
                st.reserved += e.size as i64;
                if e.action == Action::SegmentAlloc || !expandable || st.seg_of(e.addr).is_none() {
                    st.segs.insert(e.addr, e.size);
                }
                st.release(e.addr, e.size, expandable);
                if st.reserved.max(0) as u64 > peak_res.0 {
                    peak_res = (st.reserved as u64, i + 1);
                    // measured once the request that needed the segment has its block
                    res_pending = true;
                }
            }
            Action::SegmentFree | Action::SegmentUnmap => {
                st.reserved -= e.size as i64;
                st.remove_range(e.addr, e.size);
                if e.action == Action::SegmentFree {
                    st.segs.remove(&e.addr);
                } else if let Some(s) = st.seg_of(e.addr) {
                    if s == e.addr && st.segs[&s] == e.size {
                        st.segs.remove(&s);
                    }
                }
            }
            Action::Oom => {
                let at = group(snap, st.live.values().map(|b| (b.size, b.stack)), top);
                ooms.push(Oom { time_us: e.time_us, time_since_start_us: e.time_us - start_time, requested_bytes: e.size, allocated_bytes: st.allocated, at_oom: at });
            }
            _ => {}
        }
        if res_pending && !matches!(e.action, Action::SegmentAlloc | Action::SegmentMap) {
            frag_at_peak_res = st.fragmentation();
            res_pending = false;
        }
        if i % stride == 0 || i + 1 == events.len() {
            series.push(Sample { time_us: e.time_us, allocated_bytes: st.allocated, reserved_bytes: st.reserved.max(0) as u64 });
        }
    }
    if res_pending {
        frag_at_peak_res = st.fragmentation();
    }
    // Retained: blocks of the trace alive at the end, from lines that allocated them in
    // several separate rounds.
    let mut by_frame: HashMap<u32, (u64, u64, HashSet<u32>)> = HashMap::new();
    for b in st.live.values().filter(|b| b.in_trace) {
        let frame = if b.stack == NO_STACK { u32::MAX } else { snap.stacks[b.stack as usize][0] };
        let e = by_frame.entry(frame).or_default();
        e.0 += b.size;
        e.1 += 1;
        e.2.insert(b.round);
    }
    let mut retained: Vec<Line> = by_frame
        .into_iter()
        .filter(|(f, (_, _, rounds))| *f != u32::MAX && rounds.len() >= MIN_REPEATS)
        .map(|(f, (bytes, blocks, rounds))| Line { count: Some(rounds.len() as u64), ..line(snap, f, bytes, blocks) })
        .collect();
    sort_lines(&mut retained);
    let end_state = st.fragmentation();

    // Pass 2: what is alive at the peak of allocated memory.
    let mut st2 = State::default();
    fresh(&mut st2);
    replay(&events[..peak_alloc.1], &mut st2, expandable, |_, _| {});
    let at_peak = group(snap, st2.live.values().map(|b| (b.size, b.stack)), top);

    let mut incl: HashMap<u32, LineFigures> = HashMap::new();
    let frames_of = |stack: u32| -> Vec<u32> {
        let mut f = if stack == NO_STACK { Vec::new() } else { snap.stacks[stack as usize].clone() };
        f.sort_unstable();
        f.dedup();
        f
    };
    for b in st2.live.values() {
        for f in frames_of(b.stack) {
            incl.entry(f).or_default().bytes_at_peak += b.size;
        }
    }
    let retained_count: HashMap<u32, u64> = retained.iter().map(|l| (l.frame, l.count.unwrap_or(0))).collect();
    for b in st.live.values().filter(|b| b.in_trace && b.stack != NO_STACK) {
        let inner = snap.stacks[b.stack as usize][0];
        if let Some(&count) = retained_count.get(&inner) {
            for f in frames_of(b.stack) {
                let e = incl.entry(f).or_default();
                e.retained_bytes += b.size;
                e.retained_count = e.retained_count.max(count);
            }
        }
    }
    // Retained blocks by the functions on their stacks.
    type Lines = std::collections::BTreeSet<(String, u32)>;
    let mut by_function: HashMap<(String, String), (FunctionRetained, Lines)> = HashMap::new();
    for b in st.live.values().filter(|b| b.in_trace && b.stack != NO_STACK) {
        let stack = &snap.stacks[b.stack as usize];
        let Some(&count) = retained_count.get(&stack[0]) else { continue };
        let inner = &snap.frames[stack[0] as usize];
        let mut seen: HashSet<(&str, &str)> = HashSet::new();
        for &f in stack {
            let fr = &snap.frames[f as usize];
            if !seen.insert((&fr.file, &fr.function)) {
                continue;
            }
            let e = by_function.entry((fr.file.to_string(), fr.function.to_string())).or_insert_with(|| {
                (FunctionRetained { file: fr.file.to_string(), function: fr.function.to_string(), ..Default::default() }, Default::default())
            });
            e.0.bytes += b.size;
            e.0.blocks += 1;
            e.0.count = e.0.count.max(count);
            e.1.insert((inner.file.to_string(), inner.line));
        }
    }
    let mut retained_by_function: Vec<FunctionRetained> = by_function
        .into_values()
        .map(|(mut f, lines)| {
            f.lines = lines.into_iter().collect();
            f
        })
        .collect();
    retained_by_function.sort_by(|a, b| a.file.cmp(&b.file).then(a.function.cmp(&b.function)));

    // Pass 3 (for the page): the top lines' bytes over time, at the series' samples, with
    // `<no user code>` (autograd's backward threads) as a line of its own.
    let mut line_series = Vec::new();
    let tops: Vec<u32> = if series_lines > 0 { at_peak.iter().map(|l| l.frame).take(series_lines).collect() } else { Vec::new() };
    if series_lines > 0 {
        let frame_of = |stack: u32| if stack == NO_STACK { u32::MAX } else { snap.stacks[stack as usize][0] };
        let mut cur = vec![0u64; tops.len()];
        let mut rows = Vec::new();
        let mut st3 = State::default();
        fresh(&mut st3);
        for b in st3.live.values() {
            if let Some(i) = tops.iter().position(|t| *t == frame_of(b.stack)) {
                cur[i] += b.size;
            }
        }
        let n = events.len();
        replay(events, &mut st3, expandable, |i, change| {
            if let Some((stack, delta)) = change {
                if let Some(k) = tops.iter().position(|t| *t == frame_of(stack)) {
                    cur[k] = cur[k].wrapping_add_signed(delta);
                }
            }
            if i % stride == 0 || i + 1 == n {
                rows.push(cur.clone());
            }
        });
        line_series = rows;
    }
    let mut inclusive: Vec<LineFigures> = incl
        .into_iter()
        .map(|(f, mut fig)| {
            let fr = &snap.frames[f as usize];
            fig.file = fr.file.to_string();
            fig.line = fr.line;
            fig
        })
        .collect();
    inclusive.sort_by(|a, b| a.file.cmp(&b.file).then(a.line.cmp(&b.line)));

    // At the end: the final `segments` when the snapshot has them (exact), else the replay.
    let at_end = if segments.is_empty() {
        end_state
    } else {
        let mut f = Fragmentation { reserved_bytes: final_reserved, segments: segments.len() as u64, ..Default::default() };
        for s in &segments {
            for b in &s.blocks {
                match b.state {
                    BlockState::Inactive => {
                        f.free_in_segments_bytes += b.size;
                        f.largest_free_block_bytes = f.largest_free_block_bytes.max(b.size);
                    }
                    _ => f.allocated_bytes += b.size,
                }
            }
        }
        f
    };
    // Expandable segments help when memory reserved at its peak is mostly free but in
    // pieces no request could use: say so when that is at least a quarter of it and 64 MiB.
    let unusable = frag_at_peak_res.free_in_segments_bytes;
    let saving = (!expandable && unusable >= 64 << 20 && unusable * 4 >= frag_at_peak_res.reserved_bytes)
        .then(|| peak_res.0.saturating_sub(peak_alloc.0));
    Device {
        device,
        events: events.len(),
        peak_allocated_bytes: peak_alloc.0,
        peak_reserved_bytes: peak_res.0,
        peak_time_us: peak_alloc.2,
        peak_time_since_start_us: peak_alloc.2 - start_time,
        start_time_us: start_time,
        at_peak,
        retained,
        fragmentation: FragmentationReport { at_peak_reserved: frag_at_peak_res, at_end, expandable_segments_saving_bytes: saving.filter(|s| *s > 0) },
        ooms,
        series,
        line_series,
        line_series_frames: tops,
        retained_by_function,
        inclusive,
    }
}
