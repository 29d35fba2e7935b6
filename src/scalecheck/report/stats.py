"""Counts per test, per operation pair and per code site, from a loaded ``Run``."""

import re
from collections import Counter
from dataclasses import dataclass, field

from scalecheck.formats.resultsfile import NOT_RUN_STATUSES, Run

CONFLICT_FREE = "conflict-free"
CONFLICTING = "conflicting"
NOT_RUN = "not run"
# The kernel's results fit neither order the model allows: a disagreement between model
# and kernel, a conformance result of its own. Such a test says nothing about conflicts.
MISMATCH = "mismatch"
# The results fit a choice the model allows that leaves the path the test was made for
# (docs/format-tests.md): legal, but not a test of that path; never conflict-free or
# conflicting either.
LEFT_PATH = "left the path"

# A missing results line is a test the tracer never reached; it is reported like a crash.
MISSING_STATUS = "missing"

# The function part of a code site: what precedes "+0x..." or a " (file:line)" suffix.
_FUNCTION_NAME = re.compile(r"[^+\s(]+")


def outcome(result: dict | None) -> str:
    """Tests that did not run to the end or mismatched the model are never counted as
    conflict-free or conflicting."""
    if result is None or result["status"] in NOT_RUN_STATUSES:
        return NOT_RUN
    if result["status"] == "mismatch":
        return MISMATCH
    if result["status"] == "left_path":
        return LEFT_PATH
    return CONFLICT_FREE if result["conflict_free"] else CONFLICTING


def status_of(result: dict | None) -> str:
    return MISSING_STATUS if result is None else result["status"]


@dataclass
class Counts:
    tests: int = 0
    conflict_free: int = 0
    conflicting: int = 0
    not_run: int = 0
    mismatch: int = 0  # ran, but a result matched neither order the model allows
    left_path: int = 0  # ran, and took a legal choice off the test's path
    unstable: int = 0  # repeats gave different conflict sets

    def add(self, result: dict | None):
        self.tests += 1
        kind = outcome(result)
        if kind == CONFLICT_FREE:
            self.conflict_free += 1
        elif kind == CONFLICTING:
            self.conflicting += 1
        elif kind == MISMATCH:
            self.mismatch += 1
        elif kind == LEFT_PATH:
            self.left_path += 1
        else:
            self.not_run += 1
        if (
            result is not None
            and kind in (CONFLICT_FREE, CONFLICTING)
            and result.get("agree") is False
        ):
            self.unstable += 1

    @property
    def share_conflict_free(self) -> float | None:
        """Over all tests: a test not run, mismatched or off its path is not known to be
        conflict-free."""
        return self.conflict_free / self.tests if self.tests else None

    def as_json(self) -> dict:
        return {
            "tests": self.tests,
            "conflict_free": self.conflict_free,
            "conflicting": self.conflicting,
            "not_run": self.not_run,
            "mismatch": self.mismatch,
            "left_path": self.left_path,
            "unstable": self.unstable,
            "share_conflict_free": self.share_conflict_free,
        }


def count_pairs(run: Run) -> dict[tuple[str, str], Counts]:
    """Every unordered pair of the model's operations, including pairs with no tests."""
    pairs = {(a, b): Counts() for i, a in enumerate(run.ops) for b in run.ops[i:]}
    for test in run.tests:
        pairs[run.pair_of(test)].add(run.results.get(test["id"]))
    return pairs


def count_totals(run: Run) -> tuple[Counts, Counter]:
    """All tests' counts, and the not-run tests counted by why they did not run."""
    totals = Counts()
    not_run_by_status: Counter[str] = Counter()
    for test in run.tests:
        result = run.results.get(test["id"])
        totals.add(result)
        if outcome(result) == NOT_RUN:
            not_run_by_status[status_of(result)] += 1
    return totals, not_run_by_status


def mismatches(run: Run, kind: str = MISMATCH) -> list[dict]:
    """Each test whose results fit neither order of the model (or, ``kind`` LEFT_PATH,
    fit only a legal choice off the test's path), with both sides."""
    listed = []
    for test in run.tests:
        result = run.results.get(test["id"])
        if result is not None and outcome(result) == kind:
            got = result.get("results") or {}
            listed.append(
                {
                    "id": test["id"],
                    "pair": list(run.pair_of(test)),
                    "got": {"a": got.get("a"), "b": got.get("b")},
                    "model": test.get("expect"),
                    "detail": result.get("detail", ""),
                }
            )
    return listed


def function_name(pc: str) -> str:
    """``alloc_fd+0x4a/0x1c0`` and ``alloc_fd+0x4a (fs/file.c:512)`` -> ``alloc_fd``."""
    match = _FUNCTION_NAME.match(pc.strip())
    return match.group(0) if match else pc


def side_site(access: dict) -> str:
    names = sorted({function_name(pc) for pc in access["pcs"]})
    return ", ".join(names) if names else "?"


def conflict_code(conflict: dict) -> tuple[str, str]:
    """The code on each side of a conflict: the functions that touched the shared data
    (``sites``, when the tracer recorded them), else every function that touched the line."""
    if conflict.get("sites"):
        return (
            ", ".join(sorted({a for a, _ in conflict["sites"]})),
            ", ".join(sorted({b for _, b in conflict["sites"]})),
        )
    return side_site(conflict["a"]), side_site(conflict["b"])


def data_name(conflict: dict) -> str:
    """What the conflicting data is: the tracer's data name (`files_struct.file_lock`),
    else, in results without one, the data symbol, else the kind of data."""
    return conflict.get("data") or conflict.get("data_symbol") or f"{conflict['kind']} data"


@dataclass
class Site:
    """Conflicts on the same data between the same code on both sides."""

    data: str
    sites: tuple[str, str]
    kind: str  # kind and symbol of the data (docs/format-results.md), as first seen
    data_symbol: str
    tests: list[str] = field(default_factory=list)  # distinct test ids, in file order
    pairs: set = field(default_factory=set)
    lines: set = field(default_factory=set)

    @property
    def key(self) -> tuple:
        return self.data, self.sites

    @property
    def label(self) -> str:
        a_site, b_site = self.sites
        code = a_site if a_site == b_site else f"{a_site} / {b_site}"
        return f"{self.data} in {code}"

    def as_json(self, rank: int) -> dict:
        return {
            "rank": rank,
            "label": self.label,
            "data": self.data,
            "tests": len(self.tests),
            "op_pairs": len(self.pairs),
            "lines": len(self.lines),
            "kind": self.kind,
            "data_symbol": self.data_symbol,
            "sites": list(self.sites),
            "example_tests": self.tests[:5],
        }


def bottleneck_sites(run: Run) -> list[Site]:
    """Conflicting tests grouped by (data name, sorted pair of code sites), ranked by how
    many distinct tests hit each group."""
    sites: dict[tuple, Site] = {}
    for test in run.tests:
        result = run.results.get(test["id"])
        if result is None or outcome(result) != CONFLICTING:
            continue
        for conflict in result["conflicts"]:
            first, second = sorted(conflict_code(conflict))
            site = Site(
                data_name(conflict),
                (first, second),
                conflict["kind"],
                conflict.get("data_symbol") or "",
            )
            site = sites.setdefault(site.key, site)
            if not site.tests or site.tests[-1] != test["id"]:
                site.tests.append(test["id"])
            site.pairs.add(run.pair_of(test))
            site.lines.add(conflict.get("line", ""))
    return sorted(sites.values(), key=lambda s: (-len(s.tests), -len(s.pairs), s.key))


def percent_text(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def summary_line(totals: Counts) -> str:
    return (
        f"{totals.conflict_free} of {totals.tests} tests conflict-free "
        f"({percent_text(totals.share_conflict_free)}); "
        f"{totals.conflicting} conflicting, {totals.mismatch} mismatched the model, "
        + (f"{totals.left_path} left the path, " if totals.left_path else "")
        + f"{totals.not_run} not run"
    )
