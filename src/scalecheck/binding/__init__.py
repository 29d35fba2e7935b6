"""One definition per operation: a model declares each operation once (its ``@operation``
signature), and a target's binding says how those operations become its calls.

The argument schema of every op is read from the model. A binding adds only what is the
target's own: which argument picks the calling process, the target's diagnostic ops, the
constants its test files carry, and how a concrete test is written in its terms
(``describe``). The bindings that encode a model's tests for a target are found by
``for_model``; a model without one gets the generic binding, which writes the model's
state, arguments and results as they are (what user-space targets read).
"""

from scalecheck.binding import linux_posix
from scalecheck.binding.generic import Binding, describe_as_model, op_arguments
from scalecheck.interfaces.posix import Posix

__all__ = ["Binding", "describe_as_model", "for_model", "op_arguments"]

# Models whose tests are written for a target's encoding rather than as the model's values.
ENCODINGS = {Posix: linux_posix.BINDING}


def for_model(model_cls) -> Binding:
    """The binding that writes this model's tests: its registered one, else the generic.
    A model is matched by where it is defined, so a copy loaded from a file path is the
    shipped model too."""
    for model, encoding in ENCODINGS.items():
        if (model.__module__, model.__qualname__) == (model_cls.__module__, model_cls.__qualname__):
            return encoding
    return Binding(model_cls)
