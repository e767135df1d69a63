//! The report: its JSON shape (documented in the crate root) and its text and markdown renderings.

use serde::{Deserialize, Serialize};

use crate::alloc::KindBytes;
use crate::scenarios::{Measure, Metric, ScenarioDef, Workload};

/// Version of the JSON shape; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub tool: &'static str,
    pub version: &'static str,
    pub schema: u32,
    pub backend: &'static str,
    pub estimated: bool,
    pub device: DeviceInfo,
    pub workload: Workload,
    /// `--from-snapshot`: what the snapshot said and how the workload was sized (null without it).
    pub from_snapshot: Option<crate::sizing::SnapshotSizing>,
    pub scenarios: Vec<ScenarioReport>,
    /// Rules asked for (by `--rule` or by findings) that have no scenario.
    pub rules_without_scenario: Vec<String>,
    pub findings: Option<Vec<FindingReport>>,
    pub torch: Option<TorchComparison>,
    /// MEM007's per-device comparison of DataParallel and DDP (null when it did not run).
    pub parallel: Option<crate::parallel::ParallelReport>,
    pub elapsed_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub index: usize,
    pub name: String,
    pub total_bytes: u64,
    pub free_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    pub code: String,
    pub name: String,
    pub variant: String,
    pub scenario: String,
    pub metric: Metric,
    pub peak_bytes_bad: Option<u64>,
    pub peak_bytes_fixed: Option<u64>,
    pub held_bytes_bad: Option<u64>,
    pub held_bytes_fixed: Option<u64>,
    pub step_ms_bad: Option<f64>,
    pub step_ms_fixed: Option<f64>,
    /// Bytes the fix saves on the scenario's metric (peak or held); for step-time and underflow
    /// scenarios the peak difference. Negative when the fix uses more.
    pub saving_bytes: Option<i64>,
    /// `saving_bytes` over the bad loop's figure.
    pub saving_fraction: Option<f64>,
    pub saving_summary: String,
    /// MEM003 only (null elsewhere, and on the simulator).
    pub underflow_fraction_bad: Option<f64>,
    pub underflow_fraction_fixed: Option<f64>,
    /// MEM003: the same fraction in an fp32 run of the loop (zeros that are not underflow).
    pub underflow_fraction_fp32: Option<f64>,
    /// Live bytes by kind at each loop's peak.
    pub at_peak_bad: Option<KindBytes>,
    pub at_peak_fixed: Option<KindBytes>,
    /// Segments the allocator requested from the driver during each loop.
    pub driver_mallocs_bad: Option<u64>,
    pub driver_mallocs_fixed: Option<u64>,
    /// MEM004: driver allocations per timed step.
    pub mallocs_per_step_bad: Option<f64>,
    pub mallocs_per_step_fixed: Option<f64>,
    /// Tracker cross-check (cuda only): bytes the allocator reserved vs bytes the driver reports in
    /// use, both since the start of the run, at the end of the fixed loop.
    pub tracker_reserved_delta_bytes: Option<i64>,
    pub driver_used_delta_bytes: Option<i64>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FindingReport {
    pub path: String,
    pub row: usize,
    pub column: usize,
    pub code: String,
    pub name: String,
    /// Summaries of the scenarios of this rule (empty when the rule has none).
    pub measured: Vec<String>,
}

/// What the PyTorch script printed, plus the comparison with our figures.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct TorchComparison {
    pub python: Option<String>,
    pub torch_version: Option<String>,
    pub device: Option<String>,
    /// Bytes PyTorch holds before any scenario (its cuBLAS/cuBLASLt workspaces).
    pub workspace_bytes: Option<u64>,
    pub scenarios: Vec<TorchScenario>,
    /// Why the comparison could not run (python3 or torch+CUDA missing, script failure).
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct TorchScenario {
    pub code: String,
    pub variant: String,
    pub peak_bytes_bad: Option<u64>,
    pub peak_bytes_fixed: Option<u64>,
    pub held_bytes_bad: Option<u64>,
    pub held_bytes_fixed: Option<u64>,
    pub step_ms_bad: Option<f64>,
    pub step_ms_fixed: Option<f64>,
    pub underflow_fraction_bad: Option<f64>,
    pub underflow_fraction_fixed: Option<f64>,
    #[serde(default)]
    pub underflow_fraction_fp32: Option<f64>,
    #[serde(default)]
    pub mallocs_per_step_bad: Option<f64>,
    #[serde(default)]
    pub mallocs_per_step_fixed: Option<f64>,
    pub error: Option<String>,
    /// Filled in by memlint: PyTorch's saving on the scenario's metric and ours relative to it.
    #[serde(default)]
    pub saving_bytes: Option<i64>,
    /// (memlint − torch) / |torch|; null when PyTorch's saving is under 1 MiB, where a ratio says
    /// nothing (compare `saving_difference_bytes` instead).
    #[serde(default)]
    pub saving_relative_difference: Option<f64>,
    /// memlint's saving minus PyTorch's, in bytes.
    #[serde(default)]
    pub saving_difference_bytes: Option<i64>,
}

pub fn fmt_bytes(b: f64) -> String {
    let a = b.abs();
    let sign = if b < 0.0 { "-" } else { "" };
    if a >= (1u64 << 30) as f64 {
        format!("{sign}{:.2} GiB", a / (1u64 << 30) as f64)
    } else if a >= (1u64 << 20) as f64 {
        format!("{sign}{:.1} MiB", a / (1u64 << 20) as f64)
    } else if a >= 1024.0 {
        format!("{sign}{:.1} KiB", a / 1024.0)
    } else {
        format!("{sign}{a:.0} B")
    }
}

fn opt_bytes(b: Option<u64>, est: bool) -> String {
    match b {
        Some(v) => format!("{}{}", if est { "~" } else { "" }, fmt_bytes(v as f64)),
        None => "-".into(),
    }
}

fn opt_ms(v: Option<f64>) -> String {
    v.map(|m| format!("{m:.2} ms")).unwrap_or_else(|| "-".into())
}

/// MEM003's sentence, once the fp32 reference fraction is known.
pub fn underflow_summary(r: &ScenarioReport) -> String {
    match (r.underflow_fraction_bad, r.underflow_fraction_fixed) {
        (Some(ub), Some(uf)) => {
            let what = if r.variant == "half" { "the .half() model" } else { "autocast without a GradScaler" };
            let mut s = format!("gradient elements that are zero: {:.1}% with {what}, {:.1}% with autocast + GradScaler", ub * 100.0, uf * 100.0);
            if let Some(z) = r.underflow_fraction_fp32 {
                s.push_str(&format!(", {:.1}% in fp32 (zero anyway)", z * 100.0));
            }
            s
        }
        _ => r.saving_summary.clone(),
    }
}

/// Appends the scenario's caveat to its summary when the figures look as if the fix did not help:
/// it saves less than 1 MiB on the row's metric (the peak for step-time and underflow rows) or
/// costs memory.
pub fn caveat(row: &mut ScenarioReport, def: &ScenarioDef) {
    let (Some(text), Some(saving)) = (def.caveat, row.saving_bytes) else { return };
    if saving >= 1 << 20 {
        return;
    }
    let what = if saving < 0 {
        let metric = if def.metric == Metric::Held { "held memory" } else { "peak" };
        format!("the fix's {metric} is {} higher: {text}", fmt_bytes(-saving as f64))
    } else {
        format!("why so little: {text}")
    };
    row.saving_summary = format!("{}; {what}", row.saving_summary);
}

/// Builds one scenario's report from its two measurements.
pub fn scenario_report(def: &ScenarioDef, bad: Result<Measure, String>, fixed: Result<Measure, String>, estimated: bool, iters: usize) -> ScenarioReport {
    let error = match (&bad, &fixed) {
        (Err(b), Err(f)) => Some(format!("bad loop: {b}; fixed loop: {f}")),
        (Err(b), _) => Some(format!("bad loop: {b}")),
        (_, Err(f)) => Some(format!("fixed loop: {f}")),
        _ => None,
    };
    let b = bad.ok();
    let f = fixed.ok();
    let pick = |m: &Measure| -> u64 {
        match def.metric {
            Metric::Held => m.held as u64,
            _ => m.peak as u64,
        }
    };
    let saving_bytes = match (&b, &f) {
        (Some(b), Some(f)) => Some(pick(b) as i64 - pick(f) as i64),
        _ => None,
    };
    let saving_fraction = match (&b, saving_bytes) {
        (Some(b), Some(s)) if pick(b) > 0 => Some(s as f64 / pick(b) as f64),
        _ => None,
    };
    let est = if estimated { "an estimated " } else { "" };
    let saving_summary = match (&b, &f, saving_bytes) {
        (_, _, None) => format!("not measured: {}", error.clone().unwrap_or_default()),
        (Some(b), Some(f), Some(s)) => match def.metric {
            Metric::Peak => format!("fix saves {est}{} of peak device memory ({:.0}%)", fmt_bytes(s as f64), saving_fraction.unwrap_or(0.0) * 100.0),
            Metric::Held => format!(
                "fix frees {est}{} held after {} iterations ({} per iteration, {:.0}%)",
                fmt_bytes(s as f64),
                iters,
                fmt_bytes(s as f64 / iters.max(1) as f64),
                saving_fraction.unwrap_or(0.0) * 100.0
            ),
            Metric::StepTime => {
                let per_step = |m: &Measure| m.mallocs_per_step.map(|v| format!("{v:.1}")).unwrap_or_else(|| m.driver_mallocs.to_string());
                match (b.step_ms, f.step_ms) {
                    (Some(tb), Some(tf)) if tf > 0.0 => format!(
                        "fix saves {:.2} ms per step ({:+.0}% step time with empty_cache; {} vs {} driver allocations per step)",
                        tb - tf,
                        (tb / tf - 1.0) * 100.0,
                        per_step(b),
                        per_step(f)
                    ),
                    _ => format!("step time not measured on the simulator; {} vs {} driver allocations per step", per_step(b), per_step(f)),
                }
            }
            Metric::Underflow => match (b.underflow, f.underflow) {
                (Some(ub), Some(uf)) => format!(
                    "without loss scaling {:.1}% of gradient elements underflow to zero, with dynamic loss scaling {:.1}%",
                    ub * 100.0,
                    uf * 100.0
                ),
                _ => "underflow fractions need a GPU (the simulator computes nothing)".to_string(),
            },
        },
        _ => String::new(),
    };
    ScenarioReport {
        code: def.code.into(),
        name: def.name.into(),
        variant: def.variant.into(),
        scenario: def.description.into(),
        metric: def.metric,
        peak_bytes_bad: b.as_ref().map(|m| m.peak as u64),
        peak_bytes_fixed: f.as_ref().map(|m| m.peak as u64),
        held_bytes_bad: b.as_ref().map(|m| m.held as u64),
        held_bytes_fixed: f.as_ref().map(|m| m.held as u64),
        step_ms_bad: b.as_ref().and_then(|m| m.step_ms),
        step_ms_fixed: f.as_ref().and_then(|m| m.step_ms),
        saving_bytes,
        saving_fraction,
        saving_summary,
        underflow_fraction_bad: b.as_ref().and_then(|m| m.underflow),
        underflow_fraction_fixed: f.as_ref().and_then(|m| m.underflow),
        underflow_fraction_fp32: None,
        at_peak_bad: b.as_ref().map(|m| m.at_peak),
        at_peak_fixed: f.as_ref().map(|m| m.at_peak),
        driver_mallocs_bad: b.as_ref().map(|m| m.driver_mallocs),
        driver_mallocs_fixed: f.as_ref().map(|m| m.driver_mallocs),
        mallocs_per_step_bad: b.as_ref().and_then(|m| m.mallocs_per_step),
        mallocs_per_step_fixed: f.as_ref().and_then(|m| m.mallocs_per_step),
        tracker_reserved_delta_bytes: f.as_ref().map(|m| m.reserved_delta),
        driver_used_delta_bytes: f.as_ref().and_then(|m| m.driver_used_delta),
        error,
    }
}

struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn text(&self) -> String {
        let n = self.header.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| -> String {
            let cells: Vec<String> = r.iter().enumerate().map(|(i, c)| format!("{c:<width$}", width = w[i])).collect();
            cells.join("  ").trim_end().to_string()
        };
        let mut s = line(&self.header);
        s.push('\n');
        s.push_str(&w.iter().map(|x| "-".repeat(*x)).collect::<Vec<_>>().join("  "));
        s.push('\n');
        for r in &self.rows {
            s.push_str(&line(r));
            s.push('\n');
        }
        s
    }
    fn markdown(&self) -> String {
        let esc = |c: &String| c.replace('|', "\\|");
        let mut s = format!("| {} |\n", self.header.iter().map(esc).collect::<Vec<_>>().join(" | "));
        s.push_str(&format!("|{}\n", "---|".repeat(self.header.len())));
        for r in &self.rows {
            s.push_str(&format!("| {} |\n", r.iter().map(esc).collect::<Vec<_>>().join(" | ")));
        }
        s
    }
}

fn scenario_table(r: &Report) -> Table {
    let est = r.estimated;
    let header = ["rule", "scenario", "peak bad", "peak fixed", "held bad", "held fixed", "step bad", "step fixed", "saving"].map(String::from).to_vec();
    let rows = r
        .scenarios
        .iter()
        .map(|s| {
            vec![
                format!("{} {}", s.code, s.name),
                s.variant.clone(),
                opt_bytes(s.peak_bytes_bad, est),
                opt_bytes(s.peak_bytes_fixed, est),
                opt_bytes(s.held_bytes_bad, est),
                opt_bytes(s.held_bytes_fixed, est),
                opt_ms(s.step_ms_bad),
                opt_ms(s.step_ms_fixed),
                match &s.error {
                    Some(e) => format!("ERROR: {e}"),
                    None => s.saving_summary.clone(),
                },
            ]
        })
        .collect();
    Table { header, rows }
}

fn per_step(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into())
}

fn torch_table(r: &Report, t: &TorchComparison) -> Table {
    let header = ["rule", "scenario", "metric", "memlint saving", "torch saving", "rel. diff", "memlint bad/fixed", "torch bad/fixed"].map(String::from).to_vec();
    let mut rows = Vec::new();
    for s in &r.scenarios {
        let Some(ts) = t.scenarios.iter().find(|x| x.code == s.code && x.variant == s.variant) else { continue };
        let (ours, theirs) = match s.metric {
            Metric::Held => ((s.held_bytes_bad, s.held_bytes_fixed), (ts.held_bytes_bad, ts.held_bytes_fixed)),
            _ => ((s.peak_bytes_bad, s.peak_bytes_fixed), (ts.peak_bytes_bad, ts.peak_bytes_fixed)),
        };
        let pair = |p: (Option<u64>, Option<u64>)| format!("{} / {}", opt_bytes(p.0, false), opt_bytes(p.1, false));
        let metric = match s.metric {
            Metric::Held => "held",
            Metric::StepTime | Metric::Peak => "peak",
            Metric::Underflow => "peak",
        };
        rows.push(vec![
            s.code.clone(),
            s.variant.clone(),
            metric.into(),
            s.saving_bytes.map(|v| fmt_bytes(v as f64)).unwrap_or_else(|| "-".into()),
            ts.saving_bytes.map(|v| fmt_bytes(v as f64)).unwrap_or_else(|| ts.error.clone().unwrap_or_else(|| "-".into())),
            match (ts.saving_relative_difference, ts.saving_difference_bytes) {
                (Some(d), _) => format!("{:+.1}%", d * 100.0),
                (None, Some(b)) => format!("{} abs", fmt_bytes(b as f64)),
                _ => "-".into(),
            },
            pair(ours),
            pair(theirs),
        ]);
        if s.metric == Metric::StepTime {
            rows.push(vec![
                s.code.clone(),
                s.variant.clone(),
                "step".into(),
                match (s.step_ms_bad, s.step_ms_fixed) {
                    (Some(b), Some(f)) => format!("{:+.1}% with empty_cache", (b / f - 1.0) * 100.0),
                    _ => "-".into(),
                },
                match (ts.step_ms_bad, ts.step_ms_fixed) {
                    (Some(b), Some(f)) => format!("{:+.1}% with empty_cache", (b / f - 1.0) * 100.0),
                    _ => "-".into(),
                },
                match (s.step_ms_bad, s.step_ms_fixed, ts.step_ms_bad, ts.step_ms_fixed) {
                    (Some(a), Some(b), Some(c), Some(d)) => format!("{:+.1} points", ((a / b) - (c / d)) * 100.0),
                    _ => "-".into(),
                },
                format!("{} / {} ({} / {} mallocs/step)", opt_ms(s.step_ms_bad), opt_ms(s.step_ms_fixed), per_step(s.mallocs_per_step_bad), per_step(s.mallocs_per_step_fixed)),
                format!("{} / {} ({} / {} mallocs/step)", opt_ms(ts.step_ms_bad), opt_ms(ts.step_ms_fixed), per_step(ts.mallocs_per_step_bad), per_step(ts.mallocs_per_step_fixed)),
            ]);
        }
        if s.metric == Metric::Underflow {
            let f = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into());
            let d = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => format!("{:.3}", (a - b).abs()),
                _ => "-".into(),
            };
            let diff = format!(
                "{} / {} / {} abs",
                d(s.underflow_fraction_bad, ts.underflow_fraction_bad),
                d(s.underflow_fraction_fixed, ts.underflow_fraction_fixed),
                d(s.underflow_fraction_fp32, ts.underflow_fraction_fp32)
            );
            rows.push(vec![
                s.code.clone(),
                s.variant.clone(),
                "underflow".into(),
                "".into(),
                "".into(),
                diff,
                format!("{} / {} / fp32 {}", f(s.underflow_fraction_bad), f(s.underflow_fraction_fixed), f(s.underflow_fraction_fp32)),
                format!("{} / {} / fp32 {}", f(ts.underflow_fraction_bad), f(ts.underflow_fraction_fixed), f(ts.underflow_fraction_fp32)),
            ]);
        }
    }
    Table { header, rows }
}

fn header_lines(r: &Report) -> Vec<String> {
    let mut v = vec![format!(
        "memlint verify {} — {} (device {}): {} free of {}{}",
        r.version,
        r.device.name,
        r.device.index,
        fmt_bytes(r.device.free_bytes as f64),
        fmt_bytes(r.device.total_bytes as f64),
        if r.estimated { " [sim backend: every figure is an ESTIMATE, nothing ran on a GPU]" } else { "" }
    )];
    let w = &r.workload;
    v.push(format!(
        "workload: MLP {} × {} + ReLU, {} classes, batch {}, {} iterations, {}",
        w.layers,
        w.hidden,
        w.classes,
        w.batch,
        w.iters,
        w.dtype.name()
    ));
    if let Some(sz) = &r.from_snapshot {
        v.extend(crate::sizing::render_lines(sz));
    }
    v
}

fn findings_lines(r: &Report) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(fs) = &r.findings {
        let w = &r.workload;
        v.push(format!(
            "The figures are for memlint's reference workload (an MLP of {} layers of width {}, batch {}, {} iterations, {}) running each rule's documentation example, not for your script; {}",
            w.layers,
            w.hidden,
            w.batch,
            w.iters,
            w.dtype.name(),
            match &r.from_snapshot {
                Some(sz) => format!("its parameters and activations were sized after {} (above).", sz.file),
                None => "run with --from-snapshot FILE.pickle (a snapshot of your run) or --layers/--hidden/--batch to resize it.".into(),
            }
        ));
        for f in fs {
            let what = if f.measured.is_empty() { "no reference scenario for this rule".to_string() } else { f.measured.join("; ") };
            v.push(format!("{}:{}:{}: {} {}: {}", f.path, f.row, f.column, f.code, f.name, what));
        }
    }
    v
}

pub fn render_text(r: &Report) -> String {
    let mut s = header_lines(r).join("\n");
    s.push_str("\n\n");
    let f = findings_lines(r);
    if !f.is_empty() {
        s.push_str(&f.join("\n"));
        s.push_str("\n\n");
    }
    s.push_str(&scenario_table(r).text());
    if !r.rules_without_scenario.is_empty() {
        s.push_str(&format!("\nno reference scenario for: {}\n", r.rules_without_scenario.join(", ")));
    }
    if let Some(t) = &r.torch {
        s.push('\n');
        match &t.error {
            Some(e) => s.push_str(&format!("PyTorch comparison unavailable: {e}\n")),
            None => {
                s.push_str(&format!(
                    "PyTorch comparison (torch {}, torch.cuda.max_memory_allocated / memory_allocated; PyTorch's workspaces: {}):\n",
                    t.torch_version.clone().unwrap_or_default(),
                    t.workspace_bytes.map(|b| fmt_bytes(b as f64)).unwrap_or_else(|| "-".into())
                ));
                s.push_str(&torch_table(r, t).text());
            }
        }
    }
    if let Some(p) = &r.parallel {
        s.push('\n');
        s.push_str(&crate::parallel::render_text(p));
    }
    s.push_str(&format!("\nfinished in {:.1} s\n", r.elapsed_s));
    s
}

pub fn render_markdown(r: &Report) -> String {
    let mut s = String::new();
    for l in header_lines(r) {
        s.push_str(&format!("{l}  \n"));
    }
    s.push('\n');
    let f = findings_lines(r);
    for l in &f {
        s.push_str(&format!("- `{l}`\n"));
    }
    if !f.is_empty() {
        s.push('\n');
    }
    s.push_str(&scenario_table(r).markdown());
    if !r.rules_without_scenario.is_empty() {
        s.push_str(&format!("\nNo reference scenario for: {}\n", r.rules_without_scenario.join(", ")));
    }
    if let Some(t) = &r.torch {
        s.push('\n');
        match &t.error {
            Some(e) => s.push_str(&format!("PyTorch comparison unavailable: {e}\n")),
            None => {
                s.push_str(&format!("PyTorch comparison (torch {}):\n\n", t.torch_version.clone().unwrap_or_default()));
                s.push_str(&torch_table(r, t).markdown());
            }
        }
    }
    s
}
