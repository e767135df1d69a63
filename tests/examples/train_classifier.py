"""Image classifier training script with the memory mistakes memlint finds."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def train_one_epoch(model, loader, optimizer, device):
    model.train()
    epoch_loss = 0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        epoch_loss += loss
        torch.cuda.empty_cache()
    return epoch_loss / len(loader)


def validate(model, val_loader, device):
    model.eval()
    correct, total_loss = 0, 0.0
    for images, labels in val_loader:
        images, labels = images.to(device), labels.to(device)
        logits = model(images)
        total_loss += F.cross_entropy(logits, labels)
        correct += (logits.argmax(1) == labels).sum().item()
    return correct / len(val_loader.dataset), total_loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    device = torch.device("cuda")
    model = ConvNet().to(device).half()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_loader = DataLoader(range(100), batch_size=32)
    val_loader = DataLoader(range(100), batch_size=64)
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer, device)
        accuracy, val_loss = validate(model, val_loader, device)
        print(f"epoch {epoch}: train {train_loss.item():.3f} val {accuracy:.3f}")
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
