"""libsv6 (native/libsv6): each component's unit checks, its concurrency stress under
ThreadSanitizer and AddressSanitizer/LeakSanitizer, random operation sequences compared
with a sequential reference of the POSIX model, and short runs of the benchmarks built on
it.  The checks themselves are C (native/libsv6/tests/); these tests build and drive them."""

import json
import platform
import re
import subprocess
from pathlib import Path

import pytest

LIBSV6 = Path(__file__).resolve().parents[1] / "native" / "libsv6"
COMPONENTS = ["alloc", "refcache", "fdtable", "dir", "radix", "usock", "posix"]


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(LIBSV6), "all", "checks"], check=True, timeout=900)


def sv6_check(variant: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    command = [str(LIBSV6 / "bin" / variant / "sv6_check"), *args]
    if variant == "tsan":
        # gcc 12's ThreadSanitizer cannot map its shadow under high mmap randomization.
        command = ["setarch", platform.machine(), "-R", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def assert_clean(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Sanitizer" not in result.stderr, result.stderr[-3000:]
    assert result.stdout.startswith("ok,"), result.stdout
    return result.stdout


def counts(line: str) -> list[int]:
    """The numbers of an "ok, ..." line, in order."""
    return [int(number) for number in re.findall(r"\d+", line)]


@pytest.mark.parametrize("variant", ["release", "tsan", "asan"])
@pytest.mark.parametrize("component", COMPONENTS)
def test_unit_checks(component, variant):
    assert_clean(sv6_check(variant, f"{component}-unit"))


@pytest.mark.parametrize("variant", ["release", "tsan", "asan"])
@pytest.mark.parametrize("component", COMPONENTS)
def test_stress_under_threads(component, variant):
    """Release: the checks of each stress hold; tsan: no data race or lock-order
    inversion; asan: no use after free while other threads reclaim, nothing leaked."""
    line = assert_clean(
        sv6_check(variant, f"{component}-stress", "--threads", "3", "--seconds", "1")
    )
    # The run really did concurrent work.
    assert counts(line)[0] > 1000, line


@pytest.mark.parametrize("variant", ["release", "tsan", "asan"])
def test_ebr_bounds_what_a_stalled_reader_holds_back(variant):
    """A thread inside a section (as if preempted) while another retires 4 x
    EBR_PENDING_MAX callbacks: the check fails when more than 2 x EBR_PENDING_MAX
    wait at once (each of them waited before the bound), or when one never runs."""
    line = assert_clean(sv6_check(variant, "ebr-stall"))
    retired, most_waiting = counts(line)[:2]
    assert retired > 2 * most_waiting, line


def test_refcache_stress_moves_references_between_cores():
    line = assert_clean(sv6_check("release", "refcache-stress", "--threads", "3", "--seconds", "1"))
    created, handoffs, upgrades, reads = counts(line)[:4]
    # Objects died and were freed while references moved between cores, weak
    # references were upgraded and link-count style reads ran alongside.
    assert created > 1000 and handoffs > 1000 and upgrades > 100 and reads > 100, line


def test_unordered_socket_receivers_steal():
    line = assert_clean(sv6_check("release", "usock-stress", "--threads", "4", "--seconds", "1"))
    received, stolen = counts(line)[:2]
    assert received > 1000 and stolen > 0, line


@pytest.mark.parametrize("variant", ["release", "debug", "tsan", "asan"])
def test_two_senders_into_one_socket_share_no_line(variant):
    """Sends on cores 1 and 2 into one unordered socket with room (capacity 2, the
    model's; 32; none): neither writes a line the other writes, neither reads or writes
    the other's partition (fenced with a pattern any read or write would trip), and
    2,000 rounds of the two at once all succeed."""
    line = assert_clean(sv6_check(variant, "usock-two-senders"))
    assert counts(line)[-1] == 2000, line


@pytest.mark.parametrize("seed", ["1", "2", "3"])
def test_conformance_with_the_reference(seed):
    line = assert_clean(sv6_check("release", "conformance", "--ops", "100000", "--seed", seed))
    per_operation = counts(line)[2:]
    assert len(per_operation) == 22 and min(per_operation) > 1000, line


@pytest.mark.parametrize("variant", ["tsan", "asan"])
def test_conformance_under_sanitizers(variant):
    assert_clean(sv6_check(variant, "conformance", "--ops", "5000"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["sideways"], "unknown check sideways"),
        (["dir-stress", "--threads", "many"], "bad value for --threads"),
        (["dir-stress", "--threads", "0"], "--threads must be 1 to 64"),
        (["dir-stress", "--fast"], "unknown option --fast"),
        ([], "usage: sv6_check"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(args, message):
    result = sv6_check("release", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_leak_sanitizer_is_active_in_this_build():
    """Guards the leak checks above: the asan build reports a world left behind."""
    assert_clean(sv6_check("release", "leak-on-purpose"))
    result = sv6_check("asan", "leak-on-purpose")
    assert result.returncode != 0
    assert "LeakSanitizer: detected memory leaks" in result.stderr
    assert "sv6_world_create" in result.stderr


def run_benchmark(benchmark: str, *args: str) -> dict:
    """A short run of bin/sv6-BENCHMARK that must end cleanly (the world torn down, exit
    0): its harness JSON line."""
    result = subprocess.run(
        [str(LIBSV6 / "bin" / f"sv6-{benchmark}"), "--warmup", "0.1", "--duration", "0.3", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "benchmark, mode",
    [
        ("statbench", "fstat-refcache"),
        ("statbench", "fstatx"),
        ("statbench", "fstat-shared"),
        ("openbench", "lowest"),
        ("openbench", "anyfd"),
        ("mailbench", "regular"),
        ("mailbench", "commutative"),
        ("sockbench", "ordered"),
        ("sockbench", "unordered"),
        ("sockbench", "unordered-capacity"),
    ],
)
def test_benchmarks_run_on_the_harness(benchmark, mode):
    """A short run of each mode at 2 workers: the harness's JSON line, work counted."""
    run = run_benchmark(benchmark, "--workers", "2", "--mode", mode)
    assert run["benchmark"] == f"sv6-{benchmark}" and run["mode"] == mode
    assert run["workers"] == 2 and run["ops_per_sec"] > 0, run
    assert run["harness"]["workers_are"] == "threads", run
    if benchmark == "statbench":
        assert run["extra"]["links"] > 0, run  # the linker really ran beside the stats


@pytest.mark.parametrize(
    "benchmark, mode, params",
    [
        ("openbench", "anyfd", []),
        ("statbench", "fstatx", ["--param", "layout=mixed"]),
        ("mailbench", "commutative", []),
        ("sockbench", "unordered", []),
        ("sockbench", "unordered-capacity", []),
    ],
)
def test_controls_run_each_worker_as_a_process_of_its_own(benchmark, mode, params):
    """--processes (the *-private controls): two worker processes, each with its own copy
    of the world, do the work."""
    run = run_benchmark(benchmark, "--processes", "--workers", "2", "--mode", mode, *params)
    assert run["harness"]["workers_are"] == "processes" and run["ops_per_sec"] > 0, run


def test_statbench_mixed_layout_gives_a_one_worker_point():
    """With --param layout=mixed one worker both stats and links (a baseline for two)."""
    run = run_benchmark(
        "statbench", "--workers", "1", "--mode", "fstatx", "--param", "layout=mixed"
    )
    assert run["extra"]["stat_workers"] == 1 and run["extra"]["links"] > 0, run
