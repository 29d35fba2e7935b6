"""`scalecheck predict`: a benchmark's throughput per core against the core count, predicted
from the lines its workers move per operation at N emulated CPUs (`scalecheck sharing`)
and a machine's line-transfer costs.

The model (docs/many-cores.md): each operation spends its time at one worker alone (the
1-worker time per operation, measured natively here or given) plus, for each named line,
its transfers and invalidations per operation at that core count times what one costs on
the machine: a load's transfer, a plain store's transfer or invalidation and an atomic's
each cost the profile's transfer cost times the profile's weight for that kind. A line
serves one transfer at a time, so each line is a queue: mean-value analysis of the closed
network (N workers, each line a queueing centre, the rest a delay) gives the throughput. A
line that every worker writes at every operation saturates at one transfer per write, and a
ticket lock whose waiters each read its release again moves about N - 1 times per handoff
(its counts at N say so): the collapse of "Non-scalable locks are dangerous" (Boyd-Wickizer
et al., OLS 2012) comes out of the counts, not out of a curve fitted to the curve it
predicts. Counts beyond the largest N counted are extrapolated: linearly in N from the last
two counts when they grow, else held.

usage: scalecheck predict BENCHMARK [--mode M] --machine e7-8870|FILE --cores 1,2,4,...,80
                          [--counts FILE | --count-cpus 2,4,8] [--base-ns NS]
                          [--transfer-ns NS] [--json FILE] [--plot FILE]
"""

import argparse
import dataclasses
import itertools
import json
import shlex
import subprocess
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

from scalecheck.bench import sharing
from scalecheck.bench.catalog import load_catalog
from scalecheck.common import argtypes, sources
from scalecheck.common.errors import UserError
from scalecheck.common.output import run_printing
from scalecheck.run.regions import MOVE_KINDS

MACHINES_DIR = Path(__file__).resolve().parent / "machines"


@dataclass(frozen=True)
class Machine:
    name: str
    source: str
    cores_per_socket: int
    sockets: int
    local_ns: float
    same_socket_ns: float
    cross_socket_ns: float
    # What a move of each kind (MOVE_KINDS) costs, times the transfer cost: the profile's
    # [move_weights], 1 for each kind it does not give.
    move_weights: dict

    @property
    def cores(self) -> int:
        return self.cores_per_socket * self.sockets

    def transfer_ns(self, cores: int) -> float:
        """What a line's transfer costs on average among `cores` cores filled socket by
        socket: from a core of the same socket or of another, as the pairs of cores go."""
        if cores < 2:
            return self.same_socket_ns
        full, rest = divmod(cores, self.cores_per_socket)
        per_socket = [self.cores_per_socket] * full + ([rest] if rest else [])
        same = sum(n * (n - 1) for n in per_socket) / (cores * (cores - 1))
        return same * self.same_socket_ns + (1 - same) * self.cross_socket_ns


def load_machine(name: str) -> Machine:
    """A shipped profile by name (machines/NAME.toml) or a profile file; UserError when
    neither, or a field is missing."""
    path = MACHINES_DIR / f"{name}.toml"
    if not path.is_file():
        path = Path(name)
    if not path.is_file():
        shipped = ", ".join(sorted(p.stem for p in MACHINES_DIR.glob("*.toml")))
        raise UserError(f"--machine {name}: no such profile ({shipped}) nor file")
    try:
        fields = tomllib.loads(path.read_text())
        return Machine(
            name=str(fields["name"]),
            source=str(fields["source"]),
            cores_per_socket=int(fields["cores_per_socket"]),
            sockets=int(fields["sockets"]),
            local_ns=float(fields["local_ns"]),
            same_socket_ns=float(fields["same_socket_ns"]),
            cross_socket_ns=float(fields["cross_socket_ns"]),
            move_weights=move_weights(fields.get("move_weights", {})),
        )
    except (tomllib.TOMLDecodeError, KeyError, ValueError, TypeError) as err:
        raise UserError(f"machine profile {path}: {err!r}") from None


def given_transfer_cost(machine: Machine, ns: float) -> Machine:
    """The profile with every transfer costing `ns` (--transfer-ns): the cost of this
    host's two vCPUs moves with where the host placed them, minute by minute."""
    return dataclasses.replace(
        machine,
        name=f"{machine.name}, a transfer given as {ns:.1f} ns",
        same_socket_ns=ns,
        cross_socket_ns=ns,
        source=f"{machine.source}; a transfer given as {ns:.1f} ns",
    )


def move_weights(given: dict) -> dict[str, float]:
    """Each kind's weight: the profile's, else 1; ValueError for a kind not counted."""
    unknown = set(given) - set(MOVE_KINDS)
    if unknown:
        raise ValueError(f"[move_weights] {sorted(unknown)}: the kinds are {list(MOVE_KINDS)}")
    return {kind: float(given.get(kind, 1.0)) for kind in MOVE_KINDS}


def weighted_moves(row: dict, weights: dict[str, float]) -> float:
    """A line's moves per operation, each kind times its weight; a row counted without
    the kinds (a trace of an older plugin, the two-worker groups of --system) has its
    transfers + invalidations at weight 1."""
    by_kind = row.get("moves_by_kind_per_op")
    if by_kind is None:
        return (row["transfers_per_op"] or 0) + (row["invalidations_per_op"] or 0)
    return sum(weights[kind] * (by_kind[kind] or 0) for kind in MOVE_KINDS)


def line_series(documents: list[dict], weights: dict[str, float]) -> dict[str, dict[int, float]]:
    """Per named line, its weighted moves per operation at each N counted (0 where a run
    did not see it)."""
    series: dict[str, dict[int, float]] = {}
    for document in documents:
        for row in document["lines"]:
            moved = weighted_moves(row, weights)
            series.setdefault(row["name"], {})[document["cpus"]] = moved
    counted = [document["cpus"] for document in documents]
    return {name: {n: by_n.get(n, 0.0) for n in counted} for name, by_n in series.items()}


def count_at(by_n: dict[int, float], cores: int) -> float:
    """A line's count at `cores`: none alone, interpolated between counts, beyond the last
    one extended along the last two when they grow, else held."""
    if cores < 2:
        return 0.0
    known = sorted(by_n.items())
    if cores <= known[0][0]:
        return known[0][1]
    for (n0, c0), (n1, c1) in itertools.pairwise(known):
        if cores <= n1:
            return c0 + (c1 - c0) * (cores - n0) / (n1 - n0)
    if len(known) >= 2 and known[-1][1] > known[-2][1]:
        (n0, c0), (n1, c1) = known[-2:]
        return c1 + (c1 - c0) * (cores - n1) / (n1 - n0)
    return known[-1][1]


def throughput(base_ns: float, demands_ns: list[float], workers: int) -> float:
    """Operations per ns of `workers` closed-loop workers, each spending base_ns alone and
    demands_ns[k] at queue k per operation: exact mean-value analysis."""
    queued = [0.0] * len(demands_ns)
    rate = 0.0
    for population in range(1, workers + 1):
        residence = [d * (1 + q) for d, q in zip(demands_ns, queued, strict=True)]
        rate = population / (base_ns + sum(residence))
        queued = [rate * r for r in residence]
    return rate


def predict_points(
    series: dict[str, dict[int, float]], machine: Machine, base_ns: float, cores: list[int]
) -> list[dict]:
    """Throughput per core at each core count, with the line that limits it most."""
    points = []
    for n in cores:
        cost = machine.transfer_ns(n)
        demands = {name: count_at(by_n, n) * cost for name, by_n in series.items()}
        rate = throughput(base_ns, list(demands.values()), n)
        top = max(demands, key=lambda name: demands[name], default=None)
        points.append(
            {
                "cores": n,
                "ops_per_sec_per_core": rate * 1e9 / n,
                "transfer_ns": cost,
                "top_line": top if top and demands[top] > 0 else None,
                "top_line_ns_per_op": demands[top] if top else 0.0,
            }
        )
    return points


def native_runs(
    entry, mode: str, runtime: str, workers: int, runs: int = 3, seconds: float = 0.5
) -> list[dict]:
    """`runs` runs of `seconds` of the benchmark with `workers` workers as threads, natively
    here: their harness results (a run the host starved may have made no operation)."""
    values = {"mode": mode, "runtime": runtime}
    argv = sharing.thread_command(entry.command, values, 0.1, seconds, "/tmp", workers)
    results = []
    for _ in range(runs):
        run = subprocess.run(argv, cwd=sources.root(), capture_output=True, text=True)
        results.append(sharing.harness_result(run, shlex.join(argv)))
    return results


def native_results(entry, mode: str, runtime: str, workers: int) -> list[dict]:
    """Three 0.5 s runs (`native_runs`), each of which made operations."""
    results = native_runs(entry, mode, runtime, workers)
    if not all(float(result["ops_per_sec"]) > 0 for result in results):
        raise UserError(f"{entry.name} made no operation at {workers} worker(s)")
    return results


def native_ops_per_sec(entry, mode: str, runtime: str, workers: int = 1) -> float:
    """The benchmark's operations per second with `workers` threads, natively here: the
    best of three runs (the least disturbed by other load)."""
    return max(float(r["ops_per_sec"]) for r in native_results(entry, mode, runtime, workers))


def native_paired_ratios(entry, mode: str, runtime: str, pairs: int, seconds: float) -> list:
    """The benchmark's 2-vs-1 ratio `pairs` times, natively here: each a run of `seconds`
    at 1 thread and one at 2 next to it, in turn 1-2 and 2-1, so that what the host gives
    in one second weighs on both sides of a ratio and a drift on neither. A pair whose
    1-thread run the host starved (no operation) is NaN: kept, for the caller to count."""
    ratios = []
    for pair in range(pairs):
        order = (1, 2) if pair % 2 == 0 else (2, 1)
        rate = {
            workers: float(native_runs(entry, mode, runtime, workers, 1, seconds)[0]["ops_per_sec"])
            for workers in order
        }
        ratios.append(rate[2] / rate[1] if rate[1] > 0 else float("nan"))
    return ratios


def native_base_ns(entry, mode: str, runtime: str) -> float:
    """The benchmark's time per operation at 1 worker, natively here: its thread's CPU
    time per operation, the least of three runs. On a quiet host that is its wall time;
    on a loaded one the wall time holds the other load's slices (20-60 times the CPU
    time on this 2-vCPU host at load 10-15), the CPU time much less of it."""
    return min(
        r["harness"]["worker_cpu_seconds"] * 1e9 / r["extra"]["ops"]
        for r in native_results(entry, mode, runtime, 1)
    )


def counted_documents(args, entry, mode: str) -> list[dict]:
    """The `scalecheck sharing` documents: from --counts, else counted now."""
    if args.counts:
        try:
            loaded = json.loads(args.counts.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise UserError(f"--counts {args.counts}: {err}") from None
        documents = loaded.get("runs", [loaded])
        if any(d.get("benchmark") != entry.name or d.get("mode") != mode for d in documents):
            raise UserError(f"--counts {args.counts} is not {entry.name} {mode}'s")
        return documents
    counting = sharing.counting_args(args.count_cpus, args.catalog)
    runtime = sharing.pick(entry.name, "runtime", entry.runtimes, None)
    return [sharing.traced_run(counting, entry, mode, runtime, n) for n in args.count_cpus]


def plot_points(document: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # here: every other command starts faster without it

    figure, axes = plt.subplots(figsize=(8, 5.5))
    points = document["points"]
    cores = [p["cores"] for p in points]
    axes.plot(cores, [p["ops_per_sec_per_core"] for p in points], "o-", label="predicted")
    axes.set(xlabel="cores", ylabel="operations/s per core", ylim=(0, None))
    axes.set_title(
        f"PREDICTION: {document['benchmark']} {document['mode']}\non {document['machine']['name']}",
        fontsize="medium",
    )
    counted = ", ".join(str(n) for n in document["counted_cpus"])
    note = (
        f"Predicted from transfers per operation counted at {counted} emulated CPUs "
        f"(quantum {document['quantum']}); transfer costs: {document['machine']['source']}; "
        f"1-worker time {document['base_ns']:.0f} ns/op ({document['base_from']})."
    )
    figure.text(0.02, 0.01, textwrap.fill(note, 120), fontsize="x-small", va="bottom")
    axes.legend()
    figure.tight_layout(rect=(0, 0.08, 1, 1))
    figure.savefig(path, dpi=120)
    plt.close(figure)


def print_points(document: dict) -> None:
    print(
        f"PREDICTION for {document['benchmark']} {document['mode']} on "
        f"{document['machine']['name']} (1 worker: {document['base_ns']:.0f} ns/op, "
        f"{document['base_from']}; counts at {document['counted_cpus']} CPUs)"
    )
    print(f"{'cores':>5} {'ops/s/core':>12} {'vs 1':>6} {'transfer ns':>11}  top line (ns/op)")
    alone = document["points"][0]["ops_per_sec_per_core"] if document["points"] else 1
    for p in document["points"]:
        top = f"{p['top_line']} ({p['top_line_ns_per_op']:.1f})" if p["top_line"] else "-"
        ratio = p["ops_per_sec_per_core"] / alone
        print(
            f"{p['cores']:5d} {p['ops_per_sec_per_core']:12.4g} {ratio:6.2f} "
            f"{p['transfer_ns']:11.1f}  {top}"
        )


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "predict",
        help="throughput per core against cores, predicted from lines moved per operation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("benchmark", help="a catalog name (scalecheck bench list)")
    parser.add_argument("--mode", help="default: the benchmark's first mode")
    parser.add_argument(
        "--machine", required=True, help="a shipped profile (e7-8870, ...) or a profile file"
    )
    parser.add_argument(
        "--cores",
        type=argtypes.count_list,
        default=[1, 2, 4, 8, 16, 32, 48, 64, 80],
        help="1,2,4,...",
    )
    parser.add_argument(
        "--counts", type=Path, help="a `scalecheck sharing --json` file (default: count now)"
    )
    parser.add_argument(
        "--count-cpus",
        type=argtypes.count_list,
        default=[2, 4, 8],
        metavar="N[,N...]",
        help="without --counts: emulated CPUs to count at (default 2,4,8)",
    )
    parser.add_argument(
        "--base-ns",
        type=float,
        help="time per operation of 1 worker (default: its CPU time measured natively here, "
        "the least of 3 runs)",
    )
    parser.add_argument(
        "--transfer-ns",
        type=float,
        help="what one transfer costs, within and across sockets, in place of the profile's "
        "(a cost probed in the same minute as the ratio it is checked against)",
    )
    sharing.add_catalog_option(parser)
    parser.add_argument("--json", type=Path, help="also write the prediction here")
    parser.add_argument("--plot", type=Path, help="draw the predicted curve here")
    parser.set_defaults(func=run)


def run(args) -> int:
    catalog = load_catalog(args.catalog)
    if args.benchmark not in catalog:
        raise UserError(f"no benchmark {args.benchmark!r} in the catalog")
    entry = catalog[args.benchmark]
    mode = sharing.pick(entry.name, "mode", entry.modes, args.mode)
    machine = load_machine(args.machine)
    if args.transfer_ns:
        machine = given_transfer_cost(machine, args.transfer_ns)
    documents = counted_documents(args, entry, mode)
    if args.base_ns:
        base_ns, base_from = args.base_ns, "given"
    else:
        runtime = sharing.pick(entry.name, "runtime", entry.runtimes, None)
        base_ns, base_from = native_base_ns(entry, mode, runtime), "CPU time measured natively here"
    document = {
        "benchmark": entry.name,
        "mode": mode,
        "prediction": True,
        "machine": machine.__dict__,
        "counted_cpus": [d["cpus"] for d in documents],
        "quantum": documents[0].get("quantum"),
        "base_ns": base_ns,
        "base_from": base_from,
        "points": predict_points(
            line_series(documents, machine.move_weights), machine, base_ns, args.cores
        ),
    }
    if args.json:
        args.json.write_text(json.dumps(document, indent=1))
    if args.plot:
        plot_points(document, args.plot)
    return run_printing(lambda: print_points(document))
