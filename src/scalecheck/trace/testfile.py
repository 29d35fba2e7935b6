"""Reads ``tests.jsonl`` (docs/format-tests.md) and renders tests for the guest driver.

The driver is a small static C program, so it reads a line-based rendering (one token per
value, see docs/tracer.md) instead of JSON. Everything the driver cannot express is caught
here, per test: such a test gets status "error" with the reason, never dropped.
"""

from dataclasses import dataclass
from pathlib import Path

from scalecheck import testfile as shared_testfile
from scalecheck.trace import abi, linux_posix

# op -> argument names in the order the driver reads them: the model's order, from its
# @operation signatures, plus the driver's diagnostic ops (trace/linux_posix.py).
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
    for kind in ("names", "inodes", "units", "pipes", "fds", "maps")
}


@dataclass
class Test:
    id: str
    pair: list
    raw: dict


class UnsupportedTest(Exception):
    """A well-formed test the guest driver cannot build; reported as status "error"."""


def read_tests(path: Path):
    """Returns (header, [Test]); raises UserError on a file that is not a tests file."""
    header, tests = shared_testfile.read_tests(path)
    return header, [
        Test(test["id"], test.get("pair") or [call.get("op") for call in test["calls"]], test)
        for test in tests
    ]


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
                lines.append(f"D {p} {fd} pipe {pipe} {desc['end']}")
            else:
                inode = _int(desc.get("file"), f"proc {p} fd {fd} file")
                if not 0 <= inode < len(inodes):
                    raise UnsupportedTest(f"proc {p} fd {fd}: missing inode {inode}")
                lines.append(f"D {p} {fd} file {inode} {_int(desc.get('off', 0), 'off')}")
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
    calls = raw["calls"]
    if len(calls) != 2:
        raise UnsupportedTest(f"a test needs exactly two calls, this one has {len(calls)}")
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


def result_matches(actual, expected) -> bool:
    """Structural equality where an expected "*" matches anything."""
    if expected == "*":
        return True
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == expected.keys()
            and all(result_matches(actual[k], expected[k]) for k in expected)
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(result_matches(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return actual == expected


# How a test's results stand against its model (docs/format-tests.md, docs/format-results.md).
ON_PATH, LEFT_PATH, MISMATCH = "ok", "left_path", "mismatch"


def check_results(test: Test, results_a, results_b) -> tuple[str | None, str]:
    """(order, verdict): the order ("ab" or "ba") whose allowed results match, and
    ON_PATH, or LEFT_PATH where they match only a legal choice that leaves the path the
    test was made for; (None, MISMATCH) where the model allows neither. A test with
    ``outcomes`` (one per legal choice) is checked against those; otherwise against
    ``expect``."""
    raw = test.raw
    on_path = raw["outcomes"] if "outcomes" in raw else [raw.get("expect") or {}]
    for verdict, outcomes in ((ON_PATH, on_path), (LEFT_PATH, raw.get("left_path", []))):
        for expect in outcomes:
            for order in ("ab", "ba"):
                want = expect.get(order)
                if (
                    isinstance(want, list)
                    and len(want) == 2
                    and result_matches(results_a, want[0])
                    and result_matches(results_b, want[1])
                ):
                    return order, verdict
    return None, MISMATCH
