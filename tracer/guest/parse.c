/* The batch's line-based rendering of tests (written by src/scalecheck/run/linux/guest_render.py,
 * described in docs/tracer.md): one letter per line kind, one token per value. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

int tokenize(char *line, char **tok, int max)
{
	int n = 0;
	for (char *p = strtok(line, " \t"); p && n < max; p = strtok(NULL, " \t"))
		tok[n++] = p;
	return n;
}

/* Header line: "S key=value ..." */
void parse_settings(char *line, struct settings *s)
{
	char *tok[16];
	int n = tokenize(line, tok, 16);
	for (int i = 1; i < n; i++) {
		if (!strncmp(tok[i], "repeats=", 8))
			s->repeats = atoi(tok[i] + 8);
		else if (!strncmp(tok[i], "timeout_ms=", 11))
			s->timeout_ms = atoi(tok[i] + 11);
		else if (!strncmp(tok[i], "fs=", 3))
			s->fs_type = strdup(tok[i] + 3);
		else if (!strncmp(tok[i], "warmup=", 7))
			s->warmup = atoi(tok[i] + 7);
		else if (!strcmp(tok[i], "facts=1"))
			s->dump_facts = 1;
	}
}

static int parse_units(char **tok, int n, int first, int count, unsigned char *data)
{
	if (count > SC_MAX_UNITS || n != first + count)
		return -1;
	for (int i = 0; i < count; i++)
		data[i] = atoi(tok[first + i]);
	return 0;
}

/* Parses one test (lines after "T" up to "E"); returns 0, or -1 with *why set. */
int parse_test(char **cursor, struct test *t, const char **why)
{
	memset(t, 0, sizeof *t);
	*why = NULL;
	char *line;
	while ((line = strsep(cursor, "\n"))) {
		char *tok[MAX_TOKENS + 4];
		int n = tokenize(line, tok, MAX_TOKENS + 4);
		if (n == 0)
			continue;
		char kind = tok[0][0];
		if (kind == 'E')
			return *why ? -1 : 0;
		if (*why)
			continue;
		if (kind == 'F' && n == 3 && t->nnames < SC_MAX_NAMES) {
			snprintf(t->names[t->nnames], TOKEN_LEN, "%s", tok[1]);
			t->name_inode[t->nnames++] = atoi(tok[2]);
		} else if (kind == 'I' && n >= 4 && t->ninodes < SC_MAX_INODES) {
			struct inode_spec *in = &t->inodes[t->ninodes++];
			in->nlink = atoi(tok[2]);
			in->nunits = atoi(tok[3]);
			if (parse_units(tok, n, 4, in->nunits, in->data) < 0)
				*why = "inode data too large for the driver";
		} else if (kind == 'P' && n >= 3 && t->npipes < SC_MAX_PIPES) {
			struct pipe_spec *p = &t->pipes[t->npipes++];
			p->nbytes = atoi(tok[2]);
			if (parse_units(tok, n, 3, p->nbytes, p->data) < 0)
				*why = "pipe data too large for the driver";
		} else if (kind == 'D' && n >= 6 && t->nfds < SC_MAX_FDS) {
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
		} else if (kind == 'M' && n >= 6 && t->nmaps < SC_MAX_MAPS) {
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
		} else if (kind == 'Q' && n >= 3 && t->nsocks < SC_MAX_SOCKETS) {
			struct sock_spec *q = &t->socks[t->nsocks++];
			q->nmsgs = atoi(tok[2]);
			if (q->nmsgs > SC_SOCK_CAPACITY || n != 3 + q->nmsgs)
				*why = "socket queue beyond its capacity";
			for (int i = 0; i < q->nmsgs && !*why; i++)
				q->data[i] = atoi(tok[3 + i]);
		} else if (kind == 'C' && n >= 4 && t->ncalls < 2) {
			struct call_spec *c = &t->calls[t->ncalls++];
			c->proc = atoi(tok[2]);
			c->run = find_op(tok[3]);
			if (!c->run)
				*why = "unknown op";
			c->ntok = n - 4;
			for (int i = 0; i < c->ntok && i < MAX_TOKENS; i++)
				snprintf(c->tok[i], TOKEN_LEN, "%s", tok[4 + i]);
		} else {
			*why = "setup exceeds the driver's limits or is malformed";
		}
	}
	*why = "batch ended inside a test";
	return -1;
}
