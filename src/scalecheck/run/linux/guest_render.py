"""Renders tests for the guest driver (tracer/guest/).

The driver is a small static C program, so it reads a line-based rendering (one token per
value, see docs/tracer.md) instead of JSON. Everything the driver cannot express is caught
here, per test: such a test gets status "error" with the reason, never dropped.
"""

from scalecheck.binding import abi, linux_posix
from scalecheck.run.testcase import Test, UnsupportedTest

# op -> argument names in the order the driver reads them: the model's order, from its
# @operation signatures, plus the driver's diagnostic ops (binding/linux_posix.py).
OP_ARGS = linux_posix.BINDING.call_arguments()
NAME_ARGS = {
    arg
    for op, args in OP_ARGS.items()
    for arg in args
    if linux_posix.BINDING.argument_type(op, arg) in linux_posix.NAME_TYPES
}
# The driver's fixed table sizes (tracer/include/scalecheck_abi.h).
LIMITS = {
    kind: abi.value(f"MAX_{kind.upper()}")
    for kind in ("names", "inodes", "units", "pipes", "fds", "maps", "sockets")
}


def _int(value, what):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            pass
    raise UnsupportedTest(f"{what} must be an integer, got {value!r}")


def _name(value, what):
    if not isinstance(value, str) or not value or any(c in value for c in " \t\n/"):
        raise UnsupportedTest(f"{what} must be a plain file name, got {value!r}")
    return value


def _limit(items, kind):
    if len(items) > LIMITS[kind]:
        raise UnsupportedTest(f"setup has {len(items)} {kind}; the driver handles {LIMITS[kind]}")
    return items


def render(test: Test, index: int) -> str:
    """The driver's line-based form of one test; raises UnsupportedTest."""
    raw = test.raw
    if raw.get("model", "posix") != "posix":
        raise UnsupportedTest(f"model {raw.get('model')!r} has no Linux mapping (only posix)")
    setup = raw["setup"]
    if not isinstance(setup, dict):
        raise UnsupportedTest("setup must be an object")
    lines = [f"T {index}"]
    inodes = _limit(setup.get("inodes", []), "inodes")
    for name, inode in _limit(list(setup.get("files", {}).items()), "names"):
        inode = _int(inode, f"files[{name}]")
        if not 0 <= inode < len(inodes):
            raise UnsupportedTest(f"file {name} names missing inode {inode}")
        lines.append(f"F {_name(name, 'file name')} {inode}")
    for i, inode in enumerate(inodes):
        data = [_int(b, f"inode {i} data") & 0xFF for b in _limit(inode.get("data", []), "units")]
        lines.append(
            " ".join(map(str, ["I", i, _int(inode.get("nlink", 1), "nlink"), len(data), *data]))
        )
    pipes = _limit(setup.get("pipes", []), "pipes")
    for i, pipe in enumerate(pipes):
        data = [_int(b, f"pipe {i} data") & 0xFF for b in _limit(pipe.get("data", []), "units")]
        lines.append(" ".join(map(str, ["P", i, len(data), *data])))
    procs = setup.get("procs", [])
    if len(procs) > 2:
        raise UnsupportedTest(f"setup has {len(procs)} processes; the model has two")
    nfds = nmaps = 0
    for p, proc in enumerate(procs):
        for fd, desc in proc.get("fds", {}).items():
            fd = _int(fd, "fd")
            nfds += 1
            if "pipe" in desc:
                pipe = _int(desc["pipe"], "pipe")
                if not 0 <= pipe < len(pipes) or desc.get("end") not in ("r", "w"):
                    raise UnsupportedTest(f"proc {p} fd {fd}: bad pipe end {desc}")
                line = f"D {p} {fd} pipe {pipe} {desc['end']}"
            else:
                inode = _int(desc.get("file"), f"proc {p} fd {fd} file")
                if not 0 <= inode < len(inodes):
                    raise UnsupportedTest(f"proc {p} fd {fd}: missing inode {inode}")
                line = f"D {p} {fd} file {inode} {_int(desc.get('off', 0), 'off')}"
            lines.append(line + (" cloexec" if desc.get("cloexec") else ""))
        for va, desc in proc.get("maps", {}).items():
            va = _int(va, "mapping address")
            nmaps += 1
            writable = int(bool(desc.get("writable")))
            if desc.get("anon"):
                lines.append(
                    f"M {p} {va:#x} anon {writable} {_int(desc.get('data', 0), 'data') & 0xFF}"
                )
            else:
                inode = _int(desc.get("file"), f"proc {p} map {va:#x} file")
                if not 0 <= inode < len(inodes):
                    raise UnsupportedTest(f"proc {p} map {va:#x}: missing inode {inode}")
                lines.append(
                    f"M {p} {va:#x} file {writable} {inode} {_int(desc.get('off', 0), 'off')}"
                )
    if nfds > LIMITS["fds"] or nmaps > LIMITS["maps"]:
        raise UnsupportedTest("setup has more fds or mappings than the driver handles")
    for i, sock in enumerate(_limit(setup.get("sockets", []), "sockets")):
        data = [_int(b, f"socket {i} data") & 0xFF for b in sock.get("data", [])]
        if len(data) > abi.value("SOCK_CAPACITY"):
            raise UnsupportedTest(f"socket {i} holds {len(data)} messages, more than it can")
        lines.append(" ".join(map(str, ["Q", i, len(data), *data])))
    calls = raw["calls"]
    if len(calls) != 2:
        raise UnsupportedTest(f"a test needs exactly two calls, this one has {len(calls)}")
    if [call.get("op") for call in calls] == ["exec", "exec"] and len(
        {_int(call.get("proc", side), "proc") for side, call in enumerate(calls)}
    ) == 1:
        raise UnsupportedTest(
            "exec || exec in one process: the second exec would run in the first one's new "
            "image, which runs no calls"
        )
    for side, call in enumerate(calls):
        op = call.get("op")
        if op not in OP_ARGS:
            raise UnsupportedTest(f"call {'AB'[side]}: unknown op {op!r}")
        args = call.get("args", {})
        proc = _int(call.get("proc", side), "proc")
        if proc not in (0, 1):
            raise UnsupportedTest(f"call {'AB'[side]}: proc must be 0 or 1")
        tokens = []
        for arg in OP_ARGS[op]:
            if arg not in args:
                # mmap's va only matters with fixed; any other missing argument is an error.
                if op == "mmap" and arg in ("va", "fd", "off"):
                    tokens.append("0")
                    continue
                raise UnsupportedTest(f"call {'AB'[side]} ({op}): missing argument {arg!r}")
            value = args[arg]
            tokens.append(_name(value, arg) if arg in NAME_ARGS else str(_int(value, arg)))
        lines.append(" ".join(["C", str(side), str(proc), op, *tokens]))
    lines.append("E")
    return "\n".join(lines) + "\n"
