"""Libraries as they are installed: linked from the manifest (pkg-config, libs, ldflags),
named without their sources (allocation wrappers, aligned allocations, static archives
without DWARF and their separate debug files), and a wrong adapter refused before any
test runs. Each library here is the counter model's (examples/refcount/refcount.h),
traced under qemu-x86_64 on the counter's tests."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scalecheck.common.errors import UserError
from scalecheck.run.run_cli import run_tests
from scalecheck.run.user import library

ROOT = Path(__file__).resolve().parents[1]
REFCOUNT = ROOT / "examples" / "refcount"

pytestmark = pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None, reason="qemu-user not installed (scripts/setup.sh)"
)


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "scalecheck.cli", *args], capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def counter_tests(tmp_path_factory):
    out = tmp_path_factory.mktemp("counter")
    for stage in (
        ["analyze", "--model", "counter", "--out", str(out), "-j", "1"],
        ["testgen", str(out)],
    ):
        done = cli(*stage)
        assert done.returncode == 0, done.stderr
    return out


def run(tests_dir: Path, manifest: Path) -> tuple[dict, dict]:
    """The results header and the records by test id of one run (inc-inc only)."""
    shutil.rmtree(tests_dir / "trace", ignore_errors=True)
    run_tests(tests_dir, target=f"lib:{manifest}", quiet=True, jobs=1, ops="inc")
    header, *records = map(
        json.loads, (tests_dir / "trace" / "results.jsonl").read_text().splitlines()
    )
    return header, {r["id"]: r for r in records}


def manifest(folder: Path, *lines: str) -> Path:
    path = folder / "scalecheck.toml"
    path.write_text(
        "\n".join(['model = "counter"', f'adapter = "{REFCOUNT / "adapter.c"}"', *lines]) + "\n"
    )
    return path


def compile_archive(folder: Path, source: str, separate_debug: bool) -> Path:
    """libtally.a of one object built with -g, its DWARF stripped; with separate_debug,
    moved to a debug file the object names by .gnu_debuglink (as objcopy makes them)."""
    (folder / "tally.c").write_text(source)
    obj = folder / "tally.o"
    cc = ["cc", "-O2", "-g", f"-I{REFCOUNT}", "-c", "-o", str(obj), str(folder / "tally.c")]
    subprocess.run(cc, check=True)
    if separate_debug:
        subprocess.run(
            ["objcopy", "--only-keep-debug", str(obj), str(folder / "tally.debug")], check=True
        )
        subprocess.run(
            ["objcopy", "--strip-debug", "--add-gnu-debuglink=tally.debug", "tally.o"],
            check=True,
            cwd=folder,
        )
    else:
        subprocess.run(["objcopy", "--strip-debug", str(obj)], check=True)
    subprocess.run(["ar", "rcs", str(folder / "libtally.a"), str(obj)], check=True)
    obj.unlink()
    return folder / "libtally.a"


# A counter in a struct, beside a variable the calls never touch on the same line.
STATIC_TALLY = """
#include "refcount.h"
struct tally { long count; long limit; };
struct tally tally_state __attribute__((aligned(64)));
long tally_untouched;
void rc_init(long count) { tally_state.count = count; tally_state.limit = 1 << 20; }
void rc_register_thread(int slot) { (void)slot; }
void rc_inc(void) { __atomic_add_fetch(&tally_state.count, 1, __ATOMIC_SEQ_CST); }
int rc_dec(void)
{
	return __atomic_sub_fetch(&tally_state.count, 1, __ATOMIC_SEQ_CST) < 0 ? -1 : 0;
}
int rc_iszero(void) { return __atomic_load_n(&tally_state.count, __ATOMIC_SEQ_CST) == 0; }
"""


@pytest.mark.parametrize("separate_debug", [True, False])
def test_a_static_archive_is_named_from_its_separate_debug_file(
    counter_tests, tmp_path, separate_debug
):
    compile_archive(tmp_path, STATIC_TALLY, separate_debug)
    path = manifest(tmp_path, "sources = []", 'ldflags = ["-L."]', 'libs = ["tally"]')
    header, records = run(counter_tests, path)
    (conflict,) = records["inc-inc/p0/t1"]["conflicts"]
    if separate_debug:
        # the field, from the debug file; the neighbour on the line not named
        assert conflict["data"] == "tally_state.count"
        assert "without_dwarf" not in header["library"]
    else:
        # by the symbol the conflicting bytes are in only, and said to lack DWARF
        assert conflict["data"] == "tally_state"
        assert header["library"]["without_dwarf"] == ["libtally.a(tally.o)"]
        assert "no DWARF in libtally.a(tally.o)" in header["naming"]["missing"]  # the report's


# The counter in a block from posix_memalign, asked for through the library's wrapper.
WRAPPED_TALLY = """
#include <stdlib.h>
#include "refcount.h"
long *count;
__attribute__((noinline)) static void *WRAPPER(size_t size)
{
	void *block = NULL;
	if (posix_memalign(&block, 64, size))
		abort();
	__asm__ volatile("" ::: "memory");
	return block;
}
__attribute__((noinline)) static long *tally_new(long initial)
{
	long *block = WRAPPER(64);
	*block = initial;
	return block;
}
void rc_init(long initial) { count = tally_new(initial); }
void rc_register_thread(int slot) { (void)slot; }
void rc_inc(void) { __atomic_add_fetch(count, 1, __ATOMIC_SEQ_CST); }
int rc_dec(void) { return __atomic_sub_fetch(count, 1, __ATOMIC_SEQ_CST) < 0 ? -1 : 0; }
int rc_iszero(void) { return __atomic_load_n(count, __ATOMIC_SEQ_CST) == 0; }
"""


@pytest.mark.parametrize(
    "wrapper, listed",
    [("tally_alloc", ['allocators = ["tally_alloc"]']), ("xmalloc", [])],
    ids=["manifest", "default-list"],
)
def test_a_block_from_a_wrapper_of_posix_memalign_is_named_by_the_wrappers_caller(
    counter_tests, tmp_path, wrapper, listed
):
    compile_archive(tmp_path, WRAPPED_TALLY.replace("WRAPPER", wrapper), separate_debug=False)
    path = manifest(tmp_path, "sources = []", 'libs = ["libtally.a"]', *listed)
    _, records = run(counter_tests, path)
    (conflict,) = records["inc-inc/p0/t1"]["conflicts"]
    assert conflict["kind"] == "heap"
    assert conflict["data_symbol"] == "tally_new:alloc(64)+0x0"


def test_a_shared_library_is_linked_and_its_allocations_named(counter_tests, tmp_path):
    """link = "shared": the library's allocations (through its wrapper, in the shared
    object) are intercepted and named by its function, where this run loaded it."""
    (tmp_path / "tally.c").write_text(
        WRAPPED_TALLY.replace("WRAPPER", "xmalloc").replace("static ", "")
    )
    library_file = tmp_path / "libtally.so"
    subprocess.run(
        [
            "cc",
            "-O2",
            "-shared",
            "-fPIC",
            f"-I{REFCOUNT}",
            "-o",
            str(library_file),
            str(tmp_path / "tally.c"),
        ],
        check=True,
    )
    path = manifest(
        tmp_path,
        "sources = []",
        'link = "shared"',
        f'ldflags = ["-L.", "-Wl,-rpath,{tmp_path}"]',
        'libs = ["tally"]',
    )
    _, records = run(counter_tests, path)
    (conflict,) = records["inc-inc/p0/t1"]["conflicts"]
    assert conflict["kind"] == "heap"
    assert conflict["data_symbol"] == "tally_new:alloc(64)+0x0"
    assert ["rc_inc", "rc_inc"] in conflict["sites"]  # code in the shared object, named


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="scripts/setup.sh")
def test_an_installed_package_is_linked_through_pkg_config(tmp_path):
    if subprocess.run(["pkg-config", "--exists", "ck"]).returncode != 0:
        pytest.skip("libck-dev not installed (scripts/setup.d/57-installed-libraries.sh)")
    out = tmp_path / "ck"
    done = cli(
        "pipeline",
        "--target",
        f"lib:{ROOT / 'examples' / 'cktable'}",
        "--out",
        str(out),
        "-j",
        "2",
        "--ops",
        "put",
    )
    assert done.returncode == 0, done.stderr
    records = [
        json.loads(line) for line in (out / "trace" / "results.jsonl").read_text().splitlines()[1:]
    ]
    assert records and all(r["status"] == "ok" for r in records)
    heap = [c["data_symbol"] for r in records for c in r["conflicts"] if c["kind"] == "heap"]
    # named by the ck_ht function that asked the adapter's allocator, not the allocator
    assert heap and all(name.startswith("ck_ht_") for name in heap), heap


def test_an_unknown_package_and_a_failed_link_are_said(tmp_path):
    (tmp_path / "lib.c").write_text(
        "void rc_missing(void);\nvoid rc_init(long c) { (void)c; rc_missing(); }\n"
    )
    unknown = manifest(tmp_path, 'sources = ["lib.c"]', 'pkg-config = ["no-such-package"]')
    with pytest.raises(UserError, match="no-such-package") as caught:
        from scalecheck.run.user.program_build import build_program

        build_program(library.load_library(str(unknown)), tmp_path / "build")
    assert "\n" not in str(caught.value)
    linked = manifest(tmp_path, 'sources = ["lib.c"]', 'libs = ["m"]')
    with pytest.raises(UserError) as caught:
        build_program(library.load_library(str(linked)), tmp_path / "build")
    assert "undefined reference to `rc_missing'" in str(caught.value)


WRONG_ADAPTER = """
#include "scalecheck_adapter.h"
static void nothing(const struct sc_call *call, struct sc_result *result)
{
	(void)call;
	sc_ok(result, 0);
}
const struct sc_op SC_OPS[] = {
	{"inc", 0, nothing}, {"decrement", 0, nothing}, {"iszero", 1, nothing}, {0, 0, 0},
};
int sc_setup(const struct sc_state *state, char *why, size_t whylen)
{
	(void)state, (void)why, (void)whylen;
	return 0;
}
void sc_teardown(void) {}
"""


def test_a_wrong_adapter_is_refused_before_any_test_runs(counter_tests, tmp_path):
    (tmp_path / "adapter.c").write_text(WRONG_ADAPTER)
    (tmp_path / "scalecheck.toml").write_text(
        'model = "counter"\nadapter = "adapter.c"\nsources = []\n'
    )
    shutil.rmtree(counter_tests / "trace", ignore_errors=True)
    done = cli("run", str(counter_tests), "--target", f"lib:{tmp_path}", "-j", "1")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "model operation(s) dec not in SC_OPS" in done.stderr
    assert "SC_OPS names decrement, which the model has not" in done.stderr
    assert "iszero takes 0 (none), SC_OPS gives 1" in done.stderr
    results = counter_tests / "trace" / "results.jsonl"
    assert not results.exists() or len(results.read_text().splitlines()) <= 1


def test_a_missing_manifest_and_adapter_are_named(tmp_path):
    with pytest.raises(UserError, match=f"no scalecheck.toml in {tmp_path}"):
        library.load_library(str(tmp_path))
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "x.toml"
    path.write_text('model = "counter"\nadapter = "../gone/adapter.c"\nsources = []\n')
    with pytest.raises(UserError, match=f"{tmp_path}/gone/adapter.c does not exist"):
        library.load_library(str(path))
