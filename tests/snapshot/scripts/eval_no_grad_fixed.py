"""The fix of eval_no_grad_bad.py: the same evaluation under torch.no_grad()."""
import torch
from _model import setup, batch
from _record import Recorder

rec = Recorder("eval_no_grad_fixed")
model, _ = setup()
model.eval()
val_loader = (batch(n=1024) for _ in range(4))
preds = []
with torch.no_grad():
    for x, _ in val_loader:
        out = model(x)  # snapshot: eval-forward
        preds.append(out.argmax(dim=1))  # snapshot: preds
        rec.tick()
rec.finish()
