"""The same training loop written the way memlint wants it: no findings."""
import torch
import torch.nn.functional as F


def train_one_epoch(model, loader, optimizer, scaler, device):
    model.train()
    epoch_loss = 0.0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        epoch_loss += loss.item()
    return epoch_loss / len(loader)


@torch.no_grad()
def validate(model, val_loader, device):
    model.eval()
    correct = 0
    for images, labels in val_loader:
        logits = model(images.to(device))
        correct += (logits.argmax(1) == labels.to(device)).sum().item()
    return correct / len(val_loader.dataset)


def fit(model, train_loader, val_loader, epochs):
    device = torch.device("cuda")
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        train_one_epoch(model, train_loader, optimizer, scaler, device)
        validate(model, val_loader, device)
        torch.cuda.empty_cache()
