"""bench/many_cores.py's comparison of two runs at N = 8: rows found by allocation and
offset, and counting noise that holds the clusters a write starts (each worker that reads
the line after it fetches it: one write, several transfers); the check at N = 2's verdict
on paired measurements; bench/machine_probe.py's weights per kind of move."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import pytest  # noqa: E402

import machine_probe  # noqa: E402
import many_cores  # noqa: E402
from scalecheck.run.regions import MOVE_KINDS  # noqa: E402


def row(name: str, transfers: int, invalidations: int, loads: int) -> dict:
    kinds = {"load": loads, "store": 0, "store_invalidation": invalidations}
    return {"name": name, "transfers": transfers, "invalidations": invalidations} | {
        "moves_by_kind": kinds | {"atomic": 0, "atomic_invalidation": 0}
    }


def run(ops: int, *lines: dict, regime: float | None = None) -> dict:
    document = {"operations": ops, "schedule_lapsed": 0, "lines": list(lines)}
    return document | ({"regime": {"extra": "served_other", "per_op": regime}} if regime else {})


def test_a_line_fetched_by_every_reader_after_each_write_varies_as_its_writes():
    """The same 18 % apart: within the noise of 100 writes each read by 7 workers (700
    transfers in 100 clusters), apart as 700 transfers of one write each."""
    clustered = many_cores.difference([(700, 100), (574, 82)], [1000, 1000])
    single = many_cores.difference([(700, 700), (574, 574)], [1000, 1000])
    assert clustered.endswith("18% (noise) |"), clustered
    # apart: which moved, its writes per operation or the transfers each write starts
    assert single.endswith("18% (apart); writes/op 0.700 / 0.574, transfers/write 1.00 / 1.00 |")
    assert many_cores.difference([(700, 100), (680, 98)], [1000, 1000]).endswith("3% |")


def test_rows_are_found_by_allocation_and_offset_whatever_fields_a_run_touched():
    """A heap row is found in the second run by its allocation and offset: a run's name
    holds the fields its workers touched, which another run may not (the lines at one
    offset named apart by their fields, in older files, are summed)."""
    site = "worker_setup:alloc(6272)+0x1040"
    first = run(1000, row(f"{site} (struct s.ring[21].{{key,left}})", 400, 50, 350))
    second = run(
        1000,
        row(f"{site} (struct s.ring[21].{{key}})", 290, 40, 250),
        row(f"{site} (struct s.ring[21].{{left}})", 90, 10, 80),
        row("slots", 5, 5, 0),
    )
    (compared,) = many_cores.agreement("ldu", first, second)
    assert "| 400 / 380 | 0.4000 | 0.3800 | 5% |" in compared, compared
    # a static's name is its own key; a row the second run lacks counts 0
    (static,) = many_cores.agreement("x", run(1000, row("slots", 310, 124, 173)), run(1000))
    assert "| 310 / 0 |" in static and "(apart)" in static, static


def test_a_series_that_shares_no_line_is_said_so():
    (said,) = many_cores.agreement("unordered", run(1000), run(1000))
    assert "no line shared (second run: 0)" in said, said


def test_lines_apart_between_two_regimes_are_said_to_be_the_regimes():
    """dgram-shared's runs take 39 % or 55 % of their requests from another worker's
    client (`scalecheck sharing`'s `regime`), which sets how often a request's buffer
    moves: a line apart between two regimes is the benchmark's timing, not a count's."""
    buffer = ("kernel: sk_buff.head[]", 0)
    first = run(1000, row(buffer[0], 4000, 0, 3000), regime=0.55)
    (apart,) = many_cores.agreement(
        "dgram-shared", first, run(1000, row(buffer[0], 2800, 0, 2100), regime=0.39)
    )
    assert "served_other per op 0.55 / 0.39" in apart and "(regimes)" in apart, apart
    (same,) = many_cores.agreement(
        "dgram-shared", first, run(1000, row(buffer[0], 2800, 0, 2100), regime=0.54)
    )
    assert "(apart)" in same, same


def test_a_round_is_set_beside_two_whole_cpus_and_its_probe_said_when_time_slices():
    """A round's ratio over the empty loop's of the same seconds, times 2: a host that
    gave two busy workers 1.8x of one gives a series' 1.0x as 1.11x of two whole CPUs;
    a probe over 1000 ns measured the host's time slices, not a transfer."""
    loaded = many_cores.Round(pairs=[0.9, 1.0, 1.1], empty_pairs=[1.8], transfer_ns=5000.0)
    assert abs(loaded.of_machine - 2 / 1.8) < 1e-9 and not loaded.probed
    assert many_cores.Round(pairs=[0.6], empty_pairs=[2.0], transfer_ns=66.0).probed


def work_run(ops: int, seconds: float, reader_ops: int | None = None) -> dict:
    """A hand-made result of empty's "*-work" modes at 2 workers."""
    extra = {"ops": ops, "seconds": seconds} | ({"reader_ops": reader_ops} if reader_ops else {})
    return {"workers": 2, "extra": extra}


def test_a_kinds_weight_is_its_extra_time_per_operation_over_the_transfer():
    """2e6 operations of 2 workers in 1 s are 1,000 ns each; on the own line 900 ns: the
    store costs 100 ns, at a 200 ns transfer half a transfer. load-work's reader (1e6 of
    its own operations) and writer (the rest) are timed apart."""
    shared = {
        "store-work": [work_run(2_000_000, 1.0)],
        "atomic-work": [work_run(1_000_000, 1.0)],
        "load-work": [work_run(2_500_000, 1.0, reader_ops=1_000_000)],
    }
    own = {
        "store-work": [work_run(2_000_000, 0.9)],
        "atomic-work": [work_run(2_000_000, 1.0)],
        "load-work": [work_run(3_000_000, 1.0, reader_ops=1_250_000)],
    }
    costs = machine_probe.move_costs(shared, own)
    assert costs["store"] == pytest.approx(100.0)
    assert costs["atomic"] == pytest.approx(1000.0)
    assert costs["load"] == pytest.approx(200.0)  # 1,000 ns against 800 ns
    assert costs["store_invalidation"] == pytest.approx(1e9 / 1.5e6 - 1e9 / 1.75e6)
    weights = machine_probe.move_weights(costs | {"store": -5.0}, transfer_ns=200.0)
    assert weights["atomic"] == weights["atomic_invalidation"] == pytest.approx(5.0)
    assert weights["load"] == pytest.approx(1.0)
    assert weights["store"] == 0.0  # faster shared than own: noise, not a negative cost
    assert set(weights) == set(MOVE_KINDS)


def test_a_check_is_made_only_where_the_pairs_and_the_rounds_repeat_within_10_percent():
    """A prediction is checked against the rounds' median over the empty loop's; where a
    round's pairs (IQR over median) or the rounds' medians spread more than 10 %, the
    error is said but not judged."""
    steady = [1.50, 1.52, 1.49, 1.51, 1.50]
    empty = [2.0, 1.98, 2.02, 2.0, 2.0]
    rounds = [many_cores.Round(steady, empty, 66.0), many_cores.Round(steady, empty, 70.0)]
    assert many_cores.check_verdict(1.55, rounds) == "+3%, within 10 %"
    assert many_cores.check_verdict(1.80, rounds) == "+20%, OFF by more than 10 %"
    scattered = many_cores.Round([1.0, 1.3, 1.5, 1.7, 2.0], empty, 66.0)
    assert many_cores.iqr(scattered.pairs) > 0.10
    assert many_cores.check_verdict(1.55, [scattered, rounds[0]]).endswith("no check")
    drifted = many_cores.Round([x * 1.2 for x in steady], empty, 66.0)
    assert drifted.repeats
    assert many_cores.check_verdict(1.55, [drifted, rounds[0]]).endswith(": no check")


def test_a_pair_the_host_starved_is_counted_and_stops_the_check():
    """A pair whose 1-thread run made no operation has no ratio (NaN): the round's median
    is of the others, the pair is said, and the round does not repeat."""
    nan = float("nan")
    steady, empty = [1.50, 1.52, 1.49, 1.51], [2.0, 1.98, 2.02, 2.0]
    starved = many_cores.Round([*steady, nan], empty, 66.0)
    assert starved.ratio == pytest.approx(1.505) and not starved.repeats
    assert "(1 starved)" in many_cores.pairs_text([starved])
    assert many_cores.check_verdict(1.5, [starved]).endswith("no check")
    assert many_cores.iqr([nan, 1.0]) == float("inf")
