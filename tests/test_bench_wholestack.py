"""`scalecheck sharing --system`: a benchmark's two workers traced in the Linux target's guest,
user space and kernel together (real QEMU, real kernel, the tracer plugin with user=on)."""

import json
import subprocess
from pathlib import Path

import pytest

from scalecheck.bench import wholestack
from test_bench_sharing import SHARING, publish_catalog


def system_sharing(tmp_path: Path, benchmark: str, *args: str) -> dict:
    out = tmp_path / f"{benchmark}.json"
    run = subprocess.run(
        [*SHARING, benchmark, "--system", *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(out.read_text())
    assert document["system"] and "(threads, user and kernel)" in run.stdout
    for space in ("user", "kernel"):
        groups = [g for g in document["groups"] if g["space"] == space]
        counts = document["spaces"][space]
        assert counts["transfers"] == sum(sum(g["transfers"]) for g in groups)
        assert counts["invalidations"] == sum(sum(g["invalidations"]) for g in groups)
    return document


def test_the_passed_line_moves_once_per_operation_in_user_space(tmp_path):
    """line-transfer in the guest: its user line moves once per pass and is invalidated
    once per pass, as under qemu-x86_64; the kernel's lines (the first faults on the
    shared mapping) move a few times in the whole run."""
    document = system_sharing(tmp_path, "line-transfer", "--duration", "0.5")
    ops = document["operations"]
    line = next(g for g in document["groups"] if g["space"] == "user")
    assert "pass_line:W" in line["worker0"] and "pass_line:W" in line["worker1"]
    # (the regions also hold the few passes between the counted window and the stop)
    assert 0.95 <= sum(line["transfers"]) / ops <= 1.1, (line, ops)
    assert 0.95 <= sum(line["invalidations"]) / ops <= 1.1, (line, ops)
    kernel = document["spaces"]["kernel"]
    assert kernel["transfers"] < sum(line["transfers"]) / 2, document["spaces"]


def test_a_split_pair_is_named_in_user_space_on_both_sides(tmp_path):
    """pair-split in the guest: the two workers' lines of one pair share no line but count
    pair transfers; both are named as user data, though the kernel zeroed one of them
    first (its fault) through its direct map."""
    document = system_sharing(tmp_path, "pair-split", "--duration", "0.5")
    pairs = [g for g in document["pair_groups"] if "split_pair:W" in g["worker0"]]
    [pair] = [g for g in pairs if "split_pair:W" in g["worker1"]]
    assert pair["space"] == "user" and min(pair["pair_transfers"]) > 0, pair
    assert document["spaces"]["user"]["pair_transfers"] >= sum(pair["pair_transfers"])
    assert not [
        g
        for g in document["groups"]
        if g["space"] == "user"
        and "split_pair:W" in g["worker0"] + g["worker1"]
        and sum(g["transfers"]) > 2
    ], document["groups"]


def test_threads_that_fault_in_pages_share_their_mm_in_the_kernel(tmp_path):
    """faultzf's workers as threads, each mapping, touching and unmapping 256 KiB: one
    address space, so the kernel's mm_struct (mmap_lock, counters) moves between them,
    named by its slab cache's type and fields, with the fault path's functions."""
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "faults.toml").write_text(
        '[[benchmark]]\nname = "faults"\nbuild = "make -s -C native/benchmarks bin/faultzf"\n'
        'command = "native/benchmarks/bin/faultzf --workers {cores} --warmup {warmup}'
        ' --duration {duration} --dir {workdir} --param region=256K"\n'
    )
    document = system_sharing(tmp_path, "faults", "--catalog", str(catalog), "--duration", "0.5")
    kernel = [g for g in document["groups"] if g["space"] == "kernel"]
    mm = [g for g in kernel if g["data"].startswith("mm_struct.")]
    assert mm, [g["data"] for g in kernel[:20]]
    assert any("mmap_lock" in g["data"] for g in mm), [g["data"] for g in mm]
    assert sum(sum(g["transfers"]) + sum(g["invalidations"]) for g in mm) > 0
    code = {c.split(":")[0] for g in mm for c in g["worker0"] + g["worker1"]}
    assert code & {"do_mmap", "mmap_region", "down_write_killable", "__handle_mm_fault"}, code
    assert document["spaces"]["kernel"]["transfers"] > document["spaces"]["user"]["transfers"]


def test_the_sv6_workers_make_their_arenas_and_epoch_slots_before_their_loops(tmp_path):
    """sv6-sockbench's threads: each makes its glibc arena (mmap, mprotect under the mm's
    mmap_lock) and claims its epoch slot and pthread key in its setup (arena.h's
    worker_ready), so neither the kernel's VMA lines nor those first-use lines are shared
    in the loops."""
    document = system_sharing(tmp_path, "sv6-sockbench", "--mode", "unordered", "--duration", "0.3")
    code = {c.split(":")[-2] for g in document["groups"] for c in g["worker0"] + g["worker1"]}
    assert not code & {"do_mmap", "mmap_region", "mprotect_fixup", "vm_area_alloc"}, code
    assert not code & {"my_slot.part.0", "pthread_key_create", "memalign"}, code
    assert document["operations"] > 0


def test_writes_to_a_line_the_other_thread_only_reads_are_invalidations_in_the_guest(tmp_path):
    """empty's publish-line in the guest: worker 0 stores to a line worker 1 only loads.
    Each store finds the line held by both vCPUs (an invalidation, worker 0's, no data
    moved); each load after a store brings it over (a transfer, worker 1's)."""
    catalog = publish_catalog(tmp_path)
    document = system_sharing(tmp_path, "publish", "--catalog", str(catalog), "--duration", "0.3")
    # (the kernel zeroes the line's page at its first fault, in whichever worker's region
    # touched it first: clear_page_rep, one write)
    [line] = [
        g
        for g in document["groups"]
        if g["space"] == "user"
        and set(g["worker0"]) - {"clear_page_rep:W"} == {"publish_line:W"}
        and set(g["worker1"]) - {"clear_page_rep:W"} == {"publish_line:R"}
    ]
    writer, reader = line["invalidations"][0], line["transfers"][1]
    # (how often the reader runs between the writer's stores depends on the host's load)
    assert writer > 0 and line["invalidations"][1] <= 1 and line["transfers"][0] <= 1
    assert abs(writer - reader) <= 1


def test_the_guest_init_runs_the_command_pinned_with_its_environment():
    script = wholestack.init_script(
        ["prog", "--dir", "it's"], Path("/repo"), {"GLIBC_TUNABLES": "a=1:b=2"}, 2
    )
    assert "export 'GLIBC_TUNABLES=a=1:b=2'\n" in script
    assert "taskset -c 1-2 'prog' '--dir' 'it'\\''s' >/t/out" in script
    # N workers: the guest's CPUs 1 to N (CPU 0 keeps the housekeeping)
    assert "taskset -c 1-4 'prog'" in wholestack.init_script(["prog"], Path("/"), {}, 4)
    # the guest stays up after the command, for the host to read its memory
    assert script.rstrip().endswith("exec $B sleep 1000000")


def test_processes_without_system_is_refused():
    run = subprocess.run(
        [*SHARING, "line-transfer", "--processes"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "--processes needs --system" in run.stderr


class FakeSession:
    """A fake guest session for the unit tests of GuestRun.wait: its console is a file the
    test writes; nothing ever exits or traces."""

    def __init__(self, console: Path):
        self.console_path = console

    def poll(self):
        return None, []

    def exited(self) -> bool:
        return False


def fake_run(console: Path) -> wholestack.GuestRun:
    run = wholestack.GuestRun.__new__(wholestack.GuestRun)  # no boot
    run.session = FakeSession(console)
    return run


def test_a_guest_that_never_reaches_its_init_is_a_boot_hang_not_a_slow_benchmark(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(wholestack, "BOOT_TIMEOUT", 0.3)
    console = tmp_path / "console.log"
    console.write_text("SeaBIOS (version 1.16.2)\nBooting from ROM..")
    with pytest.raises(wholestack.BootHang, match=r"did not reach its init within 0\.3 s"):
        fake_run(console).wait(60)
    console.write_text(f"Booting from ROM..\n{wholestack.STARTED}\n")
    with pytest.raises(wholestack.UserError, match=r"ran past 0\.3 s") as raised:
        fake_run(console).wait(0.3)
    assert not isinstance(raised.value, wholestack.BootHang)


class ScriptedRun:
    """A fake GuestRun whose wait raises or returns what the test scripted."""

    def __init__(self, outcome):
        self.outcome, self.stopped = outcome, False

    def wait(self, timeout):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    def stop(self):
        self.stopped = True


def test_a_boot_hang_is_booted_once_more_and_said(tmp_path, capsys):
    runs = iter([ScriptedRun(wholestack.BootHang("hung")), ScriptedRun(("out", []))])
    made = []

    def start(directory):
        made.append((directory, next(runs)))
        return made[-1][1]

    run, stdout, regions = wholestack.run_to_end(start, tmp_path, 10)
    assert (stdout, regions) == ("out", []) and run is made[1][1] and not run.stopped
    assert made[0][1].stopped and made[0][0] != made[1][0] and made[1][0].is_dir()
    assert "hung; booting it again" in capsys.readouterr().err

    runs = iter([ScriptedRun(wholestack.BootHang("hung")) for _ in range(2)])
    made.clear()
    with pytest.raises(wholestack.BootHang, match="hung, twice"):
        wholestack.run_to_end(start, tmp_path, 10)
    assert all(r.stopped for _, r in made) and len(made) == 2

    runs = iter([ScriptedRun(wholestack.UserError("the benchmark exited 1"))])
    made.clear()
    with pytest.raises(wholestack.UserError, match="exited 1"):
        wholestack.run_to_end(start, tmp_path, 10)
    assert len(made) == 1 and made[0][1].stopped
