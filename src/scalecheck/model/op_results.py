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


RESULT_KEYS = ("ret", "errno", "signal")


def is_result(value) -> bool:
    """Whether an operation returned what ok(), error() or fault() make."""
    return isinstance(value, dict) and sum(key in value for key in RESULT_KEYS) == 1


def not_a_result(operation: str, value) -> str:
    return (
        f"operation {operation} returned {value!r}, not a result: "
        "return ok(...), error(...) or fault(...)"
    )
