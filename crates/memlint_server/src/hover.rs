//! Hover over a finding: what is wrong, the rule's documentation, and what fixing it
//! saved when `memlint verify` measured it (its JSON report, read as plain JSON so that
//! this crate never links the GPU runtime).

use std::path::{Path, PathBuf};

use memlint_linter::{Diagnostic, Rule};
use serde_json::Value;

/// Where `memlint verify` reports are looked for, in each candidate folder.
pub const REPORT_FILES: &[&str] = &["memlint-verify.json", ".memlint/verify.json"];

/// The folders to look in: the document's own folder and its ancestors up to a workspace
/// folder that contains it (closest first), then the workspace folders.
pub fn report_dirs(document: Option<&Path>, roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(path) = document {
        if let Some(root) = roots.iter().find(|r| path.starts_with(r)) {
            let mut dir = path.parent();
            while let Some(d) = dir {
                dirs.push(d.to_owned());
                if d == root {
                    break;
                }
                dir = d.parent();
            }
        }
    }
    for root in roots {
        if !dirs.contains(root) {
            dirs.push(root.clone());
        }
    }
    dirs
}

/// The first report found: `Ok(json)` or `Err(why it could not be read)`.
pub fn find_report(dirs: &[PathBuf]) -> Option<(PathBuf, Result<Value, String>)> {
    for dir in dirs {
        for name in REPORT_FILES {
            let path = dir.join(name);
            if !path.is_file() {
                continue;
            }
            let parsed = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|text| serde_json::from_str::<Value>(&text).map_err(|e| e.to_string()));
            return Some((path, parsed));
        }
    }
    None
}

/// Whether the report's figures are the simulator's estimates (`memlint verify --backend
/// sim`) rather than measured on a GPU.
pub fn is_estimate(report: &Value) -> bool {
    report.get("backend").and_then(Value::as_str) == Some("sim") || report.get("estimated").and_then(Value::as_bool).unwrap_or(false)
}

/// The report's lines about one rule, in Markdown; empty when it has none. Each names the
/// scenario by its `variant` (`eval`, `train`, ...), with its description.
pub fn savings(report: &Value, rule: Rule) -> Vec<String> {
    let estimated = is_estimate(report);
    let device = report.pointer("/device/name").and_then(Value::as_str).filter(|d| !d.is_empty());
    let on = match (device, estimated) {
        (Some(d), true) => format!(" (estimated for {d})"),
        (Some(d), false) => format!(" (measured on {d})"),
        (None, true) => " (estimated)".to_owned(),
        (None, false) => String::new(),
    };
    let scenarios = report.get("scenarios").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    // MEM007's multi-device comparison is a report of its own (`parallel`).
    let parallel = report.get("parallel").filter(|p| p.get("code").and_then(Value::as_str).is_some_and(|c| c.eq_ignore_ascii_case(rule.code()))).and_then(|p| {
        let devices = p.get("devices").and_then(Value::as_u64).map(|n| format!("{n} devices")).unwrap_or_else(|| rule.name().to_owned());
        if let Some(error) = p.get("error").and_then(Value::as_str) {
            return Some(format!("- `{devices}`: not measured ({error})"));
        }
        let summary = p.get("saving_summary").and_then(Value::as_str).filter(|t| !t.is_empty())?;
        Some(format!("- `{devices}` (DataParallel against DistributedDataParallel): {summary}{on}"))
    });
    scenarios
        .iter()
        .filter(|s| s.get("code").and_then(Value::as_str).map(|c| c.eq_ignore_ascii_case(rule.code())).unwrap_or(false))
        .filter_map(|s| {
            let label = s.get("variant").and_then(Value::as_str).filter(|v| !v.is_empty()).unwrap_or(rule.name());
            // `scenario` is the description of what the two loops do.
            let about = s.get("scenario").and_then(Value::as_str).filter(|t| !t.is_empty()).map(|t| format!(" ({t})")).unwrap_or_default();
            if let Some(error) = s.get("error").and_then(Value::as_str) {
                return Some(format!("- `{label}`{about}: not measured ({error})"));
            }
            let summary = s.get("saving_summary").and_then(Value::as_str).filter(|t| !t.is_empty())?;
            Some(format!("- `{label}`{about}: {summary}{on}"))
        })
        .chain(parallel)
        .collect()
}

/// The hover text for the findings under the cursor, each with the places of its
/// evidence's facts in words (`line 12`; `None` for a fact with no place).
pub fn markdown(findings: &[(&Diagnostic, &[Option<String>])], report: Option<&(PathBuf, Result<Value, String>)>) -> String {
    let mut parts = Vec::new();
    for (finding, places) in findings {
        let rule = finding.rule;
        let mut text = format!("**memlint {}** `{}`: {}", rule.code(), rule.name(), finding.message);
        if let Some(help) = &finding.help {
            text.push_str(&format!("\n\n*Help:* {help}"));
        }
        text.push_str(&evidence_markdown(finding, places));
        match report {
            Some((path, Ok(json))) => {
                let lines = savings(json, rule);
                if !lines.is_empty() {
                    let by = if is_estimate(json) { "Estimated by `memlint verify --backend sim`" } else { "Measured by `memlint verify`" };
                    text.push_str(&format!("\n\n**{by}** (`{}`):\n{}", display_name(path), lines.join("\n")));
                }
            }
            Some((path, Err(e))) => {
                text.push_str(&format!("\n\n*The `memlint verify` report `{}` could not be read: {e}*", display_name(path)));
            }
            None => {}
        }
        text.push_str(&format!("\n\n---\n\n{}\n\n{}", rule.doc().markdown.trim(), docs_link(rule)));
        parts.push(text);
    }
    parts.join("\n\n---\n\n")
}

/// The finding's evidence as a Markdown list (`**Evidence:**`, a fact per item, its place
/// after it); empty without evidence.
pub fn evidence_markdown(finding: &Diagnostic, places: &[Option<String>]) -> String {
    if finding.evidence.is_empty() {
        return String::new();
    }
    let mut text = String::from("\n\n**Evidence:**");
    for (i, fact) in finding.evidence.iter().enumerate() {
        match places.get(i).and_then(Option::as_deref) {
            Some(place) => text.push_str(&format!("\n- {} — *{place}*", fact.text)),
            None => text.push_str(&format!("\n- {}", fact.text)),
        }
    }
    text
}

/// A link to the rule's page when it has an address; else the command that prints it
/// (`memlint rule <name>`: the documentation is compiled into memlint).
fn docs_link(rule: Rule) -> String {
    let url = rule.url();
    if url.contains("://") {
        format!("[{} documentation]({url})", rule.code())
    } else {
        format!("{} documentation in a terminal: `{url}`", rule.code())
    }
}

/// The snapshot looked for in each candidate folder when the `snapshot` setting is unset.
pub const SNAPSHOT_FILE: &str = ".memlint/snapshot.pickle";

/// The snapshot to read: the `snapshot` setting (relative to the first workspace folder),
/// else the first `.memlint/snapshot.pickle` in `dirs`.
pub fn find_snapshot(setting: Option<&str>, dirs: &[PathBuf], roots: &[PathBuf]) -> Option<PathBuf> {
    if let Some(s) = setting.filter(|s| !s.is_empty()) {
        let p = PathBuf::from(s);
        return Some(if p.is_absolute() { p } else { roots.first().map(|r| r.join(&p)).unwrap_or(p) });
    }
    dirs.iter().map(|d| d.join(SNAPSHOT_FILE)).find(|p| p.is_file())
}

type Loaded = (Option<std::time::SystemTime>, Result<std::sync::Arc<memlint_snapshot::Report>, String>);

/// Reads a snapshot once per modification time (hover asks again and again).
pub fn load_snapshot(path: &Path) -> Result<std::sync::Arc<memlint_snapshot::Report>, String> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Loaded>>> = OnceLock::new();
    let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let cache = CACHE.get_or_init(Default::default);
    if let Some((t, r)) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
        if *t == mtime && mtime.is_some() {
            return r.clone();
        }
    }
    let r = memlint_snapshot::load(path, None, 0).map(Arc::new).map_err(|e| e.to_string());
    cache.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_owned(), (mtime, r.clone()));
    r
}

/// The hover section for a finding at `line` (1-based) of `document`: the bytes the
/// snapshot measured there; None when the snapshot has nothing on that line.
pub fn snapshot_markdown(snapshot: &Path, report: &Result<std::sync::Arc<memlint_snapshot::Report>, String>, document: &Path, line: u32) -> Option<String> {
    use memlint_snapshot::report::mib;
    let report = match report {
        Ok(r) => r,
        Err(e) => return Some(format!("*The memory snapshot `{}` could not be read: {e}*", display_name(snapshot))),
    };
    let f = report.figures_for(document, line)?;
    let mut parts = Vec::new();
    if f.bytes_at_peak > 0 {
        parts.push(format!("{} alive at the peak", mib(f.bytes_at_peak)));
    }
    if f.retained_bytes > 0 {
        parts.push(format!("{} retained at the end, piled up {} times", mib(f.retained_bytes), f.retained_count));
    }
    let mut text = format!("**Measured in your run** (`{}`): {}", display_name(snapshot), parts.join("; "));
    if f.bytes_at_peak > 0 && f.bytes_at_peak >= report.max_line_bytes() {
        text.push_str("\n\nThis line holds the most memory at the peak of that run.");
    }
    Some(text)
}

fn display_name(path: &Path) -> String {
    let parent = path.parent().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned());
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match parent {
        Some(p) if p == ".memlint" => format!("{p}/{name}"),
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn savings_tolerate_missing_fields_and_mark_estimates() {
        let report = json!({
            "estimated": true,
            "device": {"name": "NVIDIA H100"},
            "scenarios": [
                {"code": "MEM001", "variant": "eval-loop", "saving_summary": "peak 3.1 GiB -> 1.2 GiB"},
                {"code": "MEM001", "variant": "broken", "scenario": "a loop", "error": "out of memory"},
                {"code": "MEM002"},
                {"name": "no code"},
                7
            ]
        });
        assert_eq!(
            savings(&report, Rule::EvalWithoutNoGrad),
            vec![
                "- `eval-loop`: peak 3.1 GiB -> 1.2 GiB (estimated for NVIDIA H100)".to_owned(),
                "- `broken` (a loop): not measured (out of memory)".to_owned(),
            ]
        );
        assert!(savings(&report, Rule::AccumulatedLossTensor).is_empty());
        assert!(savings(&json!({"scenarios": "nope"}), Rule::EvalWithoutNoGrad).is_empty());
        let measured = json!({"device": {"name": "H200"}, "scenarios": [{"code": "MEM004", "saving_summary": "s"}]});
        assert_eq!(savings(&measured, Rule::EmptyCacheInLoop), vec!["- `empty-cache-in-loop`: s (measured on H200)".to_owned()]);
    }

    #[test]
    fn data_parallel_hover_shows_the_multi_device_comparison() {
        let report = json!({
            "backend": "cuda",
            "device": {"name": "NVIDIA H100 80GB HBM3"},
            "scenarios": [],
            "parallel": {"code": "MEM007", "devices": 2, "error": null,
                         "saving_summary": "DataParallel peaks at 2.06 GiB on device 0 and 616 MiB on the others"}
        });
        assert_eq!(
            savings(&report, Rule::DataParallel),
            vec!["- `2 devices` (DataParallel against DistributedDataParallel): DataParallel peaks at 2.06 GiB on device 0 and 616 MiB on the others (measured on NVIDIA H100 80GB HBM3)".to_owned()]
        );
        assert!(savings(&report, Rule::EvalWithoutNoGrad).is_empty());
        let failed = json!({"parallel": {"code": "MEM007", "devices": 4, "error": "out of memory"}});
        assert_eq!(savings(&failed, Rule::DataParallel), vec!["- `4 devices`: not measured (out of memory)".to_owned()]);
    }

    #[test]
    fn report_dirs_walk_up_to_the_workspace_folder() {
        let roots = vec![PathBuf::from("/w")];
        let dirs = report_dirs(Some(Path::new("/w/a/b/t.py")), &roots);
        assert_eq!(dirs, vec![PathBuf::from("/w/a/b"), PathBuf::from("/w/a"), PathBuf::from("/w")]);
        let outside = report_dirs(Some(Path::new("/elsewhere/t.py")), &roots);
        assert_eq!(outside, vec![PathBuf::from("/w")]);
    }
}
