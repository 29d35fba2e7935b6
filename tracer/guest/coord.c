/* Coordination: for each repeat of a test, the coordinator (PID 1) builds the shared
 * state, forks the model's two processes, lets call A run on CPU 1 and then call B on
 * CPU 2, and reports both results. Hand-offs are futex waits on a shared control page:
 * sleeping, not spinning (spinning vCPUs starve a small host). */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <linux/mempolicy.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"

#define PREFAULTED_STACK (32 * 1024)

/* Shared between the coordinator and the test processes (MAP_SHARED): futex words and
 * results. Executors only touch it outside their marked regions. `prepared`: the
 * coordinator's last steps before call A are done (A already waits for its clock tick
 * meanwhile, see run_repeat). */
struct control {
	int ready, go[2], done[2], finish, prepared;
	char setup_error[RESULT_LEN];
	char result[2][RESULT_LEN];
};

static struct control *ctl;

void coordination_init(void)
{
	ctl = mmap(NULL, sizeof *ctl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED)
		fatal("mmap control");
}

static void futex_wake(int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}

static void set_and_wake(int *word, int value)
{
	__atomic_store_n(word, value, __ATOMIC_SEQ_CST);
	futex_wake(word);
}

long now_ms(void)
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
	char *pages = mmap(NULL, 3 * SC_UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (pages == MAP_FAILED)
		fatal("mmap participant pages");
	p->names = pages;
	p->data = (unsigned char *)pages + SC_UNIT;
	p->st = (struct stat *)(pages + 2 * SC_UNIT);
	p->pipefds = (int *)(pages + 2 * SC_UNIT + 2048);
	p->untouched = mmap(NULL, SC_UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->untouched == MAP_FAILED)
		fatal("mmap participant pages");
	prefault_stack();
	__atomic_add_fetch(&ctl->ready, 1, __ATOMIC_SEQ_CST);
	futex_wake(&ctl->ready);
	wait_at_least(&ctl->go[p->side], 1, 0);
	do
		wait_for_clock_tick();
	while (!__atomic_load_n(&ctl->prepared, __ATOMIC_SEQ_CST));
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

void run_repeat(const struct test *t, int rep, const struct settings *s)
{
	int report = rep != SC_WARMUP_REP;
	char why[RESULT_LEN];
	long tag_base = (t->index << SC_TAG_INDEX_SHIFT) | (rep << SC_TAG_REP_SHIFT);
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
		close_shared_fds(t);
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
	if (wait_at_least(&ctl->ready, forked + 2, s->timeout_ms) < 0 || ctl->ready >= 100) {
		if (report)
			out("X %ld %d %s\n", t->index, rep, ctl->setup_error[0] ? ctl->setup_error : "setup timed out");
		kill_and_reap(pids, 2);
		close_shared_fds(t);
		return;
	}
	/* Call A starts waiting for its clock tick (on average half a tick) while the
	 * coordinator finishes the setup; it starts after the first tick that follows. */
	set_and_wake(&ctl->go[0], 1);
	/* Inodes with no name stay alive only through the fds and mappings just made. */
	for (int i = 0; i < t->ninodes; i++) {
		if (t->inodes[i].nlink == 0) {
			char path[TOKEN_LEN];
			inode_path(t, i, path, sizeof path);
			unlink(path);
		}
	}
	drain_lru_batches();
	__atomic_store_n(&ctl->prepared, 1, __ATOMIC_SEQ_CST);
	if (wait_at_least(&ctl->done[1], 1, s->timeout_ms) < 0) {
		if (report)
			out("H %ld %d %s\n", t->index, rep, ctl->done[0] ? "call B did not return" : "call A did not return");
		kill_and_reap(pids, 2);
		close_shared_fds(t);
		return;
	}
	if (report)
		out("R %ld %d %s %s\n", t->index, rep, ctl->result[0], ctl->result[1]);
	set_and_wake(&ctl->finish, 1);
	for (int i = 0; i < 2; i++)
		if (pids[i] > 0)
			waitpid(pids[i], NULL, 0);
	close_shared_fds(t);
}
