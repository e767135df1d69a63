"""A small MLP whose forward lines are the allocating lines the tests look for."""
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, width=1024, depth=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 16)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))  # snapshot: activation
        return self.head(x)  # snapshot: head


def setup(seed=0):
    torch.manual_seed(seed)
    model = MLP().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    return model, opt


def batch(n=256, width=1024):
    x = torch.randn(n, width, device="cuda")  # snapshot: batch
    y = torch.randint(0, 16, (n,), device="cuda")  # snapshot: labels
    return x, y
