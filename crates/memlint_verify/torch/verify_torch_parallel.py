#!/usr/bin/env python3
"""MEM007 (data-parallel) in PyTorch: nn.DataParallel against DistributedDataParallel on N GPUs.

The other half of memlint's MEM007 measurement (crates/memlint_verify/src/parallel.rs), on the
same workload: an MLP (`--layers` x Linear(hidden, hidden) + ReLU, then Linear(hidden, classes)),
`nn.CrossEntropyLoss()`, a global batch of `--batch` rows in pinned host memory (as a DataLoader
with pin_memory=True hands it out), with plain SGD and with SGD with momentum 0.9, written as the
rule's documentation writes it:

* DataParallel (the rule's `## Example`): `model = nn.DataParallel(Net()).cuda()`, then per batch
  `optimizer.zero_grad(); loss = criterion(model(x.cuda()), y.cuda()); loss.backward();
  optimizer.step()`.
* DDP (its `Use instead:`): one process per GPU (`torch.multiprocessing.spawn`, NCCL), each with
  `DistributedDataParallel(Net().cuda(), device_ids=[local_rank])` and its torch.chunk share of
  the batch; with the default buckets and with `gradient_as_bucket_view=True`.

Each loop runs 2 warm-up steps, waits until allocated memory stops falling (see quiesce(): NCCL's
watchdog releases finished collectives' tensors up to ~100 ms late), then the peak statistics are
reset on every device and `--iters` steps are timed (the devices synchronized before and after;
DDP's ranks meet at a barrier first).
Per device: torch.cuda.max_memory_allocated (peak) and torch.cuda.memory_allocated (held right
after the loop, its variables alive), in bytes; the mean step time in ms, and of it the host's time
issuing the step (`host_ms`, see HostTimer; memlint measures its own loops the same way).

Prints one JSON object on stdout and exits 0 even when it cannot run (the reason is in "error"):

    {"python": ..., "torch_version": ..., "devices": ["NVIDIA H100 80GB HBM3", ...],
     "chunk_rows": [...], "workspace_bytes": [per device],
     "runs": [{"optimizer": "sgd-momentum" | "sgd",
               "data_parallel": {"devices": [{"index", "peak_bytes", "held_bytes", "step_ms", "host_ms",
                                              "released_after_warmup_bytes"}],
                                 "step_ms": X, "host_ms": X, "error": null},
               "ddp": {...}, "ddp_bucket_view": {...}}],
     "data_parallel": [first run's devices] | null, "ddp": [...] | null, "error": null | "..."}

Usage: python3 verify_torch_parallel.py --devices 2 [--layers 8 --hidden 4096 --batch 512 --iters 20]
       [--snapshot-dir DIR]  (records memory snapshots of the SGD-with-momentum loops instead of
       timing them: DIR/data_parallel.pickle, DIR/ddp_rank0.pickle, DIR/ddp_bucket_view_rank0.pickle)
"""
import argparse
import gc
import json
import os
import socket
import sys
import tempfile
import time

LR = 1e-3
MOMENTUM = 0.9
WARMUP_STEPS = 2
OPTIMIZERS = [("sgd-momentum", MOMENTUM), ("sgd", 0.0)]


def emit(obj):
    print(json.dumps(obj))
    sys.stdout.flush()


def chunk_rows(batch, n):
    size = -(-batch // n)
    rows = []
    left = batch
    while left > 0:
        rows.append(min(size, left))
        left -= rows[-1]
    return rows


def make_net(nn, args, dtype):
    def Net():
        mods = []
        for _ in range(args.layers):
            mods += [nn.Linear(args.hidden, args.hidden), nn.ReLU()]
        mods.append(nn.Linear(args.hidden, args.classes))
        return nn.Sequential(*mods).to(dtype)
    return Net


def host_batch(torch, args, dtype, row0, rows):
    g = torch.Generator().manual_seed(17)
    x = torch.randn(args.batch, args.hidden, generator=g).to(dtype)[row0:row0 + rows].contiguous().pin_memory()
    y = torch.randint(0, args.classes, (args.batch,), generator=g)[row0:row0 + rows].contiguous().pin_memory()
    return x, y


def loader(batch, steps):
    for _ in range(steps):
        yield batch


def quiesce(torch, devices, quiet_s=0.25, timeout_s=2.0):
    """Waits until allocated memory has stopped falling for `quiet_s`. ProcessGroupNCCL's watchdog
    thread (it wakes every 100 ms) holds the tensors of finished collectives until it sees them
    complete: right after DDP's construction that is the construction-time broadcast's buffers, a
    copy of the parameters, which would otherwise count in the peak of steps that never use them
    (a training run's later steps do not see them). `released_after_warmup_bytes` says how much
    went meanwhile."""
    t0 = time.perf_counter()
    last = [torch.cuda.memory_allocated(d) for d in devices]
    quiet_since = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        time.sleep(0.02)
        gc.collect()
        now = [torch.cuda.memory_allocated(d) for d in devices]
        if now != last:
            last, quiet_since = now, time.perf_counter()
        elif time.perf_counter() - quiet_since >= quiet_s:
            break


class HostTimer:
    """The host's time issuing a step, as memlint measures its own: from the return of the step's
    first (blocking) `.cuda()` to the return of `optimizer.step()`, less the time blocked in the
    step's later `.cuda()` calls (`y.cuda()` waits for the forward's work). Tensor.cuda and the
    optimizer's step are wrapped for the timed steps only."""

    def __init__(self, torch):
        self.torch, self.active, self.total, self.steps = torch, False, 0.0, 0
        self.start, self.blocked, self.orig = None, 0.0, None

    def __enter__(self):
        self.orig = orig = self.torch.Tensor.cuda
        timer = self

        def cuda(t, *a, **k):
            t0 = time.perf_counter()
            r = orig(t, *a, **k)
            t1 = time.perf_counter()
            if timer.start is None:
                timer.start = t1
            else:
                timer.blocked += t1 - t0
            return r
        self.torch.Tensor.cuda = cuda
        return self

    def __exit__(self, *exc):
        self.torch.Tensor.cuda = self.orig

    def wrap(self, optimizer):
        step = optimizer.step

        def timed_step(*a, **k):
            r = step(*a, **k)
            if self.active and self.start is not None:
                self.total += time.perf_counter() - self.start - self.blocked
                self.steps += 1
            self.start, self.blocked = None, 0.0
            return r
        optimizer.step = timed_step

    def ms(self):
        return self.total * 1000.0 / self.steps if self.steps else None


def measure(torch, devices, train, steps, sync_all, barrier=None, timer=None):
    """Runs the warm-up steps, resets the peaks, times `steps` steps; per device figures."""
    kept = train(loader_steps=WARMUP_STEPS)
    del kept
    sync_all()
    before = [torch.cuda.memory_allocated(d) for d in devices]
    quiesce(torch, devices)
    released = [b - torch.cuda.memory_allocated(d) for b, d in zip(before, devices)]
    if barrier is not None:
        barrier()
        sync_all()
    for d in devices:
        torch.cuda.reset_peak_memory_stats(d)
    if timer is not None:
        timer.active = True
    t0 = time.perf_counter()
    kept = train(loader_steps=steps)
    sync_all()
    ms = (time.perf_counter() - t0) * 1000.0 / max(steps, 1)
    host = timer.ms() if timer is not None else None
    figs = [{"index": d, "peak_bytes": torch.cuda.max_memory_allocated(d), "held_bytes": torch.cuda.memory_allocated(d), "step_ms": ms,
             "host_ms": host, "released_after_warmup_bytes": r} for d, r in zip(devices, released)]
    del kept
    return {"devices": figs, "step_ms": ms, "host_ms": host, "error": None}


def data_parallel(torch, nn, args, dtype, momentum, record=None):
    n = args.devices
    Net = make_net(nn, args, dtype)
    batch = host_batch(torch, args, dtype, 0, args.batch)
    criterion = nn.CrossEntropyLoss()
    if record:
        torch.cuda.memory._record_memory_history(max_entries=500000)
    # The rule's example: DataParallel(Net()).cuda(), the batch moved onto device 0 in the loop.
    model = nn.DataParallel(Net(), device_ids=list(range(n))).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=momentum)

    def train(loader_steps):
        loss = None
        for x, y in loader(batch, loader_steps):
            optimizer.zero_grad()
            loss = criterion(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        return loss

    def sync_all():
        for d in range(n):
            torch.cuda.synchronize(d)

    with HostTimer(torch) as timer:
        timer.wrap(optimizer)
        res = measure(torch, list(range(n)), train, args.iters, sync_all, timer=timer)
    if record:
        torch.cuda.memory._dump_snapshot(os.path.join(record, "data_parallel.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
    del model, optimizer
    gc.collect()
    torch.cuda.empty_cache()
    return res


def ddp_worker(rank, args, port, outdir):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel

    dtype = torch.float16 if args.dtype == "fp16" else torch.float32
    local_rank = rank
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=args.devices,
                            device_id=torch.device("cuda", local_rank))
    out = {}
    try:
        rows = chunk_rows(args.batch, args.devices)
        row0 = sum(rows[:rank])
        Net = make_net(nn, args, dtype)
        batch = host_batch(torch, args, dtype, row0, rows[rank])
        criterion = nn.CrossEntropyLoss()
        configs = [(name, m, bv) for name, m in OPTIMIZERS for bv in (False, True)]
        if args.snapshot_dir:
            configs = [(n_, m, bv) for n_, m, bv in configs if n_ == "sgd-momentum"]
        torch.cuda.synchronize()
        baseline = torch.cuda.memory_allocated()
        for name, momentum, bucket_view in configs:
            record = args.snapshot_dir and rank == 0
            if record:
                torch.cuda.memory._record_memory_history(max_entries=500000)
            try:
                # The rule's `Use instead:`.
                model = DistributedDataParallel(Net().cuda(), device_ids=[local_rank], gradient_as_bucket_view=bucket_view)
                optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=momentum)

                def train(loader_steps):
                    loss = None
                    for x, y in loader(batch, loader_steps):
                        optimizer.zero_grad()
                        loss = criterion(model(x.cuda()), y.cuda())
                        loss.backward()
                        optimizer.step()
                    return loss

                with HostTimer(torch) as timer:
                    timer.wrap(optimizer)
                    res = measure(torch, [local_rank], train, args.iters, torch.cuda.synchronize, barrier=dist.barrier, timer=timer)
                res["devices"][0]["index"] = rank
                del model, optimizer
            except Exception as e:  # out of memory on one config: report it, go on
                res = {"devices": [], "step_ms": None, "error": "%s: %s" % (type(e).__name__, e)}
            if record:
                torch.cuda.memory._dump_snapshot(os.path.join(args.snapshot_dir, "ddp_bucket_view_rank0.pickle" if bucket_view else "ddp_rank0.pickle"))
                torch.cuda.memory._record_memory_history(enabled=None)
            gc.collect()
            torch.cuda.synchronize()
            settle(torch, local_rank, baseline)
            out["%s/%s" % (name, "ddp_bucket_view" if bucket_view else "ddp")] = res
        with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
            json.dump(out, f)
    finally:
        dist.destroy_process_group()


def settle(torch, device, baseline, timeout_s=3.0):
    """Waits until `device` is back at `baseline` allocated bytes: ProcessGroupNCCL's watchdog
    thread releases the tensors of finished collectives a little later, and what it still holds
    would count in the next loop's figures."""
    t0 = time.perf_counter()
    while torch.cuda.memory_allocated(device) > baseline and time.perf_counter() - t0 < timeout_s:
        time.sleep(0.05)
        gc.collect()
    torch.cuda.empty_cache()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def merge_ranks(per_rank):
    """One loop's figures from every rank's: devices in rank order, the slowest rank's time."""
    errors = [r["error"] for r in per_rank if r.get("error")]
    if errors:
        return {"devices": [], "step_ms": None, "error": "; ".join(errors)}
    devices = [d for r in per_rank for d in r["devices"]]
    hosts = [r.get("host_ms") for r in per_rank if r.get("host_ms") is not None]
    return {"devices": devices, "step_ms": max(r["step_ms"] for r in per_rank), "host_ms": max(hosts) if hosts else None, "error": None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--dtype", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--snapshot-dir", default=None)
    args = ap.parse_args()
    res = {"python": sys.version.split()[0], "torch_version": None, "devices": [], "chunk_rows": None,
           "workspace_bytes": None, "runs": [], "data_parallel": None, "ddp": None, "error": None}
    if args.devices < 1:
        res["error"] = "--devices must be at least 1"
        emit(res)
        return
    rows = chunk_rows(args.batch, args.devices)
    res["chunk_rows"] = rows
    if len(rows) != args.devices:
        res["error"] = "--batch %d does not split into %d chunks as torch.chunk splits it" % (args.batch, args.devices)
        emit(res)
        return
    try:
        import torch
        import torch.nn as nn
    except Exception as e:  # no torch: report, do not fail
        res["error"] = "python3 cannot import torch: %s" % e
        emit(res)
        return
    res["torch_version"] = torch.__version__
    if not torch.cuda.is_available():
        res["error"] = "torch %s has no CUDA device" % torch.__version__
        emit(res)
        return
    if torch.cuda.device_count() < args.devices:
        res["error"] = "MEM007 needs %d GPUs; torch sees %d" % (args.devices, torch.cuda.device_count())
        emit(res)
        return
    res["devices"] = [torch.cuda.get_device_name(d) for d in range(args.devices)]
    dtype = torch.float16 if args.dtype == "fp16" else torch.float32
    opts = OPTIMIZERS[:1] if args.snapshot_dir else OPTIMIZERS
    runs = []
    for name, momentum in opts:
        try:
            dp = data_parallel(torch, nn, args, dtype, momentum, record=args.snapshot_dir)
        except Exception as e:
            dp = {"devices": [], "step_ms": None, "error": "%s: %s" % (type(e).__name__, e)}
            gc.collect()
            torch.cuda.empty_cache()
        runs.append({"optimizer": name, "data_parallel": dp})
    gc.collect()
    res["workspace_bytes"] = [torch.cuda.memory_allocated(d) for d in range(args.devices)]
    try:
        import torch.multiprocessing as mp
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(ddp_worker, args=(args, free_port(), d), nprocs=args.devices, join=True)
            per_rank = []
            for r in range(args.devices):
                with open(os.path.join(d, "rank%d.json" % r)) as f:
                    per_rank.append(json.load(f))
        for run in runs:
            for key in ("ddp", "ddp_bucket_view"):
                k = "%s/%s" % (run["optimizer"], key)
                run[key] = merge_ranks([pr[k] for pr in per_rank if k in pr]) if all(k in pr for pr in per_rank) else {"devices": [], "step_ms": None, "error": "not run"}
    except Exception as e:
        res["error"] = "DDP: %s" % e
    res["runs"] = runs
    if runs:
        res["data_parallel"] = runs[0]["data_parallel"]["devices"]
        res["ddp"] = runs[0].get("ddp", {}).get("devices")
    emit(res)


if __name__ == "__main__":
    main()
