"""The test file, ``tests.jsonl`` (docs/format-tests.md): the contract between test
generation and the stages that run or report tests. All of them read it through here."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from scalecheck.common.errors import UserError
from scalecheck.common.storage import parse_record, write_text_atomically

TESTS_FORMAT = "scalecheck-tests"
TESTS_VERSION = 1
# Fields that label a test rather than say what it does. They are positional (the n-th
# test of the n-th path of a pair), so they name another test once the model or the
# analysis changes: results are tied to a test, and runs compared, by everything else.
LABEL_FIELDS = ("id", "path")


def content_hash(test: dict) -> str:
    """Equal for two tests with the same setup, calls and expected results, whatever
    their ids."""
    content = {key: value for key, value in test.items() if key not in LABEL_FIELDS}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def write_tests(path: Path, header: dict, tests: list[dict]) -> None:
    """Writes a tests file, all at once: the header (the format and version added), then
    one test a line."""
    lines = [json.dumps({"format": TESTS_FORMAT, "version": TESTS_VERSION, **header})]
    lines += [json.dumps(test) for test in tests]
    write_text_atomically(path, "\n".join(lines) + "\n")


def read_jsonl(
    path: Path,
    expected_format: str,
    expected_version: int,
    hint: str = "",
    damaged: list | None = None,
):
    """(header, [(where, object)]) of a versioned JSON-lines file, or a one-line UserError.
    ``damaged``: lines that are not a record with an id are added there as (line number,
    text) instead of stopping (an append-only store, which a crash may have torn)."""
    if not path.is_file():
        raise UserError(f"{path}: not found{'; ' + hint if hint else ''}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read: {err}") from None
    if not lines:
        raise UserError(f"{path} is empty")
    header = _json_object(path, 1, lines[0])
    if header.get("format") != expected_format:
        raise UserError(f"{path}:1: not a {expected_format} file (format {header.get('format')!r})")
    if header.get("version") != expected_version:
        raise UserError(
            f"{path}:1: {expected_format} version {header.get('version')!r}; this scalecheck "
            f"reads version {expected_version}"
        )
    entries = []
    for number, text in enumerate(lines[1:], start=2):
        if not text.strip():
            continue
        if damaged is not None and parse_record(text) is None:
            damaged.append((number, text))
            continue
        entries.append((f"{path}:{number}", _json_object(path, number, text)))
    return header, entries


def read_tests(path: Path) -> tuple[dict, list[dict]]:
    """The header and the tests; a malformed or foreign file gives a one-line UserError."""
    header, entries = read_jsonl(
        path, TESTS_FORMAT, TESTS_VERSION, "run `scalecheck testgen` first"
    )
    tests, seen = [], set()
    for where, test in entries:
        problem = test_problem(test)
        if problem:
            raise UserError(f"{where}: {problem}")
        if test["id"] in seen:
            raise UserError(f"{where}: test id {test['id']!r} appears twice")
        seen.add(test["id"])
        tests.append(test)
    return header, tests


def test_problem(test: dict) -> str:
    """What makes ``test`` no test (docs/format-tests.md), or "": a tracer could only
    count such a test as a mismatch, never check it."""
    if (
        not isinstance(test.get("id"), str)
        or not isinstance(test.get("calls"), list)
        or "setup" not in test
    ):
        return 'a test needs "id", "setup" and "calls"'
    calls = test["calls"]
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("op"), str):
            return f'every call must be an object with an "op", got {call!r}'
        if not isinstance(call.get("args"), dict):
            return f'call {call["op"]!r} has no "args" object'
    ops = [call["op"] for call in calls]
    if test.get("pair") != ops:
        return f'"pair" {test.get("pair")!r} does not match the calls\' operations {ops!r}'
    expect = test.get("expect")
    if not isinstance(expect, dict) or not all(
        isinstance(expect.get(order), list) and len(expect[order]) == len(calls)
        for order in ("ab", "ba")
    ):
        return f'"expect" must give each call\'s result in each order ("ab", "ba"), got {expect!r}'
    return ""


def _json_object(path, number, text):
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{path}:{number}: malformed JSON line ({err.msg})") from None
    if not isinstance(value, dict):
        raise UserError(f"{path}:{number}: expected a JSON object")
    return value
