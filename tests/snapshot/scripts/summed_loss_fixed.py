"""The fix of summed_loss_bad.py: sum a Python number (loss.item())."""
import torch
import torch.nn.functional as F
from _model import setup, batch
from _record import Recorder

rec = Recorder("summed_loss_fixed")
model, _ = setup()
loader = (batch() for _ in range(6))
total = 0.0
for x, y in loader:
    loss = F.cross_entropy(model(x), y)  # snapshot: forward
    total += loss.item()  # snapshot: accumulate
    rec.tick()
rec.finish()
