"""Argument types for the command line: each checks its value where it is parsed, so a
count of 0, a negative limit or an empty operation list is an argparse error (one line,
exit 2) instead of a division by zero or a silently shortened run later."""

from __future__ import annotations

import argparse
import math


def _number(kind, text: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {'an integer' if kind is int else 'a number'}"
        ) from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def count(text: str) -> int:
    """An integer of at least 1: jobs, repeats, tests per boot, tests per path."""
    value = _number(int, text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def count_list(text: str) -> list[int]:
    """Counts of at least 1, comma-separated ("2,4,8"): sorted, each once."""
    counts = sorted({count(part) for part in text.split(",")})
    if not counts:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of counts")
    return counts


def limit(text: str) -> int:
    """An integer of at least 0: how many of something to take."""
    value = _number(int, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def seconds(text: str) -> float:
    """A duration above 0."""
    value = _number(float, text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0 seconds, got {text}")
    return value


def whole_seconds(text: str) -> int:
    """A duration of at least one second, in whole seconds."""
    value = _number(int, text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 second, got {value}")
    return value


def non_negative_seconds(text: str) -> float:
    """A duration of 0 or more."""
    value = _number(float, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {text}")
    return value


def op_list(text: str) -> str:
    """A comma-separated list naming at least one operation (kept as text: each stage
    checks the names against its model)."""
    ops = [op.strip() for op in text.split(",") if op.strip()]
    if not ops:
        raise argparse.ArgumentTypeError(f"{text!r} names no operation")
    return ",".join(ops)
