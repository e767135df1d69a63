"""A training step with two memory mistakes: the editor tests fix them through memlint."""
import torch


def train(model, loader, optimizer):
    total = 0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
        torch.cuda.empty_cache()
    return total


def finetune(model, loader, optimizer):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        torch.cuda.empty_cache()
