/*
 * The wire format between the host and both C drivers: the guest driver (tracer/guest/)
 * and the user-space harness (tracer/user/). Written and read in C by one module,
 * tracer/common/wire.c, which both drivers link; in Python by one module,
 * src/scalecheck/run/wire.py, which reads every `#define SC_WIRE_NAME "word"` below, so
 * each keyword is defined here only. One line per record, tokens separated by spaces; no
 * keyword means one thing going in and another coming out.
 *
 * Tests, host -> driver (a batch file):
 *   S key=value...          first line: repeats, timeout_ms, fs, warmup, facts,
 *                           state_check, state_leak (the guest's reused processes)
 *   N addr size             harness: a range of the library's static data to snapshot
 *   WRAP start end [file]   harness: the code of an allocation wrapper (in file, a shared
 *                           object, at offsets into it), whose caller names a block
 *   T index                 a test; its setup lines and two call lines follow, up to E
 *     guest setup:   F name inode | I inode nlink n byte... | P pipe n byte... |
 *                    D proc fd file inode off [cloexec] | D proc fd pipe pipe r|w [cloexec] |
 *                    M proc va anon writable byte | M proc va file writable inode off |
 *                    Q socket n message...
 *     harness setup: V path value   (the setup flattened to paths, docs/usertarget.md)
 *     C side proc op name=value...  call A (side 0), then call B (side 1), arguments in
 *                                   the order of the model's @operation signature
 *   E
 *
 * A traced VM restored from its snapshot finds the batch in QEMU's fw_cfg file
 * SC_WIRE_BATCH_FW_CFG (the probe boot's is /batch.txt in the initramfs).
 *
 * Reports, driver -> host:
 *   WAIT                             no /batch.txt: the driver polls fw_cfg for its batch
 *                                    (the host snapshots the VM here, docs/tracer.md)
 *   READY [cpus]                     the driver is up and reads the batch
 *   W index                          a warm-up run of the test (results not reported)
 *   B index                          the test begins: a crash or hang is blamed on it
 *   A index rep n                    harness: blocks the setup or the calls allocated,
 *                                    then n x struct sc_wire_block, raw
 *   MEM index rep n file offset      harness: memory after a repeat's calls, then
 *                                    n x struct sc_wire_range, raw; the ranges' bytes, one
 *                                    after the other, are in snapshot file `file` from
 *                                    `offset` on, written before this line
 *   R index rep resultA resultB      a repeat's results (JSON without spaces)
 *   X index rep why                  the setup failed (rep -1: the test could not be read)
 *   H index rep call A|B did not return
 *   FAIL what: reason                the driver itself failed
 *   DONE ms                          every test ran (ms: the tests' run time)
 * and from the guest's probe boot (settings facts=1), before DONE:
 *   U release                        the kernel's release
 *   K, then /proc/kallsyms as it is, then KEND on a line of its own
 *   O cpu offset                     a CPU's per-cpu offset (hex)
 * The raw parts of A and MEM follow their line directly, little-endian (wire.py's
 * read_reports). Snapshot file k is the batch file's path, SC_WIRE_SNAPSHOT_FILE and k
 * (batch.txt.mem.0): memory goes there as it is, at no guest instruction per byte, and the
 * host reads a repeat's only when it names a heap line with it (most never do), not all
 * of them from the pipe. The harness starts the next file at a test's first snapshot
 * when the current one holds SC_WIRE_SNAPSHOT_FILE_BYTES; the host removes a file when a
 * later one is named (the tests are taken in order).
 */
#ifndef SCALECHECK_WIRE_H
#define SCALECHECK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define SC_WIRE_SETTINGS "S"
#define SC_WIRE_SNAPSHOT "N"
#define SC_WIRE_ALLOC_WRAPPER "WRAP"
#define SC_WIRE_TEST "T"
#define SC_WIRE_CALL "C"
#define SC_WIRE_END "E"
#define SC_WIRE_FILE "F"
#define SC_WIRE_INODE "I"
#define SC_WIRE_PIPE "P"
#define SC_WIRE_FD "D"
#define SC_WIRE_MAPPING "M"
#define SC_WIRE_SOCKET "Q"
#define SC_WIRE_VALUE "V"

#define SC_WIRE_BATCH_FW_CFG "opt/scalecheck/batch"
#define SC_WIRE_WAITING "WAIT"
#define SC_WIRE_READY "READY"
#define SC_WIRE_WARMUP "W"
#define SC_WIRE_BEGIN "B"
#define SC_WIRE_ALLOCATION "A"
#define SC_WIRE_MEMORY "MEM"
#define SC_WIRE_RESULTS "R"
#define SC_WIRE_SETUP_FAILED "X"
#define SC_WIRE_HUNG "H"
#define SC_WIRE_FAIL "FAIL"
#define SC_WIRE_DONE "DONE"
#define SC_WIRE_RELEASE "U"
#define SC_WIRE_KALLSYMS "K"
#define SC_WIRE_KALLSYMS_END "KEND"
#define SC_WIRE_PERCPU_OFFSET "O"
#define SC_WIRE_SNAPSHOT_FILE ".mem."
#define SC_WIRE_SNAPSHOT_FILE_BYTES (16L << 20)

/* The most arguments a call line carries, and the most tokens of any line. */
#define SC_WIRE_MAX_ARGS 16
#define SC_WIRE_MAX_TOKENS 64

struct sc_wire_settings {
	int repeats, timeout_ms, warmup, dump_facts;
	/* Guest: compare each reused test process with a fresh one (state_check=1); make the
	 * reused ones keep something a fresh one would not have (state_leak=1, the check's test). */
	int state_check, state_leak;
	char fs[16];
};

/* A call line: pointers into the batch's text, valid while its test is read. */
struct sc_wire_call {
	int side, proc, nargs;
	const char *op;
	const char *names[SC_WIRE_MAX_ARGS], *values[SC_WIRE_MAX_ARGS];
};

/* A heap block (A) and a range of memory (MEM) as the raw parts of their reports give them. */
struct sc_wire_block {
	uint64_t addr, size, site;
};
struct sc_wire_range {
	uint64_t addr, size;
};

/* What a driver gives the batch loop. Each callback returns 0, or -1 with *why set. */
struct sc_wire_driver {
	void *test; /* the driver's test, filled by the callbacks below */
	void (*begin)(void *test, long index);
	int (*setup_line)(void *test, char **tok, int n, const char **why);
	int (*call)(void *test, const struct sc_wire_call *call, const char **why);
	int (*ncalls)(const void *test);
	void (*repeat)(const void *test, int rep);
	/* A line outside the tests (N), or NULL. */
	void (*batch_line)(char **tok, int n);
};

/* Where reports go: write takes a piece of a report; flush (or NULL) ends a unit the host
 * may act on. A piece over SC_WIRE_COPY_LIMIT bytes (memory, tables) may be written by
 * reference: it stays unchanged until the next flush. */
#define SC_WIRE_COPY_LIMIT 1024
void sc_wire_output(void (*write)(const char *s, size_t n), void (*flush)(void));

/* The batch file as NUL-terminated text in pages of its own (not inherited by a fork),
 * or NULL with errno set. */
char *sc_wire_read_batch(const char *path);
/* Reads the settings line at *cursor (defaults kept for missing keys); -1 if none. */
int sc_wire_read_settings(char **cursor, struct sc_wire_settings *s);
/* Runs every test of `tests` (the batch at path after its settings line): the warm-up
 * pass (s->warmup tests, once each at SC_WARMUP_REP, announced by W, on a copy read from
 * path), then each test's repeats (announced by B). */
void sc_wire_run_tests(const char *path, char *tests, const struct sc_wire_settings *s,
		       const struct sc_wire_driver *d);
/* The entry named name in a table of entries that begin with their name (const char *),
 * ended by an entry whose name is NULL; NULL if none. */
const void *sc_wire_find(const void *table, size_t entry_size, const char *name);

void sc_wire_waiting(void);
void sc_wire_ready(int cpus);
void sc_wire_results(long index, int rep, const char *a, const char *b);
void sc_wire_setup_failed(long index, int rep, const char *why);
void sc_wire_hung(long index, int rep, int side);
void sc_wire_allocations(long index, int rep, const struct sc_wire_block *blocks, int n);
/* The ranges whose bytes the driver wrote to snapshot file `file` from `offset` on. */
void sc_wire_memory(long index, int rep, const struct sc_wire_range *ranges, int n, int file, long offset);
void sc_wire_fail(const char *what, const char *reason);
void sc_wire_done(long ms);
void sc_wire_release(const char *release);
/* K, everything fd holds (read to its end), KEND. */
void sc_wire_kallsyms(int fd);
void sc_wire_percpu_offset(int cpu, unsigned long offset);

#endif
