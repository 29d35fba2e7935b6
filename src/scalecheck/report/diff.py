"""Compares two runs of one model (e.g. two kernels, or two test files), pairing tests by
their content: test ids are positional, so two test files give one id to different tests.
Only the tests both runs have are compared."""

import dataclasses
import json
from collections import Counter

from scalecheck.common.errors import UserError
from scalecheck.formats.resultsfile import Run
from scalecheck.formats.testfile import content_hash
from scalecheck.report.stats import (
    CONFLICT_FREE,
    CONFLICTING,
    MISMATCH,
    NOT_RUN,
    bottleneck_sites,
    count_pairs,
    outcome,
    percent_text,
)
from scalecheck.report.tables import SITE_HEADERS, format_table, site_rows

LISTED_IDS_IN_TEXT = 50
# Results-header fields that decide what counts as a conflict: two runs that differ in one
# would show "new conflicts" that are only another way of counting. None stands for a run
# made before the field existed (whose granularity was "line").
COUNTING_SETTINGS = {"granularity": "line", "filters": None, "repeats": None}


def _settings_text(name: str, other: Run, run: Run, default) -> str:
    there = other.results_header.get(name, default)
    here = run.results_header.get(name, default)
    return f"{name} {json.dumps(there)} there, {json.dumps(here)} here"


def check_comparable(run: Run, other: Run) -> list[str]:
    """Refuses two runs that counted conflicts differently, naming how; returns the other
    differences worth saying beside the comparison (the target: two implementations of one
    interface are what a diff is for, like two kernels)."""
    differ = [
        _settings_text(name, other, run, default)
        for name, default in COUNTING_SETTINGS.items()
        if run.results_header.get(name, default) != other.results_header.get(name, default)
    ]
    if differ:
        raise UserError(
            f"cannot compare {run.directory} with {other.directory}: they counted conflicts "
            f"differently ({'; '.join(differ)}); compare runs made with the same "
            "--granularity, filter options and --repeats"
        )
    if run.results_header.get("target") != other.results_header.get("target"):
        return [_settings_text("target", other, run, None)]
    return []


def diff_runs(run: Run, other: Run) -> dict:
    """``run`` is the new one; ``other`` is the baseline it is compared against."""
    if run.model != other.model:
        raise UserError(
            f"cannot compare {run.directory} (model {run.model}) with "
            f"{other.directory} (model {other.model})"
        )
    differences = check_comparable(run, other)
    here_tests, other_tests = _content_keys(run), _content_keys(other)
    common = here_tests.keys() & other_tests.keys()
    new_conflicts, new_mismatches, fixed, no_longer_run = [], [], [], []
    for key, test in here_tests.items():
        if key not in common:
            continue
        now = outcome(run.results.get(test["id"]))
        before = outcome(other.results.get(other_tests[key]["id"]))
        if before == CONFLICT_FREE and now == CONFLICTING:
            new_conflicts.append(test["id"])
        elif before != MISMATCH and now == MISMATCH:
            new_mismatches.append(test["id"])
        elif before == CONFLICTING and now == CONFLICT_FREE:
            fixed.append(test["id"])
        elif before != NOT_RUN and now == NOT_RUN:
            no_longer_run.append(test["id"])
    # Pair shares and bottleneck sites over the common tests only.
    run = dataclasses.replace(run, tests=[t for key, t in here_tests.items() if key in common])
    other = dataclasses.replace(other, tests=[t for key, t in other_tests.items() if key in common])

    sites = bottleneck_sites(run)
    other_sites = bottleneck_sites(other)
    other_keys = {site.key for site in other_sites}
    here_keys = {site.key for site in sites}
    return {
        "other": str(other.directory),
        "other_kernel": other.kernel_name,
        "kernel": run.kernel_name,
        "differences": differences,
        "compared_tests": len(common),
        "only_here": len(here_tests) - len(common),
        "only_in_other": len(other_tests) - len(common),
        "new_conflicts": new_conflicts,
        "new_mismatches": new_mismatches,
        "fixed": fixed,
        "no_longer_run": no_longer_run,
        "pair_changes": _pair_changes(run, other),
        "new_sites": [
            site.as_json(rank)
            for rank, site in enumerate(sites, start=1)
            if site.key not in other_keys
        ],
        "gone_sites": [
            site.as_json(rank)
            for rank, site in enumerate(other_sites, start=1)
            if site.key not in here_keys
        ],
    }


def _content_keys(run: Run) -> dict[tuple[str, int], dict]:
    """Each test under (content hash, how many earlier tests have that content), in file
    order: two tests of one file with the same content pair with the other file's in turn."""
    seen: Counter = Counter()
    keys = {}
    for test in run.tests:
        digest = content_hash(test)
        keys[digest, seen[digest]] = test
        seen[digest] += 1
    return keys


def _pair_changes(run: Run, other: Run) -> list[dict]:
    pairs = count_pairs(run)
    other_pairs = count_pairs(other)
    changes = []
    for pair in pairs.keys() & other_pairs.keys():
        now, before = pairs[pair], other_pairs[pair]
        if (now.share_conflict_free, now.conflicting) == (
            before.share_conflict_free,
            before.conflicting,
        ):
            continue
        change = None
        if now.share_conflict_free is not None and before.share_conflict_free is not None:
            change = now.share_conflict_free - before.share_conflict_free
        changes.append(
            {
                "pair": list(pair),
                "share_other": before.share_conflict_free,
                "share": now.share_conflict_free,
                "change": change,
                "conflicting_other": before.conflicting,
                "conflicting": now.conflicting,
            }
        )
    # Worst regressions first; pairs whose tests appeared or vanished go last.
    return sorted(changes, key=lambda c: (c["change"] is None, c["change"] or 0, c["pair"]))


def regressions(diff: dict) -> int:
    """Tests that got worse: new conflicts, new mismatches (results the model does not
    allow) and tests that ran before and no longer do (timeout, crash, error, missing).
    What `--fail-on-new` fails on."""
    return len(diff["new_conflicts"]) + len(diff["new_mismatches"]) + len(diff["no_longer_run"])


def diff_line(diff: dict) -> str:
    return (
        f"against {diff['other']} ({diff['other_kernel']}): "
        f"{len(diff['new_conflicts'])} new conflicts, "
        f"{len(diff['new_mismatches'])} new mismatches, {len(diff['fixed'])} fixed, "
        f"{len(diff['no_longer_run'])} no longer run, "
        f"{len(diff['pair_changes'])} pairs changed, "
        f"{len(diff['new_sites'])} new bottleneck sites"
        + "".join(f" ({difference})" for difference in diff.get("differences", []))
    )


def format_diff_text(diff: dict) -> str:
    parts = [
        diff_line(diff) + "\n",
        f"compared the {diff['compared_tests']} tests both runs have (paired by content, not "
        f"id); {diff['only_here']} only here, "
        f"{diff['only_in_other']} only in {diff['other']}\n",
    ]
    for title, ids in (
        ("New conflicts (conflict-free before, conflicting now)", diff["new_conflicts"]),
        ("New mismatches (results the model does not allow now)", diff["new_mismatches"]),
        ("Fixed (conflicting before, conflict-free now)", diff["fixed"]),
        ("No longer run (ran before; now timeout, crash, error or missing)", diff["no_longer_run"]),
    ):
        if ids:
            shown = "\n".join(f"  {test_id}" for test_id in ids[:LISTED_IDS_IN_TEXT])
            more = (
                f"\n  ... and {len(ids) - LISTED_IDS_IN_TEXT} more (see summary.json)"
                if len(ids) > LISTED_IDS_IN_TEXT
                else ""
            )
            parts.append(f"{title}: {len(ids)}\n{shown}{more}\n")
    if diff["pair_changes"]:
        rows = [
            [
                f"{c['pair'][0]} x {c['pair'][1]}",
                percent_text(c["share_other"]),
                percent_text(c["share"]),
                c["conflicting_other"],
                c["conflicting"],
            ]
            for c in diff["pair_changes"]
        ]
        parts.append(
            "Pairs whose share of conflict-free tests changed:\n"
            + format_table(["pair", "before", "now", "conflicting before", "conflicting now"], rows)
        )
    for title, sites in (
        ("New bottleneck sites", diff["new_sites"]),
        ("Bottleneck sites gone", diff["gone_sites"]),
    ):
        if sites:
            parts.append(f"{title}:\n" + format_table(SITE_HEADERS, site_rows(sites)))
    return "\n".join(parts)
