"""An out-of-memory error caught under torch.cuda.set_per_process_memory_fraction:
tensors kept in a list until an allocation no longer fits."""
import torch
from _record import record

LIMIT = 256 * 1024 * 1024


def init():
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(LIMIT / total)
    return {"kept": [], "oom": None}


def step(i, s):
    try:
        while True:
            s["kept"].append(torch.empty(24 * 1024 * 1024, dtype=torch.uint8, device="cuda"))  # snapshot: hoard
    except torch.cuda.OutOfMemoryError as e:
        s["oom"] = str(e).splitlines()[0]
        s["kept_at_oom"] = len(s["kept"])
        s["kept"].clear()


state = record("oom_caught", init, step, iters=1)
print("oom:", state["oom"], "kept:", state["kept_at_oom"])
