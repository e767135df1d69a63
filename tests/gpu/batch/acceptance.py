"""Issue 30's acceptance, from what run.sh recorded and measured (runs anywhere: no GPU needed).

    python3 acceptance.py --bin MEMLINT --dir DIR

For each model (DIR/MODEL_b16.pickle recorded by `memlint record --steps 4` at batch 16,
DIR/MODEL_measured.json by measure.py): `memlint snapshot --budget 4GiB|10GiB --format json`'s
predicted allocated peak at batch 8 to 256 beside PyTorch's max_memory_allocated (bar: within
5% at 8 to 128), the reserved peak beside max_memory_reserved, and the largest batch under each
budget beside the largest that ran (bar: within 5%, or both above 4096). Then for every pickle
`memlint record` wrote: the snapshot's replayed peak beside PyTorch's max_memory_allocated noted
in it (bar: equal). Prints a table; exit status 1 when a bar is not met.
"""
import argparse
import glob
import json
import os
import subprocess
import sys


def snapshot_json(binary, path, *extra):
    out = subprocess.run([binary, "snapshot", path, "--format", "json", *extra], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"memlint snapshot {path} {' '.join(extra)} failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


def pct(a, b):
    return 100.0 * (a - b) / b


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--dir", required=True)
    a = p.parse_args()
    failed = []
    for model in ["resnet18", "gpt2", "mlp"]:
        pickle = os.path.join(a.dir, f"{model}_b16.pickle")
        measured_path = os.path.join(a.dir, f"{model}_measured.json")
        if not (os.path.exists(pickle) and os.path.exists(measured_path)):
            failed.append(f"{model}: missing {pickle} or {measured_path}")
            continue
        meas = json.load(open(measured_path))
        runs = {gib: snapshot_json(a.bin, pickle, "--budget", f"{gib}GiB") for gib in (4, 10)}
        b = runs[4]["batch"]
        print(f"\n{model}: recorded batch {b['recorded_batch']} ({b['batch_source']}), confidence {b['confidence']}, "
              f"fixed {b['fixed_bytes_at_peak']} B + {b['per_sample_bytes']} B per sample at the peak; device {meas['device']}, torch {meas['torch']}")
        print(f"  {'batch':>6} {'predicted alloc':>16} {'PyTorch alloc':>14} {'diff':>7}   {'predicted res':>14} {'PyTorch res':>13} {'diff':>7}")
        for pr in b["predictions"]:
            m = meas["by_batch"].get(str(pr["batch"]))
            if m is None:
                continue
            if m == "oom":
                print(f"  {pr['batch']:>6} {pr['allocated_peak_bytes']:>16} {'OOM':>14}")
                continue
            da = pct(pr["allocated_peak_bytes"], m["max_memory_allocated"])
            dr = pct(pr["reserved_peak_bytes"], m["max_memory_reserved"])
            print(f"  {pr['batch']:>6} {pr['allocated_peak_bytes']:>16} {m['max_memory_allocated']:>14} {da:>+6.2f}%   "
                  f"{pr['reserved_peak_bytes']:>14} {m['max_memory_reserved']:>13} {dr:>+6.2f}%")
            if pr["batch"] <= 128 and abs(da) > 5.0:
                failed.append(f"{model} batch {pr['batch']}: predicted allocated peak {da:+.2f}% from PyTorch's")
        for gib in (4, 10):
            rb = runs[gib]["batch"]
            real = meas["budgets"][f"{gib}GiB"]
            pred = rb.get("largest_batch")
            ok = pred is not None and ((pred > 4096 and real["largest"] > 4096) or abs(pct(pred, real["largest"])) <= 5.0)
            d = "" if pred is None else f"{pct(pred, real['largest']):+.2f}%"
            print(f"  {gib:>2} GiB: largest batch predicted {pred} (without allocator retries {rb.get('largest_batch_without_retries')}), "
                  f"ran {real['largest']}{' or more' if real['at_least'] else ''} {d} {'ok' if ok else 'NOT MET'}")
            if not ok:
                failed.append(f"{model} {gib} GiB: largest batch predicted {pred}, ran {real['largest']}")
    print("\nmemlint record: the snapshot's peak beside PyTorch's max_memory_allocated")
    for path in sorted(glob.glob(os.path.join(a.dir, "*.pickle"))):
        j = snapshot_json(a.bin, path)
        rec = j.get("record") or {}
        if not rec:
            continue
        peak = j["devices"][0]["peak_allocated_bytes"] if j["devices"] else 0
        torch_peak = rec.get("max_memory_allocated")
        ooms = sum(len(d["ooms"]) for d in j["devices"])
        same = peak == torch_peak
        print(f"  {os.path.basename(path):<28} reason {rec.get('reason'):<6} steps {rec.get('steps')!s:<4} batch {rec.get('batch')!s:<5} "
              f"OOM events {ooms}  peak {peak} PyTorch {torch_peak} {'equal' if same else 'DIFFERENT'}")
        if not same:
            failed.append(f"{os.path.basename(path)}: snapshot peak {peak} != PyTorch's {torch_peak}")
    print()
    for f in failed:
        print("NOT MET:", f)
    print("acceptance:", "all bars met" if not failed else f"{len(failed)} not met")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
