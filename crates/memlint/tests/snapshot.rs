//! `memlint snapshot`, `snapshot diff`, `check --snapshot` and `verify --snapshot` on
//! snapshots recorded with PyTorch on an H100 (tests/snapshot/data) from the scripts in
//! tests/snapshot/scripts, which memlint's rules flag.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

mod support;

fn memlint() -> Command {
    let mut cmd = Command::cargo_bin("memlint").unwrap();
    cmd.current_dir(repo()).env_remove("MEMLINT_OUTPUT_FORMAT");
    cmd
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

const DATA: &str = "tests/snapshot/data";
const SCRIPTS: &str = "tests/snapshot/scripts";

fn torch(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(repo().join(DATA).join(format!("{name}.json"))).unwrap()).unwrap()
}

fn json_of(args: &[&str]) -> Value {
    let out = memlint().args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn snapshot_json_peak_is_max_memory_allocated() {
    for name in ["eval_no_grad_bad", "summed_loss_bad", "oom_caught", "varlen_segments"] {
        let v = json_of(&["snapshot", &format!("{DATA}/{name}.pickle"), "--format", "json"]);
        assert_eq!(v["devices"][0]["peak_allocated_bytes"], torch(name)["max_memory_allocated"], "{name}");
    }
}

#[test]
fn snapshot_text_and_source_mapping() {
    let out = memlint().args(["snapshot", &format!("{DATA}/summed_loss_bad.pickle"), "--source", SCRIPTS]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("peak: 70.2 MiB allocated"), "{text}");
    assert!(text.contains("tests/snapshot/scripts/_model.py:14 (forward)"), "{text}");
    assert!(text.contains("retained (allocated again and again, never freed):"), "{text}");
    let text = String::from_utf8(memlint().args(["snapshot", &format!("{DATA}/varlen_segments.pickle")]).output().unwrap().stdout).unwrap();
    assert!(text.contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True could have saved up to"), "{text}");
}

#[test]
fn snapshot_errors_exit_2_and_name_the_file() {
    for (file, what) in [("README.md", "is not a pickle"), ("missing.pickle", "cannot read missing.pickle")] {
        let out = memlint().args(["snapshot", file]).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(what), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.pickle");
    let bytes = std::fs::read(repo().join(DATA).join("clean_loop.pickle")).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let out = memlint().args(["snapshot", cut.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("truncated"));
    let out = memlint().args(["check", "--snapshot", cut.to_str().unwrap(), SCRIPTS]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn snapshot_diff_shows_the_saving() {
    let v = json_of(&["snapshot", "diff", &format!("{DATA}/eval_no_grad_bad.pickle"), &format!("{DATA}/eval_no_grad_fixed.pickle"), "--format", "json"]);
    let before = torch("eval_no_grad_bad")["max_memory_allocated"].as_u64().unwrap();
    let after = torch("eval_no_grad_fixed")["max_memory_allocated"].as_u64().unwrap();
    assert_eq!(v["peak_allocated_bytes_before"].as_u64().unwrap() - v["peak_allocated_bytes_after"].as_u64().unwrap(), before - after);
    let forward = &v["lines"][0];
    assert!(forward["file"].as_str().unwrap().ends_with("_model.py"), "{v:#}");
    assert!(forward["saving_bytes"].as_i64().unwrap() > 0);
}

#[test]
fn check_with_a_snapshot_attaches_measured_bytes_in_every_format() {
    let snap = format!("{DATA}/eval_no_grad_bad.pickle");
    let file = format!("{SCRIPTS}/eval_no_grad_bad.py");
    let v = json_of_status(&["check", "--snapshot", &snap, &file, "--output-format", "json"], 1);
    let f = &v[0];
    assert_eq!(f["code"], "MEM001");
    let s = &f["snapshot"];
    assert!(s["bytes_at_peak"].as_u64().unwrap() > 20 << 20, "{s}");
    assert_eq!(s["retained_bytes"], 0);
    assert_eq!(s["retained_count"], 0);
    for (format, needle) in [
        ("text", "measured: "),
        ("concise", "  measured: "),
        ("github", "(measured: "),
        ("junit", "(measured: "),
        ("sarif", "\"bytes_at_peak\""),
    ] {
        let out = memlint().args(["check", "--snapshot", &snap, &file, "--output-format", format]).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(needle), "{format}: {text}");
    }
    // without --snapshot, nothing changes
    let v = json_of_status(&["check", &file, "--output-format", "json"], 1);
    assert!(v[0].get("snapshot").is_none());
    // a finding on a line that allocates nothing itself (`outputs.append(out)`) still
    // gets reported, with or without figures
    let v = json_of_status(&["check", "--snapshot", &format!("{DATA}/collect_outputs_bad.pickle"), &format!("{SCRIPTS}/collect_outputs_bad.py"), "--output-format", "json"], 1);
    assert!(v.as_array().unwrap().iter().any(|f| f["code"] == "MEM006"), "{v}");
}

#[test]
fn sarif_with_snapshot_still_validates() {
    let schema = support::sarif_schema();
    let out = memlint()
        .args(["check", "--snapshot", &format!("{DATA}/eval_no_grad_bad.pickle"), &format!("{SCRIPTS}/eval_no_grad_bad.py"), "--output-format", "sarif"])
        .output()
        .unwrap();
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&sarif), "{:?}", validator.iter_errors(&sarif).map(|e| e.to_string()).collect::<Vec<_>>());
    assert!(sarif["runs"][0]["results"][0]["properties"]["snapshot"]["bytes_at_peak"].as_u64().unwrap() > 0);
}

fn json_of_status(args: &[&str], status: i32) -> Value {
    let out = memlint().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(status), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn verify_prints_the_users_figures_first() {
    let out = memlint()
        .args(["verify", &format!("{SCRIPTS}/eval_no_grad_bad.py"), "--snapshot", &format!("{DATA}/eval_no_grad_bad.pickle"), "--backend", "sim", "--iters", "1", "--layers", "2", "--hidden", "64", "--batch", "8"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let mine = err.find("measured in your run").expect("the user's figures");
    let reference = err.find("then the reference loop").expect("the reference loop's label");
    assert!(mine < reference);
    assert!(err.contains("eval_no_grad_bad.py:12: MEM001 eval-without-no-grad: ") && err.contains("MiB alive at the peak"), "{err}");
}

const BATCH: &str = "tests/snapshot/data/batch";

#[test]
fn snapshot_output_files_get_the_mode_check_gives_them() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.html");
    let report = dir.path().join("report.json");
    let out = memlint().args(["snapshot", &format!("{DATA}/clean_loop.pickle"), "--format", "html", "-o", page.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    memlint().args(["check", SCRIPTS, "--output-format", "json", "--output-file", report.to_str().unwrap(), "--exit-zero"]).output().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&page), mode(&report), "snapshot -o and check -o create files alike");
        assert_ne!(mode(&page) & 0o044, 0, "readable by others under the usual umask: {:o}", mode(&page));
        // an existing file keeps its mode
        std::fs::set_permissions(&page, std::fs::Permissions::from_mode(0o640)).unwrap();
        memlint().args(["snapshot", &format!("{DATA}/clean_loop.pickle"), "-o", page.to_str().unwrap()]).output().unwrap();
        assert_eq!(mode(&page), 0o640);
    }
}

#[test]
fn peak_times_are_times_since_the_first_event() {
    let out = memlint().args(["snapshot", &format!("{DATA}/oom_caught.pickle")]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("after the first recorded event)"), "{text}");
    assert!(text.contains("out of memory ") && !text.contains(" µs:"), "{text}");
    // no raw epoch (PyTorch's clock is microseconds since 1970: 16 digits)
    assert!(!text.split_whitespace().any(|w| w.len() >= 16 && w.chars().all(|c| c.is_ascii_digit())), "{text}");
    let v = json_of(&["snapshot", &format!("{DATA}/oom_caught.pickle"), "--format", "json"]);
    let d = &v["devices"][0];
    assert_eq!(d["peak_time_since_start_us"].as_i64().unwrap(), d["peak_time_us"].as_i64().unwrap() - d["start_time_us"].as_i64().unwrap());
    assert!(d["ooms"][0]["time_since_start_us"].as_i64().unwrap() >= 0);
}

#[test]
fn the_html_chart_draws_the_backward_pass_and_labels_its_time_axis() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.html");
    let out = memlint().args(["snapshot", &format!("{DATA}/retain_graph_bad.pickle"), "--source", SCRIPTS, "--format", "html", "-o", page.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    let chart = &html[html.find("<svg id=\"chart-0\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    // <no user code> (autograd's backward threads) has an area and a legend entry
    assert!(chart.contains("fill=\"#9c755f\""), "no area for <no user code>");
    assert!(html.contains("&lt;no user code&gt; (autograd's backward)"), "no legend entry");
    // and what the stacked lines leave out fills up to the allocated curve
    assert!(chart.contains("class=\"stack other\""));
    // the time axis has labels, the peak its time since the start
    assert!(chart.matches("class=\"label tick-label\"").count() >= 3, "{chart}");
    assert!(chart.contains("time since the first recorded event"));
    assert!(chart.contains("peak 114.3 MiB at 4.74 s"), "{chart}");
}

#[test]
fn a_finding_that_keeps_a_graph_is_charged_with_what_its_fix_frees() {
    // `total += loss` keeps every step's graph: the forward's activations (51 MiB) and the
    // batches they saved, not the 512 B the line allocates itself
    let v = json_of_status(&["check", "--snapshot", &format!("{DATA}/summed_loss_bad.pickle"), &format!("{SCRIPTS}/summed_loss_bad.py"), "--output-format", "json"], 1);
    let f = v.as_array().unwrap().iter().find(|f| f["code"] == "MEM002").unwrap();
    let s = &f["snapshot"];
    assert_eq!(s["bytes_at_peak"], 512);
    assert!(s["kept_bytes"].as_u64().unwrap() > 51 << 20, "{s}");
    assert!(s["kept_derivation"].as_str().unwrap().contains("piled up over 6 iterations"), "{s}");
    // `losses.append(loss)` allocates nothing itself: it is still charged (and was not before)
    let v = json_of_status(&["check", "--snapshot", &format!("{DATA}/retain_graph_bad.pickle"), &format!("{SCRIPTS}/retain_graph_bad.py"), "--output-format", "json"], 1);
    let f = v.as_array().unwrap().iter().find(|f| f["code"] == "MEM002").unwrap();
    assert!(f["snapshot"]["kept_bytes"].as_u64().unwrap() > 51 << 20, "{f}");
    let v = json_of_status(&["check", "--snapshot", &format!("{DATA}/collect_outputs_bad.pickle"), &format!("{SCRIPTS}/collect_outputs_bad.py"), "--output-format", "json"], 1);
    let f = v.as_array().unwrap().iter().find(|f| f["code"] == "MEM006").unwrap();
    assert!(f["snapshot"]["kept_bytes"].as_u64().unwrap() > 20 << 20, "{f}");
    // the fixed run keeps nothing: no finding there is charged with kept bytes
    let out = memlint().args(["check", "--snapshot", &format!("{DATA}/summed_loss_fixed.pickle"), &format!("{SCRIPTS}/summed_loss_fixed.py"), "--output-format", "json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.as_array().unwrap().iter().all(|f| f["code"] != "MEM002" && f["snapshot"].get("kept_bytes").is_none()), "{v}");
    // text says how it was derived
    let out = memlint().args(["check", "--snapshot", &format!("{DATA}/summed_loss_bad.pickle"), &format!("{SCRIPTS}/summed_loss_bad.py")]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("keeps ") && text.contains("what the fix frees"), "{text}");
}

#[test]
fn the_html_page_links_every_finding_of_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.html");
    memlint().args(["snapshot", &format!("{DATA}/retain_graph_bad.pickle"), "--source", SCRIPTS, "--format", "html", "-o", page.to_str().unwrap()]).output().unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    let list = &html[html.find("<ul class=\"findings\">").unwrap()..];
    // MEM002 on `losses.append(loss)` (a line that allocates nothing) is listed, with what it keeps
    assert!(list.contains("retain_graph_bad.py:16</code> MEM002"), "{list}");
    assert!(list.contains("MEM005"));
    assert!(list.contains("measured: keeps "), "{list}");
    // the retained lines link to the findings that keep them, and every link lands
    let retained = &html[html.find("<table class=\"retained\">").unwrap()..];
    let retained = &retained[..retained.find("</table>").unwrap()];
    assert!(retained.contains("kept by MEM002 accumulated-loss-tensor"), "{retained}");
    for link in html.match_indices("href=\"#finding-").map(|(i, _)| &html[i + 7..i + 7 + html[i + 7..].find('"').unwrap()]) {
        assert!(html.contains(&format!("id=\"{link}\"")), "{link} goes nowhere");
    }
}

#[test]
fn budget_predicts_the_batch_that_fits() {
    let snap = format!("{BATCH}/gpt2_b16.pickle");
    let out = memlint().args(["snapshot", &snap, "--budget", "10GiB", "--effective-batch", "256", "--top", "3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("batch size (device 0): recorded at 16 (seen by memlint record)"), "{text}");
    assert!(text.contains("largest batch within 10.00 GiB: 34 "), "{text}");
    assert!(text.contains("effective batch 256: micro-batches of 32 x 8 accumulation steps"), "{text}");
    assert!(text.contains("loss / 8") && text.contains("MEM011"), "{text}");
    assert!(text.contains("confidence: high"), "{text}");
    let v = json_of(&["snapshot", &snap, "--budget", "10GiB", "--format", "json"]);
    let b = &v["batch"];
    assert_eq!(b["recorded_batch"], 16);
    assert_eq!(b["batch_source"], "recorded");
    assert_eq!(b["largest_batch"], 34);
    assert_eq!(b["budget_bytes"], 10u64 << 30);
    let batches: Vec<u64> = b["predictions"].as_array().unwrap().iter().map(|p| p["batch"].as_u64().unwrap()).collect();
    assert_eq!(batches, vec![8, 16, 32, 64, 128, 256]);
    assert_eq!(b["predictions"][0]["fits"], true);
    assert_eq!(b["predictions"][5]["fits"], false);
    assert_eq!(v["record"]["max_memory_allocated"], v["devices"][0]["peak_allocated_bytes"]);
    // without --budget: no batch section
    assert!(json_of(&["snapshot", &snap, "--format", "json"]).get("batch").is_none());
    // --batch alone: the predictions, no budget
    let v = json_of(&["snapshot", &format!("{DATA}/transformer_fp32.pickle"), "--batch", "16", "--format", "json"]);
    assert_eq!(v["batch"]["batch_source"], "given");
    assert!(v["batch"].get("largest_batch").is_none());
    // the page: the curve, the budget line, the recorded point
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("b.html");
    memlint().args(["snapshot", &snap, "--budget", "10GiB", "--format", "html", "-o", page.to_str().unwrap()]).output().unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    for needle in ["<svg id=\"batch-curve\"", "class=\"predicted-allocated\"", "class=\"budget\"", "<circle class=\"recorded\"", "largest that fits: 34", "budget 10.00 GiB"] {
        assert!(html.contains(needle), "{needle}");
    }
}

#[test]
fn budget_errors_are_clear() {
    // no loop in the recording: exit 2 naming the file
    let out = memlint().args(["snapshot", &format!("{BATCH}/ex_train_classifier.pickle"), "--budget", "4GiB"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ex_train_classifier.pickle: cannot predict other batch sizes: no training loop found"), "{err}");
    // a batch size it cannot tell
    let out = memlint().args(["snapshot", &format!("{DATA}/transformer_fp32.pickle"), "--budget", "4GiB"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --batch N"));
    // a budget below what does not depend on the batch: an answer, exit 0
    let out = memlint().args(["snapshot", &format!("{BATCH}/gpt2_b16.pickle"), "--budget", "300MiB", "--effective-batch", "64"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("no batch size fits in 300.0 MiB"), "{text}");
    let v = json_of(&["snapshot", &format!("{BATCH}/gpt2_b16.pickle"), "--budget", "300MiB", "--format", "json"]);
    assert!(v["batch"].get("largest_batch").is_none());
    assert!(v["batch"]["no_fit"].as_str().unwrap().contains("does not depend on the batch"));
    // arguments
    for args in [&["--budget", "lots"][..], &["--budget", "4 parsecs"], &["--effective-batch", "64"], &["--batch", "0"]] {
        let out = memlint().args(["snapshot", &format!("{BATCH}/gpt2_b16.pickle")]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
