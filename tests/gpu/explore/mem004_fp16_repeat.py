"""How stable PyTorch's own MEM004 fp16 step-time cost is: the documented loop (train) and the
`del outputs, loss` form, fixed and with empty_cache, timed as verify_torch.py times them (3 warm-up
steps, median of 5 repetitions of 20 steps), repeated ROUNDS times in one process."""
import statistics, sys, time
import torch, torch.nn as nn

H, L, B, N, C = (int(v) for v in (sys.argv[1:6] if len(sys.argv) > 5 else (4096, 8, 512, 20, 10)))
ROUNDS = 5
dev = torch.device("cuda")
crit = nn.CrossEntropyLoss()

def mlp(dt):
    mods = []
    for _ in range(L):
        mods += [nn.Linear(H, H, device=dev, dtype=dt), nn.ReLU()]
    mods.append(nn.Linear(H, C, device=dev, dtype=dt))
    return nn.Sequential(*mods)

def loader(dt, steps=N):
    for _ in range(steps):
        yield torch.randn(B, H, device=dev, dtype=dt), torch.randint(0, C, (B,), device=dev)

def train(model, opt, it, empty):
    for x, y in it:
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if empty:
            torch.cuda.empty_cache()

def dele(model, opt, it, empty):
    for x, y in it:
        outputs = model(x)
        loss = crit(outputs, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        del outputs, loss
        if empty:
            torch.cuda.empty_cache()

def timed(fn, dt, empty):
    model = mlp(dt); opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    fn(model, opt, loader(dt, 3), empty)
    times = []
    for _ in range(5):
        it = loader(dt)
        torch.cuda.synchronize(); t0 = time.perf_counter()
        fn(model, opt, it, empty)
        torch.cuda.synchronize(); times.append((time.perf_counter() - t0) * 1e3 / N)
    del model, opt
    torch.cuda.empty_cache()
    return statistics.median(times)

print(f"workload {L}x{H} batch {B}, {N} steps; torch {torch.__version__}, {torch.cuda.get_device_name()}")
for dt in (torch.float32, torch.float16):
    for name, fn in (("train", train), ("del", dele)):
        costs = []
        for _ in range(ROUNDS):
            f = timed(fn, dt, False); b = timed(fn, dt, True)
            costs.append((b / f - 1) * 100)
        print(f"{str(dt):14s} {name:6s} step-time cost of empty_cache per round: "
              + " ".join(f"{c:+.0f}%" for c in costs) + f"   (spread {max(costs) - min(costs):.0f} points)")
