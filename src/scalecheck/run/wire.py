"""The wire format between the host and both C drivers (the guest driver and the user-space
harness), Python's side: every test line written and every report line read here, with the
keywords read from their one definition, tracer/include/scalecheck_wire.h (every
``#define SC_WIRE_NAME "word"``), which describes the lines. Each target's wing decides
what a test's setup lines say (run/linux/guest_render.py, run/user/program_worker.py);
this module writes them and reads what comes back."""

from __future__ import annotations

import dataclasses
import functools
import re
import struct
from pathlib import Path

from scalecheck.common import sources

_DEFINE = re.compile(r'^#define\s+SC_WIRE_(\w+)\s+"([^"]*)"\s*$', re.MULTILINE)


def header_path():
    return sources.root() / "tracer" / "include" / "scalecheck_wire.h"


@functools.cache
def keywords() -> dict[str, str]:
    """{"RESULTS": "R", ...}: the header's keywords without their SC_WIRE_ prefix."""
    return dict(_DEFINE.findall(header_path().read_text()))


def keyword(name: str) -> str:
    return keywords()[name]


# ---- tests, host -> driver ----


def line(kind: str, *tokens) -> str:
    """One line of kind (a keyword's name, "FILE") and its tokens, space-separated."""
    return lines(kind, [tokens])[0]


def lines(kind: str, rows) -> list[str]:
    """A ``line`` of kind for each row of tokens (the keyword looked up once)."""
    word = keyword(kind)
    return [" ".join([word, *map(str, tokens)]) + "\n" for tokens in rows]


def settings_line(**settings) -> str:
    """The batch's first line: key=value per setting."""
    return line("SETTINGS", *(f"{key}={value}" for key, value in settings.items()))


@dataclasses.dataclass(frozen=True)
class Call:
    """One call line: side 0 is call A, 1 call B; arguments in the model's order."""

    side: int
    proc: int | str
    op: str
    arguments: list[tuple[str, str]]


def test_text(index: int, setup: list[str], calls: list[Call]) -> str:
    """A test's lines: T, its setup lines (made by ``line``), its calls, E."""
    parts = [line("TEST", index), *setup]
    for call in calls:
        values = [f"{name}={value}" for name, value in call.arguments]
        parts.append(line("CALL", call.side, call.proc, call.op, *values))
    parts.append(line("END"))
    return "".join(parts)


# ---- reports, driver -> host ----


@dataclasses.dataclass(frozen=True)
class Report:
    """One report line. ``kind`` is the keyword's name (``"RESULTS"``); ``index`` and
    ``rep`` are -1 where the line has none; ``rest`` is the text after them: both
    results (``results()``), a reason, an allocation's fields or a memory snapshot."""

    kind: str
    index: int = -1
    rep: int = -1
    rest: str = ""
    raw: bytes = b""  # the raw part after an A or MEM line (read_reports)

    def results(self) -> tuple[str, str]:
        """A RESULTS line's results of call A and call B."""
        result_a, _, result_b = self.rest.partition(" ")
        return result_a, result_b

    def allocations(self) -> list[tuple[int, int, int]]:
        """An ALLOCATION report's blocks: (address, size, allocation site) each."""
        return list(_BLOCK.iter_unpack(self.raw))

    def snapshot(self) -> tuple[int, int, list[tuple[int, int]]]:
        """A MEMORY report's snapshot file (its number), where its bytes start in it, and
        its ranges (address, size), whose bytes follow each other there."""
        _, file, offset = self.rest.split()
        return int(file), int(offset), list(_RANGE.iter_unpack(self.raw))

    def percpu_offset(self) -> tuple[str, int]:
        """A PERCPU_OFFSET line's (CPU, the offset of its per-cpu area)."""
        cpu, offset = self.rest.split()
        return cpu, int(offset, 16)

    def milliseconds(self) -> int:
        """A DONE line's time: the tests' run time in the guest, boot excluded."""
        return int(self.rest)


def snapshot_path(batch: Path, number: int | str) -> Path:
    """Snapshot file ``number`` of a harness run on ``batch`` (scalecheck_wire.h); "*":
    the pattern of all of them."""
    return batch.with_name(f"{batch.name}{keyword('SNAPSHOT_FILE')}{number}")


def snapshot_memory(data: bytes, ranges: list[tuple[int, int]]) -> dict[int, bytes]:
    """A snapshot's bytes ``data`` split into its ranges: address -> bytes."""
    memory, at = {}, 0
    for addr, size in ranges:
        memory[addr] = data[at : at + size]
        at += size
    return memory


def kallsyms(output: str) -> str:
    """The kallsyms block of a probe boot's output as the driver copied it (the lines
    between KALLSYMS and KALLSYMS_END); ValueError when it holds none."""
    start_marker, end_marker = keyword("KALLSYMS"), keyword("KALLSYMS_END")
    start = output.index(f"\n{start_marker}\n") + len(start_marker) + 2
    # The end marker is a line of its own ("KEND" also ends "...BACKEND").
    return output[start : output.index(f"\n{end_marker}\n", start - 1) + 1]


def holds_done(output: bytes) -> bool:
    """Whether a driver's output so far holds its DONE line (cheap enough to poll)."""
    return f"\n{keyword('DONE')} ".encode() in output


# The raw parts after A and MEM lines (struct sc_wire_block, struct sc_wire_range).
_BLOCK = struct.Struct("<QQQ")
_RANGE = struct.Struct("<QQ")

# Reports that name a test, and those that name a test and a repeat.
_WITH_INDEX = {"WARMUP", "BEGIN"}
_WITH_REPEAT = {"RESULTS", "SETUP_FAILED", "HUNG", "ALLOCATION", "MEMORY"}
# The probe boot's kernel facts: the release, each CPU's per-cpu offset ("cpu hex").
_FACTS = {"RELEASE", "PERCPU_OFFSET"}
REPORTS = {"WAITING", "READY", "FAIL", "DONE", *_FACTS, *_WITH_INDEX, *_WITH_REPEAT}


@functools.cache
def _kinds() -> dict[str, str]:
    return {keyword(name): name for name in REPORTS}


def parse_report(text: str) -> Report | None:
    """The report a driver's output line holds, or None for any other line (the guest's
    console, the lines of a probe's kallsyms block)."""
    word, _, rest = text.rstrip("\n").partition(" ")
    kind = _kinds().get(word)
    if kind is None:
        return None
    if kind in _WITH_INDEX:
        return Report(kind, int(rest))
    if kind in _WITH_REPEAT:
        index, rep, rest = [*rest.split(" ", 2), "", ""][:3]
        return Report(kind, int(index), int(rep), rest)
    return Report(kind, rest=rest)


def read_reports(stream):
    """The reports of a harness's output (a binary stream), each A and MEM report with its
    raw part; None for another line. Ends at the end of the stream, or where it was cut
    inside a raw part (the program died)."""
    reports = ReportStream()
    for piece in iter(lambda: stream.read1(READ_SIZE), b""):
        yield from reports.feed(piece)


# What is asked of a harness's output at a time: all there is, as a rule.
READ_SIZE = 1 << 20


class ReportStream:
    """Reports from a harness's output as it arrives, in pieces of any size: each A and MEM
    report with its raw part; None for another line. A report not yet whole waits for the
    next piece."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, piece: bytes) -> list:
        self._pending += piece
        reports, at = [], 0
        while True:
            parsed = self._report_at(at)
            if parsed is None:
                break
            report, at = parsed
            reports.append(report)
        del self._pending[:at]
        return reports

    def _report_at(self, at: int) -> tuple | None:
        """(report, where the next starts), or None when the one at ``at`` is not whole."""
        pending = self._pending
        end = pending.find(b"\n", at)
        if end < 0:
            return None
        report = parse_report(pending[at : end + 1].decode(errors="replace"))
        at = end + 1
        if report is None or report.kind not in ("ALLOCATION", "MEMORY"):
            return report, at
        size = _raw_size(report)
        if len(pending) - at < size:
            return None
        with memoryview(pending) as view:  # copied once (a slice would copy it twice)
            raw = bytes(view[at : at + size])
        return Report(report.kind, report.index, report.rep, report.rest, raw), at + size


def _raw_size(report: Report) -> int:
    """The bytes of an A or MEM report's raw part (its table)."""
    count = int(report.rest.split(" ", 1)[0])
    return (_BLOCK if report.kind == "ALLOCATION" else _RANGE).size * count
