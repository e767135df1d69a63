"""PyTorch's own figures for the MLP `memlint verify --from-snapshot` chose (run on a GPU machine).

    python3 mlp_check.py REPORT.json

Reads the workload from memlint verify's JSON report and builds the same model in PyTorch
(`layers` x Linear(hidden, hidden) + ReLU, then Linear(hidden, 10)), then measures it the way
memlint measured the recorded run and its reference loop: parameter bytes (sum of
p.numel() * p.element_size()), and, in the third step of `loss = F.cross_entropy(model(x), y);
loss.backward(); optimizer.step()` (gradients already exist), the highest allocated up to the
loss minus memory_allocated() before the step (activations) and over the whole step (rise).
Prints one JSON line with memlint's figures beside PyTorch's."""
import json
import sys

import torch
import torch.nn.functional as F
from torch import nn

report = json.load(open(sys.argv[1]))
w, s = report["workload"], report["from_snapshot"]
dtype = {"fp32": torch.float32, "fp16": torch.float16}[w["dtype"]]
layers = []
for _ in range(w["layers"]):
    layers += [nn.Linear(w["hidden"], w["hidden"]), nn.ReLU()]
model = nn.Sequential(*layers, nn.Linear(w["hidden"], w["classes"])).to("cuda", dtype)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
params = sum(p.numel() * p.element_size() for p in model.parameters())
for step in range(3):
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    x = torch.randn(w["batch"], w["hidden"], device="cuda", dtype=dtype)
    y = torch.randint(0, w["classes"], (w["batch"],), device="cuda")
    loss = F.cross_entropy(model(x), y)
    act = torch.cuda.max_memory_allocated() - before
    loss.backward()
    opt.step()
    del x, y, loss
    torch.cuda.synchronize()
    rise = torch.cuda.max_memory_allocated() - before
print(json.dumps({
    "snapshot": s["file"],
    "workload": [w["layers"], w["hidden"], w["batch"], w["dtype"]],
    "read_from_snapshot": {"parameter_bytes": s["read"]["parameter_bytes"], "activation_bytes": s["read"]["activation_bytes"], "rise_bytes": s["read"]["rise_bytes"]},
    "memlint_reference": s["reference"],
    "pytorch_same_mlp": {"parameter_bytes": params, "activation_bytes": act, "rise_bytes": rise},
}))
