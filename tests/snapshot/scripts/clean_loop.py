"""A clean training loop: nothing is retained from one step to the next.

Also written with pickle protocols 2 and 5 (Python 3.14's default) to test the reader."""
import torch
import torch.nn.functional as F
from _model import setup, batch
from _record import record


def init():
    model, opt = setup()
    return {"model": model, "opt": opt, "total": 0.0}


def step(i, s):
    x, y = batch()
    loss = F.cross_entropy(s["model"](x), y)  # snapshot: forward
    s["opt"].zero_grad(set_to_none=True)
    loss.backward()
    s["opt"].step()
    s["total"] += loss.item()


record("clean_loop", init, step, iters=6, also_protocols=(2, 5))
