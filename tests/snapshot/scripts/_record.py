"""Shared recording harness for the snapshot test scripts (run on a GPU machine).

Each script defines a training/evaluation step and calls `record(name, step, iters)`.
The harness starts PyTorch's allocation history before the first CUDA allocation,
runs the steps, and writes, into the output folder given as argv[1]:
  NAME.pickle  -- torch.cuda.memory._dump_snapshot (the pickle protocol of this Python)
  NAME.json    -- what PyTorch itself reported for the same run
The harness itself allocates nothing on the GPU.
"""
import json
import os
import pickle
import sys

import torch


def out_dir():
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(d, exist_ok=True)
    return d


def start():
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
    torch.cuda.reset_peak_memory_stats()


def finish(name, per_iter, extra=None, also_protocols=()):
    d = out_dir()
    path = os.path.join(d, name + ".pickle")
    torch.cuda.memory._dump_snapshot(path)
    snap = torch.cuda.memory._snapshot()
    for proto in also_protocols:
        with open(os.path.join(d, f"{name}.p{proto}.pickle"), "wb") as f:
            pickle.dump(snap, f, protocol=proto)
    torch.cuda.memory._record_memory_history(enabled=None)
    report = {
        "name": name,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "pickle_default_protocol": pickle.DEFAULT_PROTOCOL,
        "device": torch.cuda.get_device_name(),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "memory_allocated": torch.cuda.memory_allocated(),
        "memory_reserved": torch.cuda.memory_reserved(),
        "per_iteration": per_iter,
    }
    if extra:
        report.update(extra)
    with open(os.path.join(d, name + ".json"), "w") as f:
        json.dump(report, f, indent=1)
    print(name, "max_memory_allocated", report["max_memory_allocated"], "file", os.path.getsize(path))


class Recorder:
    """For scripts written as a plain loop: starts recording when made, `tick()` after
    each iteration, `finish()` at the end."""

    def __init__(self, name, also_protocols=()):
        self.name, self.also_protocols, self.per_iter = name, also_protocols, []
        start()

    def tick(self):
        torch.cuda.synchronize()
        self.per_iter.append({
            "iteration": len(self.per_iter),
            "memory_allocated": torch.cuda.memory_allocated(),
            "memory_reserved": torch.cuda.memory_reserved(),
            "max_memory_allocated": torch.cuda.max_memory_allocated(),
        })

    def finish(self):
        finish(self.name, self.per_iter, also_protocols=self.also_protocols)


def record(name, setup, step, iters, also_protocols=()):
    """Runs state = setup(), then step(i, state) for i in range(iters), with allocation history on."""
    start()
    state = setup()
    per_iter = []
    for i in range(iters):
        step(i, state)
        torch.cuda.synchronize()
        per_iter.append({
            "iteration": i,
            "memory_allocated": torch.cuda.memory_allocated(),
            "memory_reserved": torch.cuda.memory_reserved(),
            "max_memory_allocated": torch.cuda.max_memory_allocated(),
        })
    finish(name, per_iter, also_protocols=also_protocols)
    return state
