"""The rule's verdict on two system calls that met on a kernel line (scalecheck profile): from
the POSIX model's analysis (a `scalecheck analyze --model posix` directory), whether the two
calls commute as a program called them, so that the kernel could avoid moving the line, or
the interface as called forces it, with the commutative alternative the seeds give.

"As called" is what the trace tells about the two calls: a Linux program never opens with
O_ANYFD (Linux has no such flag), its calls are taken to succeed, and two calls that met on
a process's own state (its fd table, its address space) ran in one process, while two that
met elsewhere may have run in one process or two. A case of the pair's commutativity
condition (docs/format-analysis.md: one conjunction per line) holds as called unless one
of its atoms contradicts these facts.
"""

import json
import re
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.formats.analysisfile import all_pairs, read_analysis_meta, read_pair

# The POSIX model's cases, saved from `scalecheck analyze --model posix --ops ...` (its
# command in the file's made_by).
SHIPPED = Path(__file__).with_name("rules") / "posix.json"

# Linux system calls (their __x64_sys_ names) as the model's operations.
SYSCALL_OPS = {
    "open": "open",
    "openat": "open",
    "openat2": "open",
    "creat": "open",
    "close": "close",
    "read": "read",
    "write": "write",
    "pread64": "pread",
    "pwrite64": "pwrite",
    "newfstat": "fstat",
    "newstat": "stat",
    "newlstat": "stat",
    "newfstatat": "stat",
    "statx": "stat",
    "lseek": "lseek",
    "mmap": "mmap",
    "munmap": "munmap",
    "mprotect": "mprotect",
    "pipe": "pipe",
    "pipe2": "pipe",
    "link": "link",
    "linkat": "link",
    "unlink": "unlink",
    "unlinkat": "unlink",
    "rename": "rename",
    "renameat": "rename",
    "renameat2": "rename",
    "sendto": "sendto",
    "sendmsg": "sendto",
    "recvfrom": "recvfrom",
    "recvmsg": "recvfrom",
    "fork": "fork",
    "vfork": "fork",
    "clone": "fork",
    "clone3": "fork",
    "execve": "exec",
}
# A read or a write that met on a socket's data (its struct sock, socket or buffers) was
# on a socket: the model's recvfrom or sendto (the fd's kind is not traced; a read or write
# met elsewhere stays the file's).
SOCKET_DATA = re.compile(
    r"\b(sock|socket|tcp_sock|udp_sock|unix_sock|inet_sock|sk_buff|skbuff_\w+|TCP|UDP|UNIX)\b"
)
SOCKET_CALLS = {"read": "recvfrom", "write": "sendto", "readv": "recvfrom", "writev": "sendto"}
# Kernel types that belong to one process: two calls meeting on one ran in that process.
PROCESS_TYPES = ("files_struct", "fdtable", "mm_struct", "signal_struct", "sighand_struct")
# The seeds' commutative alternatives: an operation the model has beside the one called
# (analyze's variants), or an argument the model has that Linux lacks.
ALTERNATIVES = {
    "anyfd": "O_ANYFD (any free fd, not the lowest)",
    "fork": "posix_spawn instead of fork",
    "fstat": "fstatx without the link count",
    "recvfrom": "unordered sockets",
    "sendto": "unordered sockets",
}
COMMUTATIVE = "commutative: the kernel could avoid this"
FORCED = "not commutative as called"


def operation(call: str, data_name: str) -> str | None:
    """The model's operation for a system call (or context) that touched the data."""
    if call in SOCKET_CALLS and SOCKET_DATA.search(data_name):
        return SOCKET_CALLS[call]
    return SYSCALL_OPS.get(call)


def same_process(data_name: str) -> bool:
    return any(re.search(rf"\b{kind}\b", data_name) for kind in PROCESS_TYPES)


def atom_possible(atom: str, one_process: bool, anyfd: bool) -> bool:
    """Whether one atom of a case can hold as called (an atom the trace says nothing
    about can)."""
    atom = atom.strip().strip("()")
    if re.fullmatch(r"[AB]\.anyfd", atom):
        return anyfd
    if re.fullmatch(r"[AB]\.pid != [AB]\.pid", atom):
        return not one_process
    return True


def case_possible(case: str, one_process: bool, anyfd: bool) -> bool:
    """Whether a case (one line of a condition's text) can hold as called: no failure, no
    atom against the facts, and one process for both calls when one_process (a case with
    `A.pid == 0` and `B.pid != 0` puts them in two)."""
    if case.startswith("["):
        return False
    atoms = case.split(" and ")
    pids = {
        m.group(1): m.group(2) for a in atoms if (m := re.fullmatch(r"([AB])\.pid (==|!=) 0", a))
    }
    if one_process and len(set(pids.values())) == 2:
        return False
    return all(atom_possible(atom, one_process, anyfd) for atom in atoms)


class Rule:
    """The commutativity cases of the model's pairs (a pair's `commutes` text, one case a
    line), from an analysis directory or a rule file saved from one (SHIPPED: the POSIX
    model's, for the operations SYSCALL_OPS names)."""

    def __init__(self, ops: set[str], cases: dict[str, list[str]], source: str):
        self.ops, self._cases, self.source = ops, cases, source

    @classmethod
    def load(cls, path: Path) -> "Rule":
        """From an analysis directory or a rule file; UserError when it is neither."""
        if path.is_dir():
            ops = read_analysis_meta(path).get("ops", [])
            cases = {}
            for a, b in all_pairs(ops):
                found = read_pair(path, a, b)
                if found and "conditions" in found:
                    text = found["conditions"].get("commutes", {}).get("text", "")
                    cases[f"{a} {b}"] = [line.strip() for line in text.splitlines() if line.strip()]
            return cls(set(ops), cases, str(path))
        try:
            saved = json.loads(path.read_text())
            return cls(set(saved["ops"]), saved["cases"], str(path))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UserError(
                f"{path} is neither an analysis directory nor a rule file: {err}"
            ) from None

    def save(self, path: Path, command: str) -> None:
        document = {"made_by": command, "ops": sorted(self.ops), "cases": self._cases}
        path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")

    def cases(self, a: str, b: str) -> list[str] | None:
        found = self._cases.get(f"{a} {b}")
        return found if found is not None else self._cases.get(f"{b} {a}")

    def has_calls(self, *calls: str) -> bool:
        """Whether the model has the operations of these system calls."""
        return all(SYSCALL_OPS.get(call) in self.ops for call in calls)

    def verdict(self, call_a: str, call_b: str, data_name: str) -> str:
        """The verdict on two calls (syscall names, or a context such as "page fault")
        that met on the data."""
        ops = [operation(call, data_name) or "" for call in (call_a, call_b)]
        # how each call was read: "write on a socket: sendto", or the call
        read_as = [
            f"{call} on a socket: {op}" if op and op != SYSCALL_OPS.get(call) else call
            for call, op in zip((call_a, call_b), ops, strict=True)
        ]
        missing = [said for said, op in zip(read_as, ops, strict=True) if op not in self.ops]
        if missing:
            return f"outside the model ({', '.join(sorted(set(missing)))})"
        on_sockets = sorted({said for said in read_as if " on a socket" in said})
        note = f" ({', '.join(on_sockets)})" if on_sockets else ""
        cases = self.cases(*ops)
        if cases is None:
            return f"not analysed ({ops[0]} || {ops[1]})"
        one = same_process(data_name)
        if any(case_possible(case, one, anyfd=False) for case in cases):
            return COMMUTATIVE + note
        alternative = self.alternative(ops, cases, one)
        use = f"use {alternative}" if alternative else "no alternative known"
        return f"{FORCED}: {use}{note}"

    def alternative(self, ops: list, cases: list[str], one_process: bool) -> str | None:
        if any(case_possible(case, one_process, anyfd=True) for case in cases):
            return ALTERNATIVES["anyfd"]
        for op in ops:
            if op in ALTERNATIVES:
                return ALTERNATIVES[op]
        return None
