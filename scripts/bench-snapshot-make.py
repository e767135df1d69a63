"""Builds a large memory snapshot for scripts/bench-snapshot.sh by replicating the trace
of a recorded one (tests/snapshot/data) with shifted addresses and times.

usage: bench-snapshot-make.py RECORDED.pickle OUT.pickle SIZE_MB

The file is written as a stream (nothing of its size is held in memory): a protocol-4
pickle without memo (Pickler.fast), so every event carries its own frames, the way a
pickle of unshared objects does."""
import io
import os
import pickle
import sys

src, out, size_mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
snap = pickle.load(open(src, "rb"))
events = snap["device_traces"][0]
t0, t1 = events[0]["time_us"], events[-1]["time_us"]
span = t1 - t0 + 1000
SHIFT = 1 << 34


def body(obj):
    f = io.BytesIO()
    p = pickle.Pickler(f, protocol=4)
    p.fast = True
    p.dump(obj)
    b = f.getvalue()
    # strip PROTO (2 bytes), an optional FRAME (9 bytes) and STOP
    b = b[2:]
    if b[:1] == b"\x95":
        b = b[9:]
    return b[:-1]


def key(s):
    return body(s)


target = size_mb * 1024 * 1024
with open(out, "wb") as f:
    f.write(b"\x80\x04}(")
    f.write(key("device_traces") + b"]](")
    written, k, batch = 0, 0, 0
    while written < target:
        for e in events:
            e2 = dict(e)
            if "addr" in e2:
                e2["addr"] = e["addr"] + k * SHIFT
            e2["time_us"] = e["time_us"] + k * span
            b = body(e2)
            f.write(b)
            written += len(b)
            batch += 1
            if batch == 1000:
                f.write(b"e(")
                batch = 0
        k += 1
    f.write(b"ea")  # APPENDS the last batch, APPEND the device's list to device_traces
    last = k - 1
    segs = []
    for s in snap["segments"]:
        s = dict(s)
        s["address"] += last * SHIFT
        s["blocks"] = [dict(b, address=b["address"] + last * SHIFT) for b in s["blocks"]]
        segs.append(s)
    f.write(key("segments") + body(segs))
    f.write(key("allocator_settings") + body(snap["allocator_settings"]))
    f.write(b"u.")
print(f"{out}: {os.path.getsize(out) / 2**20:.0f} MiB, {k} copies of {len(events)} events")
