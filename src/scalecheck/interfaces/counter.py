"""A reference counter: whether ``dec`` and ``iszero`` commute depends on its value."""

from scalecheck.model import Int, Model, error, ok, operation


class RefCounter(Model):
    def __init__(self):
        self.count = Int(lo=0).any()

    @operation()
    def inc(self):
        self.count += 1
        return ok()

    @operation()
    def dec(self):
        if self.count == 0:
            return error("EINVAL")
        self.count -= 1
        return ok()

    @operation()
    def iszero(self):
        return ok(self.count == 0)
