"""An id table: alloc stores a value under a free id of the implementation's choice,
lookup reads it, free releases it (the library behind an opaque handle beside it)."""

from scalecheck.model import Dict, Int, Model, error, ok, operation

Id = Int(0, 3)
Value = Int(0, 9)


class IdTab(Model):
    def __init__(self):
        self.slots = Dict(Id, Value).any()

    @operation(value=Value)
    def alloc(self, value):
        new = self.slots.any_free_key()
        self.slots[new] = value
        return ok(new)

    @operation(id=Id)
    def lookup(self, id):
        if id not in self.slots:
            return error("ENOENT")
        return ok(self.slots[id])

    @operation(id=Id)
    def free(self, id):
        if id not in self.slots:
            return error("ENOENT")
        del self.slots[id]
        return ok()
