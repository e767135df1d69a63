"""The fix of eval_no_grad_bad.py: the same evaluation under torch.no_grad()."""
import torch
from _model import setup, batch
from _record import record


def init():
    model, _ = setup()
    model.eval()
    return {"model": model, "preds": []}


def step(i, s):
    with torch.no_grad():
        x, _ = batch(n=1024)
        out = s["model"](x)  # snapshot: eval-forward
        s["preds"].append(out.argmax(dim=1))  # snapshot: preds


record("eval_no_grad_fixed", init, step, iters=4)
