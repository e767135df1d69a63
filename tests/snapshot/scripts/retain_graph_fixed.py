"""The fix of retain_graph_bad.py: a plain backward, losses kept as numbers."""
import torch
import torch.nn.functional as F
from _model import setup, batch
from _record import Recorder

rec = Recorder("retain_graph_fixed")
model, optimizer = setup()
loader = (batch() for _ in range(6))
losses = []
for x, y in loader:
    loss = F.cross_entropy(model(x), y)  # snapshot: forward
    optimizer.zero_grad(set_to_none=True)
    loss.backward()  # snapshot: backward
    optimizer.step()
    losses.append(loss.item())  # snapshot: keep
    rec.tick()
rec.finish()
