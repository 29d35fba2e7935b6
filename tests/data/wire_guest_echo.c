/* A fake guest driver for the wire format's round-trip test (tests/test_wire.py): the guest
 * driver's own test reader (tracer/guest/parse.c) and the wire module (tracer/common/wire.c),
 * with each repeat of each test printed as the driver holds it instead of run, then one
 * report of each kind the guest alone writes. Runs on the host: no VM, no kernel state. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../tracer/guest/driver.h"

struct sc_wire_settings settings = {.repeats = 2, .timeout_ms = 5000, .fs = "tmpfs"};

static void fake_op(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	(void)p, (void)c, (void)res, (void)len;
}

/* Every op is known but "nosuch". */
op_fn *find_op(const char *name)
{
	return strcmp(name, "nosuch") ? fake_op : NULL;
}

static void print_bytes(const char *what, int n, const unsigned char *data)
{
	printf("%s %d", what, n);
	for (int i = 0; i < n; i++)
		printf(" %d", data[i]);
	printf("\n");
}

static void print_setup(const struct test *t)
{
	for (int i = 0; i < t->nnames; i++)
		printf("file %s %d\n", t->names[i], t->name_inode[i]);
	for (int i = 0; i < t->ninodes; i++) {
		printf("nlink %d\n", t->inodes[i].nlink);
		print_bytes("inode", t->inodes[i].nunits, t->inodes[i].data);
	}
	for (int i = 0; i < t->npipes; i++)
		print_bytes("pipe", t->pipes[i].nbytes, t->pipes[i].data);
	for (int i = 0; i < t->nfds; i++) {
		const struct fd_spec *f = &t->fds[i];
		printf("fd %d %d %d %d %d %d %d %d\n", f->proc, f->fd, f->is_pipe, f->inode, f->off, f->pipe,
		       f->write_end, f->cloexec);
	}
	for (int i = 0; i < t->nmaps; i++) {
		const struct map_spec *m = &t->maps[i];
		printf("map %d %#lx %d %d %d %d %d\n", m->proc, m->va, m->anon, m->writable, m->data, m->inode,
		       m->off);
	}
	for (int i = 0; i < t->nsocks; i++)
		print_bytes("socket", t->socks[i].nmsgs, t->socks[i].data);
}

void run_repeat(const struct test *t, int rep, const struct sc_wire_settings *s)
{
	(void)s;
	printf("repeat %ld %d\n", t->index, rep);
	print_setup(t);
	for (int side = 0; side < 2; side++) {
		printf("call %d", t->calls[side].proc);
		for (int i = 0; i < t->calls[side].ntok; i++)
			printf(" %s", t->calls[side].tok[i]);
		printf("\n");
	}
}

static void write_stdout(const char *s, size_t n)
{
	fwrite(s, 1, n, stdout);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	sc_wire_output(write_stdout, NULL);
	char *tests = sc_wire_read_batch(argv[1]);
	if (!tests || sc_wire_read_settings(&tests, &settings) < 0)
		return 2;
	printf("settings %d %d %d %d %d %d %s\n", settings.repeats, settings.timeout_ms, settings.warmup,
	       settings.dump_facts, settings.state_check, settings.state_leak, settings.fs);
	sc_wire_ready(3);
	run_batch(argv[1], tests);
	sc_wire_hung(7, 1, 1);
	sc_wire_fail("mount /t", "No such device");
	/* The probe boot's facts: the kallsyms block is this program's own batch. */
	sc_wire_release("6.1.0-56-amd64");
	int fd = open(argv[1], O_RDONLY);
	sc_wire_kallsyms(fd);
	close(fd);
	sc_wire_percpu_offset(1, 0xffff88801f200000UL);
	sc_wire_done(42);
	return 0;
}
