"""Where PyTorch's step time goes when torch.cuda.empty_cache() runs every step (issue 15, MEM004
fp16 at 8x4096 batch 512): the documented loop in fp32 and fp16, with and without the call, timed
as verify_torch.py times it, then profiled (CUDA runtime API and kernels per step)."""
import statistics, time, sys
import torch, torch.nn as nn
from torch.profiler import profile, ProfilerActivity

H, L, B, N, C = 4096, 8, 512, 20, 10
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

def loop(model, opt, it, empty, sync_instead=False):
    for x, y in it:
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if empty:
            torch.cuda.empty_cache()
        elif sync_instead:
            torch.cuda.synchronize()

def timed(dt, empty, sync_instead=False):
    model = mlp(dt); opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loop(model, opt, loader(dt, 3), empty, sync_instead)
    times = []
    s0 = torch.cuda.memory_stats().get("segment.all.allocated", 0)
    for _ in range(5):
        it = loader(dt)
        torch.cuda.synchronize(); t0 = time.perf_counter()
        loop(model, opt, it, empty, sync_instead)
        torch.cuda.synchronize(); times.append((time.perf_counter() - t0) * 1e3 / N)
    s1 = torch.cuda.memory_stats().get("segment.all.allocated", 0)
    return statistics.median(times), (s1 - s0) / (5 * N)

for dt in (torch.float32, torch.float16):
    f = timed(dt, False); b = timed(dt, True); s = timed(dt, False, True)
    print(f"{dt}: fixed {f[0]:.2f} ms ({f[1]} mallocs/step); empty_cache {b[0]:.2f} ms ({b[1]} mallocs/step) "
          f"+{(b[0]/f[0]-1)*100:.0f}%; synchronize instead {s[0]:.2f} ms +{(s[0]/f[0]-1)*100:.0f}%")
    torch.cuda.empty_cache()

for empty in (True, False):
    dt = torch.float16
    model = mlp(dt); opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loop(model, opt, loader(dt, 3), empty)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        loop(model, opt, loader(dt, 10), empty)
        torch.cuda.synchronize()
    print(f"\n=== fp16, empty_cache={empty}: per step (10 steps), by self CPU time")
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:18]
    for e in rows:
        print(f"{e.key[:60]:60s} calls {e.count/10:6.1f}  self cpu {e.self_cpu_time_total/10/1000:7.3f} ms  device {e.self_device_time_total/10/1000:7.3f} ms")
    kern = sum(e.self_device_time_total for e in prof.key_averages()) / 10 / 1000
    print(f"device time per step (all kernels): {kern:.3f} ms")
    # gaps: timeline of kernels, idle between them
    evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    evs.sort(key=lambda e: e.time_range.start)
    idle = sum(max(0, b.time_range.start - a.time_range.end) for a, b in zip(evs, evs[1:]))
    print(f"GPU idle between kernels per step: {idle/10/1000:.3f} ms over {len(evs)/10:.0f} kernels/step")
