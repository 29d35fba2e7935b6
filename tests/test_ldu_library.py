"""The LDU library and its baselines (native/ldu): sequential model checks, concurrent
linearizability checks, the alternation precondition, and the same checks under
ThreadSanitizer and AddressSanitizer/LeakSanitizer.  The checks themselves are C
(native/ldu/tests/ldu_check.c); these tests build and drive them."""

import platform
import subprocess
from pathlib import Path

import pytest

LDU = Path(__file__).resolve().parents[1] / "native" / "ldu"
IMPLEMENTATIONS = ["ldu-percore", "ldu-global", "rwlock", "harris"]


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(LDU), "checks"], check=True, timeout=600)


def ldu_check(variant: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    command = [str(LDU / "bin" / variant / "ldu_check"), *args]
    if variant == "tsan":
        # gcc 12's ThreadSanitizer cannot map its shadow under high mmap randomization.
        command = ["setarch", platform.machine(), "-R", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def assert_clean(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Sanitizer" not in result.stderr, result.stderr[-3000:]
    assert "ok," in result.stdout


@pytest.mark.parametrize("variant", ["release", "debug"])
@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_sequential_walks_match_the_model(impl, variant):
    assert_clean(ldu_check(variant, "sequential", "--impl", impl, "--ops", "100000"))


@pytest.mark.parametrize("impl", ["ldu-percore", "ldu-global", "rwlock"])
def test_the_trees_shape_does_not_follow_the_objects_addresses(impl):
    """The same keys in the same order at two places give one tree: which objects sit
    near the root (and are written by every update's path) is the same in every run,
    wherever the allocator put each worker's objects."""
    assert_clean(ldu_check("release", "shape", "--impl", impl, "--objects", "512"))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_concurrent_walks_see_each_objects_last_update(impl):
    result = ldu_check("release", "concurrent", "--impl", impl, "--threads", "4", "--seconds", "1")
    assert_clean(result)
    # The run really interleaved updates and checked walks.
    counts = result.stdout.split(", ")
    updates = int(counts[2].split()[0])
    checked = int(counts[4].split()[0])
    assert updates > 1000 and checked > 1000, result.stdout
    # LDU walks that found the lock taken read the queued logs instead of applying
    # them; the run must have exercised that path too.
    merged = int(counts[6].split()[0])
    assert (merged > 0) == impl.startswith("ldu"), result.stdout


@pytest.mark.parametrize("variant", ["release", "tsan"])
@pytest.mark.parametrize("impl", ["ldu-percore", "ldu-global"])
def test_ldu_walks_merging_many_unapplied_logs(impl, variant):
    """Many objects per thread: walks that cannot take the write lock then often find
    more than 32 queued inserts, which they sort with qsort instead of insertion sort."""
    assert_clean(
        ldu_check(
            variant,
            "concurrent",
            "--impl",
            impl,
            "--threads",
            "4",
            "--pairs",
            "300",
            "--seconds",
            "1",
            timeout=300,
        )
    )


def test_rwlock_walks_are_snapshots():
    """rwlock walks never miss both objects of a pair (the checker exits 1 if one does)."""
    result = ldu_check("release", "concurrent", "--impl", "rwlock", "--seconds", "0.5")
    assert_clean(result)
    assert " 0 of " in result.stdout


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_debug_build_rejects_a_double_insert(impl):
    result = ldu_check("debug", "precondition", "--impl", impl)
    assert result.returncode != 0
    assert "must alternate insert, remove" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["concurrent", "--impl", "btree"], "unknown implementation btree"),
        (["concurrent", "--impl", "rwlock", "--threads", "many"], "--threads"),
        (["sideways", "--impl", "rwlock"], "unknown command sideways"),
        (["sequential"], "--impl is required"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(args, message):
    result = ldu_check("release", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_threadsanitizer_finds_no_race(impl):
    assert_clean(
        ldu_check(
            "tsan", "concurrent", "--impl", impl, "--threads", "3", "--seconds", "1", timeout=300
        )
    )
    assert_clean(ldu_check("tsan", "sequential", "--impl", impl, "--ops", "20000", timeout=300))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_address_and_leak_sanitizer_find_nothing(impl):
    # Few pairs and many walks: churned objects are freed right after objset_barrier
    # while other threads' walks read what they visit, so a barrier that returned
    # early would show up as a use-after-free.
    assert_clean(
        ldu_check(
            "asan",
            "concurrent",
            "--impl",
            impl,
            "--pairs",
            "4",
            "--read-pct",
            "50",
            "--seconds",
            "1",
            timeout=300,
        )
    )
    assert_clean(ldu_check("asan", "sequential", "--impl", impl, "--ops", "20000", timeout=300))


def test_leak_sanitizer_is_active_in_this_build(tmp_path):
    """Guards the test above: the same flags must report a deliberate leak."""
    source = tmp_path / "leak.c"
    source.write_text(
        "#include <stdlib.h>\nvoid *volatile keep;\n"
        "int main(void) { keep = malloc(64); keep = 0; return 0; }\n"
    )
    binary = tmp_path / "leak"
    subprocess.run(
        ["gcc", "-O1", "-g", "-fsanitize=address,undefined", str(source), "-o", str(binary)],
        check=True,
    )
    result = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "LeakSanitizer: detected memory leaks" in result.stderr
