/* Coordination: for each repeat of a test, the coordinator (PID 1) builds the shared
 * state, has the model's two processes (workers.c) build theirs, lets call A run on CPU 1
 * and then call B on CPU 2 (or B first, see first_side), and reports both results.
 * Hand-offs are futex waits on a shared control page: sleeping, not spinning (spinning
 * vCPUs starve a small host). */
#define _GNU_SOURCE
#include <linux/futex.h>
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
 * results. Executors only touch it outside their marked regions. */
struct control {
	int ready, go[2], done[2], finish;
	/* Each side's participant (thread id), moved to its CPU by the coordinator. */
	pid_t participant[2];
	/* The coarse clock after the last timestamp a call could find: the setup's (read by
	 * the coordinator before the go), then the first call's (read after its region). */
	struct timespec last_stamp;
	char setup_error[RESULT_LEN];
	char result[2][RESULT_LEN];
};

static struct control *ctl;
/* The coordinator's page for drain_own_lru_batches. */
static void *coordinator_untouched;

void coordination_init(void)
{
	ctl = mmap(NULL, sizeof *ctl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	coordinator_untouched = mmap(NULL, SC_UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED || coordinator_untouched == MAP_FAILED)
		fatal("mmap control");
	workers_init();
	setup_init();
	/* A batch task's wake-up never preempts the task running (CFS's wake-up preemption
	 * is for SCHED_OTHER only): a test process that reports ready and wakes the
	 * coordinator goes on to its sleep first. Preempted in between, it would still be
	 * runnable when the coordinator moves it to its call's CPU, and would run there once
	 * only to fall asleep: a wake-up of that vCPU more per repeat (about one repeat in
	 * four). The test processes take the normal policy back (workers.c). */
	struct sched_param param = {.sched_priority = 0};
	if (sched_setscheduler(0, SCHED_BATCH, &param) < 0)
		fatal("sched_setscheduler (the coordinator as a batch task)");
}

void futex_wake(int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}

void set_and_wake(int *word, int value)
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
int wait_at_least(int *word, int target, int limit_ms)
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

/* Each participant is moved to its CPU while it sleeps before its go, so the go's
 * wake-up starts it there: a task that moves itself while running goes through the
 * stopper thread of its CPU, one more hand-off, with a wake-up of the target CPU to get
 * there and then another to start the call. Its pages are mapped before, on CPU 0 with
 * the rest of the setup, and so are in CPU 0's LRU batch that run_repeat drains. */
static void move_participants_to_their_cpus(void)
{
	for (int side = 0; side < 2; side++) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(1 + side, &set);
		if (sched_setaffinity(ctl->participant[side], sizeof set, &set) < 0)
			fatal("sched_setaffinity (a participant to its CPU)");
	}
}

static int same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Each call finds the coarse clock the kernel stamps files with past every timestamp
 * before it (the setup's, the first call's), so whether it finds them current (and so
 * leaves mtime, ctime or atime alone) is the same in every repeat. The clock moves at a
 * tick (every 4 ms at HZ=250, a quarter of a test's time if waited for); setting the
 * real-time clock moves it at once. It is set to its own fine-grained value, read just
 * before: later than every earlier timestamp, and off the true time by the few
 * microseconds between the read and the set. Setting the clock updates the timekeeper,
 * the vDSO's copy and every CPU's timer offsets before it returns, so no call finds any
 * of that work left for it; no test's timer runs on the real-time clock. */
static void move_clock_past(const struct timespec *stamp)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	if (!same_time(&now, stamp))
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	if (clock_settime(CLOCK_REALTIME, &now) < 0)
		fatal("clock_settime (moving the coarse clock past the last timestamp)");
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	if (same_time(&now, stamp))
		fatal("clock_settime left the coarse clock at the last timestamp");
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

/* A side's pages in this test process, zeroed, as fresh ones would be. They are mapped
 * (present and private, on CPU 0 with the rest of the setup) by the process's first
 * participant of that side and kept with the process (workers.c): mapping, populating and
 * unmapping them every repeat cost an eighth of QEMU's CPU without the plugin, a 25th with
 * it (bench/results/tracer.md, 2026-12-07 16:00). */
static char *participant_pages(int side)
{
	static int mapped[2];
	char *pages = (char *)(DRIVER_PAGES_BASE + (unsigned long)side * DRIVER_SIDE_PAGES * SC_UNIT);
	if (mapped[side]) {
		memset(pages, 0, 3 * SC_UNIT);
		return pages;
	}
	if (mmap(pages, 3 * SC_UNIT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_POPULATE,
		 -1, 0) != pages ||
	    mmap(pages + DRIVER_UNTOUCHED_PAGE * SC_UNIT, SC_UNIT, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != pages + DRIVER_UNTOUCHED_PAGE * SC_UNIT)
		fatal("mmap participant pages");
	mapped[side] = 1;
	return pages;
}

/* The second participant thread's attributes: its stack, mapped by the process's first
 * such thread and kept with the process like the participants' pages. glibc maps a stack
 * of 8 MiB for each thread otherwise and unmaps it at the join: a flush of the whole TLB
 * on the joining CPU, and a wake-up of the other call's CPU to drop its lazy hold of the
 * process's page tables (bench/results/tracer.md, 2026-12-07 19:30). */
static pthread_attr_t *second_thread_attr(void)
{
	static pthread_attr_t attr;
	static int made;
	if (made)
		return &attr;
	void *stack = mmap((void *)DRIVER_STACK, DRIVER_STACK_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (stack != (void *)DRIVER_STACK || pthread_attr_init(&attr) != 0 ||
	    pthread_attr_setstack(&attr, stack, DRIVER_STACK_SIZE) != 0)
		fatal("mmap the second participant's stack");
	made = 1;
	return &attr;
}

static void *participant_main(void *arg)
{
	struct participant *p = arg;
	ctl->participant[p->side] = (pid_t)syscall(SYS_gettid);
	char *pages = participant_pages(p->side);
	p->names = pages;
	p->data = (unsigned char *)pages + SC_UNIT;
	p->st = (struct stat *)(pages + 2 * SC_UNIT);
	p->pipefds = (int *)(pages + 2 * SC_UNIT + 2048);
	p->untouched = pages + DRIVER_UNTOUCHED_PAGE * SC_UNIT;
	prefault_stack();
	__atomic_add_fetch(&ctl->ready, 1, __ATOMIC_SEQ_CST);
	futex_wake(&ctl->ready);
	wait_at_least(&ctl->go[p->side], 1, 0);
	move_clock_past(&ctl->last_stamp);
	run_call(p, ctl->result[p->side], RESULT_LEN);
	if (p->side == first_side(p->t)) {
		clock_gettime(CLOCK_REALTIME_COARSE, &ctl->last_stamp);
		set_and_wake(&ctl->go[1 - p->side], 1);
	} else {
		/* The second call ends the repeat's calls: its process goes on to give its
		 * state back without sleeping until the coordinator says so (run_repeat). */
		set_and_wake(&ctl->finish, 1);
	}
	set_and_wake(&ctl->done[p->side], 1);
	return NULL;
}

void report_setup_error(const char *why)
{
	snprintf(ctl->setup_error, RESULT_LEN, "%s", why);
	__atomic_add_fetch(&ctl->ready, 100, __ATOMIC_SEQ_CST);
	futex_wake(&ctl->ready);
}

/* In test process `proc`, its state built: its calls (two calls of one process run as
 * two threads of it), then waiting for the repeat's end; the participants' thread is gone
 * when it returns (their pages are kept), unless the process exec'd (its stand-in
 * returns). */
void run_process_calls(const struct test *t, int proc, long tag_base)
{
	struct participant parts[2];
	pthread_t thread;
	int mine[2], nmine = 0;
	for (int side = 0; side < 2; side++) {
		if (t->calls[side].proc != proc)
			continue;
		parts[side] = (struct participant){.side = side, .tag = tag_base | side, .t = t, .call = &t->calls[side]};
		mine[nmine++] = side;
	}
	if (nmine == 2 && pthread_create(&thread, second_thread_attr(), participant_main, &parts[mine[1]]) != 0)
		fatal("pthread_create");
	__atomic_add_fetch(&ctl->ready, 1, __ATOMIC_SEQ_CST);
	futex_wake(&ctl->ready);
	if (nmine >= 1)
		participant_main(&parts[mine[0]]);
	wait_at_least(&ctl->finish, 1, 0);
	if (process_execs(t, proc))
		return;
	if (nmine == 2 && pthread_join(thread, NULL) != 0)
		fatal("pthread_join");
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

/* The ready reports a test process makes: its own, and one per participant of it. */
static int process_reports(const struct test *t, int proc)
{
	int reports = 1;
	for (int side = 0; side < 2; side++)
		reports += t->calls[side].proc == proc;
	return reports;
}

/* Empties this CPU's LRU page batches: MADV_COLD drains them before it walks the range,
 * here one page never touched, so it has nothing else to do. Without it, a call that
 * fills its CPU's batch flushes it onto the shared LRU lists, or not, depending on how
 * many pages the work before had left there. */
void drain_own_lru_batches(void *untouched_page)
{
	if (madvise(untouched_page, SC_UNIT, MADV_COLD) < 0)
		fatal("madvise MADV_COLD (draining this CPU's LRU batches)");
}

/* Reports why the repeat's setup failed (X) and cleans up. */
static int setup_failed(const struct test *t, int rep, const char *why)
{
	if (rep != SC_WARMUP_REP)
		sc_wire_setup_failed(t->index, rep, why);
	kill_workers();
	close_shared_fds(t);
	return -1;
}

/* The repeat's files and pipes, then its test processes, each reporting ready; returns 0,
 * or -1 after reporting why (X) and cleaning up. */
static int start_repeat(const struct test *t, int rep, const struct sc_wire_settings *s, int engaged[2])
{
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
	if (build_files_and_pipes(t, why, sizeof why) < 0)
		return setup_failed(t, rep, why);
	set_job(t, rep, tag_base);
	int reports = 0;
	for (int proc = 0; proc < 2; proc++) {
		/* A process with no call, no fds and no mappings holds no kernel state a call
		 * could touch: it need not take part. */
		engaged[proc] = process_matters(t, proc);
		if (!engaged[proc])
			continue;
		/* One test process at a time on CPU 0, the coordinator asleep meanwhile: given
		 * both jobs at once, the woken processes and the runnable coordinator could take
		 * turns at clock ticks, each turn a switch of address space (which empties QEMU's
		 * TLB and its jump cache; 4.9 -> 4.6 per repeat on CPU 0, bench/results/tracer.md,
		 * 2026-12-07 19:30), and the second process's setup could start amid the first's. */
		give_job(proc);
		reports += process_reports(t, proc);
		if (wait_at_least(&ctl->ready, reports, s->timeout_ms) < 0 || ctl->ready >= 100)
			return setup_failed(t, rep, ctl->setup_error[0] ? ctl->setup_error : "setup timed out");
	}
	move_participants_to_their_cpus();
	if (s->state_check && check_jobs(engaged, why, sizeof why) < 0)
		return setup_failed(t, rep, why);
	return 0;
}

/* Inodes with no name stay alive only through the fds and mappings just made. */
static void unlink_nameless_inodes(const struct test *t)
{
	for (int i = 0; i < t->ninodes; i++) {
		if (t->inodes[i].nlink == 0) {
			char path[TOKEN_LEN];
			inode_path(t, i, path, sizeof path);
			unlink(path);
		}
	}
}

void run_repeat(const struct test *t, int rep, const struct sc_wire_settings *s)
{
	int report = rep != SC_WARMUP_REP;
	int engaged[2] = {0, 0};
	if (start_repeat(t, rep, s, engaged) < 0)
		return;
	unlink_nameless_inodes(t);
	/* The unlinks (a directory's and an inode's times) and the test processes' setup (a
	 * mapping's atime) are the setup's last timestamps. */
	clock_gettime(CLOCK_REALTIME_COARSE, &ctl->last_stamp);
	/* The setup ran on CPU 0 (the coordinator's only CPU, and the test processes' and
	 * their participants' until these move to their CPUs): a page it wrote may still sit
	 * in CPU 0's batch instead of on the LRU. CPUs 1 and 2 each drain their own just before their call
	 * (run_call); what waits in the other call's CPU's batch meanwhile is that side's
	 * own pages and the previous repeat's (of removed files and exited processes), which
	 * no call reaches. Draining only this CPU saves the drain of every CPU
	 * (lru_add_drain_all): a work item and its wake-ups on each call's CPU. */
	drain_own_lru_batches(coordinator_untouched);
	/* Call A runs first, then B; or B first (first_side, ops.c). */
	int first = first_side(t);
	set_and_wake(&ctl->go[first], 1);
	if (wait_at_least(&ctl->done[1 - first], 1, s->timeout_ms) < 0) {
		if (report)
			sc_wire_hung(t->index, rep, ctl->done[first] ? 1 - first : first);
		kill_workers();
		close_shared_fds(t);
		return;
	}
	if (report)
		sc_wire_results(t->index, rep, ctl->result[0], ctl->result[1]);
	/* The second call's participant has set ctl->finish: the processes are giving
	 * their state back. */
	end_jobs(t, engaged, s->timeout_ms);
	close_shared_fds(t);
}
