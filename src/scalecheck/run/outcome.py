"""Turns what the guest reported for one test (results of each repeat, the plugin's
regions) into its results.jsonl record (docs/format-results.md)."""

import functools
import json
from dataclasses import dataclass, field

from scalecheck.binding import abi
from scalecheck.run.counting import ALL_FILTERS_ON, GRANULARITIES, Filters, counts, counts_kind
from scalecheck.run.naming import name_data, symbol_key
from scalecheck.run.regions import PcSet, shared_lines
from scalecheck.run.testcase import (
    LEFT_PATH,
    MISMATCH,
    NotRunnable,
    Test,
    UnsupportedTest,
    check_results,
)
from scalecheck.run.wire import Report

# The repeat number the driver gives its unreported warm-up runs, and the tag layout.
WARMUP_REP = abi.value("WARMUP_REP")
_INDEX_SHIFT, _REP_SHIFT = abi.value("TAG_INDEX_SHIFT"), abi.value("TAG_REP_SHIFT")


@dataclass
class TestProgress:
    """Everything reported so far about one test in a running VM."""

    test: Test
    index: int
    # rep -> its RESULTS, SETUP_FAILED or HUNG report (run/wire.py); rep -1: the test
    # could not be read.
    repeats: dict[int, Report] = field(default_factory=dict)

    def add(self, report: Report) -> None:
        self.repeats[report.rep] = report

    def complete(self, repeats: int) -> bool:
        return len(self.repeats) >= repeats or any(
            report.kind == "SETUP_FAILED" and rep < 0 for rep, report in self.repeats.items()
        )


def function_of(site: str) -> str:
    """The function of a site name (`function+0xoff (file:line)`)."""
    return site.split("+")[0].split(" ")[0]


def tag(index: int, rep: int, side: int) -> int:
    """The tag the driver encodes before each start marker (tracer/include/scalecheck_abi.h)."""
    return ((index << _INDEX_SHIFT) | (rep << _REP_SHIFT) | side) & 0xFFFF_FFFF


def is_warmup(region_tag: int) -> bool:
    return (region_tag >> _REP_SHIFT) & ((1 << (_INDEX_SHIFT - _REP_SHIFT)) - 1) == WARMUP_REP


def unbuilt_record(test: Test, why: UnsupportedTest) -> dict:
    """The record of a test the driver was not given: "unsupported" when the target cannot
    run such a test, else "error"."""
    return base_record(test, "unsupported" if isinstance(why, NotRunnable) else "error", str(why))


def base_record(test: Test, status: str, detail: str = "") -> dict:
    return {
        "id": test.id,
        "pair": test.pair,
        "status": status,
        "detail": detail,
        "conflict_free": None,
        "agree": None,
        "noise": {"ctxswitch": False, "interrupts_dropped": 0},
        "accesses": {"a": 0, "b": 0},
        "conflicts": [],
        "false_sharing": [],
        "results": {},
    }


def _side(line, sites: list, symbols) -> dict:
    """One call's part of a shared line; ``sites``: the line's site_fields."""
    names = [_site_name(pc, symbols) for pc, _, _ in sites]
    return {
        "write": line.written,
        "pcs": names,
        "write_pcs": [name for name, (_, _, write) in zip(names, sites, strict=True) if write],
    }


def _site_name(pc: int, symbols) -> str:
    return symbols.pc_name(pc) if pc else "(more sites)"


@functools.cache
def _site_function(pc: int, symbols) -> str:
    """The function of a site, by which conflicts are grouped (decided once per PC)."""
    return function_of(_site_name(pc, symbols))


def conflict_bytes(la, lb) -> int:
    """The bytes of a shared line that make the conflict (bit i = byte i): those one call
    wrote and the other touched (true sharing); without such bytes (false sharing), the
    bytes either call wrote."""
    overlap = la.write_mask & (lb.read_mask | lb.write_mask) | lb.write_mask & (
        la.read_mask | la.write_mask
    )
    return overlap or la.write_mask | lb.write_mask


def _site_pairs(sites_a: list, sites_b: list, symbols) -> tuple:
    """("true", pairs) when some code sites of A and B touched the same bytes, at least one
    writing: the pairs of their functions, each with the bytes it made conflict. Otherwise
    ("false", pairs of the sites that share the line only, at least one writing, each with
    the bytes they wrote): false sharing. ``sites_a``, ``sites_b``: site_fields.

    Sites are merged by function first: a pair's bytes are a union over its site pairs,
    and `&` distributes over `|`, so the merged masks give the same pairs and bytes (a
    pair overlaps if any of its site pairs does; with no overlap anywhere, its written
    bytes are both functions' writes) at a fraction of the site pairs."""
    by_function_a, by_function_b = _by_function(sites_a, symbols), _by_function(sites_b, symbols)
    true_pairs: dict[tuple, int] = {}
    false_pairs: dict[tuple, int] = {}
    for fa, (written_a, touched_a) in by_function_a.items():
        for fb, (written_b, touched_b) in by_function_b.items():
            overlap = written_a & touched_b | written_b & touched_a
            if overlap:
                true_pairs[fa, fb] = overlap
            elif written_a or written_b:
                false_pairs[fa, fb] = written_a | written_b
    if true_pairs:
        return "true", sorted(true_pairs.items())
    return "false", sorted(false_pairs.items())


def _by_function(sites: list, symbols) -> dict:
    """function -> (bytes its sites wrote, bytes they touched)."""
    masks: dict[str, tuple[int, int]] = {}
    for pc, read, write in sites:
        function = _site_function(pc, symbols)
        written, touched = masks.get(function, (0, 0))
        masks[function] = (written | write, touched | read | write)
    return masks


# CPU-time accounting is the scheduler tick's work. On the isolated CPUs (nohz_full) the
# kernel does it at kernel entry and exit instead, once 4 ms of user or system time have
# gathered, so whether a call pays for it depends on how fast the host ran the setup
# (it reads e.g. mm->total_vm, which a concurrent mmap writes). The plugin drops the
# tick's interrupt; its accesses are dropped here for the same reason. Functions of
# kernel/sched/cputime.c, kernel/tsacct.c and the cgroup/cpuacct accounting hooks.
TICK_WORK = frozenset(
    {
        "vtime_user_enter",
        "vtime_user_exit",
        "vtime_account_kernel",
        "vtime_account_idle",
        "vtime_task_switch_generic",
        "account_user_time",
        "account_system_time",
        "account_system_index_time",
        "account_guest_time",
        "account_idle_time",
        "account_steal_time",
        "acct_account_cputime",
        "acct_update_integrals",
        "__cgroup_account_cputime",
        "__cgroup_account_cputime_field",
        "cpuacct_account_field",
    }
)


@functools.cache
def _code_of(symbols, is_wanted) -> PcSet:
    """The PCs inside the functions whose name ``is_wanted``."""
    return PcSet(lambda pc: pc != 0 and is_wanted(symbols.function(pc)))


@functools.cache
def _tick_code(symbols) -> PcSet:
    """The PCs of CPU-time accounting, with the spans of its functions: a region's lines
    are then looked at only where a value falls in them."""
    return PcSet(
        lambda pc: pc != 0 and symbols.function(pc) in TICK_WORK, symbols.code_spans(TICK_WORK)
    )


@functools.cache
def _defines_any(symbols, functions: frozenset) -> bool:
    return symbols.defines_any(functions)


def without_tick_work(region, symbols) -> tuple:
    """The region without the accesses of CPU-time accounting, and how many line sites went
    (a program with none of its functions keeps every region whole, unlooked at)."""
    if not _defines_any(symbols, TICK_WORK):
        return region, 0
    return region.without_sites(_tick_code(symbols))


# Page-table pages are ordinary frames reached through the direct map, so their address
# does not tell them from heap. Their lock does: with split page-table locks the lock of
# a PTE (or PMD) page is the `ptl` field of the page's struct page, bytes 40-43 of the
# 64-byte struct page on x86-64. A call that changes or walks page tables under that lock
# writes those bytes from a spin-lock function; other users of the same bytes (a slab's
# counters, a page-cache page's private word) never write them that way.
PTL_BYTES = 0xF << 40


def _is_spin_lock(function: str) -> bool:
    return function.startswith("_raw_spin_") or function.endswith("queued_spin_lock_slowpath")


def page_table_frames(regions, symbols) -> set:
    """Frame numbers of the page-table pages whose lock one of these regions took."""
    frames = set()
    for region in regions:
        # Only a line whose lock bytes were written can hold a site that wrote them.
        for paddr, vaddr in region.written_at(PTL_BYTES):
            frame = symbols.struct_page_frame(vaddr)
            if frame is not None and any(
                write & PTL_BYTES and pc in _code_of(symbols, _is_spin_lock)
                for pc, _, write in region.line(paddr).site_fields()
            ):
                frames.add(frame)
    return frames


class _PageTables:
    """The page-table frames of two regions (page_table_frames), looked for only once a
    shared line is heap (it reads every line of both regions), and only in a kernel
    (``symbols.holds_page_tables``)."""

    def __init__(self, regions, symbols):
        self._regions, self._symbols = regions, symbols
        self._frames: set | None = None if symbols.holds_page_tables else set()

    def __contains__(self, frame: int) -> bool:
        if self._frames is None:
            self._frames = page_table_frames(self._regions, self._symbols)
        return frame in self._frames


def _shared(region_a, region_b, symbols, page_tables: _PageTables | None = None) -> list:
    """Every line both calls touched with a write, as a conflict record (any sharing).
    ``page_tables``: the frames to call page tables, if not those of these regions."""
    conflicts = []
    page_tables = page_tables or _PageTables((region_a, region_b), symbols)
    for la, lb in shared_lines(region_a, region_b):
        kind, data_symbol = symbols.classify(la.vaddr)
        if kind == "heap" and la.paddr >> 12 in page_tables:
            kind = "pagetable"
        sites_a, sites_b = la.site_fields(), lb.site_fields()
        sharing, pairs = _site_pairs(sites_a, sites_b, symbols)
        conflicts.append(
            {
                "line": f"{la.vaddr:#x}",
                "paddr": f"{la.paddr:#x}",
                "kind": kind,
                "data_symbol": data_symbol,
                "bytes": f"{conflict_bytes(la, lb):#x}",
                "sharing": sharing,
                "sites": [list(p) for p, _ in pairs],
                "site_bytes": [mask for _, mask in pairs],  # named by name_data, then gone
                "a": _side(la, sites_a, symbols),
                "b": _side(lb, sites_b, symbols),
            }
        )
    return conflicts


def signature(conflict: dict) -> frozenset:
    """What identifies a conflict across repeats and runs: one element per pair of code
    sites (functions) of A and B that touched the same bytes (or, for false sharing, the
    same line), with the kind of data and the name of the bytes that pair made conflict
    (``site_data``: struct.field, variable, slab cache+offset; name_data). So two objects
    written by the same functions are two conflicts. Heap addresses differ between
    repeats, and so do the fields of an object that share a line (slab objects are not
    line-aligned); the names of the fields each pair of functions touched do not."""
    data = conflict.get("site_data") or [symbol_key(conflict)] * len(conflict["sites"])
    return frozenset(
        (conflict["kind"], name, conflict["sharing"], a, b)
        for (a, b), name in zip(conflict["sites"], data, strict=True)
    )


def conflict_set(conflicts: list) -> frozenset:
    """The signature of a whole test: the union of its conflicts' signatures."""
    return frozenset().union(*(signature(c) for c in conflicts))


def show(element: tuple) -> str:
    """One element of a conflict signature (conflict_set) as a line of text."""
    kind, data, sharing, a, b = element
    named = f"{kind}:{data}" if data else kind
    false_sharing = "" if sharing == "true" else " (false sharing)"
    return f"{named}{false_sharing} {a} / {b}"


def site_pairs(conflicts: list) -> list:
    """Conflicts grouped by the pair of functions of A and B that touched the same data."""
    groups: dict = {}
    for c in conflicts:
        for a, b in c["sites"]:
            group = groups.setdefault(
                (a, b),
                {
                    "a": a,
                    "b": b,
                    "lines": 0,
                    "kinds": set(),
                    "false_sharing": c["sharing"] == "false",
                },
            )
            group["lines"] += 1
            group["kinds"].add(c["kind"])
    return [dict(g, kinds=sorted(g["kinds"])) for g in groups.values()]


def _repeated(per_repeat: list, every: bool = True) -> tuple:
    """The conflicts cut down to the elements (data and site pair) every repeat showed
    (``every``) or any repeat showed, and each repeat's signature. A conflict is taken
    from the last repeat that showed one of its elements: its objects were freed most
    recently when the record is written, so naming finds them (and the pointers leading
    to them) still in place."""
    signatures = [conflict_set(conflicts) for conflicts in per_repeat]
    kept_elements = (frozenset.intersection if every else frozenset.union)(*signatures)
    kept: list = []
    placed: set = set()
    for conflicts in reversed(per_repeat):
        for c in conflicts:
            elements = (signature(c) & kept_elements) - placed
            if elements:
                placed |= elements
                ordered = sorted((a, b, data) for _, data, _, a, b in elements)
                kept.append(
                    {k: v for k, v in c.items() if k != "site_bytes"}
                    | {
                        "sites": [[a, b] for a, b, _ in ordered],
                        "site_data": [data for _, _, data in ordered],
                    }
                )
    return kept, signatures


def _counted_elements(elements, granularity: str) -> frozenset:
    return frozenset(e for e in elements if counts_kind(e[0], e[2], granularity))


def views(conflicts: list) -> dict:
    """Whether the test is conflict-free at each granularity, from every shared line it
    kept (counted or not), so that one run answers for all three."""
    return {g: not any(counts(c, g) for c in conflicts) for g in GRANULARITIES}


@dataclass
class _Traced:
    """What the repeats of one test showed, gathered repeat by repeat."""

    per_repeat: list = field(default_factory=list)  # (kept_a, kept_b, counted, uncounted)
    tick_signatures: list = field(default_factory=list)  # (without tick work, with it)
    noise_switch: bool = False
    interrupts: int = 0
    dropped: int = 0
    tick_sites: int = 0
    mismatch: str = ""
    left_path: str = ""
    results: dict = field(default_factory=dict)
    judged: dict = field(default_factory=dict)  # results' texts -> (a, b, order, verdict)


def finish(
    progress: TestProgress,
    regions: dict,
    symbols,
    repeats: int,
    granularity: str,
    filters: Filters = ALL_FILTERS_ON,
    namer=None,
    repeat_namers: list | None = None,
) -> dict:
    """The record of a test whose repeats all reported (regions: tag -> Region). Conflicting
    lines (counted or not) are named by ``namer``, or each repeat's by its own namer
    (``repeat_namers``), before the repeats are compared (name_data)."""
    test = progress.test
    for rep, report in sorted(progress.repeats.items()):
        if report.kind == "SETUP_FAILED":
            return base_record(test, "error", f"setup: {report.rest}")
        if report.kind == "HUNG":
            return base_record(test, "timeout", f"repeat {rep}: {report.rest} (guest watchdog)")
    traced = _Traced()
    for rep in range(repeats):
        error = _check_results(traced, progress, rep) or _trace_repeat(
            traced, progress, rep, regions, symbols, granularity, filters
        )
        if error:
            return base_record(test, "error", error)
    name_data([c + u for _, _, c, u in traced.per_repeat], repeat_namers or [namer] * repeats)
    return _record(test, traced, granularity, filters)


def shares_no_line(record: dict) -> bool:
    """Whether a conforming record shows no line both calls touched with a write, counted
    or not, nor one the tick-work filter took: as a conflict counts only if every repeat
    shows it, no further repeat could make the test conflicting at any granularity."""
    return (
        record["status"] == "ok"
        and not record["conflicts"]
        and not record["false_sharing"]
        and not record["filtered"]["tick_work"]
    )


def of_fewer_repeats(record: dict, asked: int) -> dict:
    """``record`` as the record of a test asked for ``asked`` repeats of which it ran
    fewer (shares_no_line): whether repeats agree is not claimed."""
    return {**record, "agree": None, "repeats": {**record["repeats"], "asked": asked}}


def _check_results(traced: _Traced, progress: TestProgress, rep: int) -> str | None:
    """Checks a repeat's results against the model; an error's detail, or None."""
    test = progress.test
    texts = progress.repeats[rep].results()
    # Repeats mostly answer alike: each distinct pair of results is read and judged once.
    if texts not in traced.judged:
        try:
            res_a, res_b = json.loads(texts[0]), json.loads(texts[1])
        except json.JSONDecodeError:
            return f"repeat {rep}: unreadable result from the driver"
        traced.judged[texts] = (res_a, res_b, *check_results(test, res_a, res_b))
    res_a, res_b, order, verdict = traced.judged[texts]
    if verdict == MISMATCH and not traced.mismatch:
        expected = json.dumps((test.raw.get("expect") or {}).get("ab"))
        traced.mismatch = f"{_got(rep, res_a, res_b)}, expected {expected}"
    elif verdict == LEFT_PATH and not traced.left_path:
        traced.left_path = (
            f"{_got(rep, res_a, res_b)}: a choice the model allows, off the path this test"
            " was made for"
        )
    if rep == 0:
        traced.results = {"a": res_a, "b": res_b, "expected_order": order}
    return None


def _got(rep: int, res_a, res_b) -> str:
    return f"repeat {rep}: got A={json.dumps(res_a)} B={json.dumps(res_b)}"


def _trace_repeat(
    traced: _Traced, progress, rep, regions, symbols, granularity, filters
) -> str | None:
    """Adds a repeat's shared lines, counted or not, and its noise; an error's detail, or
    None."""
    ra, rb = regions.get(tag(progress.index, rep, 0)), regions.get(tag(progress.index, rep, 1))
    if ra is None or rb is None:
        return f"repeat {rep}: no trace from the plugin for call {'A' if ra is None else 'B'}"
    (kept_a, tick_a), (kept_b, tick_b) = (
        without_tick_work(ra, symbols),
        without_tick_work(rb, symbols),
    )
    traced.tick_sites += tick_a + tick_b
    traced.noise_switch |= ra.context_switched or rb.context_switched
    traced.interrupts += ra.interrupts + rb.interrupts
    traced.dropped += ra.dropped_in_interrupts + rb.dropped_in_interrupts
    # A page-table frame is known by a spin-lock function's write, which the tick filter
    # never drops: the whole regions give the frames of both comparisons, found once.
    page_tables = _PageTables((ra, rb), symbols)
    without_tick = _shared(kept_a, kept_b, symbols, page_tables)
    # With the tick's work kept: computed only when the filter dropped something.
    with_tick = _shared(ra, rb, symbols, page_tables) if tick_a + tick_b else without_tick
    traced.tick_signatures.append((conflict_set(without_tick), conflict_set(with_tick)))
    counted: list = []
    uncounted: list = []
    for conflict in with_tick if filters.keep_tick_work else without_tick:
        (counted if counts(conflict, granularity) else uncounted).append(conflict)
    traced.per_repeat.append((kept_a, kept_b, counted, uncounted))
    return None


def _record(test: Test, traced: _Traced, granularity: str, filters: Filters) -> dict:
    """The record of a test whose repeats all traced, their conflicting data named."""
    per_repeat, tick_signatures = traced.per_repeat, traced.tick_signatures
    first_a, first_b = per_repeat[0][:2]
    # A conflict counts only if every repeat shows it (unless that filter is off).
    every = not filters.count_unrepeated
    conflicts, signatures = _repeated([c for _, _, c, _ in per_repeat], every)
    false_sharing, _ = _repeated([u for _, _, _, u in per_repeat], every)
    repeated = frozenset.intersection(*signatures)
    transient = {element for s in signatures for element in s - repeated}
    # What each filter removed from the counted conflicts, whatever the run's setting.
    unrepeated_removed = _counted_elements(frozenset.union(*signatures) - repeated, granularity)
    tick_removed = _counted_elements(
        frozenset.intersection(*(with_tick for _, with_tick in tick_signatures))
        - frozenset.intersection(*(without for without, _ in tick_signatures)),
        granularity,
    )
    mismatch, left_path = traced.mismatch, traced.left_path
    record = base_record(
        test,
        MISMATCH if mismatch else LEFT_PATH if left_path else "ok",
        mismatch or left_path,
    )
    record.update(
        {
            "conflict_free": not conflicts,
            "views": views(conflicts + false_sharing),
            "filtered": {
                "unrepeated": 0 if filters.count_unrepeated else len(unrepeated_removed),
                "tick_work": 0 if filters.keep_tick_work else len(tick_removed),
            },
            "agree": all(s == signatures[0] for s in signatures),
            "repeats": {"run": len(per_repeat), "asked": len(per_repeat)},
            "noise": {
                "ctxswitch": traced.noise_switch,
                "interrupts_dropped": traced.interrupts,
                "accesses_dropped": traced.dropped,
                "tick_sites_dropped": traced.tick_sites,
                "transient_conflicts": len(transient),
                "transient": sorted(show(e) for e in transient),
            },
            "accesses": {"a": first_a.accesses, "b": first_b.accesses},
            "lines": {"a": first_a.line_count, "b": first_b.line_count},
            "conflicts": conflicts,
            "false_sharing": false_sharing,
            "site_pairs": site_pairs(conflicts),
            "results": traced.results,
        }
    )
    return record
