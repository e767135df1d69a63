"""The fix of collect_outputs_bad.py: keep detached outputs only."""
import torch
from _model import setup, batch
from _record import Recorder

rec = Recorder("collect_outputs_fixed")
model, _ = setup()
loader = (batch() for _ in range(6))
outputs = []
for x, _ in loader:
    out = model(x)  # snapshot: forward
    outputs.append(out.detach())  # snapshot: collect
    rec.tick()
rec.finish()
