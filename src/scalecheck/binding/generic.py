"""A binding (how one target runs the operations of one model), and the generic
encoding that writes a model's state, arguments and results as they are."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scalecheck.common.errors import UserError
from scalecheck.model import Model


def op_arguments(model_cls) -> dict[str, tuple[str, ...]]:
    """op -> its argument names, in the order its ``@operation`` declares them."""
    return {name: tuple(method.argument_types) for name, method in model_cls.operations().items()}


def describe_as_model(ops, snapshot, args, results, label):
    """The generic encoding: the model's initial state, arguments and results as they are.

    ``snapshot``: {state name: {key: {field: value}}} of the initial state the test needs
    (uninterpreted values already replaced by small labels); ``args``: per call
    {name: value}; ``results``: {"AB": [A, B], "BA": [A, B]} with raw values;
    ``label(kind, raw)`` maps a raw uninterpreted value to its label."""
    calls = [
        {"op": op, "proc": number, "args": call_args}
        for number, (op, call_args) in enumerate(zip(ops, args, strict=True))
    ]
    return snapshot, calls, {"ab": results["AB"], "ba": results["BA"]}


@dataclass(frozen=True)
class Binding:
    """How one target runs the operations of one model.

    ``process_arg``: the argument (if any) that names the calling process; it becomes the
    call's ``proc`` and is not passed as an argument. ``extra_ops``: the target's own
    diagnostic ops (names start with "_") and their arguments. ``constants``: written into
    the tests file's header. ``describe``: writes one concrete test in the target's terms
    (signature of ``describe_as_model``)."""

    model: type[Model]
    process_arg: str | None = None
    extra_ops: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    constants: Mapping[str, int] = field(default_factory=dict)
    describe: Callable = describe_as_model

    def __post_init__(self):
        name = self.model.__name__
        ops = op_arguments(self.model)
        if not ops:
            raise UserError(f"binding of model {name}: the model declares no @operation")
        for op in self.extra_ops:
            if not op.startswith("_") or op in ops:
                raise UserError(
                    f"binding of model {name}: extra op {op!r} must start with '_' "
                    "and not be one of the model's operations"
                )
        if self.process_arg and not any(self.process_arg in args for args in ops.values()):
            raise UserError(
                f"binding of model {name}: process argument {self.process_arg!r} "
                "is an argument of none of its operations"
            )

    def call_arguments(self) -> dict[str, tuple[str, ...]]:
        """op -> the arguments a call of it carries, in the model's order (the process
        argument left out), the target's own ops included."""
        return {
            **{
                op: tuple(arg for arg in args if arg != self.process_arg)
                for op, args in op_arguments(self.model).items()
            },
            **self.extra_ops,
        }

    def argument_type(self, op: str, arg: str):
        """The model's type of one argument (None for the target's own ops)."""
        method = self.model.operations().get(op)
        return method.argument_types[arg] if method else None
