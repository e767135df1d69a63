"""A small transformer language model (embedding, 4 encoder layers of width 256 with 4 heads and
a 1024-wide feed-forward, a linear head over a 2000-token vocabulary) trained with AdamW on
batches of 16 sequences of 128 tokens. `--fp16`: the same under fp16 autocast with a GradScaler."""
import sys

import torch
import torch.nn.functional as F
from torch import nn

from _loop import train

FP16 = "--fp16" in sys.argv
if FP16:
    sys.argv.remove("--fp16")
VOCAB, WIDTH, SEQ, BATCH = 2000, 256, 128, 16


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, 4, 1024, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


def batch():
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")
    return tokens, torch.roll(tokens, -1, dims=1)


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


train("transformer_fp16" if FP16 else "transformer_fp32", LM, batch, loss_fn,
      lambda m: torch.optim.AdamW(m.parameters(), lr=1e-4),
      amp_dtype=torch.float16 if FP16 else None)
