//! What `memlint snapshot` prints: text, JSON (field names are a public contract), HTML,
//! and the per-line difference between two runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::analysis::{Device, Line, LineFigures};

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub file: String,
    pub devices: Vec<Device>,
    /// With `--budget`, `--batch` or `--effective-batch`: the batch model's predictions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<crate::batch::BatchReport>,
    /// What `memlint record` noted in the snapshot, when it made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<crate::read::RecordInfo>,
}

pub fn mib(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// A duration in microseconds, for people: `850 µs`, `12.3 ms`, `4.52 s`.
pub fn since(us: i64) -> String {
    let a = us.unsigned_abs() as f64;
    let sign = if us < 0 { "-" } else { "" };
    if a < 1000.0 {
        format!("{sign}{a:.0} µs")
    } else if a < 1e6 {
        format!("{sign}{:.1} ms", a / 1e3)
    } else {
        format!("{sign}{:.2} s", a / 1e6)
    }
}

fn where_(l: &Line) -> String {
    if l.line == 0 {
        l.file.clone()
    } else {
        format!("{}:{} ({})", l.file, l.line, l.function)
    }
}

/// How many path components two paths share at their end (0: not even the file name).
pub fn suffix_len(a: &str, b: &str) -> usize {
    let pa = a.split(['/', '\\']).filter(|p| !p.is_empty() && *p != ".");
    let pb: Vec<&str> = b.split(['/', '\\']).filter(|p| !p.is_empty() && *p != ".").collect();
    let pa: Vec<&str> = pa.collect();
    pa.iter().rev().zip(pb.iter().rev()).take_while(|(x, y)| x == y).count()
}

impl Report {
    /// The measured figures of `line` in `path` (the path of a linted file, relative or
    /// absolute), summed over devices; None when the snapshot has no memory there.
    pub fn figures_for(&self, path: &Path, line: u32) -> Option<LineFigures> {
        let p = path.display().to_string();
        let file = self.match_file(&p)?;
        let mut out: Option<LineFigures> = None;
        for d in &self.devices {
            for f in d.inclusive.iter().filter(|f| f.line == line && f.file == file) {
                let o = out.get_or_insert_with(|| LineFigures { file: f.file.clone(), line, ..Default::default() });
                o.bytes_at_peak += f.bytes_at_peak;
                o.retained_bytes += f.retained_bytes;
                o.retained_count = o.retained_count.max(f.retained_count);
            }
        }
        out.filter(|o| o.bytes_at_peak > 0 || o.retained_bytes > 0)
    }

    /// What a line of `function` in `path` keeps alive when it keeps a graph or tensors (a
    /// summed loss, collected outputs): the retained blocks whose stacks pass through that
    /// function, summed over devices; None when there are none.
    pub fn kept_by(&self, path: &Path, function: &str) -> Option<crate::analysis::FunctionRetained> {
        let file = self.match_file(&path.display().to_string())?;
        let mut out: Option<crate::analysis::FunctionRetained> = None;
        for d in &self.devices {
            for f in d.retained_by_function.iter().filter(|f| f.file == file && f.function == function) {
                let o = out.get_or_insert_with(|| crate::analysis::FunctionRetained { file: f.file.clone(), function: f.function.clone(), ..Default::default() });
                o.bytes += f.bytes;
                o.blocks += f.blocks;
                o.count = o.count.max(f.count);
                o.lines.extend(f.lines.iter().cloned());
            }
        }
        out.filter(|o| o.bytes > 0)
    }

    /// The snapshot's file that a linted path stands for: same file name, and of several
    /// such files the one sharing the longest path suffix with it (none on a tie).
    pub fn match_file(&self, path: &str) -> Option<String> {
        let mut files: Vec<&str> = self
            .devices
            .iter()
            .flat_map(|d| d.inclusive.iter().map(|f| f.file.as_str()).chain(d.retained_by_function.iter().map(|f| f.file.as_str())))
            .collect();
        files.sort_unstable();
        files.dedup();
        let scored: Vec<(usize, &str)> = files.into_iter().map(|f| (suffix_len(f, path), f)).filter(|(n, _)| *n >= 1).collect();
        let best = scored.iter().map(|(n, _)| *n).max()?;
        let mut hits = scored.iter().filter(|(n, _)| *n == best);
        let first = hits.next()?;
        hits.next().is_none().then(|| first.1.to_string())
    }

    /// The largest figure at the peak over all lines (to say which lines hold the most).
    pub fn max_line_bytes(&self) -> u64 {
        self.devices.iter().flat_map(|d| d.at_peak.iter().map(|l| l.bytes)).max().unwrap_or(0)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serializes")
    }

    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "{}", self.file);
        if self.devices.is_empty() {
            let _ = writeln!(o, "  no device has recorded events");
        }
        for d in &self.devices {
            let _ = writeln!(o, "\ndevice {} ({} events)", d.device, d.events);
            let _ = writeln!(
                o,
                "  peak: {} allocated, {} reserved ({} after the first recorded event)",
                mib(d.peak_allocated_bytes),
                mib(d.peak_reserved_bytes),
                since(d.peak_time_since_start_us)
            );
            let _ = writeln!(o, "\n  alive at the peak, by line:");
            for l in &d.at_peak {
                let _ = writeln!(o, "    {:>11}  {:>5} blocks  {}", mib(l.bytes), l.blocks, where_(l));
            }
            if d.retained.is_empty() {
                let _ = writeln!(o, "\n  retained: no line's allocations pile up");
            } else {
                let _ = writeln!(o, "\n  retained (allocated again and again, never freed):");
                for l in &d.retained {
                    let _ = writeln!(o, "    {:>11}  {:>3} times  {:>5} blocks  {}", mib(l.bytes), l.count.unwrap_or(0), l.blocks, where_(l));
                }
            }
            let f = &d.fragmentation;
            let _ = writeln!(o, "\n  fragmentation:");
            for (name, x) in [("at the peak of reserved", &f.at_peak_reserved), ("at the end", &f.at_end)] {
                let _ = writeln!(
                    o,
                    "    {name}: {} reserved, {} allocated, {} free in {} segments (largest free block {})",
                    mib(x.reserved_bytes),
                    mib(x.allocated_bytes),
                    mib(x.free_in_segments_bytes),
                    x.segments,
                    mib(x.largest_free_block_bytes)
                );
            }
            if let Some(s) = f.expandable_segments_saving_bytes {
                let _ = writeln!(
                    o,
                    "    help: memory reserved but free in pieces was large; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True could have saved up to {}",
                    mib(s)
                );
            }
            for oom in &d.ooms {
                let _ = writeln!(
                    o,
                    "\n  out of memory {} after the first recorded event: {} requested while {} was allocated; held by:",
                    since(oom.time_since_start_us),
                    mib(oom.requested_bytes),
                    mib(oom.allocated_bytes)
                );
                for l in &oom.at_oom {
                    let _ = writeln!(o, "    {:>11}  {:>5} blocks  {}", mib(l.bytes), l.blocks, where_(l));
                }
            }
        }
        if let Some(b) = &self.batch {
            b.write_text(&mut o);
        }
        o
    }
}

impl crate::batch::BatchReport {
    /// The batch model's section of the text report.
    pub fn write_text(&self, o: &mut String) {
        let b0 = self.recorded_batch;
        let _ = writeln!(
            o,
            "\nbatch size (device {}): recorded at {b0} ({}), {} loop iterations",
            self.device,
            match self.batch_source {
                crate::batch::BatchSource::Recorded => "seen by memlint record",
                crate::batch::BatchSource::Given => "--batch",
                crate::batch::BatchSource::InputSizes => "guessed from the batch's tensors: pass --batch N if wrong",
            },
            self.iterations
        );
        let _ = writeln!(
            o,
            "  at the recorded peak: {} does not depend on the batch (parameters, gradients, optimizer state, workspaces), {} scales with it ({} per sample)",
            mib(self.fixed_bytes_at_peak),
            mib(self.batch_bytes_at_peak),
            mib(self.per_sample_bytes)
        );
        let fits_header = self.budget_bytes.map(|g| format!("  fits {}", mib(g))).unwrap_or_default();
        let _ = writeln!(o, "\n  predicted peak:\n    {:>8}  {:>11}  {:>11}{fits_header}", "batch", "allocated", "reserved");
        for p in &self.predictions {
            let mark = match p.fits {
                Some(true) => "  yes",
                Some(false) => "  no",
                None => "",
            };
            let rec = if p.batch == b0 {
                format!("   (recorded: {} allocated, {} reserved)", mib(self.recorded_peak_allocated_bytes), mib(self.recorded_peak_reserved_bytes))
            } else {
                String::new()
            };
            let _ = writeln!(o, "    {:>8}  {:>11}  {:>11}{mark}{rec}", p.batch, mib(p.allocated_peak_bytes), mib(p.reserved_peak_bytes));
        }
        if let Some(g) = self.budget_bytes {
            match (self.largest_batch, &self.no_fit) {
                (Some(l), _) => {
                    let _ = writeln!(
                        o,
                        "\n  largest batch within {}: {}{l} (the caching allocator limited to the budget, as torch.cuda.set_per_process_memory_fraction limits it{})",
                        mib(g),
                        if self.largest_batch_is_lower_bound { "at least " } else { "" },
                        self.largest_batch_without_retries
                            .filter(|w| *w != l)
                            .map(|w| format!("; {w} without releasing cached memory and retrying"))
                            .unwrap_or_default()
                    );
                }
                (None, Some(why)) => {
                    let _ = writeln!(o, "\n  {why}");
                }
                (None, None) => {}
            }
        }
        if let Some(e) = &self.effective_batch {
            if e.accumulation_steps == 1 {
                let _ = writeln!(o, "  effective batch {}: {}", e.target, e.loss_division);
            } else {
                let _ = writeln!(
                    o,
                    "  effective batch {}: micro-batches of {} x {} accumulation steps{}; {}",
                    e.target,
                    e.batch,
                    e.accumulation_steps,
                    if e.effective != e.target { format!(" = {} ({} has no divisor that fits)", e.effective, e.target) } else { String::new() },
                    e.loss_division
                );
            }
        }
        let _ = writeln!(o, "\n  confidence: {}", self.confidence);
        for n in &self.confidence_notes {
            let _ = writeln!(o, "    - {n}");
        }
    }
}

/// One line's figures before and after.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DiffLine {
    pub file: String,
    pub line: u32,
    pub function: String,
    pub peak_bytes_before: u64,
    pub peak_bytes_after: u64,
    pub retained_bytes_before: u64,
    pub retained_bytes_after: u64,
    /// before - after, at the peak plus retained (positive: the change saves memory).
    pub saving_bytes: i64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    pub before: String,
    pub after: String,
    pub peak_allocated_bytes_before: u64,
    pub peak_allocated_bytes_after: u64,
    pub peak_reserved_bytes_before: u64,
    pub peak_reserved_bytes_after: u64,
    pub lines: Vec<DiffLine>,
}

/// Compares two runs line by line (lines matched by file name and line number, so the
/// two runs may come from different folders; a fix that moves lines shows as two lines).
pub fn diff(before: &Report, after: &Report) -> Diff {
    let key = |l: &Line| (l.file.rsplit(['/', '\\']).next().unwrap_or("").to_string(), l.line, l.function.clone());
    let mut m: BTreeMap<(String, u32, String), DiffLine> = BTreeMap::new();
    for (which, r) in [(0, before), (1, after)] {
        for d in &r.devices {
            for (kind, lines) in [(0, &d.at_peak), (1, &d.retained)] {
                for l in lines.iter() {
                    let e = m.entry(key(l)).or_insert_with(|| DiffLine {
                        file: l.file.clone(),
                        line: l.line,
                        function: l.function.clone(),
                        peak_bytes_before: 0,
                        peak_bytes_after: 0,
                        retained_bytes_before: 0,
                        retained_bytes_after: 0,
                        saving_bytes: 0,
                    });
                    match (which, kind) {
                        (0, 0) => e.peak_bytes_before += l.bytes,
                        (1, 0) => e.peak_bytes_after += l.bytes,
                        (0, _) => e.retained_bytes_before += l.bytes,
                        _ => e.retained_bytes_after += l.bytes,
                    }
                }
            }
        }
    }
    let mut lines: Vec<DiffLine> = m
        .into_values()
        .map(|mut l| {
            l.saving_bytes = (l.peak_bytes_before + l.retained_bytes_before) as i64 - (l.peak_bytes_after + l.retained_bytes_after) as i64;
            l
        })
        .filter(|l| l.saving_bytes != 0)
        .collect();
    lines.sort_by(|a, b| b.saving_bytes.abs().cmp(&a.saving_bytes.abs()).then(a.file.cmp(&b.file)).then(a.line.cmp(&b.line)));
    let sum = |r: &Report, f: fn(&Device) -> u64| r.devices.iter().map(f).sum::<u64>();
    Diff {
        before: before.file.clone(),
        after: after.file.clone(),
        peak_allocated_bytes_before: sum(before, |d| d.peak_allocated_bytes),
        peak_allocated_bytes_after: sum(after, |d| d.peak_allocated_bytes),
        peak_reserved_bytes_before: sum(before, |d| d.peak_reserved_bytes),
        peak_reserved_bytes_after: sum(after, |d| d.peak_reserved_bytes),
        lines,
    }
}

impl Diff {
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let signed = |v: i64| if v < 0 { format!("-{}", mib(v.unsigned_abs())) } else { mib(v as u64) };
        let _ = writeln!(o, "before: {}\nafter:  {}", self.before, self.after);
        let _ = writeln!(
            o,
            "peak allocated: {} -> {} (saves {})",
            mib(self.peak_allocated_bytes_before),
            mib(self.peak_allocated_bytes_after),
            signed(self.peak_allocated_bytes_before as i64 - self.peak_allocated_bytes_after as i64)
        );
        let _ = writeln!(
            o,
            "peak reserved:  {} -> {} (saves {})",
            mib(self.peak_reserved_bytes_before),
            mib(self.peak_reserved_bytes_after),
            signed(self.peak_reserved_bytes_before as i64 - self.peak_reserved_bytes_after as i64)
        );
        if self.lines.is_empty() {
            let _ = writeln!(o, "no line holds a different amount of memory");
        } else {
            let _ = writeln!(o, "\nby line (at the peak + retained at the end):");
            for l in &self.lines {
                let _ = writeln!(
                    o,
                    "  {:>11}  {}:{} ({})  peak {} -> {}, retained {} -> {}",
                    signed(l.saving_bytes),
                    l.file,
                    l.line,
                    l.function,
                    mib(l.peak_bytes_before),
                    mib(l.peak_bytes_after),
                    mib(l.retained_bytes_before),
                    mib(l.retained_bytes_after)
                );
            }
        }
        o
    }
}
