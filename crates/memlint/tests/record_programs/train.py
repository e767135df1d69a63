"""A training loop on the stand-in torch: `train.py STEPS [EXIT_STATUS] [--oom] [--child]`."""
import subprocess
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        self.fc = torch.nn.Linear(32, 256)

    def forward(self, x):
        self.h = torch.empty(x.shape[0], 256, device="cuda")
        return self.h


def main():
    steps = int(sys.argv[1])
    model = Net()
    weights = torch.empty(512, 512, device="cuda")  # noqa: F841
    opt = torch.optim.Optimizer()
    scaler = torch.amp.grad_scaler.GradScaler(skip=1)
    if "--child" in sys.argv:
        # a worker that also uses CUDA: the first process to claim the recording keeps it
        subprocess.run([sys.executable, __file__, "1", "0"], check=True)
    try:
        for i in range(steps):
            x = torch.empty(16, 32, device="cuda")
            out = model(x)  # noqa: F841
            scaler.step(opt)
            print("step", i, flush=True)
        if "--oom" in sys.argv:
            torch.cuda._oom(1 << 40)
    finally:
        print("finally ran", flush=True)
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)


main()
