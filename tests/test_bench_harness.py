"""The C harness and the kernel benchmarks built on it, run directly for a fraction of a second."""

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "native" / "benchmarks"
BIN = BENCHMARKS / "bin"
SHORT = ["--warmup", "0.1", "--duration", "0.3"]

# Every benchmark and mode the kernel catalog runs.
CASES = [
    ("statbench", "fstat"),
    ("statbench", "statx"),
    ("openbench", None),
    ("mailbench", "fork-exec"),
    ("mailbench", "posix-spawn"),
    ("doexec", "static-private"),
    ("doexec", "static-shared"),
    ("doexec", "dynamic-private"),
    ("doexec", "dynamic-shared"),
    ("faultzf", None),
    ("docomp", None),
    ("procbench", "fork-exit"),
    ("procbench", "fork-exec"),
    ("procbench", "fork-sh"),
    ("sockbench", "dgram-shared"),
    ("sockbench", "dgram"),
    ("sockbench", "stream"),
]

# A benchmark written only against harness.h, as another family would: it exercises
# per-worker setup, an extra sum, report() fields, parameters, and failing in a worker.
API_BENCHMARK = r"""
#include "harness.h"
#include <stdlib.h>

struct counter_state { long fail_after; };

static void worker_setup(struct hc_worker *w)
{
    struct counter_state *state = malloc(sizeof *state);
    state->fail_after = hc_param_long(w->run, "fail_after", -1);
    w->data = state;
}

static void worker(struct hc_worker *w)
{
    struct counter_state *state = w->data;
    long done = 0;
    while (hc_running(w)) {
        if (state->fail_after >= 0 && done++ >= state->fail_after && w->index == 1)
            hc_fail("worker %d gave up on purpose", w->index);
        hc_count(w);
        hc_add_extra(w, 0, 2);
    }
}

static void report(struct hc_run *run)
{
    hc_extra_number(run, "twice_ops_check",
                    (double)hc_measured_extra(run, 0) / hc_measured_ops(run));
    hc_extra_string(run, "label", hc_param(run, "label", "none"));
    hc_extra_bool(run, "processes", run->processes);
}

static const char *const modes[] = {"plain", "other", NULL};
static const char *const sums[] = {"doubled", NULL};
const struct hc_benchmark hc_benchmark = {
    .name = "apitest", .description = "harness API test", .modes = modes, .extra_sums = sums,
    .worker_setup = worker_setup, .worker = worker, .report = report,
};
"""


@pytest.fixture(scope="session")
def built():
    subprocess.run(["make", "-s", "-C", str(BENCHMARKS)], check=True)
    return BIN


@pytest.fixture(scope="session")
def api_benchmark(built, tmp_path_factory):
    directory = tmp_path_factory.mktemp("apitest")
    source = directory / "apitest.c"
    source.write_text(API_BENCHMARK)
    program = directory / "apitest"
    harness = REPO / "native" / "harness"
    subprocess.run(
        [
            "cc",
            "-O2",
            "-Wall",
            "-Werror",
            f"-I{harness}",
            str(source),
            str(harness / "harness.c"),
            "-o",
            str(program),
            "-lpthread",
            "-lm",
        ],
        check=True,
    )
    return program


def run_program(program, *args, tmpdir=None):
    env = dict(os.environ, TMPDIR=str(tmpdir)) if tmpdir else None
    return subprocess.run(
        [str(program), *args], capture_output=True, text=True, timeout=60, env=env
    )


def result_of(completed) -> dict:
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def result_not_starved(program, *args, tmpdir=None) -> dict:
    """A result with operations counted.  On a machine shared with programs running hundreds
    of threads per CPU, a pinned worker can get no CPU at all for a 0.3 s window (its
    harness.worker_cpu_share is then ~0); a benchmark that is broken stays at 0 every time."""
    for _ in range(3):
        result = result_of(run_program(program, *args, tmpdir=tmpdir))
        if result["extra"]["ops"] > 0:
            break
    return result


@pytest.mark.parametrize("name,mode", CASES, ids=[f"{n}-{m}" if m else n for n, m in CASES])
def test_benchmark_json_validates(built, tmp_path, name, mode):
    args = ["--workers", "2", *SHORT] + (["--mode", mode] if mode else [])
    result = result_not_starved(built / name, *args, tmpdir=tmp_path)
    assert result["benchmark"] == name
    assert result["mode"] == (mode or "default")
    assert result["runtime"] == "" and result["workers"] == 2
    assert result["ops_per_sec"] > 0
    assert result["samples"] and all(s >= 0 for s in result["samples"])
    assert result["cycles_per_op"] > 0
    assert result["extra"]["ops"] > 0 and 0.29 < result["extra"]["seconds"] < 1.0
    # CPU time the workers got: positive, and never more than their CPUs could give them.
    # CPU clocks (scheduler clock) and the window (CLOCK_MONOTONIC) are different clocks, so
    # a fully busy worker (doexec re-execs without ever sleeping) can read a little over 1.
    assert 0 < result["harness"]["worker_cpu_share"] <= 1.02
    topology = result["harness"]["topology"]
    assert [t["worker"] for t in topology] == [0, 1]
    assert len({t["cpu"] for t in topology}) == min(2, len(os.sched_getaffinity(0))), (
        "workers must get distinct CPUs"
    )
    machine = result["machine"]
    assert machine["kernel"] == os.uname().release and machine["online_cpus"] == os.cpu_count()
    assert isinstance(machine["mitigations"], dict) and machine["cpu_model"]
    assert list(tmp_path.iterdir()) == [], "the harness's own scratch directory must be removed"


def test_benchmark_specific_figures(built):
    stat = result_not_starved(built / "statbench", "--workers", "2", *SHORT)
    assert stat["extra"]["link_unlinks"] > 0 and stat["extra"]["link_workers"] == 1
    # The mixed layout: one worker both stats and links.
    mixed = result_not_starved(built / "statbench", "--param", "layout=mixed", *SHORT)
    assert mixed["extra"]["link_unlinks"] > 0 and mixed["extra"]["stat_workers"] == 1
    bad = run_program(built / "statbench", "--param", "layout=diagonal", *SHORT)
    assert bad.returncode != 0 and "layout=diagonal: expected split or mixed" in bad.stderr
    assert (
        result_of(run_program(built / "openbench", *SHORT))["extra"]["lowest_fd_semantics"] is True
    )
    faultzf = result_not_starved(built / "faultzf", *SHORT, "--param", "region=1M")
    assert faultzf["extra"]["region_bytes"] == 1 << 20
    # GB/s is regions/s times the region size.
    assert faultzf["ops_per_sec"] == pytest.approx(
        faultzf["extra"]["regions_per_sec"] * (1 << 20) / 1e9
    )
    docomp = result_not_starved(built / "docomp", *SHORT)
    assert docomp["extra"]["execs_per_compile"] >= 2  # the driver and at least cc1
    mail = result_not_starved(built / "mailbench", "--workers", "2", *SHORT)
    assert mail["extra"]["delivered_whole_run"] > 0
    # Every round trip's request is served once, by its client or another worker (the
    # window's edges cut at most one round trip per worker at each end).
    for mode, others in (("dgram", False), ("dgram-shared", True)):
        sock = result_not_starved(built / "sockbench", "--workers", "2", "--mode", mode, *SHORT)
        served = sock["extra"]["served_own"] + sock["extra"]["served_other"]
        assert abs(served - sock["extra"]["ops"]) <= 4, sock["extra"]
        assert others or sock["extra"]["served_other"] == 0, sock["extra"]


def test_api_counts_extra_sums_and_report_fields(api_benchmark):
    for kind in ("--threads", "--processes"):
        result = result_not_starved(
            api_benchmark, "--workers", "2", kind, *SHORT, "--mode", "other", "--param", "label=x y"
        )
        extra = result["extra"]
        assert result["mode"] == "other"
        assert extra["doubled"] == pytest.approx(2 * extra["ops"], rel=1e-3)
        assert extra["twice_ops_check"] == pytest.approx(2, rel=1e-3)
        assert extra["label"] == "x y" and extra["processes"] is (kind == "--processes")
        assert result["harness"]["workers_are"] == kind[2:]


@pytest.mark.parametrize("kind", ["--threads", "--processes"])
def test_worker_failure_ends_the_run_with_its_message(api_benchmark, kind):
    completed = run_program(
        api_benchmark, "--workers", "2", kind, *SHORT, "--param", "fail_after=1000"
    )
    assert completed.returncode == 1
    assert (
        completed.stderr.strip().splitlines()[-1] == "apitest: error: worker 1 gave up on purpose"
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (["--mode", "nope"], "unknown mode nope"),
        (["--workers", "0"], "--workers 0: expected a whole number"),
        (["--duration", "0"], "--duration must be more than 0"),
        (["--warmup", "-1"], "--warmup -1: expected a number of seconds"),
        (["--bogus"], "unknown argument --bogus"),
        (["--threads", "--processes"], "exclude each other"),
        (["--param", "novalue"], "expected KEY=VALUE"),
    ],
)
def test_bad_arguments_get_one_line(built, args, message):
    completed = run_program(built / "statbench", *args)
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1 and message in completed.stderr
    assert completed.stderr.startswith("statbench: error: ")


def test_doexec_refuses_threads(built):
    completed = run_program(built / "doexec", "--threads")
    assert completed.returncode == 2 and "can only be processes" in completed.stderr


@pytest.mark.parametrize(
    "program,args,message",
    [
        ("docomp", ["--param", "cc=/nonexistent/cc"], "no C compiler: /nonexistent/cc not found"),
        ("mailbench", ["--mode", "posix-spawn+any-fd"], "O_ANYFD, which Linux does not have"),
        ("mailbench", ["--mode", "fork-exec+unordered-socket"], "no unordered datagram socket"),
        ("faultzf", ["--param", "region=12"], "must be at least one page"),
    ],
)
def test_setup_failures_are_one_line_reasons(built, program, args, message):
    completed = run_program(built / program, *SHORT, *args)
    assert completed.returncode == 1
    last = completed.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{program}: error: ") and message in last


def test_more_workers_than_cpus_wrap_and_are_flagged(built):
    cpus = sorted(os.sched_getaffinity(0))
    result = result_of(run_program(built / "empty", "--workers", str(len(cpus) + 1), *SHORT))
    assert result["harness"]["oversubscribed"] is True
    assert [t["cpu"] for t in result["harness"]["topology"]] == cpus + cpus[:1]


def test_passing_a_line_between_two_workers_costs_a_transfer_per_operation(built):
    """empty's pass-line mode (catalog entry line-transfer): the workers take turns, so each
    operation waits for the line to come from the other CPU, far slower than counting."""
    own = result_of(run_program(built / "empty", "--workers", "2", "--mode", "own-line", *SHORT))
    passed = result_of(
        run_program(built / "empty", "--workers", "2", "--mode", "pass-line", *SHORT)
    )
    assert 0 < passed["ops_per_sec"] < own["ops_per_sec"] / 4


@pytest.mark.parametrize("kind", ["--threads", "--processes"])
def test_the_traced_regions_hold_the_window_s_operations_not_the_warm_up_s(built, kind):
    """After a warm-up each worker's region opens at its loop's first look at the stop
    flag in the window: the operations counted in the regions (harness.region_ops, what
    scalecheck sharing divides by) are the window's, give or take the one each worker was
    in at the window's start and its stop, not the three times as many of the warm-up."""
    args = ["--workers", "2", kind, "--warmup", "0.6", "--duration", "0.2"]
    result = result_not_starved(built / "empty", *args)
    window, regions = result["extra"]["ops"], result["harness"]["region_ops"]
    # (a loaded host can hold the sampler between its reading and its flag: some slack)
    assert 0 < regions <= 1.5 * window + 2, (regions, window)
    assert regions >= 0.5 * window - 2, (regions, window)


def test_the_move_kind_modes_run_on_a_shared_or_an_own_line_and_count_the_readers(built):
    """empty's "*-work" modes (catalog entry move-kinds, bench/machine_probe.py): load-work
    counts its reader's operations apart; line=own runs; another line is a one-line error."""
    args = ["--workers", "2", "--threads", *SHORT, "--param", "work=50"]
    loaded = result_not_starved(built / "empty", *args, "--mode", "load-work")
    # (a loaded host may starve the reader: its count, not its share, is asserted)
    assert 0 <= loaded["extra"]["reader_ops"] < loaded["extra"]["ops"]
    own = run_program(built / "empty", *args, "--mode", "store-work", "--param", "line=own")
    assert result_of(own)["ops_per_sec"] > 0
    wrong = run_program(built / "empty", *args, "--mode", "atomic-work", "--param", "line=x")
    assert wrong.returncode != 0 and "line=x" in wrong.stderr.strip().splitlines()[-1]
