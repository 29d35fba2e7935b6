"""The wire format between the host and the C drivers, round trip: tests rendered by the
host (run/wire.py and each target's renderer) read back by each driver's own C reader
(the guest driver's parse.c, the user-space harness) with every field, and every report
the C side writes (tracer/common/wire.c) parsed back by the one Python reader."""

import io
import re
import struct
import subprocess
from pathlib import Path

import pytest

from scalecheck.run import testcase, wire
from scalecheck.run.linux import guest_render
from scalecheck.run.user import program_build, program_worker

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"

# One test with every line kind of the guest's setup and a call with arguments.
GUEST_TEST = {
    "setup": {
        "files": {"f0": 0, "f1": 1},
        "inodes": [{"nlink": 2, "data": [7, 300]}, {"nlink": 0, "data": []}],
        "pipes": [{"data": [65, 66]}],
        "procs": [
            {
                "fds": {
                    "10": {"file": 0, "off": 1},
                    "11": {"pipe": 0, "end": "w", "cloexec": True},
                },
                "maps": {"0x100000000": {"anon": True, "writable": True, "data": 9}},
            },
            {"fds": {}, "maps": {"0x100001000": {"file": 1, "off": 2, "writable": False}}},
        ],
        "sockets": [{"data": [3]}],
    },
    "calls": [
        {"op": "rename", "proc": 0, "args": {"src": "f0", "dst": "f1"}},
        {"op": "pwrite", "proc": 1, "args": {"fd": 10, "off": 2, "byte": 255}},
    ],
}

# What the guest driver holds after reading GUEST_TEST (wire_guest_echo.c's form).
GUEST_HELD = [
    "file f0 0",
    "file f1 1",
    "nlink 2",
    "inode 2 7 44",  # data bytes are taken modulo 256
    "nlink 0",
    "inode 0",
    "pipe 2 65 66",
    "fd 0 10 0 0 1 0 0 0",
    "fd 0 11 1 0 0 0 1 1",
    "map 0 0x100000000 1 1 9 0 0",
    "map 1 0x100001000 0 0 0 1 2",
    "socket 1 3",
    "call 0 f0 f1",
    "call 1 10 2 255",
]


def _build(tmp_path: Path, name: str, sources: list, flags: list) -> Path:
    program = tmp_path / name
    subprocess.run(
        ["cc", "-O1", "-pthread", *flags, "-o", str(program), *map(str, sources)],
        check=True,
        capture_output=True,
        text=True,
    )
    return program


def _reports(stdout: str) -> list[wire.Report]:
    return [r for r in map(wire.parse_report, stdout.splitlines()) if r is not None]


def test_every_keyword_is_defined_once_and_means_one_thing():
    header = (REPO / "tracer" / "include" / "scalecheck_wire.h").read_text()
    words = wire.keywords()
    assert len(words) == len(re.findall(r"^#define SC_WIRE_\w+ \"", header, re.MULTILINE))
    assert len(set(words.values())) == len(words), words
    assert words.keys() >= wire.REPORTS


def test_the_guest_driver_reads_back_every_field(tmp_path):
    program = _build(
        tmp_path,
        "echo",
        [DATA / "wire_guest_echo.c", REPO / "tracer/guest/parse.c", REPO / "tracer/common/wire.c"],
        [],
    )
    good = guest_render.render(testcase.Test("t", ["rename", "pwrite"], GUEST_TEST), 5)
    unknown = wire.test_text(6, [], [wire.Call(0, 0, "nosuch", []), wire.Call(1, 0, "read", [])])
    batch = tmp_path / "batch.txt"
    settings = wire.settings_line(
        repeats=2, timeout_ms=1234, fs="ext4", warmup=1, facts=1, state_check=1, state_leak=1
    )
    batch.write_text(settings + good + unknown)
    out = subprocess.run([program, batch], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "settings 2 1234 1 1 1 1 ext4"
    held = [line for line in lines if wire.parse_report(line) is None]
    # The warm-up's run (repeat 127, SC_WARMUP_REP), then the two repeats.
    for rep in (127, 0, 1):
        start = held.index(f"repeat 5 {rep}")
        assert held[start + 1 : start + 1 + len(GUEST_HELD)] == GUEST_HELD
    assert _reports(out) == [
        wire.Report("READY", rest="3"),
        wire.Report("WARMUP", 5),
        wire.Report("BEGIN", 5),
        wire.Report("BEGIN", 6),
        wire.Report("SETUP_FAILED", 6, -1, "unknown op"),
        wire.Report("HUNG", 7, 1, "call B did not return"),
        wire.Report("FAIL", rest="mount /t: No such device"),
        wire.Report("RELEASE", rest="6.1.0-56-amd64"),
        wire.Report("PERCPU_OFFSET", rest="1 ffff88801f200000"),
        wire.Report("DONE", rest="42"),
    ]
    # The kallsyms block holds the file it was given as it is.
    reports = _reports(out)
    assert reports[-2].percpu_offset() == ("1", 0xFFFF88801F200000)
    assert reports[-1].milliseconds() == 42 and wire.holds_done(out.encode())
    assert not wire.holds_done(out[: out.index("\nDONE")].encode())
    assert wire.kallsyms(out) == batch.read_text()


def _harness_program(tmp_path: Path) -> Path:
    subprocess.run(["make", "-s", "-C", str(REPO / "tracer/user")], check=True)
    wrap = ",".join(f"--wrap={name}" for name in program_build.WRAPPED_STATIC)
    adapter = tmp_path / "adapter.o"
    subprocess.run(
        [
            "cc",
            "-O1",
            "-I",
            str(REPO / "tracer/user"),
            "-c",
            "-o",
            str(adapter),
            DATA / "wire_adapter.c",
        ],
        check=True,
    )
    harness = [REPO / "tracer/user/build" / name for name in program_build.HARNESS_OBJECTS[False]]
    return _build(tmp_path, "harness", [*harness, adapter], ["-static", f"-Wl,{wrap}"])


def _symbol(program: Path, name: str) -> int:
    for line in subprocess.run(["nm", program], capture_output=True, text=True).stdout.split("\n"):
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise AssertionError(f"{name} not in {program}")


def test_the_harness_reads_back_every_field_and_reports_every_kind(tmp_path):
    program = _harness_program(tmp_path)
    arguments = {"put": ("key", "value"), "get": ("key",)}
    good = {
        "setup": {"table": {"2": {"present": True, "": 8}}, "name": "f0", "empty": []},
        "calls": [
            {"op": "put", "proc": 0, "args": {"key": 3, "value": "f0"}},
            {"op": "get", "proc": 1, "args": {"key": -2}},
        ],
    }
    failing = {"setup": {"fail": 1}, "calls": good["calls"]}
    static = _symbol(program, "wire_static")
    batch = tmp_path / "batch.txt"
    batch.write_text(
        wire.settings_line(repeats=2)
        + wire.line("SNAPSHOT", f"{static:#x}", 16)
        + program_worker.render(testcase.Test("a", [], good), 5, arguments, {"fd_base": 10})
        + program_worker.render(testcase.Test("b", [], failing), 6, arguments, {})
        + wire.test_text(7, [], [wire.Call(0, 0, "nosuch", []), wire.Call(1, 0, "get", [])])
    )
    done = subprocess.run([program, batch], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = done.stderr.decode().splitlines()
    assert seen.count("value constants.fd_base=10") == 2  # once per repeat
    for expected in ("value table.2.present=1", "value table.2=8", "value name=f0"):
        assert expected in seen
    assert "value empty=[]" in seen and "value fail=1" in seen
    assert seen.count("call put proc=0 key=3 value=f0") == 2
    assert seen.count("call get proc=1 key=-2") == 2
    reports = [r for r in wire.read_reports(io.BytesIO(done.stdout)) if r is not None]
    kinds = [r.kind for r in reports]
    assert kinds[0] == "READY" and kinds[-1] == "DONE"
    # Taken in pieces of any size, as a pipe gives them: the same reports, none cut in two.
    stream = wire.ReportStream()
    out = done.stdout
    pieces = [stream.feed(out[k : k + 7]) for k in range(0, len(out), 7)]
    assert [r for piece in pieces for r in piece if r is not None] == reports
    # Output that ends inside a snapshot's table (the program died) ends before that report.
    memory_at = out.index(b"\nMEM ") + 1
    cut = [r for r in wire.read_reports(io.BytesIO(out[: memory_at + 30])) if r is not None]
    assert cut == [r for r in reports if r.kind != "DONE"][: len(cut)]
    assert cut and cut[-1].kind != "MEMORY"
    results = [r for r in reports if r.kind == "RESULTS"]
    assert [(r.index, r.rep) for r in results] == [(5, 0), (5, 1)]
    assert results[0].results() == ('{"ret":3,"nlink":1,"fds":[10,11]}', '{"errno":"ENOENT"}')
    memory = {}
    for r in reports:
        if r.kind == "MEMORY" and (r.index, r.rep) == (5, 0):
            number, offset, table = r.snapshot()
            data = wire.snapshot_path(batch, number).read_bytes()[offset:]
            memory.update(wire.snapshot_memory(data, table))
    blocks = [
        block
        for r in reports
        if r.kind == "ALLOCATION" and r.index == 5
        for block in r.allocations()
    ]
    assert memory[static] == bytes(range(1, 17))
    assert any(size == 24 and memory.get(addr) == b"\x5a" * 24 for addr, size, _ in blocks)
    assert [r for r in reports if r.kind == "SETUP_FAILED"] == [
        wire.Report("SETUP_FAILED", 6, 0, "asked to fail"),
        wire.Report("SETUP_FAILED", 6, 1, "asked to fail"),
        wire.Report("SETUP_FAILED", 7, -1, "the adapter has no such operation"),
    ]
    assert [r.index for r in reports if r.kind == "BEGIN"] == [5, 6, 7]


def test_the_harness_walks_keys_in_first_seen_order_wherever_their_values_are(tmp_path):
    """sc_state_key goes on from the key it found last: a key met again further on (its
    values not next to each other) is not a new one, a walk of another path in between (the
    adapter's recursion) does not lose the first one's place, the second repeat walks the
    same keys (from the walks kept), a test of more paths than the harness keeps walks of
    (32) is walked whole, and the next test's setup is read, not the last's (whose first
    value, under no key, put the top's first key at its second)."""
    program = _harness_program(tmp_path)
    first = [(".h", 0), ("b.y", 1), ("a.x", 2), ("b.z", 3), ("a.x.q", 4), ("c", 5), ("b.y.r", 6)]
    many = [(f"k{i}.x", i) for i in range(40)]
    calls = [wire.Call(0, 0, "get", [("key", 1)]), wire.Call(1, 0, "get", [("key", 1)])]
    batch = tmp_path / "batch.txt"
    batch.write_text(
        wire.settings_line(repeats=2)
        + wire.test_text(1, [wire.line("VALUE", p, v) for p, v in first], calls)
        + wire.test_text(2, [wire.line("VALUE", p, v) for p, v in many], calls)
        + wire.test_text(3, [wire.line("VALUE", p, v) for p, v in (("d", 7), ("e", 8))], calls)
    )
    done = subprocess.run([program, batch], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = [line for line in done.stderr.decode().splitlines() if line.startswith("value ")]
    # Depth first, each level's keys in the order of their first value.
    first_seen = [
        "value b.y=1",
        "value b.y.r=6",
        "value b.z=3",
        "value a.x=2",
        "value a.x.q=4",
        "value c=5",
    ]
    many_seen = [f"value k{i}.x={i}" for i in range(40)]
    last_seen = ["value d=7", "value e=8"]
    assert seen == 2 * first_seen + 2 * many_seen + 2 * last_seen


def _symbol_range(program: Path, name: str) -> tuple[int, int]:
    """A function's code in a program: (start, end)."""
    listing = subprocess.run(["nm", "-S", program], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == name:
            return int(parts[0], 16), int(parts[0], 16) + int(parts[1], 16)
    raise AssertionError(f"{name} not in {program}")


def test_the_harness_reads_allocation_wrappers(tmp_path):
    """A WRAP line names a wrapper's code: a block it allocates is then named by its
    caller's site. The adapter's sc_setup allocates one block; named a wrapper, the site
    moves out of it."""
    program = _harness_program(tmp_path)
    setup_start, setup_end = _symbol_range(program, "sc_setup")
    test = {"setup": {}, "calls": [{"op": "get", "proc": 0, "args": {"key": 1}}] * 2}
    sites = []
    for wrappers in ([], [wire.line("ALLOC_WRAPPER", f"{setup_start:#x}", f"{setup_end:#x}")]):
        batch = tmp_path / "batch.txt"
        batch.write_text(
            wire.settings_line(repeats=1)
            + "".join(wrappers)
            + program_worker.render(testcase.Test("a", [], test), 0, {"get": ("key",)}, {})
        )
        done = subprocess.run([program, batch], capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        reports = [r for r in wire.read_reports(io.BytesIO(done.stdout)) if r is not None]
        sites += [
            site
            for report in reports
            if report.kind == "ALLOCATION"
            for _, size, site in report.allocations()
            if size == 24
        ]
    assert len(sites) == 2
    assert setup_start <= sites[0] < setup_end
    assert not setup_start <= sites[1] < setup_end


@pytest.mark.parametrize(
    "line",
    ["R 3 1 {} {}", "X 3 -1 why it failed", "B 4", "W 4", "DONE 17", "READY 3", "H 1 0 call A"],
)
def test_every_report_parses_back_to_its_line(line):
    report = wire.parse_report(line)
    assert report is not None
    fields = [wire.keyword(report.kind)]
    if report.index >= 0:
        fields.append(str(report.index))
    if report.kind in ("RESULTS", "SETUP_FAILED", "HUNG"):
        fields.append(str(report.rep))
    assert " ".join([*fields, report.rest] if report.rest else fields) == line


def test_other_lines_are_no_reports():
    assert wire.parse_report("ffffffff81000000 T _text") is None  # a kallsyms line
    assert wire.parse_report("[    0.000000] Linux version") is None


def test_raw_parts_are_read_whole_and_a_cut_one_ends_the_reports():
    block = struct.pack("<QQQ", 0x1000, 24, 0x401000)
    ranges = struct.pack("<QQQQ", 0x1000, 3, 0x2000, 2)
    out = b"B 5\nA 5 0 1\n" + block + b"MEM 5 0 2 3 40\n" + ranges + b"R 5 0 {} {}\n"
    reports = list(wire.read_reports(io.BytesIO(out)))
    assert [r.kind for r in reports] == ["BEGIN", "ALLOCATION", "MEMORY", "RESULTS"]
    assert reports[1].allocations() == [(0x1000, 24, 0x401000)]
    assert reports[2].snapshot() == (3, 40, [(0x1000, 3), (0x2000, 2)])
    assert wire.snapshot_memory(b"abcde", [(0x1000, 3), (0x2000, 2)]) == {
        0x1000: b"abc",
        0x2000: b"de",
    }
    cut = list(wire.read_reports(io.BytesIO(out[: out.index(ranges) + 20])))
    assert [r.kind for r in cut] == ["BEGIN", "ALLOCATION"]


def test_snapshots_go_to_files_a_test_whole_in_one_and_the_host_removes_those_passed(tmp_path):
    """The harness starts the next snapshot file at a test's first snapshot once the file
    holds SC_WIRE_SNAPSHOT_FILE_BYTES (16 MiB); each MEM report says where its bytes are;
    the host's reader removes every file before the one a report names."""
    program = _harness_program(tmp_path)
    code = _symbol(program, "main")  # 64 ranges of 4 KiB: 256 KiB a snapshot
    calls = [wire.Call(0, 0, "get", [("key", 1)]), wire.Call(1, 0, "get", [("key", 1)])]
    batch = tmp_path / "batch.txt"
    batch.write_text(
        wire.settings_line(repeats=2)
        + "".join(wire.line("SNAPSHOT", f"{code:#x}", 4096) for _ in range(64))
        + "".join(wire.test_text(i, [], calls) for i in range(40))
    )
    done = subprocess.run([program, batch], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    reports = [r for r in wire.read_reports(io.BytesIO(done.stdout)) if r and r.kind == "MEMORY"]
    where = {(r.index, r.rep): r.snapshot() for r in reports}
    assert len(where) == 80 and all(len(table) >= 64 for _, _, table in where.values())
    files = {index: number for (index, _), (number, _, _) in where.items()}
    assert all(where[index, 1][0] == number for index, number in files.items())
    assert sorted(set(files.values())) == [0, 1]
    first_in_1 = min(i for i, number in files.items() if number == 1)
    assert where[first_in_1, 0][1] == 0  # from the new file's start
    assert where[first_in_1 - 1, 1][1] < 16 << 20 <= where[first_in_1 - 1, 1][1] + 2 * 4096 * 64
    number, offset, table = where[first_in_1, 1]
    data = wire.snapshot_path(batch, number).read_bytes()[offset:]
    # main's first bytes, as the program file holds them
    assert wire.snapshot_memory(data, table)[code] == data[:4096]
    assert data[:16] in program.read_bytes()
    files_reader = program_worker._SnapshotFiles(batch)
    assert files_reader.read(0, 0, 4) == data[:4]
    files_reader.named(1)
    assert not wire.snapshot_path(batch, 0).exists() and wire.snapshot_path(batch, 1).exists()
    files_reader.remove_all()
    assert not list(tmp_path.glob("batch.txt.mem.*"))
