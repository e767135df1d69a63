#!/usr/bin/env python3
"""The rules' documentation examples, run by PyTorch: the other half of `memlint verify --compare-torch`.

Each rule's `## Example` (the anti-pattern) and `Use instead:` (its fix) are copied below as
functions, statement for statement, from the rule's documentation (`memlint rule MEM00x`,
docs/rules/<name>.md). Lines ending in `# verify: ...` are the harness's own (reading the
measurement, creating what the example takes as given); every other line is the documentation's.
A test of memlint (crates/memlint_verify/tests/doc_examples.rs) checks that each example appears
here, line for line. Variants that are not in the documentation (the same loop in an evaluation
pass, the model dropped after the loop, ...) are marked as such.

The examples' free names are bound as an ordinary training script binds them: `model` is an MLP
(`--layers` x Linear(hidden, hidden) + ReLU, then Linear(hidden, classes)), `criterion` is
`nn.CrossEntropyLoss()`, `optimizer` is SGD, and a loader gives a fresh batch every step: on the
host for examples that call `x.cuda()` (`host_loader`), on the device for those that use `x` as it
comes (`device_loader`, as a loader with `pin_memory` and a device prefetcher does).

memlint writes this script (embedded in its binary) to a temporary file and runs it with python3.
It prints one JSON object on stdout:

    {"python": ..., "torch_version": ..., "device": ..., "workspace_bytes": N,
     "scenarios": [{"code": "MEM001", "variant": "eval", "peak_bytes_bad": N, "peak_bytes_fixed": N,
                    "held_bytes_bad": N, "held_bytes_fixed": N, "step_ms_bad": X, "step_ms_fixed": X,
                    "underflow_fraction_bad": F|null, "underflow_fraction_fixed": F|null,
                    "underflow_fraction_fp32": F|null, "mallocs_per_step_bad": X|null,
                    "mallocs_per_step_fixed": X|null, "error": null|"..."}, ...],
     "error": null|"why nothing ran"}

Memory figures are torch.cuda.max_memory_allocated() (peak, from the start of the example with the
model already on the device) and torch.cuda.memory_allocated() (held right after the loop, its
variables alive), in bytes. Step times (MEM004) exclude two warm-up steps, synchronize the device
before and after, and are the median of 5 repetitions of the loop; mallocs are cudaMalloc calls
(`segment.all.allocated`) per step.
"""
import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time

LR = 1e-3
# MEM003: late in training the loss, and every gradient with it, is far smaller than at
# initialisation; the examples' criterion is scaled by this factor to stand for that stage.
LATE_LOSS_FACTOR = 1.0 / 64.0
TIMING_REPS = 5
WARMUP_STEPS = 2


def emit(obj):
    print(json.dumps(obj))
    sys.stdout.flush()


BASE = {"python": sys.version.split()[0], "torch_version": None, "device": None,
        "workspace_bytes": None, "scenarios": [], "error": None}
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except Exception as e:  # no torch: report, do not fail
    BASE["error"] = "python3 cannot import torch: %s" % e
    emit(BASE)
    sys.exit(0)


# ---------------------------------------------------------------------------------------------
# The documentation examples.
# ---------------------------------------------------------------------------------------------

# MEM001 eval-without-no-grad: ## Example
def mem001_eval_bad(model, val_loader, meter):
    def evaluate(model, val_loader):
        model.eval()
        correct = 0
        for x, y in val_loader:
            out = model(x.cuda())
            correct += (out.argmax(1) == y.cuda()).sum().item()
        meter.finish()  # verify: inside the function, its variables alive
        return correct
    return evaluate(model, val_loader)


# MEM001 eval-without-no-grad: Use instead:
def mem001_eval_fixed(model, val_loader, meter):
    @torch.no_grad()
    def evaluate(model, val_loader):
        model.eval()
        correct = 0
        for x, y in val_loader:
            out = model(x.cuda())
            correct += (out.argmax(1) == y.cuda()).sum().item()
        meter.finish()  # verify: inside the function, its variables alive
        return correct
    return evaluate(model, val_loader)


# MEM002 accumulated-loss-tensor: ## Example
def mem002_train_bad(model, criterion, optimizer, train_loader, meter):
    total_loss = 0
    for x, y in train_loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss
    meter.finish()  # verify: held with the loop's variables alive
    return total_loss


# MEM002 accumulated-loss-tensor: Use instead:
def mem002_train_fixed(model, criterion, optimizer, train_loader, meter):
    total_loss = 0
    for x, y in train_loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    meter.finish()  # verify: held with the loop's variables alive
    return total_loss


# MEM002 variant (not in the documentation): the example's accumulation in an evaluation pass;
# the fix is the rule's `.item()` under `torch.no_grad()`.
def mem002_eval_bad(model, criterion, val_loader, meter):
    model.eval()
    total_loss = 0
    for x, y in val_loader:
        loss = criterion(model(x), y)
        total_loss += loss
    meter.finish()  # verify: held with the loop's variables alive
    return total_loss


def mem002_eval_fixed(model, criterion, val_loader, meter):
    model.eval()
    total_loss = 0
    with torch.no_grad():
        for x, y in val_loader:
            loss = criterion(model(x), y)
            total_loss += loss.item()
    meter.finish()  # verify: held with the loop's variables alive
    return total_loss


# MEM003 half-without-grad-scaler: ## Example
def mem003_half_bad(Net, criterion, make_optimizer, loader, fractions):
    model = Net().cuda().half()
    optimizer = make_optimizer(model)  # verify: the example's optimizer, over this model
    for x, y in loader:
        loss = criterion(model(x.half()), y)
        loss.backward()
        optimizer.step()
        fractions.append(zero_fraction(model))  # verify: gradient elements that are zero


# MEM003 half-without-grad-scaler: Use instead:
def mem003_half_fixed(Net, criterion, make_optimizer, loader, fractions):
    model = Net().cuda()
    optimizer = make_optimizer(model)  # verify: the example's optimizer, over this model
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        fractions.append(zero_fraction(model))  # verify: gradient elements that are zero


# MEM003 variant (not in the documentation): fp16 autocast without a GradScaler (the rule's other
# finding); its fix is the documentation's `Use instead:` above.
def mem003_autocast_bad(Net, criterion, make_optimizer, loader, fractions):
    model = Net().cuda()
    optimizer = make_optimizer(model)  # verify: the example's optimizer, over this model
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        fractions.append(zero_fraction(model))  # verify: gradient elements that are zero


# MEM003 reference (not in the documentation): the same loop in fp32, for the gradient elements that
# are zero anyway (ReLU zeros, which are not underflow).
def mem003_fp32(Net, criterion, make_optimizer, loader, fractions):
    model = Net().cuda()
    optimizer = make_optimizer(model)  # verify: the example's optimizer, over this model
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        fractions.append(zero_fraction(model))  # verify: gradient elements that are zero


# MEM004 empty-cache-in-loop: ## Example
def mem004_train_bad(model, criterion, optimizer, train_loader):
    for x, y in train_loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch.cuda.empty_cache()


# MEM004 empty-cache-in-loop: Use instead:
def mem004_train_fixed(model, criterion, optimizer, train_loader):
    for x, y in train_loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


# MEM004 variant (not in the documentation): the other common form, the step's tensors deleted
# before the call.
def mem004_del_bad(model, criterion, optimizer, train_loader):
    for x, y in train_loader:
        outputs = model(x)
        loss = criterion(outputs, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        del outputs, loss
        torch.cuda.empty_cache()


def mem004_del_fixed(model, criterion, optimizer, train_loader):
    for x, y in train_loader:
        outputs = model(x)
        loss = criterion(outputs, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        del outputs, loss


# MEM005 retain-graph-in-loop: ## Example
def mem005_peak_bad(model, criterion, optimizer, loader, meter):
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()
    meter.finish()  # verify: held with the loop's variables alive


# MEM005 retain-graph-in-loop: Use instead:
def mem005_peak_fixed(model, criterion, optimizer, loader, meter):
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    meter.finish()  # verify: held with the loop's variables alive


# MEM005 variant (not in the documentation): the example with its losses kept (summed as in
# MEM002's example), so that every retained graph stays alive.
def mem005_growth_bad(model, criterion, optimizer, loader, meter):
    total_loss = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()
        total_loss += loss
    meter.finish()  # verify: held with the loop's variables alive


def mem005_growth_fixed(model, criterion, optimizer, loader, meter):
    total_loss = 0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    meter.finish()  # verify: held with the loop's variables alive


# MEM006 gpu-tensors-collected: ## Example
def mem006_graphs_bad(model, test_loader, meter):
    preds = []
    for x, _ in test_loader:
        preds.append(model(x.cuda()))
    meter.finish()  # verify: held with the loop's variables alive


# MEM006 gpu-tensors-collected: Use instead:
def mem006_graphs_fixed(model, test_loader, meter):
    preds = []
    with torch.no_grad():
        for x, _ in test_loader:
            preds.append(model(x.cuda()).cpu())
    meter.finish()  # verify: held with the loop's variables alive


# MEM006 variant (not in the documentation): outputs without graphs (under no_grad) kept on the
# GPU; the fix is the documentation's `Use instead:` above.
def mem006_detached_bad(model, test_loader, meter):
    preds = []
    with torch.no_grad():
        for x, _ in test_loader:
            preds.append(model(x.cuda()))
    meter.finish()  # verify: held with the loop's variables alive


# MEM008 torch-load-without-map-location: ## Example
def mem008_restore_bad(model, meter):
    checkpoint = torch.load("last.pt")
    model.load_state_dict(checkpoint["model"])
    meter.finish()  # verify: held with the checkpoint alive


# MEM008 torch-load-without-map-location: Use instead:
def mem008_restore_fixed(model, meter):
    checkpoint = torch.load("last.pt", map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    meter.finish()  # verify: held with the checkpoint alive


# MEM009 zero-grad-keeps-memory: ## Example
def mem009_train_bad(model, criterion, optimizer, loader, meter):
    for x, y in loader:
        optimizer.zero_grad(set_to_none=False)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    meter.finish()  # verify: held with the loop's variables alive


# MEM009 zero-grad-keeps-memory: Use instead:
def mem009_train_fixed(model, criterion, optimizer, loader, meter):
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    meter.finish()  # verify: held with the loop's variables alive


# MEM012 frozen-network-tracks-grad: ## Example
def mem012_frozen_bad(pretrained_features, generator, loader, meter):
    vgg = pretrained_features()  # verify: stands for torchvision's vgg16(...).features[:16].eval().cuda()
    optimizer = torch.optim.Adam(generator.parameters())
    for x, target in loader:
        fake = generator(x)
        loss = F.mse_loss(vgg(fake), vgg(target))
        loss.backward()
    meter.finish()  # verify: held with the loop's variables alive


# MEM012 frozen-network-tracks-grad: Use instead:
def mem012_frozen_fixed(pretrained_features, generator, loader, meter):
    vgg = pretrained_features()  # verify: stands for torchvision's vgg16(...).features[:16].eval().cuda()
    vgg.requires_grad_(False)
    optimizer = torch.optim.Adam(generator.parameters())
    for x, target in loader:
        fake = generator(x)
        loss = F.mse_loss(vgg(fake), vgg(target))
        loss.backward()
    meter.finish()  # verify: held with the loop's variables alive


# ---------------------------------------------------------------------------------------------
# The harness.
# ---------------------------------------------------------------------------------------------

def zero_fraction(model):
    total = 0
    zeros = 0
    for p in model.parameters():
        total += p.numel()
        zeros += int((p.grad == 0).sum().item()) if p.grad is not None else p.numel()
    return zeros / total


class Meter:
    """Peak from its creation; `finish()` reads the figures, the caller's variables still alive."""

    def __init__(self, steps=1):
        self.steps = steps
        self.result = None
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        self.t0 = time.perf_counter()

    def finish(self):
        torch.cuda.synchronize()
        ms = (time.perf_counter() - self.t0) * 1e3 / max(self.steps, 1)
        self.result = {"peak": torch.cuda.max_memory_allocated(), "held": torch.cuda.memory_allocated(),
                       "step_ms": ms}
        return self.result


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
    base = BASE
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
    wdtype = torch.float16 if a.dtype == "fp16" else torch.float32
    H, L, B, N, C = a.hidden, a.layers, a.batch, a.iters, a.classes

    # cuBLAS/cuBLASLt workspaces are allocated once, through the caching allocator: warm up so that
    # they exist before any measurement and then weigh the same in every loop.
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

    def mlp(layers, classes, dt, on_device=True):
        kw = {"device": dev if on_device else "cpu", "dtype": dt}
        mods = []
        for _ in range(layers):
            mods += [nn.Linear(H, H, **kw), nn.ReLU()]
        if classes:
            mods.append(nn.Linear(H, classes, **kw))
        return nn.Sequential(*mods)

    def host_loader(dt, steps=N):
        # A DataLoader's batches: on the host, a fresh one every step.
        batches = [(torch.randn(B, H, dtype=dt), torch.randint(0, C, (B,))) for _ in range(steps)]
        return iter(batches)

    def device_loader(dt, steps=N, target_like_x=False):
        # A fresh batch on the device every step, made when the loop asks for it.
        for _ in range(steps):
            yield (torch.randn(B, H, device=dev, dtype=dt),
                   torch.randn(B, H, device=dev, dtype=dt) if target_like_x else torch.randint(0, C, (B,), device=dev))

    criterion = nn.CrossEntropyLoss()

    def sgd(model):
        return torch.optim.SGD(model.parameters(), lr=LR)

    def held_run(fn, *args, steps=N):
        meter = Meter(steps)
        fn(*args, meter=meter)
        return meter.result

    # Each entry: (code, variant, run(bad) -> figures).
    def r_mem001(bad):
        model = mlp(L, C, wdtype)
        return held_run(mem001_eval_bad if bad else mem001_eval_fixed, model, host_loader(wdtype))

    def r_mem002_train(bad):
        model = mlp(L, C, wdtype)
        return held_run(mem002_train_bad if bad else mem002_train_fixed, model, criterion, sgd(model), device_loader(wdtype))

    def r_mem002_dropped(bad):
        model = mlp(L, C, wdtype)
        optimizer = sgd(model)
        meter = Meter(N)
        total_loss = (mem002_train_bad if bad else mem002_train_fixed)(model, criterion, optimizer, device_loader(wdtype), meter=meter)
        del model, optimizer
        gc.collect()
        r = dict(meter.result)
        r["held"] = torch.cuda.memory_allocated()
        r["peak"] = torch.cuda.max_memory_allocated()
        del total_loss
        return r

    def r_mem002_eval(bad):
        model = mlp(L, C, wdtype)
        return held_run(mem002_eval_bad if bad else mem002_eval_fixed, model, criterion, device_loader(wdtype))

    def late_criterion(out, y):
        return F.cross_entropy(out, y) * LATE_LOSS_FACTOR

    def net():
        return mlp(L, C, torch.float32, on_device=False)

    def r_mem003(bad_fn, fixed_fn):
        def run(bad):
            fractions = []
            meter = Meter(N)
            torch.manual_seed(0)
            (bad_fn if bad else fixed_fn)(net, late_criterion, sgd, device_loader(torch.float32), fractions)
            r = meter.finish()
            r["underflow"] = sum(fractions) / len(fractions)
            return r
        return run

    def fp32_fraction():
        fractions = []
        torch.manual_seed(0)
        mem003_fp32(net, late_criterion, sgd, device_loader(torch.float32), fractions)
        return sum(fractions) / len(fractions)

    def r_mem004(bad_fn, fixed_fn, dt):
        def run(bad):
            model = mlp(L, C, dt)
            optimizer = sgd(model)
            fn = bad_fn if bad else fixed_fn
            meter = Meter(N)
            fn(model, criterion, optimizer, device_loader(dt, WARMUP_STEPS))
            times = []
            seg0 = torch.cuda.memory_stats().get("segment.all.allocated", 0)
            for _ in range(TIMING_REPS):
                loader = device_loader(dt)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn(model, criterion, optimizer, loader)
                torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) * 1e3 / N)
            seg1 = torch.cuda.memory_stats().get("segment.all.allocated", 0)
            r = meter.finish()
            r["step_ms"] = statistics.median(times)
            r["mallocs_per_step"] = (seg1 - seg0) / (TIMING_REPS * N)
            return r
        return run

    def r_mem005(bad_fn, fixed_fn):
        def run(bad):
            model = mlp(L, C, wdtype)
            return held_run(bad_fn if bad else fixed_fn, model, criterion, sgd(model), device_loader(wdtype))
        return run

    def r_mem006(bad_fn, fixed_fn):
        def run(bad):
            model = mlp(L, C, wdtype)
            return held_run(bad_fn if bad else fixed_fn, model, host_loader(wdtype))
        return run

    def r_mem008(bad):
        model = mlp(L, C, wdtype)
        d = tempfile.mkdtemp()
        cwd = os.getcwd()
        os.chdir(d)
        try:
            torch.save({"model": model.state_dict()}, "last.pt")
            return held_run(mem008_restore_bad if bad else mem008_restore_fixed, model, steps=1)
        finally:
            os.unlink(os.path.join(d, "last.pt"))
            os.chdir(cwd)
            os.rmdir(d)

    def r_mem009(bad):
        model = mlp(L, C, wdtype)
        return held_run(mem009_train_bad if bad else mem009_train_fixed, model, criterion, sgd(model), device_loader(wdtype))

    def r_mem012(bad):
        generator = nn.Sequential(nn.Linear(H, H)).to(device=dev, dtype=wdtype)

        def pretrained_features():
            return mlp(L, None, wdtype).eval()
        return held_run(mem012_frozen_bad if bad else mem012_frozen_fixed, pretrained_features, generator,
                        device_loader(wdtype, target_like_x=True))

    scenarios = [
        ("MEM001", "eval", r_mem001),
        ("MEM002", "train", r_mem002_train),
        ("MEM002", "train-model-dropped", r_mem002_dropped),
        ("MEM002", "eval", r_mem002_eval),
        ("MEM003", "half", r_mem003(mem003_half_bad, mem003_half_fixed)),
        ("MEM003", "autocast", r_mem003(mem003_autocast_bad, mem003_half_fixed)),
        ("MEM004", "train", r_mem004(mem004_train_bad, mem004_train_fixed, wdtype)),
        ("MEM004", "del", r_mem004(mem004_del_bad, mem004_del_fixed, wdtype)),
    ]
    if wdtype != torch.float16:
        scenarios += [
            ("MEM004", "train-fp16", r_mem004(mem004_train_bad, mem004_train_fixed, torch.float16)),
            ("MEM004", "del-fp16", r_mem004(mem004_del_bad, mem004_del_fixed, torch.float16)),
        ]
    scenarios += [
        ("MEM005", "peak", r_mem005(mem005_peak_bad, mem005_peak_fixed)),
        ("MEM005", "growth", r_mem005(mem005_growth_bad, mem005_growth_fixed)),
        ("MEM006", "graphs", r_mem006(mem006_graphs_bad, mem006_graphs_fixed)),
        ("MEM006", "detached", r_mem006(mem006_detached_bad, mem006_graphs_fixed)),
        ("MEM008", "restore", r_mem008),
        ("MEM009", "train", r_mem009),
        ("MEM012", "frozen", r_mem012),
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

    fp32_zero = None
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
                "underflow_fraction_bad": b.get("underflow"), "underflow_fraction_fixed": f.get("underflow"),
                "underflow_fraction_fp32": None,
                "mallocs_per_step_bad": b.get("mallocs_per_step"), "mallocs_per_step_fixed": f.get("mallocs_per_step"),
                "error": None,
            })
            if code == "MEM003":
                if fp32_zero is None:
                    fp32_zero = measure(lambda _bad: fp32_fraction(), False)
                entry["underflow_fraction_fp32"] = fp32_zero
        except torch.cuda.OutOfMemoryError as e:
            entry["error"] = "out of memory: %s" % str(e).splitlines()[0]
        except Exception as e:  # report per scenario, as memlint does
            entry["error"] = "%s: %s" % (type(e).__name__, e)
        base["scenarios"].append(entry)
    emit(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
