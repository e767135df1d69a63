import traceback

from . import memory  # noqa: F401

_initialized = False
_queued = []
_trace = []
_live = {}
_state = {"next": 0x7F0000000000, "time": 1_000_000, "allocated": 0, "peak": 0}


def _lazy_call(fn):
    if _initialized:
        fn()
    else:
        _queued.append(fn)


def _lazy_init():
    global _initialized
    if _initialized:
        return
    _initialized = True
    for fn in _queued:
        fn()


def init():
    _lazy_init()


def synchronize():
    pass


def current_device():
    return 0


def _frames():
    return [{"filename": f.filename, "line": f.lineno, "name": f.name} for f in reversed(traceback.extract_stack()[:-2])]


def _event(action, addr, size):
    _state["time"] += 5
    if memory._history is not None:
        _trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": _state["time"], "frames": _frames()})


def _alloc(n):
    _lazy_init()
    block = max(512, -(-n // 512) * 512)
    addr = _state["next"]
    _state["next"] += block
    _live[addr] = (n, block)
    _state["allocated"] += block
    _state["peak"] = max(_state["peak"], _state["allocated"])
    _event("alloc", addr, n)
    return addr


def _free(addr):
    n, block = _live.pop(addr)
    _state["allocated"] -= block
    _event("free_requested", addr, n)
    _event("free_completed", addr, n)


def _oom(n):
    from .. import OutOfMemoryError, _C

    _event("oom", 0, n)
    for fn in _C._oom_observers:
        fn(0, n, 0, 0)
    raise OutOfMemoryError("CUDA out of memory (stand-in)")


def max_memory_allocated(device=None):
    return _state["peak"]


def max_memory_reserved(device=None):
    return _state["peak"]


def memory_allocated(device=None):
    return _state["allocated"]
