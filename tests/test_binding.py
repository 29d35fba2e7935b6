"""The binding layer: every op's argument schema comes from the model's @operation
signature, targets add only their own encoding, and a malformed binding is refused with
one line. No VM, no QEMU."""

import re

import pytest

from scalecheck import binding
from scalecheck.binding import abi, linux_posix
from scalecheck.common.errors import UserError
from scalecheck.interfaces.counter import RefCounter
from scalecheck.interfaces.posix import Posix
from scalecheck.run.linux import guest_render


def test_schema_is_the_models_signature():
    schema = binding.op_arguments(Posix)
    assert schema["open"] == ("pn", "creat", "excl", "trunc", "anyfd", "pid")
    assert schema["mmap"] == ("anon", "writable", "fixed", "va", "fd", "off", "pid")
    assert binding.op_arguments(RefCounter) == {"inc": (), "dec": (), "iszero": ()}


def test_linux_op_args_are_derived_from_the_model():
    model_ops = binding.op_arguments(Posix)
    for op, args in guest_render.OP_ARGS.items():
        if op.startswith("_"):
            assert op in linux_posix.BINDING.extra_ops
        else:
            assert args == tuple(a for a in model_ops[op] if a != "pid")
    assert set(model_ops) <= set(guest_render.OP_ARGS)
    assert {"pn", "old", "new", "src", "dst"} == guest_render.NAME_ARGS


def test_models_find_their_binding():
    assert binding.for_model(Posix) is linux_posix.BINDING
    generic = binding.for_model(RefCounter)
    assert generic.describe is binding.describe_as_model and not generic.constants
    assert linux_posix.BINDING.constants["fd_base"] == abi.value("FD_BASE")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"extra_ops": {"open": ()}}, "extra op 'open'"),
        ({"extra_ops": {"hang": ()}}, "must start with '_'"),
        ({"process_arg": "proc"}, "process argument 'proc'"),
    ],
)
def test_malformed_binding_is_refused_in_one_line(kwargs, message):
    with pytest.raises(UserError) as caught:
        binding.Binding(Posix, **kwargs)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_shared_constants_come_from_the_c_header():
    text = abi.header_path().read_text()
    defined = dict(re.findall(r"#define SC_(\w+) (\S+)", text))
    assert abi.constants() == {name: int(value, 0) for name, value in defined.items()}
    assert guest_render.LIMITS["fds"] == abi.value("MAX_FDS")
