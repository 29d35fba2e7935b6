/* The operations: one function per op of the POSIX model (and two diagnostic ops), found
 * by name through OPS, as a kernel dispatches system calls through its table. Each runs
 * its call between the start and end markers, touching nothing but the call's own work
 * inside them, and writes the result as the test file's JSON (docs/format-tests.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver.h"

#define TOK(i) (c->tok[i])
#define NUM(i) strtol(c->tok[i], NULL, 0)
/* The call, between markers; its return value in r and errno in err. */
#define TRACED(call)          \
	do {                  \
		SC_MARK_START(); \
		r = (call);   \
		err = errno;  \
		SC_MARK_END();   \
	} while (0)

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

/* The result of a call that returns a number or fails with errno. */
static void result(char *res, size_t len, long r, int err)
{
	if (r < 0)
		snprintf(res, len, "{\"errno\":\"%s\"}", errno_name(err));
	else
		snprintf(res, len, "{\"ret\":%ld}", r);
}

static int is_pipe_fd(const struct test *t, int proc, int fd)
{
	for (int i = 0; i < t->nfds; i++)
		if (t->fds[i].proc == proc && t->fds[i].fd == fd)
			return t->fds[i].is_pipe;
	return 0;
}

/* Bytes one read or write moves: a unit of a file, a byte of a pipe. */
static int unit_of(const struct participant *p, const struct call_spec *c, int fd)
{
	return is_pipe_fd(p->t, c->proc, fd) ? 1 : SC_UNIT;
}

static void op_open(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int flags = O_RDWR | (NUM(1) ? O_CREAT : 0) | (NUM(2) ? O_EXCL : 0) | (NUM(3) ? O_TRUNC : 0);
	long r;
	int err;
	TRACED(open(p->names, flags, 0666));
	if (r >= 0 && NUM(4)) {
		/* Linux has no O_ANYFD: after the traced open, move the fd to where no
		 * test names one (>= SC_ANYFD_BASE), as a kernel free to pick any fd might. */
		long moved = fcntl(r, F_DUPFD, SC_ANYFD_BASE);
		if (moved >= 0) {
			close(r);
			r = moved;
		}
	}
	result(res, len, r, err);
}

static void op_link(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	long r;
	int err;
	(void)c;
	TRACED(link(p->names, p->names + 256));
	result(res, len, r, err);
}

static void op_rename(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	long r;
	int err;
	(void)c;
	TRACED(rename(p->names, p->names + 256));
	result(res, len, r, err);
}

static void op_unlink(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	long r;
	int err;
	(void)c;
	TRACED(unlink(p->names));
	result(res, len, r, err);
}

static void stat_result(const struct participant *p, char *res, size_t len, long r, int err)
{
	if (r != 0) {
		result(res, len, r, err);
		return;
	}
	snprintf(res, len, "{\"ret\":0,\"ino\":%lu,\"nlink\":%lu,\"size\":%ld}",
		 (unsigned long)p->st->st_ino, (unsigned long)p->st->st_nlink, (long)(p->st->st_size / SC_UNIT));
}

static void op_stat(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	long r;
	int err;
	(void)c;
	TRACED(stat(p->names, p->st));
	stat_result(p, res, len, r, err);
}

static void op_fstat(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int fd = NUM(0);
	long r;
	int err;
	TRACED(fstat(fd, p->st));
	stat_result(p, res, len, r, err);
}

static void op_lseek(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int fd = NUM(0), whence = NUM(2);
	off_t off = (off_t)NUM(1) * SC_UNIT;
	long r;
	int err;
	(void)p;
	TRACED(lseek(fd, off, whence));
	result(res, len, r >= 0 ? r / SC_UNIT : r, err);
}

static void op_close(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int fd = NUM(0);
	long r;
	int err;
	(void)p;
	TRACED(close(fd));
	result(res, len, r, err);
}

static void op_pipe(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	long r;
	int err;
	(void)c;
	TRACED(pipe(p->pipefds));
	if (r == 0)
		snprintf(res, len, "{\"ret\":0,\"fds\":[%d,%d]}", p->pipefds[0], p->pipefds[1]);
	else
		result(res, len, r, err);
}

static void read_result(const struct participant *p, char *res, size_t len, long r, int err)
{
	if (r > 0)
		snprintf(res, len, "{\"ret\":1,\"data\":%d}", p->data[0]);
	else
		result(res, len, r, err);
}

static void op_read(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int fd = NUM(0), unit = unit_of(p, c, fd);
	long r;
	int err;
	TRACED(read(fd, p->data, unit));
	read_result(p, res, len, r, err);
}

static void op_pread(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int fd = NUM(0), unit = unit_of(p, c, fd);
	off_t off = (off_t)NUM(1) * SC_UNIT;
	long r;
	int err;
	TRACED(pread(fd, p->data, unit, off));
	read_result(p, res, len, r, err);
}

static void op_write(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int fd = NUM(0), unit = unit_of(p, c, fd);
	long r;
	int err;
	memset(p->data, (int)NUM(1), unit);
	TRACED(write(fd, p->data, unit));
	result(res, len, r == unit ? 1 : r, err);
}

static void op_pwrite(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int fd = NUM(0), unit = unit_of(p, c, fd);
	off_t off = (off_t)NUM(1) * SC_UNIT;
	long r;
	int err;
	memset(p->data, (int)NUM(2), unit);
	TRACED(pwrite(fd, p->data, unit, off));
	result(res, len, r == unit ? 1 : r, err);
}

static void op_mmap(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int anon = NUM(0), fixed = NUM(2), fd = anon ? -1 : NUM(4);
	int prot = PROT_READ | (NUM(1) ? PROT_WRITE : 0);
	int flags = (anon ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED) | (fixed ? MAP_FIXED : 0);
	void *want = fixed ? (void *)strtoul(TOK(3), NULL, 0) : NULL;
	off_t off = anon ? 0 : (off_t)NUM(5) * SC_UNIT;
	void *got;
	int err;
	(void)p;
	SC_MARK_START();
	got = mmap(want, SC_UNIT, prot, flags, fd, off);
	err = errno;
	SC_MARK_END();
	if (got != MAP_FAILED)
		snprintf(res, len, "{\"ret\":%lu}", (unsigned long)got);
	else
		result(res, len, -1, err);
}

static void op_munmap(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	void *va = (void *)strtoul(TOK(0), NULL, 0);
	long r;
	int err;
	(void)p;
	TRACED(munmap(va, SC_UNIT));
	result(res, len, r, err);
}

static void op_mprotect(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	void *va = (void *)strtoul(TOK(0), NULL, 0);
	int prot = PROT_READ | (NUM(1) ? PROT_WRITE : 0);
	long r;
	int err;
	(void)p;
	TRACED(mprotect(va, SC_UNIT, prot));
	result(res, len, r, err);
}

static __thread sigjmp_buf fault_jump;

static void on_fault(int sig)
{
	siglongjmp(fault_jump, sig);
}

void install_fault_handlers(void)
{
	struct sigaction sa = {.sa_handler = on_fault, .sa_flags = SA_NODEFER};
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
}

/* A load or store of one byte of a mapping; a fault is the call's result. */
static void memory_access(const struct call_spec *c, int writing, char *res, size_t len)
{
	volatile unsigned char *va = (volatile unsigned char *)strtoul(TOK(0), NULL, 0);
	unsigned char value = writing ? NUM(1) : 0, byte = 0;
	int sig = sigsetjmp(fault_jump, 0);
	if (sig == 0) {
		SC_MARK_START();
		if (writing)
			*va = value;
		else
			byte = *va;
	}
	SC_MARK_END();
	if (sig)
		snprintf(res, len, "{\"signal\":\"%s\"}", sig == SIGBUS ? "SIGBUS" : "SIGSEGV");
	else if (writing)
		snprintf(res, len, "{\"ret\":0}");
	else
		snprintf(res, len, "{\"ret\":0,\"data\":%d}", byte);
}

static void op_memread(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	(void)p;
	memory_access(c, 0, res, len);
}

static void op_memwrite(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	(void)p;
	memory_access(c, 1, res, len);
}

/* The driver's own receiver of model socket i and the calling process's sender to it. */
#define RECEIVER_FD(i) (SOCK_FD_BASE + 2 * (i))
#define SENDER_FD(i) (SOCK_FD_BASE + 2 * (i) + 1)

static void op_sendto(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int sock = NUM(0);
	long r;
	int err;
	p->data[0] = NUM(1);
	/* The sender is connected to the socket: no address lookup, just the send. */
	TRACED(sendto(SENDER_FD(sock), p->data, 1, MSG_DONTWAIT, NULL, 0));
	result(res, len, r, err);
}

static void op_recvfrom(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int sock = NUM(0);
	long r;
	int err;
	TRACED(recvfrom(RECEIVER_FD(sock), p->data, 1, MSG_DONTWAIT, NULL, NULL));
	read_result(p, res, len, r, err);
}

/* A child made inside a region must not run before the region ends: its first steps
 * (returning from fork, exiting) would count as the call's work, on whichever CPU it ran.
 * A real-time caller is not preempted by it; SCHED_RESET_ON_FORK gives the child the
 * normal policy, and it inherits the caller's CPU, so it runs only once the caller
 * sleeps, in waitpid after the region. */
static void hold_children_back(int on)
{
	struct sched_param param = {.sched_priority = on ? 1 : 0};
	if (sched_setscheduler(0, on ? SCHED_FIFO | SCHED_RESET_ON_FORK : SCHED_OTHER, &param) < 0)
		fatal("sched_setscheduler (holding a child back)");
}

static void reap(pid_t child)
{
	if (child > 0 && waitpid(child, NULL, 0) != child)
		fatal("waitpid (reaping a child of the call)");
}

static void op_fork(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	pid_t child;
	int err;
	(void)p, (void)c;
	hold_children_back(1);
	SC_MARK_START();
	child = fork();
	if (child == 0)
		_exit(0); /* the child never reaches the end marker */
	err = errno;
	SC_MARK_END();
	reap(child);
	hold_children_back(0);
	result(res, len, child, err);
}

/* glibc's posix_spawn (clone(CLONE_VM | CLONE_VFORK) and execve in the child, the caller
 * waiting until the exec): the file action makes the caller's fd the child's fd 0, the
 * program is /bin/exit0. The exec is part of the call; the program's run is not. */
static void op_posix_spawn(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	static char *const argv[] = {"exit0", NULL}, *const envp[] = {NULL};
	posix_spawn_file_actions_t actions;
	pid_t child = -1;
	long r;
	int err;
	(void)p;
	if (posix_spawn_file_actions_init(&actions) != 0 || posix_spawn_file_actions_adddup2(&actions, NUM(0), 0) != 0)
		fatal("posix_spawn_file_actions");
	hold_children_back(1);
	TRACED(posix_spawn(&child, "/bin/exit0", &actions, NULL, argv, envp));
	reap(r == 0 ? child : -1);
	hold_children_back(0);
	posix_spawn_file_actions_destroy(&actions);
	/* posix_spawn returns the error number itself. */
	result(res, len, r == 0 ? child : -1, r == 0 ? err : (int)r);
}

/* exec's stand-in, in the child op_exec forks before the region: it drops its copies of
 * the model's fds and pages (so that the exec's closes and unmaps are the last ones),
 * passes its pid to the new image and stops; continued by the new image, it reads its
 * report and returns as the call, so that the driver's part of the test (the result, the
 * hand-off, waiting for the end) goes on as after any call. The result is the model's
 * {"ret":0} when the new image found what the model says an exec leaves: no page of the
 * model mapped, the process's close-on-exec fds closed and, when no call of the test ran
 * in this process before (it could have closed or opened fds), every other fd open. */
static void exec_standin(struct participant *p, const struct call_spec *c, int end, char *res, size_t len)
{
	struct exec_report report;
	unsigned long cloexec = 0, kept = (1UL << SC_FD_BASE) - 1;
	long me = getpid();
	int alone = p->t->calls[1 - p->side].proc != c->proc;
	/* Killed with the test process (a timeout), it does not stay stopped forever. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || dup2(end, 0) < 0 || close_range(SC_FD_BASE, ~0U, 0) < 0 ||
	    munmap((void *)SC_MAP_BASE, MODEL_PAGES * SC_UNIT) < 0)
		fatal("exec's stand-in dropping the model's fds and pages");
	if (write(0, &me, sizeof me) != sizeof me || raise(SIGSTOP) != 0)
		fatal("exec's stand-in handing over");
	if (read(0, &report, sizeof report) != sizeof report) {
		snprintf(res, len, "{\"error\":\"the exec'd image sent no report\"}");
		return;
	}
	for (int i = 0; i < p->t->nfds; i++) {
		const struct fd_spec *f = &p->t->fds[i];
		if (f->proc == c->proc && f->fd < SC_ANYFD_BASE)
			*(f->cloexec ? &cloexec : &kept) |= 1UL << f->fd;
	}
	if (report.mapped_pages == 0 && (report.open_fds & cloexec) == 0 &&
	    (!alone || report.open_fds == kept))
		snprintf(res, len, "{\"ret\":0}");
	else
		snprintf(res, len, "{\"ret\":0,\"after_exec\":\"open fds %#lx, mapped pages %#lx\"}",
			 report.open_fds, report.mapped_pages);
}

/* exec: the test process itself calls execve of /bin/exec_image (exec_image.c), whose
 * first instruction ends the region; a stand-in forked before the region (exec_standin)
 * carries on the driver's part. */
static void op_exec(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	static char *const argv[] = {"exec_image", NULL}, *const envp[] = {NULL};
	int ends[2], status;
	long r;
	int err;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, ends) < 0)
		fatal("socketpair (exec's report)");
	pid_t standin = fork();
	if (standin < 0)
		fatal("fork (exec's stand-in)");
	if (standin == 0) {
		exec_standin(p, c, ends[1], res, len);
		return;
	}
	if (dup2(ends[0], EXEC_REPORT_FD) < 0 || close(ends[0]) < 0 || close(ends[1]) < 0)
		fatal("dup2 (exec's report)");
	/* Stopped, the stand-in cannot run inside the region. */
	if (waitpid(standin, &status, WUNTRACED) != standin || !WIFSTOPPED(status))
		fatal("waitpid (exec's stand-in stopping)");
	errno = 0;
	TRACED(execve("/bin/exec_image", argv, envp));
	/* Only a failed exec returns; its stand-in is not needed. */
	kill(standin, SIGKILL);
	reap(standin);
	close(EXEC_REPORT_FD);
	result(res, len, r, err);
}

/* The side whose call runs first: A, unless A is an exec and B a call of the same process,
 * which would have to run in the exec'd image: then B runs first (its results fit the
 * model's order BA). */
int process_execs(const struct test *t, int proc)
{
	for (int side = 0; side < 2; side++)
		if (t->calls[side].proc == proc && t->calls[side].run == op_exec)
			return 1;
	return 0;
}

int first_side(const struct test *t)
{
	return t->calls[0].run == op_exec && t->calls[1].proc == t->calls[0].proc;
}

static void op_fstatx(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int fd = NUM(0), nlink = NUM(1);
	unsigned int mask = STATX_INO | STATX_SIZE | (nlink ? STATX_NLINK : 0);
	struct statx *stx = (struct statx *)p->st;
	long r;
	int err;
	TRACED(statx(fd, "", AT_EMPTY_PATH, mask, stx));
	if (r != 0)
		result(res, len, r, err);
	else if (nlink)
		snprintf(res, len, "{\"ret\":0,\"ino\":%llu,\"nlink\":%u,\"size\":%lld}",
			 (unsigned long long)stx->stx_ino, stx->stx_nlink, (long long)(stx->stx_size / SC_UNIT));
	else
		snprintf(res, len, "{\"ret\":0,\"ino\":%llu,\"size\":%lld}",
			 (unsigned long long)stx->stx_ino, (long long)(stx->stx_size / SC_UNIT));
}

/* Diagnostic op: a call that never returns, to exercise the timeout path. */
static void op_hang(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	long r;
	int err;
	(void)p, (void)c;
	TRACED(pause());
	result(res, len, r, err);
}

/* Diagnostic op: crashes the guest kernel, to exercise crash recovery. */
static void op_panic(struct participant *p, const struct call_spec *c, char *res, size_t len)
{
	int fd = open("/proc/sysrq-trigger", O_WRONLY);
	long r;
	int err;
	(void)p, (void)c;
	TRACED(write(fd, "c", 1));
	result(res, len, r, err);
}

/* Ended by a NULL name (sc_wire_find). */
static const struct op {
	const char *name;
	op_fn *run;
} OPS[] = {
	{"open", op_open},       {"link", op_link},         {"unlink", op_unlink},
	{"rename", op_rename},   {"stat", op_stat},         {"fstat", op_fstat},
	{"lseek", op_lseek},     {"close", op_close},       {"pipe", op_pipe},
	{"read", op_read},       {"write", op_write},       {"pread", op_pread},
	{"pwrite", op_pwrite},   {"mmap", op_mmap},         {"munmap", op_munmap},
	{"mprotect", op_mprotect}, {"memread", op_memread}, {"memwrite", op_memwrite},
	{"fstatx", op_fstatx},   {"sendto", op_sendto},     {"recvfrom", op_recvfrom},
	{"fork", op_fork},       {"posix_spawn", op_posix_spawn}, {"exec", op_exec},
	{"_hang", op_hang},      {"_panic", op_panic},      {NULL, NULL},
};

op_fn *find_op(const char *name)
{
	const struct op *op = sc_wire_find(OPS, sizeof OPS[0], name);
	return op ? op->run : NULL;
}

/* Runs the participant's call between markers and formats its result as JSON into res. */
void run_call(struct participant *p, char *res, size_t len)
{
	const struct call_spec *c = p->call;
	/* Path-name arguments (the first two tokens) are copied to the participant's page. */
	if (c->ntok > 0)
		snprintf(p->names, 256, "%s", TOK(0));
	if (c->ntok > 1)
		snprintf(p->names + 256, 256, "%s", TOK(1));
	/* A failing call's wrapper writes errno: a first write to its page inside the region
	 * would be a copy-on-write fault of the driver's, not the call's work. */
	errno = 0;
	/* The last thing before the start marker, after everything that could fault: a page
	 * this CPU added since the hand-off would wait in its batch, and a call that drains
	 * batches itself (truncation releases pages through one) would then take the shared
	 * LRU lock or not, by timing. */
	drain_own_lru_batches(p->untouched);
	sc_emit_tag(p->tag);
	c->run(p, c, res, len);
}
