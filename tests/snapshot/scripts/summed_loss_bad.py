"""A validation loss summed as a tensor: each step's autograd graph (and its saved
activations) stays alive through the running total."""
import torch
import torch.nn.functional as F
from _model import setup, batch
from _record import record


def init():
    model, _ = setup()
    return {"model": model, "total": 0}


def step(i, s):
    x, y = batch()
    loss = F.cross_entropy(s["model"](x), y)  # snapshot: forward
    s["total"] = s["total"] + loss  # snapshot: accumulate


record("summed_loss_bad", init, step, iters=6)
