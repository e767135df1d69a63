"""The fix of collect_outputs_bad.py: keep detached outputs only."""
import torch
from _model import setup, batch
from _record import record


def init():
    model, _ = setup()
    return {"model": model, "outputs": []}


def step(i, s):
    x, _ = batch()
    out = s["model"](x)  # snapshot: forward
    s["outputs"].append(out.detach())  # snapshot: collect


record("collect_outputs_fixed", init, step, iters=6)
