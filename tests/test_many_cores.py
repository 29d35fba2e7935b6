"""Many cores from two: `scalecheck sharing --cpus N` counts lines per operation at N
emulated CPUs in the plugin's quantum schedule (its unit tests: tracer/plugin's
schedule.rs, a synthetic program with a shared line, private lines and a ticket lock), and
`scalecheck predict` turns counts into throughput per core (here on hand-made counts)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scalecheck.bench import predict
from scalecheck.bench import sharing as sharing_script
from scalecheck.bench.sharing import (
    UNNAMED,
    ProgramNames,
    block_name,
    heap_blocks,
    held_in_window,
    line_table,
)
from scalecheck.common.errors import UserError
from scalecheck.run.regions import Line, Region, Site
from scalecheck.run.user.dwarfnames import FieldNames

PREDICT = [sys.executable, "-m", "scalecheck.cli", "predict"]
SHARING = [sys.executable, "-m", "scalecheck.cli", "sharing"]

COUNTER_CATALOG = """
[[benchmark]]
name = "counter"
description = "each worker counts in its own slot, or also stores to one line all share"
build = "make -s -C native/benchmarks bin/empty"
command = "native/benchmarks/bin/empty --threads --workers {cores} --warmup {warmup} \
--duration {duration} --mode {mode}"
metric = "loops/s"
modes = ["own-line", "shared-line"]
"""

MACHINE = predict.Machine(
    name="test", source="made up", cores_per_socket=4, sockets=2, local_ns=1.0,
    same_socket_ns=50.0, cross_socket_ns=200.0, move_weights=predict.move_weights({}),
)  # fmt: skip


def test_a_transfer_costs_what_the_pairs_of_cores_it_spans_cost():
    assert MACHINE.transfer_ns(2) == MACHINE.transfer_ns(4) == 50.0
    # 8 cores, 4 + 4: of the 56 ordered pairs, 24 in one socket
    assert MACHINE.transfer_ns(8) == pytest.approx((24 * 50 + 32 * 200) / 56)


def test_mean_value_analysis_meets_its_bounds():
    # no queue: N workers, N times one
    assert predict.throughput(100.0, [], 8) == pytest.approx(8 / 100)
    # one queue of 50 ns per operation: one worker 1 / 150; many: at most one per 50 ns
    assert predict.throughput(100.0, [50.0], 1) == pytest.approx(1 / 150)
    assert predict.throughput(100.0, [50.0], 64) == pytest.approx(1 / 50, rel=1e-6)
    assert predict.throughput(100.0, [50.0], 2) < 2 / 150


def test_a_ticket_lock_whose_handoff_grows_with_its_waiters_collapses():
    """Counts as the quantum schedule gives a ticket lock (schedule.rs): its serving line
    moves about N - 1 times per operation at N, its ticket and data once. Total
    throughput peaks, then falls as cores are added: the collapse of non-scalable locks."""
    series = {
        "serving": {2: 1.0, 4: 3.0, 8: 7.0, 16: 15.0},
        "ticket": {2: 1.0, 4: 1.0, 8: 1.0, 16: 1.0},
        "data": {2: 1.0, 4: 1.0, 8: 1.0, 16: 1.0},
    }
    cores = [1, 2, 4, 8, 16, 32, 64]
    points = predict.predict_points(series, MACHINE, 200.0, cores)
    total = [p["ops_per_sec_per_core"] * p["cores"] for p in points]
    assert max(total) > total[0] and total[-1] < max(total) / 2
    assert points[-1]["top_line"] == "serving"
    # beyond the last count, the growing line is extended along its last two counts
    assert predict.count_at(series["serving"], 32) == pytest.approx(31.0)
    assert predict.count_at(series["ticket"], 64) == 1.0
    assert predict.count_at(series["serving"], 1) == 0.0


def test_lines_that_do_not_move_predict_a_flat_curve():
    series = {"private": {2: 0.0, 4: 0.0, 8: 0.0}}
    points = predict.predict_points(series, MACHINE, 100.0, [1, 8, 80])
    assert [p["ops_per_sec_per_core"] for p in points] == pytest.approx([1e7] * 3)


def test_the_shipped_machine_and_a_bad_profile():
    e7 = predict.load_machine("e7-8870")
    assert (e7.cores, e7.cores_per_socket) == (80, 10)
    assert e7.same_socket_ns < e7.cross_socket_ns
    with pytest.raises(UserError, match="no such profile"):
        predict.load_machine("no-such-machine")


def test_each_kind_of_move_costs_its_weight(tmp_path):
    """Hand-made counts of one line at N = 2 and 4: a load's transfer, a plain store's
    invalidation and atomics' transfers, each kind times its profile's weight; a row
    counted without the kinds is its transfers + invalidations at weight 1."""
    weights = predict.move_weights({"store_invalidation": 0.5, "atomic": 2.0})
    assert weights == {
        "load": 1.0, "store": 1.0, "store_invalidation": 0.5, "atomic": 2.0,
        "atomic_invalidation": 1.0,
    }  # fmt: skip
    kinds = {"load": 1.0, "store": 0.0, "store_invalidation": 1.0, "atomic": 2.0}
    rows = [
        {"name": "word", "transfers_per_op": 3.0, "invalidations_per_op": 1.0,
         "moves_by_kind_per_op": {**kinds, "atomic_invalidation": 0.0}},
        {"name": "old", "transfers_per_op": 3.0, "invalidations_per_op": 1.0},
    ]  # fmt: skip
    documents = [{"cpus": n, "lines": rows} for n in (2, 4)]
    series = predict.line_series(documents, weights)
    assert series == {"word": {2: 5.5, 4: 5.5}, "old": {2: 4.0, 4: 4.0}}
    # Its demand at 2 cores: 5.5 weighted moves of 50 ns.
    [_, two] = predict.predict_points({"word": series["word"]}, MACHINE, 100.0, [1, 2])
    assert two["top_line_ns_per_op"] == pytest.approx(5.5 * 50.0)
    profile = tmp_path / "weighted.toml"
    fields = 'name = "w"\nsource = "s"\ncores_per_socket = 2\nsockets = 1\nlocal_ns = 1.0\n'
    fields += "same_socket_ns = 50.0\ncross_socket_ns = 50.0\n"
    profile.write_text(fields + "[move_weights]\natomic = 2.0\n")
    assert predict.load_machine(str(profile)).move_weights["atomic"] == 2.0
    profile.write_text(fields + "[move_weights]\ncas = 2.0\n")
    with pytest.raises(UserError, match="cas"):
        predict.load_machine(str(profile))


def test_the_turns_options_reach_the_plugin():
    args = sharing_script.counting_args([8], None)
    assert sharing_script.schedule_options(args, 8) == "quantum=200,workers=8,jitter=on"
    args.turn_jitter, args.turn_ends = False, "quantum"
    assert sharing_script.schedule_options(args, 8) == "quantum=200,workers=8,operation_ends=off"


def counts_file(tmp_path: Path) -> Path:
    runs = [
        {
            "benchmark": "line-transfer",
            "mode": "",
            "cpus": n,
            "quantum": 200,
            "lines": [{"name": "word", "transfers_per_op": 1.0, "invalidations_per_op": 0.0}],
        }
        for n in (2, 4)
    ]
    path = tmp_path / "counts.json"
    path.write_text(json.dumps({"runs": runs}))
    return path


def test_predict_writes_points_from_a_counts_file(tmp_path):
    out, plot = tmp_path / "predicted.json", tmp_path / "predicted.png"
    command = ["line-transfer", "--machine", "e7-8870", "--cores", "1,2,20,80"]
    command += ["--counts", str(counts_file(tmp_path)), "--base-ns", "100"]
    run = subprocess.run(
        [*PREDICT, *command, "--json", str(out), "--plot", str(plot)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    document = json.loads(out.read_text())
    assert document["prediction"] and "PREDICTION" in run.stdout
    points = document["points"]
    assert [p["cores"] for p in points] == [1, 2, 20, 80]
    assert points[0]["ops_per_sec_per_core"] == pytest.approx(1e7)
    rates = [p["ops_per_sec_per_core"] for p in points]
    assert rates == sorted(rates, reverse=True) and rates[-1] < rates[0] / 10
    assert plot.stat().st_size > 0


def test_predict_refuses_counts_of_another_benchmark_in_one_line(tmp_path):
    run = subprocess.run(
        [*PREDICT, "empty", "--machine", "e7-8870", "--counts", str(counts_file(tmp_path))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"scalecheck: error: --counts {tmp_path / 'counts.json'} is not empty 's"
    ]


def per_op(document: dict) -> float:
    return sum(row["transfers_per_op"] for row in document["lines"])


def test_at_4_cpus_a_private_counter_stays_flat_and_a_shared_one_moves(tmp_path):
    """One real run per series under qemu-x86_64 and the plugin's quantum schedule."""
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "counter.toml").write_text(COUNTER_CATALOG)

    def count(mode: str, cpus: str) -> list[dict]:
        out = tmp_path / f"{mode}.json"
        args = ["counter", "--catalog", str(catalog), "--mode", mode, "--cpus", cpus]
        run = subprocess.run(
            [*SHARING, *args, "--duration", "0.5", "--json", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        document = json.loads(out.read_text())
        return document.get("runs", [document])

    (private,) = count("own-line", "4")
    alone, shared = count("shared-line", "1,4")
    assert private["cpus"] == shared["cpus"] == 4 and private["operations"] > 0
    assert per_op(private) <= 0.01, private["lines"]
    assert per_op(alone) == 0.0
    # a turn ends with an operation of the loop (its few instructions, fewer than the
    # quantum's 200): the shared word moves at each one while all take turns (without the
    # ends: about one in 20). A worker whose loop starts first runs alone until the host
    # starts the others': its operations move nothing (more of them on a loaded host).
    assert per_op(shared) >= 0.5, shared["lines"]


def test_lines_of_n_workers_are_summed_by_name_and_ranked_by_transfers():
    """sharing.line_table on hand-made regions of 3 workers: a line all write, a line one
    writes and the others read, a line only read by all, a private line."""

    def line(paddr: int, written: bool, moved: int, invalidated: int = 0) -> Line:
        sites = [Site(0x10 if written else 0x20, 0 if written else 1, 1 if written else 0)]
        mask = (0, 1) if written else (1, 0)
        return Line(paddr, paddr, *mask, sites=sites, transfers=moved, invalidations=invalidated)

    workers = [
        Region(vcpu=v, tag=v, flags=24, accesses=0, dropped_in_interrupts=0, interrupts=0)
        for v in range(3)
    ]
    for v, region in enumerate(workers):
        region.lines[0x1000] = line(0x1000, True, 5)  # all write
        region.lines[0x2000] = line(0x2000, v == 0, 0 if v == 0 else 2, 3 if v == 0 else 0)
        region.lines[0x3000] = line(0x3000, False, 0)  # read by all: not shared with a write
        region.lines[0x4000 + 0x40 * v] = line(0x4000 + 0x40 * v, True, 0)  # private
    names = {0x1000: "counter"}
    rows = line_table(workers, lambda ln: names.get(ln.paddr, UNNAMED), {0x10: "bump"}.get)
    # a named line by its data alone; a line of no named data by its writers too
    assert [(r["name"], r["lines"], r["transfers"], r["invalidations"]) for r in rows] == [
        ("counter", 1, 15, 0),
        (f"{UNNAMED} (written by bump)", 1, 4, 3),
    ]


def test_a_heap_line_is_named_by_the_smallest_block_that_held_it():
    """heap_blocks on hand-made records: a 4 KiB chunk reserved first, then two objects in
    it; a line no block held has no name."""
    records = [(0x10000, 4096, 0xA), (0x10040, 128, 0xB), (0x10100, 64, 0xC)]
    lines = [0x10000, 0x10040, 0x10080, 0x10100, 0x20000]
    held = heap_blocks(records, lines, {0xA: "reserve", 0xB: "new_queue", 0xC: "new_node"}.get)
    assert {line: block_name(block) for line, block in held.items()} == {
        0x10000: "reserve:alloc(4096)+0x0",
        0x10040: "new_queue:alloc(128)+0x0",
        0x10080: "new_queue:alloc(128)+0x40",
        0x10100: "new_node:alloc(64)+0x0",
    }


def test_a_line_is_named_by_the_blocks_that_held_it_in_the_window():
    """held_in_window on hand-made records (address, size, site, TSC; site 0: given back)
    and a window from TSC 100 to 200."""
    records = [
        (0x1000, 64, 0xA, 10),  # the setup's, given back before the window
        (0x1000, 0, 0, 20),
        (0x1000, 128, 0xB, 30),  # held through the window
        (0x2000, 64, 0xC, 150),  # made and given back in it
        (0x2000, 0, 0, 160),
        (0x3000, 64, 0xD, 250),  # the report's, after it
    ]
    held = held_in_window(records, [100, 200])
    assert sorted(held) == [(0x1000, 128, 0xB), (0x2000, 64, 0xC)]


def ldu_counts(tmp_path: Path, mode: str, run: int) -> dict:
    """One real count of ldu-u90 at 4 emulated CPUs (a short window)."""
    out = tmp_path / f"{mode}-{run}.json"
    args = ["ldu-u90", "--mode", mode, "--cpus", "4", "--duration", "0.5", "--json", str(out)]
    done = subprocess.run([*SHARING, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_ldu_queues_are_one_line_global_and_one_per_worker_per_core(tmp_path):
    """The LDU row's two modes are told apart by their queues' lines (the allocation that
    holds them, the same in every run): one line that every worker's updates write, or a
    line per worker that its own updates write. The names of the first run's top lines
    are found in a second run."""
    global_, again = ldu_counts(tmp_path, "ldu-global", 1), ldu_counts(tmp_path, "ldu-global", 2)
    percore = ldu_counts(tmp_path, "ldu-percore", 1)

    def queues(document: dict) -> set[str]:
        return {row["name"] for row in document["lines"] if row["name"].startswith("ldu_queues:")}

    # one queue line, of the type LDU's DWARF gives (`ldu_queues:alloc(64)+0x0 (struct
    # ldu_queue.head)`: the fields the workers touched follow)
    (queue,) = queues(global_)
    assert queue.startswith("ldu_queues:alloc(64)+0x0 (struct ldu_queue."), global_["lines"][:10]
    # the setup's queue and the 4 workers' (a queue of its own each: 64 bytes apart)
    assert len(queues(percore)) >= 3, percore["lines"][:10]
    # each named by its element of the array of queues (`+0x40 (struct ldu_queue[1].head)`)
    for name in queues(percore):
        offset = int(name.split("+")[1].split()[0], 16)
        assert name.startswith("ldu_queues:alloc(320)+"), name
        assert name.endswith(f" (struct ldu_queue[{offset // 64}].head)"), name
    assert {row["name"] for row in global_["lines"][:3]} <= {row["name"] for row in again["lines"]}


SET_TYPES = """
#include <pthread.h>
#include <stdlib.h>
struct node { long key; struct node *left, *right; char rest[40]; };
struct set { void *ops; pthread_rwlock_t lock; struct node *root; };
struct state { long head, tail; struct node ring[]; };
struct set *make_set(void) { struct set *s = malloc(sizeof *s); return s; }
void *make_state(int n) { struct state *s = malloc(sizeof *s + n * sizeof(struct node)); return s; }
struct queue { _Alignas(64) long head; };
struct queue *make_queues(unsigned n) { return malloc(n * sizeof(struct queue)); }
struct base { void *ops; };
struct derived { struct base base; long more[7]; };
struct base *make_derived(void) { struct derived *d = malloc(sizeof *d); return &d->base; }
"""


def test_a_heap_line_of_a_known_type_is_named_by_the_fields_touched(tmp_path):
    """ProgramNames.fields_of on a real -g object: the words of a reader-writer lock the
    workers touched, which element of a flexible array member (a block of any size
    past its struct) with which of its fields, and which element of an array of the
    struct its function returns a pointer to (LDU's queues), unless a local pointer
    says the block is a larger struct that begins with it."""
    source, obj = tmp_path / "set.c", tmp_path / "set.o"
    source.write_text(SET_TYPES)
    subprocess.run(["cc", "-g", "-c", "-o", str(obj), str(source)], check=True)
    names = ProgramNames(None, 0, None, FieldNames([obj]))  # fields_of needs no symbols
    # (size, function, kind, the line's offset in the block, its start less the block's):
    # a struct set at 0x1000; 3 nodes after a 16-byte header at 0x2000, whose second line
    # holds ring[0]'s end and ring[1]'s start (bytes 16 to 31 of the line: key and left)
    names.heap = {
        0x1000: (72, "make_set", "alloc", 0, 0),
        0x2040: (16 + 3 * 64, "make_state", "alloc", 0x40, 0x40),
        0x3000: (72, "make_set", "mmap", 0, 0),
        0x4000: (72, "unknown", "alloc", 0, 0),
        0x6080: (5 * 64, "make_queues", "alloc", 0x80, 0x80),
        0x7000: (200, "make_queues", "alloc", 0, 0),
        0x8000: (64, "make_derived", "alloc", 0, 0),
    }
    lock = names.fields_of(0x1000, 1 << 8 | 1 << 20)  # the lock's bytes 0 and 12
    assert lock == " (struct set.lock.__data.{__readers,__writers_futex})"
    assert names.fields_of(0x2040, 0xFFFF << 16) == " (struct state.ring[1].{key,left})"
    assert names.fields_of(0x3000, 1) == ""  # a mapping: no type
    assert names.fields_of(0x4000, 1) == ""  # no DWARF says what the function made
    assert names.fields_of(0x5000, 1) == ""  # no block
    assert names.fields_of(0x6080, 0xFF) == " (struct queue[2].head)"  # the third queue
    assert names.fields_of(0x7000, 1) == ""  # not a whole number of queues: not an array
    # a pointer to the block's first member returned: the struct its local points to
    assert names.fields_of(0x8000, 1 << 8) == " (struct derived.more[0])"


def test_each_worker_s_line_of_one_name_stays_in_one_row_with_all_fields_touched():
    """line_table with fields: two workers' blocks, each line shared by both, one line's
    bytes 0-7 touched, the other's bytes 8-15; the row's fields are both lines' bytes
    (named per line they would be two rows, apart from one run to the next)."""

    def line(paddr: int, mask: int) -> Line:
        return Line(
            paddr, paddr, 0, mask, sites=[Site(0x10, 0, mask)], transfers=1, invalidations=0
        )

    workers = [
        Region(vcpu=v, tag=v, flags=24, accesses=0, dropped_in_interrupts=0, interrupts=0)
        for v in range(2)
    ]
    for region in workers:
        region.lines[0x1000] = line(0x1000, 0xFF)
        region.lines[0x2000] = line(0x2000, 0xFF00)
    named: list[int] = []

    def fields_of(ln, touched: int) -> str:
        named.append(touched)
        return f" (bytes {touched:#x})"

    rows = line_table(workers, lambda ln: "site:alloc(64)+0x0", {0x10: "f"}.get, fields_of)
    assert [(r["name"], r["lines"], r["transfers"]) for r in rows] == [
        ("site:alloc(64)+0x0 (bytes 0xffff)", 2, 4)
    ]
    assert named == [0xFFFF]


def test_a_benchmark_with_a_regime_gives_it_per_operation_of_the_window():
    """sockbench's catalog entry names `served_other` as its regime: `sharing` gives its
    count per operation of the regions (the lines' operations, not the window's `ops`);
    a benchmark without one, or a run that did not report the sum, has none."""
    from scalecheck.bench.catalog import load_catalog

    catalog = load_catalog()
    sums = {"ops": 308, "served_own": 173, "served_other": 250}
    result = {"extra": sums, "harness": {"region_ops": 429}}
    said = sharing_script.regime(catalog["sockbench"], result)
    assert said == {"extra": "served_other", "per_op": 250 / 429}
    assert sharing_script.regime(catalog["openbench"], result) is None
    assert sharing_script.regime(catalog["sockbench"], {"extra": {"ops": 10}}) is None


def test_a_transfer_cost_given_replaces_the_profiles_within_and_across_sockets():
    """--transfer-ns: the check at N = 2 predicts on the cost probed in each round."""
    machine = predict.given_transfer_cost(predict.load_machine("e7-8870"), 50.0)
    assert machine.transfer_ns(2) == machine.transfer_ns(80) == 50.0
    assert "50.0 ns" in machine.source and "50.0 ns" in machine.name  # the plot's title
