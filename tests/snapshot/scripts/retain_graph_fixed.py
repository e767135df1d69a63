"""The fix of retain_graph_bad.py: a plain backward, losses kept as numbers."""
import torch
import torch.nn.functional as F
from _model import setup, batch
from _record import record


def init():
    model, opt = setup()
    return {"model": model, "opt": opt, "losses": []}


def step(i, s):
    x, y = batch()
    loss = F.cross_entropy(s["model"](x), y)  # snapshot: forward
    s["opt"].zero_grad(set_to_none=True)
    loss.backward()
    s["opt"].step()
    s["losses"].append(loss.item())  # snapshot: keep


record("retain_graph_fixed", init, step, iters=6)
