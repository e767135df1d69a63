"""A small CNN (conv + batch norm + ReLU, pooling, a linear head) trained in fp32 with SGD and
momentum on 32x32 images, batch 64: the snapshot `memlint verify --from-snapshot` sizes from."""
import sys

import torch
import torch.nn.functional as F
from torch import nn

from _loop import train


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


def build():
    return nn.Sequential(
        block(3, 32), block(32, 32), nn.MaxPool2d(2),
        block(32, 64), block(64, 64), nn.MaxPool2d(2),
        block(64, 128), block(128, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(128, 10),
    )


def batch():
    x = torch.randn(64, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    return x, y


train("cnn_fp32", build, batch, F.cross_entropy,
      lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9))
