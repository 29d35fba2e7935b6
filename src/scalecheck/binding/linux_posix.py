"""The Linux binding of the POSIX model: how its operations become system calls of the
guest driver (tracer/guest/ops.c) and how a concrete test is written in Linux's terms.

Model fd k is real fd FD_BASE + k, model page k is mapped at MAP_BASE + k * UNIT, file
data is counted in UNIT-byte units, file names are "f<label>" and byte labels 'A', 'B',
... (constants in tracer/include/scalecheck_abi.h). Model sockets are numbered in the
test (setup "sockets"); each is a non-blocking AF_UNIX datagram socket whose queue holds
SOCK_CAPACITY messages. Linux's queue is ordered: an unordered socket's receive results
are the implementation's choice ("*"), so its tests accept Linux's order. A close-on-exec
fd carries ``"cloexec": true``; ``exec`` runs the guest's /bin/exec_image (docs/tracer.md).
The driver's own diagnostic ops:
``_hang`` never returns and ``_panic`` crashes the guest kernel, to exercise the runner's
recovery on a real VM.
"""

from functools import cache

from scalecheck.binding import abi
from scalecheck.binding.generic import Binding
from scalecheck.interfaces.posix import SOCK_CAPACITY, ZERO, Byte, Fd, Page, Posix, SockId
from scalecheck.interfaces.rename import Filename

if abi.value("SOCK_CAPACITY") != SOCK_CAPACITY:
    raise RuntimeError("the model's SOCK_CAPACITY differs from the driver's SC_SOCK_CAPACITY")


def describe_test(ops, snapshot, args, results, label):
    """The test file's setup, calls and results (docs/format-tests.md)."""
    numbering = _Numbering()
    files = {
        f"f{name}": numbering.inode(entry[""])
        for name, entry in snapshot.get("fname_to_inum", {}).items()
        if entry["present"]
    }
    procs = [_describe_process(snapshot, pid, numbering) for pid in range(2)]
    setup = {
        "files": files,
        "inodes": _describe_inodes(snapshot, files, numbering),
        "pipes": _describe_pipes(snapshot, numbering),
        "procs": procs,
    }
    sockets = _describe_sockets(snapshot)
    if sockets:
        setup["sockets"] = sockets
    expect = {
        order.lower(): [
            _describe_result(op, result, label)
            for op, result in zip(ops, order_results, strict=True)
        ]
        for order, order_results in results.items()
    }
    return setup, _describe_calls(ops, args, snapshot), expect


class _Numbering:
    """The model's inode and pipe labels numbered in the order the test first names them."""

    def __init__(self):
        self.inodes: dict = {}
        self.pipes: dict = {}

    def inode(self, label):
        return self.inodes.setdefault(label, len(self.inodes))

    def pipe(self, label):
        return self.pipes.setdefault(label, len(self.pipes))


def _describe_process(snapshot, pid: int, numbering: _Numbering) -> dict:
    fds, maps = {}, {}
    for fd, entry in snapshot.get(f"procs[{pid}].fds", {}).items():
        if not entry["present"]:
            continue
        if entry["ispipe"]:
            desc = {"pipe": numbering.pipe(entry["pipe"]), "end": "w" if entry["writer"] else "r"}
        else:
            desc = {"file": numbering.inode(entry["inum"]), "off": entry["off"]}
        if entry.get("cloexec"):
            desc["cloexec"] = True
        fds[str(fd + abi.value("FD_BASE"))] = desc
    for page, entry in snapshot.get(f"procs[{pid}].vmas", {}).items():
        if entry["present"] and entry["anon"]:
            maps[str(_address(page))] = {
                "anon": True,
                "writable": entry["writable"],
                "data": _byte(entry["anondata"]),
            }
        elif entry["present"]:
            maps[str(_address(page))] = {
                "anon": False,
                "writable": entry["writable"],
                "file": numbering.inode(entry["inum"]),
                "off": entry["off"],
            }
    return {"fds": fds, "maps": maps}


def _describe_inodes(snapshot, files: dict, numbering: _Numbering) -> list:
    names_per_inode = [list(files.values()).count(index) for index in range(len(numbering.inodes))]
    inodes = []
    for label_, index in sorted(numbering.inodes.items(), key=lambda item: item[1]):
        known = snapshot.get("inodes", {}).get(label_)
        inodes.append(
            {
                "nlink": known["nlink"],
                "data": [_byte(known[f"data[{i}]"]) for i in range(known["length"])],
            }
            if known
            else {"nlink": names_per_inode[index], "data": []}
        )
    return inodes


def _describe_pipes(snapshot, numbering: _Numbering) -> list:
    pipes = []
    for label_, _ in sorted(numbering.pipes.items(), key=lambda item: item[1]):
        known = snapshot.get("pipes", {}).get(label_)
        pipes.append(
            {"data": [_byte(known[f"data[{i}]"]) for i in range(known["head"], known["tail"])]}
            if known
            else {"data": []}
        )
    return pipes


def _describe_sockets(snapshot) -> list:
    return [
        {
            "unordered": known["unordered"],
            "data": [
                _byte(known[f"data[{i}]"]) for i in range(SOCK_CAPACITY) if known[f"queued[{i}]"]
            ],
        }
        for _, known in sorted(snapshot.get("sockets", {}).items())
    ]


@cache
def _argument_types(op: str) -> dict:
    """The model operation's argument types, looked up once per operation (testgen
    describes every test's calls: the walk of the model's classes cost 2% of it)."""
    return Posix.operations()[op].argument_types


def _describe_calls(ops, args, snapshot) -> list:
    socket_index = {sock: number for number, sock in enumerate(sorted(snapshot.get("sockets", {})))}
    calls = []
    for number, (op, call_args) in enumerate(zip(ops, args, strict=True)):
        types = _argument_types(op)
        proc = call_args.get("pid", number)
        described = {
            name: socket_index[value]
            if types[name] is SockId
            else _describe_argument(types[name], value)
            for name, value in call_args.items()
            if name != "pid"
        }
        calls.append({"op": op, "proc": proc, "args": described})
    return calls


def _address(page):
    return abi.value("MAP_BASE") + page * abi.value("UNIT")


def _byte(label):
    """Byte label 0 is the zero page; others are 'A', 'B', ..."""
    return 0 if label == ZERO else 0x40 + label


def _describe_argument(symtype, value):
    if symtype is Filename:
        return f"f{value}"
    if symtype is Fd:
        return value + abi.value("FD_BASE")
    if symtype is Page:
        return _address(value)
    if symtype is Byte:
        return _byte(value)
    return value


def _describe_result(op, result, label):
    if "ret" not in result:
        return result
    described = dict(result)
    if op == "open" and result["ret"] != "*":
        described["ret"] = result["ret"] + abi.value("FD_BASE")
    if op == "pipe":
        described["fds"] = [fd if fd == "*" else fd + abi.value("FD_BASE") for fd in result["fds"]]
    if op == "mmap" and result["ret"] != "*":
        described["ret"] = _address(result["ret"])
    if result.get("data", "*") != "*":
        described["data"] = _byte(label(Byte.kind, result["data"]))
    return described


BINDING = Binding(
    Posix,
    process_arg="pid",
    extra_ops={"_hang": (), "_panic": ()},
    constants={
        "fd_base": abi.value("FD_BASE"),
        "map_base": abi.value("MAP_BASE"),
        "page_size": abi.value("UNIT"),
        "unit_size": abi.value("UNIT"),
    },
    describe=describe_test,
)
# Arguments written as file names, not numbers, in the driver's rendering.
NAME_TYPES = (Filename,)
