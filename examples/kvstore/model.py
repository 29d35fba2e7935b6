"""A key-value store: put, get and delete on a table of small integer keys.

put on two different keys commutes (each writes its own entry); get and delete of one key
commute only when the key is absent, and so on: the analyzer finds every such condition.
"""

from scalecheck.model import Dict, Int, Key, Model, error, ok, operation

KeyId = Key("KeyId", 4)
Value = Int(0, 9)


class KVStore(Model):
    def __init__(self):
        self.table = Dict(KeyId, Value).any()

    @operation(key=KeyId, value=Value)
    def put(self, key, value):
        self.table[key] = value
        return ok()

    @operation(key=KeyId)
    def get(self, key):
        if key not in self.table:
            return error("ENOENT")
        return ok(self.table[key])

    @operation(key=KeyId)
    def delete(self, key):
        if key not in self.table:
            return error("ENOENT")
        del self.table[key]
        return ok()
