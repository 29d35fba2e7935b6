/* Building a test's setup state: the shared files, pipes and datagram sockets (by the
 * coordinator, on a fresh test directory) and each test process's fd table and mappings. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"

/* Where fds are parked while a process's fd table is being rebuilt. */
#define PARK_FD 600
#define PIPE_FD_BASE 800
#define RECEIVER_FD_BASE 850

/* The coordinator's fds of the pipes and receiving sockets, in shared memory: a kept test
 * process (workers.c), forked before they were made, takes them by number. */
static struct { int pipe_ends[SC_MAX_PIPES][2], receivers[SC_MAX_SOCKETS]; } *shared;
#define pipe_ends (shared->pipe_ends)
#define receivers (shared->receivers)
static int message_senders[SC_MAX_SOCKETS][SC_SOCK_CAPACITY];

void setup_init(void)
{
	shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		fatal("mmap the shared fds' numbers");
}

/* Model socket i's address: an abstract AF_UNIX name, "\0scq<i>". */
static socklen_t socket_address(int i, struct sockaddr_un *addr)
{
	memset(addr, 0, sizeof *addr);
	addr->sun_family = AF_UNIX;
	int n = snprintf(addr->sun_path + 1, sizeof addr->sun_path - 1, "scq%d", i);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

void limit_socket_queues(void)
{
	char value[16];
	int n = snprintf(value, sizeof value, "%d\n", SC_SOCK_CAPACITY - 1);
	int fd = open("/proc/sys/net/unix/max_dgram_qlen", O_WRONLY);
	if (fd < 0 || write(fd, value, n) != n)
		fatal("set net.unix.max_dgram_qlen");
	close(fd);
}

/* A receiving socket per model socket, holding the queued messages. Each message comes
 * from a sender of its own, kept open until the repeat ends: a queued message keeps its
 * sender's socket charged until it is received, so two receives of messages of one
 * sender would share that socket's counters, and a receive of a closed sender's last
 * message would destroy the socket (global socket counters), none of it the model's. */
static int build_sockets(const struct test *t, char *why, size_t whylen)
{
	for (int i = 0; i < t->nsocks; i++) {
		struct sockaddr_un addr;
		socklen_t addrlen = socket_address(i, &addr);
		int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&addr, addrlen) < 0) {
			snprintf(why, whylen, "socket %d: %s", i, strerror(errno));
			return -1;
		}
		receivers[i] = fcntl(fd, F_DUPFD, RECEIVER_FD_BASE);
		close(fd);
		for (int m = 0; m < t->socks[i].nmsgs; m++) {
			int sender = socket(AF_UNIX, SOCK_DGRAM, 0);
			message_senders[i][m] = sender;
			if (sender < 0 || sendto(sender, &t->socks[i].data[m], 1, 0, (struct sockaddr *)&addr, addrlen) != 1) {
				snprintf(why, whylen, "queue on socket %d: %s", i, strerror(errno));
				return -1;
			}
		}
	}
	return 0;
}

/* A path by which an inode can be opened while the test is being set up. */
void inode_path(const struct test *t, int inode, char *path, size_t len)
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

void clean_test_dir(void)
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
	static char page[SC_UNIT];
	for (int i = 0; i < n; i++) {
		memset(page, data[i], SC_UNIT);
		if (write(fd, page, SC_UNIT) != SC_UNIT)
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

int build_files_and_pipes(const struct test *t, char *why, size_t whylen)
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
	return build_sockets(t, why, whylen);
}

void close_shared_fds(const struct test *t)
{
	for (int p = 0; p < t->npipes; p++)
		for (int e = 0; e < 2; e++)
			close(pipe_ends[p][e]);
	for (int i = 0; i < t->nsocks; i++) {
		close(receivers[i]);
		for (int m = 0; m < t->socks[i].nmsgs; m++)
			close(message_senders[i][m]);
	}
}

/* Model socket i in a test process: the receiver and a sender of the process's own,
 * connected to it, each given to the caller to place at its fd. */
static int socket_fds(int i, int *receiver, int *sender)
{
	struct sockaddr_un addr;
	socklen_t addrlen = socket_address(i, &addr);
	*receiver = coordinator_fd(receivers[i]);
	*sender = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	if (*receiver < 0 || *sender < 0)
		return -1;
	return connect(*sender, (struct sockaddr *)&addr, addrlen);
}

/* A test process's mappings (the model's pages of its address space). */
static int build_mappings(const struct test *t, int proc, char *why, size_t whylen)
{
	char path[TOKEN_LEN];
	for (int i = 0; i < t->nmaps; i++) {
		const struct map_spec *m = &t->maps[i];
		if (m->proc != proc)
			continue;
		int prot = PROT_READ | (m->writable ? PROT_WRITE : 0);
		void *got;
		if (m->anon) {
			/* Filled (so populated) while writable, then given its final protection. */
			got = mmap((void *)m->va, SC_UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			if (got != MAP_FAILED) {
				memset(got, m->data, SC_UNIT);
				if (!m->writable)
					mprotect(got, SC_UNIT, prot);
			}
		} else {
			inode_path(t, m->inode, path, sizeof path);
			int fd = open(path, O_RDWR);
			got = fd < 0 ? MAP_FAILED : mmap((void *)m->va, SC_UNIT, prot, MAP_SHARED | MAP_FIXED, fd, (off_t)m->off * SC_UNIT);
			if (fd >= 0)
				close(fd);
		}
		if (got == MAP_FAILED) {
			snprintf(why, whylen, "proc %d map %#lx: %s", proc, m->va, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* The fds a test process will hold, parked at PARK_FD + k until its table is cleared. */
struct parked {
	int n, targets[SC_MAX_FDS + 2 * SC_MAX_SOCKETS], cloexec[SC_MAX_FDS + 2 * SC_MAX_SOCKETS];
};

static int park(struct parked *parked, int src, int target, int cloexec)
{
	if (dup2(src, PARK_FD + parked->n) < 0)
		return -1;
	close(src);
	parked->cloexec[parked->n] = cloexec;
	parked->targets[parked->n++] = target;
	return 0;
}

static int park_files_and_pipes(const struct test *t, int proc, struct parked *parked, char *why, size_t whylen)
{
	char path[TOKEN_LEN];
	for (int i = 0; i < t->nfds; i++) {
		const struct fd_spec *f = &t->fds[i];
		if (f->proc != proc)
			continue;
		int src;
		if (f->is_pipe) {
			src = coordinator_fd(pipe_ends[f->pipe][f->write_end]);
		} else {
			inode_path(t, f->inode, path, sizeof path);
			src = open(path, O_RDWR);
			if (src >= 0 && lseek(src, (off_t)f->off * SC_UNIT, SEEK_SET) < 0)
				src = -1;
		}
		if (src < 0 || park(parked, src, f->fd, f->cloexec) < 0) {
			snprintf(why, whylen, "proc %d fd %d: %s", proc, f->fd, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int park_sockets(const struct test *t, int proc, struct parked *parked, char *why, size_t whylen)
{
	for (int i = 0; i < t->nsocks; i++) {
		int ends[2];
		if (socket_fds(i, &ends[0], &ends[1]) < 0) {
			snprintf(why, whylen, "proc %d socket %d: %s", proc, i, strerror(errno));
			return -1;
		}
		for (int e = 0; e < 2; e++) {
			if (park(parked, ends[e], SOCK_FD_BASE + 2 * i + e, 0) < 0) {
				snprintf(why, whylen, "proc %d socket %d: %s", proc, i, strerror(errno));
				return -1;
			}
		}
	}
	return 0;
}

/* In a test process: rebuilds its fd table and mappings exactly as the model says. */
int build_process(const struct test *t, int proc, char *why, size_t whylen)
{
	struct parked parked = {.n = 0};
	if (build_mappings(t, proc, why, whylen) < 0 || park_files_and_pipes(t, proc, &parked, why, whylen) < 0 ||
	    park_sockets(t, proc, &parked, why, whylen) < 0)
		return -1;
	/* Every fd below fd_base is held on /dev/null, so lowest-fd choices match the model. */
	for (int fd = 0; fd < SC_FD_BASE; fd++)
		dup2(DEVNULL_FD, fd);
	close_range(SC_FD_BASE, PARK_FD - 1, 0);
	close_range(PARK_FD + parked.n, ~0U, 0);
	/* dup2 clears close-on-exec: set after it. */
	for (int k = 0; k < parked.n; k++)
		if (dup2(PARK_FD + k, parked.targets[k]) < 0 ||
		    (parked.cloexec[k] && fcntl(parked.targets[k], F_SETFD, FD_CLOEXEC) < 0)) {
			snprintf(why, whylen, "proc %d fd %d: %s", proc, parked.targets[k], strerror(errno));
			return -1;
		}
	if (parked.n)
		close_range(PARK_FD, PARK_FD + parked.n - 1, 0);
	return 0;
}
