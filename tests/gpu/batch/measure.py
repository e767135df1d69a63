"""PyTorch's own figures for train.py's loops at other batch sizes (run on a GPU machine).

    python3 measure.py --model NAME --out FILE.json [--steps 4]

For batch sizes 8 to 256: max_memory_allocated / max_memory_reserved over a fresh run of
--steps steps (model and optimizer built anew, everything freed and the cache emptied between
runs, cuBLAS workspaces included); "oom" where it ran out of memory. Then for budgets of 4 and
10 GiB: the largest batch that runs --steps steps without running out of memory with
torch.cuda.set_per_process_memory_fraction(budget / total memory) (doubling from 8, then
bisection).
"""
import argparse
import gc
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import build, train  # noqa: E402


def clean():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    try:
        torch._C._cuda_clearCublasWorkspaces()
    except AttributeError:
        pass
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def trial(name, batch, steps):
    """(max allocated, max reserved) of a fresh run, or None when it ran out of memory."""
    clean()
    left = torch.cuda.memory_allocated()
    try:
        parts = build(name, batch)
        train(*parts, steps)
        torch.cuda.synchronize()
        result = (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved(), left)
        del parts
    except torch.OutOfMemoryError:
        result = None
    clean()
    return result


def largest(name, steps, budget, total, cap):
    torch.cuda.set_per_process_memory_fraction(budget / total)
    tried = {}

    def fits(b):
        if b not in tried:
            tried[b] = trial(name, b, steps) is not None
        return tried[b]

    ok, bad, b = 0, None, 8
    while b <= cap:
        if fits(b):
            ok, b = b, b * 2
        else:
            bad = b
            break
    if bad is None:
        torch.cuda.set_per_process_memory_fraction(1.0)
        return {"largest": ok, "at_least": True, "tried": sorted(tried)}
    while bad - ok > 1:
        mid = (ok + bad) // 2
        if fits(mid):
            ok = mid
        else:
            bad = mid
    torch.cuda.set_per_process_memory_fraction(1.0)
    return {"largest": ok, "at_least": False, "tried": sorted(tried)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--cap", type=int, default=1 << 19)
    a = p.parse_args()
    free, total = torch.cuda.mem_get_info()
    t0 = time.time()
    report = {"model": a.model, "steps": a.steps, "torch": torch.__version__, "device": torch.cuda.get_device_name(),
              "total_memory": total, "by_batch": {}, "budgets": {}}
    for b in [8, 16, 32, 64, 128, 256]:
        r = trial(a.model, b, a.steps)
        report["by_batch"][b] = "oom" if r is None else {"max_memory_allocated": r[0], "max_memory_reserved": r[1], "allocated_before": r[2]}
        print(a.model, "batch", b, report["by_batch"][b], flush=True)
    for gib in [4, 10]:
        r = largest(a.model, a.steps, gib << 30, total, a.cap)
        report["budgets"][f"{gib}GiB"] = dict(r, budget_bytes=gib << 30, fraction=(gib << 30) / total)
        print(a.model, f"{gib} GiB: largest batch", r["largest"], "(at least)" if r["at_least"] else "", "tried", r["tried"], flush=True)
    report["seconds"] = round(time.time() - t0, 1)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
