"""Results of operations, as the test file writes them (see docs/format-tests.md)."""


class Chosen:
    """A result value the implementation picks (an inode number): compared between the
    two orders like any value, but written as ``"*"`` in tests, which never check it."""

    def __init__(self, value):
        self.value = value


def ok(ret=0, **fields) -> dict:
    return {"ret": ret, **fields}


def error(errno: str) -> dict:
    return {"errno": errno}


def fault(signal: str) -> dict:
    return {"signal": signal}
