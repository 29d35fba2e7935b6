/* The state check of reused test processes (settings state_check=1): a digest of what a
 * test process holds once its state is built (its fds, mappings, cwd, signal state and
 * scheduling policy), taken in a fresh child built the old way and in the reused process,
 * compared by the coordinator. Read from /proc with plain system calls into static buffers: no malloc,
 * so that taking the digest does not grow the heap it looks at. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "driver.h"

static char text[64 * 1024];

static unsigned long fnv(unsigned long h, const void *data, size_t n)
{
	const unsigned char *b = data;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3UL;
	return h;
}

#define FNV_START 0xcbf29ce484222325UL
#define KERNEL_SIGSET 8

/* /proc/self/maps without the driver's own pages (driver.h: the participants' pages and
 * the second thread's stack), which a kept process holds and a fresh child does not: a
 * line lying wholly in their range is left out, so a mapping merged with them still
 * counts. */
static unsigned long maps_digest(void)
{
	unsigned long h = FNV_START;
	size_t used = 0;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fnv(h, "missing", 7);
	while (used < sizeof text - 1 && (n = read(fd, text + used, sizeof text - 1 - used)) > 0)
		used += (size_t)n;
	close(fd);
	text[used] = 0;
	for (char *line = text, *next; *line; line = next) {
		char *newline = strchr(line, '\n');
		next = newline ? newline + 1 : line + strlen(line);
		unsigned long start = 0, end = 0;
		if (sscanf(line, "%lx-%lx", &start, &end) == 2 && start >= DRIVER_PAGES_BASE && end <= DRIVER_PAGES_END)
			continue;
		h = fnv(h, line, (size_t)(next - line));
	}
	return h;
}

static unsigned long hash_link(unsigned long h, const char *path)
{
	ssize_t n = readlink(path, text, sizeof text);
	return n < 0 ? fnv(h, "missing", 7) : fnv(h, text, n);
}

struct linux_dirent64 {
	unsigned long d_ino, d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* A socket is named by the order it first appears in the fd table, not by its inode:
 * every build makes the process's own senders anew (other sockets, other inodes in a
 * fresh child too), but which fds share one socket must agree. */
struct seen_sockets { int n; unsigned long inodes[SC_MAX_FDS + 2 * SC_MAX_SOCKETS]; };

static unsigned long socket_name(unsigned long h, unsigned long inode, struct seen_sockets *seen)
{
	int k = 0;
	while (k < seen->n && seen->inodes[k] != inode)
		k++;
	if (k == seen->n && seen->n < (int)(sizeof seen->inodes / sizeof *seen->inodes))
		seen->inodes[seen->n++] = inode;
	return fnv(fnv(h, "socket", 6), &k, sizeof k);
}

/* What fd is open on, and its fdinfo (position, flags with close-on-exec, mount, and
 * but for a socket the inode). */
static unsigned long fd_digest(unsigned long h, int fd, struct seen_sockets *seen)
{
	char path[64];
	unsigned long inode;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, text, sizeof text - 1);
	if (n < 0)
		return fnv(h, "missing", 7);
	text[n] = 0;
	int is_socket = sscanf(text, "socket:[%lu]", &inode) == 1;
	h = is_socket ? socket_name(h, inode, seen) : fnv(h, text, n);
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
	int info = open(path, O_RDONLY | O_CLOEXEC);
	n = info < 0 ? -1 : read(info, text, sizeof text - 1);
	if (info >= 0)
		close(info);
	if (n < 0)
		return fnv(h, "missing", 7);
	text[n] = 0;
	char *inode_line = is_socket ? strstr(text, "ino:") : NULL;
	return fnv(h, text, inode_line ? inode_line - text : n);
}

/* Every fd but the one reading the list: its number and fd_digest. */
static unsigned long fds_digest(void)
{
	static char entries[16 * 1024];
	struct seen_sockets seen = {.n = 0};
	unsigned long h = FNV_START;
	int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n = dir < 0 ? -1 : syscall(SYS_getdents64, dir, entries, sizeof entries);
	for (long off = 0; off < n;) {
		struct linux_dirent64 *e = (struct linux_dirent64 *)(entries + off);
		off += e->d_reclen;
		int fd = atoi(e->d_name);
		if (e->d_name[0] == '.' || fd == dir)
			continue;
		h = fd_digest(fnv(h, &fd, sizeof fd), fd, &seen);
	}
	if (dir >= 0)
		close(dir);
	return n < 0 ? 0 : h;
}

/* Every signal's disposition, the blocked and pending sets, the alternate stack. Of a
 * glibc sigset_t only the kernel's 64 signals count (glibc copies the rest of a
 * sigaction's mask from uninitialized memory); padding is cleared first. */
static unsigned long signals_digest(void)
{
	unsigned long h = FNV_START;
	sigset_t set;
	stack_t alt;
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		if (sigaction(sig, NULL, &sa) < 0)
			continue;
		h = fnv(h, &sig, sizeof sig);
		h = fnv(h, &sa.sa_handler, sizeof sa.sa_handler);
		h = fnv(h, &sa.sa_flags, sizeof sa.sa_flags);
		h = fnv(h, &sa.sa_mask, KERNEL_SIGSET);
	}
	memset(&set, 0, sizeof set);
	sigprocmask(SIG_BLOCK, NULL, &set);
	h = fnv(h, &set, KERNEL_SIGSET);
	memset(&set, 0, sizeof set);
	sigpending(&set);
	h = fnv(h, &set, KERNEL_SIGSET);
	memset(&alt, 0, sizeof alt);
	sigaltstack(NULL, &alt);
	return fnv(h, &alt, sizeof alt);
}

/* The policy and nice value: the coordinator runs as a batch task, a test process as a
 * normal one (workers.c). */
static unsigned long scheduling_digest(void)
{
	int policy = sched_getscheduler(0);
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, 0);
	if (errno)
		nice = -100;
	return fnv(fnv(FNV_START, &policy, sizeof policy), &nice, sizeof nice);
}

void state_digest(struct state_digest *d)
{
	d->part[STATE_FDS] = fds_digest();
	d->part[STATE_MAPS] = maps_digest();
	d->part[STATE_CWD] = hash_link(hash_link(FNV_START, "/proc/self/cwd"), "/proc/self/root");
	d->part[STATE_SIGNALS] = signals_digest();
	d->part[STATE_SCHEDULING] = scheduling_digest();
}

static const char *const STATE_PART_NAMES[STATE_PARTS] = {"fds", "mappings", "cwd", "signals", "scheduling"};

int state_difference(const struct state_digest *fresh, const struct state_digest *reused, char *why, size_t len)
{
	int n = snprintf(why, len, "a reused test process differs from a fresh one in");
	int differs = 0;
	for (int i = 0; i < STATE_PARTS; i++) {
		if (fresh->part[i] == reused->part[i])
			continue;
		differs = 1;
		n += snprintf(why + n, n < (int)len ? len - n : 0, " %s", STATE_PART_NAMES[i]);
	}
	return differs;
}

/* For the check's own test (settings state_leak=1): the reused process keeps one thing
 * a fresh one would not have, by test index in turn: an fd, a mapping, another cwd, a
 * signal disposition, a scheduling policy. */
void leak_state(long test_index)
{
	switch (test_index % STATE_PARTS) {
	case STATE_FDS:
		if (open("/", O_RDONLY) < 0)
			fatal("leak an fd");
		break;
	case STATE_MAPS:
		if (mmap(NULL, SC_UNIT, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
			fatal("leak a mapping");
		break;
	case STATE_CWD:
		if (chdir("/") < 0)
			fatal("leak a cwd");
		break;
	case STATE_SCHEDULING: {
		struct sched_param param = {.sched_priority = 0};
		if (sched_setscheduler(0, SCHED_BATCH, &param) < 0)
			fatal("leak a scheduling policy");
		break;
	}
	default:
		signal(SIGUSR1, SIG_IGN);
	}
}
