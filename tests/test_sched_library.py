"""ulsched's C unit tests (native/sched/tests/test_ulsched.c), plain and under
AddressSanitizer and ThreadSanitizer: no lost wake-ups in park/unpark races, joins
return every thread, semaphore counts stay right, clean start/stop."""

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCHED = REPO / "native" / "sched"
TESTS = ["park_unpark_stress", "idle_wakeups", "join_all", "semaphore_counts", "shutdown"]


def make(*targets: str) -> None:
    completed = subprocess.run(
        ["make", "-s", "-C", str(SCHED), *targets], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr


def run_tests(binary: Path, *args: str) -> subprocess.CompletedProcess:
    completed = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    passed = [line.split()[1] for line in completed.stdout.splitlines() if line.startswith("ok ")]
    assert passed == TESTS, completed.stdout
    return completed


@pytest.mark.parametrize("processors", [1, 2, 4])
def test_unit_tests_pass(processors):
    make("build/test_ulsched")
    run_tests(SCHED / "build" / "test_ulsched", "-p", str(processors))


@pytest.mark.parametrize("sanitizer", ["asan", "tsan"])
def test_unit_tests_pass_under_sanitizer(sanitizer):
    make(f"build/{sanitizer}/test_ulsched")
    completed = run_tests(SCHED / "build" / sanitizer / "test_ulsched", "-q")
    assert "Sanitizer" not in completed.stderr, completed.stderr


def test_a_lost_wakeup_is_caught(tmp_path):
    """The wake-up test must be able to fail: a scheduler that makes threads ready
    without waking a sleeping processor loses wake-ups, and the test reports it."""
    source = (SCHED / "src" / "ulsched.c").read_text()
    call = "        wake_one_sleeper();\n"
    assert source.count(call) == 1
    (tmp_path / "ulsched.c").write_text(source.replace(call, "        ;\n"))
    binary = tmp_path / "test_ulsched"
    subprocess.run(
        [
            "gcc",
            "-std=gnu11",
            "-O2",
            "-I",
            str(SCHED / "include"),
            str(tmp_path / "ulsched.c"),
            str(SCHED / "src" / "switch.S"),
            str(SCHED / "tests" / "test_ulsched.c"),
            "-lpthread",
            "-o",
            str(binary),
        ],
        check=True,
        timeout=120,
    )
    completed = subprocess.run(
        [str(binary), "-p", "2", "idle_wakeups"], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 1
    assert "lost wake-up" in completed.stderr
