"""Cases where a careless rewrite would change behaviour: a global set by a loop and read by a
function it calls, exceptions out of a loop body, conditional bindings, generators that
outlive their loop, shadowed builtins, context managers, `del`, and name lookups in classes."""
import contextlib
import itertools

lr = 0.0
log = []


def read_lr():
    return lr


class Suppressing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


class Net:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


def build(k=2):
    return Net(k)


def gens(n):
    out = []
    for i in range(n):
        out.append(i * j for j in range(2))
    return [list(g) for g in out]


def partial_loop(items):
    done = []
    try:
        for item in items:
            done.append(item)
            if item == 3:
                raise ValueError(item)
    except ValueError:
        pass
    return done


def suppressed_loop(items):
    total = 0
    with Suppressing():
        for item in items:
            total += item
            if item > 1:
                raise KeyError(item)
    return total


def conditional(flag, xs):
    if flag:
        net = build(3)
    for x in xs:
        if flag:
            log.append(net(x))
    return log[-1] if log else None


def deleting(xs):
    seen = []
    for x in xs:
        tmp = x + 1
        seen.append(tmp)
        del tmp
    return seen


def nullcontext_loop(model, xs):
    outs = []
    with contextlib.nullcontext():
        for x in xs:
            outs.append(model(x))
    return outs


def two_nets(x):
    enc = build()
    dec = build(k=5)
    for _ in range(2):
        x = dec(enc(x))
    return x, enc.k, dec.k


class Holder:
    scale = 3
    items = [i * 2 for i in range(scale)]

    def run(self, xs):
        model = build(self.scale)
        return [model(x) for x in xs]


def count_calls(xs):
    counter = itertools.count()
    for x in xs:
        if x:
            next(counter)
    return next(counter)


def main():
    global lr
    for epoch in range(3):
        lr = epoch * 0.5
        log.append(read_lr())
    print(log)
    print(gens(3), partial_loop([1, 2, 3, 4]), suppressed_loop([1, 2, 3]))
    print(conditional(False, [1]), conditional(True, [1, 2]), deleting([1, 2]))
    print(nullcontext_loop(build(4), [1, 2]), two_nets(1), Holder().run([1, 2]), Holder.items)
    print(count_calls([0, 1, 1]))


for step in range(2):
    lr = step
    log.append(read_lr())
main()
