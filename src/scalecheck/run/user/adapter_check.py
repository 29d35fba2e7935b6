"""The adapter checked against the model before any test runs: the operations its
``SC_OPS`` table binds (read from the test program's symbol table and data, no run) must
be the model's, each with the model's number of arguments."""

from __future__ import annotations

import struct
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from scalecheck.common.errors import UserError
from scalecheck.run.user.program_symbols import program_data

# struct sc_op (tracer/user/scalecheck_adapter.h): const char *name; int nargs; call *.
_SC_OP = struct.Struct("<QixxxxQ")


def adapter_ops(program: Path) -> dict[str, int]:
    """The adapter's operations, name -> number of arguments, in the static program."""
    try:
        with open(program, "rb") as f:
            elf = ELFFile(f)
            # The program's symbols as read once per program (program_symbols.py).
            found = [at for at, _, name in program_data(program) if name == "SC_OPS"]
            if not found:
                raise UserError(f"{program}: the adapter defines no SC_OPS")
            ops: dict[str, int] = {}
            at = found[0]
            while True:
                name_at, nargs, _ = _SC_OP.unpack(_read(elf, at, _SC_OP.size))
                if not name_at:
                    return ops
                ops[_read_string(elf, name_at)] = nargs
                at += _SC_OP.size
    except (OSError, ELFError) as err:
        raise UserError(f"cannot read {program}: {err}") from None


def _read(elf: ELFFile, address: int, size: int) -> bytes:
    """Up to ``size`` bytes of the program's image at ``address`` (fewer at a segment's end)."""
    for segment in elf.iter_segments("PT_LOAD"):
        start = segment["p_vaddr"]
        if start <= address < start + segment["p_filesz"]:
            segment.stream.seek(segment["p_offset"] + address - start)
            return segment.stream.read(min(size, start + segment["p_filesz"] - address))
    raise ELFError(f"address {address:#x} is not in the file")


def _read_string(elf: ELFFile, address: int) -> str:
    return _read(elf, address, 256).split(b"\0", 1)[0].decode(errors="replace")


def check_adapter(
    program: Path,
    arguments: dict[str, tuple[str, ...]],
    optional: frozenset[str] | set[str] = frozenset(),
) -> None:
    """One line naming the differences between the adapter's operations and the model's
    (``arguments``: op -> the arguments a call carries; ``optional``: those an adapter may
    leave out: the target's own, the manifest's ``unbound``); nothing when they agree."""
    ops = adapter_ops(program)
    unbound = [op for op in arguments if op not in ops and op not in optional]
    unknown = [op for op in ops if op not in arguments]
    miscounted = [
        f"{op} takes {len(args)} ({', '.join(args) or 'none'}), SC_OPS gives {ops[op]}"
        for op, args in arguments.items()
        if op in ops and ops[op] != len(args)
    ]
    differences = [
        f"model operation(s) {', '.join(unbound)} not in SC_OPS" if unbound else "",
        f"SC_OPS names {', '.join(unknown)}, which the model has not" if unknown else "",
        *miscounted,
    ]
    if any(differences):
        raise UserError(
            f"the adapter does not match the model: {'; '.join(d for d in differences if d)}"
        )
