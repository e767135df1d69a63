"""A validation loss summed as a tensor: each step's autograd graph (and its saved
activations) stays alive through the running total."""
import torch
import torch.nn.functional as F
from _model import setup, batch
from _record import Recorder

rec = Recorder("summed_loss_bad")
model, _ = setup()
loader = (batch() for _ in range(6))
total = 0
for x, y in loader:
    loss = F.cross_entropy(model(x), y)  # snapshot: forward
    total += loss  # snapshot: accumulate
    rec.tick()
rec.finish()
