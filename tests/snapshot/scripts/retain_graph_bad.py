"""backward(retain_graph=True) while the losses are kept: every step's saved tensors survive."""
import torch
import torch.nn.functional as F
from _model import setup, batch
from _record import Recorder

rec = Recorder("retain_graph_bad")
model, optimizer = setup()
loader = (batch() for _ in range(6))
losses = []
for x, y in loader:
    loss = F.cross_entropy(model(x), y)  # snapshot: forward
    optimizer.zero_grad(set_to_none=True)
    loss.backward(retain_graph=True)  # snapshot: backward
    optimizer.step()
    losses.append(loss)  # snapshot: keep
    rec.tick()
rec.finish()
