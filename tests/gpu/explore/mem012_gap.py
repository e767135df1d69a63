# Which blocks are alive at the peak of the old MEM012 loop (12 x 1024, batch 1024), bad variant.
import collections, sys, torch, torch.nn as nn, torch.nn.functional as F
L, H, B, N, C = 12, 1024, 1024, 3, 10
dev = torch.device("cuda")
for dt in (torch.float32, torch.float16):
    lin = nn.Linear(64, 64, device=dev, dtype=dt); lin(torch.randn(32, 64, device=dev, dtype=dt)).sum().backward()
del lin
torch.cuda.synchronize(); torch.cuda.empty_cache()
ws = torch.cuda.memory_allocated()
def mlp(layers, classes):
    mods = []
    for _ in range(layers): mods += [nn.Linear(H, H, device=dev), nn.ReLU()]
    if classes: mods.append(nn.Linear(H, classes, device=dev))
    return nn.Sequential(*mods)
frozen = mlp(L, None); head = mlp(0, C)
x = torch.randn(B, H, device=dev); y = torch.randint(0, C, (B,), device=dev)
opt = torch.optim.SGD(head.parameters(), lr=1e-3)
torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
torch.cuda.reset_peak_memory_stats()
base = torch.cuda.memory_allocated()
for i in range(N):
    opt.zero_grad()
    feats = frozen(x)
    out = head(feats); loss = F.cross_entropy(out, y); loss.backward(); opt.step()
torch.cuda.synchronize()
peak = torch.cuda.max_memory_allocated()
snap = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
print("workspace", ws, "base", base, "peak", peak, "peak-base", peak - base)
tr = snap["device_traces"][0]
live = {}; cur = base; best = -1; best_live = None; best_i = -1
for i, e in enumerate(tr):
    a = e["action"]
    if a == "alloc":
        live[e["addr"]] = e; cur += e["size"]
    elif a == "free_requested":
        if e["addr"] in live: cur -= live.pop(e["addr"])["size"]
    if cur > best: best, best_i, best_live = cur, i, dict(live)
print("replayed peak", best, "event", best_i, "of", len(tr))
def where(e):
    fr = [f for f in e.get("frames", []) if "torch/" not in f["filename"]] or e.get("frames", [])
    return " < ".join("%s:%d %s" % (f["filename"].split("/")[-1], f["line"], f["name"]) for f in fr[:3])
agg = collections.Counter()
for e in best_live.values(): agg[(e["size"], where(e))] += 1
for (sz, w), n in sorted(agg.items(), key=lambda t: -t[0][0] * t[1]):
    print("%3d x %10d  %s" % (n, sz, w))
print("last events before peak:")
for e in tr[max(0, best_i - 12): best_i + 3]:
    print(" ", e["action"], e["size"], where(e)[:150])
