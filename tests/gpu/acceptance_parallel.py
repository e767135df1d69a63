#!/usr/bin/env python3
"""Checks issue 29's acceptance on `memlint verify --rule MEM007 --compare-torch -o REPORT.json`
reports (one workload each).

usage: acceptance_parallel.py REPORT.json [REPORT.json ...]

For each report, with each optimizer (plain SGD, SGD with momentum): every device's peak within 10%
of PyTorch's (torch.cuda.max_memory_allocated) for DataParallel, DDP with its default buckets and
DDP with gradient_as_bucket_view=True; the step-time ratio DataParallel / DDP (default buckets)
within 15% of PyTorch's. The bucket-view ratio is printed beside, not checked; so are the host's
times issuing a step (`host_ms`: a step whose host time is close to its step time waits for the
host, not the GPUs). Prints one line per figure and exits 1 if any is out of bounds (or missing).
"""
import json
import sys

MiB = 1 << 20
PEAK_BOUND = 0.10
RATIO_BOUND = 0.15


def fmt(b):
    return "%.1f MiB" % (b / MiB)


def main(paths):
    failed = 0
    for path in paths:
        r = json.load(open(path))
        w = r["workload"]
        p = r.get("parallel")
        print("== %s: %d x %d, batch %d, %d iterations, %s, %s devices (%s)" % (
            path, w["layers"], w["hidden"], w["batch"], w["iters"], w["dtype"], p and p["devices"], r["backend"]))
        if not p:
            print("  FAIL no MEM007 report")
            failed += 1
            continue
        t = p.get("torch")
        if not t or t.get("error"):
            print("  FAIL no PyTorch figures: %s" % (t and t.get("error")))
            failed += 1
            continue
        for tr in t["runs"]:
            ours = next((x for x in p["runs"] if x["optimizer"] == tr["optimizer"]), None)
            if ours is None:
                print("  FAIL memlint has no %s run" % tr["optimizer"])
                failed += 1
                continue
            for loop in ("data_parallel", "ddp", "ddp_bucket_view"):
                theirs, mine = tr[loop], ours[loop]
                if theirs.get("error") or mine.get("error"):
                    print("  FAIL %-12s %-16s error: PyTorch %s, memlint %s" % (tr["optimizer"], loop, theirs.get("error"), mine.get("error")))
                    failed += 1
                    continue
                for d in theirs["devices"]:
                    m = next((x for x in mine["devices"] if x["index"] == d["index"]), None)
                    if m is None:
                        print("  FAIL %-12s %-16s device %d missing in memlint's report" % (tr["optimizer"], loop, d["index"]))
                        failed += 1
                        continue
                    diff = m["peak_bytes"] / d["peak_bytes"] - 1.0
                    ok = abs(diff) <= PEAK_BOUND
                    failed += not ok
                    rel = d.get("released_after_warmup_bytes")
                    print("  %s %-12s %-16s device %d: memlint %s, PyTorch %s (%+.1f%%)%s" % (
                        "ok  " if ok else "FAIL", tr["optimizer"], loop, d["index"], fmt(m["peak_bytes"]), fmt(d["peak_bytes"]), diff * 100,
                        "; PyTorch released %s after its warm-up" % fmt(rel) if rel else ""))
            for key, check in (("", True), ("_bucket_view", False)):
                ot, tt = ours.get("step_time_ratio" + key), tr.get("step_time_ratio" + key)
                loop = "ddp" + key
                h = lambda l: " (host %.2f)" % l["host_ms"] if l.get("host_ms") is not None else ""
                times = "DataParallel %.2f%s / DDP %.2f%s ms (memlint), %.2f%s / %.2f%s ms (PyTorch)" % (
                    ours["data_parallel"]["step_ms"] or 0, h(ours["data_parallel"]), ours[loop]["step_ms"] or 0, h(ours[loop]),
                    tr["data_parallel"]["step_ms"] or 0, h(tr["data_parallel"]), tr[loop]["step_ms"] or 0, h(tr[loop]))
                if ot is None or tt is None:
                    print("  %s %-12s step-time ratio vs %s missing" % ("FAIL" if check else "    ", tr["optimizer"], loop))
                    failed += check
                    continue
                diff = ot / tt - 1.0
                ok = abs(diff) <= RATIO_BOUND
                if check:
                    failed += not ok
                print("  %s %-12s step-time ratio DataParallel / %s: memlint %.2fx, PyTorch %.2fx (%+.1f%%); %s" % (
                    ("ok  " if ok else "FAIL") if check else "info", tr["optimizer"], loop, ot, tt, diff * 100, times))
        print("  memlint verify took %.1f s (PyTorch included)" % r["elapsed_s"])
    print("== acceptance: %s" % ("PASS" if failed == 0 else "%d figure(s) out of bounds" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
