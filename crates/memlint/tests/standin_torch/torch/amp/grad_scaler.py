class GradScaler:
    """Skips the optimizer's step the first `skip` times (inf gradients)."""

    def __init__(self, skip=0):
        self.skip = skip

    def step(self, optimizer):
        if self.skip > 0:
            self.skip -= 1
            return None
        return optimizer.step()
