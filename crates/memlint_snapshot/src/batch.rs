//! The batch that fits: from one recorded run of a few training steps, the peak at other batch
//! sizes and the largest batch under a memory budget.
//!
//! # Method
//! 1. **The loop** ([`crate::loops`]): where it starts and where each iteration starts.
//! 2. **What does not depend on the batch** (*fixed*): every allocation made before the loop
//!    (the model, its parameters and buffers) or alive before the recording began; in the loop,
//!    an allocation made while PyTorch's `Optimizer.step` ran (optimizer state, the foreach
//!    temporaries; PyTorch annotates those spans in the snapshot), one made once (its stack and
//!    size in one iteration only, alive past it: workspaces, caches, lazily made optimizer
//!    state), one of a parameter-like block's size (alive at the top of the loop) made by autograd's thread (no Python stack) and alive when an optimizer step starts (a
//!    gradient; an activation's gradient of that size is freed before), and one of half such a
//!    size (of 128 KiB or more) made by the program's lines other than the batch's (the
//!    float16 copies of the weights autocast makes). So is an allocation whose size is not the
//!    recorded batch times an even number of bytes (a tensor whose leading dimension is the
//!    batch has that size): cuDNN's workspaces, scalars. Without step annotations (PyTorch before
//!    2.5), a line whose allocations in the loop all have such sizes is taken as the optimizer's
//!    step. The batch's own tensors (the first allocating line of each iteration) always scale. Everything else made in the loop *scales with the batch*:
//!    the inputs, activations, outputs and their gradients, per iteration.
//! 3. **The recorded batch size**: from `memlint record` (the leading dimension of the first
//!    tensor the forward passes give a module), `--batch N`, or guessed from the first
//!    allocations of an iteration (the batch's tensors: their greatest common divisor, taken as
//!    8-byte labels or token ids).
//! 4. **Prediction at batch B'**: the whole trace is replayed through a simulation of the
//!    caching allocator ([`crate::sim`]: rounding, best-fit, block splitting, segment sizes,
//!    `empty_cache()` where the recording released segments), each scaling allocation's
//!    requested size multiplied by B'/B. Its allocated and reserved peaks are the prediction.
//!    The replay at the recorded batch is compared with the recording: the difference is the
//!    fragmentation the simulation does not reproduce, added to the reserved predictions.
//! 5. **Under a budget**: the same replay with the allocator limited to the budget, as
//!    `torch.cuda.set_per_process_memory_fraction` limits it (when a new segment would pass the
//!    limit, the cached free segments are released and the request tried again, then it is
//!    out of memory); the largest batch that runs through is found by doubling then bisection.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::loops::{loop_shape, loop_shape_with, LoopShape};
use crate::read::{Action, BlockState, Event, Snapshot, NO_STACK};
use crate::report::mib;
use crate::sim::AllocatorSim;

/// Where the recorded batch size came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BatchSource {
    /// `memlint record` saw it in the forward passes.
    Recorded,
    /// `--batch N`.
    Given,
    /// Guessed from the sizes of the first allocations of an iteration.
    InputSizes,
}

impl BatchSource {
    fn describe(self) -> &'static str {
        match self {
            BatchSource::Recorded => "seen by memlint record in the forward passes",
            BatchSource::Given => "given with --batch",
            BatchSource::InputSizes => "guessed from the sizes of the batch's tensors (8-byte labels or token ids assumed; pass --batch N if wrong)",
        }
    }
}

/// One replay of the trace at a batch size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replay {
    pub peak_allocated: u64,
    pub peak_reserved: u64,
    /// Under a limit: the replay ran out of memory.
    pub out_of_memory: bool,
    /// At the allocated peak: bytes of fixed blocks and of blocks that scale with the batch.
    pub fixed_at_peak: u64,
    pub batch_at_peak: u64,
}

/// The figures predicted for one batch size (JSON: a public contract).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchPrediction {
    pub batch: u64,
    pub allocated_peak_bytes: u64,
    pub reserved_peak_bytes: u64,
    /// With a budget: whether the run fits it (the allocator limited to the budget runs it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fits: Option<bool>,
    /// Of the allocated peak, the share made of blocks that scale with the batch.
    pub batch_share: f64,
}

/// `--effective-batch N`: the micro-batch and accumulation steps that reach N within the budget.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EffectiveBatch {
    pub target: u64,
    pub batch: u64,
    pub accumulation_steps: u64,
    /// batch × accumulation_steps (N itself, or the nearest above when N has no divisor that fits).
    pub effective: u64,
    /// What MEM011 (`accumulation-without-loss-division`) requires of the loop.
    pub loss_division: String,
}

/// The batch model's answer (the `batch` field of `memlint snapshot --format json`).
#[derive(Clone, Debug, Serialize)]
pub struct BatchReport {
    pub device: usize,
    pub recorded_batch: u64,
    pub batch_source: BatchSource,
    /// Complete iterations of the loop in the recording.
    pub iterations: usize,
    /// At the recorded peak: what does not depend on the batch, and what scales with it.
    pub fixed_bytes_at_peak: u64,
    pub batch_bytes_at_peak: u64,
    pub per_sample_bytes: u64,
    /// The recording's own peaks, and the model's replay of it at the recorded batch.
    pub recorded_peak_allocated_bytes: u64,
    pub recorded_peak_reserved_bytes: u64,
    pub model_peak_allocated_bytes: u64,
    pub model_peak_reserved_bytes: u64,
    pub predictions: Vec<BatchPrediction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_bytes: Option<u64>,
    /// The largest batch that runs with the allocator limited to the budget (None: none does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_batch: Option<u64>,
    /// The search stopped at this batch, which still fits: the largest is at least this.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub largest_batch_is_lower_bound: bool,
    /// The largest batch whose reserved peak without a limit stays within the budget (no
    /// segment released and reserved again: no allocator retries).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_batch_without_retries: Option<u64>,
    /// Why no batch fits, when none does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_fit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_batch: Option<EffectiveBatch>,
    /// high, medium or low, with what it rests on.
    pub confidence: String,
    pub confidence_notes: Vec<String>,
    /// The HTML page's curve: predictions at more batch sizes (not in JSON).
    #[serde(skip)]
    pub curve: Vec<BatchPrediction>,
}

/// What the batch model works on.
pub struct BatchModel<'a> {
    snap: &'a Snapshot,
    device: usize,
    pub recorded_batch: u64,
    pub batch_source: BatchSource,
    /// Per event: the allocation does not scale with the batch.
    fixed: Vec<bool>,
    /// Blocks alive before the trace began: (address, requested bytes).
    initial: Vec<(u64, u64)>,
    expandable: bool,
    shape: LoopShape,
    /// Bytes of in-loop allocations counted as fixed for their size alone (per iteration).
    size_matched_bytes: u64,
    /// Per-iteration bytes that scale (median over the measured iterations), and whether the
    /// measured iterations allocate the same sizes.
    scaled_bytes_per_iteration: u64,
    iterations_repeat_sizes: bool,
}

fn scale(size: u64, to: u64, from: u64) -> u64 {
    ((size as u128 * to as u128).div_ceil(from.max(1) as u128)).min(u64::MAX as u128) as u64
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl<'a> BatchModel<'a> {
    /// Builds the model of a snapshot; `batch` is `--batch N`. The error says why there is no
    /// model (no loop, too few iterations, no batch size).
    pub fn new(snap: &'a Snapshot, batch: Option<u64>) -> Result<Self, String> {
        // Iterations told apart by the program's lines; a short recording's first iterations
        // may differ (lazy optimizer state, steps a GradScaler skipped): then two that repeat
        // after a first one will do.
        let has_stacks = snap.traces.iter().flatten().any(|e| e.action == Action::Alloc && e.stack != NO_STACK);
        let usable = |s: &LoopShape| s.by_stacks || !has_stacks;
        let shape = match loop_shape(snap) {
            Ok(s) if usable(&s) => s,
            first => match loop_shape_with(snap, 2) {
                Ok(s) if usable(&s) => s,
                Ok(s) => {
                    return Err(format!(
                        "no training loop found: allocations repeat in device {}'s trace, but not as iterations of a loop of the program's lines (one iteration recorded?): record at least 4 iterations of the loop",
                        s.device
                    ))
                }
                Err(e) => return Err(format!("no training loop found: {}", first.err().unwrap_or(e))),
            },
        };
        let device = shape.device;
        let events: &[Event] = &snap.traces[device];
        let expandable = snap.expandable_segments || snap.segments.iter().any(|s| s.device == device && s.is_expandable);

        let (recorded_batch, batch_source) = match (batch, snap.record.as_ref().and_then(|r| r.batch)) {
            (Some(b), _) => (b, BatchSource::Given),
            (None, Some(b)) => (b, BatchSource::Recorded),
            (None, None) => match guess_batch(snap, &shape) {
                Some(b) => (b, BatchSource::InputSizes),
                None => {
                    return Err("the recording's batch size is unknown: pass --batch N (a snapshot made by `memlint record` has it)".into());
                }
            },
        };
        if recorded_batch == 0 {
            return Err("--batch must be 1 or more".into());
        }
        // Lifetimes: the free of each allocation, and the blocks alive before the trace.
        let mut free_at = vec![usize::MAX; events.len()];
        let mut live: HashMap<u64, usize> = HashMap::new();
        let mut touched: HashSet<u64> = HashSet::new();
        let mut initial: Vec<(u64, u64)> = Vec::new();
        for (i, e) in events.iter().enumerate() {
            match e.action {
                Action::Alloc => {
                    live.insert(e.addr, i);
                    touched.insert(e.addr);
                }
                Action::FreeCompleted => {
                    match live.remove(&e.addr) {
                        Some(a) => free_at[a] = i,
                        None => initial.push((e.addr, e.size)),
                    }
                    touched.insert(e.addr);
                }
                _ => {}
            }
        }
        for s in snap.segments.iter().filter(|s| s.device == device) {
            for b in &s.blocks {
                if b.state != BlockState::Inactive && !touched.contains(&b.address) {
                    initial.push((b.address, b.requested_size));
                }
            }
        }

        // Which iteration an event is in (None: before the loop).
        let tops = &shape.tops;
        let iteration = |i: usize| -> Option<usize> { (i >= shape.loop_start).then(|| tops.partition_point(|&t| t <= i).saturating_sub(1)) };
        let next_top = |it: usize| tops.get(it + 1).copied().unwrap_or(usize::MAX);

        // Optimizer steps, by time.
        let mut steps: Vec<(i64, i64)> = snap.optimizer_steps.get(device).cloned().unwrap_or_default();
        steps.sort_unstable();
        let in_step = |t: i64| {
            let k = steps.partition_point(|s| s.0 <= t);
            k > 0 && t <= steps[k - 1].1
        };

        // Allocated once: a (stack, size) seen in one iteration only, alive past it.
        let mut seen_in: HashMap<(u32, u64), HashSet<usize>> = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            if e.action == Action::Alloc {
                if let Some(it) = iteration(i) {
                    seen_in.entry((e.stack, e.size)).or_default().insert(it);
                }
            }
        }
        let once = |i: usize| -> bool {
            let e = &events[i];
            let Some(it) = iteration(i) else { return false };
            seen_in.get(&(e.stack, e.size)).is_some_and(|s| s.len() == 1) && free_at[i] >= next_top(it)
        };

        // Parameter-like sizes: blocks alive at the top of the loop (made before it, or before
        // the recording began).
        let mut param_sizes: HashSet<u64> = HashSet::new();
        for &(_, size) in &initial {
            param_sizes.insert(size);
        }
        for (i, e) in events.iter().enumerate().take(shape.loop_start) {
            if e.action == Action::Alloc && free_at[i] > shape.loop_start {
                param_sizes.insert(e.size);
            }
        }
        // float16/bfloat16 copies of weights (autocast): halves of the larger sizes only, as a
        // small half may well be a batch's labels
        let halves: HashSet<u64> = param_sizes.iter().filter(|s| **s % 2 == 0 && **s >= 128 << 10).map(|s| s / 2).collect();

        // A block of a parameter's size is a gradient when autograd's thread made it (no
        // Python stack) and it is alive when an optimizer step starts (an activation's gradient
        // of the same size is freed before); without PyTorch's step annotations, the size and
        // the missing stack decide.
        let step_starts: Vec<i64> = steps.iter().map(|s| s.0).collect();
        let gradient_like = |i: usize| -> bool {
            if events[i].stack != NO_STACK || !param_sizes.contains(&events[i].size) {
                return false;
            }
            if !snap.has_annotations {
                return true;
            }
            let from = events[i].time_us;
            let to = if free_at[i] == usize::MAX { i64::MAX } else { events[free_at[i]].time_us };
            let k = step_starts.partition_point(|&t| t < from);
            step_starts.get(k).is_some_and(|&t| t <= to)
        };
        // The batch's own tensors: made on the first allocating line of the body in each
        // iteration (loading the batch); they scale whatever their size.
        let mut input = vec![false; events.len()];
        if let Some(body) = &shape.body {
            for w in 0..tops.len() {
                let (a, b) = (tops[w], tops.get(w + 1).copied().unwrap_or(events.len()));
                let lines: Vec<(usize, u32)> =
                    (a..b).filter(|&i| events[i].action == Action::Alloc).filter_map(|i| body.line_of(snap, &events[i]).map(|l| (i, l))).collect();
                if let Some(first) = lines.iter().map(|(_, l)| *l).min() {
                    for (i, l) in lines {
                        input[i] = l == first;
                    }
                }
            }
        }
        let cast_like = |i: usize| events[i].stack != NO_STACK && !input[i] && halves.contains(&events[i].size);
        // Without step annotations: a line of the program whose allocations in the loop all
        // have parameter sizes (or halves) in two iterations or more is the optimizer's step.
        let mut line_kinds: HashMap<u32, (bool, HashSet<usize>)> = HashMap::new();
        if !snap.has_annotations {
            for (i, e) in events.iter().enumerate().skip(shape.loop_start) {
                if e.action == Action::Alloc && e.stack != NO_STACK && !input[i] {
                    let k = line_kinds.entry(snap.stacks[e.stack as usize][0]).or_insert((true, HashSet::new()));
                    k.0 &= param_sizes.contains(&e.size) || halves.contains(&e.size);
                    k.1.extend(iteration(i));
                }
            }
        }
        let step_line = |i: usize| {
            events[i].stack != NO_STACK && line_kinds.get(&snap.stacks[events[i].stack as usize][0]).is_some_and(|(all, its)| *all && its.len() >= 2)
        };
        let mut fixed = vec![false; events.len()];
        let mut size_matched = 0u64;
        for (i, e) in events.iter().enumerate() {
            if e.action != Action::Alloc {
                continue;
            }
            // a tensor whose leading dimension is the batch has batch x (bytes per sample)
            // bytes, and a sample's bytes are even (elements of 2 bytes or more): other sizes
            // are workspaces (cuDNN's, of any size) and scalars
            let not_a_batch_tensor = e.size % recorded_batch != 0 || (e.size / recorded_batch) % 2 != 0;
            fixed[i] = if i < shape.loop_start || in_step(e.time_us) || once(i) || not_a_batch_tensor {
                true
            } else if gradient_like(i) || cast_like(i) || step_line(i) {
                size_matched += e.size;
                true
            } else {
                false
            };
        }

        // Per measured iteration: the bytes that scale, and the sizes allocated.
        let mut scaled: Vec<u64> = Vec::new();
        let mut sizes_of: Vec<Vec<u64>> = Vec::new();
        for &(a, b) in &shape.measured {
            let mut sum = 0;
            let mut sizes = Vec::new();
            for i in a..b {
                if events[i].action == Action::Alloc {
                    sizes.push(events[i].size);
                    if !fixed[i] {
                        sum += events[i].size;
                    }
                }
            }
            scaled.push(sum);
            sizes_of.push(sizes);
        }
        scaled.sort_unstable();
        let iterations_repeat_sizes = sizes_of.windows(2).all(|w| w[0] == w[1]);
        let measured = shape.measured.len().max(1) as u64;

        Ok(BatchModel {
            snap,
            device,
            recorded_batch,
            batch_source,
            fixed,
            initial,
            expandable,
            size_matched_bytes: size_matched / measured,
            scaled_bytes_per_iteration: scaled.get(scaled.len() / 2).copied().unwrap_or(0),
            iterations_repeat_sizes,
            shape,
        })
    }

    /// Replays the trace at `batch` (each scaling allocation's size times batch / recorded),
    /// with the allocator limited to `limit` bytes when given.
    pub fn replay(&self, batch: u64, limit: Option<u64>) -> Replay {
        let events: &[Event] = &self.snap.traces[self.device];
        let mut sim = AllocatorSim::new(limit, self.expandable);
        let mut map: HashMap<u64, (u64, bool, u64)> = HashMap::new();
        let (mut fixed_now, mut batch_now) = (0u64, 0u64);
        let mut out = Replay::default();
        let note_peak = |sim: &AllocatorSim, f: u64, b: u64, out: &mut Replay| {
            if sim.allocated > out.peak_allocated {
                out.peak_allocated = sim.allocated;
                out.fixed_at_peak = f;
                out.batch_at_peak = b;
            }
        };
        for &(addr, size) in &self.initial {
            match sim.malloc(size) {
                Ok((a, n)) => {
                    map.insert(addr, (a, true, n));
                    fixed_now += n;
                    note_peak(&sim, fixed_now, batch_now, &mut out);
                }
                Err(_) => {
                    out.out_of_memory = true;
                    break;
                }
            }
        }
        let mut released = false;
        for (i, e) in events.iter().enumerate() {
            if out.out_of_memory {
                break;
            }
            match e.action {
                Action::Alloc => {
                    let fixed = self.fixed[i];
                    let size = if fixed { e.size } else { scale(e.size, batch, self.recorded_batch) };
                    match sim.malloc(size) {
                        Ok((a, n)) => {
                            if let Some((old, f, m)) = map.insert(e.addr, (a, fixed, n)) {
                                // an address handed out twice without a free in between (a
                                // trace that lost events): the older block is gone
                                sim.free(old);
                                if f {
                                    fixed_now -= m;
                                } else {
                                    batch_now -= m;
                                }
                            }
                            if fixed {
                                fixed_now += n;
                            } else {
                                batch_now += n;
                            }
                            note_peak(&sim, fixed_now, batch_now, &mut out);
                        }
                        Err(_) => out.out_of_memory = true,
                    }
                }
                Action::FreeCompleted => {
                    if let Some((a, f, n)) = map.remove(&e.addr) {
                        sim.free(a);
                        if f {
                            fixed_now -= n;
                        } else {
                            batch_now -= n;
                        }
                    }
                }
                Action::SegmentAlloc => sim.hint_next_segment(e.addr),
                // `empty_cache()` (or a release before a retry): once per run of frees
                Action::SegmentFree | Action::SegmentUnmap if !released => sim.release_cached(),
                _ => {}
            }
            released = matches!(e.action, Action::SegmentFree | Action::SegmentUnmap);
        }
        out.peak_reserved = sim.peak_reserved;
        out
    }

    /// Whether `batch` runs with the allocator limited to `budget`.
    fn fits(&self, batch: u64, budget: u64) -> bool {
        !self.replay(batch, Some(budget)).out_of_memory
    }

    /// The largest batch that runs within `budget` (doubling, then bisection), and whether the
    /// search stopped at its cap while still fitting.
    pub fn largest_batch(&self, fits: impl Fn(u64) -> bool) -> (Option<u64>, bool) {
        if !fits(1) {
            return (None, false);
        }
        let cap = self.recorded_batch.saturating_mul(1 << 16).max(1 << 20);
        let (mut ok, mut bad) = (1u64, None);
        let mut b = self.recorded_batch.max(2);
        while b <= cap {
            if fits(b) {
                ok = b;
                b = b.saturating_mul(2);
            } else {
                bad = Some(b);
                break;
            }
        }
        let Some(mut bad) = bad else { return (Some(ok), true) };
        if ok >= bad {
            // fits(recorded) failed right away: search below it
            ok = 1;
        }
        while bad - ok > 1 {
            let mid = ok + (bad - ok) / 2;
            if fits(mid) {
                ok = mid;
            } else {
                bad = mid;
            }
        }
        (Some(ok), false)
    }

    /// The whole answer: predictions from half to sixteen times the recorded batch, and with a
    /// budget the largest batch and (with `effective`) the accumulation that reaches it.
    pub fn report(&self, budget: Option<u64>, effective: Option<u64>) -> BatchReport {
        let b0 = self.recorded_batch;
        let lv = crate::analysis::levels(self.snap, self.device);
        let recorded_alloc = lv.after.iter().copied().max().unwrap_or(0).max(lv.start);
        let recorded_res = self.recorded_reserved_peak();
        let at = self.replay(b0, None);
        // what the simulation leaves out of the recording's reserved memory (at least 0)
        let extra_reserved = recorded_res.saturating_sub(at.peak_reserved);
        let predict = |b: u64| -> BatchPrediction {
            let r = self.replay(b, None);
            BatchPrediction {
                batch: b,
                allocated_peak_bytes: r.peak_allocated,
                reserved_peak_bytes: r.peak_reserved + extra_reserved,
                fits: budget.map(|g| self.fits(b, g)),
                batch_share: if r.peak_allocated == 0 { 0.0 } else { (r.batch_at_peak as f64 / r.peak_allocated as f64 * 1000.0).round() / 1000.0 },
            }
        };
        let mut table: Vec<u64> = vec![b0 / 2, b0, b0 * 2, b0 * 4, b0 * 8, b0 * 16];
        table.retain(|b| *b >= 1);
        table.dedup();
        let predictions: Vec<BatchPrediction> = table.iter().map(|&b| predict(b)).collect();
        let mut curve_batches: Vec<u64> = [0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0].iter().map(|m| ((b0 as f64) * m).round() as u64).filter(|b| *b >= 1).collect();
        let (mut largest, mut lower_bound, mut without_retries, mut no_fit) = (None, false, None, None);
        if let Some(g) = budget {
            let (l, capped) = self.largest_batch(|b| self.fits(b, g));
            largest = l;
            lower_bound = capped;
            let (w, _) = self.largest_batch(|b| self.replay(b, None).peak_reserved + extra_reserved <= g);
            without_retries = w;
            if let Some(l) = l {
                curve_batches.push(l);
            } else {
                let fixed_only = self.replay(1, None);
                no_fit = Some(format!(
                    "no batch size fits in {}: at batch 1 the run needs {} allocated ({} of it does not depend on the batch: parameters, gradients, optimizer state, workspaces) and the allocator limited to the budget runs out of memory",
                    mib(g),
                    mib(fixed_only.peak_allocated),
                    mib(fixed_only.fixed_at_peak)
                ));
            }
        }
        curve_batches.sort_unstable();
        curve_batches.dedup();
        let curve = curve_batches.iter().map(|&b| predict(b)).collect();
        let effective_batch = match (effective, largest) {
            (Some(n), Some(max)) if n >= 1 => Some(effective_batch(n, max)),
            _ => None,
        };
        let (confidence, confidence_notes) = self.confidence(recorded_alloc, recorded_res, &at, predictions.last());
        BatchReport {
            device: self.device,
            recorded_batch: b0,
            batch_source: self.batch_source,
            iterations: self.shape.tops.len(),
            fixed_bytes_at_peak: at.fixed_at_peak,
            batch_bytes_at_peak: at.batch_at_peak,
            per_sample_bytes: at.batch_at_peak / b0,
            recorded_peak_allocated_bytes: recorded_alloc,
            recorded_peak_reserved_bytes: recorded_res,
            model_peak_allocated_bytes: at.peak_allocated,
            model_peak_reserved_bytes: at.peak_reserved,
            predictions,
            budget_bytes: budget,
            largest_batch: largest,
            largest_batch_is_lower_bound: lower_bound,
            largest_batch_without_retries: without_retries.filter(|_| largest.is_some()),
            no_fit,
            effective_batch,
            confidence,
            confidence_notes,
            curve,
        }
    }

    fn recorded_reserved_peak(&self) -> u64 {
        let events: &[Event] = &self.snap.traces[self.device];
        let final_reserved: u64 = self.snap.segments.iter().filter(|s| s.device == self.device).map(|s| s.total_size).sum();
        let delta: i64 = events
            .iter()
            .map(|e| match e.action {
                Action::SegmentAlloc | Action::SegmentMap => e.size as i64,
                Action::SegmentFree | Action::SegmentUnmap => -(e.size as i64),
                _ => 0,
            })
            .sum();
        let mut level = final_reserved as i64 - delta;
        let mut peak = level.max(0);
        for e in events {
            match e.action {
                Action::SegmentAlloc | Action::SegmentMap => level += e.size as i64,
                Action::SegmentFree | Action::SegmentUnmap => level -= e.size as i64,
                _ => {}
            }
            peak = peak.max(level);
        }
        peak.max(0) as u64
    }

    fn confidence(&self, recorded_alloc: u64, recorded_res: u64, at: &Replay, furthest: Option<&BatchPrediction>) -> (String, Vec<String>) {
        let mut notes = Vec::new();
        let mut level = 2u8; // high
        let lower = |to: u8, level: &mut u8| *level = (*level).min(to);
        notes.push(format!("batch size {}: {}", self.recorded_batch, self.batch_source.describe()));
        if self.batch_source == BatchSource::InputSizes {
            lower(0, &mut level);
        }
        let complete = self.shape.measured.len();
        notes.push(format!("{} loop iterations recorded, {} complete ones repeat the loop's allocations", self.shape.tops.len(), complete));
        if complete < 2 {
            lower(1, &mut level);
        }
        if !self.iterations_repeat_sizes {
            notes.push("allocation sizes vary between iterations (variable-length batches?): the model scales the recorded sizes".into());
            lower(1, &mut level);
        }
        let diff = at.peak_allocated.abs_diff(recorded_alloc);
        if diff == 0 {
            notes.push("replayed at the recorded batch, the model gives the recorded allocated peak to the byte".into());
        } else {
            let rel = diff as f64 / recorded_alloc.max(1) as f64;
            notes.push(format!("replayed at the recorded batch, the model's allocated peak is {} from the recording's ({:.2}%)", mib(diff), rel * 100.0));
            if rel > 0.02 {
                lower(1, &mut level);
            }
        }
        if recorded_res > 0 {
            let rel = at.peak_reserved.abs_diff(recorded_res) as f64 / recorded_res as f64;
            notes.push(format!(
                "reserved: the simulated allocator reserves {} at the recorded batch, the recording {} ({:.1}%; the difference is added to every reserved prediction)",
                mib(at.peak_reserved),
                mib(recorded_res),
                rel * 100.0
            ));
            if rel > 0.10 {
                lower(1, &mut level);
            }
        }
        if self.expandable {
            notes.push("expandable segments: the allocator's page mapping is approximated".into());
            lower(1, &mut level);
        }
        if self.shape.loop_start == 0 || !self.snap.traces[self.device][..self.shape.loop_start].iter().any(|e| e.action == Action::Alloc) {
            notes.push("the recording began inside the loop: what was alive before it is counted as fixed".into());
            lower(1, &mut level);
        }
        if self.scaled_bytes_per_iteration > 0 && self.size_matched_bytes * 2 > self.scaled_bytes_per_iteration {
            notes.push(format!(
                "{} per iteration are counted as fixed only because their sizes are parameter sizes (gradients, casts); {} per iteration scale with the batch",
                mib(self.size_matched_bytes),
                mib(self.scaled_bytes_per_iteration)
            ));
        }
        if let Some(p) = furthest {
            notes.push(format!("at batch {}, {:.0}% of the predicted peak is extrapolated from the recorded batch", p.batch, p.batch_share * 100.0));
        }
        let name = ["low", "medium", "high"][level as usize].to_string();
        (name, notes)
    }
}

/// The batch's tensors: the allocations of the first measured iteration made on its first
/// allocating line of the loop's body; their greatest common divisor taken as
/// 8-byte labels or token ids of the batch.
fn guess_batch(snap: &Snapshot, shape: &LoopShape) -> Option<u64> {
    let body = shape.body.as_ref()?;
    let &(a, b) = shape.measured.first()?;
    let events = &snap.traces[shape.device];
    let lines: Vec<(usize, u32)> = (a..b).filter(|&i| events[i].action == Action::Alloc && events[i].stack != NO_STACK).filter_map(|i| body.line_of(snap, &events[i]).map(|l| (i, l))).collect();
    let first = lines.iter().map(|(_, l)| *l).min()?;
    let sizes: Vec<u64> = lines.iter().filter(|(_, l)| *l == first).map(|(i, _)| events[*i].size).collect();
    let distinct: HashSet<u64> = sizes.iter().copied().collect();
    if distinct.len() < 2 {
        return None;
    }
    let g = sizes.iter().copied().fold(0, gcd);
    (g % 8 == 0 && g >= 8).then_some(g / 8)
}

/// The micro-batch and accumulation steps reaching `target` with micro-batches of at most
/// `max`: the fewest steps whose micro-batch divides `target`, else balanced steps that pass
/// it by the least.
pub fn effective_batch(target: u64, max: u64) -> EffectiveBatch {
    let max = max.max(1);
    let min_steps = target.div_ceil(max).max(1);
    let exact = (min_steps..=min_steps.saturating_mul(2)).find(|s| target % s == 0 && target / s <= max);
    let (steps, batch) = match exact {
        Some(s) => (s, target / s),
        None => (min_steps, target.div_ceil(min_steps)),
    };
    let loss_division = if steps == 1 {
        format!("batch {target} fits: no accumulation needed")
    } else {
        format!("divide the loss by {steps} before backward() (`loss = loss / {steps}`), call optimizer.step() and zero_grad() every {steps} micro-batches of {batch} (MEM011 accumulation-without-loss-division)")
    };
    EffectiveBatch { target, batch, accumulation_steps: steps, effective: steps * batch, loss_division }
}

/// Parses a memory size: `24GiB`, `24 GiB`, `24G` (binary units: K, M, G, T with or without
/// `iB`), `1.5GB` (decimal units with `B`: KB, MB, GB, TB), or a number of bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num.replace('_', "").parse().map_err(|_| format!("`{text}` is not a memory size (write it like 24GiB, 512MiB or 8000000000)"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024f64.powi(2),
        "g" | "gib" => 1024f64.powi(3),
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => return Err(format!("`{text}`: unknown unit `{other}` (use B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB)")),
    };
    let v = num * mult;
    if !v.is_finite() || v < 1.0 || v > u64::MAX as f64 {
        return Err(format!("`{text}` is not a usable memory size"));
    }
    Ok(v.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_and_decimal_units() {
        assert_eq!(parse_bytes("24GiB").unwrap(), 24 << 30);
        assert_eq!(parse_bytes("24 GiB").unwrap(), 24 << 30);
        assert_eq!(parse_bytes("24g").unwrap(), 24 << 30);
        assert_eq!(parse_bytes("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("1.5GB").unwrap(), 1_500_000_000);
        assert_eq!(parse_bytes("8000").unwrap(), 8000);
        assert!(parse_bytes("lots").unwrap_err().contains("not a memory size"));
        assert!(parse_bytes("3 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("0").is_err());
    }

    #[test]
    fn effective_batch_prefers_exact_divisions() {
        let e = effective_batch(1000, 300);
        assert_eq!((e.batch, e.accumulation_steps, e.effective), (250, 4, 1000));
        assert!(e.loss_division.contains("loss / 4"));
        let e = effective_batch(997, 300);
        assert_eq!((e.batch, e.accumulation_steps, e.effective), (250, 4, 1000));
        let e = effective_batch(64, 300);
        assert_eq!((e.batch, e.accumulation_steps), (64, 1));
        assert!(e.loss_division.contains("no accumulation"));
    }
}
