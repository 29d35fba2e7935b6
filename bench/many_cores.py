#!/usr/bin/env python3
"""Lines moved per operation at 2 to 16 emulated CPUs (`scalecheck sharing --cpus`) for the
seeds' series, the counts' sensitivity to the quantum, and two runs compared.

For each series: `scalecheck sharing B --mode M --cpus 2,4,8,16 --duration D --json
OUT/B-M.json`, then a table of the top line's transfers per operation at each N and all
lines' total; the wall time of each count, with the operations it made against those of
the same benchmark run natively at 1 worker in the same minute (the emulation's slowdown
per N: one emulated worker's time per operation, N x window / operations, over the native
1-worker time per operation). Then the LDU modes' queue lines at each N (the one line of
the global queue against the per-core queues' busiest and their sum), --quantum at half
and twice the default at N = 4, and each series of the Numbers list counted twice at N = 8
(--repeat-duration, default 10 s; the Linux target's with --system and
--repeat-system-duration, default 8 s: a boot each): are the first run's top five lines
within 10 % in the second? Each count leaves out `scalecheck sharing`'s warm-up, so a
line moved only at a run's start does not weigh on its figure.

Then, for bench/sv6_scaling.py's series, the 2-vs-1 ratio the counts at N = 2 predict on
this host's profile or --machine's (`scalecheck predict B --mode M --machine
host-2026-11-27 --cores 1,2 --counts F`, the 1-worker time measured natively now), beside
the ratio measured natively --check-rounds times: each round the median of --pairs
ratios, each from a run of --pair-seconds at 1 thread and one at 2 next to it, the empty
loop's alike, and the line-transfer probe (the best of three runs); on a loaded host the
host's share, not the benchmark's. Each round's ratio also over the empty loop's, times 2
(what two whole CPUs would give): their median and range, each round's pairs'
interquartile range, and the error against the latter's median, said as no check where a
round's pairs (IQR over median) or the rounds' medians (range over median) spread more
than 10 %; the pairs in OUT/pairs-B-M.json (--only-spread: that measurement alone). Then
the prediction on each round's probed transfer cost (`--transfer-ns`) against that
round's ratio, and the medians of the quiet sweeps of 2026-11-27.

usage: python3 bench/many_cores.py [--out DIR] [--duration 3] [--series B:M ...]
                                   [--check B:M ...] [--only-check] [--check-rounds 3]
                                   [--pairs 20] [--pair-seconds 0.1] [--only-spread]
                                   [--machine host-2026-11-27|FILE]
                                   [--repeat B:M ...] [--repeat-system B:M ...]
                                   [--repeat-duration 10] [--repeat-system-duration 8]
                                   [--only-repeat]
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchlib import REPO
from machine_probe import PLAUSIBLE_NS
from scalecheck import api

SERIES = [
    "sv6-openbench:lowest",
    "sv6-openbench:anyfd",
    "sv6-statbench:fstat-shared",
    "sv6-statbench:fstatx",
    "sv6-sockbench:ordered",
    "sv6-sockbench:unordered",
    "ldu-u90:ldu-global",
    "ldu-u90:ldu-percore",
    "ldu-u90:rwlock",
    "ldu-u90:harris",
]
# The LDU row: the lines of the update logs' queues (native/ldu's ldu_queues allocates
# them), one that every worker writes or one per worker.
QUEUES = "ldu_queues:"
# The Numbers list: each counted twice at N = 8 (top five lines within 10 %?); the
# Linux target's with --system ("B:" for a benchmark without modes). In jittered turns
# (sharing's default; in turns of exactly Q dgram-shared's servers keep whichever phases
# the turns began with, and so the share of requests each takes from another worker's
# client: its regimes).
REPEATED = [
    "sv6-openbench:lowest",
    "sv6-openbench:anyfd",
    "sv6-statbench:fstat-shared",
    "sv6-statbench:fstatx",
    "sv6-sockbench:unordered",
    "ldu-u90:ldu-global",
    "ldu-u90:ldu-percore",
    "ldu-u90:rwlock",
]
REPEATED_SYSTEM = ["openbench:", "sockbench:dgram-shared"]
SYSTEM = ("--system",)
SCALECHECK = [sys.executable, "-m", "scalecheck.cli"]


def count(out: Path, series: str, cpus: str, duration: float, *extra: str) -> tuple[list, float]:
    """The documents of one `scalecheck sharing` call, and its wall time."""
    benchmark, mode = series.split(":")
    started = time.monotonic()
    command = [*SCALECHECK, "sharing", benchmark, *(["--mode", mode] if mode else [])]
    command += ["--cpus", cpus, "--duration", str(duration), "--json", str(out), *extra]
    subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    document = json.loads(out.read_text())
    return document.get("runs", [document]), time.monotonic() - started


def cell(name: str) -> str:
    """A line's name in a Markdown table (a symbol's aliases are joined by `|`)."""
    return name.replace("|", "\\|")


def top(document: dict, rank: int = 0) -> tuple[str, float]:
    lines = document["lines"]
    if len(lines) <= rank:
        return "-", 0.0
    return cell(lines[rank]["name"]), lines[rank]["transfers_per_op"] or 0.0


def total(document: dict) -> float:
    return sum(row["transfers_per_op"] or 0.0 for row in document["lines"])


def series_table(out: Path, duration: float, series: list[str]) -> None:
    print("| series | N | ops | top line | its transfers/op | all lines' | slowdown |")
    print("|---|---|---|---|---|---|---|")
    for name in series:
        documents, wall = count(out / f"{name.replace(':', '-')}.json", name, "2,4,8,16", duration)
        benchmark, mode = name.split(":")
        native_ns = api.native_ns_per_op(benchmark, mode, documents[0]["runtime"])
        for document in documents:
            line, moved = top(document)
            emulated_ns = document["cpus"] * duration * 1e9 / max(document["operations"], 1)
            print(
                f"| {name} | {document['cpus']} | {document['operations']} | {line} | "
                f"{moved:.4f} | {total(document):.4f} | {emulated_ns / native_ns:,.0f}x |"
            )
        print(f"<!-- {name}: {wall:.0f} s wall for N = 2, 4, 8, 16 -->", flush=True)


def queue_lines(out: Path, series: list[str]) -> None:
    """From the series' counts: the LDU modes' queue lines per operation at each N."""
    print("\n| series | N | queue lines | busiest's transfers/op | all of them |")
    print("|---|---|---|---|---|")
    for name in series:
        path = out / f"{name.replace(':', '-')}.json"
        for document in json.loads(path.read_text()).get("runs", []):
            rows = [row for row in document["lines"] if row["name"].startswith(QUEUES)]
            moved = [row["transfers_per_op"] or 0.0 for row in rows]
            print(
                f"| {name} | {document['cpus']} | {len(rows)} | {max(moved, default=0):.4f} | "
                f"{sum(moved):.4f} |"
            )


# bench/sv6_scaling.py's series, with the median of their 2-vs-1 ratios in the five quiet
# sweeps of 2026-11-27 (each sweep's median of 5 runs; bench/results/libsv6.md); here
# the ratio the counts at N = 2 predict on this host, beside those and beside the ratio
# measured natively now.
CHECKED = {
    "sv6-statbench-mixed:fstatx": 1.908,
    "sv6-statbench-mixed:fstat-shared": 0.610,
    "sv6-statbench-mixed:fstat-refcache": 0.736,
    "sv6-openbench:anyfd": 1.957,
    "sv6-openbench:lowest": 1.211,
    "sv6-mailbench:commutative": 1.922,
    "sv6-mailbench:regular": 1.742,
    "sv6-sockbench:unordered": 1.970,
    "sv6-sockbench:ordered": 0.342,
}
HOST = "host-2026-11-27"
# What two workers that share nothing reach on this machine (bench/sv6_scaling.py's too),
# and what one line's transfer between the two vCPUs costs (bench/machine_probe.py's too).
CEILING = ("empty", "")
PROBE = ("line-transfer", "")
# A check is one where the measured ratios repeat within this, and passes within it.
REPEATS_WITHIN = 0.10


def predicted_ratio(
    out: Path, name: str, counts: Path, machine: str, *given: str
) -> tuple[float, float]:
    """The 2-vs-1 ratio `scalecheck predict` gives from the counts on this host's profile
    (the 1-worker time measured natively now unless `given` says it, `--base-ns`, as it
    may the transfer cost, `--transfer-ns`), and that 1-worker time in ns."""
    benchmark, mode = name.split(":")
    path = out / f"predict-{name.replace(':', '-')}.json"
    command = [*SCALECHECK, "predict", benchmark, "--mode", mode, "--machine", machine]
    command += ["--cores", "1,2", "--counts", str(counts), "--json", str(path), *given]
    subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    one, two = json.loads(path.read_text())["points"]
    return two["ops_per_sec_per_core"] * 2 / one["ops_per_sec_per_core"], 1e9 / one[
        "ops_per_sec_per_core"
    ]


@dataclass
class Round:
    """One round of the check: the series' 2-vs-1 ratio measured natively, the empty
    loop's, each the median of short pairs of runs at 1 and 2 threads (`paired`), and the
    line-transfer probe (the best of three 0.5 s runs), one after the other, so that the
    ratio is set beside what the host gave two workers and what a transfer cost in the
    same seconds (66 to 190 ns between quiet days, 2 to 40 ns asked by one quiet hour's
    ratios: where the host placed the two vCPUs)."""

    pairs: list[float]
    empty_pairs: list[float]
    transfer_ns: float

    @property
    def ratio(self) -> float:
        return median_of(self.pairs)

    @property
    def of_machine(self) -> float:
        """The ratio over the empty loop's times 2: what two whole CPUs would give."""
        return 2 * self.ratio / median_of(self.empty_pairs)

    @property
    def repeats(self) -> bool:
        """Whether the round's pairs, its empty loop's too, repeat within 10 % (`iqr`) with
        no pair starved."""
        pairs = self.pairs + self.empty_pairs
        return starved(pairs) == 0 and max(iqr(self.pairs), iqr(self.empty_pairs)) <= REPEATS_WITHIN

    @property
    def probed(self) -> bool:
        """Whether the probe measured a transfer, not the host's time slices."""
        return self.transfer_ns < PLAUSIBLE_NS


def measured_rounds(name: str, rounds: int, pairs: int, seconds: float) -> list[Round]:
    """`rounds` rounds of the check, interleaved: the ratios of one hour moved more than
    the prediction's error, so each check says how far its own measurement repeats."""
    benchmark, mode = name.split(":")
    return [
        Round(
            api.native_paired_ratios(benchmark, mode, pairs, seconds),
            api.native_paired_ratios(*CEILING, pairs, seconds),
            1e9 / api.native_ops_per_sec(*PROBE, 2),
        )
        for _ in range(rounds)
    ]


def ratios_of(ratios: list[float]) -> list[float]:
    """The pairs that have a ratio (NaN: the host starved the 1-thread run)."""
    return [r for r in ratios if not math.isnan(r)]


def starved(ratios: list[float]) -> int:
    return len(ratios) - len(ratios_of(ratios))


def median_of(ratios: list[float]) -> float:
    """The median of the pairs that have a ratio; NaN when none has."""
    return statistics.median(ratios_of(ratios)) if ratios_of(ratios) else math.nan


def iqr(ratios: list[float]) -> float:
    """How far one round's pairs spread: their interquartile range over their median
    (infinite with fewer than two ratios)."""
    if len(ratios_of(ratios)) < 2:
        return math.inf
    quartiles = statistics.quantiles(ratios_of(ratios), n=4)
    return (quartiles[2] - quartiles[0]) / median_of(ratios)


def spread(ratios: list[float]) -> float:
    """How far a series' measured ratios are apart: their range over their median."""
    return (max(ratios) - min(ratios)) / statistics.median(ratios)


def measured_text(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def pairs_text(rounds: list[Round]) -> str:
    """Each round's pairs: median and interquartile range over it, series / empty loop,
    and the pairs the host starved."""
    return "; ".join(
        f"{r.ratio:.2f}x +-{iqr(r.pairs):.0%} / {median_of(r.empty_pairs):.2f}x"
        f" +-{iqr(r.empty_pairs):.0%}"
        + (
            f" ({starved(r.pairs + r.empty_pairs)} starved)"
            if starved(r.pairs + r.empty_pairs)
            else ""
        )
        for r in rounds
    )


def measurement_repeats(measured: list[Round]) -> bool:
    """Whether a series' measurement repeats within 10 %: each round's pairs
    (`Round.repeats`) and the rounds' medians over the empty loop's (`spread`)."""
    of_machine = [r.of_machine for r in measured]
    return spread(of_machine) <= REPEATS_WITHIN and all(r.repeats for r in measured)


def check_verdict(predicted: float, measured: list[Round]) -> str:
    """A series' check: within 10 % of the measured median (over the empty loop's), or
    not; said as no check when the measurement itself does not repeat within 10 %
    (`measurement_repeats`)."""
    ratios = [r.of_machine for r in measured]
    error = predicted / statistics.median(ratios) - 1
    if not measurement_repeats(measured):
        return f"{error:+.0%}, measured spread {spread(ratios):.0%}: no check"
    return f"{error:+.0%}, {'within' if abs(error) <= REPEATS_WITHIN else 'OFF by more than'} 10 %"


def save_pairs(out: Path, name: str, measured: list[Round]) -> None:
    """The rounds' pairs, as measured (the data behind a spread)."""
    path = out / f"pairs-{name.replace(':', '-')}.json"
    rounds = [
        {"pairs": r.pairs, "empty_pairs": r.empty_pairs, "transfer_ns": r.transfer_ns}
        for r in measured
    ]
    path.write_text(json.dumps({"series": name, "load": os.getloadavg(), "rounds": rounds}))


def spread_only(out: Path, series: list[str], rounds: int, pairs: int, seconds: float) -> None:
    """The measurement alone, no counts: does any series' ratio repeat within 10 %?"""
    print(f"\nload average {os.getloadavg()[0]:.1f} at the start; {pairs} pairs of {seconds} s")
    print("| series | per round: median +-IQR, series / empty loop | of two whole CPUs | repeats |")
    print("|---|---|---|---|")
    for name in series:
        measured = measured_rounds(name, rounds, pairs, seconds)
        save_pairs(out, name, measured)
        of_machine = [r.of_machine for r in measured]
        print(
            f"| {name} | {pairs_text(measured)} | {measured_text(of_machine)} | "
            f"{'yes' if measurement_repeats(measured) else 'no'} |",
            flush=True,
        )


def check_at_two(
    out: Path, duration: float, series: list[str], measuring: tuple, machine: str
) -> None:
    """Per series: the lines moved per operation at N = 2 (transfers + invalidations), the
    2-vs-1 ratio they predict on the quiet profile, the ratio measured natively in each
    round (`measured_rounds`) and over the empty loop's of its round, median and range,
    the error of the profile's prediction against the latter's median, the errors of the
    predictions made on each round's probed transfer cost against that round's ratio, and
    the quiet medians."""
    print(f"\nload average {os.getloadavg()[0]:.1f} at the start")
    print(
        "| series | transfers + invalidations/op (ops) | 1 worker now | measured: median "
        "(range) | of two whole CPUs | predicted (profile) | error | per round: median "
        "+-IQR, series / empty loop | transfer probed "
        "| predicted on each round's probe: error per round | quiet median |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in series:
        counts = out / f"two-{name.replace(':', '-')}.json"
        (document,), _ = count(counts, name, "2", duration)
        moved = [
            sum(row[key] or 0 for row in document["lines"])
            for key in ("transfers_per_op", "invalidations_per_op")
        ]
        predicted, base_ns = predicted_ratio(out, name, counts, machine)
        measured = measured_rounds(name, *measuring)
        save_pairs(out, name, measured)
        of_machine = [r.of_machine for r in measured]
        quiet = CHECKED.get(name)
        print(
            f"| {name} | {moved[0]:.3f} + {moved[1]:.3f} ({document['operations']}) | "
            f"{base_ns:,.0f} ns | {measured_text([r.ratio for r in measured])} | "
            f"{measured_text(of_machine)} | {predicted:.2f}x | "
            f"{check_verdict(predicted, measured)} | {pairs_text(measured)} | "
            f"{', '.join(f'{r.transfer_ns:.0f}' for r in measured)} ns | "
            f"{round_errors(out, name, counts, machine, base_ns, measured)} | "
            f"{f'{quiet:.2f}x' if quiet else '-'} |",
            flush=True,
        )


def round_errors(
    out: Path, name: str, counts: Path, machine: str, base_ns: float, measured: list[Round]
) -> str:
    """The prediction on each round's probed transfer cost against that round's ratio over
    the empty loop's: the errors and their median; the rounds whose probe measured the
    host's time slices (no transfer to predict with) said."""
    base = ("--base-ns", f"{base_ns:.1f}")
    errors = [
        predicted_ratio(out, name, counts, machine, *base, "--transfer-ns", f"{r.transfer_ns:.1f}")[
            0
        ]
        / r.of_machine
        - 1
        for r in measured
        if r.probed
    ]
    said = ", ".join(f"{e:+.0%}" for e in errors) if errors else "none"
    if errors:
        said += f"; median {statistics.median(errors):+.0%}"
    unprobed = len(measured) - len(errors)
    return said + (f" ({unprobed} rounds' probe: time slices)" if unprobed else "")


def sensitivity(out: Path, duration: float, series: list[str]) -> None:
    print("\n| series at N = 4 | quantum | top line's transfers/op | all lines' |")
    print("|---|---|---|---|")
    for name in series:
        for quantum in (api.SHARING_QUANTUM // 2, api.SHARING_QUANTUM, api.SHARING_QUANTUM * 2):
            path = out / f"q{quantum}-{name.replace(':', '-')}.json"
            (document,), _ = count(path, name, "4", duration, "--quantum", str(quantum))
            print(f"| {name} | {quantum} | {top(document)[1]:.4f} | {total(document):.4f} |")


def repeat(out: Path, duration: float, series: list[str], *extra: str) -> None:
    """Two counts at N = 8 of each series, compared (`agreement`)."""
    print(
        "\n| series at N = 8 (ops; workers lapsed) | line | transfers counted | run 1 | run 2 "
        "| difference |"
    )
    print("|---|---|---|---|---|---|")
    for name in series:
        runs = [
            count(out / f"r{k}-{name.replace(':', '-')}.json", name, "8", duration, *extra)[0][0]
            for k in (1, 2)
        ]
        for row in agreement(name, *runs):
            print(row, flush=True)


def agreement(name: str, first: dict, second: dict) -> list[str]:
    """The first run's top five lines found in the second (`row_key`): their transfers per
    operation and how far apart, said as within 10 %, or within counting noise (two
    standard deviations of the two rates, `difference`), or apart; then, for an
    allocation site with several of them, all its lines together. Beside the
    operations, the workers that once ran out of turn in each run (the host ordered part
    of that run, not the schedule)."""
    ops = [first["operations"], second["operations"]]
    label = (
        f"{name} ({ops[0]} / {ops[1]}; {first['schedule_lapsed']} / {second['schedule_lapsed']}"
        f"{regime_text(first, second)})"
    )
    keyed = [moves_by_key(document) for document in (first, second)]
    compared = [
        (cell(row["name"]), [found.get(row_key(row["name"]), (0, 0)) for found in keyed])
        for row in first["lines"][:5]
    ]
    for site in sites_of_several(first["lines"][:5]):
        sums = [site_moves(document, site) for document in (first, second)]
        compared.append((f"all lines of {cell(site)}", sums))
    if not compared:  # said, not left out (the unordered sockets share none)
        return [f"| {label} | no line shared (second run: {len(second['lines'])}) | | | | |"]
    said = [(line, difference(counts, ops)) for line, counts in compared]
    if regimes_apart(first, second):  # the benchmark's timing, not the count's noise
        said = [(line, verdict.replace("(apart)", "(regimes)")) for line, verdict in said]
    return [f"| {label} | {line} | {verdict}" for line, verdict in said]


def regime_per_op(document: dict) -> float | None:
    return (document.get("regime") or {}).get("per_op")


def regime_text(first: dict, second: dict) -> str:
    """The two runs' regimes (`scalecheck sharing`'s `regime`), when the benchmark has one."""
    if regime_per_op(first) is None or regime_per_op(second) is None:
        return ""
    extra = first["regime"]["extra"]
    return f"; {extra} per op {regime_per_op(first):.2f} / {regime_per_op(second):.2f}"


def regimes_apart(first: dict, second: dict) -> bool:
    """Whether the two runs fell in regimes more than 10 % apart: lines apart between
    them are the benchmark's varying behaviour (its regime sets them), not a count's."""
    rates = [regime_per_op(first), regime_per_op(second)]
    if None in rates or not rates[0]:
        return False
    return abs(rates[1] - rates[0]) / rates[0] > REPEATS_WITHIN


def row_key(name: str) -> str:
    """A heap line's allocation and offset without the fields the workers touched (those
    of a run: another run's may touch one field more or less of the same line)."""
    return name.split(" (", 1)[0] if ":alloc(" in name else name


def moves_by_key(document: dict) -> dict[str, tuple[int, int]]:
    """Each row's moves (transfers, writes) by its `row_key`, the rows of one key summed
    (the lines at one offset named apart by their fields, as `sharing` did until
    2026-12-07)."""
    found: dict[str, tuple[int, int]] = {}
    for row in document["lines"]:
        n, w = found.get(row_key(row["name"]), (0, 0))
        more_n, more_w = moves(row)
        found[row_key(row["name"])] = (n + more_n, w + more_w)
    return found


def moves(row: dict) -> tuple[int, int]:
    """A row's transfers, and the writes among its moves (transfers and invalidations not
    made by a load): each write starts the run of reads that fetch the line again."""
    kinds = row.get("moves_by_kind")
    if not kinds:  # no kinds counted (N = 2's groups): every transfer its own event
        return row["transfers"], row["transfers"]
    return row["transfers"], row["transfers"] + row["invalidations"] - kinds["load"]


def difference(counts: list[tuple[int, int]], ops: list[int]) -> str:
    """Two runs' counts of one line (transfers, writes): the transfers, their rates and
    how far apart. The noise is two standard deviations of the two rates with the
    transfers counted in clusters: a write, then the reads of the workers that fetch the
    line after it (a walk's reads of each object, a lock word read by each waiter), so
    a count of n transfers in w clusters varies as a Poisson count of w clusters of n / w
    each (variance n * n / w; n when each transfer is its own write)."""
    transfers = [n for n, _ in counts]
    rates = [n / o for n, o in zip(transfers, ops, strict=True)]
    change = abs(rates[1] - rates[0]) / rates[0] if rates[0] else 0.0
    variances = [n * max(1.0, n / max(w, 1)) / o**2 for (n, w), o in zip(counts, ops, strict=True)]
    noise = 2 * sum(variances) ** 0.5
    verdict = (
        "" if change <= 0.1 else " (noise)" if abs(rates[1] - rates[0]) <= noise else " (apart)"
    )
    counted = f"{transfers[0]} / {transfers[1]} | {rates[0]:.4f} | {rates[1]:.4f}"
    which = writes_and_reads(counts, ops) if "apart" in verdict else ""
    return f"{counted} | {change:.0%}{verdict}{which} |"


def writes_and_reads(counts: list[tuple[int, int]], ops: list[int]) -> str:
    """For a line apart: its writes per operation and transfers per write in each run, which
    of the two moved (LDU's set lock: its writes per operation repeat, the workers that
    read the word between two writes do not)."""
    writes = [f"{w / o:.3f}" for (_, w), o in zip(counts, ops, strict=True)]
    per_write = [f"{n / w:.2f}" if w else "-" for n, w in counts]
    return f"; writes/op {' / '.join(writes)}, transfers/write {' / '.join(per_write)}"


def sites_of_several(lines: list[dict]) -> list[str]:
    """The allocation sites (`site:alloc(size)`) of which several lines are among these:
    which of a site's blocks' lines an operation touches can follow the order the workers
    took a lock in (the rwlock's tree), while all of them together need not."""
    sites = [row["name"].split("+")[0] for row in lines if ":alloc(" in row["name"]]
    return sorted({site for site in sites if sites.count(site) > 1})


def site_moves(document: dict, site: str) -> tuple[int, int]:
    rows = [moves(row) for row in document["lines"] if row["name"].startswith(f"{site}+")]
    return sum(n for n, _ in rows), sum(w for _, w in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/many-cores"))
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--series", nargs="*", default=SERIES)
    parser.add_argument("--sensitivity", nargs="*", default=SERIES[:1] + SERIES[6:7])
    parser.add_argument("--repeat", nargs="*", default=REPEATED)
    parser.add_argument("--repeat-system", nargs="*", default=REPEATED_SYSTEM)
    parser.add_argument(
        "--repeat-duration",
        type=float,
        default=10.0,
        help="seconds of each repeated count (short windows are dominated by their start)",
    )
    parser.add_argument(
        "--repeat-system-duration",
        type=float,
        default=8.0,
        help="seconds of each repeated count on the Linux target (2 s windows held 20-60 "
        "round trips of dgram-shared at N = 8)",
    )
    parser.add_argument("--check", nargs="*", default=list(CHECKED))
    parser.add_argument("--only-check", action="store_true", help="the check at N = 2 only")
    parser.add_argument(
        "--check-rounds",
        type=int,
        default=3,
        help="times each series' 2-vs-1 ratio is measured, interleaved (its spread)",
    )
    parser.add_argument(
        "--machine",
        default=HOST,
        help="the profile the check predicts on (a name, or a file of bench/machine_probe.py)",
    )
    parser.add_argument("--pairs", type=int, default=20, help="pairs of runs a round")
    parser.add_argument("--pair-seconds", type=float, default=0.1, help="each run's window")
    parser.add_argument(
        "--only-spread", action="store_true", help="the check's measurement alone, no counts"
    )
    parser.add_argument("--only-repeat", action="store_true", help="the two runs at N = 8 only")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    measuring = (args.check_rounds, args.pairs, args.pair_seconds)
    if Path(args.machine).is_file():  # predict runs in the repository
        args.machine = str(Path(args.machine).resolve())
    if args.only_spread:
        spread_only(args.out, args.check, *measuring)
        return 0
    if args.only_check:
        check_at_two(args.out, args.duration, args.check, measuring, args.machine)
        return 0
    if args.only_repeat:
        repeat(args.out, args.repeat_duration, args.repeat)
        repeat(args.out, args.repeat_system_duration, args.repeat_system, *SYSTEM)
        return 0
    series_table(args.out, args.duration, args.series)
    queue_lines(args.out, [name for name in args.series if ":ldu-" in name])
    sensitivity(args.out, args.duration, args.sensitivity)
    repeat(args.out, args.repeat_duration, args.repeat)
    repeat(args.out, args.repeat_system_duration, args.repeat_system, *SYSTEM)
    check_at_two(args.out, args.duration, args.check, measuring, args.machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
