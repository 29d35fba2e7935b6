"""`scalecheck bench run|plot|compare|list` against small catalogs of scripted benchmarks.

The scripted benchmark (FAKE_BENCH) follows the program contract of docs/format-bench.md;
its modes make it succeed, fail, hang or print garbage, so the driver's handling of
modes, runtimes, min_cores, failures, resume and timeouts is checked quickly.
"""

import json
import sys
from pathlib import Path

import pytest

from scalecheck.bench.bench_results import spread_pct
from scalecheck.bench.catalog import load_catalog
from scalecheck.cli import main

FAKE_BENCH = r"""
import json, os, sys, time
cores, mode, runtime, workdir, log = sys.argv[1:6]
with open(log, "a") as f:
    f.write(f"{mode} {runtime} {cores}\n")
assert os.path.isdir(workdir), "the driver must create {workdir}"
if mode == "broken":
    print("some progress output")
    print("fake: error: broken on purpose", file=sys.stderr)
    sys.exit(3)
if mode == "garbage":
    print("not json")
    sys.exit(0)
if mode == "hang":
    time.sleep(30)
factor = float(os.environ.get("FAKE_FACTOR", "1"))
rate = 1000.0 * int(cores) * factor * (2 if runtime == "go" else 1)
print("warming up")
print(json.dumps({"benchmark": "fake", "mode": mode, "runtime": runtime, "workers": int(cores),
                  "ops_per_sec": rate, "samples": [rate], "cycles_per_op": 10.0, "extra": {}}))
"""


def write_catalog(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fake.toml").write_text(body)
    return directory


@pytest.fixture
def fake(tmp_path):
    """A catalog dir with a scripted benchmark; returns (catalog dir, invocation log)."""
    script = tmp_path / "fake_bench.py"
    script.write_text(FAKE_BENCH)
    log = tmp_path / "invocations.log"
    command = f"{sys.executable} {script} {{cores}} {{mode}} {{runtime}} {{workdir}} {log}"
    catalog = write_catalog(
        tmp_path / "catalog",
        f'''
[[benchmark]]
name = "fake"
description = "scripted"
seed = "test"
command = "{command}"
modes = ["fast", "broken"]
runtimes = ["c", "go"]
metric = "things/s"

[[benchmark]]
name = "pairs"
command = "{command.replace("{mode}", "fast")}"
min_cores = 2

[[benchmark]]
name = "nobuild"
build = "echo compiling; echo 'cc: fatal error: no input files' >&2; \
echo 'make: *** [Makefile:3: x] Error 1' >&2; exit 1"
command = "{command}"

[[benchmark]]
name = "garbage"
command = "{command.replace("{mode}", "garbage")}"
''',
    )
    return catalog, log


def bench(*args) -> int:
    return main(["bench", *args])


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]


def test_sweep_records_modes_runtimes_failures_and_min_cores(fake, tmp_path, capsys):
    catalog, log = fake
    out = tmp_path / "out"
    code = bench(
        "run",
        "--all",
        "--catalog",
        str(catalog),
        "--cores",
        "1,2",
        "--runs",
        "2",
        "--warmup",
        "0",
        "--duration",
        "0.1",
        "--out",
        str(out),
    )
    captured = capsys.readouterr()
    assert code == 0
    rows = records(out)
    # fake: 2 modes x 2 runtimes x 2 core counts; pairs: only 2 cores;
    # nobuild, garbage: 2 cores each; x 2 runs
    assert len(rows) == (8 + 1 + 2 + 2) * 2
    ok = [r for r in rows if r["status"] == "ok"]
    assert {(r["benchmark"], r["mode"], r["runtime"]) for r in ok} == {
        ("fake", "fast", "c"),
        ("fake", "fast", "go"),
        ("pairs", "", ""),
    }
    reasons = {r["benchmark"] + "/" + r["mode"]: r["reason"] for r in rows if r["status"] != "ok"}
    assert reasons["fake/broken"] == "fake: error: broken on purpose"
    assert reasons["nobuild/"] == "build failed: cc: fatal error: no input files"
    assert reasons["garbage/"] == "last stdout line is not JSON: not json"
    assert "pairs needs at least 2 cores: skipped at 1" in captured.err
    # The build failed once and was not retried for every cell.
    assert (out / "logs" / "build-nobuild.err").exists()
    assert sum(1 for line in log.read_text().splitlines() if line.startswith("broken")) == 8
    # Run 2 takes a benchmark's series in reverse, so no series always goes first.
    invocations = [line.split() for line in log.read_text().splitlines()]
    fake_series = [
        (mode, runtime)
        for mode, runtime, cores in (i for i in invocations if len(i) == 3)
        if mode in ("fast", "broken") and runtime in ("c", "go") and cores == "1"
    ]
    assert fake_series[:4] == [("fast", "c"), ("fast", "go"), ("broken", "c"), ("broken", "go")]
    assert fake_series[4:8] == fake_series[3::-1]

    summary = {
        (e["benchmark"], e["mode"], e["runtime"], e["cores"]): e
        for e in json.loads((out / "summary.json").read_text())["series"]
    }
    go2 = summary[("fake", "fast", "go", 2)]
    assert go2["mean"] == 4000 and go2["per_core_mean"] == 2000 and go2["spread_pct"] == 0
    assert go2["runs_ok"] == 2 and go2["cycles_per_op_mean"] == 10
    assert summary[("fake", "broken", "c", 1)]["runs_failed"] == 2
    assert "fake (things/s)" in captured.out and "cells ran (" in captured.err
    assert (
        bench(
            "run",
            "fake",
            "--catalog",
            str(catalog),
            "--cores",
            "1",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--duration",
            "0.1",
            "--out",
            str(out),
            "--strict",
        )
        == 1
    )


def test_resume_skips_finished_cells(fake, tmp_path, capsys):
    catalog, log = fake
    out = tmp_path / "out"
    args = [
        "run",
        "fake",
        "pairs",
        "--catalog",
        str(catalog),
        "--cores",
        "1,2",
        "--warmup",
        "0",
        "--duration",
        "0.1",
        "--out",
        str(out),
    ]
    calls = lambda: len(log.read_text().splitlines())  # noqa: E731
    # Per run: fake has 8 cells (4 of them the failing "broken" mode), pairs 1 (2 cores only).
    assert bench(*args, "--runs", "1") == 0
    assert calls() == 9
    # A sweep killed while writing: the last record (pairs) is lost, the one before torn.
    lines = (out / "runs.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["benchmark"] == "pairs"
    (out / "runs.jsonl").write_text("\n".join(lines[:-2]) + "\n" + lines[-2][:20])
    assert bench(*args, "--runs", "2") == 0
    # Reran: the lost pairs cell, run 1's failed cells (they are retried), all 9 of run 2.
    assert calls() == 9 + 1 + 4 + 9
    assert "resuming: 4 of 18 cells already done" in capsys.readouterr().err
    assert bench(*args, "--runs", "2") == 0
    assert calls() == 9 + 14 + 8  # only the failed cells again
    finished = {
        (r["benchmark"], r["mode"], r["runtime"], r["cores"], r["run"])
        for r in records(out)
        if r["status"] == "ok"
    }
    assert len(finished) == 10


def test_resume_refuses_other_timing(fake, tmp_path, capsys):
    catalog, _ = fake
    out = tmp_path / "out"
    base = [
        "run",
        "pairs",
        "--catalog",
        str(catalog),
        "--cores",
        "2",
        "--runs",
        "1",
        "--warmup",
        "0",
        "--out",
        str(out),
    ]
    assert bench(*base, "--duration", "0.1") == 0
    capsys.readouterr()
    assert bench(*base, "--duration", "0.2") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a sweep with --warmup 0.0 --duration 0.1" in err


def test_hanging_run_times_out(fake, tmp_path, capsys):
    catalog, _ = fake
    write_catalog(
        catalog, (catalog / "fake.toml").read_text().replace('["fast", "broken"]', '["hang"]')
    )
    out = tmp_path / "out"
    assert (
        bench(
            "run",
            "fake",
            "--catalog",
            str(catalog),
            "--cores",
            "1",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--duration",
            "0.1",
            "--slack",
            "1",
            "--out",
            str(out),
        )
        == 0
    )
    reasons = {r["reason"] for r in records(out)}
    assert reasons == {"timed out after 1.1 s"}


def test_plot_and_compare(fake, tmp_path, capsys, monkeypatch):
    catalog, _ = fake
    before, after = tmp_path / "a", tmp_path / "b"
    common = [
        "run",
        "fake",
        "--catalog",
        str(catalog),
        "--cores",
        "1,2",
        "--runs",
        "2",
        "--warmup",
        "0",
        "--duration",
        "0.1",
    ]
    assert bench(*common, "--out", str(before)) == 0
    monkeypatch.setenv("FAKE_FACTOR", "1.23")
    assert bench(*common, "--out", str(after)) == 0
    capsys.readouterr()

    assert bench("plot", str(after)) == 0
    files = capsys.readouterr().out.split()
    assert sorted(Path(f).name for f in files) == ["fake.png", "fake.svg"]
    assert all(Path(f).stat().st_size > 1000 for f in files)

    assert bench("compare", str(before), str(after)) == 0
    table = capsys.readouterr().out
    assert table.count("+23.0%") == 4
    assert bench("compare", str(before), str(after), "--json") == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 4 and all(
        r["change_pct"] == pytest.approx(23) and not r["within_noise"] for r in rows
    )


def test_spread_is_largest_deviation_from_mean():
    assert spread_pct([96.0, 100.0, 104.0]) == pytest.approx(4.0)
    assert spread_pct([100.0]) == 0
    assert spread_pct([0.0, 0.0]) is None


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "--out", "X"], "name at least one benchmark or pass --all"),
        (["run", "nosuch", "--out", "X"], "unknown benchmark nosuch"),
        (["run", "fake", "--all", "--out", "X"], "give benchmark names or --all, not both"),
        (["run", "fake", "--cores", "0", "--out", "X"], "core counts start at 1"),
        (["run", "fake", "--cores", "1,x", "--out", "X"], "expected core counts"),
        (["run", "fake", "--cores", "4096", "--out", "X"], "this machine lets us use"),
        (["plot", "NOWHERE"], "no such directory"),
        (["compare", "NOWHERE", "NOWHERE"], "no such directory"),
    ],
)
def test_bad_arguments_get_one_line(fake, tmp_path, capsys, args, message):
    catalog, _ = fake
    args = [str(tmp_path / a) if a in ("X", "NOWHERE") else a for a in args]
    if args[0] in ("run",):
        args += ["--catalog", str(catalog)]
    assert bench(*args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("scalecheck: error: ")


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "fake"], "the following arguments are required: --out"),
        (["run", "fake", "--runs", "0", "--out", "X"], "argument --runs: must be at least 1"),
        (["run", "fake", "--duration", "0", "--out", "X"], "argument --duration: must be above 0"),
        (
            ["run", "fake", "--slack", "nan", "--out", "X"],
            "argument --slack: 'nan' is not a finite",
        ),
    ],
)
def test_argparse_errors_are_one_line(capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        bench(*args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_plot_of_empty_sweep_is_an_error(fake, tmp_path, capsys):
    catalog, _ = fake
    out = tmp_path / "out"
    assert (
        bench(
            "run",
            "nobuild",
            "--catalog",
            str(catalog),
            "--cores",
            "1",
            "--runs",
            "1",
            "--duration",
            "0.1",
            "--out",
            str(out),
        )
        == 0
    )
    capsys.readouterr()
    assert bench("plot", str(out)) == 0
    assert "nobuild: no successful runs, nothing to plot" in capsys.readouterr().err
    (out / "runs.jsonl").unlink()
    assert bench("plot", str(out)) == 2
    assert "has no finished runs yet" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body,message",
    [
        ('[[benchmark]]\nname = "x"\n', "'command' must be a non-empty string"),
        ('[[benchmark]]\nname = "x"\ncommand = "true"\nmodes = "a"\n', "'modes' must be a list"),
        (
            '[[benchmark]]\nname = "x"\ncommand = "true"\nmin_cores = 0\n',
            "'min_cores' must be a whole number",
        ),
        ("[[benchmark]\n", "not valid TOML"),
    ],
)
def test_catalog_errors_are_one_line(tmp_path, capsys, body, message):
    catalog = write_catalog(tmp_path / "catalog", body)
    assert bench("list", "--catalog", str(catalog)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_duplicate_names_across_catalog_files(tmp_path, capsys):
    catalog = write_catalog(tmp_path / "catalog", '[[benchmark]]\nname = "x"\ncommand = "true"\n')
    (catalog / "other.toml").write_text('[[benchmark]]\nname = "x"\ncommand = "true"\n')
    assert bench("list", "--catalog", str(catalog)) == 2
    assert "x is defined in both fake.toml and other.toml" in capsys.readouterr().err


def test_builtin_catalog_lists_kernel_benchmarks(capsys):
    catalog = load_catalog()
    for name in ("statbench", "openbench", "mailbench", "doexec", "faultzf", "docomp", "procbench"):
        assert catalog[name].catalog_file == "kernel.toml" and catalog[name].seed
    assert catalog["statbench"].min_cores == 2
    assert bench("list", "--json") == 0
    assert {b["name"] for b in json.loads(capsys.readouterr().out)} >= {"statbench", "doexec"}
