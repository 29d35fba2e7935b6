/*
 * scalecheck user-space harness: runs a library's tests under qemu-x86_64 with the
 * tracing plugin (mode=user). Linked with the library's adapter (scalecheck_adapter.h).
 *
 * Reads the batch file named by argv[1] (the wire format, tracer/include/scalecheck_wire.h,
 * written by src/scalecheck/run/user/program_worker.py; read by tracer/common/wire.c): each
 * test's setup as "V path value" lines, its calls as "C side proc op name=value..." lines,
 * and before the tests "N addr size" lines, the library's static data to snapshot (below),
 * and "WRAP start end [file]" lines, the code of allocation wrappers (trace_alloc.h).
 * It reports on stdout, flushed after each test repeat: B as a test begins, then per
 * repeat the memory snapshot (MEM), the allocations (A) and the results (R), or X; each
 * unit in one writev. The snapshot's bytes go to a file of their own beside the batch,
 * written from where they are (no guest work per byte, which under the plugin costs a
 * callback per access); the host reads them only when it names a heap line.
 *
 * Call A runs on thread A, then call B on thread B, each between markers, with the region
 * tag (index << SC_TAG_INDEX_SHIFT) | (rep << SC_TAG_REP_SHIFT) | side emitted first. The
 * harness's own memory written around the calls (results, allocation logs, stacks) is
 * private to each thread, so it never shows as a conflict.
 *
 * After each repeat's calls the harness takes a snapshot (MEM) of the "N" ranges and
 * of the live allocations: the host follows the typed pointers in them to find the DWARF
 * type of each heap object (src/scalecheck/run/user/dwarfnames.py), and names each
 * repeat's conflicting lines from its own snapshot before it compares the repeats.
 *
 * The main thread (batch, setup, teardown, reports: never a region) runs on a stack at a
 * fixed address, by which trace_zero.c's memset knows it is outside the regions.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "../include/scalecheck_abi.h"
#include "../include/scalecheck_marker.h"
#include "../include/scalecheck_wire.h"
#include "scalecheck_adapter.h"
#include "trace_alloc.h"
#include "trace_zero.h"

#define MAX_VALUES 512
#define PATH_LEN 64
#define MAX_SNAPSHOT_RANGES 64
/* Bytes of one range or allocation in a snapshot: pointers beyond are not followed. */
#define SNAPSHOT_BYTES 4096

struct sc_state {
	int nvalues;
	char paths[MAX_VALUES][PATH_LEN];
	char texts[MAX_VALUES][SC_TEXT_LEN];
	/* Each path's path_hash: a lookup compares the paths whose hash matches only. */
	uint32_t hashes[MAX_VALUES];
};

struct call {
	const struct sc_op *op;
	struct sc_call call;
};

struct test {
	long index;
	int ncalls;
	struct sc_state state;
	struct call calls[2];
};

/* ---- the adapter's helpers ---- */

/* The integer a text spells, in *value: 1, or 0 when it is not an integer. */
static int parse_integer(const char *text, long *value)
{
	char *end;
	*value = strtol(text, &end, 0);
	return end != text && !*end;
}

/* FNV-1a. The setup runs outside the regions, but under the plugin each of its memory
 * accesses still costs a callback: a lookup reads one word per value, not each path. */
static uint32_t path_hash(const char *path)
{
	uint32_t hash = 2166136261u;
	for (; *path; path++)
		hash = (hash ^ (unsigned char)*path) * 16777619u;
	return hash;
}

const char *sc_state_text(const struct sc_state *state, const char *path)
{
	uint32_t hash = path_hash(path);
	for (int i = 0; i < state->nvalues; i++)
		if (state->hashes[i] == hash && !strcmp(state->paths[i], path))
			return state->texts[i];
	return NULL;
}

long sc_state_get(const struct sc_state *state, const char *path, long fallback)
{
	const char *text = sc_state_text(state, path);
	long value;
	return text && parse_integer(text, &value) ? value : fallback;
}

/* The key right under prefix (length n < PATH_LEN, 0 for the top) in path (a value's, of
 * PATH_LEN bytes), into key; 0 if none. The byte after the prefix is looked at first: it
 * tells most paths from the prefix's without a string comparison. */
static int key_under(const char *path, const char *prefix, size_t n, char *key, size_t keylen)
{
	if (n && (path[n] != '.' || strncmp(path, prefix, n)))
		return 0;
	const char *start = n ? path + n + 1 : path;
	size_t len = strcspn(start, ".");
	if (!len || len >= keylen)
		return 0;
	memcpy(key, start, len);
	key[len] = 0;
	return 1;
}

/* The walks of sc_state_key so far in the test. Adapters ask for the keys under a path in
 * order (n = 0, 1, 2...), a walk of a deeper path in between (each inode's data, under
 * "inodes"), and again at the next repeat: each path's walk goes on from where it stopped
 * instead of walking the whole setup again (the setup's accesses each cost a plugin
 * callback). Line-aligned, as all the harness's static data; begin() forgets them. */
#define MAX_WALKS 32

struct key_walk {
	char path[PATH_LEN];
	int nfound, next;
	/* The value where each key found so far first appears, in that order. */
	int first[MAX_VALUES];
};

static struct {
	const struct sc_state *state;
	int nwalks;
	struct key_walk *last;
	struct key_walk walks[MAX_WALKS];
} __attribute__((aligned(64))) key_walks;

/* The key of value i under a prefix of length plen (0: the top), its length in *len. */
static const char *key_of(const struct sc_state *state, int i, size_t plen, size_t *len)
{
	const char *start = state->paths[i] + (plen ? plen + 1 : 0);
	*len = strcspn(start, ".");
	return start;
}

/* Whether value i has a key under walk->path that no value before it had. */
static int new_key_at(const struct sc_state *state, const struct key_walk *walk, int i, size_t plen)
{
	char key[PATH_LEN];
	if (!key_under(state->paths[i], walk->path, plen, key, sizeof key))
		return 0;
	size_t len = strlen(key);
	/* Latest first: a key's values are usually next to each other. */
	for (int k = walk->nfound - 1; k >= 0; k--) {
		size_t seen_len;
		const char *seen = key_of(state, walk->first[k], plen, &seen_len);
		if (seen_len == len && !memcmp(seen, key, len))
			return 0;
	}
	return 1;
}

/* The test's walk of path: the last one, an earlier one, or a new one (over the oldest
 * when there are MAX_WALKS: a walk begun again finds what it found). */
static struct key_walk *walk_of(const struct sc_state *state, const char *path)
{
	if (key_walks.state != state) {
		key_walks.state = state;
		key_walks.nwalks = 0;
		key_walks.last = NULL;
	}
	if (key_walks.last && !strcmp(key_walks.last->path, path))
		return key_walks.last;
	int n = key_walks.nwalks < MAX_WALKS ? key_walks.nwalks : MAX_WALKS;
	for (int w = 0; w < n; w++)
		if (!strcmp(key_walks.walks[w].path, path))
			return key_walks.last = &key_walks.walks[w];
	struct key_walk *walk = &key_walks.walks[key_walks.nwalks++ % MAX_WALKS];
	strcpy(walk->path, path);
	walk->nfound = walk->next = 0;
	return key_walks.last = walk;
}

int sc_state_key(const struct sc_state *state, const char *path, int n, char *key, size_t keylen)
{
	size_t plen = strlen(path);
	if (plen >= PATH_LEN || n < 0)
		return 0; /* no value has a key under it */
	struct key_walk *walk = walk_of(state, path);
	while (walk->nfound <= n && walk->next < state->nvalues) {
		int i = walk->next++;
		if (new_key_at(state, walk, i, plen))
			walk->first[walk->nfound++] = i;
	}
	if (n >= walk->nfound)
		return 0;
	size_t len;
	const char *found = key_of(state, walk->first[n], plen, &len);
	if (len >= keylen)
		return 0;
	memcpy(key, found, len);
	key[len] = 0;
	return 1;
}

static const struct sc_arg *named_arg(const struct sc_call *call, const char *name)
{
	for (int i = 0; i < call->nargs; i++)
		if (!strcmp(call->args[i].name, name))
			return &call->args[i];
	fprintf(stderr, "scalecheck adapter asked for argument %s, which the call does not have\n", name);
	exit(3);
}

long sc_arg(const struct sc_call *call, int i)
{
	if (i < 0 || i >= call->nargs) {
		fprintf(stderr, "scalecheck adapter asked for argument %d of %d\n", i, call->nargs);
		exit(3);
	}
	return call->args[i].value;
}

long sc_arg_int(const struct sc_call *call, const char *name)
{
	return named_arg(call, name)->value;
}

const char *sc_arg_str(const struct sc_call *call, const char *name)
{
	return named_arg(call, name)->text;
}

void sc_ok(struct sc_result *result, long value)
{
	snprintf(result->text, sizeof result->text, "{\"ret\":%ld}", value);
}

void sc_ok_bool(struct sc_result *result, int value)
{
	snprintf(result->text, sizeof result->text, "{\"ret\":%s}", value ? "true" : "false");
}

void sc_error(struct sc_result *result, const char *errno_name)
{
	snprintf(result->text, sizeof result->text, "{\"errno\":\"%s\"}", errno_name);
}

void sc_signal(struct sc_result *result, const char *signal_name)
{
	snprintf(result->text, sizeof result->text, "{\"signal\":\"%s\"}", signal_name);
}

/* Reopens a result's closing brace to add `"name":`; the returned end is where the
 * field's value goes. */
static char *open_field(struct sc_result *result, const char *name)
{
	size_t len = strlen(result->text);
	if (!len || result->text[len - 1] != '}') {
		fprintf(stderr, "scalecheck adapter added field %s to no result\n", name);
		exit(3);
	}
	snprintf(result->text + len - 1, sizeof result->text - (len - 1), ",\"%s\":", name);
	return result->text + strlen(result->text);
}

void sc_result_field(struct sc_result *result, const char *name, long value)
{
	char *end = open_field(result, name);
	snprintf(end, sizeof result->text - (size_t)(end - result->text), "%ld}", value);
}

void sc_result_list(struct sc_result *result, const char *name, const long *values, int n)
{
	char *end = open_field(result, name);
	for (int i = 0; i < n; i++) {
		size_t used = (size_t)(end - result->text);
		end += snprintf(end, sizeof result->text - used, "%c%ld", i ? ',' : '[', values[i]);
	}
	snprintf(end, sizeof result->text - (size_t)(end - result->text), n ? "]}" : "[]}");
}

__attribute__((weak)) void sc_thread_init(int side)
{
	(void)side;
}

/* The image's last bytes, linked right below SC_USER_IMAGE_END (program_build.py): the
 * heap starts there, wherever the code and data before them end. */
static char image_tail[SC_USER_IMAGE_TAIL] __attribute__((used, aligned(SC_USER_IMAGE_TAIL),
							   section(".scalecheck_image_tail")));

/* ---- the two calling threads ---- */

struct participant {
	int side;
	pthread_t thread;
	/* Set and read outside the regions only. */
	const struct call *call;
	uint32_t tag;
	struct sc_result result;
	int go, done;
} __attribute__((aligned(64)));

/* A hand-off between the main thread and a calling thread: one sets the flag, the other
 * waits for it and clears it; each flag has one setter and one waiter, which never set it
 * again before the other clears it. A futex on the flag itself: a wake and at most one
 * wait a hand-off (a mutex and a condition variable took some 28 futex calls a test
 * repeat, each a system call through qemu-x86_64). */
static void set_flag(int *flag)
{
	__atomic_store_n(flag, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, flag, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void wait_flag(int *flag)
{
	while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, flag, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	__atomic_store_n(flag, 0, __ATOMIC_RELAXED);
}

static void *participant_main(void *arg)
{
	struct participant *p = arg;
	sc_alloc_log_start(1 + p->side);
	/* The thread's first allocation attaches it to an allocator arena: done here, so that
	 * no call pays for it inside its region (volatile: the compiler drops a bare
	 * malloc/free pair). */
	void *volatile first = malloc(1);
	free(first);
	sc_thread_init(p->side);
	set_flag(&p->done);
	for (;;) {
		wait_flag(&p->go);
		/* The call's arguments and result live on this thread's stack while it runs. */
		struct call call = *p->call;
		struct sc_result result = {""};
		sc_emit_tag(p->tag);
		SC_MARK_START();
		call.op->call(&call.call, &result);
		SC_MARK_END();
		p->result = result;
		set_flag(&p->done);
	}
	return NULL;
}

static struct participant participants[2];

static void start_participants(void)
{
	for (int side = 0; side < 2; side++) {
		participants[side].side = side;
		if (pthread_create(&participants[side].thread, NULL, participant_main, &participants[side])) {
			perror("scalecheck harness: pthread_create");
			exit(3);
		}
		wait_flag(&participants[side].done);
	}
}

/* ---- a test's lines (the wire module, tracer/common/wire.c, reads the batch) ---- */

static int setup_line(void *test, char **tok, int n, const char **why)
{
	struct test *t = test;
	if (strcmp(tok[0], SC_WIRE_VALUE) || t->state.nvalues == MAX_VALUES) {
		*why = "setup exceeds the harness's limits or is malformed";
		return -1;
	}
	if (n != 3 || strlen(tok[1]) >= PATH_LEN || strlen(tok[2]) >= SC_TEXT_LEN) {
		*why = "malformed setup value";
		return -1;
	}
	t->state.hashes[t->state.nvalues] = path_hash(tok[1]);
	strcpy(t->state.paths[t->state.nvalues], tok[1]);
	strcpy(t->state.texts[t->state.nvalues++], tok[2]);
	return 0;
}

static int call_line(void *test, const struct sc_wire_call *line, const char **why)
{
	struct test *t = test;
	if (t->ncalls == 2) {
		*why = "setup exceeds the harness's limits or is malformed";
		return -1;
	}
	struct call *c = &t->calls[t->ncalls++];
	c->op = sc_wire_find(SC_OPS, sizeof SC_OPS[0], line->op);
	c->call.proc = line->proc;
	for (int i = 0; i < line->nargs; i++) {
		struct sc_arg *a = &c->call.args[c->call.nargs++];
		if (i == SC_MAX_ARGS || strlen(line->names[i]) >= SC_NAME_LEN || strlen(line->values[i]) >= SC_TEXT_LEN) {
			*why = "malformed or too many arguments";
			return -1;
		}
		strcpy(a->name, line->names[i]);
		strcpy(a->text, line->values[i]);
		if (!parse_integer(a->text, &a->value))
			a->value = 0;
	}
	if (!c->op)
		*why = "the adapter has no such operation";
	else if (c->call.nargs != c->op->nargs)
		*why = "wrong number of arguments for the adapter's operation";
	return *why ? -1 : 0;
}

static void begin(void *test, long index)
{
	struct test *t = test;
	/* Not the whole test: its setup's tables (some 55 KiB, each store of them a plugin
	 * callback) are read only below nvalues. */
	t->index = index;
	t->ncalls = 0;
	t->state.nvalues = 0;
	memset(t->calls, 0, sizeof t->calls);
	key_walks.state = NULL;
}

static int ncalls(const void *test)
{
	return ((const struct test *)test)->ncalls;
}

/* ---- running ---- */

/* ---- output: whole writes, the snapshot files ---- */

/* Writes the n pieces (changing them) to fd, or exits naming `what`. */
static void write_all(int fd, struct iovec *piece, int n, const char *what)
{
	while (n > 0) {
		ssize_t written = writev(fd, piece, n < IOV_MAX ? n : IOV_MAX);
		if (written < 0 && errno == EINTR)
			continue;
		if (written < 0) {
			fprintf(stderr, "scalecheck harness: writing %s: %s\n", what, strerror(errno));
			exit(3);
		}
		for (; n > 0 && (size_t)written >= piece->iov_len; piece++, n--)
			written -= (ssize_t)piece->iov_len;
		if (n > 0) {
			piece->iov_base = (char *)piece->iov_base + written;
			piece->iov_len -= (size_t)written;
		}
	}
}

/* The snapshot file being written (scalecheck_wire.h): its number, fd (0: none yet), the
 * bytes in it, the test of its last snapshot; the pieces of a snapshot. Line-aligned, as
 * all the harness's static data. */
static struct {
	int number, fd;
	long used, last_index;
	char path[PATH_MAX];
	struct iovec pieces[MAX_SNAPSHOT_RANGES + 3 * MAX_ALLOCS];
} __attribute__((aligned(64))) snapshots = {.last_index = -1};

/* The batch file, whose path names the snapshot files. */
static const char *batch_path(void);

static void next_snapshot_file(void)
{
	if (snapshots.fd)
		close(snapshots.fd);
	snapshots.number += snapshots.fd != 0;
	snprintf(snapshots.path, sizeof snapshots.path, "%s%s%d", batch_path(), SC_WIRE_SNAPSHOT_FILE,
		 snapshots.number);
	int fd = open(snapshots.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	snapshots.fd = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, SC_HARNESS_FD_MIN);
	if (fd >= 0)
		close(fd);
	if (snapshots.fd < 0) {
		fprintf(stderr, "scalecheck harness: snapshot file %s: %s\n", snapshots.path, strerror(errno));
		exit(3);
	}
	snapshots.used = 0;
}

/* The ranges' bytes to the snapshot file, then their MEM report. A test's snapshots stay
 * in one file: the host removes a file once a later one is named. */
static void write_snapshot(long index, int rep, const struct sc_wire_range *ranges, int n)
{
	if (!snapshots.fd || (index != snapshots.last_index && snapshots.used >= SC_WIRE_SNAPSHOT_FILE_BYTES))
		next_snapshot_file();
	snapshots.last_index = index;
	long offset = snapshots.used;
	for (int i = 0; i < n; i++) {
		snapshots.pieces[i] = (struct iovec){(void *)(uintptr_t)ranges[i].addr, ranges[i].size};
		snapshots.used += (long)ranges[i].size;
	}
	write_all(snapshots.fd, snapshots.pieces, n, "a snapshot");
	sc_wire_memory(index, rep, ranges, n, snapshots.number, offset);
}

/* ---- what a repeat reports of the heap and the library's memory ---- */

/* Line-aligned, as all the harness's static data: never on a line of the library's. */
static struct {
	int n;
	uintptr_t addr[MAX_SNAPSHOT_RANGES];
	size_t size[MAX_SNAPSHOT_RANGES];
} __attribute__((aligned(64))) snapshot_ranges;

/* "N addr size", a line before the tests. */
static void add_snapshot_range(char **tok, int n)
{
	if (n == 3 && snapshot_ranges.n < MAX_SNAPSHOT_RANGES) {
		snapshot_ranges.addr[snapshot_ranges.n] = strtoul(tok[1], NULL, 16);
		snapshot_ranges.size[snapshot_ranges.n++] = strtoul(tok[2], NULL, 10);
	}
}

/* The lines before the tests: snapshot ranges and allocation wrappers. */
static void batch_line(char **tok, int n)
{
	if (!strcmp(tok[0], SC_WIRE_SNAPSHOT))
		add_snapshot_range(tok, n);
	else if (!strcmp(tok[0], SC_WIRE_ALLOC_WRAPPER))
		sc_alloc_add_wrapper(tok, n);
}

static size_t snapshot_size(size_t size)
{
	return size < SNAPSHOT_BYTES ? size : SNAPSHOT_BYTES;
}

/* An allocation and its place in the test's history. */
struct allocation_at { const struct alloc *a; int when; };

static int by_address_then_time(const void *x, const void *y)
{
	const struct allocation_at *p = x, *q = y;
	if (p->a->addr != q->a->addr)
		return p->a->addr < q->a->addr ? -1 : 1;
	return p->when - q->when;
}

/* What one repeat reports of the heap, in harness memory (line-aligned, as all of it):
 * the tables are written by reference until the repeat's results flush them. */
static struct {
	struct sc_wire_block blocks[3 * MAX_ALLOCS];
	struct sc_wire_range ranges[MAX_SNAPSHOT_RANGES + 3 * MAX_ALLOCS];
} __attribute__((aligned(64))) heap_report;

/* The logs' allocations in the order of the test (setup's, then call A's, then call B's),
 * sorted by address, each address's in that order, into order; returns how many. The
 * array is on the stack and holds allocations only, as it always has: qsort takes memory
 * of malloc for a larger one, and the library's blocks would land elsewhere. */
static int allocations_by_address(struct allocation_at *order)
{
	int n = 0;
	for (int slot = 0; slot < 3; slot++)
		for (int i = 0; i < sc_alloc_logs[slot]->n; i++)
			if (!sc_alloc_logs[slot]->entries[i].is_free) {
				order[n] = (struct allocation_at){&sc_alloc_logs[slot]->entries[i], n};
				n++;
			}
	qsort(order, (size_t)n, sizeof *order, by_address_then_time);
	return n;
}

/* When an entry was logged, in the order of the test. */
static int time_of(const struct alloc *a)
{
	for (int slot = 0; slot < 3; slot++)
		if (a >= sc_alloc_logs[slot]->entries && a < sc_alloc_logs[slot]->entries + MAX_ALLOCS)
			return slot * MAX_ALLOCS + (int)(a - sc_alloc_logs[slot]->entries);
	return -1;
}

/* The first of order[0..n) (sorted by address) at addr or above. */
static int first_at_or_above(const struct allocation_at *order, int n, uintptr_t addr)
{
	int low = 0, high = n;
	while (low < high) {
		int mid = low + (high - low) / 2;
		if (order[mid].a->addr < addr)
			low = mid + 1;
		else
			high = mid;
	}
	return low;
}

/* released[k]: when order[k]'s address was last released in the test, or -1 (set at the
 * first allocation of each address). One pass over the logs, each release found by
 * binary search: a scan of every log for each address made some 4 % of the plugin's
 * calls in a libsv6 run. */
static void releases_by_address(const struct allocation_at *order, int n, int *released)
{
	for (int k = 0; k < n; k++)
		released[k] = -1;
	for (int slot = 0; slot < 3; slot++)
		for (int i = 0; i < sc_alloc_logs[slot]->n; i++) {
			const struct alloc *entry = &sc_alloc_logs[slot]->entries[i];
			if (!entry->is_free)
				continue;
			int k = first_at_or_above(order, n, entry->addr);
			if (k < n && order[k].a->addr == entry->addr)
				released[k] = slot * MAX_ALLOCS + i; /* the logs in the order of the test */
		}
}

/* Of one address's allocations, order[first..end), released after its last release (or
 * -1), the last non-empty one no release follows (the memory the snapshot holds), or NULL. */
static const struct alloc *live_allocation(const struct allocation_at *order, int first, int end, int released)
{
	for (int k = end - 1; k >= first && time_of(order[k].a) > released; k--)
		if (order[k].a->size)
			return order[k].a;
	return NULL;
}

/* The repeat's allocations (A) and, when `snapshot`, its memory after the calls (MEM): the
 * "N" ranges of static data and the live allocations, each up to SNAPSHOT_BYTES. The
 * logs start again empty. */
static void report_heap(long index, int rep, int snapshot)
{
	struct allocation_at order[3 * MAX_ALLOCS];
	int released[3 * MAX_ALLOCS];
	int n = allocations_by_address(order), nblocks = 0, nranges = 0;
	if (snapshot)
		releases_by_address(order, n, released);
	for (int i = 0; snapshot && i < snapshot_ranges.n; i++)
		heap_report.ranges[nranges++] =
			(struct sc_wire_range){snapshot_ranges.addr[i], snapshot_size(snapshot_ranges.size[i])};
	for (int first = 0, end; first < n; first = end) {
		for (end = first + 1; end < n && order[end].a->addr == order[first].a->addr; end++)
			;
		/* A block handed out again later in the test (malloc's reuse of a freed chunk,
		 * a library's kept block) is reported by its last allocation only: the object
		 * the later accesses and the snapshot see, not whatever the block held before. */
		const struct alloc *last = order[end - 1].a, *live = snapshot ? live_allocation(order, first, end, released[first]) : NULL;
		heap_report.blocks[nblocks++] = (struct sc_wire_block){last->addr, last->size, last->site};
		if (live)
			heap_report.ranges[nranges++] = (struct sc_wire_range){live->addr, snapshot_size(live->size)};
	}
	if (snapshot)
		write_snapshot(index, rep, heap_report.ranges, nranges);
	if (nblocks)
		sc_wire_allocations(index, rep, heap_report.blocks, nblocks);
	for (int slot = 0; slot < 3; slot++)
		sc_alloc_logs[slot]->n = 0;
}

static void run_repeat(const void *test, int rep)
{
	const struct test *t = test;
	char why[SC_RESULT_LEN] = "";
	if (sc_setup(&t->state, why, sizeof why) < 0) {
		sc_wire_setup_failed(t->index, rep, why[0] ? why : "setup failed");
		return;
	}
	for (int side = 0; side < 2; side++) {
		struct participant *p = &participants[side];
		p->call = &t->calls[side];
		p->tag = (uint32_t)((t->index << SC_TAG_INDEX_SHIFT) | (rep << SC_TAG_REP_SHIFT) | side);
		set_flag(&p->go);
		wait_flag(&p->done);
	}
	report_heap(t->index, rep, 1);
	/* Flushes the reports' tables, written by reference, before the teardown's replace them. */
	sc_wire_results(t->index, rep, participants[0].result.text, participants[1].result.text);
	sc_teardown();
	report_heap(t->index, rep, 0);
}

/* ---- output: a unit's reports in one writev, tables by reference ---- */

#define OUTPUT_PIECES 512

/* Line-aligned, as all the harness's static data. */
static struct {
	struct iovec pieces[OUTPUT_PIECES];
	int n;
	size_t used, capacity;
	char *text;
} __attribute__((aligned(64))) output;

/* The lines' buffer, allocated as stdio allocates a stream's (the C library's BUFSIZ, or
 * the file's block size when smaller) at the first report, as when stdio wrote the
 * reports: the harness takes the heap it took then. Where the library's blocks land, and
 * with that any false sharing on heap lines, depends on what came before them. */
static void allocate_text(void)
{
	struct stat st;
	output.capacity = BUFSIZ;
	if (fstat(STDOUT_FILENO, &st) == 0 && st.st_blksize > 0 && st.st_blksize < BUFSIZ)
		output.capacity = (size_t)st.st_blksize;
	if (output.capacity < SC_WIRE_COPY_LIMIT) /* a copied piece fits */
		output.capacity = SC_WIRE_COPY_LIMIT;
	output.text = malloc(output.capacity);
	if (!output.text) {
		perror("scalecheck harness: output buffer");
		exit(3);
	}
}

static void flush_output(void)
{
	fflush(stdout); /* anything an adapter printed comes first */
	write_all(STDOUT_FILENO, output.pieces, output.n, "reports");
	output.n = 0;
	output.used = 0;
}

/* Lines are copied; a piece over SC_WIRE_COPY_LIMIT is written from where it is at the
 * next flush (scalecheck_wire.h). */
static void write_output(const char *s, size_t n)
{
	int by_reference = n > SC_WIRE_COPY_LIMIT;
	if (!output.text)
		allocate_text();
	if (output.n == OUTPUT_PIECES || (!by_reference && output.used + n > output.capacity))
		flush_output();
	if (by_reference) {
		output.pieces[output.n++] = (struct iovec){(void *)s, n};
		return;
	}
	char *at = output.text + output.used;
	memcpy(at, s, n);
	output.used += n;
	struct iovec *last = output.n ? &output.pieces[output.n - 1] : NULL;
	if (last && (char *)last->iov_base + last->iov_len == at)
		last->iov_len += n;
	else
		output.pieces[output.n++] = (struct iovec){at, n};
}

/* Pads the main heap so that its next block starts at SC_USER_HEAP_START (scalecheck_abi.h),
 * whatever glibc's start-up took. Two probes, never freed, give where the next block goes
 * and a block's least size; the pad's block then spans the gap (a block of n bytes takes
 * n + 8 rounded up to the probes' alignment). Blocks that are not taken from the break
 * (glibc.malloc.mmap_threshold below their size) are left where mmap puts them. */
static void pad_heap(void)
{
	char *first = malloc(1), *second = malloc(1);
	uintptr_t least = (uintptr_t)(second - first), next = (uintptr_t)second + least;
	if (!first || !second || second < first || next + least > SC_USER_HEAP_START)
		return;
	void *volatile pad = malloc(SC_USER_HEAP_START - next - sizeof(size_t));
	(void)pad;
}

/* What main hands to the body it runs on its own stack. */
static struct {
	const char *batch;
	char *tests;
	struct sc_wire_settings settings;
	ucontext_t caller, body;
} __attribute__((aligned(64))) main_args;

static void run_batch(void)
{
	pad_heap();
	sc_wire_output(write_output, flush_output);
	sc_alloc_log_start(0);
	start_participants();
	sc_wire_ready(2);
	struct timespec started, ended;
	clock_gettime(CLOCK_MONOTONIC, &started);
	static struct test t;
	struct sc_wire_driver driver = {
		.test = &t,
		.begin = begin,
		.setup_line = setup_line,
		.call = call_line,
		.ncalls = ncalls,
		.repeat = run_repeat,
		.batch_line = batch_line,
	};
	sc_wire_run_tests(main_args.batch, main_args.tests, &main_args.settings, &driver);
	clock_gettime(CLOCK_MONOTONIC, &ended);
	sc_wire_done((ended.tv_sec - started.tv_sec) * 1000L + (ended.tv_nsec - started.tv_nsec) / 1000000);
}

/* Runs run_batch on the stack at SC_MAIN_STACK_ADDR (trace_zero.h); where that address
 * is taken, on this one (memset then zeroes as it did). */
static void run_on_main_stack(void)
{
	void *stack = mmap((void *)SC_MAIN_STACK_ADDR, SC_MAIN_STACK_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (stack != (void *)SC_MAIN_STACK_ADDR) {
		fprintf(stderr, "scalecheck harness: no stack at %#lx; setup zeroes by memset\n", SC_MAIN_STACK_ADDR);
		if (stack != MAP_FAILED)
			munmap(stack, SC_MAIN_STACK_SIZE);
		run_batch();
		return;
	}
	getcontext(&main_args.body);
	main_args.body.uc_stack.ss_sp = stack;
	main_args.body.uc_stack.ss_size = SC_MAIN_STACK_SIZE;
	main_args.body.uc_link = &main_args.caller;
	makecontext(&main_args.body, run_batch, 0);
	if (swapcontext(&main_args.caller, &main_args.body) < 0) {
		perror("scalecheck harness: swapcontext");
		exit(3);
	}
}

static const char *batch_path(void)
{
	return main_args.batch;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s BATCH\n", argv[0]);
		return 2;
	}
	main_args.batch = argv[1];
	main_args.tests = sc_wire_read_batch(argv[1]);
	if (!main_args.tests) {
		perror(argv[1]);
		return 2;
	}
	main_args.settings = (struct sc_wire_settings){.repeats = 2};
	if (sc_wire_read_settings(&main_args.tests, &main_args.settings) < 0) {
		fprintf(stderr, "%s: no header line\n", argv[1]);
		return 2;
	}
	run_on_main_stack();
	return 0;
}
