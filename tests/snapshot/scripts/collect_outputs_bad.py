"""Model outputs collected in a list with their autograd graphs (no optimizer step: the graphs pile up)."""
import torch
from _model import setup, batch
from _record import Recorder

rec = Recorder("collect_outputs_bad")
model, _ = setup()
loader = (batch() for _ in range(6))
outputs = []
for x, _ in loader:
    out = model(x)  # snapshot: forward
    outputs.append(out)  # snapshot: collect
    rec.tick()
rec.finish()
