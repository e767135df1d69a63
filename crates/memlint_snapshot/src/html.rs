//! `--format html`: one self-contained page (inline SVG and CSS, no script, nothing
//! fetched): memory over time with the top lines at the peak stacked under the allocated
//! curve, the peak marked, and the tables; each line links to the findings memlint reports
//! there (given by the caller, which owns the linter).

use std::fmt::Write as _;

use crate::analysis::{Device, Line};
use crate::report::{mib, suffix_len, Report};

/// A finding on a line, as the caller's linter reported it.
pub struct PageFinding {
    pub file: String,
    pub line: u32,
    pub code: String,
    pub name: String,
    /// Where the rule's documentation is: an address (shown as a link) or the command that
    /// prints it (`memlint rule <name>`, shown as code).
    pub url: String,
}

/// How many lines are stacked in the chart (the series must hold as many).
pub const STACKED_LINES: usize = 6;

const COLORS: [&str; STACKED_LINES] = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn findings_at<'a>(findings: &'a [PageFinding], l: &Line) -> Vec<(usize, &'a PageFinding)> {
    findings
        .iter()
        .enumerate()
        .filter(|(_, f)| f.line == l.line && suffix_len(&f.file, &l.file) >= 1 && f.file.rsplit(['/', '\\']).next() == l.file.rsplit(['/', '\\']).next())
        .collect()
}

fn line_row(o: &mut String, l: &Line, findings: &[PageFinding], with_count: bool) {
    let links: Vec<String> = findings_at(findings, l)
        .into_iter()
        .map(|(i, f)| format!("<a class=\"finding\" href=\"#finding-{i}\">{} {}</a>", esc(&f.code), esc(&f.name)))
        .collect();
    let _ = write!(
        o,
        "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td>{}<td><code>{}:{}</code> <span class=\"fn\">{}</span></td><td>{}</td></tr>",
        mib(l.bytes),
        l.blocks,
        if with_count { format!("<td class=\"num\">{}</td>", l.count.unwrap_or(0)) } else { String::new() },
        esc(&l.file),
        l.line,
        esc(&l.function),
        links.join(" ")
    );
}

fn chart(o: &mut String, d: &Device) {
    let (w, h, pad) = (960.0f64, 280.0f64, 48.0f64);
    let n = d.series.len();
    if n < 2 {
        o.push_str("<p>Too few events to draw.</p>");
        return;
    }
    let max = d.series.iter().map(|s| s.reserved_bytes.max(s.allocated_bytes)).max().unwrap_or(1).max(1) as f64;
    let x = |i: usize| pad + (w - 2.0 * pad) * i as f64 / (n - 1) as f64;
    let y = |v: u64| h - pad - (h - 2.0 * pad) * v as f64 / max;
    let _ = write!(o, "<svg id=\"chart-{}\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"memory over time\">", d.device);
    // stacked lines
    let k = d.line_series.first().map(|r| r.len()).unwrap_or(0);
    let mut base = vec![0u64; n];
    for j in 0..k {
        let top: Vec<u64> = (0..n).map(|i| base[i] + d.line_series.get(i).map(|r| r[j]).unwrap_or(0)).collect();
        let mut pts = String::new();
        for (i, t) in top.iter().enumerate() {
            let _ = write!(pts, "{:.1},{:.1} ", x(i), y(*t));
        }
        for i in (0..n).rev() {
            let _ = write!(pts, "{:.1},{:.1} ", x(i), y(base[i]));
        }
        let _ = write!(o, "<polygon class=\"stack\" points=\"{pts}\" fill=\"{}\" fill-opacity=\"0.75\"/>", COLORS[j % COLORS.len()]);
        base = top;
    }
    for (class, f) in [("allocated", (|s: &crate::analysis::Sample| s.allocated_bytes) as fn(&crate::analysis::Sample) -> u64), ("reserved", |s| s.reserved_bytes)] {
        let mut pts = String::new();
        for (i, s) in d.series.iter().enumerate() {
            let _ = write!(pts, "{:.1},{:.1} ", x(i), y(f(s)));
        }
        let _ = write!(o, "<polyline class=\"{class}\" points=\"{pts}\" fill=\"none\"/>");
    }
    // the peak: the sample closest in time
    let pi = d.series.iter().enumerate().min_by_key(|(_, s)| (s.time_us - d.peak_time_us).unsigned_abs()).map(|(i, _)| i).unwrap_or(0);
    let _ = write!(
        o,
        "<line class=\"peak\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\"/><text x=\"{0:.1}\" y=\"{3:.1}\" class=\"label\" text-anchor=\"end\">peak {4}</text>",
        x(pi),
        pad / 2.0,
        h - pad,
        pad / 2.0 - 4.0,
        mib(d.peak_allocated_bytes)
    );
    let _ = write!(o, "<text x=\"4\" y=\"{:.1}\" class=\"label\">{}</text><text x=\"4\" y=\"{:.1}\" class=\"label\">0</text>", y(max as u64) + 4.0, mib(max as u64), h - pad);
    o.push_str("</svg>");
    o.push_str("<p class=\"legend\"><span class=\"key allocated\"></span>allocated <span class=\"key reserved\"></span>reserved");
    for (j, l) in d.at_peak.iter().filter(|l| l.frame != u32::MAX).take(k).enumerate() {
        let _ = write!(o, " <span class=\"key\" style=\"background:{}\"></span><code>{}:{}</code>", COLORS[j % COLORS.len()], esc(l.file.rsplit(['/', '\\']).next().unwrap_or("")), l.line);
    }
    o.push_str("</p>");
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
</style></head><body><h1>Memory snapshot</h1><p><code>{}</code></p>",
        esc(&report.file),
        esc(&report.file)
    );
    for d in &report.devices {
        let _ = write!(
            o,
            "<h2 id=\"device-{0}\">Device {0}</h2><p>Peak: <b>{1}</b> allocated, {2} reserved ({3} events).</p>",
            d.device,
            mib(d.peak_allocated_bytes),
            mib(d.peak_reserved_bytes),
            d.events
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
                "<h3>Out of memory at {} µs</h3><p>{} requested while {} was allocated.</p><table class=\"oom\"><tr><th>bytes</th><th>blocks</th><th>line</th><th>findings</th></tr>",
                oom.time_us,
                mib(oom.requested_bytes),
                mib(oom.allocated_bytes)
            );
            for l in &oom.at_oom {
                line_row(&mut o, l, findings, false);
            }
            o.push_str("</table>");
        }
    }
    o.push_str("<h2>Findings on these lines</h2>");
    if findings.is_empty() {
        o.push_str("<p>memlint reports nothing on the lines of this snapshot (or their files were not found: pass <code>--source ROOT</code>).</p>");
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
            let _ = write!(o, "<li id=\"finding-{i}\"><code>{}:{}</code> {} {name}</li>", esc(&f.file), f.line, esc(&f.code));
        }
        o.push_str("</ul>");
    }
    o.push_str("</body></html>\n");
    o
}
