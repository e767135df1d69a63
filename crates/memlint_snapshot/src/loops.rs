//! The training (or evaluation) loop of a recorded run: where its iterations start, what was
//! allocated before it and stays alive (the parameters), and how much memory one iteration
//! needs on top of that (its activations).
//!
//! # Method
//! 1. **Iterations repeat.** Each allocation of the trace gets a signature: its stack of user
//!    frames (not its size, so batches of varying length still repeat). The period is the shift
//!    under which the longest run of signatures repeats exactly (candidates are the distances
//!    between repeated signatures); that run must cover three periods at least, or there is no
//!    loop.
//! 2. **Where an iteration starts**, from the stacks: the frames shared by every allocation of
//!    one period are the call path to the loop; the next frame down is the loop's body, and its
//!    lines follow the body's statements. An iteration starts at the event of the body's first
//!    allocating (or freeing) line that follows an event of a later line: the top of the loop in
//!    source order. Frees carry the stack of the statement that freed them, so a
//!    `zero_grad(set_to_none=True)` at the top belongs to its own iteration. A trace without
//!    stacks falls back to the point of each period where allocated memory is lowest.
//! 3. **Measured iterations** are the complete ones (from one start to the next) that make exactly
//!    one period of the repeating run, so the first (lazy allocations: workspaces, gradients,
//!    optimizer state) and the last (no next start) are left out.
//! 4. **Parameters**: the blocks allocated before the loop's first event (or alive before the
//!    recording began) and still alive at the end of the last measured iteration: model
//!    construction and `.cuda()`/`.to()`, plus any other tensor made before the loop and kept.
//! 5. **Activations per batch**: in each measured iteration, from its start to the backward
//!    pass (the first allocation without a Python stack: autograd's own thread makes them), the
//!    most bytes alive at once of the blocks the iteration itself allocated (the batch, the
//!    forward's outputs and what autograd saves of them, the loss); the median over the measured
//!    iterations. Frees of older blocks in that span (`zero_grad(set_to_none=True)`, the previous
//!    iteration's graph released by rebinding `loss`) do not lower it, so the figure does not
//!    depend on where the loop frees them. Also reported: the rise above the level at the top of
//!    the loop, PyTorch's `max_memory_allocated()` during an iteration minus `memory_allocated()`
//!    before it (which does depend on it).
//!
//! Bytes are PyTorch's block bytes (the replay of [`crate::analysis`]), as
//! `torch.cuda.memory_allocated()` counts them.

use std::collections::HashMap;

use serde::Serialize;

use crate::analysis::levels;
use crate::read::{Action, Event, Snapshot, NO_STACK};

/// What [`find_loop`] read from a snapshot. Field names are part of `memlint verify`'s JSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoopFigures {
    /// The device whose trace has the loop (the one with the most allocations).
    pub device: usize,
    /// The loop's body: the user function whose lines repeat every iteration and the lines
    /// seen (None when the trace has no stacks).
    pub file: Option<String>,
    pub function: Option<String>,
    pub first_line: Option<u32>,
    pub last_line: Option<u32>,
    /// Iteration starts found in the trace.
    pub iterations: usize,
    /// Complete iterations that repeat the loop's allocations exactly (the measured ones).
    pub measured_iterations: usize,
    pub allocations_per_iteration: usize,
    /// Bytes allocated before the loop and alive throughout it (the parameters).
    pub parameter_bytes: u64,
    pub parameter_blocks: u64,
    /// No allocation was recorded before the loop: the recording began inside it (or after
    /// the model was made), so what was alive before it is counted as parameters and may hold
    /// gradients and optimizer state too.
    pub recording_starts_in_loop: bool,
    /// The most bytes alive at once, from an iteration's start to its backward pass, of the
    /// blocks the iteration allocated (median over the measured iterations).
    pub activation_bytes: u64,
    pub activation_bytes_min: u64,
    pub activation_bytes_max: u64,
    /// PyTorch's `max_memory_allocated()` during an iteration minus `memory_allocated()`
    /// before it (median).
    pub rise_bytes: u64,
    /// `memory_allocated()` at the top of the loop (median).
    pub level_at_top_bytes: u64,
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Where a recorded loop is: its device, where its body starts, where each iteration starts,
/// and the complete iterations that repeat exactly (see the module documentation, steps 1-3).
#[derive(Clone, Debug)]
pub(crate) struct LoopShape {
    pub device: usize,
    /// Index of the loop's first event (the body's first event, or the first iteration start).
    pub loop_start: usize,
    /// Event index of each iteration start.
    pub tops: Vec<usize>,
    /// Complete iterations that repeat the loop's allocations exactly: (start, next start).
    pub measured: Vec<(usize, usize)>,
    /// Allocations per iteration.
    pub period: usize,
    /// The loop's body, when the stacks tell it.
    pub body: Option<Body>,
    /// The iterations were told apart by the body's lines (else by memory levels, as for a
    /// trace without stacks).
    pub by_stacks: bool,
}

/// Finds the loop of the device with the most allocations; the error says why there is none
/// (in words that follow "no training loop found: ").
pub(crate) fn loop_shape(snap: &Snapshot) -> Result<LoopShape, String> {
    loop_shape_with(snap, 3)
}

/// [`loop_shape`] where the repeating run of allocations may cover as few as `min_periods`
/// periods (2: three iterations of which the last two repeat, as in a short recording whose
/// first iterations differ: lazy optimizer state, steps a GradScaler skipped).
pub(crate) fn loop_shape_with(snap: &Snapshot, min_periods: usize) -> Result<LoopShape, String> {
    let device = (0..snap.traces.len())
        .max_by_key(|&d| (snap.traces[d].iter().filter(|e| e.action == Action::Alloc).count(), std::cmp::Reverse(d)))
        .ok_or("the snapshot's device_traces are empty")?;
    let events: &[Event] = &snap.traces[device];
    let allocs: Vec<usize> = (0..events.len()).filter(|&i| events[i].action == Action::Alloc).collect();
    if allocs.len() < 2 {
        return Err(format!("device {device}'s trace has {} allocation(s); a loop repeats its allocations", allocs.len()));
    }
    // Signatures are stacks, not sizes: batches of varying length repeat the same statements.
    let sig: Vec<u32> = allocs.iter().map(|&i| events[i].stack).collect();

    // 1. The period.
    let (p, run_start, run) = period(&sig, min_periods).ok_or_else(|| {
        format!("no sequence of allocations repeats in device {device}'s trace ({} allocations): record at least 4 iterations of the loop", allocs.len())
    })?;
    let region = (allocs[run_start], allocs[run_start + run + p - 1]);

    // 2. The loop's body, from the stacks of one period.
    let cycle: Vec<&[u32]> = allocs[run_start..run_start + p]
        .iter()
        .filter(|&&i| events[i].stack != NO_STACK)
        .map(|&i| &snap.stacks[events[i].stack as usize][..])
        .collect();
    // Lines from the frees of that span too: a `zero_grad()` at the top frees before the
    // first allocation.
    let span_end = allocs.get(run_start + p).copied().unwrap_or(events.len());
    let span: Vec<&[u32]> = events[allocs[run_start]..span_end]
        .iter()
        .filter(|e| e.stack != NO_STACK && matches!(e.action, Action::Alloc | Action::FreeRequested))
        .map(|e| &snap.stacks[e.stack as usize][..])
        .collect();
    let body = loop_body(snap, &cycle, &span);
    let mut tops: Vec<usize> = Vec::new();
    let mut loop_start = None;
    if let Some(b) = &body {
        let mut prev: Option<u32> = None;
        for (i, e) in events.iter().enumerate() {
            if let Some(line) = b.line_of(snap, e) {
                loop_start.get_or_insert(i);
                if line == b.first_line && prev.is_none_or(|l| l != b.first_line) {
                    tops.push(i);
                }
                prev = Some(line);
            }
        }
    }
    let by_stacks = tops.len() >= 2;
    if !by_stacks {
        // No stacks to follow: each period starts where allocated memory is lowest.
        let lv = levels(snap, device);
        let level_before = |i: usize| if i == 0 { lv.start } else { lv.after[i - 1] };
        let phase = (0..p).min_by_key(|&f| (level_before(allocs[run_start + f]), f)).unwrap_or(0);
        tops = (run_start + phase..run_start + run + p).step_by(p).map(|k| allocs[k]).collect();
        loop_start = tops.first().copied();
    }
    let loop_start = loop_start.unwrap_or(0);

    // 3. The measured iterations.
    let allocs_in = |a: usize, b: usize| allocs.partition_point(|&i| i < b) - allocs.partition_point(|&i| i < a);
    let measured: Vec<(usize, usize)> = tops
        .windows(2)
        .map(|w| (w[0], w[1]))
        .filter(|&(a, b)| a >= region.0 && allocs_in(a, b) == p && allocs[allocs.partition_point(|&i| i < b) - 1] <= region.1)
        .collect();
    if measured.is_empty() {
        return Err(format!(
            "{} iteration start(s) found in device {device}'s trace, but no complete iteration that repeats the loop's {p} allocations",
            tops.len()
        ));
    }
    let body = body.filter(|_| by_stacks);
    Ok(LoopShape { device, loop_start, tops, measured, period: p, body, by_stacks })
}

/// Finds the repeating loop of the device with the most allocations; the error says why
/// there is none (in words that follow "no training loop found: ").
pub fn find_loop(snap: &Snapshot) -> Result<LoopFigures, String> {
    let shape = loop_shape(snap)?;
    let LoopShape { device, loop_start, ref tops, ref measured, period: p, ref body, .. } = shape;
    let body = body.as_ref().map(|b| (b.function_frame, b.first_line, b.last_line));
    let events: &[Event] = &snap.traces[device];
    let allocs: Vec<usize> = (0..events.len()).filter(|&i| events[i].action == Action::Alloc).collect();
    let lv = levels(snap, device);
    let level_before = |i: usize| if i == 0 { lv.start } else { lv.after[i - 1] };

    // When each block is freed (by event index), and which allocation a free ends.
    let mut free_at = vec![usize::MAX; events.len()];
    let mut alloc_of = vec![usize::MAX; events.len()];
    let mut live: HashMap<u64, usize> = HashMap::new();
    let mut initial_freed: HashMap<u64, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        match e.action {
            Action::Alloc => {
                live.insert(e.addr, i);
            }
            Action::FreeCompleted => match live.remove(&e.addr) {
                Some(a) => {
                    free_at[a] = i;
                    alloc_of[i] = a;
                }
                None => {
                    initial_freed.entry(e.addr).or_insert(i);
                }
            },
            _ => {}
        }
    }

    // 5. Per measured iteration: transient peak, rise above the top, level at the top.
    let (mut acts, mut rises, mut tops_level) = (Vec::new(), Vec::new(), Vec::new());
    for &(a, b) in measured {
        let before = level_before(a);
        let peak = lv.after[a..b].iter().copied().max().unwrap_or(before).max(before);
        // The forward part: up to the first allocation of the backward pass, which autograd's
        // thread makes with no Python stack (the whole iteration when there is none).
        let fwd_end = (a..b).find(|&i| events[i].action == Action::Alloc && events[i].stack == NO_STACK).unwrap_or(b);
        let (mut cur, mut most) = (0u64, 0u64);
        for i in a..fwd_end {
            match events[i].action {
                Action::Alloc => {
                    cur += lv.block[i];
                    most = most.max(cur);
                }
                Action::FreeCompleted if alloc_of[i] != usize::MAX && alloc_of[i] >= a => {
                    cur = cur.saturating_sub(lv.block[alloc_of[i]]);
                }
                _ => {}
            }
        }
        acts.push(most);
        rises.push(peak - before);
        tops_level.push(before);
    }

    // 4. Parameters: allocated before the loop, alive at the end of the last measured iteration.
    let end = measured.last().map(|m| m.1).unwrap_or(events.len());
    let (mut parameter_bytes, mut parameter_blocks) = (0u64, 0u64);
    for &(addr, size) in &lv.initial {
        if initial_freed.get(&addr).is_none_or(|&f| f >= end) {
            parameter_bytes += size;
            parameter_blocks += 1;
        }
    }
    for &i in allocs.iter().take_while(|&&i| i < loop_start) {
        if free_at[i] >= end {
            parameter_bytes += lv.block[i];
            parameter_blocks += 1;
        }
    }
    let recording_starts_in_loop = !events[..loop_start].iter().any(|e| e.action == Action::Alloc);

    let frame = body.map(|b| &snap.frames[b.0 as usize]);
    Ok(LoopFigures {
        device,
        file: frame.map(|f| f.file.to_string()),
        function: frame.map(|f| f.function.to_string()),
        first_line: body.map(|b| b.1),
        last_line: body.map(|b| b.2),
        iterations: tops.len(),
        measured_iterations: measured.len(),
        allocations_per_iteration: p,
        parameter_bytes,
        parameter_blocks,
        recording_starts_in_loop,
        activation_bytes: median(acts.clone()),
        activation_bytes_min: acts.iter().copied().min().unwrap_or(0),
        activation_bytes_max: acts.iter().copied().max().unwrap_or(0),
        rise_bytes: median(rises),
        level_at_top_bytes: median(tops_level),
    })
}

/// The shortest shift `p` under which the longest run of equal signatures (`sig[j] ==
/// sig[j + p]`) covers the most allocations, with that run's start and length; None when no
/// run covers `min_periods` periods (with the period itself: that many iterations plus one).
fn period(sig: &[u32], min_periods: usize) -> Option<(usize, usize, usize)> {
    let n = sig.len();
    // Candidate shifts: distances between an occurrence of a signature and its next ones (up
    // to the 8th next: a statement that allocates m times an iteration repeats at its m-th
    // next occurrence; one that allocates more often, such as the backward pass's, does not
    // say the period).
    let mut positions: HashMap<u32, Vec<usize>> = HashMap::new();
    for (j, s) in sig.iter().enumerate() {
        positions.entry(*s).or_default().push(j);
    }
    let mut gaps: HashMap<usize, usize> = HashMap::new();
    for pos in positions.values() {
        for m in 1..=8 {
            for w in pos.windows(m + 1) {
                *gaps.entry(w[m] - w[0]).or_default() += 1;
            }
        }
    }
    let mut cands: Vec<(usize, usize)> = gaps.into_iter().collect();
    cands.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    cands.truncate(64);
    let mut best: Option<(usize, usize, usize)> = None;
    for (p, _) in cands {
        if p == 0 || p >= n {
            continue;
        }
        let (mut cur, mut top, mut top_start) = (0usize, 0usize, 0usize);
        for j in 0..n - p {
            if sig[j] == sig[j + p] {
                cur += 1;
                if cur > top {
                    top = cur;
                    top_start = j + 1 - cur;
                }
            } else {
                cur = 0;
            }
        }
        // Three iterations at least: one period seen twice more (or once more, with 2).
        if top < (min_periods - 1).max(1) * p {
            continue;
        }
        let better = match best {
            None => true,
            Some((bp, _, brun)) => top + p > brun + bp || (top + p == brun + bp && p < bp),
        };
        if better {
            best = Some((p, top_start, top));
        }
    }
    best
}

/// The loop's body: the frames every allocation of one period shares (outermost first), and
/// the function one frame further in, with the lines seen there.
#[derive(Clone, Debug)]
pub(crate) struct Body {
    prefix: Vec<u32>,
    pub function_frame: u32,
    pub first_line: u32,
    pub last_line: u32,
}

impl Body {
    /// The line of the body this event's statement is on (None: not an event of the body).
    pub fn line_of(&self, snap: &Snapshot, e: &Event) -> Option<u32> {
        if e.stack == NO_STACK {
            return None;
        }
        let st = &snap.stacks[e.stack as usize];
        let d = self.prefix.len();
        if st.len() <= d || !st.iter().rev().take(d).eq(self.prefix.iter()) {
            return None;
        }
        let f = &snap.frames[st[st.len() - 1 - d] as usize];
        let g = &snap.frames[self.function_frame as usize];
        (f.file == g.file && f.function == g.function && (self.first_line..=self.last_line).contains(&f.line)).then_some(f.line)
    }
}

fn loop_body(snap: &Snapshot, cycle: &[&[u32]], span: &[&[u32]]) -> Option<Body> {
    let first = cycle.first()?;
    // The common prefix, outermost first (stacks are stored innermost first).
    let mut prefix: Vec<u32> = first.iter().rev().copied().collect();
    for st in &cycle[1..] {
        let k = prefix.iter().zip(st.iter().rev()).take_while(|(a, b)| a == b).count();
        prefix.truncate(k);
    }
    // Every stack is the prefix itself: the body is the prefix's last frame (one line, so the
    // iterations cannot be told apart by line; the caller falls back).
    if cycle.iter().all(|st| st.len() == prefix.len()) {
        prefix.pop()?;
    }
    let d = prefix.len();
    let mut count: HashMap<(&str, &str), (usize, u32)> = HashMap::new();
    for st in cycle.iter().filter(|st| st.len() > d) {
        let id = st[st.len() - 1 - d];
        let f = &snap.frames[id as usize];
        let e = count.entry((&f.file, &f.function)).or_insert((0, id));
        e.0 += 1;
    }
    let (&(file, function), &(_, function_frame)) = count.iter().max_by_key(|(k, v)| (v.0, std::cmp::Reverse(*k)))?;
    let lines: Vec<u32> = span
        .iter()
        .filter(|st| st.len() > d && st.iter().rev().take(d).eq(prefix.iter()))
        .map(|st| &snap.frames[st[st.len() - 1 - d] as usize])
        .filter(|f| &*f.file == file && &*f.function == function)
        .map(|f| f.line)
        .collect();
    Some(Body { prefix, function_frame, first_line: *lines.iter().min()?, last_line: *lines.iter().max()? })
}
