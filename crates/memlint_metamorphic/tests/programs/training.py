"""A training and evaluation program in plain Python, shaped like PyTorch code."""
import itertools as it
import math
from collections import OrderedDict
from functools import reduce

STEPS = 7
history = []


class Module:
    def __init__(self):
        self.training = True
        self.calls = 0

    def eval(self):
        self.training = False
        return self

    def train(self, mode=True):
        self.training = mode
        return self

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.forward(*args, **kwargs)


class Linear(Module):
    def __init__(self, scale, bias=0.5):
        super().__init__()
        self.scale = scale
        self.bias = bias
        self.seen = []

    def forward(self, x):
        self.seen.append(x)
        return x * self.scale + self.bias


class Net(Module):
    def __init__(self, width):
        super().__init__()
        self.fc = Linear(width)
        self.head = Linear(2.0, bias=-1.0)

    def forward(self, x):
        return self.head(self.fc(x))


def mse(pred, target):
    return (pred - target) ** 2


class Optimizer:
    def __init__(self, params, lr=0.1):
        self.params = params
        self.lr = lr
        self.steps = 0

    def step(self):
        self.steps += 1

    def zero_grad(self, set_to_none=True):
        return set_to_none


def make_loader(n, offset=0):
    return [(i + offset, 2 * i + 1) for i in range(n)]


def train_epoch(model, loader, optimizer, accum=2):
    total = 0.0
    best = None
    for i, (x, y) in enumerate(loader):
        out = model(x)
        loss = mse(out, y) / accum
        total += loss
        if best is None or loss < best:
            best = loss
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return total, best


def evaluate(model, loader):
    model.eval()
    preds = []
    correct = 0
    for x, y in loader:
        out = model(x)
        preds.append(round(out, 3))
        if abs(out - y) < 50:
            correct += 1
        elif out > y:
            correct -= 0
        else:
            pass
    model.train()
    return correct, preds


def schedule(epoch, base=1.0):
    factor = 1.0
    k = 0
    while k < epoch:
        factor *= 0.5
        k += 1
    return base * factor


def summarize(values, *, key=lambda v: v):
    scored = {f"v{i}": key(v) for i, v in enumerate(values)}
    ordered = OrderedDict(sorted(scored.items()))
    return reduce(lambda a, b: a + b, ordered.values(), 0), list(ordered)[:3]


def nested(model, xs):
    counter = 0

    def bump(v):
        nonlocal counter
        counter += 1
        return model(v)

    outs = [bump(v) for v in xs]
    return counter, outs


def main():
    model = Net(3.0)
    optimizer = Optimizer([model.fc, model.head], lr=0.01)
    loader = make_loader(6)
    val_loader = make_loader(4, offset=10)
    for epoch in range(3):
        total, best = train_epoch(model, loader, optimizer, accum=3)
        lr = schedule(epoch, base=0.1)
        history.append((epoch, round(total, 2), round(best, 2), lr))
    correct, preds = evaluate(model=model, loader=val_loader)
    print("history", history)
    print("eval", correct, preds)
    print("calls", model.calls, model.fc.calls, len(model.fc.seen), optimizer.steps)
    print("summary", summarize([3, 1, 2], key=lambda v: v * v))
    print("nested", nested(model, [1, 2]))
    acc = 0
    for a, b in it.product(range(2), repeat=2):
        if (gate := a + b) > 1:
            acc += gate
    print("acc", acc, math.floor(2.5))


if __name__ == "__main__":
    main()
    steps = 0
    for x in make_loader(STEPS):
        steps = steps + x[0]
        last = x
    print("module loop", steps, last)
