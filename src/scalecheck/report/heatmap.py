"""The op x op heat map (PNG and SVG): each cell of the lower triangle is shaded by the
share of the pair's tests that are conflict-free and labelled with its conflicting count."""

from pathlib import Path

import matplotlib
from matplotlib.cm import ScalarMappable
from matplotlib.collections import PatchCollection
from matplotlib.colors import LinearSegmentedColormap, to_hex
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from scalecheck.report.stats import Counts

# Red where everything conflicts, near white where nothing does: the eye goes to the red.
SHARE_COLORMAP = LinearSegmentedColormap.from_list(
    "conflict_free_share", ["#a50f15", "#fb6a4a", "#fee0d2", "#f7fcf5"]
)
EMPTY_PAIR_HATCH = "////"
NOT_RUN_COLOR = "#bdbdbd"


def share_color(share: float) -> str:
    return to_hex(SHARE_COLORMAP(share))


def label_color(share: float) -> str:
    return "white" if share < 0.4 else "black"


def triangle_cells(ops: list[str]):
    """(row, column, pair) of every lower-triangle cell; the pair is in model order."""
    for row, row_op in enumerate(ops):
        for column, column_op in enumerate(ops[: row + 1]):
            yield row, column, (column_op, row_op)


def write_heatmap(ops: list[str], pairs: dict[tuple[str, str], Counts], title: str, out_dir: Path):
    size = len(ops)
    inches = max(4.0, 0.42 * size + 2.5)
    figure = Figure(figsize=(inches + 1.2, inches))
    axes = figure.add_subplot()
    _draw_cells(axes, ops, pairs)

    axes.set_xlim(-0.5, size - 0.5)
    axes.set_ylim(size - 0.5, -0.5)
    axes.set_aspect("equal")
    axes.set_xticks(range(size), ops, rotation=90)
    axes.set_yticks(range(size), ops)
    axes.tick_params(length=0)
    for spine in axes.spines.values():
        spine.set_visible(False)
    axes.set_title(title, fontsize=10)
    colorbar = figure.colorbar(ScalarMappable(cmap=SHARE_COLORMAP), ax=axes, shrink=0.6)
    colorbar.set_label("share of tests conflict-free")
    axes.set_xlabel(
        "number = conflicting tests;  hatched = no tests;  grey = no test ran;  "
        "dot = some tests not run",
        fontsize=7,
        labelpad=8,
    )

    # Text stays text in the SVG (not glyph outlines): smaller, searchable, selectable.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        for suffix in ("png", "svg"):
            figure.savefig(out_dir / f"heatmap.{suffix}", dpi=150, bbox_inches="tight")


def _draw_cells(axes, ops: list[str], pairs: dict[tuple[str, str], Counts]):
    # One collection per look rather than one artist per cell: drawing stays fast at 171 cells.
    shaded, shades, not_run, empty, dots = [], [], [], [], []
    for row, column, pair in triangle_cells(ops):
        counts = pairs[pair]
        cell = Rectangle((column - 0.5, row - 0.5), 1, 1)
        if counts.tests == 0:
            empty.append(cell)
            continue
        if counts.not_run == counts.tests:
            not_run.append(cell)
            continue
        share = counts.share_conflict_free
        assert share is not None  # the cell has tests
        shaded.append(cell)
        shades.append(share_color(share))
        if counts.conflicting:
            axes.text(
                column,
                row,
                str(counts.conflicting),
                ha="center",
                va="center",
                fontsize=7 if counts.conflicting < 1000 else 5,
                color=label_color(share),
            )
        if counts.not_run:
            dots.append((column + 0.32, row - 0.32))
    axes.add_collection(
        PatchCollection(shaded, facecolors=shades, edgecolors="white", linewidths=0.5)
    )
    axes.add_collection(
        PatchCollection(not_run, facecolors=NOT_RUN_COLOR, edgecolors="white", linewidths=0.5)
    )
    axes.add_collection(
        PatchCollection(
            empty, facecolors="white", edgecolors="#bdbdbd", hatch=EMPTY_PAIR_HATCH, linewidths=0.3
        )
    )
    if dots:
        axes.scatter(*zip(*dots, strict=True), s=4, color="#525252", zorder=3)
