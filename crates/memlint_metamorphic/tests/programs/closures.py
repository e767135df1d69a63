"""Scopes that a rename or a move could get wrong: closures, globals, class bodies,
comprehensions, late binding, keyword arguments, exceptions, and generators."""
import functools

counter = 0
registry = {}


def register(name):
    def wrap(fn):
        registry[name] = fn
        return fn
    return wrap


@register("double")
def double(value):
    return value * 2


def bump(step=1):
    global counter
    counter += step
    return counter


class Config:
    width = 4
    depth = width * 2
    names = [f"layer{i}" for i in range(2)]

    def __init__(self, scale=1):
        self.scale = scale
        self.values = [self.width * scale]

    def total(self):
        return sum(self.values) + self.depth

    @staticmethod
    def make(scale):
        return Config(scale=scale)

    @classmethod
    def default(cls):
        return cls(2)


def late_binding(n):
    fns = []
    for i in range(n):
        fns.append(lambda: i)
    return [f() for f in fns]


def generator(loader):
    for x in loader:
        if x % 2:
            yield x * 10


def with_exceptions(items):
    seen = []
    for item in items:
        try:
            seen.append(10 // item)
        except ZeroDivisionError as err:
            seen.append(type(err).__name__)
    return seen


def with_kwargs(model=None, *args, scale=2, **extra):
    return (model, args, scale, sorted(extra.items()))


def uses_partial(x):
    f = functools.partial(with_kwargs, scale=x)
    return f(1, 2, z=3)


def chained():
    a = b = [1]
    a.append(2)
    return b


def walrus(values):
    return [y for v in values if (y := v * 2) > 2], y


def while_loop(limit):
    total = 0
    i = 0
    while i < limit:
        i += 1
        if i % 2 == 0:
            continue
        total += i
    else:
        total += 100
    return total


def main():
    print(registry["double"](3), double(4), bump(), bump(step=2), counter)
    c = Config.make(3)
    print(c.total(), Config.default().total(), Config.names, Config.depth)
    print(late_binding(3), list(generator([1, 2, 3])), with_exceptions([1, 0, 5]))
    print(with_kwargs(1, 2, scale=3, k=4), uses_partial(7), chained(), walrus([1, 2, 3]))
    print(while_loop(7))
    stats = {}
    for key, value in zip("abc", range(3)):
        stats[key] = stats.get(key, 0) + value
    print(sorted(stats.items()))
    total = 0
    for n in range(4):
        for m in range(n):
            total += n * m
    print("total", total)


main()
