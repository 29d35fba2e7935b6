"""bench/thread_cost.py: a benchmark's CPU time per operation, function by function, with
its workers as threads and as processes, under perf's CPU clock."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import thread_cost  # noqa: E402

REPORT = """\
# Samples: 3K of event 'cpu-clock:ppp'
#
# Overhead       Samples  Symbol
# ........  ............  ..................
#
    40.00%          1200  [.] refcache_add
    10.00%           300  [k] __schedule
     0.50%            15  [.] sv6_core
"""


def test_perf_rows_become_samples_per_function_with_the_kernel_marked():
    assert thread_cost.samples_by_function(REPORT) == {
        "refcache_add": 1200,
        "__schedule [k]": 300,
        "sv6_core": 15,
    }


def test_each_function_gets_its_share_of_the_cpu_time_per_operation():
    result = {"extra": {"ops": 1000}, "harness": {"worker_cpu_seconds": 0.001}}
    per_op, by_function = thread_cost.ns_per_operation(result, {"a": 3, "b": 1})
    assert per_op == 1000.0 and by_function == {"a": 750.0, "b": 250.0}
    rows = thread_cost.compare({"threads": {"a": 750.0, "b": 250.0}, "processes": {"a": 700.0}})
    assert [(r["function"], r["extra_ns"]) for r in rows] == [("b", 250.0), ("a", 50.0)]


def test_o_anyfd_threads_and_processes_are_profiled_function_by_function(tmp_path):
    out = tmp_path / "cost.json"
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "thread_cost.py"), "sv6-openbench", "--mode",
         "anyfd", "--warmup", "0.4", "--duration", "0.6", "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    document = json.loads(out.read_text())
    for layout in ("threads", "processes"):
        assert document[layout]["ops_per_sec"] > 0 and document[layout]["ns_per_op"] > 0
        # the functions' shares add up to the CPU time per operation
        total = sum(row[f"{layout}_ns"] for row in document["functions"])
        assert abs(total - document[layout]["ns_per_op"]) < 1e-6 * total
    functions = {row["function"]: row for row in document["functions"]}
    # every open and close takes references through the core's cache, in both layouts
    assert functions["refcache_add"]["threads_ns"] > 0
    assert functions["refcache_add"]["processes_ns"] > 0
    assert "the threads spend" in run.stdout


def test_an_unknown_benchmark_is_refused_in_one_line():
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "thread_cost.py"), "no-such-benchmark"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert (
        run.stderr.strip() == "thread_cost: error: no benchmark 'no-such-benchmark' in the catalog"
    )


def test_a_machine_without_perf_is_told_in_one_line():
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "thread_cost.py"), "sv6-openbench"],
        capture_output=True, text=True, timeout=60,
        env={"PATH": str(Path(sys.executable).parent)},
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip() == "thread_cost: error: perf is not installed (Debian: linux-perf)"
