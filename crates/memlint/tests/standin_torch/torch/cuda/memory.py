_history = None


def _record_memory_history(**kwargs):
    global _history
    _history = kwargs


def _snapshot():
    from . import _trace

    return {"segments": [], "device_traces": [list(_trace)], "allocator_settings": {"expandable_segments": False}}
