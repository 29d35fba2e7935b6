/* The wire format's C side (tracer/include/scalecheck_wire.h), linked by the guest driver
 * and the user-space harness: the batch's settings, the loop over its tests and repeats,
 * the parsing of each test's envelope and call lines, and every report line. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../include/scalecheck_abi.h"
#include "../include/scalecheck_wire.h"

/* Line-aligned, as all the harness's static data: never on a line of a traced library's. */
static struct {
	void (*write)(const char *s, size_t n);
	void (*flush)(void);
} __attribute__((aligned(64))) output;

void sc_wire_output(void (*write)(const char *s, size_t n), void (*flush)(void))
{
	output.write = write;
	output.flush = flush;
}

static void report(int flush, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void report(int flush, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	output.write(line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
	if (flush && output.flush)
		output.flush();
}

/* ---- reading the batch ---- */

/* Memory for a batch's text that a fork does not copy: it is most of the guest driver's
 * memory (hundreds of KB for a full batch), and each fork would copy its page table
 * entries and each test process's exit drop them again. */
static char *text_pages(size_t size)
{
	char *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED || madvise(buf, size, MADV_DONTFORK) < 0)
		return NULL;
	return buf;
}

char *sc_wire_read_batch(const char *path)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	char *buf = text_pages(st.st_size + 1);
	if (!buf) {
		close(fd);
		return NULL;
	}
	ssize_t got = 0, n;
	while (got < st.st_size && (n = read(fd, buf + got, st.st_size - got)) > 0)
		got += n;
	buf[got] = 0;
	close(fd);
	return buf;
}

static int tokenize(char *line, char **tok, int max)
{
	int n = 0;
	for (char *p = strtok(line, " \t"); p && n < max; p = strtok(NULL, " \t"))
		tok[n++] = p;
	return n;
}

int sc_wire_read_settings(char **cursor, struct sc_wire_settings *s)
{
	char *line = strsep(cursor, "\n"), *tok[SC_WIRE_MAX_TOKENS];
	int n = line ? tokenize(line, tok, SC_WIRE_MAX_TOKENS) : 0;
	if (n == 0 || strcmp(tok[0], SC_WIRE_SETTINGS))
		return -1;
	for (int i = 1; i < n; i++) {
		if (!strncmp(tok[i], "repeats=", 8))
			s->repeats = atoi(tok[i] + 8);
		else if (!strncmp(tok[i], "timeout_ms=", 11))
			s->timeout_ms = atoi(tok[i] + 11);
		else if (!strncmp(tok[i], "fs=", 3))
			snprintf(s->fs, sizeof s->fs, "%s", tok[i] + 3);
		else if (!strncmp(tok[i], "warmup=", 7))
			s->warmup = atoi(tok[i] + 7);
		else if (!strcmp(tok[i], "facts=1"))
			s->dump_facts = 1;
		else if (!strcmp(tok[i], "state_check=1"))
			s->state_check = 1;
		else if (!strcmp(tok[i], "state_leak=1"))
			s->state_leak = 1;
	}
	return 0;
}

const void *sc_wire_find(const void *table, size_t entry_size, const char *name)
{
	for (const char *entry = table; *(const char *const *)entry; entry += entry_size)
		if (!strcmp(*(const char *const *)entry, name))
			return entry;
	return NULL;
}

/* "C side proc op name=value...": tok[0] is the C. */
static int parse_call(char **tok, int n, struct sc_wire_call *c, const char **why)
{
	if (n < 4) {
		*why = "malformed call";
		return -1;
	}
	*c = (struct sc_wire_call){.side = atoi(tok[1]), .proc = atoi(tok[2]), .op = tok[3]};
	for (int i = 4; i < n; i++) {
		char *eq = strchr(tok[i], '=');
		if (c->nargs == SC_WIRE_MAX_ARGS || !eq) {
			*why = "malformed or too many arguments";
			return -1;
		}
		*eq = 0;
		c->names[c->nargs] = tok[i];
		c->values[c->nargs++] = eq + 1;
	}
	return 0;
}

/* One line of a test: a call, or a setup line for the driver. */
static void test_line(char **tok, int n, const struct sc_wire_driver *d, const char **why)
{
	if (strcmp(tok[0], SC_WIRE_CALL)) {
		d->setup_line(d->test, tok, n, why);
		return;
	}
	struct sc_wire_call call;
	if (parse_call(tok, n, &call, why) == 0)
		d->call(d->test, &call, why);
}

/* Reads one test's lines after its T line, up to E; returns 0, or -1 with *why set. The
 * first problem is the one reported; the rest of the test is skipped. */
static int read_test(char **cursor, long index, const struct sc_wire_driver *d, const char **why)
{
	d->begin(d->test, index);
	*why = NULL;
	char *line;
	while ((line = strsep(cursor, "\n"))) {
		char *tok[SC_WIRE_MAX_TOKENS];
		int n = tokenize(line, tok, SC_WIRE_MAX_TOKENS);
		if (n == 0)
			continue;
		if (!strcmp(tok[0], SC_WIRE_END)) {
			if (!*why && d->ncalls(d->test) != 2)
				*why = "a test needs exactly two calls";
			return *why ? -1 : 0;
		}
		if (!*why)
			test_line(tok, n, d, why);
	}
	*why = "batch ended inside a test";
	return -1;
}

/* One pass over the tests: the warm-up's first `limit` tests, or all of them (limit < 0). */
static void run_pass(char *cursor, int limit, const struct sc_wire_settings *s, const struct sc_wire_driver *d)
{
	int seen = 0;
	char *line;
	while ((line = strsep(&cursor, "\n"))) {
		char *tok[SC_WIRE_MAX_TOKENS];
		int n = tokenize(line, tok, SC_WIRE_MAX_TOKENS);
		if (n == 0)
			continue;
		if (strcmp(tok[0], SC_WIRE_TEST)) {
			if (d->batch_line && limit < 0)
				d->batch_line(tok, n);
			continue;
		}
		if (limit >= 0 && seen++ >= limit)
			break;
		long index = n > 1 ? strtol(tok[1], NULL, 10) : -1;
		const char *why;
		int bad = read_test(&cursor, index, d, &why);
		/* Announced before it runs, so that a crash or hang is blamed on this test. */
		report(1, "%s %ld\n", limit >= 0 ? SC_WIRE_WARMUP : SC_WIRE_BEGIN, index);
		if (limit >= 0) {
			if (!bad)
				d->repeat(d->test, SC_WARMUP_REP);
			continue;
		}
		if (bad)
			sc_wire_setup_failed(index, -1, why);
		for (int rep = 0; !bad && rep < s->repeats; rep++)
			d->repeat(d->test, rep);
	}
}

void sc_wire_run_tests(const char *path, char *tests, const struct sc_wire_settings *s,
		       const struct sc_wire_driver *d)
{
	if (s->warmup > 0) {
		/* Parsing cuts the text: the warm-up parses a copy of its own. */
		char *copy = sc_wire_read_batch(path);
		if (!copy) {
			sc_wire_fail("read the batch again for the warm-up", strerror(errno));
			return;
		}
		strsep(&copy, "\n");
		run_pass(copy, s->warmup, s, d);
	}
	run_pass(tests, -1, s, d);
}

/* ---- reports ---- */

void sc_wire_waiting(void)
{
	report(1, "%s\n", SC_WIRE_WAITING);
}

void sc_wire_ready(int cpus)
{
	report(1, "%s %d\n", SC_WIRE_READY, cpus);
}

void sc_wire_results(long index, int rep, const char *a, const char *b)
{
	report(1, "%s %ld %d %s %s\n", SC_WIRE_RESULTS, index, rep, a, b);
}

void sc_wire_setup_failed(long index, int rep, const char *why)
{
	report(1, "%s %ld %d %s\n", SC_WIRE_SETUP_FAILED, index, rep, why);
}

void sc_wire_hung(long index, int rep, int side)
{
	report(1, "%s %ld %d call %c did not return\n", SC_WIRE_HUNG, index, rep, "AB"[side]);
}

void sc_wire_allocations(long index, int rep, const struct sc_wire_block *blocks, int n)
{
	report(0, "%s %ld %d %d\n", SC_WIRE_ALLOCATION, index, rep, n);
	output.write((const char *)blocks, (size_t)n * sizeof *blocks);
}

void sc_wire_memory(long index, int rep, const struct sc_wire_range *ranges, int n, int file, long offset)
{
	report(0, "%s %ld %d %d %d %ld\n", SC_WIRE_MEMORY, index, rep, n, file, offset);
	output.write((const char *)ranges, (size_t)n * sizeof *ranges);
}

void sc_wire_fail(const char *what, const char *reason)
{
	report(1, "%s %s: %s\n", SC_WIRE_FAIL, what, reason);
}

void sc_wire_done(long ms)
{
	report(1, "%s %ld\n", SC_WIRE_DONE, ms);
}

void sc_wire_release(const char *release)
{
	report(1, "%s %s\n", SC_WIRE_RELEASE, release);
}

void sc_wire_kallsyms(int fd)
{
	char chunk[4096];
	ssize_t n;
	report(0, "%s\n", SC_WIRE_KALLSYMS);
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		output.write(chunk, (size_t)n);
	report(1, "%s\n", SC_WIRE_KALLSYMS_END);
}

void sc_wire_percpu_offset(int cpu, unsigned long offset)
{
	report(1, "%s %d %lx\n", SC_WIRE_PERCPU_OFFSET, cpu, offset);
}
