from .module import Module


class Linear(Module):
    """A layer with weights, as far as a program's text says: the stand-in keeps none."""

    def __init__(self, in_features, out_features):
        self.in_features, self.out_features = in_features, out_features

    def forward(self, x):
        return x
