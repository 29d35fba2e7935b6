"""scalecheck's Python API: what a script may call, the measuring scripts in bench/ and
anyone who installed the package alike (docs/api.md says what each name promises). Every
name here is a stage's own function, re-exported, or a thin wrapper over one; the rest of
the package may change shape without notice. The command line (`scalecheck ...`, or
`python -m scalecheck.cli`) is the other public interface.
"""

from pathlib import Path

from scalecheck.analyze.analyze import analyze_model, select_ops
from scalecheck.bench import bench_results, catalog, predict, sharing
from scalecheck.bench.bench_results import machine_description, spread_pct
from scalecheck.bench.catalog import load_catalog
from scalecheck.bench.runner import parse_result
from scalecheck.bench.sharing import add_catalog_option, harness_result
from scalecheck.common.errors import UserError
from scalecheck.common.output import run_printing
from scalecheck.common.parallel import map_unordered
from scalecheck.engine.commute import explore_pair
from scalecheck.engine.conditions import pair_conditions, recheck
from scalecheck.formats.analysisfile import all_pairs, read_analysis_meta, read_pair
from scalecheck.formats.resultsfile import KNOWN_VERSION, RESULTS_FORMAT
from scalecheck.formats.testfile import (
    LABEL_FIELDS,
    content_hash,
    read_jsonl,
    read_tests,
    write_tests,
)
from scalecheck.interfaces.loading import load_model
from scalecheck.report.browser import Browser
from scalecheck.run.counting import GRANULARITIES
from scalecheck.run.linux.guest_timing import guest_times, this_plugin
from scalecheck.run.linux.replay import replay_boot
from scalecheck.run.loop import starts_text
from scalecheck.run.outcome import conflict_set
from scalecheck.run.outcome import show as show_conflict_element
from scalecheck.run.run_cli import run_tests
from scalecheck.run.user.library import load_library
from scalecheck.testgen.testgen import COUNTS as TESTGEN_COUNTS
from scalecheck.testgen.testgen import generate_tests, pair_tests

# `scalecheck sharing`'s default quantum (instructions per emulated CPU's turn).
SHARING_QUANTUM = sharing.QUANTUM

# docs/api.md says what each promises, grouped by stage.
__all__ = [
    "GRANULARITIES",
    "LABEL_FIELDS",
    "SHARING_QUANTUM",
    "TESTGEN_COUNTS",
    "Browser",
    "UserError",
    "add_catalog_option",
    "all_pairs",
    "analyze",
    "bench_records",
    "conflict_set",
    "content_hash",
    "generate_tests",
    "guest_times",
    "harness_result",
    "library_model",
    "load_catalog",
    "load_model",
    "machine_description",
    "make_report",
    "map_unordered",
    "native_ns_per_op",
    "native_ops_per_sec",
    "native_paired_ratios",
    "pair_conditions",
    "pair_regions",
    "pair_tests",
    "parse_result",
    "plot_bench",
    "read_analysis_meta",
    "read_pair",
    "read_results",
    "read_tests",
    "recheck",
    "replay_boot",
    "run_printing",
    "run_tests",
    "select_ops",
    "show_conflict_element",
    "spread_pct",
    "starts_text",
    "this_plugin",
    "two_worker_commands",
    "write_tests",
]


def analyze(model: str, ops: str | None, out: Path, quiet: bool = True) -> dict:
    """`scalecheck analyze --model MODEL --ops OPS --out OUT`: ``ops`` comma-separated
    (None: every operation); returns the analysis' summary."""
    return analyze_model(model, select_ops(load_model(model), ops), Path(out), quiet=quiet)


def pair_regions(model_cls, a: str, b: str) -> list:
    """The explored paths of ``a || b`` as the engine's regions, for pair_conditions and
    recheck (the analysis' own exploration, with its default limits)."""
    return explore_pair(model_cls, a, b)[1]


def make_report(run_dir: Path, other_dir: Path | None = None) -> dict:
    """`scalecheck report RUN_DIR [--diff OTHER_DIR]`: writes RUN_DIR/report/ and returns
    its summary (with ``diff`` against OTHER_DIR when given); UserError on bad input."""
    # Here, not above: the report pulls in matplotlib.
    from scalecheck.report.build import make_report as build

    return build(run_dir, other_dir)


def library_model(manifest: str | Path) -> str:
    """The model a library's manifest (scalecheck.toml, docs/usertarget.md) names."""
    return load_library(str(manifest)).model


def read_results(run_dir: Path) -> tuple[dict, list[dict]]:
    """The header and the records of RUN_DIR/trace/results.jsonl (docs/format-results.md);
    UserError when it is missing or of another format."""
    path = Path(run_dir) / "trace" / "results.jsonl"
    header, entries = read_jsonl(path, RESULTS_FORMAT, KNOWN_VERSION)
    return header, [record for _, record in entries]


def bench_records(out: Path) -> dict:
    """The newest record of each cell (benchmark, mode, runtime, cores) of a `scalecheck
    bench run --out OUT`."""
    return bench_results.ResultsDir(Path(out)).latest_records()


def plot_bench(out: Path) -> tuple[list[Path], list[str]]:
    """`scalecheck bench plot OUT`: the plots written, and notes on what was left out."""
    # Here, not above: matplotlib would take most of the API's import time.
    from scalecheck.bench.plot import plot_results

    return plot_results(bench_results.ResultsDir(Path(out)))


def two_worker_commands(
    entry, mode: str | None, warmup: float, duration: float, workdir: str
) -> tuple[str, dict[str, list[str]]]:
    """A catalog entry's command with two workers as threads and as processes: (the mode,
    by default the entry's first; {"threads": argv, "processes": argv}). UserError when
    the entry has no such mode."""
    mode = sharing.pick(entry.name, "mode", entry.modes, mode)
    series = {"mode": mode, "runtime": ""}
    argv = sharing.thread_command(entry.command, series, warmup, duration, workdir, workers=2)
    layouts = ("threads", "processes")
    return mode, {layout: sharing.layout_command(argv, layout) for layout in layouts}


def native_ns_per_op(benchmark: str, mode: str, runtime: str = "") -> float:
    """The catalog benchmark's time per operation with one worker, run natively here (the
    best of three short runs)."""
    return predict.native_base_ns(catalog.load_catalog()[benchmark], mode, runtime)


def native_ops_per_sec(benchmark: str, mode: str, workers: int, runtime: str = "") -> float:
    """The catalog benchmark's operations per second with `workers` workers as threads,
    run natively here (the best of three short runs)."""
    entry = catalog.load_catalog()[benchmark]
    return predict.native_ops_per_sec(entry, mode, runtime, workers)


def native_paired_ratios(
    benchmark: str, mode: str, pairs: int = 20, seconds: float = 0.1, runtime: str = ""
) -> list[float]:
    """The catalog benchmark's 2-vs-1 ratio `pairs` times, each from a run of `seconds` at
    1 thread and one at 2 next to it, natively here."""
    entry = catalog.load_catalog()[benchmark]
    return predict.native_paired_ratios(entry, mode, runtime, pairs, seconds)
