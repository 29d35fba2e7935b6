"""The analysis, ``DIR/analysis/`` (docs/format-analysis.md): the contract between
`analyze` and the stages that read its pairs (testgen, the report). All of them find and
read it through here."""

from __future__ import annotations

from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.storage import read_json

ANALYSIS_FORMAT = "scalecheck-analysis"
ANALYSIS_VERSION = 1


def all_pairs(ops: list[str]) -> list[tuple[str, str]]:
    """Every pair of the operations, each once, in model order (a with itself too)."""
    return [(a, b) for i, a in enumerate(ops) for b in ops[i:]]


def pair_file(out: Path, a: str, b: str) -> Path:
    return out / "analysis" / "pairs" / f"{a}-{b}.json"


def timings_file(out: Path) -> Path:
    """How long each pair took ({"A-B": {...}}): kept apart from the pairs' files, which
    are byte for byte the same whenever and however the analysis is made."""
    return out / "analysis" / "timings.json"


def pair_is_current(out: Path, pair, fingerprint) -> bool:
    """Whether the pair's file is there, finished, and of this model version."""
    path = pair_file(out, *pair)
    if not path.exists():
        return False
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return False
    return data.get("fingerprint") == fingerprint and "conditions" in data


def read_analysis_meta(out: Path) -> dict:
    """OUT/analysis/meta.json (the model, its operations, the settings); UserError when
    there is none or it is of another format or version."""
    meta_path = out / "analysis" / "meta.json"
    if not meta_path.exists():
        raise UserError(f"{out} holds no analysis: run `scalecheck analyze --out {out}` first")
    try:
        meta = read_json(meta_path)
    except ValueError as err:
        raise UserError(f"{meta_path} is not valid JSON: {err}") from None
    if meta.get("format") != ANALYSIS_FORMAT or meta.get("version") != ANALYSIS_VERSION:
        raise UserError(
            f"{meta_path} is {meta.get('format')} version {meta.get('version')}; "
            f"this scalecheck reads {ANALYSIS_FORMAT} version {ANALYSIS_VERSION}"
        )
    return meta


def read_pair(out: Path, a: str, b: str) -> dict | None:
    """The analysis of the pair ``a || b`` in either order (files name a pair in model
    order), or None when the directory holds none."""
    for first, second in ((a, b), (b, a)):
        path = pair_file(out, first, second)
        if path.is_file():
            try:
                return read_json(path)
            except (OSError, ValueError) as err:
                raise UserError(f"{path}: unreadable analysis pair file ({err})") from None
    return None
