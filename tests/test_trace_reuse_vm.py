"""The guest driver keeps its test processes from one repeat to the next: each repeat must
find them exactly as freshly forked ones would be (fds, mappings, cwd, signal state,
scheduling policy). With
settings state_check=1 the driver builds every repeat's processes a second time the old
way, in fresh children, and reports a setup failure naming what differs. Here on tests of
every op (exec, fork, posix_spawn, sockets, pipes, mappings, both calls in one process): no
difference; and with
state_leak=1, where the kept processes deliberately keep an fd, a mapping, another cwd, a
signal disposition or a scheduling policy (by test index in turn), the check names exactly
that one."""

import json
import shutil
import time
from pathlib import Path

import pytest

from scalecheck.run import testcase, wire
from scalecheck.run.linux import guest_render, vm
from scalecheck.run.linux.guest_build import ensure_built

DATA = Path(__file__).resolve().parent / "data"
PARTS = ["fds", "mappings", "cwd", "signals", "scheduling"]

pytestmark = pytest.mark.skipif(
    not shutil.which(vm.QEMU) or not list(Path("/boot").glob("vmlinuz-*")),
    reason="needs qemu-system-x86 and linux-image-amd64 (scripts/setup.d/20-tracer.sh)",
)


def _runnable(test: dict) -> bool:
    try:
        guest_render.render(testcase.from_dict(test), 0)
    except testcase.NotRunnable:
        return False
    return True


def _tests() -> list[dict]:
    tests = []
    for name in (
        "trace_ops.jsonl",
        "trace_exec.jsonl",
        "trace_variants.jsonl",
        "calibration.jsonl",
    ):
        tests += map(json.loads, (DATA / name).read_text().splitlines()[1:])
    return [t for t in tests if _runnable(t)]


def _done(session: vm.GuestSession) -> bool:
    return session.out_path.exists() and wire.holds_done(session.out_path.read_bytes())


def _boot(workdir: Path, tests: list[dict], **settings) -> list[wire.Report]:
    built = ensure_built()
    text = wire.settings_line(repeats=2, timeout_ms=5000, fs="tmpfs", warmup=0, **settings)
    text += "".join(guest_render.render(testcase.from_dict(t), i) for i, t in enumerate(tests))
    session = vm.GuestSession(
        workdir, vm.default_kernel(), "", built["base_image"], text, None, None
    )
    try:
        deadline = time.monotonic() + 600
        while not session.exited() and time.monotonic() < deadline and not _done(session):
            time.sleep(0.2)
    finally:
        session.stop()
    lines = session.out_path.read_text(errors="replace").splitlines()
    reports = [r for r in map(wire.parse_report, lines) if r]
    assert any(r.kind == "DONE" for r in reports), session.exit_description()
    return reports


def test_kept_processes_match_fresh_ones(tmp_path):
    tests = _tests()
    reports = _boot(tmp_path, tests, state_check=1)
    failed = [r for r in reports if r.kind in ("SETUP_FAILED", "HUNG")]
    assert not failed, failed
    results = {(r.index, r.rep) for r in reports if r.kind == "RESULTS"}
    assert results == {(index, rep) for index in range(len(tests)) for rep in range(2)}


def test_a_leftover_fails_the_check_and_names_it(tmp_path):
    # Tests with both processes and no exec, so the kept processes run every repeat.
    tests = [t for t in _tests() if "exec" not in t["pair"]][: len(PARTS)]
    reports = _boot(tmp_path, tests, state_check=1, state_leak=1)
    why = {r.index: r.rest for r in reports if r.kind == "SETUP_FAILED" and r.rep == 0}
    assert sorted(why) == list(range(len(tests)))
    for index, reason in why.items():
        named = [part for part in PARTS if reason.endswith(" " + part) or f" {part} " in reason]
        assert named == [PARTS[index % len(PARTS)]], reason
