/*
 * scalecheck adapter for libsv6 (tracer/user/scalecheck_adapter.h): builds a POSIX test's
 * setup in a fresh libsv6 world and performs the model's operations: the paper's 18 and
 * sendto, recvfrom (libsv6's sockets, ordered or unordered), fork, posix_spawn (both
 * sv6_spawn) and fstatx. exec has no libsv6 counterpart.
 *
 * The tests are written in Linux's terms (src/scalecheck/binding/linux_posix.py) and the
 * adapter keeps them: fds are installed at the numbers the setup gives (those below
 * constants.fd_base are taken by a placeholder, as a Linux process has its standard fds),
 * mappings at the addresses it gives, and one unit of file or pipe data is one page whose
 * bytes all hold the unit's byte, as libsv6's conformance check drives it. Results are in
 * the model's units.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scalecheck_adapter.h"
#include "sv6/core.h"
#include "sv6/sv6.h"

#define UNIT SV6_PAGE_SIZE
#define NPROCS 2
#define MAX_OBJECTS 64
/* An fd no test uses, below the end of the POSIX partition: a file is mapped through it. */
#define SCRATCH_FD 1000
#define KEY_LEN 32
/* Model socket i is the fd SOCKET_FD_BASE + i in both processes. */
#define SOCKET_FD_BASE 900
#define SOCKET_CAPACITY 2 /* the model's SOCK_CAPACITY */

/* Read by both calls, written only by setup and teardown: on lines of its own. */
static struct {
	struct sv6_world *world;
	struct sv6_proc *procs[NPROCS];
} __attribute__((aligned(64))) state;

/* The processes fork and posix_spawn make, one slot per call (on a line of its own),
 * destroyed at teardown, after the calls. */
static struct {
	struct sv6_proc *proc;
} __attribute__((aligned(64))) children[2];
static __thread int call_side;

static const struct {
	int code;
	const char *name;
} ERRNOS[] = {
	{EEXIST, "EEXIST"}, {ENOENT, "ENOENT"}, {EBADF, "EBADF"},   {ESPIPE, "ESPIPE"},
	{EINVAL, "EINVAL"}, {EAGAIN, "EAGAIN"}, {EACCES, "EACCES"}, {ENODEV, "ENODEV"},
	{ENOMEM, "ENOMEM"}, {EMFILE, "EMFILE"},
};

/* A negative return as the model writes it ({"errno"} or {"signal"}): 1, else 0. */
static int failed(struct sc_result *result, long ret)
{
	if (ret >= 0)
		return 0;
	if (ret == SV6_SIGSEGV || ret == SV6_SIGBUS) {
		sc_signal(result, ret == SV6_SIGSEGV ? "SIGSEGV" : "SIGBUS");
		return 1;
	}
	for (size_t i = 0; i < sizeof ERRNOS / sizeof ERRNOS[0]; i++)
		if (ERRNOS[i].code == -ret) {
			sc_error(result, ERRNOS[i].name);
			return 1;
		}
	char other[16];
	snprintf(other, sizeof other, "E%ld", -ret);
	sc_error(result, other);
	return 1;
}

static struct sv6_proc *proc_of(const struct sc_call *call)
{
	return state.procs[call->proc % NPROCS];
}

static void ok_or_error(struct sc_result *result, long ret)
{
	if (!failed(result, ret))
		sc_ok(result, ret);
}

static void stat_result(struct sc_result *result, int ret, const struct sv6_stat *st)
{
	if (failed(result, ret))
		return;
	sc_ok(result, 0);
	sc_result_field(result, "ino", (long)st->ino);
	sc_result_field(result, "nlink", (long)st->nlink);
	sc_result_field(result, "size", (long)((st->size + UNIT - 1) / UNIT));
}

/* A read of one unit: {"ret":1,"data":byte}, {"ret":0} at the end, or the error. */
static void unit_result(struct sc_result *result, long ret, const unsigned char *unit)
{
	if (failed(result, ret))
		return;
	sc_ok(result, ret > 0);
	if (ret > 0)
		sc_result_field(result, "data", unit[0]);
}

static void call_open(const struct sc_call *call, struct sc_result *result)
{
	int flags = (sc_arg_int(call, "creat") ? O_CREAT : 0) | (sc_arg_int(call, "excl") ? O_EXCL : 0) |
		    (sc_arg_int(call, "trunc") ? O_TRUNC : 0) | (sc_arg_int(call, "anyfd") ? SV6_O_ANYFD : 0);
	ok_or_error(result, sv6_open(proc_of(call), sc_arg_str(call, "pn"), flags));
}

static void call_link(const struct sc_call *call, struct sc_result *result)
{
	ok_or_error(result, sv6_link(proc_of(call), sc_arg_str(call, "old"), sc_arg_str(call, "new")));
}

static void call_unlink(const struct sc_call *call, struct sc_result *result)
{
	ok_or_error(result, sv6_unlink(proc_of(call), sc_arg_str(call, "pn")));
}

static void call_rename(const struct sc_call *call, struct sc_result *result)
{
	ok_or_error(result, sv6_rename(proc_of(call), sc_arg_str(call, "src"), sc_arg_str(call, "dst")));
}

static void call_stat(const struct sc_call *call, struct sc_result *result)
{
	struct sv6_stat st;
	stat_result(result, sv6_stat(proc_of(call), sc_arg_str(call, "pn"), &st), &st);
}

static void call_fstat(const struct sc_call *call, struct sc_result *result)
{
	struct sv6_stat st;
	stat_result(result, sv6_fstat(proc_of(call), (int)sc_arg_int(call, "fd"), &st), &st);
}

static void call_lseek(const struct sc_call *call, struct sc_result *result)
{
	/* The model's whence is SEEK_SET, SEEK_CUR, SEEK_END in that order, as POSIX numbers them. */
	off_t ret = sv6_lseek(proc_of(call), (int)sc_arg_int(call, "fd"), (off_t)sc_arg_int(call, "off") * UNIT,
			      (int)sc_arg_int(call, "whence"));
	ok_or_error(result, ret < 0 ? ret : ret / UNIT);
}

static void call_close(const struct sc_call *call, struct sc_result *result)
{
	ok_or_error(result, sv6_close(proc_of(call), (int)sc_arg_int(call, "fd")));
}

static void call_pipe(const struct sc_call *call, struct sc_result *result)
{
	int fds[2];
	if (failed(result, sv6_pipe(proc_of(call), fds)))
		return;
	const long ends[2] = {fds[0], fds[1]};
	sc_ok(result, 0);
	sc_result_list(result, "fds", ends, 2);
}

static void call_read(const struct sc_call *call, struct sc_result *result)
{
	unsigned char unit[UNIT];
	unit_result(result, sv6_read(proc_of(call), (int)sc_arg_int(call, "fd"), unit, UNIT), unit);
}

static void call_write(const struct sc_call *call, struct sc_result *result)
{
	unsigned char unit[UNIT];
	memset(unit, (int)sc_arg_int(call, "byte"), UNIT);
	ssize_t ret = sv6_write(proc_of(call), (int)sc_arg_int(call, "fd"), unit, UNIT);
	ok_or_error(result, ret < 0 ? ret : ret / UNIT);
}

static void call_pread(const struct sc_call *call, struct sc_result *result)
{
	unsigned char unit[UNIT];
	off_t off = (off_t)sc_arg_int(call, "off") * UNIT;
	unit_result(result, sv6_pread(proc_of(call), (int)sc_arg_int(call, "fd"), unit, UNIT, off), unit);
}

static void call_pwrite(const struct sc_call *call, struct sc_result *result)
{
	unsigned char unit[UNIT];
	memset(unit, (int)sc_arg_int(call, "byte"), UNIT);
	off_t off = (off_t)sc_arg_int(call, "off") * UNIT;
	ssize_t ret = sv6_pwrite(proc_of(call), (int)sc_arg_int(call, "fd"), unit, UNIT, off);
	ok_or_error(result, ret < 0 ? ret : ret / UNIT);
}

static void call_mmap(const struct sc_call *call, struct sc_result *result)
{
	int anon = (int)sc_arg_int(call, "anon"), fixed = (int)sc_arg_int(call, "fixed");
	int prot = PROT_READ | (sc_arg_int(call, "writable") ? PROT_WRITE : 0);
	int flags = (anon ? MAP_ANONYMOUS : 0) | (fixed ? MAP_FIXED : 0);
	uint64_t va = fixed ? (uint64_t)sc_arg_int(call, "va") : 0;
	off_t off = anon ? 0 : (off_t)sc_arg_int(call, "off") * UNIT;
	ok_or_error(result, sv6_mmap(proc_of(call), va, UNIT, prot, flags, anon ? -1 : (int)sc_arg_int(call, "fd"), off));
}

static void call_munmap(const struct sc_call *call, struct sc_result *result)
{
	ok_or_error(result, sv6_munmap(proc_of(call), (uint64_t)sc_arg_int(call, "va"), UNIT));
}

static void call_mprotect(const struct sc_call *call, struct sc_result *result)
{
	int prot = PROT_READ | (sc_arg_int(call, "writable") ? PROT_WRITE : 0);
	ok_or_error(result, sv6_mprotect(proc_of(call), (uint64_t)sc_arg_int(call, "va"), UNIT, prot));
}

static void call_memread(const struct sc_call *call, struct sc_result *result)
{
	unsigned char unit[UNIT];
	int ret = sv6_memread(proc_of(call), (uint64_t)sc_arg_int(call, "va"), unit, UNIT);
	if (failed(result, ret))
		return;
	sc_ok(result, 0);
	sc_result_field(result, "data", unit[0]);
}

static void call_memwrite(const struct sc_call *call, struct sc_result *result)
{
	unsigned char unit[UNIT];
	memset(unit, (int)sc_arg_int(call, "byte"), UNIT);
	ok_or_error(result, sv6_memwrite(proc_of(call), (uint64_t)sc_arg_int(call, "va"), unit, UNIT));
}

static void call_fstatx(const struct sc_call *call, struct sc_result *result)
{
	struct sv6_stat st;
	unsigned mask = SV6_STATX_INO | SV6_STATX_SIZE | (sc_arg_int(call, "nlink") ? SV6_STATX_NLINK : 0);
	int ret = sv6_fstatx(proc_of(call), (int)sc_arg_int(call, "fd"), mask, &st);
	if (failed(result, ret))
		return;
	sc_ok(result, 0);
	sc_result_field(result, "ino", (long)st.ino);
	if (mask & SV6_STATX_NLINK)
		sc_result_field(result, "nlink", (long)st.nlink);
	sc_result_field(result, "size", (long)((st.size + UNIT - 1) / UNIT));
}

static void call_sendto(const struct sc_call *call, struct sc_result *result)
{
	unsigned char byte = (unsigned char)sc_arg_int(call, "byte");
	ok_or_error(result, sv6_send(proc_of(call), SOCKET_FD_BASE + (int)sc_arg_int(call, "sock"), &byte, 1));
}

static void call_recvfrom(const struct sc_call *call, struct sc_result *result)
{
	unsigned char byte;
	ssize_t ret = sv6_recv(proc_of(call), SOCKET_FD_BASE + (int)sc_arg_int(call, "sock"), &byte, 1);
	if (failed(result, ret))
		return;
	sc_ok(result, 1);
	sc_result_field(result, "data", byte);
}

/* The child's pid: its slot, as libsv6 has no pids (tests never check it). */
static void spawned(struct sc_result *result, int ret, struct sv6_proc *child)
{
	if (failed(result, ret))
		return;
	children[call_side].proc = child;
	sc_ok(result, call_side + 1);
}

static void call_fork(const struct sc_call *call, struct sc_result *result)
{
	struct sv6_proc *child = NULL;
	int ret = sv6_spawn(proc_of(call), NULL, SV6_SPAWN_ALL, &child);
	spawned(result, ret, child);
}

/* The file action: the caller's fd becomes the child's fd 0. */
static void call_posix_spawn(const struct sc_call *call, struct sc_result *result)
{
	const struct sv6_spawn_fd action = {.parent_fd = (int)sc_arg_int(call, "fd"), .child_fd = 0};
	struct sv6_proc *child = NULL;
	int ret = sv6_spawn(proc_of(call), &action, 1, &child);
	spawned(result, ret, child);
}

const struct sc_op SC_OPS[] = {
	{"open", 5, call_open},     {"link", 2, call_link},       {"unlink", 1, call_unlink},
	{"rename", 2, call_rename}, {"stat", 1, call_stat},       {"fstat", 1, call_fstat},
	{"lseek", 3, call_lseek},   {"close", 1, call_close},     {"pipe", 0, call_pipe},
	{"read", 1, call_read},     {"write", 2, call_write},     {"pread", 2, call_pread},
	{"pwrite", 3, call_pwrite}, {"mmap", 6, call_mmap},       {"munmap", 1, call_munmap},
	{"mprotect", 2, call_mprotect}, {"memread", 1, call_memread}, {"memwrite", 2, call_memwrite},
	{"fstatx", 2, call_fstatx}, {"sendto", 2, call_sendto}, {"recvfrom", 1, call_recvfrom},
	{"fork", 0, call_fork},     {"posix_spawn", 1, call_posix_spawn},
	{0, 0, 0},
};

/* ---- setup: the test's state, built by a process of the setup's own ---- */

struct builder {
	const struct sc_state *setup;
	struct sv6_proc *proc;       /* holds every object while it is built */
	int ninodes, npipes;
	int pipe_ends[MAX_OBJECTS][2];
	char *why;
	size_t whylen;
};

static int fail(struct builder *b, const char *what, const char *where, long ret)
{
	snprintf(b->why, b->whylen, "libsv6 setup: %s %s: %ld", what, where, ret);
	return -1;
}

/* The setup's paths and names are joined by hand, not by snprintf: the setup runs twice
 * a test under the plugin, which is called at each of its memory accesses (outside the
 * calls too), and an snprintf makes some three hundred of them. */

/* first "." second into out (len bytes), cut short as snprintf would. */
static void join(char *out, size_t len, const char *first, const char *second)
{
	size_t n = strlen(first), m = strlen(second);
	if (n >= len)
		n = len - 1;
	memcpy(out, first, n);
	if (n + 1 < len)
		out[n++] = '.';
	if (n + m >= len)
		m = len - 1 - n;
	memcpy(out + n, second, m);
	out[n + m] = 0;
}

/* A non-negative number's decimal digits into out (len bytes), cut short as snprintf would. */
static void decimal(char *out, size_t len, long value)
{
	char digits[24];
	size_t n = 0;
	do
		digits[n++] = (char)('0' + value % 10);
	while ((value /= 10) && n < sizeof digits);
	size_t k = 0;
	for (; k < n && k + 1 < len; k++)
		out[k] = digits[n - 1 - k];
	out[k] = 0;
}

static void inode_name(int inode, char *name, size_t len)
{
	char number[24];
	decimal(number, sizeof number, inode);
	join(name, len, "sc.inode", number);
}

/* The integer at path "base.field" of the setup, or fallback. */
static long value_at(struct builder *b, const char *base, const char *field, long fallback)
{
	char path[96];
	join(path, sizeof path, base, field);
	return sc_state_get(b->setup, path, fallback);
}

/* Writes the units listed under `path` (one page of each unit's byte) into fd. */
static int fill_units(struct builder *b, int fd, const char *path, int positional)
{
	unsigned char unit[UNIT];
	char key[KEY_LEN];
	for (int i = 0; sc_state_key(b->setup, path, i, key, sizeof key); i++) {
		char at[96];
		join(at, sizeof at, path, key);
		memset(unit, (int)sc_state_get(b->setup, at, 0), UNIT);
		ssize_t ret = positional ? sv6_pwrite(b->proc, fd, unit, UNIT, (off_t)i * UNIT)
					 : sv6_write(b->proc, fd, unit, UNIT);
		if (ret != UNIT)
			return fail(b, "writing", at, ret);
	}
	return 0;
}

/* Each inode gets a name of the setup's own (removed at the end), so that fds and
 * mappings can open it even when no name of the test's is left. */
static int build_inodes(struct builder *b)
{
	char key[KEY_LEN], name[KEY_LEN], path[96], inode_path[64];
	for (; sc_state_key(b->setup, "inodes", b->ninodes, key, sizeof key); b->ninodes++) {
		inode_name(b->ninodes, name, sizeof name);
		int fd = sv6_open(b->proc, name, O_CREAT | O_EXCL);
		if (fd < 0)
			return fail(b, "creating", name, fd);
		join(inode_path, sizeof inode_path, "inodes", key);
		join(path, sizeof path, inode_path, "data");
		int filled = fill_units(b, fd, path, 1);
		sv6_close(b->proc, fd);
		if (filled < 0)
			return -1;
	}
	int names[MAX_OBJECTS] = {0};
	for (int i = 0; sc_state_key(b->setup, "files", i, key, sizeof key); i++) {
		long inode = value_at(b, "files", key, -1);
		if (inode < 0 || inode >= b->ninodes || inode >= MAX_OBJECTS)
			return fail(b, "file", key, inode);
		inode_name((int)inode, name, sizeof name);
		int ret = sv6_link(b->proc, name, key);
		if (ret < 0)
			return fail(b, "linking", key, ret);
		names[inode]++;
	}
	/* Links beyond the test's names get hidden names no test uses, as on Linux
	 * (docs/format-tests.md). */
	for (int i = 0; i < b->ninodes && i < MAX_OBJECTS; i++) {
		decimal(key, sizeof key, i);
		join(inode_path, sizeof inode_path, "inodes", key);
		long nlink = value_at(b, inode_path, "nlink", names[i]);
		if (nlink < names[i])
			return fail(b, "inode has fewer links than names, inode", key, nlink);
		inode_name(i, name, sizeof name);
		for (long k = names[i]; k < nlink; k++) {
			char hidden[KEY_LEN];
			snprintf(hidden, sizeof hidden, ".h%d.%ld", i, k);
			int ret = sv6_link(b->proc, name, hidden);
			if (ret < 0)
				return fail(b, "linking", hidden, ret);
		}
	}
	return 0;
}

static int build_pipes(struct builder *b)
{
	char key[KEY_LEN], path[96], pipe_path[64];
	for (; sc_state_key(b->setup, "pipes", b->npipes, key, sizeof key); b->npipes++) {
		if (b->npipes == MAX_OBJECTS)
			return fail(b, "too many", "pipes", b->npipes);
		int ret = sv6_pipe(b->proc, b->pipe_ends[b->npipes]);
		if (ret < 0)
			return fail(b, "creating", "pipe", ret);
		join(pipe_path, sizeof pipe_path, "pipes", key);
		join(path, sizeof path, pipe_path, "data");
		if (fill_units(b, b->pipe_ends[b->npipes][1], path, 0) < 0)
			return -1;
	}
	return 0;
}

/* A new open file of inode at off units, in the builder: its fd or a negative error. */
static int open_inode(struct builder *b, long inode, long off)
{
	char name[KEY_LEN];
	if (inode < 0 || inode >= b->ninodes)
		return -ENOENT;
	inode_name((int)inode, name, sizeof name);
	int fd = sv6_open(b->proc, name, 0);
	if (fd >= 0 && sv6_lseek(b->proc, fd, (off_t)off * UNIT, SEEK_SET) < 0) {
		sv6_close(b->proc, fd);
		return -EINVAL;
	}
	return fd;
}

/* Calls build on each entry under procs.<pid>.<kind> of the setup (at: the entry's path,
 * key: its last part); the first error ends it. */
static int each_entry(struct builder *b, int pid, const char *kind, struct sv6_proc *proc,
		      int (*build)(struct builder *, struct sv6_proc *, const char *at, const char *key))
{
	char key[KEY_LEN], proc_path[16], number[24], base[32];
	decimal(number, sizeof number, pid);
	join(proc_path, sizeof proc_path, "procs", number);
	join(base, sizeof base, proc_path, kind);
	for (int i = 0; sc_state_key(b->setup, base, i, key, sizeof key); i++) {
		char at[64];
		join(at, sizeof at, base, key);
		int ret = build(b, proc, at, key);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* One fd of the setup: a pipe end, or a new open file of an inode at its offset. */
static int build_fd(struct builder *b, struct sv6_proc *proc, const char *at, const char *key)
{
	int fd = (int)strtol(key, NULL, 10), ret;
	long pipe = value_at(b, at, "pipe", -1);
	if (pipe >= 0) {
		char end_path[80];
		join(end_path, sizeof end_path, at, "end");
		const char *end = sc_state_text(b->setup, end_path);
		if (pipe >= b->npipes || !end)
			return fail(b, "bad pipe fd", at, pipe);
		ret = sv6_fd_install(proc, fd, b->proc, b->pipe_ends[pipe][strcmp(end, "r") != 0]);
	} else {
		int file = open_inode(b, value_at(b, at, "file", -1), value_at(b, at, "off", 0));
		if (file < 0)
			return fail(b, "opening the file of", at, file);
		ret = sv6_fd_install(proc, fd, b->proc, file);
		sv6_close(b->proc, file);
	}
	if (ret < 0)
		return fail(b, "installing", at, ret);
	return 0;
}

/* One mapping of the setup: an anonymous page with its byte, or a page of a file. */
static int build_map(struct builder *b, struct sv6_proc *proc, const char *at, const char *key)
{
	uint64_t va = strtoull(key, NULL, 10);
	int writable = (int)value_at(b, at, "writable", 0);
	int64_t ret;
	if (value_at(b, at, "anon", 0)) {
		/* Mapped writable to write its byte, then given the setup's protection. */
		ret = sv6_mmap(proc, va, UNIT, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		unsigned char unit[UNIT];
		memset(unit, (int)value_at(b, at, "data", 0), UNIT);
		if (ret >= 0 && unit[0])
			ret = sv6_memwrite(proc, va, unit, UNIT);
		if (ret >= 0 && !writable)
			ret = sv6_mprotect(proc, va, UNIT, PROT_READ);
	} else {
		long off = value_at(b, at, "off", 0);
		int file = open_inode(b, value_at(b, at, "file", -1), 0);
		if (file < 0)
			return fail(b, "opening the file of", at, file);
		ret = sv6_fd_install(proc, SCRATCH_FD, b->proc, file);
		sv6_close(b->proc, file);
		if (ret >= 0) {
			ret = sv6_mmap(proc, va, UNIT, PROT_READ | (writable ? PROT_WRITE : 0), MAP_FIXED, SCRATCH_FD,
				       (off_t)off * UNIT);
			sv6_close(proc, SCRATCH_FD);
		}
	}
	if (ret < 0)
		return fail(b, "mapping", at, (long)ret);
	return 0;
}

/* Each model socket, in both processes at SOCKET_FD_BASE + i, with its queued messages.
 * An unordered socket's messages are sent from the calls' cores (1 and 2 in turn), as
 * processes there would have: where a message waits is the implementation's choice. */
static int build_sockets(struct builder *b)
{
	char key[KEY_LEN], path[96], socket_path[64];
	for (int i = 0; sc_state_key(b->setup, "sockets", i, key, sizeof key); i++) {
		join(socket_path, sizeof socket_path, "sockets", key);
		int unordered = (int)value_at(b, socket_path, "unordered", 0);
		int fd = sv6_socket(b->proc, unordered, 0);
		if (fd < 0 || sv6_socket_capacity(b->proc, fd, SOCKET_CAPACITY) < 0)
			return fail(b, "creating", "a socket", fd);
		join(path, sizeof path, socket_path, "data");
		char m_key[KEY_LEN];
		for (int m = 0; sc_state_key(b->setup, path, m, m_key, sizeof m_key); m++) {
			char at[128];
			join(at, sizeof at, path, m_key);
			unsigned char byte = (unsigned char)sc_state_get(b->setup, at, 0);
			sv6_core_set(unordered ? 1 + (unsigned)m % 2 : 0);
			ssize_t sent = sv6_send(b->proc, fd, &byte, 1);
			sv6_core_set(0);
			if (sent != 1)
				return fail(b, "queueing on", "a socket", (long)sent);
		}
		for (int p = 0; p < NPROCS; p++) {
			int ret = sv6_fd_install(state.procs[p], SOCKET_FD_BASE + i, b->proc, fd);
			if (ret < 0)
				return fail(b, "installing", "a socket", ret);
		}
		sv6_close(b->proc, fd);
	}
	return 0;
}

/* The fds below fd_base, taken as a Linux process's standard fds are. */
static int reserve_low_fds(struct builder *b, struct sv6_proc *proc, long fd_base, int placeholder)
{
	for (int fd = 0; fd < fd_base; fd++) {
		int ret = sv6_fd_install(proc, fd, b->proc, placeholder);
		if (ret < 0)
			return fail(b, "reserving", "a low fd", ret);
	}
	return 0;
}

int sc_setup(const struct sc_state *setup, char *why, size_t whylen)
{
	sv6_core_set(0);
	state.world = sv6_world_create(0);
	for (int p = 0; p < NPROCS; p++)
		state.procs[p] = sv6_proc_create(state.world);
	struct builder b = {.setup = setup, .proc = sv6_proc_create(state.world), .why = why, .whylen = whylen};
	int placeholder[2];
	int ret = sv6_pipe(b.proc, placeholder) < 0 ? fail(&b, "creating", "the placeholder pipe", -1) : 0;
	long fd_base = sc_state_get(setup, "constants.fd_base", 0);
	for (int p = 0; p < NPROCS && ret == 0; p++)
		ret = reserve_low_fds(&b, state.procs[p], fd_base, placeholder[0]);
	if (ret == 0)
		ret = build_inodes(&b);
	if (ret == 0)
		ret = build_pipes(&b);
	if (ret == 0)
		ret = build_sockets(&b);
	for (int p = 0; p < NPROCS && ret == 0; p++)
		ret = each_entry(&b, p, "fds", state.procs[p], build_fd);
	for (int p = 0; p < NPROCS && ret == 0; p++)
		ret = each_entry(&b, p, "maps", state.procs[p], build_map);
	for (int i = 0; i < b.ninodes; i++) {
		char name[KEY_LEN];
		inode_name(i, name, sizeof name);
		sv6_unlink(b.proc, name);
	}
	sv6_proc_destroy(b.proc);
	/* Settles the references setup took (three epochs: see refcache.h), so that the calls
	 * start from a quiet world, as a process finds a kernel's state built long before. */
	for (int tick = 0; tick < 3; tick++)
		sv6_world_tick(state.world);
	if (ret < 0)
		sc_teardown();
	return ret;
}

void sc_teardown(void)
{
	for (int side = 0; side < 2; side++) {
		if (children[side].proc)
			sv6_proc_destroy(children[side].proc);
		children[side].proc = NULL;
	}
	for (int p = 0; p < NPROCS; p++)
		sv6_proc_destroy(state.procs[p]);
	sv6_world_destroy(state.world);
	state.world = NULL;
}

void sc_thread_init(int side)
{
	/* Core 0 is the setup's (the harness's main thread). */
	sv6_core_set((unsigned)side + 1);
	call_side = side;
}
