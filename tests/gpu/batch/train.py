"""Training loops for memlint's batch model (issue 30), run unchanged under `memlint record`.

    python3 train.py --model resnet18|gpt2|mlp --batch N [--steps N]

- resnet18: torchvision's ResNet-18 (random initialisation, 1000 classes) on 3x224x224 images,
  SGD with momentum, float16 autocast and a GradScaler;
- gpt2: a GPT-2 from a transformers GPT2Config (6 layers, width 512, 8 heads, sequences of
  256 tokens, GPT-2's 50257-token vocabulary), AdamW, the model's own language-modelling loss;
- mlp: 3072 -> 2048 -> 2048 -> 2048 -> 10 with ReLU, Adam.
Nothing is downloaded: the data are random tensors made on the GPU each step. The loop runs
--steps steps (default: a million, for `memlint record --steps N` to stop it).
measure.py imports `build` and `train` to run the same loops at other batch sizes.
"""
import argparse

import torch
import torch.nn.functional as F
from torch import nn


def build(name, batch):
    """The model, its optimizer, a GradScaler or None, and make_batch() / loss_of(model, x, y)."""
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(num_classes=1000).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        scaler = torch.amp.GradScaler("cuda")

        def make_batch():
            return torch.randn(batch, 3, 224, 224, device="cuda"), torch.randint(0, 1000, (batch,), device="cuda")

        def loss_of(m, x, y):
            return F.cross_entropy(m(x), y)

        return model, opt, scaler, make_batch, loss_of
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(n_layer=6, n_embd=512, n_head=8, n_positions=256)
        model = GPT2LMHeadModel(config).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def make_batch():
            ids = torch.randint(0, config.vocab_size, (batch, 256), device="cuda")
            return ids, ids

        def loss_of(m, x, y):
            return m(input_ids=x, labels=y).loss

        return model, opt, None, make_batch, loss_of
    if name == "mlp":
        model = nn.Sequential(
            nn.Linear(3072, 2048), nn.ReLU(),
            nn.Linear(2048, 2048), nn.ReLU(),
            nn.Linear(2048, 2048), nn.ReLU(),
            nn.Linear(2048, 10),
        ).cuda()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def make_batch():
            return torch.randn(batch, 3072, device="cuda"), torch.randint(0, 10, (batch,), device="cuda")

        def loss_of(m, x, y):
            return F.cross_entropy(m(x), y)

        return model, opt, None, make_batch, loss_of
    raise SystemExit(f"unknown model {name}")


def train(model, opt, scaler, make_batch, loss_of, steps):
    model.train()
    for _ in range(steps):
        x, y = make_batch()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=scaler is not None):
            loss = loss_of(model, x, y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    return loss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, choices=["resnet18", "gpt2", "mlp"])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=1_000_000)
    a = p.parse_args()
    model, opt, scaler, make_batch, loss_of = build(a.model, a.batch)
    loss = train(model, opt, scaler, make_batch, loss_of, a.steps)
    print(f"{a.model} batch {a.batch}: {a.steps} steps, loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
