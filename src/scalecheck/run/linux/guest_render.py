"""What a test's lines say to the guest driver (tracer/guest/): its POSIX setup and its
calls, in the wire format (run/wire.py, tracer/include/scalecheck_wire.h). The driver is a
small static C program, so it reads lines, one token per value, instead of JSON.
Everything the driver cannot express is caught here, per test: such a test gets status
"error" with the reason, never dropped.
"""

from scalecheck.binding import abi, linux_posix
from scalecheck.run import wire
from scalecheck.run.testcase import NotRunnable, Test, UnsupportedTest

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
    """The driver's form of one test (run/wire.py); raises UnsupportedTest."""
    raw = test.raw
    if raw.get("model", "posix") != "posix":
        raise UnsupportedTest(f"model {raw.get('model')!r} has no Linux mapping (only posix)")
    setup = raw["setup"]
    if not isinstance(setup, dict):
        raise UnsupportedTest("setup must be an object")
    inodes = _limit(setup.get("inodes", []), "inodes")
    lines = _files(setup, inodes) + _inodes(inodes)
    pipes = _limit(setup.get("pipes", []), "pipes")
    lines += _pipes(pipes)
    lines += _processes(setup, len(inodes), len(pipes))
    lines += _sockets(setup)
    return wire.test_text(index, lines, _calls(raw["calls"]))


def _files(setup: dict, inodes: list) -> list[str]:
    lines = []
    for name, inode in _limit(list(setup.get("files", {}).items()), "names"):
        inode = _int(inode, f"files[{name}]")
        if not 0 <= inode < len(inodes):
            raise UnsupportedTest(f"file {name} names missing inode {inode}")
        lines.append(wire.line("FILE", _name(name, "file name"), inode))
    return lines


def _inodes(inodes: list) -> list[str]:
    lines = []
    for i, inode in enumerate(inodes):
        data = [_int(b, f"inode {i} data") & 0xFF for b in _limit(inode.get("data", []), "units")]
        lines.append(wire.line("INODE", i, _int(inode.get("nlink", 1), "nlink"), len(data), *data))
    return lines


def _pipes(pipes: list) -> list[str]:
    lines = []
    for i, pipe in enumerate(pipes):
        data = [_int(b, f"pipe {i} data") & 0xFF for b in _limit(pipe.get("data", []), "units")]
        lines.append(wire.line("PIPE", i, len(data), *data))
    return lines


def _processes(setup: dict, ninodes: int, npipes: int) -> list[str]:
    """The fd and mapping lines of the model's (at most two) processes."""
    procs = setup.get("procs", [])
    if len(procs) > 2:
        raise UnsupportedTest(f"setup has {len(procs)} processes; the model has two")
    lines, nfds, nmaps = [], 0, 0
    for p, proc in enumerate(procs):
        for fd, desc in proc.get("fds", {}).items():
            lines.append(_fd(p, _int(fd, "fd"), desc, ninodes, npipes))
            nfds += 1
        for va, desc in proc.get("maps", {}).items():
            lines.append(_mapping(p, _int(va, "mapping address"), desc, ninodes))
            nmaps += 1
    if nfds > LIMITS["fds"] or nmaps > LIMITS["maps"]:
        raise UnsupportedTest("setup has more fds or mappings than the driver handles")
    return lines


def _fd(p: int, fd: int, desc: dict, ninodes: int, npipes: int) -> str:
    cloexec = ["cloexec"] if desc.get("cloexec") else []
    if "pipe" in desc:
        pipe = _int(desc["pipe"], "pipe")
        if not 0 <= pipe < npipes or desc.get("end") not in ("r", "w"):
            raise UnsupportedTest(f"proc {p} fd {fd}: bad pipe end {desc}")
        return wire.line("FD", p, fd, "pipe", pipe, desc["end"], *cloexec)
    inode = _int(desc.get("file"), f"proc {p} fd {fd} file")
    if not 0 <= inode < ninodes:
        raise UnsupportedTest(f"proc {p} fd {fd}: missing inode {inode}")
    off = _int(desc.get("off", 0), "off")
    return wire.line("FD", p, fd, "file", inode, off, *cloexec)


def _mapping(p: int, va: int, desc: dict, ninodes: int) -> str:
    writable = int(bool(desc.get("writable")))
    if desc.get("anon"):
        data = _int(desc.get("data", 0), "data") & 0xFF
        return wire.line("MAPPING", p, f"{va:#x}", "anon", writable, data)
    inode = _int(desc.get("file"), f"proc {p} map {va:#x} file")
    if not 0 <= inode < ninodes:
        raise UnsupportedTest(f"proc {p} map {va:#x}: missing inode {inode}")
    off = _int(desc.get("off", 0), "off")
    return wire.line("MAPPING", p, f"{va:#x}", "file", writable, inode, off)


def _sockets(setup: dict) -> list[str]:
    lines = []
    for i, sock in enumerate(_limit(setup.get("sockets", []), "sockets")):
        data = [_int(b, f"socket {i} data") & 0xFF for b in sock.get("data", [])]
        if len(data) > abi.value("SOCK_CAPACITY"):
            raise UnsupportedTest(f"socket {i} holds {len(data)} messages, more than it can")
        lines.append(wire.line("SOCKET", i, len(data), *data))
    return lines


def _calls(calls: list) -> list[wire.Call]:
    if len(calls) != 2:
        raise UnsupportedTest(f"a test needs exactly two calls, this one has {len(calls)}")
    if [call.get("op") for call in calls] == ["exec", "exec"] and len(
        {_int(call.get("proc", side), "proc") for side, call in enumerate(calls)}
    ) == 1:
        raise NotRunnable(
            "exec || exec in one process: the second exec would run in the first one's new "
            "image, which runs no calls"
        )
    return [_call(side, call) for side, call in enumerate(calls)]


def _call(side: int, call: dict) -> wire.Call:
    op = call.get("op")
    if op not in OP_ARGS:
        raise UnsupportedTest(f"call {'AB'[side]}: unknown op {op!r}")
    args = call.get("args", {})
    proc = _int(call.get("proc", side), "proc")
    if proc not in (0, 1):
        raise UnsupportedTest(f"call {'AB'[side]}: proc must be 0 or 1")
    arguments = []
    for arg in OP_ARGS[op]:
        if arg not in args:
            # mmap's va only matters with fixed; any other missing argument is an error.
            if op == "mmap" and arg in ("va", "fd", "off"):
                arguments.append((arg, "0"))
                continue
            raise UnsupportedTest(f"call {'AB'[side]} ({op}): missing argument {arg!r}")
        value = args[arg]
        arguments.append((arg, _name(value, arg) if arg in NAME_ARGS else str(_int(value, arg))))
    return wire.Call(side, proc, op, arguments)
