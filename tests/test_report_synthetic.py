"""The report on a fake run of the full 18-operation posix model, generated here from a
seeded random choice of outcomes; the expected numbers are recounted from that fake data."""

import json
import random
import re
from collections import defaultdict
from pathlib import Path

import pytest

from scalecheck.report import make_report
from test_report_outputs import parse_page, svg_texts

POSIX_OPS = [
    "open",
    "link",
    "unlink",
    "rename",
    "stat",
    "fstat",
    "lseek",
    "close",
    "pipe",
    "read",
    "write",
    "pread",
    "pwrite",
    "mmap",
    "munmap",
    "mprotect",
    "memread",
    "memwrite",
]
# (kind, data symbol, a-side pcs, b-side pcs) a fake conflict can be made of.
FAKE_CONFLICTS = [
    ("heap", "", ["alloc_fd+0x4a", "fd_install+0x1f"], ["alloc_fd+0x4a"]),
    ("heap", "", ["lockref_get_not_dead+0x1a"], ["dput+0x30/0x200 (fs/dcache.c:880)"]),
    ("static", "rename_lock+0x0", ["d_move+0x12"], ["d_lookup+0x40"]),
    ("percpu", "mm_cpumask_pcpu+0x8", ["flush_tlb_mm_range+0x9e"], ["switch_mm_irqs_off+0x1c"]),
    ("pagetable", "", ["__handle_mm_fault+0x2f0"], ["zap_pte_range+0x88"]),
]
STATUSES = ["ok"] * 12 + ["mismatch", "timeout", "crash", "error", None]  # None: no line


def write_fake_run(directory: Path, seed: int):
    rng = random.Random(seed)
    tests, results = [], []
    for i, first in enumerate(POSIX_OPS):
        for second in POSIX_OPS[i:]:
            count = rng.choice([0, 1, 2, 5])
            if first == "open":
                # Every operation then first appears in a test of open, so in model order.
                count = max(count, 1)
            for number in range(1, count + 1):
                # Pairs are unordered; half of the tests name them the other way round.
                a, b = (first, second) if rng.random() < 0.5 else (second, first)
                test_id = f"{a}-{b}/p1/t{number}"
                tests.append(
                    {
                        "id": test_id,
                        "pair": [a, b],
                        "path": 1,
                        "model": "posix",
                        "setup": {},
                        "calls": [{"op": a, "args": {}}, {"op": b, "args": {}}],
                        "expect": {"ab": [{}, {}], "ba": [{}, {}]},
                    }
                )
                status = rng.choice(STATUSES)
                if status is None:
                    continue
                result = {"id": test_id, "pair": [a, b], "status": status, "detail": ""}
                if status in ("ok", "mismatch"):
                    picked = rng.sample(FAKE_CONFLICTS, rng.choice([0, 0, 1, 2]))
                    result.update(
                        conflict_free=not picked,
                        agree=True,
                        conflicts=[
                            {
                                "line": hex(0xFFFF888000000000 + 64 * rng.randrange(4)),
                                "kind": kind,
                                "data_symbol": symbol,
                                "a": {"write": True, "pcs": a_pcs},
                                "b": {"write": True, "pcs": b_pcs},
                            }
                            for kind, symbol, a_pcs, b_pcs in picked
                        ],
                    )
                results.append(result)
    (directory / "trace").mkdir(parents=True)
    header = {"format": "scalecheck-tests", "version": 1, "model": "posix"}
    (directory / "tests.jsonl").write_text(
        "\n".join(json.dumps(line) for line in [header, *tests]) + "\n"
    )
    results_header = {
        "format": "scalecheck-results",
        "version": 1,
        "target": "linux",
        "kernel": {"release": "fake"},
    }
    (directory / "trace" / "results.jsonl").write_text(
        "\n".join(json.dumps(line) for line in [results_header, *results]) + "\n"
    )
    return tests, {result["id"]: result for result in results}


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("synthetic")
    tests, results = write_fake_run(directory, seed=20131103)
    return directory, tests, results, make_report(directory)


def recount_pairs(tests, results):
    counts = defaultdict(
        lambda: {"tests": 0, "conflict_free": 0, "conflicting": 0, "mismatch": 0, "not_run": 0}
    )
    for test in tests:
        pair = tuple(sorted(test["pair"], key=POSIX_OPS.index))
        entry = counts[pair]
        entry["tests"] += 1
        result = results.get(test["id"])
        if result is None or result["status"] not in ("ok", "mismatch"):
            entry["not_run"] += 1
        elif result["status"] == "mismatch":
            entry["mismatch"] += 1
        elif result["conflict_free"]:
            entry["conflict_free"] += 1
        else:
            entry["conflicting"] += 1
    return counts


def test_all_171_pairs_of_the_posix_model_are_counted(fake_run):
    _, tests, results, summary = fake_run
    assert summary["ops"] == POSIX_OPS
    assert len(summary["pairs"]) == 171
    expected = recount_pairs(tests, results)
    for entry in summary["pairs"]:
        counted = expected.get(
            tuple(entry["pair"]),
            {"tests": 0, "conflict_free": 0, "conflicting": 0, "mismatch": 0, "not_run": 0},
        )
        assert {key: entry[key] for key in counted} == counted, entry["pair"]
    assert summary["totals"]["tests"] == len(tests)
    assert summary["totals"]["conflict_free"] == sum(c["conflict_free"] for c in expected.values())
    assert any(entry["tests"] == 0 for entry in summary["pairs"])


def test_sites_are_ranked_by_distinct_tests(fake_run):
    _, _tests, results, summary = fake_run
    tests_per_site = defaultdict(set)
    # A mismatched test's conflicts are recorded but not counted.
    for result in (r for r in results.values() if r["status"] == "ok"):
        for conflict in result.get("conflicts", []):
            sides = sorted(
                ", ".join(sorted({re.split(r"[+ ]", pc)[0] for pc in side["pcs"]}))
                for side in (conflict["a"], conflict["b"])
            )
            tests_per_site[(conflict["kind"], *sides)].add(result["id"])
    ranked = [(site["kind"], *site["sites"]) for site in summary["top_sites"]]
    assert sorted(ranked) == sorted(tests_per_site)
    counts = [site["tests"] for site in summary["top_sites"]]
    assert counts == sorted(counts, reverse=True)
    assert counts == [len(tests_per_site[key]) for key in ranked]


def test_heatmap_and_html_cover_every_pair_with_tests(fake_run):
    directory, _tests, _results, summary = fake_run
    labels = sorted(
        int(text) for text in svg_texts(directory / "report" / "heatmap.svg") if text.isdigit()
    )
    assert labels == sorted(p["conflicting"] for p in summary["pairs"] if p["conflicting"])
    page, _ = parse_page(directory / "report" / "index.html")
    assert set(page.links) <= page.ids
    pairs_with_tests = {
        f"pair-{p['pair'][0]}-{p['pair'][1]}" for p in summary["pairs"] if p["tests"]
    }
    assert {link for link in page.links if link.startswith("pair-")} == pairs_with_tests
