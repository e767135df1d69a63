"""Model outputs collected in a list with their autograd graphs (no optimizer step: the graphs pile up)."""
import torch
from _model import setup, batch
from _record import record


def init():
    model, _ = setup()
    return {"model": model, "outputs": []}


def step(i, s):
    x, _ = batch()
    out = s["model"](x)  # snapshot: forward
    s["outputs"].append(out)  # snapshot: collect


record("collect_outputs_bad", init, step, iters=6)
