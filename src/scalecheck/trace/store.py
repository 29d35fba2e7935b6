"""The append-only results store: ``DIR/trace/results.jsonl`` (docs/format-results.md).

Every finished test is one line, written and flushed as soon as it is known, so a crash
or Ctrl-C loses at most the test in flight, and a rerun skips every id already present.
"""

import json
import os
import threading
from pathlib import Path

from scalecheck.errors import UserError

RESULTS_FORMAT = "scalecheck-results"
RESULTS_VERSION = 1
# Header fields that must match for a rerun to add to an existing store.
MUST_MATCH = ("target", "kernel", "repeats", "granularity", "filters", "lsm", "fs", "tracer")


class IncompatibleStore(Exception):
    def __init__(self, message: str, started: str):
        super().__init__(message)
        self.started = started


def _difference(old, new) -> str:
    """What changed, short enough for one line: the differing fields of a dict, the words
    only one side of a command line has, or both values."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        return "; ".join(f"{k}: {_difference(old.get(k), new.get(k))}" for k in keys)
    if isinstance(old, str) and isinstance(new, str) and " " in old + new:
        gone = [w for w in old.split() if w not in new.split()]
        added = [w for w in new.split() if w not in old.split()]
        return f"without {' '.join(gone) or 'nothing'}, with {' '.join(added) or 'nothing'} now"
    return f"{json.dumps(old)} there, {json.dumps(new)} now"


class ResultsStore:
    """``set_aside_incompatible``: a store made with other settings (kernel, arguments,
    repeats, granularity, fs, tracer version) is renamed to ``results.<its start time>.jsonl``
    and a new one begun, instead of stopping with an error (the pipeline, which owns its
    directory)."""

    def __init__(self, path: Path, header: dict, set_aside_incompatible: bool = False, log=print):
        self.path = path
        self._lock = threading.Lock()
        self.finished: dict[str, dict] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size:
            try:
                self._load(header)
            except IncompatibleStore as why:
                if not set_aside_incompatible:
                    raise UserError(f"{why}; use another DIR or remove {path}") from None
                kept = path.with_name(f"results.{why.started.replace(':', '')}.jsonl")
                path.rename(kept)
                log(f"{why}: kept as {kept}, starting afresh")
        if not (path.exists() and path.stat().st_size):
            with open(path, "w", encoding="utf-8") as f:
                f.write(json.dumps(header) + "\n")
        # The store appends for its lifetime; close() closes it.
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def _load(self, header: dict):
        raw = self.path.read_bytes()
        # A line cut short by a crash mid-write is dropped; its test runs again.
        if not raw.endswith(b"\n"):
            raw = raw[: raw.rfind(b"\n") + 1]
            with open(self.path, "r+b") as f:
                f.truncate(len(raw))
        lines = raw.decode("utf-8").splitlines()
        try:
            old = json.loads(lines[0])
        except (json.JSONDecodeError, IndexError):
            raise UserError(
                f"{self.path} is not a results file; move it away to start afresh"
            ) from None
        if old.get("format") != RESULTS_FORMAT or old.get("version") != RESULTS_VERSION:
            raise UserError(
                f"{self.path}: results format {old.get('format')!r} version "
                f"{old.get('version')!r}; this scalecheck writes {RESULTS_FORMAT!r} "
                f"version {RESULTS_VERSION}"
            )
        for key in MUST_MATCH:
            if old.get(key) != header.get(key):
                raise IncompatibleStore(
                    f"{self.path} was made with other {key} settings "
                    f"({_difference(old.get(key), header.get(key))})",
                    old.get("started", "old"),
                )
        for line in lines[1:]:
            record = json.loads(line)
            self.finished[record["id"]] = record

    def append(self, record: dict):
        with self._lock:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
            self._file.flush()
            self.finished[record["id"]] = record

    def close(self):
        with self._lock:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
