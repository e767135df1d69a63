"""The fix of summed_loss_bad.py: sum a Python number (loss.item())."""
import torch
import torch.nn.functional as F
from _model import setup, batch
from _record import record


def init():
    model, _ = setup()
    return {"model": model, "total": 0.0}


def step(i, s):
    x, y = batch()
    loss = F.cross_entropy(s["model"](x), y)  # snapshot: forward
    s["total"] = s["total"] + loss.item()  # snapshot: accumulate


record("summed_loss_fixed", init, step, iters=6)
