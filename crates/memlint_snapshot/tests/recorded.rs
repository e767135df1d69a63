//! Tests on snapshots recorded with PyTorch on an H100 (tests/snapshot/scripts, recorded
//! by tests/snapshot/scripts/run_all.sh; what PyTorch reported is in the .json beside each).

use std::path::{Path, PathBuf};

use memlint_snapshot::{diff, load, read_snapshot, Report, SourceMap};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/snapshot/data")
}

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/snapshot/scripts")
}

fn report(name: &str) -> Report {
    load(&data().join(format!("{name}.pickle")), None, 0).unwrap()
}

fn torch(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(data().join(format!("{name}.json"))).unwrap()).unwrap()
}

/// The line of a `# snapshot: TAG` marker in a script.
fn marker(script: &str, tag: &str) -> u32 {
    let text = std::fs::read_to_string(scripts().join(script)).unwrap();
    let hits: Vec<u32> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_end().ends_with(&format!("# snapshot: {tag}")))
        .map(|(i, _)| i as u32 + 1)
        .collect();
    assert_eq!(hits.len(), 1, "{script}: marker {tag}");
    hits[0]
}

const ALL: &[&str] = &[
    "clean_loop",
    "collect_outputs_bad",
    "collect_outputs_fixed",
    "eval_no_grad_bad",
    "eval_no_grad_fixed",
    "oom_caught",
    "retain_graph_bad",
    "retain_graph_fixed",
    "summed_loss_bad",
    "summed_loss_fixed",
    "varlen_expandable",
    "varlen_segments",
];

#[test]
fn peak_is_pytorchs_max_memory_allocated() {
    for name in ALL {
        let r = report(name);
        let t = torch(name);
        assert_eq!(r.devices.len(), 1, "{name}");
        let d = &r.devices[0];
        assert_eq!(d.peak_allocated_bytes, t["max_memory_allocated"].as_u64().unwrap(), "{name}: peak allocated");
        assert_eq!(d.peak_reserved_bytes, t["max_memory_reserved"].as_u64().unwrap(), "{name}: peak reserved");
        assert_eq!(d.fragmentation.at_end.allocated_bytes, t["memory_allocated"].as_u64().unwrap(), "{name}: allocated at end");
        assert_eq!(d.fragmentation.at_end.reserved_bytes, t["memory_reserved"].as_u64().unwrap(), "{name}: reserved at end");
        // the lines alive at the peak add up to the peak
        assert_eq!(d.at_peak.iter().map(|l| l.bytes).sum::<u64>(), d.peak_allocated_bytes, "{name}");
    }
}

#[test]
fn every_pickle_protocol_reads_the_same() {
    let base = report("clean_loop");
    for p in ["clean_loop.p2", "clean_loop.p5"] {
        let r = report(p);
        assert_eq!(r.devices[0].peak_allocated_bytes, base.devices[0].peak_allocated_bytes, "{p}");
        assert_eq!(r.devices[0].at_peak.len(), base.devices[0].at_peak.len(), "{p}");
        // written by a second _snapshot() call after _dump_snapshot: the same trace, at most
        // a few events longer
        assert!(r.devices[0].events >= base.devices[0].events, "{p}");
    }
    // protocol 5 is what the file says
    let bytes = std::fs::read(data().join("clean_loop.p5.pickle")).unwrap();
    assert_eq!(&bytes[..2], b"\x80\x05");
}

#[test]
fn named_lines_are_the_allocating_lines() {
    let r = report("eval_no_grad_bad");
    let d = &r.devices[0];
    let top = &d.at_peak[0];
    assert!(top.file.ends_with("_model.py"), "{top:?}");
    assert_eq!(top.line, marker("_model.py", "activation"));
    assert_eq!(top.function, "forward");
    // every named line is a line of the recorded scripts that allocates
    for l in &d.at_peak {
        let text = std::fs::read_to_string(scripts().join(Path::new(&l.file).file_name().unwrap())).unwrap();
        let src = text.lines().nth(l.line as usize - 1).unwrap();
        assert!(src.contains("# snapshot:") || src.contains(".cuda()"), "{}:{} `{src}`", l.file, l.line);
    }
}

#[test]
fn retained_lines_are_the_accumulating_ones() {
    let activation = marker("_model.py", "activation");
    for (bad, fixed) in [
        ("summed_loss_bad", "summed_loss_fixed"),
        ("collect_outputs_bad", "collect_outputs_fixed"),
        ("retain_graph_bad", "retain_graph_fixed"),
    ] {
        let b = report(bad);
        let retained = &b.devices[0].retained;
        assert!(
            retained.iter().any(|l| l.file.ends_with("_model.py") && l.line == activation && l.count.unwrap() >= 5),
            "{bad}: {retained:#?}"
        );
        // nothing the trace allocated once (the model's parameters) is called retained
        assert!(retained.iter().all(|l| l.count.unwrap() >= 3));
        let f = report(fixed);
        assert!(
            !f.devices[0].retained.iter().any(|l| l.line == activation && l.file.ends_with("_model.py")),
            "{fixed}: {:#?}",
            f.devices[0].retained
        );
    }
    assert!(report("clean_loop").devices[0].retained.is_empty(), "{:#?}", report("clean_loop").devices[0].retained);
    // the varlen script keeps a slice of each batch on purpose: retained, 10 times
    let v = report("varlen_segments");
    let keep = marker("varlen_batches.py", "varlen-keep");
    let l = v.devices[0].retained.iter().find(|l| l.line == keep).expect("varlen-keep retained");
    assert_eq!(l.count, Some(10));
}

#[test]
fn diff_shows_the_saving_on_the_fixed_lines() {
    let activation = marker("_model.py", "activation");
    for (bad, fixed) in [("retain_graph_bad", "retain_graph_fixed"), ("summed_loss_bad", "summed_loss_fixed"), ("eval_no_grad_bad", "eval_no_grad_fixed")] {
        let d = diff(&report(bad), &report(fixed));
        let t_bad = torch(bad)["max_memory_allocated"].as_u64().unwrap();
        let t_fixed = torch(fixed)["max_memory_allocated"].as_u64().unwrap();
        assert_eq!(d.peak_allocated_bytes_before - d.peak_allocated_bytes_after, t_bad - t_fixed);
        let line = d.lines.iter().find(|l| l.file.ends_with("_model.py") && l.line == activation).expect("activation line in diff");
        assert!(line.saving_bytes > 0, "{bad}: {line:?}");
        assert!(d.to_text().contains("_model.py"));
    }
}

#[test]
fn fragmentation_and_expandable_segments() {
    let seg = report("varlen_segments");
    let exp = report("varlen_expandable");
    let s = &seg.devices[0].fragmentation;
    let e = &exp.devices[0].fragmentation;
    assert!(s.at_peak_reserved.free_in_segments_bytes > e.at_peak_reserved.free_in_segments_bytes, "{s:?} {e:?}");
    let saving = s.expandable_segments_saving_bytes.expect("advice for the fragmented run");
    // what expandable segments really saved in the recorded run is no more than the estimate
    let real = torch("varlen_segments")["max_memory_reserved"].as_u64().unwrap() - torch("varlen_expandable")["max_memory_reserved"].as_u64().unwrap();
    assert!(real <= saving && real > 0, "real {real} estimate {saving}");
    assert!(e.expandable_segments_saving_bytes.is_none());
    assert!(report("clean_loop").devices[0].fragmentation.expandable_segments_saving_bytes.is_none());
}

#[test]
fn out_of_memory_event() {
    let r = report("oom_caught");
    let d = &r.devices[0];
    assert_eq!(d.ooms.len(), 1);
    let o = &d.ooms[0];
    assert_eq!(o.requested_bytes, 24 << 20);
    assert_eq!(o.allocated_bytes, 240 << 20); // "240.00 MiB is allocated by PyTorch"
    assert_eq!(o.at_oom[0].line, marker("oom_caught.py", "hoard"));
    assert_eq!(o.at_oom[0].blocks, 10);
}

#[test]
fn source_maps_recorded_paths_by_longest_suffix() {
    let map = SourceMap::new(&scripts()).unwrap();
    let r = load(&data().join("eval_no_grad_bad.pickle"), Some(&map), 0).unwrap();
    let top = &r.devices[0].at_peak[0];
    assert_eq!(Path::new(&top.file), scripts().join("_model.py"));
    assert!(top.recorded_file.as_deref().unwrap().starts_with("/work/main/.dev-snapshot/"));
    assert!(r.figures_for(&scripts().join("_model.py"), top.line).is_some());
}

#[test]
fn figures_for_a_finding_count_callers_too() {
    let r = report("eval_no_grad_bad");
    let line = marker("eval_no_grad_bad.py", "eval-forward");
    let f = r.figures_for(Path::new("tests/snapshot/scripts/eval_no_grad_bad.py"), line).expect("the call line holds the forward's memory");
    assert!(f.bytes_at_peak > 0);
    let r = report("retain_graph_bad");
    let line = marker("retain_graph_bad.py", "forward");
    let f = r.figures_for(Path::new("retain_graph_bad.py"), line).unwrap();
    assert!(f.retained_bytes > 0 && f.retained_count >= 5, "{f:?}");
}

#[test]
fn json_shape_is_the_public_contract() {
    let r = report("oom_caught");
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let d = &v["devices"][0];
    for k in ["peak_allocated_bytes", "peak_reserved_bytes", "peak_time_us", "at_peak", "retained", "fragmentation", "ooms"] {
        assert!(d.get(k).is_some(), "devices[].{k}");
    }
    for k in ["file", "line", "function", "bytes", "blocks"] {
        assert!(d["at_peak"][0].get(k).is_some(), "at_peak[].{k}");
    }
    for w in ["at_peak_reserved", "at_end"] {
        for k in ["reserved_bytes", "allocated_bytes", "free_in_segments_bytes", "largest_free_block_bytes", "segments"] {
            assert!(d["fragmentation"][w].get(k).is_some(), "fragmentation.{w}.{k}");
        }
    }
    for k in ["time_us", "requested_bytes", "at_oom"] {
        assert!(d["ooms"][0].get(k).is_some(), "ooms[].{k}");
    }
    let r = report("summed_loss_bad");
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let ret = &v["devices"][0]["retained"][0];
    for k in ["file", "line", "function", "bytes", "blocks", "count"] {
        assert!(ret.get(k).is_some(), "retained[].{k}");
    }
    // the whole shape, with figures, as recorded
    let mut r = report("summed_loss_bad");
    r.file = "summed_loss_bad.pickle".into();
    insta::assert_json_snapshot!("summed_loss_bad", r);
}

#[test]
fn read_is_deterministic_and_compact() {
    let s = read_snapshot(&data().join("retain_graph_bad.pickle")).unwrap();
    assert_eq!(s.traces.len(), 1);
    assert!(s.stacks.iter().all(|st| !st.is_empty()));
    assert!(s.frames.iter().all(|f| !f.file.contains("site-packages")));
}
