"""Stand-in torch (see ../README.md)."""


class TorchVersion(str):
    """As torch.torch_version.TorchVersion: a str subclass (pickles as a class, not a str)."""


__version__ = TorchVersion("0.0+standin")

from . import _C, amp, cuda, nn, optim  # noqa: F401


class OutOfMemoryError(RuntimeError):
    pass


class Tensor:
    def __init__(self, shape, device="cpu", itemsize=4):
        self.shape = tuple(shape)
        self.device = device
        self.addr = None
        if device == "cuda":
            n = itemsize
            for s in self.shape:
                n *= s
            self.addr = cuda._alloc(n)

    def dim(self):
        return len(self.shape)

    def __del__(self):
        if self.addr is not None:
            cuda._free(self.addr)


def is_grad_enabled():
    return True


def empty(*shape, device="cpu"):
    return Tensor(shape, device)
