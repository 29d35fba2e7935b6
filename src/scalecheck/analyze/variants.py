"""Commutative variants beside the POSIX calls they replace: for each ``Variant`` a model
declares (recvfrom || recvfrom on an ordered socket and on an unordered one, fork || open
and posix_spawn || open, ...), the commuting cases of both sides, computed from the same
paths as ``scalecheck analyze`` explores, restricted to each side's inputs.

Written to ``DIR/analysis/variants.json`` (docs/format-analysis.md) and printed side by
side by ``scalecheck analyze`` when the selected operations include both sides.
"""

from __future__ import annotations

import z3
from rich.table import Table

from scalecheck.common.output import stdout_console
from scalecheck.engine import deadline
from scalecheck.engine.commute import explore_pair
from scalecheck.engine.conditions import Region, pair_conditions
from scalecheck.engine.types import MapType, Unbound
from scalecheck.model import Variant


class Inputs:
    """The terms a side's restriction names, spelled as the explorer spells them."""

    def __init__(self, model_cls, pair: tuple[str, str]):
        self.model_cls, self.pair = model_cls, pair

    def arg(self, call: str, name: str) -> z3.ExprRef:
        op = self.pair["AB".index(call)]
        symtype = self.model_cls.operations()[op].argument_types[name]
        return z3.Const(f"{call}.{name}", symtype.sort)

    def initial(self, state: str, field: str, key: z3.ExprRef) -> z3.ExprRef:
        """The initial value of ``state[key].field`` (a leaf of a map of the model)."""
        unbound = vars(self.model_cls())[state]
        if not (isinstance(unbound, Unbound) and isinstance(unbound.symtype, MapType)):
            raise ValueError(f"{state} is not a map of the model's initial state")
        leaves = dict(unbound.symtype.value.leaves())
        return z3.Function(f"{state}.{field}", key.sort(), leaves[field].sort)(key)


def applicable(model_cls, ops: list[str]) -> list[Variant]:
    """The model's variants whose both sides lie among ``ops``."""
    return [v for v in model_cls.variants if set(v.posix + v.variant) <= set(ops)]


def compare(model_cls, variant: Variant, solver_timeout_ms: int = deadline.QUERY_LIMIT_MS) -> dict:
    """Both sides of one variant, as JSON data."""
    sides = {}
    for side, pair, when, when_text in (
        ("posix", variant.posix, variant.posix_when, variant.posix_when_text),
        ("variant", variant.variant, variant.variant_when, variant.variant_when_text),
    ):
        _, regions, _ = explore_pair(model_cls, *pair, solver_timeout_ms)
        if when is not None:
            regions = _restricted(regions, when(Inputs(model_cls, pair)))
        conditions = pair_conditions(regions, symmetric=pair[0] == pair[1])
        sides[side] = {
            "pair": list(pair),
            "when": when_text,
            "paths": len(regions),
            "commutative_paths": sum(1 for r in regions if r.commutes),
            "error_paths": sum(1 for r in regions if r.commutes is None),
            "commutes": conditions["commutes"],
        }
    return {"title": variant.title, **sides}


def _restricted(regions: list[Region], restriction: z3.BoolRef) -> list[Region]:
    """The regions that meet the restriction, with it among their assumptions."""
    kept = []
    for region in regions:
        solver = z3.Solver()
        solver.add(*region.decisions, *region.assumptions, restriction)
        answer = solver.check()
        if answer == z3.unknown:
            raise RuntimeError(f"solver unknown restricting a region: {solver.reason_unknown()}")
        if answer == z3.sat:
            kept.append(
                Region(
                    region.decisions,
                    [*region.assumptions, restriction],
                    region.commutes,
                    region.results,
                    region.names,
                    region.hints,
                )
            )
    return kept


def print_variants(comparisons: list[dict]):
    """One table per variant: the POSIX side's commuting cases beside the variant's."""
    console = stdout_console()
    for comparison in comparisons:
        table = Table(title=comparison["title"], show_lines=True)
        sides = [comparison["posix"], comparison["variant"]]
        for heading, side in zip(("POSIX", "commutative variant"), sides, strict=True):
            when = f" ({side['when']})" if side["when"] else ""
            table.add_column(f"{heading}: {' || '.join(side['pair'])}{when}")
        table.add_row(*[f"{s['commutative_paths']} of {s['paths']} paths commute" for s in sides])
        table.add_row(*[_cases_text(s["commutes"]) for s in sides])
        console.print(table)


def _cases_text(condition: dict) -> str:
    if condition["text"] in ("always", "never"):
        return condition["text"]
    flag = "" if condition["simplified"] else " (not simplified)"
    cases = [f"[{c['label']}] {c['text']}" if c["label"] else c["text"] for c in condition["cases"]]
    return f"{len(cases)} cases{flag}:\n" + "\n".join(cases)
