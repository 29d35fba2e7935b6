"""What counts as a conflict: the granularity a run counts at, and the noise filters it
applies (docs/tracer.md). Records keep every shared line whatever these say, so the
report can count at every granularity and show what each filter removed."""

from dataclasses import dataclass

# What counts as a conflict (`scalecheck run --granularity`):
#   stable: code sites of both calls touched the same bytes, at least one writing, or they
#           share a line of data whose address is fixed when the kernel is linked
#           (static and per-cpu data), where false sharing is a property of the kernel's
#           layout. False sharing on heap lines is listed but not counted: whether two
#           fields share a line there depends on where the allocator put the object in
#           this run (slab objects are not line-aligned), so it comes and goes between runs.
#   line:   every shared line with a write, false sharing of any kind included.
#   bytes:  overlapping bytes only.
GRANULARITIES = ("stable", "line", "bytes")
# Data whose layout does not change between runs: static and per-cpu data are placed when
# the kernel is linked, and a page-table entry's place in its page is fixed by the virtual
# address it maps (the driver's memory layout is fixed too: no address randomization).
FIXED_LAYOUT_KINDS = ("static", "percpu", "pagetable")


def counts(conflict: dict, granularity: str) -> bool:
    return counts_kind(conflict["kind"], conflict["sharing"], granularity)


def counts_kind(kind: str, sharing: str, granularity: str) -> bool:
    if sharing == "true" or granularity == "line":
        return True
    return granularity == "stable" and kind in FIXED_LAYOUT_KINDS


@dataclass(frozen=True)
class Filters:
    """The noise filters a run applies (docs/tracer.md), each of which can be switched off
    (`scalecheck run --count-unrepeated`, `--keep-tick-work`). Whatever their setting, each
    record says how many conflict elements each filter removed from it."""

    count_unrepeated: bool = False  # a conflict seen in any repeat counts
    keep_tick_work: bool = False  # CPU-time accounting's accesses stay in

    def as_json(self) -> dict:
        return {"repeat": not self.count_unrepeated, "tick_work": not self.keep_tick_work}


ALL_FILTERS_ON = Filters()
