/* A test's setup and call lines as the guest driver holds them (the wire format,
 * tracer/include/scalecheck_wire.h, rendered by src/scalecheck/run/linux/guest_render.py);
 * the wire module (tracer/common/wire.c) reads the batch around them and runs the loop. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

static int parse_units(char **tok, int n, int first, int count, unsigned char *data)
{
	if (count > SC_MAX_UNITS || n != first + count)
		return -1;
	for (int i = 0; i < count; i++)
		data[i] = atoi(tok[first + i]);
	return 0;
}

static void parse_inode(struct test *t, char **tok, int n, const char **why)
{
	struct inode_spec *in = &t->inodes[t->ninodes++];
	in->nlink = atoi(tok[2]);
	in->nunits = atoi(tok[3]);
	if (parse_units(tok, n, 4, in->nunits, in->data) < 0)
		*why = "inode data too large for the driver";
}

static void parse_pipe(struct test *t, char **tok, int n, const char **why)
{
	struct pipe_spec *p = &t->pipes[t->npipes++];
	p->nbytes = atoi(tok[2]);
	if (parse_units(tok, n, 3, p->nbytes, p->data) < 0)
		*why = "pipe data too large for the driver";
}

static void parse_fd(struct test *t, char **tok, int n, const char **why)
{
	struct fd_spec *f = &t->fds[t->nfds++];
	f->proc = atoi(tok[1]);
	f->fd = atoi(tok[2]);
	f->is_pipe = strcmp(tok[3], "pipe") == 0;
	if (f->is_pipe) {
		f->pipe = atoi(tok[4]);
		f->write_end = tok[5][0] == 'w';
	} else {
		f->inode = atoi(tok[4]);
		f->off = atoi(tok[5]);
	}
	f->cloexec = n == 7 && !strcmp(tok[6], "cloexec");
	if (n > 7 || (n == 7 && !f->cloexec))
		*why = "malformed fd";
}

static void parse_mapping(struct test *t, char **tok, int n, const char **why)
{
	struct map_spec *m = &t->maps[t->nmaps++];
	m->proc = atoi(tok[1]);
	m->va = strtoul(tok[2], NULL, 0);
	m->anon = strcmp(tok[3], "anon") == 0;
	m->writable = atoi(tok[4]);
	if (m->anon) {
		m->data = atoi(tok[5]);
	} else if (n == 7) {
		m->inode = atoi(tok[5]);
		m->off = atoi(tok[6]);
	} else {
		*why = "malformed file mapping";
	}
}

static void parse_socket(struct test *t, char **tok, int n, const char **why)
{
	struct sock_spec *q = &t->socks[t->nsocks++];
	q->nmsgs = atoi(tok[2]);
	if (q->nmsgs > SC_SOCK_CAPACITY || n != 3 + q->nmsgs)
		*why = "socket queue beyond its capacity";
	for (int i = 0; i < q->nmsgs && !*why; i++)
		q->data[i] = atoi(tok[3 + i]);
}

static int is(const char *kind, const char *keyword)
{
	return !strcmp(kind, keyword);
}

/* One setup line of the test (scalecheck_wire.h); the wire module reads the rest. */
static int setup_line(void *test, char **tok, int n, const char **why)
{
	struct test *t = test;
	/* The driver reads a line's first MAX_TOKENS + 4 tokens: longer data fails its count. */
	n = n < MAX_TOKENS + 4 ? n : MAX_TOKENS + 4;
	if (is(tok[0], SC_WIRE_FILE) && n == 3 && t->nnames < SC_MAX_NAMES) {
		snprintf(t->names[t->nnames], TOKEN_LEN, "%s", tok[1]);
		t->name_inode[t->nnames++] = atoi(tok[2]);
	} else if (is(tok[0], SC_WIRE_INODE) && n >= 4 && t->ninodes < SC_MAX_INODES) {
		parse_inode(t, tok, n, why);
	} else if (is(tok[0], SC_WIRE_PIPE) && n >= 3 && t->npipes < SC_MAX_PIPES) {
		parse_pipe(t, tok, n, why);
	} else if (is(tok[0], SC_WIRE_FD) && n >= 6 && t->nfds < SC_MAX_FDS) {
		parse_fd(t, tok, n, why);
	} else if (is(tok[0], SC_WIRE_MAPPING) && n >= 6 && t->nmaps < SC_MAX_MAPS) {
		parse_mapping(t, tok, n, why);
	} else if (is(tok[0], SC_WIRE_SOCKET) && n >= 3 && t->nsocks < SC_MAX_SOCKETS) {
		parse_socket(t, tok, n, why);
	} else {
		*why = "setup exceeds the driver's limits or is malformed";
	}
	return *why ? -1 : 0;
}

static int call_line(void *test, const struct sc_wire_call *call, const char **why)
{
	struct test *t = test;
	if (t->ncalls == 2) {
		*why = "setup exceeds the driver's limits or is malformed";
		return -1;
	}
	struct call_spec *c = &t->calls[t->ncalls++];
	c->proc = call->proc;
	c->run = find_op(call->op);
	c->ntok = call->nargs;
	for (int i = 0; i < c->ntok && i < MAX_TOKENS; i++)
		snprintf(c->tok[i], TOKEN_LEN, "%s", call->values[i]);
	if (!c->run)
		*why = "unknown op";
	return *why ? -1 : 0;
}

static void begin(void *test, long index)
{
	struct test *t = test;
	memset(t, 0, sizeof *t);
	t->index = index;
}

static int ncalls(const void *test)
{
	return ((const struct test *)test)->ncalls;
}

static void repeat(const void *test, int rep)
{
	run_repeat(test, rep, &settings);
}

void run_batch(const char *path, char *tests)
{
	static struct test t;
	struct sc_wire_driver driver = {
		.test = &t,
		.begin = begin,
		.setup_line = setup_line,
		.call = call_line,
		.ncalls = ncalls,
		.repeat = repeat,
	};
	sc_wire_run_tests(path, tests, &settings, &driver);
}
