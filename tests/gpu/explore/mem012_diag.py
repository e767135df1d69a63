# Live blocks at the peak of the documented MEM012 loop (bad and fixed), 4 x 2048 batch 256.
import collections, sys, torch, torch.nn as nn, torch.nn.functional as F
L, H, B, N = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), 3
dev = torch.device("cuda")
for dt in (torch.float32, torch.float16):
    lin = nn.Linear(64, 64, device=dev, dtype=dt); lin(torch.randn(32, 64, device=dev, dtype=dt)).sum().backward()
del lin
torch.cuda.synchronize(); torch.cuda.empty_cache()
def mlp(layers):
    mods = []
    for _ in range(layers): mods += [nn.Linear(H, H, device=dev), nn.ReLU()]
    return nn.Sequential(*mods)
def where(e):
    fr = [f for f in e.get("frames", []) if "torch/" not in f["filename"]] or e.get("frames", [])
    return " < ".join("%s:%d %s" % (f["filename"].split("/")[-1], f["line"], f["name"]) for f in fr[:2])
for bad in (True, False):
    generator = nn.Sequential(nn.Linear(H, H, device=dev))
    torch.cuda.synchronize(); torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
    torch.cuda.reset_peak_memory_stats()
    vgg = mlp(L).eval()
    if not bad: vgg.requires_grad_(False)
    optimizer = torch.optim.Adam(generator.parameters())
    for i in range(N):
        x = torch.randn(B, H, device=dev); target = torch.randn(B, H, device=dev)
        fake = generator(x)
        loss = F.mse_loss(vgg(fake), vgg(target))
        loss.backward()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    tr = snap["device_traces"][0]
    live = {}; cur = base; best = -1; best_live = None; best_i = -1
    for i, e in enumerate(tr):
        if e["action"] == "alloc": live[e["addr"]] = e; cur += e["size"]
        elif e["action"] == "free_requested" and e["addr"] in live: cur -= live.pop(e["addr"])["size"]
        if cur > best: best, best_i, best_live = cur, i, dict(live)
    print("== bad" if bad else "== fixed", "base", base, "peak", peak, "replayed", best, "event", best_i, "of", len(tr))
    agg = collections.Counter()
    for e in best_live.values(): agg[(e["size"], where(e))] += 1
    for (sz, w), n in sorted(agg.items(), key=lambda t: -t[0][0] * t[1]): print("%3d x %10d  %s" % (n, sz, w))
    print("events before peak:")
    for e in tr[max(0, best_i - 25): best_i + 2]: print(" ", e["action"], e["size"], where(e)[:120])
    del vgg, optimizer, generator, x, target, fake, loss
