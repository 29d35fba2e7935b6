"""Turns what the guest reported for one test (results of each repeat, the plugin's
regions) into its results.jsonl record (docs/format-results.md)."""

import json
from dataclasses import dataclass, field

from scalecheck.trace.regions import conflicting_lines
from scalecheck.trace.testfile import Test, check_results


# The repeat number the driver gives its unreported warm-up runs.
WARMUP_REP = 127


@dataclass
class TestProgress:
    """Everything reported so far about one test in a running VM."""
    test: Test
    index: int
    repeats: dict = field(default_factory=dict)  # rep -> ("R", res_a, res_b) | ("X"|"H", why)

    def complete(self, repeats: int) -> bool:
        return len(self.repeats) >= repeats or any(kind == "X" and rep < 0
                                                   for rep, (kind, *_) in self.repeats.items())


def tag(index: int, rep: int, side: int) -> int:
    """The tag the driver encodes before each start marker (tracer/guest/driver.c)."""
    return ((index << 8) | (rep << 1) | side) & 0xFFFF_FFFF


def is_warmup(region_tag: int) -> bool:
    return (region_tag >> 1) & 0x7F == WARMUP_REP


def base_record(test: Test, status: str, detail: str = "") -> dict:
    return {"id": test.id, "pair": test.pair, "status": status, "detail": detail,
            "conflict_free": None, "agree": None,
            "noise": {"ctxswitch": False, "interrupts_dropped": 0},
            "accesses": {"a": 0, "b": 0}, "conflicts": [], "results": {}}


def _side(line, symbols) -> dict:
    return {"write": line.written, "pcs": [symbols.pc_name(pc) for pc, _ in line.pcs],
            "write_pcs": [symbols.pc_name(pc) for pc, wrote in line.pcs if wrote]}


def _conflicts(region_a, region_b, symbols, granularity):
    conflicts = []
    for la, lb in conflicting_lines(region_a, region_b, granularity):
        kind, data_symbol = symbols.classify(la.vaddr)
        conflicts.append({"line": f"{la.vaddr:#x}", "paddr": f"{la.paddr:#x}", "kind": kind,
                          "data_symbol": data_symbol, "a": _side(la, symbols), "b": _side(lb, symbols)})
    return conflicts


def signature(conflict: dict) -> tuple:
    """What identifies a conflict across repeats: the kind of data, its name when it has
    one (static and per-cpu data), and the functions that wrote the line on each side.
    Heap addresses differ between repeats, and so does which fields of an object share a
    line (slab objects are not line-aligned), hence the exact PCs that touch it."""
    data = conflict["data_symbol"].split(" [cpu")[0] if conflict["kind"] in ("static", "percpu") else ""
    return (conflict["kind"], data,
            tuple(sorted({function_of(pc) for pc in conflict["a"]["write_pcs"]})),
            tuple(sorted({function_of(pc) for pc in conflict["b"]["write_pcs"]})))


def site_pairs(conflicts: list, symbols_function) -> list:
    """Conflicts grouped by the pair of functions that touched the line on each side."""
    groups = {}
    for c in conflicts:
        key = (",".join(sorted({symbols_function(p) for p in c["a"]["write_pcs"] or c["a"]["pcs"]})),
               ",".join(sorted({symbols_function(p) for p in c["b"]["write_pcs"] or c["b"]["pcs"]})))
        group = groups.setdefault(key, {"a": key[0], "b": key[1], "lines": 0, "kinds": set()})
        group["lines"] += 1
        group["kinds"].add(c["kind"])
    return [dict(g, kinds=sorted(g["kinds"])) for g in groups.values()]


def function_of(site: str) -> str:
    return site.split("+")[0].split(" ")[0]


def finish(progress: TestProgress, regions: dict, symbols, repeats: int, granularity: str) -> dict:
    """The record of a test whose repeats all reported (regions: tag -> Region)."""
    test = progress.test
    reports = progress.repeats
    for rep, (kind, *rest) in sorted(reports.items()):
        if kind == "X":
            return base_record(test, "error", f"setup: {rest[0]}")
        if kind == "H":
            return base_record(test, "timeout", f"repeat {rep}: {rest[0]} (guest watchdog)")
    per_repeat, noise_switch, interrupts, dropped = [], False, 0, 0
    mismatch, results, order = "", {}, None
    for rep in range(repeats):
        _, res_a, res_b = reports[rep]
        try:
            res_a, res_b = json.loads(res_a), json.loads(res_b)
        except json.JSONDecodeError:
            return base_record(test, "error", f"repeat {rep}: unreadable result from the driver")
        order = check_results(test, res_a, res_b)
        if order is None and not mismatch:
            mismatch = f"repeat {rep}: got A={json.dumps(res_a)} B={json.dumps(res_b)}, expected " \
                       f"{json.dumps((test.raw.get('expect') or {}).get('ab'))}"
        if rep == 0:
            results = {"a": res_a, "b": res_b, "expected_order": order}
        ra, rb = regions.get(tag(progress.index, rep, 0)), regions.get(tag(progress.index, rep, 1))
        if ra is None or rb is None:
            return base_record(test, "error", f"repeat {rep}: no trace from the plugin for call "
                                              f"{'A' if ra is None else 'B'}")
        noise_switch |= ra.context_switched or rb.context_switched
        interrupts += ra.interrupts + rb.interrupts
        dropped += ra.dropped_in_interrupts + rb.dropped_in_interrupts
        per_repeat.append((ra, rb, _conflicts(ra, rb, symbols, granularity)))
    signatures = [{signature(c) for c in conflicts} for _, _, conflicts in per_repeat]
    # A conflict counts only if every repeat shows it.
    repeated = set.intersection(*signatures)
    first_a, first_b, first_conflicts = per_repeat[0]
    conflicts = [c for c in first_conflicts if signature(c) in repeated]
    record = base_record(test, "mismatch" if mismatch else "ok", mismatch)
    record.update({
        "conflict_free": not conflicts,
        "agree": all(s == signatures[0] for s in signatures),
        "noise": {"ctxswitch": noise_switch, "interrupts_dropped": interrupts,
                  "accesses_dropped": dropped,
                  "transient_conflicts": sum(len(s - repeated) for s in signatures)},
        "accesses": {"a": first_a.accesses, "b": first_b.accesses},
        "lines": {"a": len(first_a.lines), "b": len(first_b.lines)},
        "conflicts": conflicts,
        "site_pairs": site_pairs(conflicts, function_of),
        "results": results,
    })
    return record
