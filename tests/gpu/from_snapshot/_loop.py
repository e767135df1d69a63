"""Shared measurement for the --from-snapshot recordings (run on a GPU machine).

`train(name, model, make_batch, loss_fn, opt, iters, scaler=None, autocast=None)` runs an
ordinary training loop (zero_grad at the top, forward, backward, step) with PyTorch's allocation
history on, and writes NAME.pickle (torch.cuda.memory._dump_snapshot) and NAME.json with
PyTorch's own figures beside it:
  parameter_bytes        sum of p.numel() * p.element_size() over model.parameters()
  activation_bytes[i]    max_memory_allocated during iteration i minus memory_allocated before it
                         (reset_peak_memory_stats() at the top of each iteration)
The recording starts before the model is moved to the GPU, so the snapshot sees its parameters
allocated before the loop.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "snapshot", "scripts"))
from _record import finish, start  # noqa: E402


def train(name, build, make_batch, loss_fn, make_opt, iters=6, amp_dtype=None):
    start()
    torch.manual_seed(0)
    model = build().cuda()
    opt = make_opt(model)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype is torch.float16 else None
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    per_iter, acts = [], []
    for i in range(iters):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        x, y = make_batch()
        opt.zero_grad(set_to_none=True)
        if amp_dtype is not None:
            with torch.autocast("cuda", dtype=amp_dtype):
                loss = loss_fn(model(x), y)
        else:
            loss = loss_fn(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        acts.append(peak - before)
        per_iter.append({"iteration": i, "memory_allocated_before": before,
                         "max_memory_allocated": peak,
                         "memory_allocated": torch.cuda.memory_allocated()})
    grad_bytes = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    state_bytes = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                      if torch.is_tensor(t) and t.is_cuda)
    extra = {
        "model": name,
        "amp": str(amp_dtype) if amp_dtype is not None else None,
        "parameter_bytes": param_bytes,
        "parameter_tensors": sum(1 for _ in model.parameters()),
        "gradient_bytes": grad_bytes,
        "optimizer_state_bytes": state_bytes,
        "activation_bytes": acts,
        "activation_bytes_median_steady": sorted(acts[1:])[len(acts[1:]) // 2],
    }
    finish(name, per_iter, extra=extra)
    print(json.dumps({k: extra[k] for k in ("parameter_bytes", "optimizer_state_bytes", "activation_bytes")}))
