"""The model language: write an interface's specification like its man page.

    class POSIX(Model):
        def __init__(self):
            self.fname_to_inum = Dict(Filename, Inum).any()
            self.inodes = Map(Inum, Inode).any()

        @operation(src=Filename, dst=Filename)
        def rename(self, src, dst):
            if src not in self.fname_to_inum:
                return error("ENOENT")
            ...

State is created in ``__init__`` with ``T.any()`` (an arbitrary initial value); operations
are methods decorated with ``@operation`` naming their arguments' types; results are
dicts built with ``ok``/``error``/``fault``. Values the implementation may choose freely
are asked for where they are chosen: ``Inum.fresh()`` (an unused inode number),
``fds.any_free_key()`` (any unused fd), ``fds.lowest_free_key()`` (POSIX's lowest fd);
with every key of the domain in use they take a key above it (docs/analyzer.md).
"""

from z3 import And, If, Implies, Not, Or

from scalecheck.engine.types import Array, Bool, Dict, Enum, Int, Key, Map, Struct, Uninterpreted
from scalecheck.model.op_results import Chosen, error, fault, ok

__all__ = [
    "And",
    "Array",
    "Bool",
    "Chosen",
    "Dict",
    "Enum",
    "If",
    "Implies",
    "Int",
    "Key",
    "Map",
    "Model",
    "Not",
    "Or",
    "Struct",
    "Uninterpreted",
    "error",
    "fault",
    "ok",
    "operation",
]


class Model:
    """Base class of interface models.

    Optional hook for test generation: ``setup_constraints(reads)`` returns extra
    constraints, over the model's reads of its initial state, that make a generated initial
    state buildable on a real system. How a test is written for a target (fd numbers,
    addresses) is the target's binding, not the model's (scalecheck.binding).
    """

    def setup_constraints(self, reads) -> list:
        return []

    @classmethod
    def operations(cls) -> dict:
        """The operations, in the order the model declares them."""
        found = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                if hasattr(member, "argument_types"):
                    found[name] = member
        return found


def operation(**argument_types):
    """Mark a method as an interface operation whose arguments have the given types."""

    def mark(method):
        method.argument_types = argument_types
        return method

    return mark
