"""Files that survive a crash: written whole or not at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

from scalecheck.errors import UserError


def write_json_atomically(path: Path, data) -> None:
    write_text_atomically(path, json.dumps(data, indent=1) + "\n")


def write_text_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    try:
        with open(temporary, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as err:
        temporary.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {err.strerror}") from None


def read_json(path: Path):
    with open(path) as handle:
        return json.load(handle)
