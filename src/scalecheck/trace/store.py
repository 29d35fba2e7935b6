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
MUST_MATCH = ("target", "kernel", "repeats", "granularity", "fs")


class ResultsStore:
    def __init__(self, path: Path, header: dict):
        self.path = path
        self._lock = threading.Lock()
        self.finished = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size:
            self._load(header)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(json.dumps(header) + "\n")
        self._file = open(path, "a", encoding="utf-8")

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
            raise UserError(f"{self.path} is not a results file; move it away to start afresh") from None
        if old.get("format") != RESULTS_FORMAT or old.get("version") != RESULTS_VERSION:
            raise UserError(f"{self.path}: results format {old.get('format')!r} version "
                            f"{old.get('version')!r}; this scalecheck writes {RESULTS_FORMAT!r} "
                            f"version {RESULTS_VERSION}")
        for key in MUST_MATCH:
            if old.get(key) != header.get(key):
                raise UserError(f"{self.path} was made with {key}={old.get(key)!r}, this run has "
                                f"{header.get(key)!r}; use another DIR or remove {self.path}")
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
