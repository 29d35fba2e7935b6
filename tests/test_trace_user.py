"""The user-space target end to end, without a VM: each example's two implementations
traced under qemu-x86_64 with known answers, and libraries that crash, hang or answer
what the model forbids, recorded as such while the run goes on."""

import gc
import io
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from scalecheck.binding import abi
from scalecheck.common.errors import UserError
from scalecheck.report.build import make_report
from scalecheck.run import loop, testcase, wire
from scalecheck.run.run_cli import run_tests
from scalecheck.run.user import dwarfnames, heapnames, library, program_worker

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

pytestmark = pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None, reason="qemu-user not installed (scripts/setup.sh)"
)


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "scalecheck.cli", *args], capture_output=True, text=True, timeout=600
    )


def generate(model: str, out: Path) -> Path:
    for stage in (
        ["analyze", "--model", model, "--out", str(out), "--jobs", "1"],
        ["testgen", str(out)],
    ):
        done = cli(*stage)
        assert done.returncode == 0, done.stderr
    return out


def run(tests_dir: Path, manifest: Path, **options) -> dict:
    shutil.rmtree(tests_dir / "trace", ignore_errors=True)
    summary = run_tests(tests_dir, target=f"lib:{manifest}", quiet=True, **options)
    lines = (tests_dir / "trace" / "results.jsonl").read_text().splitlines()
    records = {r["id"]: r for r in map(json.loads, lines[1:])}
    return {"summary": summary, "records": records}


@pytest.fixture(scope="module")
def counter_tests(tmp_path_factory):
    return generate("counter", tmp_path_factory.mktemp("counter"))


@pytest.fixture(scope="module")
def kvstore_tests(tmp_path_factory):
    return generate(str(EXAMPLES / "kvstore" / "model.py"), tmp_path_factory.mktemp("kvstore"))


def test_shared_counter_conflicts_on_the_counter_and_sharded_does_not(counter_tests):
    shared = run(counter_tests, EXAMPLES / "refcount" / "shared.toml")["records"]
    inc_inc = shared["inc-inc/p0/t1"]
    assert inc_inc["status"] == "ok" and not inc_inc["conflict_free"]
    # Its first repeat shared a line: it ran every repeat, in the second pass.
    assert inc_inc["repeats"] == {"run": 2, "asked": 2} and inc_inc["agree"] is True
    assert {c["data_symbol"] for c in inc_inc["conflicts"]} == {"count"}
    assert all(pair == ["rc_inc", "rc_inc"] for c in inc_inc["conflicts"] for pair in c["sites"])
    sharded = run(counter_tests, EXAMPLES / "refcount" / "sharded.toml")["records"]
    assert sharded["inc-inc/p0/t1"]["conflict_free"]
    # Every test whose condition allows it, and no others, since the sharded counter's
    # conflicts are where its shards run dry (docs/usertarget.md).
    assert [t for t, r in sharded.items() if not r["conflict_free"]] == []
    assert all(r["status"] == "ok" for r in sharded.values())
    # A rerun resumes: every test is already done.
    again = run_tests(
        counter_tests, target=f"lib:{EXAMPLES / 'refcount' / 'sharded.toml'}", quiet=True
    )
    assert again["skipped_already_done"] == len(sharded) and again["finished"] == 0


def test_a_run_loads_uncollected_traces_with_the_load_frozen_and_restores_the_collector(
    counter_tests, monkeypatch
):
    seen = {}
    real_read, real_append = testcase.read_tests, loop.ResultsStore.append

    def reading(*args):
        seen["collecting while loading"] = gc.isenabled()
        return real_read(*args)

    def recording(*args):
        seen["frozen while tracing"] = gc.get_freeze_count()
        seen["collecting while tracing"] = gc.isenabled()
        return real_append(*args)

    monkeypatch.setattr(testcase, "read_tests", reading)
    monkeypatch.setattr(loop.ResultsStore, "append", recording)
    frozen_before = gc.get_freeze_count()
    records = run(counter_tests, EXAMPLES / "refcount" / "shared.toml")["records"]
    assert records and all(r["status"] == "ok" for r in records.values())
    assert seen["collecting while loading"] is False
    assert seen["frozen while tracing"] > frozen_before and seen["collecting while tracing"]
    assert gc.get_freeze_count() == frozen_before and gc.isenabled()


def test_put_put_on_two_keys_conflicts_under_one_mutex_only(kvstore_tests):
    tests = [json.loads(line) for line in (kvstore_tests / "tests.jsonl").read_text().splitlines()]
    two_keys = next(
        t["id"]
        for t in tests[1:]
        if t["pair"] == ["put", "put"]
        and t["calls"][0]["args"]["key"] != t["calls"][1]["args"]["key"]
    )
    locked_records = run(kvstore_tests, EXAMPLES / "kvstore" / "locked.toml")["records"]
    locked = locked_records[two_keys]
    assert locked["status"] == "ok" and not locked["conflict_free"]
    assert any("pthread_mutex_lock" in pair for c in locked["conflicts"] for pair in c["sites"])
    # The table is a heap object that the static `table` points to: named by its DWARF
    # type and the field the conflicting bytes cover.
    assert {c["data"] for c in locked["conflicts"]} == {"struct table.lock"}
    # A node is reachable only through the table (another heap object): put(k, v) ||
    # get(k) with k holding v conflicts on the node's value (and the lock).
    same_key = next(
        t["id"]
        for t in tests[1:]
        if t["pair"] == ["put", "get"]
        and t["calls"][0]["args"]["key"] == t["calls"][1]["args"]["key"]
    )
    assert {c["data"] for c in locked_records[same_key]["conflicts"]} == {
        "struct table.lock",
        "struct node.value",
    }
    striped = run(kvstore_tests, EXAMPLES / "kvstore" / "striped.toml")
    assert striped["records"][two_keys]["conflict_free"]
    # Every test of the file: each condition of the model has a test, and striped makes
    # all of them conflict-free, put(k, v) || put(k, v) on an empty table included.
    assert [t for t, r in striped["records"].items() if not r["conflict_free"]] == []
    assert striped["summary"]["mismatch"] == striped["summary"]["crash"] == 0


# An adapter's setup and teardown for a library without state.
NO_STATE = """
int sc_setup(const struct sc_state *state, char *why, size_t whylen)
{
	(void)state, (void)why, (void)whylen;
	return 0;
}
void sc_teardown(void) {}
"""

FAULTY = (
    """
#include <unistd.h>
#include "scalecheck_adapter.h"
static void call_inc(const struct sc_call *call, struct sc_result *result)
{
	(void)call, (void)result;
	*(volatile int *)0 = 1; /* SIGSEGV */
}
static void call_dec(const struct sc_call *call, struct sc_result *result)
{
	(void)call, (void)result;
	for (;;)
		pause();
}
static void call_iszero(const struct sc_call *call, struct sc_result *result)
{
	(void)call;
	sc_ok_bool(result, 1); /* whatever the count: a result the model forbids when it is not 0 */
}
const struct sc_op SC_OPS[] = {
	{"inc", 0, call_inc}, {"dec", 0, call_dec}, {"iszero", 0, call_iszero}, {0, 0, 0}};
"""
    + NO_STATE
)


def write_library(directory: Path, model: str, adapter: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "adapter.c").write_text(adapter)
    (directory / "nothing.c").write_text("int library_placeholder;\n")
    (directory / "scalecheck.toml").write_text(
        f'model = "{model}"\nadapter = "adapter.c"\nsources = ["nothing.c"]\n'
    )
    return directory


# One shared counter on the heap, in a block that rc_init gets twice: glibc hands the
# scratch block's chunk straight back to counter_block (same size, its per-thread cache).
# (No tail calls, no merging of the two identical functions: each malloc returns into
# the function that names the block; and counter_block first in the program: the
# earlier allocation's site is the higher one, so the order of sites cannot name it.)
REUSED_BLOCK = """
#include <stdatomic.h>
#include <stdlib.h>

#include "refcount.h"

static _Atomic long *count;

__attribute__((noinline)) static void *counter_block(void)
{
	return malloc(64);
}

__attribute__((noinline)) static void *scratch_block(void)
{
	return malloc(64);
}

void rc_init(long initial)
{
	free(scratch_block());
	count = counter_block();
	atomic_store(count, initial);
}

void rc_register_thread(int slot)
{
	(void)slot;
}

void rc_inc(void)
{
	atomic_fetch_add(count, 1);
}

int rc_dec(void)
{
	return atomic_fetch_sub(count, 1) > 0 ? 0 : (atomic_fetch_add(count, 1), -1);
}

int rc_iszero(void)
{
	return atomic_load(count) == 0;
}
"""


def test_a_block_handed_out_twice_is_named_by_its_last_allocation(counter_tests, tmp_path):
    manifest = refcount_library(
        tmp_path,
        "reused",
        REUSED_BLOCK,
        '"-fno-optimize-sibling-calls", "-fno-ipa-icf", "-fno-toplevel-reorder", ',
    )
    inc_inc = run(counter_tests, manifest, jobs=1)["records"]["inc-inc/p0/t1"]
    assert inc_inc["status"] == "ok" and not inc_inc["conflict_free"]
    assert [c["data_symbol"] for c in inc_inc["conflicts"]] == ["counter_block:alloc(64)+0x0"]


# The setup's memory dirtied and then zeroed on the main thread (by a read of /dev/zero,
# tracer/user/trace_zero.c), each iszero zeroing a shared block inside its region (by
# memset, traced). A setup left unzeroed makes the count one more: results the model forbids.
ZEROING = """
#include <stdatomic.h>
#include <string.h>

#include "refcount.h"

#define BLOCK (64 << 10)

static _Atomic long count;
static char setup_block[BLOCK];
static char scratch[BLOCK] __attribute__((aligned(64)));

void rc_init(long initial)
{
	memset(setup_block, 0xff, BLOCK);
	__asm__ volatile("" : : "r"(setup_block) : "memory");
	memset(setup_block, 0, BLOCK);
	__asm__ volatile("" : : "r"(setup_block) : "memory");
	int dirty = 0;
	for (int i = 0; i < BLOCK; i++)
		dirty |= setup_block[i];
	atomic_store(&count, initial + (dirty != 0));
}

void rc_register_thread(int slot)
{
	(void)slot;
}

void rc_inc(void)
{
	atomic_fetch_add(&count, 1);
}

int rc_dec(void)
{
	return atomic_fetch_sub(&count, 1) > 0 ? 0 : (atomic_fetch_add(&count, 1), -1);
}

int rc_iszero(void)
{
	memset(scratch, 0, BLOCK);
	return atomic_load(&count) == 0;
}
"""


def refcount_library(directory: Path, name: str, source: str, cflags: str = "") -> Path:
    """A counter library of one source file beside the refcount example's adapter: its
    manifest, with -O2 -g and ``cflags``."""
    refcount = EXAMPLES / "refcount"
    (directory / f"{name}.c").write_text(source)
    manifest = directory / f"{name}.toml"
    manifest.write_text(
        f'model = "counter"\nadapter = "{refcount / "adapter.c"}"\nsources = ["{name}.c"]\n'
        f'cflags = ["-O2", "-g", {cflags}"-I{refcount}"]\n'
    )
    return manifest


def test_setup_zeroes_by_the_kernel_and_the_calls_memsets_are_traced(counter_tests, tmp_path):
    manifest = refcount_library(tmp_path, "zeroing", ZEROING)
    records = run(counter_tests, manifest, jobs=1)["records"]
    assert records and all(r["status"] == "ok" for r in records.values())
    both = records["iszero-iszero/p0/t1"]
    assert not both["conflict_free"]
    assert {c["data_symbol"].split("[")[0] for c in both["conflicts"]} == {"scratch"}
    # Each setup's 64 KiB of zeros came from one read (qemu-x86_64 -strace logs the
    # program's system calls), the 1,024 traced lines above from memset.
    programs = (counter_tests / "trace" / "program").glob("zeroing-*")
    (program,) = (p for p in programs if "." not in p.name)
    batch = next((counter_tests / "trace").glob("*/batch.txt"))
    done = subprocess.run(
        ["qemu-x86_64", "-strace", str(program), str(batch)], capture_output=True, timeout=60
    )
    # (A call's result is printed apart from it: a calling thread's futex may come between.)
    zero_reads = re.findall(rb" read\(5\d\d,0x[0-9a-f]+,65536\)", done.stderr)
    assert len(zero_reads) == 2 * len(records)  # two repeats a test


def _first_blocks(program: Path, batch: Path) -> list:
    """The addresses of the blocks the program reports for its first test repeat."""
    done = subprocess.run(
        ["qemu-x86_64", str(program), str(batch)], capture_output=True, timeout=60
    )
    reports = wire.read_reports(io.BytesIO(done.stdout))
    return next(
        sorted(b[0] for b in r.allocations()) for r in reports if r and r.kind == "ALLOCATION"
    )


def test_the_heap_starts_at_one_address_whatever_the_code_size_or_directory(
    counter_tests, tmp_path
):
    """libsv6 picks refcache slots by address: its verdicts must not move when the
    harness's code grows or the run's directory is longer (glibc's start-up allocates
    the program's directory)."""
    refcount = EXAMPLES / "refcount"
    blocks = []
    for name, extra in (("small", ""), ("large", "-DLARGE")):
        source = tmp_path / f"{name}.c"
        source.write_text(
            (refcount / "shared.c").read_text()
            + "#ifdef LARGE\nchar scalecheck_test_pad[1 << 20] = {1};\n#endif\n"
        )
        (tmp_path / f"{name}.toml").write_text(
            f'model = "counter"\nadapter = "{refcount / "adapter.c"}"\nsources = ["{name}.c"]\n'
            f'cflags = ["-O2", "-I{refcount}", "{extra or "-DSMALL"}"]\n'
        )
        run(counter_tests, tmp_path / f"{name}.toml", jobs=1)
        trace = counter_tests / "trace"
        program = next(
            p
            for p in (trace / "program").iterdir()
            if p.name.startswith(f"{name}-") and not p.suffix
        )
        batch = tmp_path / "batch.txt"
        shutil.copy(trace / "proc0" / "batch.txt", batch)
        deeper = tmp_path / ("d" * 60) / program.name
        deeper.parent.mkdir(exist_ok=True)
        shutil.copy(program, deeper)
        blocks += [_first_blocks(program, batch), _first_blocks(deeper, batch)]
    assert blocks[0][0] == abi.value("USER_HEAP_START")
    assert all(b == blocks[0] for b in blocks), [hex(b[0]) for b in blocks]


# A counter behind two locks, each in its own heap object (typed through its pointer),
# both taken by the same functions in every call: two conflicts, not one per pair of
# functions. The objects are line-aligned so that each lock has its own line.
TWO_LOCKS = """
#include <pthread.h>
#include <stdlib.h>

#include "refcount.h"

struct gate { pthread_mutex_t lock; long passed; } __attribute__((aligned(64)));
struct tally { pthread_mutex_t lock; long count; } __attribute__((aligned(64)));

struct gate *gate;
struct tally *tally;

void rc_init(long initial)
{
	gate = aligned_alloc(64, sizeof(struct gate));
	tally = aligned_alloc(64, sizeof(struct tally));
	pthread_mutex_init(&gate->lock, NULL);
	pthread_mutex_init(&tally->lock, NULL);
	gate->passed = 0;
	tally->count = initial;
}

void rc_register_thread(int slot)
{
	(void)slot;
}

static long change(long by)
{
	pthread_mutex_lock(&gate->lock);
	pthread_mutex_unlock(&gate->lock);
	pthread_mutex_lock(&tally->lock);
	long before = tally->count;
	if (before + by >= 0)
		tally->count = before + by;
	pthread_mutex_unlock(&tally->lock);
	return before;
}

void rc_inc(void)
{
	change(1);
}

int rc_dec(void)
{
	return change(-1) > 0 ? 0 : -1;
}

int rc_iszero(void)
{
	return change(0) == 0;
}
"""


def test_two_locks_taken_by_the_same_functions_are_both_reported(counter_tests, tmp_path):
    manifest = refcount_library(tmp_path, "two_locks", TWO_LOCKS)
    record = run(counter_tests, manifest, jobs=1)["records"]["inc-inc/p0/t1"]
    assert record["status"] == "ok" and not record["conflict_free"]
    locked = {
        c["data"]
        for c in record["conflicts"]
        if ["pthread_mutex_lock", "pthread_mutex_lock"] in c["sites"]
    }
    # (`struct tally.{lock,count}`: the count shares the lock's line.)
    assert {name.split(".")[0] for name in locked} == {"struct gate", "struct tally"}, locked


def test_crash_hang_and_wrong_result_are_recorded_and_the_run_goes_on(counter_tests, tmp_path):
    library = write_library(tmp_path / "faulty", "counter", FAULTY)
    result = run(counter_tests, library, timeout=1.0, jobs=1)
    statuses = {test_id: r["status"] for test_id, r in result["records"].items()}
    assert len(statuses) == 8  # every test has its record
    assert {statuses[t] for t in statuses if t.startswith("inc-")} == {"crash"}
    assert {statuses[t] for t in statuses if t.startswith("dec-")} == {"timeout"}
    assert statuses["iszero-iszero/p0/t1"] == "mismatch"
    assert result["summary"]["crash"] == 3 and result["summary"]["timeout"] == 4
    # --retry-unfinished traces the crashed and timed-out tests again, not the mismatch,
    # and keeps what they gave before beside the store.
    again = run_tests(
        counter_tests,
        target=f"lib:{library}",
        quiet=True,
        timeout=1.0,
        jobs=1,
        retry_unfinished=True,
    )
    assert again["finished"] == 7 and again["skipped_already_done"] == 1
    (kept,) = (counter_tests / "trace").glob("results.*.retried.jsonl")
    assert {json.loads(line)["id"] for line in kept.read_text().splitlines()[1:]} == {
        t for t, status in statuses.items() if status in ("crash", "timeout")
    }


# An id table whose spec lets the implementation pick any free id, and a library that
# always picks the lowest: legal, yet off the path of the tests that assumed the id
# differs from lookup's argument.
ANY_ID_MODEL = """
from scalecheck.model import Dict, Int, Model, error, ok, operation

Id = Int(0, 3)
Value = Int(0, 9)


class IdTable(Model):
    def __init__(self):
        self.slots = Dict(Id, Value).any()

    @operation(value=Value)
    def alloc(self, value):
        new = self.slots.any_free_key()
        self.slots[new] = value
        return ok(new)

    @operation(id=Id)
    def lookup(self, id):
        if id not in self.slots:
            return error("ENOENT")
        return ok(self.slots[id])
"""

LOWEST_ID = """
#include <pthread.h>
#include <stdio.h>

#include "scalecheck_adapter.h"

#define IDS 5 /* the model's ids, and the one above them it takes when they are all used */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int used[IDS];
static long values[IDS];

static void call_alloc(const struct sc_call *call, struct sc_result *result)
{
	int id;
	pthread_mutex_lock(&lock);
	for (id = 0; id < IDS && used[id]; id++)
		;
	if (id < IDS) {
		used[id] = 1;
		values[id] = sc_arg_int(call, "value");
	}
	pthread_mutex_unlock(&lock);
	if (id < IDS)
		sc_ok(result, id);
	else
		sc_error(result, "ENOMEM");
}

static void call_lookup(const struct sc_call *call, struct sc_result *result)
{
	long id = sc_arg_int(call, "id");
	pthread_mutex_lock(&lock);
	int found = id >= 0 && id < IDS && used[id];
	long value = found ? values[id] : 0;
	pthread_mutex_unlock(&lock);
	if (found)
		sc_ok(result, value);
	else
		sc_error(result, "ENOENT");
}

const struct sc_op SC_OPS[] = {{"alloc", 1, call_alloc}, {"lookup", 1, call_lookup}, {0, 0, 0}};

int sc_setup(const struct sc_state *state, char *why, size_t whylen)
{
	(void)why, (void)whylen;
	for (int id = 0; id < IDS; id++) {
		char path[32];
		snprintf(path, sizeof path, "slots.%d.present", id);
		used[id] = (int)sc_state_get(state, path, 0);
		snprintf(path, sizeof path, "slots.%d", id);
		values[id] = sc_state_get(state, path, 0);
	}
	return 0;
}

void sc_teardown(void)
{
}

void sc_thread_init(int side)
{
	(void)side;
}
"""


def test_a_legal_choice_off_the_path_is_left_the_path_not_a_mismatch(tmp_path):
    (tmp_path / "any_id.py").write_text(ANY_ID_MODEL)
    tests_dir = generate(str(tmp_path / "any_id.py"), tmp_path / "tests")
    tests = [json.loads(line) for line in (tests_dir / "tests.jsonl").read_text().splitlines()]
    # alloc || lookup of an absent id: the path assumed alloc picks another id.
    off_path = [
        t
        for t in tests[1:]
        if t["pair"] == ["alloc", "lookup"]
        and t["calls"][1]["args"]["id"] == 0
        and t["expect"]["ab"][1] == {"errno": "ENOENT"}
    ]
    assert off_path
    assert all([{"ret": 0}, "*"] in [o["ab"] for o in t["left_path"]] for t in off_path)
    library = write_library(tmp_path / "lib", str(tmp_path / "any_id.py"), LOWEST_ID)
    result = run(tests_dir, library, jobs=1)
    records, summary = result["records"], result["summary"]
    for test in off_path:
        record = records[test["id"]]
        assert record["status"] == "left_path", record["detail"]
        assert record["results"]["a"] == {"ret": 0}
    # The lowest id is an id the spec allows: no result is a mismatch.
    assert summary["mismatch"] == 0, [r["detail"] for r in records.values() if r["status"] != "ok"]
    assert summary["left_path"] == len(off_path)
    # Where the choice decides the other call's result, that result is checked: alloc
    # cannot take lookup's id when the setup holds it, so lookup must find its value.
    present = next(
        t
        for t in tests[1:]
        if t["pair"] == ["alloc", "lookup"]
        and t["setup"]["slots"][str(t["calls"][1]["args"]["id"])]["present"]
    )
    value = present["setup"]["slots"][str(present["calls"][1]["args"]["id"])][""]
    assert {o["ab"][1]["ret"] for o in present["outcomes"]} == {value}
    assert records[present["id"]]["status"] == "ok"
    # A library's run speaks of a library: no kernel, boots or security modules.
    report = make_report(tests_dir)
    assert report["totals"]["left_path"] == len(off_path) and report["left_path"]
    texts = {
        "run summary": json.dumps(summary),
        "run line": loop.starts_text(summary) + loop.conformance_line(summary),
        "report summary": json.dumps(report),
        **{
            name: (tests_dir / "report" / name).read_text()
            for name in ("mismatches.txt", "left-path.txt", "bottlenecks.txt", "index.html")
        },
    }
    for name, text in texts.items():
        for word in ("kernel", "boot", "security modules", "guest"):
            assert word not in text.lower(), (name, word)
    assert "library: A=" in texts["left-path.txt"]


def test_a_left_path_result_is_refined_into_a_test_on_its_path(tmp_path):
    (tmp_path / "any_id.py").write_text(ANY_ID_MODEL)
    tests_dir = generate(str(tmp_path / "any_id.py"), tmp_path / "tests")
    library = write_library(tmp_path / "lib", str(tmp_path / "any_id.py"), LOWEST_ID)
    first = run(tests_dir, library, jobs=1)
    left = {i for i, r in first["records"].items() if r["status"] == "left_path"}
    assert left
    done = cli("testgen", str(tests_dir), "--refine-left-path", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["left_path"] == len(left) and summary["not_refinable"] == []
    tests = {t.id: t.raw for t in testcase.read_tests(tests_dir / "tests.jsonl")[1]}
    new = [tests[item["id"]] for item in summary["new_tests"]]
    assert new and {i for t in new for i in t["refines"]["tests"]} == left
    # The second run traces the new tests only, and the old results stay.
    second = run_tests(tests_dir, target=f"lib:{library}", quiet=True, jobs=1)
    assert second["finished"] == len(new)
    assert second["skipped_already_done"] == len(first["records"])
    lines = (tests_dir / "trace" / "results.jsonl").read_text().splitlines()
    records = {r["id"]: r for r in map(json.loads, lines[1:])}
    for test in new:
        # The lowest id, fixed: lookup's argument is another id, and the result is on the path.
        assert test["refines"]["choice"] == {"A.slots.free#0": 0}
        assert test["calls"][1]["args"]["id"] != 0
        assert records[test["id"]]["status"] == "ok", records[test["id"]]["detail"]
    assert {i: records[i] for i in first["records"]} == first["records"]


# A table of settings whose `set` changes a present key; the library skips a write of
# the value a slot already holds (each slot on a line of its own). Whether it writes
# depends on the stored value, which no key equality decides.
SETTINGS_MODEL = """
from scalecheck.model import Dict, Int, Key, Model, error, ok, operation

KeyId = Key("KeyId", 4)
Value = Int(0, 9)


class Settings(Model):
    def __init__(self):
        self.table = Dict(KeyId, Value).any()

    @operation(key=KeyId, value=Value)
    def set(self, key, value):
        if key not in self.table:
            return error("ENOENT")
        self.table[key] = value
        return ok()
"""

SKIPS_EQUAL_WRITES = """
#include <stdio.h>

#include "scalecheck_adapter.h"

#define KEYS 4

static struct {
	long present, value;
} __attribute__((aligned(64))) slots[KEYS];

static void call_set(const struct sc_call *call, struct sc_result *result)
{
	long key = sc_arg_int(call, "key"), value = sc_arg_int(call, "value");
	if (key < 0 || key >= KEYS || !slots[key].present) {
		sc_error(result, "ENOENT");
		return;
	}
	if (slots[key].value != value)
		slots[key].value = value;
	sc_ok(result, 0);
}

const struct sc_op SC_OPS[] = {{"set", 2, call_set}, {0, 0, 0}};

int sc_setup(const struct sc_state *state, char *why, size_t whylen)
{
	(void)why, (void)whylen;
	for (int key = 0; key < KEYS; key++) {
		char path[32];
		snprintf(path, sizeof path, "table.%d.present", key);
		slots[key].present = sc_state_get(state, path, 0);
		snprintf(path, sizeof path, "table.%d", key);
		slots[key].value = sc_state_get(state, path, 0);
	}
	return 0;
}

void sc_teardown(void)
{
}

void sc_thread_init(int side)
{
	(void)side;
}
"""


def test_a_branch_on_a_stored_value_gets_a_test_of_each_pattern(tmp_path):
    (tmp_path / "settings.py").write_text(SETTINGS_MODEL)
    tests_dir = generate(str(tmp_path / "settings.py"), tmp_path / "tests")
    tests = [json.loads(line) for line in (tests_dir / "tests.jsonl").read_text().splitlines()]
    one_key = {
        t["id"]: t["values"]
        for t in tests[1:]
        if t["calls"][0]["args"]["key"] == t["calls"][1]["args"]["key"]
        and t["expect"]["ab"] == [{"ret": 0}, {"ret": 0}]
    }
    # Two sets of one value on one key: the key holds that value, or another one.
    patterns = {
        ("B.value == A.value" in values, "table(A.key) == A.value" in values)
        for values in one_key.values()
    }
    assert patterns == {(True, True), (True, False)}, one_key
    library = write_library(tmp_path / "lib", str(tmp_path / "settings.py"), SKIPS_EQUAL_WRITES)
    records = run(tests_dir, library, jobs=1)["records"]
    for test_id, values in one_key.items():
        # The first set writes the new value, the second reads it: a conflict the model
        # does not ask for. With the value already there, both only read.
        rewrites = "table(A.key) != A.value" in values
        assert records[test_id]["conflict_free"] is not rewrites, (test_id, values)


def test_value_patterns_can_be_switched_off(tmp_path):
    (tmp_path / "settings.py").write_text(SETTINGS_MODEL)
    tests_dir = generate(str(tmp_path / "settings.py"), tmp_path / "tests")

    def tests_by_path() -> dict:
        lines = (tests_dir / "tests.jsonl").read_text().splitlines()[1:]
        paths: dict = {}
        for test in map(json.loads, lines):
            paths.setdefault(test["id"].rsplit("/", 1)[0], []).append(test)
        return paths

    with_patterns = tests_by_path()
    done = cli("testgen", str(tests_dir), "--value-cap", "1")
    assert done.returncode == 0, done.stderr
    without = tests_by_path()
    assert without.keys() == with_patterns.keys()
    # One test per isomorphism class: fewer tests, and no path gains any.
    assert sum(map(len, without.values())) < sum(map(len, with_patterns.values()))
    assert all(len(without[p]) <= len(with_patterns[p]) for p in without)


NOTHING_MODEL = """
from scalecheck.model import Int, Model, ok, operation


class Nothing(Model):
    def __init__(self):
        self.unused = Int(0, 1).any()

    @operation()
    def noop(self):
        return ok()
"""

HARNESS_ONLY = (
    """
#include "scalecheck_adapter.h"
static void call_noop(const struct sc_call *call, struct sc_result *result)
{
	(void)call;
	sc_ok(result, 0);
}
const struct sc_op SC_OPS[] = {{"noop", 0, call_noop}, {0, 0, 0}};
"""
    + NO_STATE
)


def test_calls_that_touch_nothing_of_the_library_do_not_conflict(tmp_path):
    (tmp_path / "nothing.py").write_text(NOTHING_MODEL)
    tests_dir = generate(str(tmp_path / "nothing.py"), tmp_path / "tests")
    library = write_library(tmp_path / "lib", str(tmp_path / "nothing.py"), HARNESS_ONLY)
    result = run(tests_dir, library, repeats=3)
    (record,) = result["records"].values()
    assert record["status"] == "ok" and record["conflict_free"]
    assert record["accesses"]["a"] > 0  # the region was traced, not empty
    # Its one repeat shared no line, so no further repeat could make it conflicting: it ran
    # once, and whether repeats agree is not claimed.
    assert record["repeats"] == {"run": 1, "asked": 3} and record["agree"] is None
    assert result["summary"]["fewer_repeats"] == 1
    assert result["summary"]["repeat_agreement"] is None
    # When a conflict of any repeat counts, every repeat runs.
    every = run(tests_dir, library, repeats=3, count_unrepeated=True)
    (record,) = every["records"].values()
    assert record["repeats"] == {"run": 3, "asked": 3} and record["agree"] is True


def test_bad_manifest_is_one_line(tmp_path):
    (tmp_path / "scalecheck.toml").write_text('model = "counter"\nsorces = []\n')
    with pytest.raises(UserError) as caught:
        library.load_library(str(tmp_path))
    assert "unknown key(s) sorces" in str(caught.value) and "\n" not in str(caught.value)


def test_static_fields_are_named_from_dwarf(tmp_path):
    source = tmp_path / "layout.c"
    source.write_text(
        "struct slot { long lock; struct { int a, b; } pair; };\n"
        "struct slot slots[4];\n"
        "long lone;\n"
    )
    obj = tmp_path / "layout.o"
    subprocess.run(["cc", "-g", "-c", "-o", str(obj), str(source)], check=True)
    names = dwarfnames.FieldNames([obj])
    assert names.field("slots", 0) == "slots[0].lock"
    assert names.field("slots", 16 + 12) == "slots[1].pair.b"
    assert names.field("lone", 0) == "lone"
    assert names.field("missing", 0) == ""


HEAP_TYPES = """
#include <pthread.h>
struct node { long key, value; struct node *next; };
struct slot { pthread_mutex_t lock; struct node *head; };
struct table { pthread_mutex_t lock; struct node *buckets[4]; struct slot *slots; long *counts; };
struct table *table;
void *untyped;
"""


def test_heap_objects_are_typed_by_the_pointers_that_lead_to_them(tmp_path):
    source, obj = tmp_path / "heap.c", tmp_path / "heap.o"
    source.write_text(HEAP_TYPES)
    subprocess.run(["cc", "-g", "-c", "-o", str(obj), str(source)], check=True)
    fields = dwarfnames.FieldNames([obj])
    # A fake snapshot of the library's memory after a test (the harness's M lines):
    # table -> struct table -> buckets[1] -> struct node -> next -> struct node; slots
    # -> an array of 3 struct slot; counts -> an array of 4 longs; untyped -> a block.
    table, node, second, slots, counts, block = 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000
    pointer = struct.Struct("<Q").pack
    # struct table: lock (40 bytes), buckets[4], slots, counts
    table_bytes = (
        bytes(40) + pointer(0) + pointer(node) + bytes(16) + pointer(slots) + pointer(counts)
    )
    memory = {
        0x100: pointer(table),
        0x108: pointer(block),
        table: table_bytes,
        node: pointer(7) + pointer(1) + pointer(second),
        second: bytes(24),
        slots: bytes(3 * 48),
        counts: bytes(32),
        block: bytes(64),
    }
    allocations = [(table, 88, 0), (node, 24, 0), (second, 24, 0), (slots, 144, 0)]
    allocations += [(counts, 32, 0), (block, 64, 0)]
    statics = [(0x100, 8, "table"), (0x108, 8, "untyped")]
    namer = heapnames.DataNamer(fields, statics, allocations, memory)

    def name(kind, address, first, last):
        line = address & ~63
        mask = sum(1 << (address - line + i) for i in range(first, last))
        return namer.name_lines([(kind, line, 0, mask)])[0]

    assert name("heap", table, 0, 4) == "struct table.lock"
    # Several elements of one array: the array.
    assert name("heap", table, 40, 56) == "struct table.buckets[]"
    assert name("heap", table, 48, 56) == "struct table.buckets[1]"
    assert name("heap", second, 8, 16) == "struct node.value"  # through two heap objects
    assert name("heap", slots + 48 + 40, 0, 8) == "struct slot[1].head"
    assert name("heap", counts + 16, 0, 8) == "struct table.counts[2]"
    # void *: the allocation site (here the function at address 0) and offset name it
    assert name("heap", block, 0, 8) == "0x0:alloc(64)+0x0"
    assert name("static", 0x100, 0, 8) == "table"


def test_setup_and_calls_render_for_the_harness():
    test = testcase.Test(
        "put-get/p0/t1",
        ["put", "get"],
        {
            "setup": {
                "table": {"2": {"present": True, "": 8}},
                "count": 3,
                "pipes": [{"data": [65]}, {"data": []}],
                "procs": [{"fds": {"13": {"pipe": 0, "end": "r"}}, "maps": {}}],
            },
            "calls": [
                {"op": "put", "proc": 0, "args": {"key": 3, "value": "f0"}},
                {"op": "get", "proc": 1, "args": {"key": True}},
            ],
        },
    )
    arguments = {"put": ("key", "value"), "get": ("key",)}
    assert program_worker.render(test, 5, arguments, {"fd_base": 10}) == (
        "T 5\nV constants.fd_base 10\nV table.2.present 1\nV table.2 8\nV count 3\n"
        "V pipes.0.data.0 65\nV pipes.1.data []\nV procs.0.fds.13.pipe 0\n"
        "V procs.0.fds.13.end r\nV procs.0.maps {}\n"
        "C 0 0 put key=3 value=f0\nC 1 1 get key=1\nE\n"
    )
    test.raw["calls"][0]["args"]["value"] = "two words"
    with pytest.raises(testcase.UnsupportedTest, match="must be an integer, boolean or word"):
        program_worker.render(test, 5, arguments, {})
    test.raw["calls"][0]["args"]["value"] = 7
    test.raw["calls"][1]["args"] = {}
    with pytest.raises(testcase.UnsupportedTest, match="missing 'key'"):
        program_worker.render(test, 5, arguments, {})


def test_unknown_target_is_one_line(tmp_path):
    with pytest.raises(UserError, match=r"unknown target 'sv7'.*libsv6"):
        run_tests(tmp_path, target="sv7", quiet=True)


# The sample's tests where libsv6 still conflicts, and why (docs/libsv6.md lists every
# remaining conflict of the full test file).
LIBSV6_CONFLICTS = {
    # mmap replaces the very mapping memwrite uses; they commute only because the byte
    # written is the byte already there, which no implementation can know without reading
    "mmap-memwrite/p62/t5": "same page",
}


def test_libsv6_runs_a_sample_of_the_posix_tests(tmp_path):
    """62 tests of the full 18-operation POSIX file (every 500th, and two of stat), on
    libsv6 by name: every result as the model says in some order, conflict-free except
    the known few, and those named by the data and code that conflict."""
    shutil.copy(ROOT / "tests" / "data" / "posix-sample.jsonl", tmp_path / "tests.jsonl")
    summary = run_tests(tmp_path, target="libsv6", quiet=True, jobs=1)
    lines = (tmp_path / "trace" / "results.jsonl").read_text().splitlines()
    records = {r["id"]: r for r in map(json.loads, lines[1:])}
    assert len(records) == 62 and {r["status"] for r in records.values()} == {"ok"}
    assert summary["mismatch"] == summary["error"] == summary["crash"] == 0
    conflicting = {test_id for test_id, r in records.items() if not r["conflict_free"]}
    assert conflicting == set(LIBSV6_CONFLICTS)


def test_libsv6_writes_to_pages_of_an_empty_file_share_nothing(tmp_path):
    """Two writes, or a write and a read past the end, on different pages of an empty
    file (tests written by hand: the generated file has none): with the radix array's
    direct slots neither call makes a node that the other reads."""
    shutil.copy(ROOT / "tests" / "data" / "libsv6-empty-file.jsonl", tmp_path / "tests.jsonl")
    summary = run_tests(tmp_path, target="libsv6", quiet=True, jobs=1)
    lines = (tmp_path / "trace" / "results.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    assert len(records) == 3 and summary["mismatch"] == 0
    assert [r["conflicts"] for r in records] == [[], [], []]


def test_libsv6_kept_blocks_are_named_by_the_allocation_that_took_them(tmp_path):
    """Four lseek-lseek tests that conflict on their open file description: after the
    first test, libsv6 takes the file's block from a thread's kept blocks, not from
    malloc, and tells the harness (scalecheck_malloclike); the line is still named by
    the function that made the file."""
    shutil.copy(ROOT / "tests" / "data" / "libsv6-kept-blocks.jsonl", tmp_path / "tests.jsonl")
    run_tests(tmp_path, target="libsv6", quiet=True, jobs=1)
    lines = (tmp_path / "trace" / "results.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    assert len(records) == 4
    for record in records:
        names = {conflict["data_symbol"].split("+")[0] for conflict in record["conflicts"]}
        # (the size is the file's, whole pairs of lines: sv6_alloc_lines)
        [name] = names
        assert re.fullmatch(r"sv6_new_file:alloc\(\d+\)", name), (record["id"], names)
