"""What the scripts in bench/ share: building the benchmarks, running one, and statistics."""

import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "native" / "benchmarks" / "bin"
sys.path.insert(0, str(REPO / "src"))

from scalecheck import api  # noqa: E402

__all__ = [
    "BIN",
    "REPO",
    "add_sweep_options",
    "bench_run_args",
    "build",
    "mean_and_spread",
    "print_result",
    "run_harness_program",
    "save_figure",
    "usable_cpus",
]


def build() -> None:
    subprocess.run(["make", "-s", "-C", str(REPO / "native" / "benchmarks")], check=True)


def add_sweep_options(parser, *, runs: int, warmup: float, duration: float) -> None:
    """--runs, --warmup and --duration of a script that runs a `scalecheck bench run` sweep
    (bench_run_args), with the script's defaults."""
    parser.add_argument("--runs", type=int, default=runs, help=f"runs per cell (default {runs})")
    parser.add_argument(
        "--warmup", type=float, default=warmup, help=f"warm-up seconds (default {warmup:g})"
    )
    parser.add_argument(
        "--duration", type=float, default=duration, help=f"measured seconds (default {duration:g})"
    )


def bench_run_args(
    benchmarks: list[str], runs: int, warmup: float, duration: float, out, cores: str | None = None
) -> list[str]:
    """The arguments of `scalecheck bench run` after the program: one sweep of benchmarks
    (cores as for `--cores`; None: the driver's default, 1..all)."""
    return [
        "bench",
        "run",
        *benchmarks,
        *(["--cores", cores] if cores else []),
        "--runs",
        str(runs),
        "--warmup",
        str(warmup),
        "--duration",
        str(duration),
        "--out",
        str(out),
    ]


def save_figure(figure, path_without_suffix: Path) -> list[str]:
    """Writes a matplotlib figure as .png and .svg, closes it; the paths written."""
    import matplotlib.pyplot as plt  # here: the scripts that draw nothing start faster

    written = []
    for suffix in (".png", ".svg"):
        figure.savefig(path_without_suffix.with_suffix(suffix), dpi=120)
        written.append(str(path_without_suffix.with_suffix(suffix)))
    plt.close(figure)
    return written


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0))


def run_harness_program(name: str, *args: str) -> dict:
    """Runs native/benchmarks/bin/NAME and returns its result JSON (exits on failure)."""
    completed = subprocess.run([str(BIN / name), *args], capture_output=True, text=True)
    if completed.returncode != 0:
        sys.exit(f"{name} {' '.join(args)} failed: {completed.stderr.strip().splitlines()[-1:]}")
    return api.parse_result(completed.stdout)


def mean_and_spread(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), api.spread_pct(values)


def print_result(result: dict, as_json: bool) -> None:
    """A script's result on stdout: JSON (--json), else one `key: value` line each."""
    import json

    print(
        json.dumps(result, indent=1)
        if as_json
        else "\n".join(f"{k}: {v}" for k, v in result.items())
    )
