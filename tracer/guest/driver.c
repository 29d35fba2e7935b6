/*
 * scalecheck guest driver: runs as the initramfs's init (PID 1) inside the traced VM.
 *
 * Reads /batch.txt (written by the host runner: a line-based rendering of tests.jsonl,
 * see docs/tracer.md), and for every test and repeat: builds the setup state on a fresh
 * tmpfs (or ramfs) directory, forks the model's two processes, runs call A on CPU 1 and
 * then call B on CPU 2 between marker instructions, and reports both results. The QEMU
 * plugin records the kernel's memory accesses between the markers; the host joins the two
 * streams by the tag encoded before each start marker.
 *
 * Output goes to QEMU's debug console (I/O port 0xe9): plain text lines, no tty layer.
 */
#define _GNU_SOURCE
#define ANYFD_BASE 64 /* anyfd opens land at or above this fd (docs/tracer.md) */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/mempolicy.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNIT 4096
#define MAX_NAMES 16
#define MAX_INODES 16
#define MAX_UNITS 16
#define MAX_PIPES 8
#define MAX_FDS 32
#define MAX_MAPS 16
#define MAX_TOKENS 10
#define TOKEN_LEN 48
#define RESULT_LEN 160
/* Repeats alternate between two directories (see run_repeat). */
static const char *const TEST_DIRS[2] = {"/t/w0", "/t/w1"};
/* Where fds are parked while a process's fd table is being rebuilt. */
#define PARK_FD 600
#define PIPE_FD_BASE 800
#define DEVNULL_FD 991
#define DEBUGCON_PORT 0xe9
#define PREFAULTED_STACK (32 * 1024)

/* Marker instructions: nopl MAGIC(%rax); the plugin knows these magics. */
#define MARK(magic) __asm__ volatile(".byte 0x0f,0x1f,0x80\n\t.long " #magic ::: "memory")
#define MARK_START() MARK(0x5c5c0001)
#define MARK_END() MARK(0x5c5c0002)

struct inode_spec { int nlink, nunits; unsigned char data[MAX_UNITS]; };
struct pipe_spec { int nbytes; unsigned char data[MAX_UNITS]; };
struct fd_spec { int proc, fd, is_pipe, inode, off, pipe, write_end; };
struct map_spec { int proc, anon, writable, data, inode, off; unsigned long va; };
struct call_spec { int proc, ntok; char op[16]; char tok[MAX_TOKENS][TOKEN_LEN]; };

struct test {
	long index;
	int nnames, ninodes, npipes, nfds, nmaps, ncalls;
	char names[MAX_NAMES][TOKEN_LEN];
	int name_inode[MAX_NAMES];
	struct inode_spec inodes[MAX_INODES];
	struct pipe_spec pipes[MAX_PIPES];
	struct fd_spec fds[MAX_FDS];
	struct map_spec maps[MAX_MAPS];
	struct call_spec calls[2];
};

/* Shared between the coordinator and the test processes (MAP_SHARED): futex words and
 * results. Executors only touch it outside their marked regions. */
struct control {
	int ready, go[2], done[2], finish;
	char setup_error[RESULT_LEN];
	char result[2][RESULT_LEN];
};

static struct control *ctl;
static int repeats = 2, timeout_ms = 5000;
static const char *fs_type = "tmpfs";
static int pipe_ends[MAX_PIPES][2];

/* ---- output ---- */

static void out_bytes(const char *s, size_t n)
{
	outsb(DEBUGCON_PORT, s, n);
}

static void out(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	out_bytes(line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
}

static void fatal(const char *what)
{
	out("F %s: %s\n", what, strerror(errno));
	reboot(RB_POWER_OFF);
	_exit(1);
}

/* ---- futex hand-offs: sleeping, not spinning (spinning vCPUs starve a small host) ---- */

static void futex_wake(int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}

static void set_and_wake(int *word, int value)
{
	__atomic_store_n(word, value, __ATOMIC_SEQ_CST);
	futex_wake(word);
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* Waits until *word >= target; returns 0, or -1 after timeout_ms (0 = forever). */
static int wait_at_least(int *word, int target, int limit_ms)
{
	long deadline = now_ms() + limit_ms;
	for (;;) {
		int seen = __atomic_load_n(word, __ATOMIC_SEQ_CST);
		if (seen >= target)
			return 0;
		struct timespec ts = {0, 200 * 1000 * 1000}, *tsp = NULL;
		if (limit_ms) {
			long left = deadline - now_ms();
			if (left <= 0)
				return -1;
			ts.tv_sec = left / 1000;
			ts.tv_nsec = (left % 1000) * 1000000L;
			tsp = &ts;
		}
		syscall(SYS_futex, word, FUTEX_WAIT, seen, tsp, NULL, 0);
	}
}

/* ---- batch parsing ---- */

static char *batch;

static int tokenize(char *line, char **tok, int max)
{
	int n = 0;
	for (char *p = strtok(line, " \t"); p && n < max; p = strtok(NULL, " \t"))
		tok[n++] = p;
	return n;
}

/* Parses one test (lines after "T" up to "E"); returns 0, or -1 with *why set. */
static int parse_test(char **cursor, struct test *t, const char **why)
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
		if (kind == 'F' && n == 3 && t->nnames < MAX_NAMES) {
			snprintf(t->names[t->nnames], TOKEN_LEN, "%s", tok[1]);
			t->name_inode[t->nnames++] = atoi(tok[2]);
		} else if (kind == 'I' && n >= 4 && t->ninodes < MAX_INODES) {
			struct inode_spec *in = &t->inodes[t->ninodes++];
			in->nlink = atoi(tok[2]);
			in->nunits = atoi(tok[3]);
			if (in->nunits > MAX_UNITS || n != 4 + in->nunits) {
				*why = "inode data too large for the driver";
				continue;
			}
			for (int i = 0; i < in->nunits; i++)
				in->data[i] = atoi(tok[4 + i]);
		} else if (kind == 'P' && n >= 3 && t->npipes < MAX_PIPES) {
			struct pipe_spec *p = &t->pipes[t->npipes++];
			p->nbytes = atoi(tok[2]);
			if (p->nbytes > MAX_UNITS || n != 3 + p->nbytes) {
				*why = "pipe data too large for the driver";
				continue;
			}
			for (int i = 0; i < p->nbytes; i++)
				p->data[i] = atoi(tok[3 + i]);
		} else if (kind == 'D' && n >= 6 && t->nfds < MAX_FDS) {
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
		} else if (kind == 'M' && n >= 6 && t->nmaps < MAX_MAPS) {
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
		} else if (kind == 'C' && n >= 4 && t->ncalls < 2) {
			struct call_spec *c = &t->calls[t->ncalls++];
			c->proc = atoi(tok[2]);
			snprintf(c->op, sizeof c->op, "%s", tok[3]);
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

/* ---- setup state ---- */

/* A path by which an inode can be opened while the test is being set up. */
static void inode_path(const struct test *t, int inode, char *path, size_t len)
{
	for (int i = 0; i < t->nnames; i++) {
		if (t->name_inode[i] == inode) {
			snprintf(path, len, "%s", t->names[i]);
			return;
		}
	}
	if (t->inodes[inode].nlink > 0)
		snprintf(path, len, ".h%d.0", inode);
	else
		snprintf(path, len, ".n%d", inode);
}

static void clean_test_dir(void)
{
	DIR *d = opendir(".");
	if (!d)
		fatal("opendir");
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlink(e->d_name);
	closedir(d);
}

static int write_units(int fd, const unsigned char *data, int n)
{
	static char page[UNIT];
	for (int i = 0; i < n; i++) {
		memset(page, data[i], UNIT);
		if (write(fd, page, UNIT) != UNIT)
			return -1;
	}
	return 0;
}

/* Builds the shared file-system and pipe state (done by the coordinator). */
/* Fixed old times every inode of the setup ends up with: calls see them as stale
 * whatever the clock did during the setup. */
static const struct timespec SETUP_TIMES[2] = {{1000000000, 0}, {1000000000, 0}};

/* Leaves the inode dirty and stamped with SETUP_TIMES. Whether the setup's own writes
 * dirtied it depends on a clock tick falling between them (tmpfs data writes do not
 * dirty the inode, timestamp updates do), and a call that finds its inode clean takes
 * the writeback list's lock. A read after stamping old times always updates the atime,
 * which dirties the inode; stamping again then restores the old atime. */
static int stamp_inode(const char *path)
{
	char byte;
	if (utimensat(AT_FDCWD, path, SETUP_TIMES, 0) < 0)
		return -1;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t got = read(fd, &byte, 1);
	close(fd);
	return got < 0 ? -1 : utimensat(AT_FDCWD, path, SETUP_TIMES, 0);
}

static int build_files_and_pipes(const struct test *t, char *why, size_t whylen)
{
	for (int i = 0; i < t->ninodes; i++) {
		const struct inode_spec *in = &t->inodes[i];
		char first[TOKEN_LEN];
		inode_path(t, i, first, sizeof first);
		int fd = open(first, O_RDWR | O_CREAT | O_EXCL, 0666);
		if (fd < 0 || write_units(fd, in->data, in->nunits) < 0) {
			snprintf(why, whylen, "create inode %d as %s: %s", i, first, strerror(errno));
			return -1;
		}
		close(fd);
		int links = 1;
		for (int k = 0; k < t->nnames; k++) {
			if (t->name_inode[k] != i || strcmp(t->names[k], first) == 0)
				continue;
			if (link(first, t->names[k]) < 0) {
				snprintf(why, whylen, "link %s: %s", t->names[k], strerror(errno));
				return -1;
			}
			links++;
		}
		/* Links the model counts but no test names: hidden names nobody touches. */
		for (int k = (strncmp(first, ".h", 2) == 0); links < in->nlink; k++, links++) {
			char hidden[TOKEN_LEN];
			snprintf(hidden, sizeof hidden, ".h%d.%d", i, k);
			if (link(first, hidden) < 0) {
				snprintf(why, whylen, "link %s: %s", hidden, strerror(errno));
				return -1;
			}
		}
		if (stamp_inode(first) < 0) {
			snprintf(why, whylen, "set times of %s: %s", first, strerror(errno));
			return -1;
		}
	}
	for (int p = 0; p < t->npipes; p++) {
		int ends[2];
		if (pipe2(ends, O_NONBLOCK) < 0) {
			snprintf(why, whylen, "pipe: %s", strerror(errno));
			return -1;
		}
		for (int e = 0; e < 2; e++) {
			pipe_ends[p][e] = fcntl(ends[e], F_DUPFD, PIPE_FD_BASE);
			close(ends[e]);
		}
		if (t->pipes[p].nbytes && write(pipe_ends[p][1], t->pipes[p].data, t->pipes[p].nbytes) != t->pipes[p].nbytes) {
			snprintf(why, whylen, "fill pipe: %s", strerror(errno));
			return -1;
		}
		if (futimens(pipe_ends[p][0], SETUP_TIMES) < 0) {
			snprintf(why, whylen, "set times of a pipe: %s", strerror(errno));
			return -1;
		}
	}
	return 0;
}

static void close_pipes(const struct test *t)
{
	for (int p = 0; p < t->npipes; p++)
		for (int e = 0; e < 2; e++)
			close(pipe_ends[p][e]);
}

/* In a test process: rebuilds its fd table and mappings exactly as the model says. */
static int build_process(const struct test *t, int proc, char *why, size_t whylen)
{
	int parked = 0, targets[MAX_FDS];
	char path[TOKEN_LEN];
	for (int i = 0; i < t->nmaps; i++) {
		const struct map_spec *m = &t->maps[i];
		if (m->proc != proc)
			continue;
		int prot = PROT_READ | (m->writable ? PROT_WRITE : 0);
		void *got;
		if (m->anon) {
			/* Filled (so populated) while writable, then given its final protection. */
			got = mmap((void *)m->va, UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			if (got != MAP_FAILED) {
				memset(got, m->data, UNIT);
				if (!m->writable)
					mprotect(got, UNIT, prot);
			}
		} else {
			inode_path(t, m->inode, path, sizeof path);
			int fd = open(path, O_RDWR);
			got = fd < 0 ? MAP_FAILED : mmap((void *)m->va, UNIT, prot, MAP_SHARED | MAP_FIXED, fd, (off_t)m->off * UNIT);
			if (fd >= 0)
				close(fd);
		}
		if (got == MAP_FAILED) {
			snprintf(why, whylen, "proc %d map %#lx: %s", proc, m->va, strerror(errno));
			return -1;
		}
	}
	for (int i = 0; i < t->nfds; i++) {
		const struct fd_spec *f = &t->fds[i];
		if (f->proc != proc)
			continue;
		int src;
		if (f->is_pipe) {
			src = dup(pipe_ends[f->pipe][f->write_end]);
		} else {
			inode_path(t, f->inode, path, sizeof path);
			src = open(path, O_RDWR);
			if (src >= 0 && lseek(src, (off_t)f->off * UNIT, SEEK_SET) < 0)
				src = -1;
		}
		if (src < 0 || dup2(src, PARK_FD + parked) < 0) {
			snprintf(why, whylen, "proc %d fd %d: %s", proc, f->fd, strerror(errno));
			return -1;
		}
		close(src);
		targets[parked++] = f->fd;
	}
	/* Every fd below fd_base is held on /dev/null, so lowest-fd choices match the model. */
	for (int fd = 0; fd < 10; fd++)
		dup2(DEVNULL_FD, fd);
	close_range(10, PARK_FD - 1, 0);
	close_range(PARK_FD + parked, ~0U, 0);
	for (int k = 0; k < parked; k++)
		dup2(PARK_FD + k, targets[k]);
	if (parked)
		close_range(PARK_FD, PARK_FD + parked - 1, 0);
	return 0;
}

/* ---- the calls ---- */

static const char *errno_name(int e)
{
	switch (e) {
#define E(x) case x: return #x;
	E(EPERM) E(ENOENT) E(EINTR) E(EIO) E(ENXIO) E(EBADF) E(EAGAIN) E(ENOMEM) E(EACCES)
	E(EFAULT) E(EBUSY) E(EEXIST) E(EXDEV) E(ENODEV) E(ENOTDIR) E(EISDIR) E(EINVAL)
	E(ENFILE) E(EMFILE) E(ETXTBSY) E(EFBIG) E(ENOSPC) E(ESPIPE) E(EROFS) E(EMLINK)
	E(EPIPE) E(ERANGE) E(ENAMETOOLONG) E(ENOTEMPTY) E(ELOOP) E(EOVERFLOW) E(ENOSYS)
#undef E
	default: return "EUNKNOWN";
	}
}

/* One participant's private buffers, each on its own pages so that copies to and from
 * user memory by the two calls never share a cache line. */
struct participant {
	int side;
	long tag;
	const struct test *t;
	const struct call_spec *call;
	char *names;         /* page: path names */
	unsigned char *data; /* page: read/write buffer */
	struct stat *st;     /* page: stat buffer and pipe fds */
	int *pipefds;
	void *untouched;     /* page never touched: see drain_own_lru_batches */
};

static __thread sigjmp_buf fault_jump;

static void on_fault(int sig)
{
	siglongjmp(fault_jump, sig);
}

static int is_pipe_fd(const struct test *t, int proc, int fd)
{
	for (int i = 0; i < t->nfds; i++)
		if (t->fds[i].proc == proc && t->fds[i].fd == fd)
			return t->fds[i].is_pipe;
	return 0;
}

static void emit_tag(uint32_t tag)
{
	for (int bit = 31; bit >= 0; bit--) {
		if ((tag >> bit) & 1)
			MARK(0x5c5c0011);
		else
			MARK(0x5c5c0010);
	}
}

/* Empties this CPU's LRU page batches: MADV_COLD drains them before it walks the range,
 * here one page never touched, so it has nothing else to do. The coordinator drained
 * every CPU before the go, but a page this CPU added since (a fault in the hand-off)
 * would wait in the batch, and a call that drains batches itself (truncation releases
 * pages through one) would then take the shared LRU lock or not, by timing. It runs as
 * the last thing before the start marker, after everything that could fault. */
static void drain_own_lru_batches(void *untouched_page)
{
	if (madvise(untouched_page, UNIT, MADV_COLD) < 0)
		fatal("madvise MADV_COLD (draining this CPU's LRU batches)");
}

#define TOK(i) (c->tok[i])
#define NUM(i) strtol(c->tok[i], NULL, 0)

/* Runs the call between markers and formats its result as JSON into res. */
static void run_call(struct participant *p, char *res, size_t len)
{
	const struct call_spec *c = p->call;
	const char *op = c->op;
	char *name0 = p->names, *name1 = p->names + 256;
	long r = 0;
	int err = 0, sig = 0, unit = UNIT;
	unsigned char byte = 0;
	if (c->ntok > 0)
		snprintf(name0, 256, "%s", TOK(0));
	if (c->ntok > 1)
		snprintf(name1, 256, "%s", TOK(1));
	/* A failing call's wrapper writes errno: a first write to its page inside the region
	 * would be a copy-on-write fault of the driver's, not the call's work. */
	errno = 0;
	drain_own_lru_batches(p->untouched);

	emit_tag(p->tag);
	if (!strcmp(op, "open")) {
		int flags = O_RDWR | (NUM(1) ? O_CREAT : 0) | (NUM(2) ? O_EXCL : 0) | (NUM(3) ? O_TRUNC : 0);
		MARK_START();
		r = open(name0, flags, 0666);
		err = errno;
		MARK_END();
		if (r >= 0 && NUM(4)) {
			/* Linux has no O_ANYFD: after the traced open, move the fd to where no
			 * test names one (>= ANYFD_BASE), as a kernel free to pick any fd might. */
			long moved = fcntl(r, F_DUPFD, ANYFD_BASE);
			if (moved >= 0) {
				close(r);
				r = moved;
			}
		}
	} else if (!strcmp(op, "link") || !strcmp(op, "rename")) {
		int is_link = op[0] == 'l';
		MARK_START();
		r = is_link ? link(name0, name1) : rename(name0, name1);
		err = errno;
		MARK_END();
	} else if (!strcmp(op, "unlink")) {
		MARK_START();
		r = unlink(name0);
		err = errno;
		MARK_END();
	} else if (!strcmp(op, "stat") || !strcmp(op, "fstat")) {
		int by_fd = op[0] == 'f';
		int fd = by_fd ? NUM(0) : -1;
		MARK_START();
		r = by_fd ? fstat(fd, p->st) : stat(name0, p->st);
		err = errno;
		MARK_END();
		if (r == 0) {
			snprintf(res, len, "{\"ret\":0,\"ino\":%lu,\"nlink\":%lu,\"size\":%ld}",
				 (unsigned long)p->st->st_ino, (unsigned long)p->st->st_nlink, (long)(p->st->st_size / UNIT));
			return;
		}
	} else if (!strcmp(op, "lseek")) {
		int fd = NUM(0), whence = NUM(2);
		off_t off = (off_t)NUM(1) * UNIT;
		MARK_START();
		r = lseek(fd, off, whence);
		err = errno;
		MARK_END();
		if (r >= 0)
			r /= UNIT;
	} else if (!strcmp(op, "close")) {
		int fd = NUM(0);
		MARK_START();
		r = close(fd);
		err = errno;
		MARK_END();
	} else if (!strcmp(op, "pipe")) {
		MARK_START();
		r = pipe(p->pipefds);
		err = errno;
		MARK_END();
		if (r == 0) {
			snprintf(res, len, "{\"ret\":0,\"fds\":[%d,%d]}", p->pipefds[0], p->pipefds[1]);
			return;
		}
	} else if (!strcmp(op, "read") || !strcmp(op, "pread")) {
		int fd = NUM(0), positional = op[0] == 'p';
		off_t off = positional ? (off_t)NUM(1) * UNIT : 0;
		if (is_pipe_fd(p->t, c->proc, fd))
			unit = 1;
		MARK_START();
		r = positional ? pread(fd, p->data, unit, off) : read(fd, p->data, unit);
		err = errno;
		MARK_END();
		if (r > 0) {
			snprintf(res, len, "{\"ret\":1,\"data\":%d}", p->data[0]);
			return;
		}
	} else if (!strcmp(op, "write") || !strcmp(op, "pwrite")) {
		int fd = NUM(0), positional = op[0] == 'p';
		off_t off = positional ? (off_t)NUM(1) * UNIT : 0;
		if (is_pipe_fd(p->t, c->proc, fd))
			unit = 1;
		memset(p->data, (int)NUM(positional ? 2 : 1), unit);
		MARK_START();
		r = positional ? pwrite(fd, p->data, unit, off) : write(fd, p->data, unit);
		err = errno;
		MARK_END();
		if (r == unit)
			r = 1;
	} else if (!strcmp(op, "mmap")) {
		int anon = NUM(0), fixed = NUM(2), fd = anon ? -1 : NUM(4);
		int prot = PROT_READ | (NUM(1) ? PROT_WRITE : 0);
		int flags = (anon ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED) | (fixed ? MAP_FIXED : 0);
		void *want = fixed ? (void *)strtoul(TOK(3), NULL, 0) : NULL;
		off_t off = anon ? 0 : (off_t)NUM(5) * UNIT;
		MARK_START();
		void *got = mmap(want, UNIT, prot, flags, fd, off);
		err = errno;
		MARK_END();
		r = got == MAP_FAILED ? -1 : 0;
		if (r == 0) {
			snprintf(res, len, "{\"ret\":%lu}", (unsigned long)got);
			return;
		}
	} else if (!strcmp(op, "munmap") || !strcmp(op, "mprotect")) {
		void *va = (void *)strtoul(TOK(0), NULL, 0);
		int unmap = op[1] == 'u';
		int prot = PROT_READ | (!unmap && NUM(1) ? PROT_WRITE : 0);
		MARK_START();
		r = unmap ? munmap(va, UNIT) : mprotect(va, UNIT, prot);
		err = errno;
		MARK_END();
	} else if (!strcmp(op, "memread") || !strcmp(op, "memwrite")) {
		volatile unsigned char *va = (volatile unsigned char *)strtoul(TOK(0), NULL, 0);
		int writing = op[3] == 'w';
		unsigned char value = writing ? NUM(1) : 0;
		sig = sigsetjmp(fault_jump, 0);
		if (sig == 0) {
			MARK_START();
			if (writing)
				*va = value;
			else
				byte = *va;
		}
		MARK_END();
		if (sig) {
			snprintf(res, len, "{\"signal\":\"%s\"}", sig == SIGBUS ? "SIGBUS" : "SIGSEGV");
		} else if (writing) {
			snprintf(res, len, "{\"ret\":0}");
		} else {
			snprintf(res, len, "{\"ret\":0,\"data\":%d}", byte);
		}
		return;
	} else if (!strcmp(op, "_hang")) {
		/* Diagnostic op: a call that never returns, to exercise the timeout path. */
		MARK_START();
		pause();
		MARK_END();
	} else if (!strcmp(op, "_panic")) {
		/* Diagnostic op: crashes the guest kernel, to exercise crash recovery. */
		int fd = open("/proc/sysrq-trigger", O_WRONLY);
		MARK_START();
		r = write(fd, "c", 1);
		MARK_END();
	} else {
		snprintf(res, len, "{\"driver_error\":\"unknown op %s\"}", op);
		return;
	}
	if (r < 0)
		snprintf(res, len, "{\"errno\":\"%s\"}", errno_name(err));
	else
		snprintf(res, len, "{\"ret\":%ld}", r);
}

static void pin_to_cpu(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) < 0)
		fatal("sched_setaffinity");
}

/* Each call starts just after a tick of the coarse clock the kernel stamps files with,
 * so whether it sees the setup's or the other call's timestamps as current (and so
 * updates mtime, ctime or atime itself) is the same in every repeat. */
static void wait_for_clock_tick(void)
{
	struct timespec start, now, pause = {0, 100000};
	clock_gettime(CLOCK_REALTIME_COARSE, &start);
	do {
		nanosleep(&pause, NULL);
		clock_gettime(CLOCK_REALTIME_COARSE, &now);
	} while (now.tv_sec == start.tv_sec && now.tv_nsec == start.tv_nsec);
}

/* The stack pages a call's region could reach (the libc wrapper, a signal frame) are
 * made present and private now: after fork they are copy-on-write, and a first write in
 * the region would add the driver's page faults to the call's work. */
static __attribute__((noinline)) void prefault_stack(void)
{
	volatile char below[PREFAULTED_STACK];
	for (size_t i = 0; i < sizeof below; i += 64)
		below[i] = 0;
}

static void *participant_main(void *arg)
{
	struct participant *p = arg;
	pin_to_cpu(1 + p->side);
	char *pages = mmap(NULL, 3 * UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (pages == MAP_FAILED)
		fatal("mmap participant pages");
	p->names = pages;
	p->data = (unsigned char *)pages + UNIT;
	p->st = (struct stat *)(pages + 2 * UNIT);
	p->pipefds = (int *)(pages + 2 * UNIT + 2048);
	p->untouched = mmap(NULL, UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->untouched == MAP_FAILED)
		fatal("mmap participant pages");
	prefault_stack();
	__atomic_add_fetch(&ctl->ready, 1, __ATOMIC_SEQ_CST);
	futex_wake(&ctl->ready);
	wait_at_least(&ctl->go[p->side], 1, 0);
	wait_for_clock_tick();
	run_call(p, ctl->result[p->side], RESULT_LEN);
	if (p->side == 0)
		set_and_wake(&ctl->go[1], 1);
	set_and_wake(&ctl->done[p->side], 1);
	return NULL;
}

/* Body of test process `proc`: build its state, run its calls, wait for the end. */
static void test_process(const struct test *t, int proc, long tag_base)
{
	char why[RESULT_LEN];
	if (build_process(t, proc, why, sizeof why) < 0) {
		snprintf(ctl->setup_error, RESULT_LEN, "%s", why);
		__atomic_add_fetch(&ctl->ready, 100, __ATOMIC_SEQ_CST);
		futex_wake(&ctl->ready);
		_exit(1);
	}
	struct participant parts[2];
	pthread_t thread;
	int mine[2], nmine = 0;
	for (int side = 0; side < 2; side++) {
		if (t->calls[side].proc != proc)
			continue;
		parts[side] = (struct participant){.side = side, .tag = tag_base | side, .t = t, .call = &t->calls[side]};
		mine[nmine++] = side;
	}
	/* Two calls of one process run as two threads of it. */
	if (nmine == 2 && pthread_create(&thread, NULL, participant_main, &parts[mine[1]]) != 0)
		fatal("pthread_create");
	__atomic_add_fetch(&ctl->ready, 1, __ATOMIC_SEQ_CST);
	futex_wake(&ctl->ready);
	if (nmine >= 1)
		participant_main(&parts[mine[0]]);
	wait_at_least(&ctl->finish, 1, 0);
	_exit(0);
}

static int process_matters(const struct test *t, int proc)
{
	for (int side = 0; side < 2; side++)
		if (t->calls[side].proc == proc)
			return 1;
	for (int i = 0; i < t->nfds; i++)
		if (t->fds[i].proc == proc)
			return 1;
	for (int i = 0; i < t->nmaps; i++)
		if (t->maps[i].proc == proc)
			return 1;
	return 0;
}

static void kill_and_reap(pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGKILL);
	for (int i = 0; i < n; i++)
		if (pids[i] > 0)
			waitpid(pids[i], NULL, 0);
}

/* Repeat number of warm-up runs: their regions carry it, and the host ignores them. */
#define WARMUP_REP 127

/* Empties every CPU's LRU page batches (mbind with MPOL_MF_MOVE drains them on all
 * CPUs). A call that fills its CPU's batch flushes it onto the shared LRU lists, and a
 * page the setup wrote may still sit in CPU 0's batch instead of on the LRU: both
 * depended on how many pages the tests before had left in the batches. */
static void drain_lru_batches(void)
{
	static char page[4096] __attribute__((aligned(4096)));
	unsigned long node0 = 1;
	page[0] = 1;
	if (syscall(__NR_mbind, page, sizeof page, MPOL_BIND, &node0, 8 * sizeof node0, MPOL_MF_MOVE) < 0)
		fatal("mbind (draining the LRU batches)");
}

static void run_repeat(const struct test *t, int rep)
{
	int report = rep != WARMUP_REP;
	char why[RESULT_LEN];
	long tag_base = (t->index << 8) | (rep << 1);
	memset(ctl, 0, sizeof *ctl);
	/* Lookups in a directory hash (its dentry's address, name) into a static table:
	 * which entries of the table share a line depends on where this boot allocated the
	 * directory. With consecutive repeats in two directories, that false sharing shows
	 * in both (and so counts) only by chance, while two lookups of one name still meet
	 * in one bucket in every repeat. */
	if (chdir(TEST_DIRS[rep % 2]) < 0)
		fatal("chdir");
	clean_test_dir();
	if (build_files_and_pipes(t, why, sizeof why) < 0) {
		if (report)
			out("X %ld %d %s\n", t->index, rep, why);
		close_pipes(t);
		return;
	}
	pid_t pids[2] = {0, 0};
	int forked = 0;
	for (int proc = 0; proc < 2; proc++) {
		/* A process with no call, no fds and no mappings holds no kernel state a call
		 * could touch: it need not exist (saves a fork and an exit per repeat). */
		if (!process_matters(t, proc))
			continue;
		pids[proc] = fork();
		if (pids[proc] < 0)
			fatal("fork");
		if (pids[proc] == 0)
			test_process(t, proc, tag_base);
		forked++;
	}
	/* Each process reports once, plus once per participant. */
	if (wait_at_least(&ctl->ready, forked + 2, timeout_ms) < 0 || ctl->ready >= 100) {
		if (report)
			out("X %ld %d %s\n", t->index, rep, ctl->setup_error[0] ? ctl->setup_error : "setup timed out");
		kill_and_reap(pids, 2);
		close_pipes(t);
		return;
	}
	/* Inodes with no name stay alive only through the fds and mappings just made. */
	for (int i = 0; i < t->ninodes; i++) {
		if (t->inodes[i].nlink == 0) {
			char path[TOKEN_LEN];
			inode_path(t, i, path, sizeof path);
			unlink(path);
		}
	}
	drain_lru_batches();
	set_and_wake(&ctl->go[0], 1);
	if (wait_at_least(&ctl->done[1], 1, timeout_ms) < 0) {
		if (report)
			out("H %ld %d %s\n", t->index, rep, ctl->done[0] ? "call B did not return" : "call A did not return");
		kill_and_reap(pids, 2);
		close_pipes(t);
		return;
	}
	if (report)
		out("R %ld %d %s %s\n", t->index, rep, ctl->result[0], ctl->result[1]);
	set_and_wake(&ctl->finish, 1);
	for (int i = 0; i < 2; i++)
		if (pids[i] > 0)
			waitpid(pids[i], NULL, 0);
	close_pipes(t);
}

/* ---- kernel facts for naming: symbols and per-cpu area offsets ---- */

static int read_kcore(unsigned long vaddr, void *buf, size_t len)
{
	int fd = open("/proc/kcore", O_RDONLY);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	int found = -1;
	if (pread(fd, &eh, sizeof eh, 0) == sizeof eh) {
		for (int i = 0; i < eh.e_phnum && found < 0; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof ph, eh.e_phoff + (off_t)i * eh.e_phentsize) != sizeof ph)
				break;
			if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr + len <= ph.p_vaddr + ph.p_memsz)
				found = pread(fd, buf, len, ph.p_offset + (vaddr - ph.p_vaddr)) == (ssize_t)len ? 0 : -1;
		}
	}
	close(fd);
	return found;
}

static void dump_kernel_facts(void)
{
	struct utsname u;
	uname(&u);
	out("U %s\n", u.release);
	int fd = open("/proc/kallsyms", O_RDONLY);
	if (fd < 0)
		fatal("open /proc/kallsyms");
	static char chunk[65536];
	ssize_t n;
	out("K\n");
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		out_bytes(chunk, n);
	close(fd);
	out("KEND\n");
	unsigned long per_cpu_offset = 0;
	FILE *syms = fopen("/proc/kallsyms", "r");
	char line[512];
	while (syms && fgets(line, sizeof line, syms))
		if (strstr(line, " __per_cpu_offset\n"))
			per_cpu_offset = strtoul(line, NULL, 16);
	if (syms)
		fclose(syms);
	int ncpus = sysconf(_SC_NPROCESSORS_CONF);
	for (int cpu = 0; cpu < ncpus; cpu++) {
		unsigned long offset;
		if (per_cpu_offset && read_kcore(per_cpu_offset + 8 * cpu, &offset, 8) == 0)
			out("O %d %lx\n", cpu, offset);
	}
}

/* ---- main ---- */

static void mount_filesystems(void)
{
	mkdir("/proc", 0755);
	mkdir("/dev", 0755);
	mkdir("/t", 0755);
	if (mount("proc", "/proc", "proc", 0, NULL) < 0)
		fatal("mount /proc");
	if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) < 0 && errno != EBUSY)
		fatal("mount /dev");
	if (mount("scalecheck", "/t", fs_type, 0, NULL) < 0)
		fatal("mount test file system");
	for (int i = 0; i < 2; i++)
		if (mkdir(TEST_DIRS[i], 0777) < 0)
			fatal("mkdir test directory");
	/* No periodic writeback: a flusher cleaning inodes at random moments would decide
	 * whether a call finds its inode clean and takes the writeback list lock. */
	int fd = open("/proc/sys/vm/dirty_writeback_centisecs", O_WRONLY);
	if (fd < 0 || write(fd, "0\n", 2) != 2)
		fatal("disable periodic writeback");
	close(fd);
}

static char *read_whole_file(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		fatal("open batch");
	struct stat st;
	fstat(fd, &st);
	char *buf = malloc(st.st_size + 1);
	ssize_t got = 0, n;
	while (got < st.st_size && (n = read(fd, buf + got, st.st_size - got)) > 0)
		got += n;
	buf[got] = 0;
	close(fd);
	return buf;
}

/* The same memory layout in every boot: with address-space randomization the driver's
 * stack, heap and mappings sit at other offsets each boot, so whether a call's region
 * touches a page for the first time (a fault) or grows a VMA tree node differs between
 * runs. Without transparent huge pages, khugepaged cannot collapse the driver's memory at
 * a moment that depends on the boot either. Both settings are inherited by every test
 * process; neither changes what the calls themselves do. */
static void fix_memory_layout(char **argv)
{
	int persona = personality(0xffffffff);
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) < 0)
		fatal("prctl PR_SET_THP_DISABLE");
	if (persona < 0 || persona & ADDR_NO_RANDOMIZE)
		return;
	if (personality(persona | ADDR_NO_RANDOMIZE) < 0)
		fatal("personality ADDR_NO_RANDOMIZE");
	execv("/init", argv);
	fatal("re-exec without address-space randomization");
}

int main(int argc, char **argv)
{
	(void)argc;
	if (ioperm(DEBUGCON_PORT, 1, 1) < 0)
		return 1;
	fix_memory_layout(argv);
	batch = read_whole_file("/batch.txt");
	char *cursor = batch, *line;
	int dump_facts = 0, warmup = 0;
	/* Header line: "S key=value ..." */
	line = strsep(&cursor, "\n");
	char *tok[16];
	int n = tokenize(line, tok, 16);
	for (int i = 1; i < n; i++) {
		if (!strncmp(tok[i], "repeats=", 8))
			repeats = atoi(tok[i] + 8);
		else if (!strncmp(tok[i], "timeout_ms=", 11))
			timeout_ms = atoi(tok[i] + 11);
		else if (!strncmp(tok[i], "fs=", 3))
			fs_type = strdup(tok[i] + 3);
		else if (!strncmp(tok[i], "warmup=", 7))
			warmup = atoi(tok[i] + 7);
		else if (!strcmp(tok[i], "facts=1"))
			dump_facts = 1;
	}
	mount_filesystems();
	int devnull = open("/dev/null", O_RDWR);
	if (devnull < 0 || dup2(devnull, DEVNULL_FD) < 0)
		fatal("open /dev/null");
	close(devnull);
	ctl = mmap(NULL, sizeof *ctl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED)
		fatal("mmap control");
	struct sigaction sa = {.sa_handler = on_fault, .sa_flags = SA_NODEFER};
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	out("READY %d\n", (int)sysconf(_SC_NPROCESSORS_ONLN));
	if (dump_facts)
		dump_kernel_facts();

	/* Warm-up: the first tests run once untraced-for-results, so one-time kernel work
	 * (first use of a CPU's random pool, slab caches filling) lands outside real runs. */
	char *tests_start = cursor;
	long run_started = now_ms();
	for (int pass = warmup > 0 ? 0 : 1; pass < 2; pass++) {
		cursor = pass == 0 ? strdup(tests_start) : tests_start;
		int seen = 0;
		while ((line = strsep(&cursor, "\n"))) {
			if (line[0] != 'T')
				continue;
			if (pass == 0 && seen++ >= warmup)
				break;
			static struct test t;
			const char *why;
			long index = strtol(line + 2, NULL, 10);
			int bad = parse_test(&cursor, &t, &why);
			t.index = index;
			if (!bad && t.ncalls != 2)
				bad = 1, why = "a test needs exactly two calls";
			if (pass == 0) {
				/* Announced, so that a warm-up that crashes the guest is blamed on its test. */
				out("W %ld\n", index);
				if (!bad)
					run_repeat(&t, WARMUP_REP);
				continue;
			}
			out("B %ld\n", index);
			if (bad) {
				out("X %ld -1 %s\n", index, why);
				continue;
			}
			for (int rep = 0; rep < repeats; rep++)
				run_repeat(&t, rep);
		}
	}
	/* Guest-side run time of the tests (warm-up included), for the speed benchmarks. */
	out("DONE %ld\n", now_ms() - run_started);
	sync();
	/* The probe's memory is read once the guest has powered off. A traced boot stays up:
	 * the host names the last test's data from guest memory after DONE, then stops QEMU. */
	if (dump_facts)
		reboot(RB_POWER_OFF);
	for (;;)
		pause();
	return 0;
}
