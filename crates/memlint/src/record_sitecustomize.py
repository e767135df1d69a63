"""memlint record's recorder, loaded as `sitecustomize` from a temporary PYTHONPATH entry.

It does nothing unless MEMLINT_RECORD_DIR names a folder (memlint record sets it). Then:
- when the program imports torch, it registers global hooks (the batch size seen by the forward
  passes, optimizer steps) and asks torch to call it when CUDA is initialized
  (`torch.cuda._lazy_call`), so nothing of CUDA starts earlier than the program starts it;
- at CUDA initialization, the first process to claim the recording (a file created with
  O_EXCL: DataLoader workers and launchers leave it to the process that uses CUDA) starts
  PyTorch's memory history and attaches an out-of-memory observer;
- it writes the snapshot (the dict `torch.cuda.memory._dump_snapshot` writes, with a
  `memlint_record` key added) at the first out-of-memory error, after MEMLINT_RECORD_STEPS
  optimizer steps (then it raises SystemExit(0): the program stops cleanly, `finally` blocks
  and atexit handlers run), and at exit;
- it writes what happened to status-PID.json in MEMLINT_RECORD_DIR, for memlint;
- finally it imports the `sitecustomize` this one hides, if there is one.
"""
import os
import sys


def _memlint_record():
    rec_dir = os.environ.get("MEMLINT_RECORD_DIR")
    if not rec_dir or not os.path.isdir(rec_dir):
        return
    import json

    pid = os.getpid()
    out = os.environ.get("MEMLINT_RECORD_OUT", os.path.join(rec_dir, "snapshot.pickle"))
    try:
        steps_limit = int(os.environ.get("MEMLINT_RECORD_STEPS") or 0)
    except ValueError:
        steps_limit = 0
    try:
        max_entries = int(os.environ.get("MEMLINT_RECORD_MAX_ENTRIES") or 100000)
    except ValueError:
        max_entries = 100000
    status_path = os.path.join(rec_dir, "status-%d.json" % pid)
    st = {
        "pid": pid,
        "torch_imported": False,
        "cuda_initialized": False,
        "recording": False,
        "steps": 0,
        "ooms": 0,
        "dumps": [],
        "errors": [],
    }
    state = {"hooked": False, "stopped": False, "oom_dumped": False, "root": None, "pending": False, "seen": 0, "handles": []}
    leading = {}

    def save():
        tmp = status_path + ".tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(st, f)
            os.replace(tmp, status_path)
        except OSError:
            pass

    def error(where, e):
        st["errors"].append("%s: %r" % (where, e))
        save()

    def batch():
        if not leading:
            return None
        with_grad = {k[0]: v for k, v in leading.items() if k[1]}
        pool = with_grad or {}
        if not pool:
            for (b, _), v in leading.items():
                pool[b] = pool.get(b, 0) + v
        return max(sorted(pool), key=lambda b: pool[b])

    def dump(reason):
        import pickle

        import torch

        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        dev = torch.cuda.current_device()
        info = {
            "reason": reason,
            "steps": st["steps"],
            "batch": batch(),
            "batch_sizes": sorted([int(b), bool(g), int(n)] for (b, g), n in leading.items()),
            "device": int(dev),
            "max_memory_allocated": torch.cuda.max_memory_allocated(dev),
            "max_memory_reserved": torch.cuda.max_memory_reserved(dev),
            "memory_allocated": torch.cuda.memory_allocated(dev),
            # plain str: torch.__version__ is a TorchVersion, which would pickle as a class
            "torch": str(torch.__version__),
        }
        snap["memlint_record"] = info
        folder = os.path.dirname(out)
        if folder:
            os.makedirs(folder, exist_ok=True)
        tmp = "%s.tmp-%d" % (out, pid)
        with open(tmp, "wb") as f:
            pickle.dump(snap, f)
        os.replace(tmp, out)
        st["dumps"].append(dict(info, out=out))
        save()

    def on_oom(device, alloc, device_allocated, device_free):
        st["ooms"] += 1
        if state["oom_dumped"]:
            save()
            return
        state["oom_dumped"] = True
        try:
            dump("oom")
        except Exception as e:  # never let the observer raise inside the allocator
            error("snapshot at out-of-memory", e)

    def on_exit():
        if state["stopped"] or not st["recording"]:
            return
        try:
            dump("exit")
        except Exception as e:
            error("snapshot at exit", e)

    def on_cuda_init():
        import atexit

        import torch

        st["cuda_initialized"] = True
        try:
            fd = os.open(os.path.join(rec_dir, "claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.write(fd, str(pid).encode())
            os.close(fd)
        except FileExistsError:
            st["skipped"] = "another process of the program records"
            save()
            return
        try:
            torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=max_entries)
            st["recording"] = True
        except Exception as e:
            error("starting the memory history", e)
            return
        try:
            torch._C._cuda_attach_out_of_memory_observer(on_oom)
        except Exception as e:
            error("attaching the out-of-memory observer", e)
        atexit.register(on_exit)
        save()

    def count_step():
        st["steps"] += 1
        if steps_limit and st["steps"] >= steps_limit and st["recording"] and not state["stopped"]:
            state["stopped"] = True
            try:
                dump("steps")
            except Exception as e:
                error("snapshot after %d steps" % steps_limit, e)
            sys.stdout.flush()
            raise SystemExit(0)
        if st["steps"] <= 3 or st["steps"] % 100 == 0:
            save()

    def on_torch(torch):
        if state["hooked"]:
            return
        state["hooked"] = True
        st["torch_imported"] = True
        st["torch"] = str(getattr(torch, "__version__", "?"))
        try:
            from torch.nn.modules import module as nn_module

            def pre(module, args):
                if state["root"] is None:
                    state["root"] = module
                    state["pending"] = True
                if state["pending"]:
                    for a in args:
                        if isinstance(a, torch.Tensor) and a.dim() >= 1:
                            key = (int(a.shape[0]), bool(torch.is_grad_enabled()))
                            leading[key] = leading.get(key, 0) + 1
                            state["pending"] = False
                            state["seen"] += 1
                            break
                if state["seen"] >= 1000:
                    for h in state["handles"]:
                        h.remove()
                    state["handles"] = []

            def post(module, args, output):
                if module is state["root"]:
                    state["root"] = None
                    state["pending"] = False

            state["handles"].append(nn_module.register_module_forward_pre_hook(pre))
            try:
                state["handles"].append(nn_module.register_module_forward_hook(post, always_call=True))
            except TypeError:
                state["handles"].append(nn_module.register_module_forward_hook(post))
        except Exception as e:
            error("forward hooks", e)
        try:
            from torch.optim import optimizer as opt_mod

            opt_mod.register_optimizer_step_post_hook(lambda opt, args, kwargs: count_step())
        except Exception as e:
            error("optimizer hook", e)
        try:
            from torch.amp import grad_scaler

            original = grad_scaler.GradScaler.step

            def step(self, optimizer, *args, **kwargs):
                before = st["steps"]
                result = original(self, optimizer, *args, **kwargs)
                if st["steps"] == before:  # skipped for inf/NaN gradients: still a step
                    count_step()
                return result

            grad_scaler.GradScaler.step = step
        except Exception as e:
            error("GradScaler hook", e)
        try:
            torch.cuda._lazy_call(on_cuda_init)
        except Exception as e:
            error("waiting for CUDA", e)
        save()

    class _TorchFinder:
        """Runs on_torch once `import torch` has executed torch/__init__.py."""

        def find_spec(self, name, path=None, target=None):
            if name != "torch" or state["hooked"]:
                return None
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            loader = spec.loader
            original = loader.exec_module

            def exec_module(module):
                original(module)
                if getattr(module, "__name__", None) == "torch":
                    try:
                        on_torch(module)
                    except Exception as e:
                        error("after importing torch", e)

            try:
                loader.exec_module = exec_module
            except (AttributeError, TypeError):
                return spec
            return spec

    save()
    if "torch" in sys.modules:
        on_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchFinder())


def _memlint_chain():
    """Imports the sitecustomize this file hides (the next one on sys.path), as site.py would."""
    here = os.path.dirname(os.path.abspath(__file__))
    mine = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        import importlib

        try:
            importlib.import_module("sitecustomize")
        except ImportError as e:
            if e.name != "sitecustomize":
                raise
            if mine is not None:
                sys.modules["sitecustomize"] = mine
    except Exception:
        import traceback

        print("Error in sitecustomize (run after memlint record's):", file=sys.stderr)
        traceback.print_exc()
        sys.path[:] = saved


try:
    _memlint_record()
except Exception as _e:  # the program runs whatever happens here
    print("memlint record: the recorder could not start: %r" % (_e,), file=sys.stderr)
_memlint_chain()
