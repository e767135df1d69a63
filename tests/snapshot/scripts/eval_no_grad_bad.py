"""Evaluation without torch.no_grad(): every forward keeps its activations for a backward that never comes."""
import torch
from _model import setup, batch
from _record import record


def init():
    model, _ = setup()
    model.eval()
    return {"model": model, "preds": []}


def step(i, s):
    x, _ = batch(n=1024)
    out = s["model"](x)  # snapshot: eval-forward
    s["preds"].append(out.argmax(dim=1))  # snapshot: preds


record("eval_no_grad_bad", init, step, iters=4)
