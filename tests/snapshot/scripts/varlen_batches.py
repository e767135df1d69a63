"""Variable-length batches (growing then shrinking sequence lengths): the caching allocator's
segments fragment. Run with `--expandable` to set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
Writes varlen_segments or varlen_expandable."""
import os
import sys

EXPANDABLE = "--expandable" in sys.argv
if EXPANDABLE:
    sys.argv.remove("--expandable")
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import torch  # noqa: E402
from torch import nn  # noqa: E402
from _record import record  # noqa: E402

LENGTHS = [64, 192, 96, 320, 128, 448, 80, 512, 160, 40]


def init():
    torch.manual_seed(0)
    return {"proj": nn.Linear(512, 2048).cuda(), "kept": []}


def step(i, s):
    n = LENGTHS[i]
    x = torch.randn(8, n, 512, device="cuda")  # snapshot: varlen-batch
    h = s["proj"](x)  # snapshot: varlen-proj
    y = torch.relu(h).sum()
    y.backward()
    # a small tensor that outlives its neighbours pins its segment
    s["kept"].append(h[0, 0].detach().clone())  # snapshot: varlen-keep


record("varlen_expandable" if EXPANDABLE else "varlen_segments", init, step, iters=len(LENGTHS))
