#!/usr/bin/env python3
"""MEM007 (data-parallel) in PyTorch: nn.DataParallel against DistributedDataParallel on N GPUs.

The other half of memlint's MEM007 scenario (crates/memlint_verify/src/parallel.rs), on the same
workload: an MLP (`--layers` x Linear(hidden, hidden) + ReLU, then Linear(hidden, classes)),
`nn.CrossEntropyLoss()`, plain SGD, a global batch of `--batch` rows per step made on the device.

* DataParallel: the model on cuda:0, `nn.DataParallel(model, device_ids=range(N))`, the batch on
  cuda:0 (DataParallel scatters it as torch.chunk does).
* DDP: one process per GPU (`torch.multiprocessing.spawn`, NCCL), each with its replica,
  `DistributedDataParallel(model, device_ids=[rank])` (default buckets, gradient_as_bucket_view
  false) and its torch.chunk share of the batch, made on its own GPU.

Both run one warm-up step first (cuBLAS handles and workspaces exist on every device, as memlint's
runtime creates them up front), then reset the peak statistics, then `--iters` steps. Per device:
torch.cuda.max_memory_allocated (peak) and torch.cuda.memory_allocated (held right after the loop,
its variables alive), in bytes.

Prints one JSON object on stdout and exits 0 even when it cannot run (the reason is in "error"):

    {"python": ..., "torch_version": ..., "devices": ["NVIDIA H200", ...], "chunk_rows": [...],
     "data_parallel": [{"index": 0, "peak_bytes": N, "held_bytes": N}, ...] | null,
     "ddp": [...] | null, "error": null | "..."}

Usage: python3 verify_torch_parallel.py --devices 2 [--layers 8 --hidden 4096 --batch 512 --iters 20]
"""
import argparse
import json
import os
import socket
import sys
import tempfile

LR = 1e-3


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


def mlp(nn, args, device, dtype):
    mods = []
    for _ in range(args.layers):
        mods += [nn.Linear(args.hidden, args.hidden), nn.ReLU()]
    mods.append(nn.Linear(args.hidden, args.classes))
    return nn.Sequential(*mods).to(device=device, dtype=dtype)


def data_parallel(torch, nn, args, dtype):
    n = args.devices
    model = mlp(nn, args, "cuda:0", dtype)
    dp = nn.DataParallel(model, device_ids=list(range(n)))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    def step(i):
        g = torch.Generator(device="cuda:0").manual_seed(17 + i)
        x = torch.randn(args.batch, args.hidden, device="cuda:0", dtype=dtype, generator=g)
        y = torch.randint(0, args.classes, (args.batch,), device="cuda:0", generator=g)
        optimizer.zero_grad()
        loss = criterion(dp(x), y)
        loss.backward()
        optimizer.step()
        return x, y, loss

    step(-1)  # warm-up
    optimizer.zero_grad()
    for d in range(n):
        torch.cuda.synchronize(d)
        torch.cuda.reset_peak_memory_stats(d)
    kept = None
    for i in range(args.iters):
        kept = step(i)
    out = []
    for d in range(n):
        torch.cuda.synchronize(d)
        out.append({"index": d, "peak_bytes": torch.cuda.max_memory_allocated(d), "held_bytes": torch.cuda.memory_allocated(d)})
    del kept
    return out


def ddp_worker(rank, args, port, outdir):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dtype = torch.float16 if args.dtype == "fp16" else torch.float32
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=args.devices)
    try:
        rows = chunk_rows(args.batch, args.devices)[rank]
        dev = "cuda:%d" % rank
        model = mlp(nn, args, dev, dtype)
        ddp = DDP(model, device_ids=[rank])
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)

        def step(i):
            g = torch.Generator(device=dev).manual_seed(17 + i * args.devices + rank)
            x = torch.randn(rows, args.hidden, device=dev, dtype=dtype, generator=g)
            y = torch.randint(0, args.classes, (rows,), device=dev, generator=g)
            optimizer.zero_grad()
            loss = criterion(ddp(x), y)
            loss.backward()
            optimizer.step()
            return x, y, loss

        step(-1)  # warm-up
        optimizer.zero_grad()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        kept = None
        for i in range(args.iters):
            kept = step(i)
        torch.cuda.synchronize()
        fig = {"index": rank, "peak_bytes": torch.cuda.max_memory_allocated(), "held_bytes": torch.cuda.memory_allocated()}
        del kept
        with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
            json.dump(fig, f)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--dtype", choices=["fp32", "fp16"], default="fp32")
    args = ap.parse_args()
    res = {"python": sys.version.split()[0], "torch_version": None, "devices": [], "chunk_rows": None,
           "data_parallel": None, "ddp": None, "error": None}
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
    try:
        res["data_parallel"] = data_parallel(torch, nn, args, dtype)
    except Exception as e:
        res["error"] = "DataParallel: %s" % e
        emit(res)
        return
    torch.cuda.empty_cache()
    try:
        import torch.multiprocessing as mp
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(ddp_worker, args=(args, free_port(), d), nprocs=args.devices, join=True)
            res["ddp"] = []
            for r in range(args.devices):
                with open(os.path.join(d, "rank%d.json" % r)) as f:
                    res["ddp"].append(json.load(f))
    except Exception as e:
        res["error"] = "DDP: %s" % e
    emit(res)


if __name__ == "__main__":
    main()
