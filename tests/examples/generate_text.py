"""Sampling from a language model: inference without torch.no_grad()."""
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=256, width=512):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.TransformerEncoder(nn.TransformerEncoderLayer(width, 8, batch_first=True), 4)
        self.out = nn.Linear(width, vocab)

    def forward(self, idx):
        return self.out(self.blocks(self.embed(idx)))


def sample(model, prompt, steps=100, temperature=1.0):
    model.eval()
    idx = prompt
    for _ in range(steps):
        logits = model(idx)[:, -1, :] / temperature
        next_token = torch.multinomial(torch.softmax(logits, -1), 1)
        idx = torch.cat([idx, next_token], dim=1)
    return idx


if __name__ == "__main__":
    lm = TinyLM().cuda()
    print(sample(lm, torch.zeros(1, 1, dtype=torch.long, device="cuda")))
