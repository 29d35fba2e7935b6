"""The constants the tracer's C side and Python side share, read from their one
definition, tracer/include/scalecheck_abi.h (every ``#define SC_NAME integer`` line)."""

import functools
import re

from scalecheck.common import sources

_DEFINE = re.compile(r"^#define\s+SC_(\w+)\s+(0x[0-9a-fA-F]+|\d+)\s*$", re.MULTILINE)


def header_path():
    return sources.root() / "tracer" / "include" / "scalecheck_abi.h"


@functools.cache
def constants() -> dict[str, int]:
    """{"FD_BASE": 10, ...}: the header's constants without their SC_ prefix."""
    return {name: int(value, 0) for name, value in _DEFINE.findall(header_path().read_text())}


def value(name: str) -> int:
    return constants()[name]
