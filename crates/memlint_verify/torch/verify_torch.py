#!/usr/bin/env python3
"""PyTorch twin of `memlint verify`'s reference loops.

`memlint verify --compare-torch` writes this script (embedded in the binary) to a temporary file and
runs it with python3. Each function below is the same loop as the Rust scenario of the same name in
crates/memlint_verify/src/scenarios.rs, with the same variable lifetimes, on the same workload. It
prints one JSON object on stdout:

    {"python": ..., "torch_version": ..., "device": ..., "workspace_bytes": N,
     "scenarios": [{"code": "MEM001", "variant": "eval", "peak_bytes_bad": N, "peak_bytes_fixed": N,
                    "held_bytes_bad": N, "held_bytes_fixed": N, "step_ms_bad": X, "step_ms_fixed": X,
                    "underflow_fraction_bad": F|null, "underflow_fraction_fixed": F|null,
                    "error": null|"..."}, ...],
     "error": null|"why nothing ran"}

Memory figures are torch.cuda.max_memory_allocated() (peak) and torch.cuda.memory_allocated()
(held after the loop), both in bytes.
"""
import argparse
import gc
import json
import os
import sys
import tempfile
import time

LR = 1e-3
LATE_LOSS_FACTOR = 1.0 / 64.0
SCALER_INIT = 2.0 ** 16
SCALER_GROWTH_INTERVAL = 2000


def emit(obj):
    print(json.dumps(obj))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--dtype", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated rule codes; empty runs all")
    a = ap.parse_args()
    base = {"python": sys.version.split()[0], "torch_version": None, "device": None,
            "workspace_bytes": None, "scenarios": [], "error": None}
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except Exception as e:  # no torch: report, do not fail
        base["error"] = "python3 cannot import torch: %s" % e
        emit(base)
        return 0
    base["torch_version"] = torch.__version__
    if not torch.cuda.is_available():
        base["error"] = "torch %s sees no CUDA device (torch.cuda.is_available() is False)" % torch.__version__
        emit(base)
        return 0
    if a.device >= torch.cuda.device_count():
        base["error"] = "torch sees %d CUDA device(s); --device %d does not exist" % (torch.cuda.device_count(), a.device)
        emit(base)
        return 0
    dev = torch.device("cuda", a.device)
    torch.cuda.set_device(dev)
    base["device"] = torch.cuda.get_device_name(dev)
    dtype = torch.float16 if a.dtype == "fp16" else torch.float32
    H, L, B, N, C = a.hidden, a.layers, a.batch, a.iters, a.classes

    # Warm up so that cuBLAS/cuBLASLt workspaces (allocated once, through the caching allocator)
    # exist before any measurement: they then weigh the same in every loop.
    for dt in (torch.float32, torch.float16):
        lin = nn.Linear(64, 64, device=dev, dtype=dt)
        lin(torch.randn(32, 64, device=dev, dtype=dt)).sum().backward()
    lin = nn.Linear(64, 64, device=dev)
    with torch.autocast("cuda", dtype=torch.float16):
        o = lin(torch.randn(32, 64, device=dev))
    o.float().sum().backward()
    del lin, o
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base["workspace_bytes"] = torch.cuda.memory_allocated()

    def mlp(layers, classes, dt, width=H):
        mods = []
        for _ in range(layers):
            mods += [nn.Linear(width, width, device=dev, dtype=dt), nn.ReLU()]
        if classes:
            mods.append(nn.Linear(width, classes, device=dev, dtype=dt))
        return nn.Sequential(*mods)

    def setup(dt=dtype):
        model = mlp(L, C, dt)
        x = torch.randn(B, H, device=dev, dtype=dt)
        y = torch.randint(0, C, (B,), device=dev)
        return model, x, y

    class Meter:
        def __init__(self):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.t0 = time.perf_counter()

        def restart_clock(self):
            torch.cuda.synchronize()
            self.t0 = time.perf_counter()

        def finish(self, steps):
            torch.cuda.synchronize()
            ms = (time.perf_counter() - self.t0) * 1e3 / max(steps, 1)
            return {"peak": torch.cuda.max_memory_allocated(), "held": torch.cuda.memory_allocated(),
                    "step_ms": ms, "underflow": None}

    def train_step(model, opt, x, y, set_to_none=True, retain=False):
        opt.zero_grad(set_to_none=set_to_none)
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward(retain_graph=retain)
        opt.step()
        return out, loss

    def mem001(bad):
        model, x, y = setup()
        def body():
            meter = Meter()
            s = 0.0
            for _ in range(N):
                out = model(x)
                loss = F.cross_entropy(out, y)
                s += loss.item()
            return meter.finish(N)
        if bad:
            return body()
        with torch.no_grad():
            return body()

    def mem002_eval(bad):
        model, x, y = setup()
        meter = Meter()
        total = torch.zeros((), device=dev, dtype=dtype) if bad else 0.0
        for _ in range(N):
            out = model(x)
            loss = F.cross_entropy(out, y)
            if bad:
                total = total + loss
            else:
                total += loss.item()
        return meter.finish(N)

    def mem002_train(bad):
        model, x, y = setup()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        meter = Meter()
        total = torch.zeros((), device=dev, dtype=dtype) if bad else 0.0
        for _ in range(N):
            out, loss = train_step(model, opt, x, y)
            if bad:
                total = total + loss
            else:
                total += loss.item()
        return meter.finish(N)

    def mem003(bad):
        model, x, y = setup(torch.float32)
        params = list(model.parameters())
        opt = torch.optim.SGD(params, lr=LR)
        total = sum(p.numel() for p in params)
        scaler = None if bad else torch.amp.GradScaler("cuda", init_scale=SCALER_INIT,
                                                        growth_interval=SCALER_GROWTH_INTERVAL)
        frac = 0.0
        meter = Meter()
        for _ in range(N):
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                out = model(x)
            loss = F.cross_entropy(out.float(), y) * LATE_LOSS_FACTOR
            if bad:
                loss.backward()
            else:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
            zeros = sum(int((p.grad == 0).sum().item()) for p in params)
            frac += zeros / total
            if bad:
                opt.step()
            else:
                scaler.step(opt)
                scaler.update()
        r = meter.finish(N)
        r["underflow"] = frac / N
        return r

    def mem004(bad):
        model, x, y = setup()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        meter = Meter()
        out, loss = train_step(model, opt, x, y)
        meter.restart_clock()
        for _ in range(N):
            out, loss = train_step(model, opt, x, y)
            if bad:
                torch.cuda.empty_cache()
        return meter.finish(N)

    def mem005_peak(bad):
        model, x, y = setup()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        meter = Meter()
        for _ in range(N):
            out, loss = train_step(model, opt, x, y, retain=bad)
        return meter.finish(N)

    def mem005_growth(bad):
        model, x, y = setup()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        meter = Meter()
        total = torch.zeros((), device=dev, dtype=dtype) if bad else 0.0
        for _ in range(N):
            out, loss = train_step(model, opt, x, y, retain=bad)
            if bad:
                total = total + loss
            else:
                total += loss.item()
        return meter.finish(N)

    def mem006(bad, detach):
        model, x, _y = setup()
        meter = Meter()
        outs = []
        for _ in range(N):
            if not bad:
                outs.append(model(x).detach().cpu())
            elif detach:
                outs.append(model(x).detach())
            else:
                outs.append(model(x))
        return meter.finish(N)

    def mem008(bad):
        model = mlp(L, C, dtype)
        fd, path = tempfile.mkstemp(suffix=".pt")
        os.close(fd)
        try:
            torch.save(model.state_dict(), path)
            meter = Meter()
            if bad:
                sd = torch.load(path, weights_only=True)
            else:
                sd = torch.load(path, map_location="cpu", weights_only=True)
            model.load_state_dict(sd)
            return meter.finish(1)
        finally:
            os.unlink(path)

    def mem009(bad):
        model, x, y = setup()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        meter = Meter()
        for _ in range(N):
            out, loss = train_step(model, opt, x, y, set_to_none=not bad)
        return meter.finish(N)

    def mem012(bad):
        frozen = mlp(L, None, dtype)
        head = mlp(0, C, dtype)
        x = torch.randn(B, H, device=dev, dtype=dtype)
        y = torch.randint(0, C, (B,), device=dev)
        opt = torch.optim.SGD(head.parameters(), lr=LR)
        meter = Meter()
        for _ in range(N):
            opt.zero_grad()
            if bad:
                feats = frozen(x)
            else:
                with torch.no_grad():
                    feats = frozen(x)
            out = head(feats)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
        return meter.finish(N)

    scenarios = [
        ("MEM001", "eval", mem001),
        ("MEM002", "eval", mem002_eval),
        ("MEM002", "train", mem002_train),
        ("MEM003", "fp16", mem003),
        ("MEM004", "train", mem004),
        ("MEM005", "peak", mem005_peak),
        ("MEM005", "growth", mem005_growth),
        ("MEM006", "graphs", lambda bad: mem006(bad, False)),
        ("MEM006", "detached", lambda bad: mem006(bad, True)),
        ("MEM008", "restore", mem008),
        ("MEM009", "train", mem009),
        ("MEM012", "frozen", mem012),
    ]
    only = {c.strip().upper() for c in a.only.split(",") if c.strip()}

    def measure(fn, bad):
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        try:
            return fn(bad)
        finally:
            gc.collect()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    for code, variant, fn in scenarios:
        if only and code not in only:
            continue
        entry = {"code": code, "variant": variant}
        try:
            b = measure(fn, True)
            f = measure(fn, False)
            entry.update({
                "peak_bytes_bad": b["peak"], "peak_bytes_fixed": f["peak"],
                "held_bytes_bad": b["held"], "held_bytes_fixed": f["held"],
                "step_ms_bad": b["step_ms"], "step_ms_fixed": f["step_ms"],
                "underflow_fraction_bad": b["underflow"], "underflow_fraction_fixed": f["underflow"],
                "error": None,
            })
        except torch.cuda.OutOfMemoryError as e:
            entry["error"] = "out of memory: %s" % str(e).splitlines()[0]
        except Exception as e:  # report per scenario, as memlint does
            entry["error"] = "%s: %s" % (type(e).__name__, e)
        base["scenarios"].append(entry)
    emit(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
