#!/usr/bin/env python3
"""Checks issue 15's acceptance on `memlint verify --compare-torch --format json` reports.

usage: acceptance.py REPORT.json [REPORT.json ...] [--torch TORCH.json ...]

For each report (one workload): every memory saving within 10% of PyTorch's (savings under 1 MiB
on PyTorch's side are compared in absolute terms: within 1 MiB), MEM004's step-time cost within 5
percentage points of PyTorch's for each loop shape, MEM003's zero fractions within 0.05. With
--torch, PyTorch's figures come from the given verify_torch.py outputs (one per report, same order)
instead of the reports' own `torch` section (used to compare `--backend sim` estimates offline).
Prints one line per figure and exits 1 if any is out of bounds.
"""
import json
import sys

MiB = 1 << 20


def main(argv):
    reports, torches, mode = [], [], "r"
    for a in argv:
        if a == "--torch":
            mode = "t"
        elif mode == "r":
            reports.append(a)
        else:
            torches.append(a)
    failed = 0
    for i, path in enumerate(reports):
        r = json.load(open(path))
        t = json.load(open(torches[i])) if torches else r.get("torch")
        w = r["workload"]
        print("== %s: %d x %d, batch %d, %d iterations, %s (%s)" % (path, w["layers"], w["hidden"], w["batch"], w["iters"], w["dtype"], r["backend"]))
        if not t or t.get("error"):
            print("   no PyTorch figures: %s" % (t or {}).get("error"))
            failed += 1
            continue
        ts = {(s["code"], s["variant"]): s for s in t["scenarios"]}
        for s in r["scenarios"]:
            key = (s["code"], s["variant"])
            o = ts.get(key)
            name = "%s %-20s" % key
            if o is None or o.get("error") or s.get("error"):
                print("   %s  MISSING/ERROR memlint=%s torch=%s" % (name, s.get("error"), o and o.get("error")))
                failed += 1
                continue
            held = s["metric"] == "held"
            ours = (s["held_bytes_bad"] - s["held_bytes_fixed"]) if held else (s["peak_bytes_bad"] - s["peak_bytes_fixed"])
            theirs = (o["held_bytes_bad"] - o["held_bytes_fixed"]) if held else (o["peak_bytes_bad"] - o["peak_bytes_fixed"])
            if abs(theirs) >= MiB:
                rel = (ours - theirs) / abs(theirs)
                ok = abs(rel) <= 0.10
                fig = "%+.1f%%" % (rel * 100)
            else:
                ok = abs(ours - theirs) <= MiB
                fig = "%+d B abs" % (ours - theirs)
            failed += not ok
            print("   %s  %-4s saving memlint %10.1f MiB  torch %10.1f MiB  %-12s %s" % (name, "held" if held else "peak", ours / MiB, theirs / MiB, fig, "ok" if ok else "FAIL"))
            if s["metric"] == "step_time" and s.get("step_ms_bad") is not None:
                cost = (s["step_ms_bad"] / s["step_ms_fixed"] - 1) * 100
                tcost = (o["step_ms_bad"] / o["step_ms_fixed"] - 1) * 100
                ok = abs(cost - tcost) <= 5.0
                failed += not ok
                print("   %s  step cost memlint %+6.1f%% (%.2f/%.2f ms, %s/%s mallocs/step)  torch %+6.1f%% (%.2f/%.2f ms, %s/%s)  %+.1f points %s" % (
                    name, cost, s["step_ms_bad"], s["step_ms_fixed"], s.get("mallocs_per_step_bad"), s.get("mallocs_per_step_fixed"),
                    tcost, o["step_ms_bad"], o["step_ms_fixed"], o.get("mallocs_per_step_bad"), o.get("mallocs_per_step_fixed"), cost - tcost, "ok" if ok else "FAIL"))
            if s["metric"] == "underflow" and s.get("underflow_fraction_bad") is not None:
                for k in ("bad", "fixed", "fp32"):
                    a, b = s.get("underflow_fraction_" + k), o.get("underflow_fraction_" + k)
                    ok = a is not None and b is not None and abs(a - b) <= 0.05
                    failed += not ok
                    print("   %s  zero fraction %-5s memlint %s torch %s %s" % (name, k, a if a is None else "%.4f" % a, b if b is None else "%.4f" % b, "ok" if ok else "FAIL"))
        print("   verify elapsed %.1f s" % r["elapsed_s"])
    print("acceptance: %s (%d out of bounds)" % ("PASS" if not failed else "FAIL", failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
