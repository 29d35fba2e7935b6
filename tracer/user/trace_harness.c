/*
 * scalecheck user-space harness: runs a library's tests under qemu-x86_64 with the
 * tracing plugin (mode=user). Linked with the library's adapter (scalecheck_adapter.h).
 *
 * Reads the batch file named by argv[1] (written by src/scalecheck/run/user/program_worker.py):
 *
 *   S repeats=N
 *   T index            a test, then its lines up to E:
 *   V path value       one value of the setup (flattened; value an integer or a word)
 *   C side proc op name=value...  call A (side 0) and call B (side 1), in process proc
 *   E
 *
 * preceded by lines "P addr size": the library's static data to snapshot (below), and
 * "W start end [file]": the code of an allocation wrapper (trace_alloc.h).
 *
 * and writes to stdout, flushed after each test repeat:
 *
 *   B index                       a test begins (a crash or hang is blamed on it)
 *   A index rep addr size site    an allocation made by the setup or a call
 *   R index rep resultA resultB   a repeat's results (JSON, no spaces)
 *   X index rep why               the setup failed
 *   M index rep addr hex          a snapshot of memory after a repeat's calls
 *   DONE
 *
 * Call A runs on thread A, then call B on thread B, each between markers, with the region
 * tag (index << SC_TAG_INDEX_SHIFT) | (rep << SC_TAG_REP_SHIFT) | side emitted first. The
 * harness's own memory written around the calls (results, allocation logs, stacks) is
 * private to each thread, so it never shows as a conflict.
 *
 * After each repeat's calls the harness writes a snapshot (M lines) of the "P" ranges and
 * of the live allocations: the host follows the typed pointers in them to find the DWARF
 * type of each heap object (src/scalecheck/run/user/dwarfnames.py), and names each
 * repeat's conflicting lines from its own snapshot before it compares the repeats.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/scalecheck_abi.h"
#include "../include/scalecheck_marker.h"
#include "scalecheck_adapter.h"
#include "trace_alloc.h"

#define MAX_VALUES 512
#define PATH_LEN 64
#define MAX_SNAPSHOT_RANGES 64
/* Bytes of one range or allocation in a snapshot: pointers beyond are not followed. */
#define SNAPSHOT_BYTES 4096

struct sc_state {
	int nvalues;
	char paths[MAX_VALUES][PATH_LEN];
	char texts[MAX_VALUES][SC_TEXT_LEN];
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

const char *sc_state_text(const struct sc_state *state, const char *path)
{
	for (int i = 0; i < state->nvalues; i++)
		if (!strcmp(state->paths[i], path))
			return state->texts[i];
	return NULL;
}

long sc_state_get(const struct sc_state *state, const char *path, long fallback)
{
	const char *text = sc_state_text(state, path);
	long value;
	return text && parse_integer(text, &value) ? value : fallback;
}

/* The key right under prefix (length n, 0 for the top) in path, into key; 0 if none. */
static int key_under(const char *path, const char *prefix, size_t n, char *key, size_t keylen)
{
	if (n && (strncmp(path, prefix, n) || path[n] != '.'))
		return 0;
	const char *start = n ? path + n + 1 : path;
	size_t len = strcspn(start, ".");
	if (!len || len >= keylen)
		return 0;
	memcpy(key, start, len);
	key[len] = 0;
	return 1;
}

int sc_state_key(const struct sc_state *state, const char *path, int n, char *key, size_t keylen)
{
	size_t plen = strlen(path);
	char seen[MAX_VALUES][PATH_LEN];
	int nseen = 0;
	for (int i = 0; i < state->nvalues; i++) {
		char found[PATH_LEN];
		if (!key_under(state->paths[i], path, plen, found, sizeof found))
			continue;
		int known = 0;
		for (int j = 0; j < nseen && !known; j++)
			known = !strcmp(seen[j], found);
		if (known)
			continue;
		if (nseen == n) {
			if (strlen(found) >= keylen)
				return 0;
			strcpy(key, found);
			return 1;
		}
		strcpy(seen[nseen++], found);
	}
	return 0;
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

/* The harness's static data is one line-aligned block: it never shares a cache line with
 * the library's. */
static struct {
	pthread_mutex_t handoff;
	pthread_cond_t changed;
} __attribute__((aligned(64))) harness = {.handoff = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

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

static void set_flag(int *flag)
{
	pthread_mutex_lock(&harness.handoff);
	*flag = 1;
	pthread_cond_broadcast(&harness.changed);
	pthread_mutex_unlock(&harness.handoff);
}

static void wait_flag(int *flag)
{
	pthread_mutex_lock(&harness.handoff);
	while (!*flag)
		pthread_cond_wait(&harness.changed, &harness.handoff);
	*flag = 0;
	pthread_mutex_unlock(&harness.handoff);
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

/* ---- parsing the batch ---- */

static const struct sc_op *find_op(const char *name)
{
	for (const struct sc_op *op = SC_OPS; op->name; op++)
		if (!strcmp(op->name, name))
			return op;
	return NULL;
}

/* Reads one test after its "T" line; returns 0, or -1 with *why set. */
static int parse_test(FILE *in, struct test *t, const char **why)
{
	char line[512];
	*why = NULL;
	while (fgets(line, sizeof line, in)) {
		char *save, *kind = strtok_r(line, " \n", &save);
		if (!kind)
			continue;
		if (!strcmp(kind, "E"))
			return *why ? -1 : 0;
		if (!strcmp(kind, "V") && t->state.nvalues < MAX_VALUES) {
			char *path = strtok_r(NULL, " \n", &save), *value = strtok_r(NULL, " \n", &save);
			if (!path || !value || strlen(path) >= PATH_LEN || strlen(value) >= SC_TEXT_LEN) {
				*why = "malformed setup value";
				continue;
			}
			strcpy(t->state.paths[t->state.nvalues], path);
			strcpy(t->state.texts[t->state.nvalues++], value);
		} else if (!strcmp(kind, "C") && t->ncalls < 2) {
			struct call *c = &t->calls[t->ncalls++];
			strtok_r(NULL, " \n", &save); /* side: calls come in order A, B */
			char *proc = strtok_r(NULL, " \n", &save), *name = strtok_r(NULL, " \n", &save);
			c->op = name ? find_op(name) : NULL;
			c->call.proc = proc ? atoi(proc) : 0;
			for (char *arg; (arg = strtok_r(NULL, " \n", &save));) {
				struct sc_arg *a = &c->call.args[c->call.nargs];
				char *eq = strchr(arg, '=');
				if (c->call.nargs == SC_MAX_ARGS || !eq || eq - arg >= SC_NAME_LEN || strlen(eq + 1) >= SC_TEXT_LEN) {
					*why = "malformed or too many arguments";
					break;
				}
				memcpy(a->name, arg, (size_t)(eq - arg));
				strcpy(a->text, eq + 1);
				if (!parse_integer(a->text, &a->value))
					a->value = 0;
				c->call.nargs++;
			}
			if (!c->op)
				*why = "the adapter has no such operation";
			else if (c->call.nargs != c->op->nargs)
				*why = "wrong number of arguments for the adapter's operation";
		} else {
			*why = "setup exceeds the harness's limits or is malformed";
		}
	}
	*why = "batch ended inside a test";
	return -1;
}

/* ---- running ---- */

/* An allocation and its place in the test's history. */
struct allocation_at { const struct alloc *a; int when; };

static int by_address_then_time(const void *x, const void *y)
{
	const struct allocation_at *p = x, *q = y;
	if (p->a->addr != q->a->addr)
		return p->a->addr < q->a->addr ? -1 : 1;
	return p->when - q->when;
}

/* The logs in the order of the test (setup's, then call A's, then call B's).  A block
 * handed out again later in the test (malloc's reuse of a freed chunk, a library's kept
 * block) is reported by its last allocation only: the object the later accesses and the
 * snapshot see, not whatever the block held before. */
static void report_allocations(long index, int rep)
{
	struct allocation_at order[3 * MAX_ALLOCS];
	int n = 0;
	for (int slot = 0; slot < 3; slot++) {
		for (int i = 0; i < sc_alloc_logs[slot]->n; i++) {
			const struct alloc *a = &sc_alloc_logs[slot]->entries[i];
			if (!a->is_free) {
				order[n] = (struct allocation_at){a, n};
				n++;
			}
		}
	}
	qsort(order, (size_t)n, sizeof *order, by_address_then_time);
	for (int k = 0; k < n; k++) {
		const struct alloc *a = order[k].a;
		if (k + 1 < n && order[k + 1].a->addr == a->addr)
			continue;
		printf("A %ld %d %#lx %zu %#lx\n", index, rep, (unsigned long)a->addr, a->size, (unsigned long)a->site);
	}
	for (int slot = 0; slot < 3; slot++)
		sc_alloc_logs[slot]->n = 0;
}

/* ---- memory snapshot ---- */

/* Line-aligned, as all the harness's static data: never on a line of the library's. */
static struct {
	int n;
	uintptr_t addr[MAX_SNAPSHOT_RANGES];
	size_t size[MAX_SNAPSHOT_RANGES];
} __attribute__((aligned(64))) snapshot_ranges;

static void add_snapshot_range(const char *line)
{
	unsigned long addr, size;
	if (sscanf(line, "P %lx %lu", &addr, &size) == 2 && snapshot_ranges.n < MAX_SNAPSHOT_RANGES) {
		snapshot_ranges.addr[snapshot_ranges.n] = addr;
		snapshot_ranges.size[snapshot_ranges.n++] = size;
	}
}

static void print_memory(long index, int rep, uintptr_t addr, size_t size)
{
	static const char digits[] = "0123456789abcdef";
	/* Whole lines of its own, as all the harness's static data (the digits and a NUL). */
	static char hex[2 * SNAPSHOT_BYTES + 64] __attribute__((aligned(64)));
	const unsigned char *bytes = (const unsigned char *)addr;
	size = size < SNAPSHOT_BYTES ? size : SNAPSHOT_BYTES;
	for (size_t i = 0; i < size; i++) {
		hex[2 * i] = digits[bytes[i] >> 4];
		hex[2 * i + 1] = digits[bytes[i] & 15];
	}
	hex[2 * size] = 0;
	printf("M %ld %d %#lx %s\n", index, rep, (unsigned long)addr, hex);
}

/* Whether the allocation at entry i of log slot was freed later: the setup's log (0) comes
 * before call A's (1), which comes before call B's (2). */
static int freed_later(int slot, int i)
{
	uintptr_t addr = sc_alloc_logs[slot]->entries[i].addr;
	for (int s = slot; s < 3; s++)
		for (int j = s == slot ? i + 1 : 0; j < sc_alloc_logs[s]->n; j++)
			if (sc_alloc_logs[s]->entries[j].is_free && sc_alloc_logs[s]->entries[j].addr == addr)
				return 1;
	return 0;
}

static void report_snapshot(long index, int rep)
{
	for (int i = 0; i < snapshot_ranges.n; i++)
		print_memory(index, rep, snapshot_ranges.addr[i], snapshot_ranges.size[i]);
	for (int slot = 0; slot < 3; slot++)
		for (int i = 0; i < sc_alloc_logs[slot]->n; i++) {
			const struct alloc *a = &sc_alloc_logs[slot]->entries[i];
			if (!a->is_free && a->size && !freed_later(slot, i))
				print_memory(index, rep, a->addr, a->size);
		}
}

static void run_repeat(const struct test *t, int rep)
{
	char why[SC_RESULT_LEN] = "";
	if (sc_setup(&t->state, why, sizeof why) < 0) {
		printf("X %ld %d %s\n", t->index, rep, why[0] ? why : "setup failed");
		fflush(stdout);
		return;
	}
	for (int side = 0; side < 2; side++) {
		struct participant *p = &participants[side];
		p->call = &t->calls[side];
		p->tag = (uint32_t)((t->index << SC_TAG_INDEX_SHIFT) | (rep << SC_TAG_REP_SHIFT) | side);
		set_flag(&p->go);
		wait_flag(&p->done);
	}
	report_snapshot(t->index, rep);
	report_allocations(t->index, rep);
	printf("R %ld %d %s %s\n", t->index, rep, participants[0].result.text, participants[1].result.text);
	fflush(stdout);
	sc_teardown();
	report_allocations(t->index, rep);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s BATCH\n", argv[0]);
		return 2;
	}
	FILE *in = fopen(argv[1], "r");
	if (!in) {
		perror(argv[1]);
		return 2;
	}
	int repeats = 2;
	char line[512];
	if (!fgets(line, sizeof line, in) || sscanf(line, "S repeats=%d", &repeats) != 1) {
		fprintf(stderr, "%s: no header line\n", argv[1]);
		return 2;
	}
	sc_alloc_log_start(0);
	start_participants();
	printf("READY\n");
	fflush(stdout);
	static struct test t;
	while (fgets(line, sizeof line, in)) {
		if (line[0] == 'P')
			add_snapshot_range(line);
		if (line[0] == 'W')
			sc_alloc_add_wrapper(line);
		if (line[0] != 'T')
			continue;
		memset(&t, 0, sizeof t);
		t.index = strtol(line + 2, NULL, 10);
		const char *why;
		int bad = parse_test(in, &t, &why);
		if (!bad && t.ncalls != 2)
			bad = 1, why = "a test needs exactly two calls";
		printf("B %ld\n", t.index);
		fflush(stdout); /* before the calls: a crash or hang is then blamed on this test */
		if (bad) {
			printf("X %ld -1 %s\n", t.index, why);
			fflush(stdout);
			continue;
		}
		for (int rep = 0; rep < repeats; rep++)
			run_repeat(&t, rep);
	}
	printf("DONE\n");
	fflush(stdout);
	return 0;
}
