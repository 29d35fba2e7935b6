"""The filters behind the headline, in the open: the conflict-free share at every
granularity side by side, and what each noise filter removed (docs/report.md).

Every record keeps all the shared lines it repeated (counted or not) and, per filter, how
many counted conflict elements the filter removed, so one run answers for all settings.
"""

from scalecheck.formats.resultsfile import Run

GRANULARITIES = ("bytes", "stable", "line")
GRANULARITY_MEANING = {
    "bytes": "overlapping bytes only (mtrace's true sharing; comparable with Commuter's figures)",
    "stable": "bytes, plus false sharing of data whose address is fixed at link time",
    "line": "every shared cache line with a write, heap false sharing included",
}


def _conformed(run: Run) -> list[dict]:
    """Records of tests that ran and whose results the model allows: the share's base."""
    return [
        result
        for test in run.tests
        if (result := run.results.get(test["id"])) is not None and result["status"] == "ok"
    ]


def granularity_shares(run: Run) -> dict:
    """Per granularity: conflict-free tests among those that ran and conformed. Records
    written before views were recorded have none: the share is then None."""
    records = _conformed(run)
    with_views = [r for r in records if "views" in r]
    shares = {}
    for granularity in GRANULARITIES:
        free = sum(1 for r in with_views if r["views"][granularity])
        shares[granularity] = {
            "conflict_free": free,
            "tests": len(with_views),
            "share": free / len(with_views)
            if with_views and len(with_views) == len(records)
            else None,
            "meaning": GRANULARITY_MEANING[granularity],
        }
    return shares


def filter_effects(run: Run) -> list[dict]:
    """One row per filter: whether the run applied it, the tests it made conflict-free
    (their verdict would be `conflicting` without it) and the conflict elements it removed."""
    header = run.results_header
    applied = header.get("filters") or {}
    granularity = header.get("granularity", "line")
    records = _conformed(run)
    rows = []
    # (name, key in the results header's "filters", key in a record's "filtered", what)
    for name, setting, key, what in (
        ("repeat", "repeat", "unrepeated", "a conflict counts only if every repeat shows it"),
        ("tick work", "tick_work", "tick_work", "CPU-time accounting's accesses dropped"),
    ):
        removed = [r.get("filtered", {}).get(key, 0) for r in records]
        rows.append(
            {
                "filter": name,
                "what": what,
                # Runs that predate the switches applied both filters.
                "on": bool(applied.get(setting, True)),
                "tests_made_conflict_free": sum(
                    1 for r, n in zip(records, removed, strict=True) if n and r["conflict_free"]
                ),
                "conflicts_removed": sum(removed),
            }
        )
    heap_false = sum(
        1 for r in records if "views" in r and r["views"]["stable"] and not r["views"]["line"]
    )
    rows.append(
        {
            "filter": "heap false sharing",
            "what": "false sharing on heap lines listed, not counted (granularity stable)",
            "on": granularity == "stable",
            "tests_made_conflict_free": heap_false if granularity == "stable" else 0,
            "conflicts_removed": sum(len(r.get("false_sharing", [])) for r in records)
            if granularity == "stable"
            else 0,
        }
    )
    return rows


def security_modules(run: Run) -> str:
    """The guest's security-module choice (`scalecheck run --lsm`); "" for a library."""
    if run.implementation == "library":
        return ""
    return run.results_header.get("lsm", "minor")


def naming_coverage(run: Run) -> str:
    """How many conflicting lines carry a data name, and what the kernel did not allow
    naming (the results header's `naming`, absent in older results)."""
    conflicts = [
        c
        for r in run.results.values()
        if r.get("status") in ("ok", "mismatch")
        for c in r.get("conflicts", [])
    ]
    named = sum(1 for c in conflicts if c.get("data"))
    text = f"data named: {named} of {len(conflicts)} conflicting lines"
    missing = (run.results_header.get("naming") or {}).get("missing")
    return f"{text} ({missing})" if missing else text


def views_line(shares: dict) -> str:
    parts = [
        f"{g} {s['share'] * 100:.1f}%" if s["share"] is not None else f"{g} -"
        for g, s in shares.items()
    ]
    tests = next(iter(shares.values()))["tests"]
    return f"conflict-free by granularity: {', '.join(parts)} (of {tests} conformed tests)"
