"""Evaluation without torch.no_grad(): every forward keeps its activations for a backward that never comes."""
import torch
from _model import setup, batch
from _record import Recorder

rec = Recorder("eval_no_grad_bad")
model, _ = setup()
model.eval()
val_loader = (batch(n=1024) for _ in range(4))
preds = []
for x, _ in val_loader:
    out = model(x)  # snapshot: eval-forward
    preds.append(out.argmax(dim=1))  # snapshot: preds
    rec.tick()
rec.finish()
