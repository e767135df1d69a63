//! `--format html`: one self-contained page (inline SVG and CSS, no script, nothing
//! fetched): memory over time with the top lines at the peak stacked under the allocated
//! curve, the peak marked, and the tables; each line links to the findings memlint reports
//! there (given by the caller, which owns the linter).

use std::fmt::Write as _;

use crate::analysis::{Device, Line};
use crate::batch::BatchReport;
use crate::report::{mib, since, suffix_len, Report};

/// A finding on a line, as the caller's linter reported it.
#[derive(Clone, Debug, Default)]
pub struct PageFinding {
    pub file: String,
    pub line: u32,
    pub code: String,
    pub name: String,
    /// Where the rule's documentation is: an address (shown as a link) or the command that
    /// prints it (`memlint rule <name>`, shown as code).
    pub url: String,
    /// What the run measured on the finding's line, in words (`check --snapshot`'s text).
    pub measured: Option<String>,
    /// The retained lines (recorded file, line) whose blocks the finding's line keeps alive.
    pub keeps: Vec<(String, u32)>,
}

/// How many lines are stacked in the chart (the series must hold as many).
pub const STACKED_LINES: usize = 6;

const COLORS: [&str; STACKED_LINES] = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2"];
const NO_USER_CODE_COLOR: &str = "#9c755f";
const OTHER_COLOR: &str = "#d3d3d3";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn findings_at<'a>(findings: &'a [PageFinding], l: &Line) -> Vec<(usize, &'a PageFinding)> {
    let same = |file: &str, line: u32| line == l.line && suffix_len(file, &l.file) >= 1 && file.rsplit(['/', '\\']).next() == l.file.rsplit(['/', '\\']).next();
    findings.iter().enumerate().filter(|(_, f)| same(&f.file, f.line) || f.keeps.iter().any(|(file, line)| same(file, *line))).collect()
}

fn line_row(o: &mut String, l: &Line, findings: &[PageFinding], with_count: bool) {
    let links: Vec<String> = findings_at(findings, l)
        .into_iter()
        .map(|(i, f)| {
            let kept = if f.line == l.line && f.file.rsplit(['/', '\\']).next() == l.file.rsplit(['/', '\\']).next() { "" } else { "kept by " };
            format!("<a class=\"finding\" href=\"#finding-{i}\">{kept}{} {}</a>", esc(&f.code), esc(&f.name))
        })
        .collect();
    let _ = write!(
        o,
        "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td>{}<td><code>{}{}</code> <span class=\"fn\">{}</span></td><td>{}</td></tr>",
        mib(l.bytes),
        l.blocks,
        if with_count { format!("<td class=\"num\">{}</td>", l.count.unwrap_or(0)) } else { String::new() },
        esc(&l.file),
        if l.line == 0 { String::new() } else { format!(":{}", l.line) },
        esc(&l.function),
        links.join(" ")
    );
}

/// Tick positions and labels for a span of `span` microseconds: 4 to 10 ticks at 1, 2 or 5
/// times a power of ten.
fn time_ticks(span: i64) -> Vec<(i64, String)> {
    if span <= 0 {
        return vec![(0, "0".into())];
    }
    let mut step = 1i64;
    'find: loop {
        for m in [1, 2, 5] {
            if span / (step * m) <= 8 {
                step *= m;
                break 'find;
            }
        }
        step *= 10;
    }
    (0..=span / step).map(|k| (k * step, since_label(k * step, step))).collect()
}

fn since_label(us: i64, step: i64) -> String {
    if step >= 1_000_000 {
        format!("{} s", us / 1_000_000)
    } else if step >= 100_000 {
        format!("{:.1} s", us as f64 / 1e6)
    } else if step >= 10_000 {
        format!("{:.2} s", us as f64 / 1e6)
    } else if step >= 1000 {
        format!("{} ms", us / 1000)
    } else {
        format!("{us} µs")
    }
}

fn frame_label(d: &Device, frame: u32) -> String {
    if frame == u32::MAX {
        return "&lt;no user code&gt; (autograd's backward)".into();
    }
    d.at_peak
        .iter()
        .find(|l| l.frame == frame)
        .map(|l| format!("<code>{}:{}</code>", esc(l.file.rsplit(['/', '\\']).next().unwrap_or("")), l.line))
        .unwrap_or_default()
}

fn chart(o: &mut String, d: &Device) {
    let (w, h, pad, bottom) = (960.0f64, 300.0f64, 48.0f64, 56.0f64);
    let n = d.series.len();
    if n < 2 {
        o.push_str("<p>Too few events to draw.</p>");
        return;
    }
    let max = d.series.iter().map(|s| s.reserved_bytes.max(s.allocated_bytes)).max().unwrap_or(1).max(1) as f64;
    // x: time since the first event (by event when the trace has no time)
    let t0 = d.start_time_us;
    let span = d.series.last().map(|s| s.time_us - t0).unwrap_or(0).max(0);
    let by_time = span > 0;
    let xt = |t: i64| pad + (w - 2.0 * pad) * ((t - t0).max(0) as f64 / span.max(1) as f64);
    let x = |i: usize| if by_time { xt(d.series[i].time_us) } else { pad + (w - 2.0 * pad) * i as f64 / (n - 1) as f64 };
    let y = |v: u64| h - bottom - (h - bottom - pad) * v as f64 / max;
    let _ = write!(o, "<svg id=\"chart-{}\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"memory over time\">", d.device);
    // stacked lines, then the rest of the allocated memory (other lines, blocks from before the
    // recording) up to the allocated curve
    let k = d.line_series.first().map(|r| r.len()).unwrap_or(0);
    let mut base = vec![0u64; n];
    let polygon = |o: &mut String, top: &[u64], base: &[u64], fill: &str, class: &str| {
        let mut pts = String::new();
        for (i, t) in top.iter().enumerate() {
            let _ = write!(pts, "{:.1},{:.1} ", x(i), y(*t));
        }
        for i in (0..n).rev() {
            let _ = write!(pts, "{:.1},{:.1} ", x(i), y(base[i]));
        }
        let _ = write!(o, "<polygon class=\"{class}\" points=\"{pts}\" fill=\"{fill}\" fill-opacity=\"0.75\"/>");
    };
    for j in 0..k {
        let top: Vec<u64> = (0..n).map(|i| base[i] + d.line_series.get(i).map(|r| r[j]).unwrap_or(0)).collect();
        let fill = if d.line_series_frames.get(j) == Some(&u32::MAX) { NO_USER_CODE_COLOR } else { COLORS[j % COLORS.len()] };
        polygon(o, &top, &base, fill, "stack");
        base = top;
    }
    if k > 0 {
        let top: Vec<u64> = (0..n).map(|i| base[i].max(d.series[i].allocated_bytes)).collect();
        polygon(o, &top, &base, OTHER_COLOR, "stack other");
    }
    for (class, f) in [("allocated", (|s: &crate::analysis::Sample| s.allocated_bytes) as fn(&crate::analysis::Sample) -> u64), ("reserved", |s| s.reserved_bytes)] {
        let mut pts = String::new();
        for (i, s) in d.series.iter().enumerate() {
            let _ = write!(pts, "{:.1},{:.1} ", x(i), y(f(s)));
        }
        let _ = write!(o, "<polyline class=\"{class}\" points=\"{pts}\" fill=\"none\"/>");
    }
    // the time axis
    let _ = write!(o, "<line class=\"axis\" x1=\"{pad}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>", w - pad, h - bottom, h - bottom);
    if by_time {
        for (t, label) in time_ticks(span) {
            let xx = xt(t0 + t);
            let _ = write!(
                o,
                "<line class=\"tick\" x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"label tick-label\" x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
                h - bottom,
                h - bottom + 5.0,
                h - bottom + 18.0
            );
        }
        let _ = write!(o, "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">time since the first recorded event</text>", w / 2.0, h - 12.0);
    } else {
        let _ = write!(o, "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">events (the trace has no times)</text>", w / 2.0, h - 12.0);
    }
    // the peak
    let px = if by_time { xt(d.peak_time_us) } else { x(d.series.iter().enumerate().min_by_key(|(_, s)| (s.time_us - d.peak_time_us).unsigned_abs()).map(|(i, _)| i).unwrap_or(0)) };
    let _ = write!(
        o,
        "<line class=\"peak\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\"/><text x=\"{0:.1}\" y=\"{3:.1}\" class=\"label\" text-anchor=\"end\">peak {4} at {5}</text>",
        px,
        pad / 2.0,
        h - bottom,
        pad / 2.0 - 4.0,
        mib(d.peak_allocated_bytes),
        since(d.peak_time_since_start_us)
    );
    let _ = write!(o, "<text x=\"4\" y=\"{:.1}\" class=\"label\">{}</text><text x=\"4\" y=\"{:.1}\" class=\"label\">0</text>", y(max as u64) + 4.0, mib(max as u64), h - bottom);
    o.push_str("</svg>");
    o.push_str("<p class=\"legend\"><span class=\"key allocated\"></span>allocated <span class=\"key reserved\"></span>reserved");
    for (j, &f) in d.line_series_frames.iter().take(k).enumerate() {
        let color = if f == u32::MAX { NO_USER_CODE_COLOR } else { COLORS[j % COLORS.len()] };
        let _ = write!(o, " <span class=\"key\" style=\"background:{color}\"></span>{}", frame_label(d, f));
    }
    if k > 0 {
        let _ = write!(o, " <span class=\"key\" style=\"background:{OTHER_COLOR}\"></span>other lines, and blocks from before the recording");
    }
    o.push_str("</p>");
}

/// The batch model's curve: predicted allocated and reserved peaks by batch size (log scale),
/// the budget line, the recorded point and the largest batch that fits.
fn batch_chart(o: &mut String, b: &BatchReport) {
    let pts = &b.curve;
    if pts.len() < 2 {
        return;
    }
    let (w, h, pad, bottom) = (960.0f64, 300.0f64, 56.0f64, 56.0f64);
    let lo = (pts.first().map(|p| p.batch).unwrap_or(1).max(1) as f64).log2();
    let hi = (pts.last().map(|p| p.batch).unwrap_or(2).max(2) as f64).log2().max(lo + 1.0);
    let top = pts.iter().map(|p| p.reserved_peak_bytes.max(p.allocated_peak_bytes)).chain(b.budget_bytes).max().unwrap_or(1).max(1) as f64 * 1.05;
    let x = |batch: u64| pad + (w - 2.0 * pad) * (((batch.max(1) as f64).log2() - lo) / (hi - lo));
    let y = |v: u64| h - bottom - (h - bottom - pad / 2.0) * v as f64 / top;
    o.push_str("<svg id=\"batch-curve\" viewBox=\"0 0 960 300\" width=\"960\" height=\"300\" role=\"img\" aria-label=\"predicted peak by batch size\">");
    for (class, f) in [("predicted-allocated", (|p: &crate::batch::BatchPrediction| p.allocated_peak_bytes) as fn(&crate::batch::BatchPrediction) -> u64), ("predicted-reserved", |p| p.reserved_peak_bytes)] {
        let mut line = String::new();
        for p in pts {
            let _ = write!(line, "{:.1},{:.1} ", x(p.batch), y(f(p)));
        }
        let _ = write!(o, "<polyline class=\"{class}\" points=\"{line}\" fill=\"none\"/>");
    }
    let _ = write!(o, "<line class=\"axis\" x1=\"{pad}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>", w - pad, h - bottom, h - bottom);
    let mut last_label = f64::MIN;
    for p in pts.iter().filter(|p| Some(p.batch) != b.largest_batch || p.batch == b.recorded_batch) {
        let xx = x(p.batch);
        let _ = write!(o, "<line class=\"tick\" x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>", h - bottom, h - bottom + 5.0);
        if xx - last_label >= 28.0 {
            let _ = write!(o, "<text class=\"label\" x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>", h - bottom + 18.0, p.batch);
            last_label = xx;
        }
    }
    let _ = write!(o, "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">batch size (log scale)</text>", w / 2.0, h - 12.0);
    if let Some(g) = b.budget_bytes {
        let yy = y(g);
        let _ = write!(o, "<line class=\"budget\" x1=\"{pad}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\"/><text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">budget {}</text>", w - pad, w - pad, yy - 4.0, mib(g));
    }
    let (rx, ry) = (x(b.recorded_batch), y(b.recorded_peak_allocated_bytes));
    let _ = write!(o, "<circle class=\"recorded\" cx=\"{rx:.1}\" cy=\"{ry:.1}\" r=\"5\"/><text class=\"label\" x=\"{:.1}\" y=\"{:.1}\">recorded: batch {}, {}</text>", rx + 8.0, ry - 8.0, b.recorded_batch, mib(b.recorded_peak_allocated_bytes));
    if let Some(l) = b.largest_batch.filter(|l| (*l as f64).log2() <= hi) {
        let xx = x(l);
        let _ = write!(o, "<line class=\"largest\" x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"label\" x=\"{:.1}\" y=\"{:.1}\">largest that fits: {l}</text>", pad / 2.0, h - bottom, xx + 4.0, pad / 2.0 + 10.0);
    }
    let _ = write!(o, "<text x=\"4\" y=\"{:.1}\" class=\"label\">{}</text><text x=\"4\" y=\"{:.1}\" class=\"label\">0</text>", y(top as u64) + 10.0, mib(top as u64), h - bottom);
    o.push_str("</svg><p class=\"legend\"><span class=\"key predicted-allocated\"></span>predicted allocated peak <span class=\"key predicted-reserved\"></span>predicted reserved peak <span class=\"key budget\"></span>budget <span class=\"key recorded\"></span>recorded</p>");
}

fn batch_section(o: &mut String, b: &BatchReport) {
    let _ = write!(
        o,
        "<h2 id=\"batch\">Batch size</h2><p>Recorded at batch <b>{}</b> ({}). At the recorded peak, {} does not depend on the batch and {} scales with it ({} per sample).</p>",
        b.recorded_batch,
        match b.batch_source {
            crate::batch::BatchSource::Recorded => "seen by memlint record",
            crate::batch::BatchSource::Given => "--batch",
            crate::batch::BatchSource::InputSizes => "guessed from the batch's tensors",
        },
        mib(b.fixed_bytes_at_peak),
        mib(b.batch_bytes_at_peak),
        mib(b.per_sample_bytes)
    );
    batch_chart(o, b);
    o.push_str("<table class=\"batch\"><tr><th>batch</th><th>allocated peak</th><th>reserved peak</th><th>fits</th></tr>");
    for p in &b.predictions {
        let _ = write!(
            o,
            "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            p.batch,
            mib(p.allocated_peak_bytes),
            mib(p.reserved_peak_bytes),
            match p.fits {
                Some(true) => "yes",
                Some(false) => "no",
                None => "",
            }
        );
    }
    o.push_str("</table>");
    if let (Some(g), Some(l)) = (b.budget_bytes, b.largest_batch) {
        let _ = write!(o, "<p class=\"largest\">Largest batch within {}: <b>{}{l}</b>.</p>", mib(g), if b.largest_batch_is_lower_bound { "at least " } else { "" });
    }
    if let Some(why) = &b.no_fit {
        let _ = write!(o, "<p class=\"advice\">{}</p>", esc(why));
    }
    if let Some(e) = &b.effective_batch {
        let _ = write!(o, "<p class=\"effective\">Effective batch {}: micro-batches of {} &times; {} accumulation steps. {}</p>", e.target, e.batch, e.accumulation_steps, esc(&e.loss_division));
    }
    let _ = write!(o, "<p>Confidence: <b>{}</b></p><ul class=\"confidence\">", b.confidence);
    for n in &b.confidence_notes {
        let _ = write!(o, "<li>{}</li>", esc(n));
    }
    o.push_str("</ul>");
}

/// The page for a report whose devices were analysed with `STACKED_LINES` line series.
pub fn render(report: &Report, findings: &[PageFinding]) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>memlint snapshot: {}</title><style>\
body{{font:14px system-ui,sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;margin:8px 0 20px}}\
td,th{{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left}}td.num{{text-align:right;font-variant-numeric:tabular-nums}}\
.fn{{color:#666}}polyline.allocated{{stroke:#222;stroke-width:1.5}}polyline.reserved{{stroke:#999;stroke-dasharray:4 3}}\
line.peak{{stroke:#d00;stroke-width:1}}.label{{font-size:11px;fill:#444}}.key{{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}}\
.key.allocated{{background:#222}}.key.reserved{{background:#999}}.advice{{background:#fff4d6;padding:8px}}a.finding{{color:#b00}}\
line.axis,line.tick{{stroke:#666}}polyline.predicted-allocated{{stroke:#4e79a7;stroke-width:2}}polyline.predicted-reserved{{stroke:#999;stroke-width:1.5;stroke-dasharray:4 3}}\
line.budget{{stroke:#d00;stroke-dasharray:6 3}}line.largest{{stroke:#59a14f}}circle.recorded{{fill:#f28e2b}}.key.predicted-allocated{{background:#4e79a7}}\
.key.predicted-reserved{{background:#999}}.key.budget{{background:#d00}}.key.recorded{{background:#f28e2b;border-radius:6px}}.measured{{color:#555}}\
</style></head><body><h1>Memory snapshot</h1><p><code>{}</code></p>",
        esc(&report.file),
        esc(&report.file)
    );
    for d in &report.devices {
        let _ = write!(
            o,
            "<h2 id=\"device-{0}\">Device {0}</h2><p>Peak: <b>{1}</b> allocated, {2} reserved, {4} after the first recorded event ({3} events).</p>",
            d.device,
            mib(d.peak_allocated_bytes),
            mib(d.peak_reserved_bytes),
            d.events,
            since(d.peak_time_since_start_us)
        );
        chart(&mut o, d);
        o.push_str("<h3>Alive at the peak</h3><table class=\"at-peak\"><tr><th>bytes</th><th>blocks</th><th>line</th><th>findings</th></tr>");
        for l in &d.at_peak {
            line_row(&mut o, l, findings, false);
        }
        o.push_str("</table><h3>Retained (allocated again and again, never freed)</h3>");
        if d.retained.is_empty() {
            o.push_str("<p>No line's allocations pile up.</p>");
        } else {
            o.push_str("<table class=\"retained\"><tr><th>bytes</th><th>blocks</th><th>times</th><th>line</th><th>findings</th></tr>");
            for l in &d.retained {
                line_row(&mut o, l, findings, true);
            }
            o.push_str("</table>");
        }
        o.push_str("<h3>Fragmentation</h3><table><tr><th></th><th>reserved</th><th>allocated</th><th>free in segments</th><th>largest free block</th><th>segments</th></tr>");
        for (name, f) in [("at the peak of reserved", &d.fragmentation.at_peak_reserved), ("at the end", &d.fragmentation.at_end)] {
            let _ = write!(
                o,
                "<tr><td>{name}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                mib(f.reserved_bytes),
                mib(f.allocated_bytes),
                mib(f.free_in_segments_bytes),
                mib(f.largest_free_block_bytes),
                f.segments
            );
        }
        o.push_str("</table>");
        if let Some(s) = d.fragmentation.expandable_segments_saving_bytes {
            let _ = write!(o, "<p class=\"advice\">Memory reserved but free in pieces was large: <code>PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True</code> could have saved up to {}.</p>", mib(s));
        }
        for oom in &d.ooms {
            let _ = write!(
                o,
                "<h3>Out of memory {} after the first recorded event</h3><p>{} requested while {} was allocated.</p><table class=\"oom\"><tr><th>bytes</th><th>blocks</th><th>line</th><th>findings</th></tr>",
                since(oom.time_since_start_us),
                mib(oom.requested_bytes),
                mib(oom.allocated_bytes)
            );
            for l in &oom.at_oom {
                line_row(&mut o, l, findings, false);
            }
            o.push_str("</table>");
        }
    }
    if let Some(b) = &report.batch {
        batch_section(&mut o, b);
    }
    o.push_str("<h2>Findings in these files</h2>");
    if findings.is_empty() {
        o.push_str("<p>memlint reports nothing in the files of this snapshot (or they were not found: pass <code>--source ROOT</code>).</p>");
    } else {
        o.push_str("<ul class=\"findings\">");
        for (i, f) in findings.iter().enumerate() {
            // A rule's documentation is a link when it has an address, else the command
            // that prints it (`memlint rule <name>`).
            let name = if f.url.contains("://") {
                format!("<a href=\"{}\">{}</a>", esc(&f.url), esc(&f.name))
            } else if f.url.is_empty() {
                esc(&f.name)
            } else {
                format!("{} (documentation: <code>{}</code>)", esc(&f.name), esc(&f.url))
            };
            let measured = f.measured.as_ref().map(|m| format!("<br><span class=\"measured\">measured: {}</span>", esc(m))).unwrap_or_default();
            let _ = write!(o, "<li id=\"finding-{i}\"><code>{}:{}</code> {} {name}{measured}</li>", esc(&f.file), f.line, esc(&f.code));
        }
        o.push_str("</ul>");
    }
    o.push_str("</body></html>\n");
    o
}
