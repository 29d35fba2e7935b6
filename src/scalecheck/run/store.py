"""The append-only results store: ``DIR/trace/results.jsonl`` (docs/format-results.md).

Every finished test is one line, written and flushed as soon as it is known, so a crash
or Ctrl-C loses at most the test in flight, and a rerun skips every id already present
whose test is unchanged. Each record carries the content hash of its test: test ids are
positional, so a new ``testgen`` may give an id to another test.
"""

import contextlib
import json
import os
import sys
import threading
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.storage import (
    NO_SPACE,
    damaged_note,
    no_space,
    parse_record,
    write_text_atomically,
)

RESULTS_FORMAT = "scalecheck-results"
RESULTS_VERSION = 1
# Header fields that must match for a rerun to add to an existing store.
MUST_MATCH = ("target", "kernel", "repeats", "granularity", "filters", "lsm", "fs", "tracer")
# Header field: the hash of the tests file the records were made from.
TESTS_HASH = "tests_sha256"
# Statuses of tests that did not run to the end: `run --retry-failed` traces them again.
DID_NOT_FINISH = ("timeout", "crash", "error")


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


def parse_header(line: str) -> dict | None:
    try:
        header = json.loads(line)
    except json.JSONDecodeError:
        return None
    return header if isinstance(header, dict) else None


def damaged_path(path: Path) -> Path:
    return path.with_name("damaged.jsonl")


def _lines(header: dict, records) -> str:
    return "".join(json.dumps(item, separators=(",", ":")) + "\n" for item in [header, *records])


class ResultsStore:
    """``test_hashes``: test id -> content hash of every test of the tests file; each
    record gets its test's hash, and an existing record whose test changed (or is gone)
    is stale. A stale record stops the run with an error.

    ``set_aside_incompatible``: instead of stopping (the pipeline, which owns its
    directory), a store made with other settings (kernel, arguments, repeats, granularity,
    fs, tracer version) is renamed to ``results.<its start time>.jsonl`` and a new one
    begun, and stale records are moved to ``results.<its start time>.stale.jsonl``."""

    def __init__(
        self,
        path: Path,
        header: dict,
        set_aside_incompatible: bool = False,
        log=print,
        test_hashes: dict[str, str] | None = None,
    ):
        self.path = path
        self._lock = threading.Lock()
        self.finished: dict[str, dict] = {}
        self.test_hashes = test_hashes
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size:
            try:
                old_header = self._load(header)
            except IncompatibleStore as why:
                if not set_aside_incompatible:
                    raise UserError(f"{why}; use another DIR or remove {path}") from None
                kept = path.with_name(f"results.{why.started.replace(':', '')}.jsonl")
                path.rename(kept)
                log(f"{why}: kept as {kept}, starting afresh")
            else:
                self._drop_stale(old_header, header, set_aside_incompatible, log)
        if not (path.exists() and path.stat().st_size):
            write_text_atomically(path, _lines(header, []))
        self.header = header
        # Open for the store's life: every finished test is appended as it comes.
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self._failed: UserError | None = None

    def _drop_stale(self, old_header: dict, header: dict, set_aside: bool, log):
        """Refuses, or with ``set_aside`` moves away, the records whose test changed."""
        if self.test_hashes is None or old_header.get(TESTS_HASH) == header.get(TESTS_HASH):
            return
        stale = [
            record
            for test_id, record in self.finished.items()
            if test_id not in self.test_hashes
            or record.get("test_hash") != self.test_hashes[test_id]
        ]
        if not stale:
            # Same tests under a new file (e.g. tests added): the header names the new one.
            write_text_atomically(self.path, _lines(header, self.finished.values()))
            return
        unhashed = sum(1 for record in stale if "test_hash" not in record)
        what = (
            f"{len(stale)} results in {self.path} are for tests that changed or are gone "
            f"since they ran (e.g. {stale[0]['id']}; tests.jsonl was regenerated)"
            + (f", {unhashed} of them made before results named their test" if unhashed else "")
        )
        if not set_aside:
            raise UserError(f"{what}; use another DIR or remove {self.path}")
        started = old_header.get("started", "old").replace(":", "")
        kept = self.path.with_name(f"results.{started}.stale.jsonl")
        write_text_atomically(kept, _lines(old_header, stale))
        for record in stale:
            del self.finished[record["id"]]
        write_text_atomically(self.path, _lines(header, self.finished.values()))
        log(f"{what}: kept as {kept}, running them again")

    def _load(self, header: dict) -> dict:
        lines = self.path.read_bytes().decode("utf-8", errors="replace").split("\n")
        # A last line without its newline was cut short by a crash or a full disk.
        torn = lines.pop() if len(lines) > 1 else ""
        old = parse_header(lines[0])
        if old is None:
            raise UserError(f"{self.path} is not a results file; move it away to start afresh")
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
        damaged = []
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            record = parse_record(line)
            if record is None:
                damaged.append((number, line))
            else:
                self.finished[record["id"]] = record
        if torn:
            damaged.append((len(lines) + 1, torn))
        if damaged:
            self._set_aside_damaged(old, damaged)
        return old

    def _set_aside_damaged(self, header: dict, damaged: list) -> None:
        """Lines that are not a record (a torn write, bad JSON, no id) go to
        ``damaged.jsonl`` beside it (added to what earlier repairs put there), the store is
        rewritten without them, and their tests, now without a record, run again."""
        side = damaged_path(self.path)
        kept = side.read_text(encoding="utf-8", errors="replace") if side.exists() else ""
        write_text_atomically(side, kept + "".join(line + "\n" for _, line in damaged))
        write_text_atomically(self.path, _lines(header, self.finished.values()))
        print(
            f"scalecheck: note: {self.path}: {damaged_note(damaged)}, moved to {side}; "
            "their tests run again",
            file=sys.stderr,
        )

    def set_aside_unfinished(self, log) -> int:
        """Moves the records of tests that did not run to the end (a timeout under a loaded
        host, a crash, an error) to ``results.<now>.retried.jsonl``: their tests run again,
        and what they gave before is kept beside. Returns how many."""
        unfinished = [r for r in self.finished.values() if r.get("status") in DID_NOT_FINISH]
        if not unfinished:
            return 0
        kept = self.path.with_name(
            f"results.{self.header['started'].replace(':', '')}.retried.jsonl"
        )
        write_text_atomically(kept, _lines(self.header, unfinished))
        for record in unfinished:
            del self.finished[record["id"]]
        self._file.close()
        write_text_atomically(self.path, _lines(self.header, self.finished.values()))
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        log(f"{len(unfinished)} tests that did not finish (kept as {kept}): running them again")
        return len(unfinished)

    def append(self, record: dict):
        with self._lock:
            if self._failed:
                raise self._failed
            if self.test_hashes is not None:
                record["test_hash"] = self.test_hashes[record["id"]]
            try:
                self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
                self._file.flush()
            except OSError as err:
                raise self._fail(err) from None
            self.finished[record["id"]] = record

    def _fail(self, err: OSError) -> Exception:
        """After a full disk nothing more is appended: the store may end in a torn line,
        which the next start drops (its test runs again)."""
        if err.errno not in NO_SPACE:
            return err
        self._failed = no_space(self.path)
        return self._failed

    def close(self):
        with self._lock:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
            except OSError as err:
                # close() releases the file even when its last flush fails.
                with contextlib.suppress(OSError):
                    self._file.close()
                raise self._fail(err) from None
