"""The kvstore example's two implementations are correct tables, alone and under
concurrency (tests/data/kvstore_check.c against a reference table; with ThreadSanitizer
when the compiler has it), apart from what scalecheck measures of them."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kvstore"
CHECK = ROOT / "tests" / "data" / "kvstore_check.c"


def build(implementation: str, out: Path, flags: list[str]) -> subprocess.CompletedProcess:
    sources = [str(CHECK), str(EXAMPLE / f"{implementation}.c")]
    warnings = ["-Wall", "-Wextra", "-Werror"]
    return subprocess.run(
        [
            "cc",
            "-O2",
            "-g",
            "-pthread",
            *warnings,
            *flags,
            "-I",
            str(EXAMPLE),
            "-o",
            str(out),
            *sources,
        ],
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize("implementation", ["locked", "striped"])
@pytest.mark.parametrize("sanitizer", [[], ["-fsanitize=thread"]], ids=["plain", "tsan"])
def test_kvstore_implementation_is_a_correct_table(implementation, sanitizer, tmp_path):
    program = tmp_path / "check"
    built = build(implementation, program, sanitizer)
    if built.returncode and sanitizer:
        pytest.skip(f"no ThreadSanitizer here: {built.stderr.strip().splitlines()[-1]}")
    assert built.returncode == 0, built.stderr
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
