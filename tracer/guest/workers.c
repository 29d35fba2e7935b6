/* The test processes, kept from one repeat to the next. Forking a fresh pair for every
 * repeat (the fork, the copy-on-write faults after it, the exit and the reaping) was three
 * quarters of the guest's work per test. A kept process gives back what a repeat gave it
 * (its fds, the model's pages, its participants' thread; only the driver's own pages
 * stay, the participants' and the second thread's stack, coord.c) and then builds the
 * next repeat's state just as a fresh child would: on CPU 0, in the repeat's directory,
 * from the coordinator's files, and with the coordinator's own open files where a child
 * would have inherited them (taken through a pidfd: the same open file, as a fork shares
 * it). A process whose call exec'd, a failed setup, a hang or a timeout ends the kept
 * processes; the next repeat forks new ones, between repeats, never while a call's region
 * is open. With settings state_check=1 every repeat also builds a fresh child the old way
 * and compares the two (statecheck.c). */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver.h"

/* Shared between the coordinator and the kept processes (MAP_SHARED). */
struct worker_control {
	int jobs[2];   /* jobs given to each kept process so far (futex words) */
	int released;  /* kept processes that gave the last repeat's state back */
	struct state_digest fresh[2], reused[2];
	struct job job;
};

static struct worker_control *wc;
static pid_t workers[2];
int coordinator_pidfd = -1;

void workers_init(void)
{
	wc = mmap(NULL, sizeof *wc, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (wc == MAP_FAILED)
		fatal("mmap worker control");
}

int coordinator_fd(int fd)
{
	if (coordinator_pidfd < 0)
		return dup(fd);
	return (int)syscall(SYS_pidfd_getfd, coordinator_pidfd, fd, 0);
}

/* A fork of the coordinator, which runs as a batch task (coordination_init): a test
 * process runs with the normal policy, as a child of a normal process would. */
static void as_normal_task(void)
{
	struct sched_param param = {.sched_priority = 0};
	if (sched_setscheduler(0, SCHED_OTHER, &param) < 0)
		fatal("sched_setscheduler (a test process as a normal task)");
}

static void release_state(void)
{
	if (close_range(0, ~0U, 0) < 0 || munmap((void *)SC_MAP_BASE, MODEL_PAGES * SC_UNIT) < 0)
		fatal("a kept test process giving its state back");
}

/* The pidfd and the /dev/null fd land on the lowest fds, which build_process then
 * points at /dev/null: it closes every fd it did not place. */
static int take_state(const struct job *job, int proc, char *why, size_t whylen)
{
	int devnull;
	coordinator_pidfd = (int)syscall(SYS_pidfd_open, getppid(), 0);
	if (coordinator_pidfd < 0 || chdir(TEST_DIRS[job->rep % 2]) < 0 || (devnull = coordinator_fd(DEVNULL_FD)) < 0 ||
	    dup2(devnull, DEVNULL_FD) < 0 || close(devnull) < 0)
		fatal("a kept test process taking the coordinator's fds");
	int built = build_process(&job->test, proc, why, whylen);
	coordinator_pidfd = -1;
	return built;
}

static void __attribute__((noreturn)) worker_main(int proc, int seen)
{
	pid_t me = getpid();
	char why[RESULT_LEN];
	as_normal_task();
	release_state();
	for (;; seen++) {
		wait_at_least(&wc->jobs[proc], seen + 1, 0);
		const struct job *job = &wc->job;
		if (take_state(job, proc, why, sizeof why) < 0) {
			report_setup_error(why);
			_exit(1);
		}
		if (settings.state_leak)
			leak_state(job->test.index);
		if (settings.state_check)
			state_digest(&wc->reused[proc]);
		run_process_calls(&job->test, proc, job->tag_base);
		/* The exec's stand-in, or a process whose exec failed: not kept. */
		if (getpid() != me || process_execs(&job->test, proc))
			_exit(0);
		release_state();
		__atomic_add_fetch(&wc->released, 1, __ATOMIC_SEQ_CST);
		futex_wake(&wc->released);
	}
}

/* settings state_check=1: the process `proc` of the job, built by a fresh child. */
static void fresh_digest(int proc)
{
	pid_t twin = fork();
	if (twin < 0)
		fatal("fork (a fresh test process to compare with)");
	if (twin == 0) {
		char why[RESULT_LEN];
		as_normal_task();
		if (build_process(&wc->job.test, proc, why, sizeof why) < 0)
			_exit(1);
		state_digest(&wc->fresh[proc]);
		_exit(0);
	}
	if (waitpid(twin, NULL, 0) != twin)
		fatal("waitpid (a fresh test process to compare with)");
}

void set_job(const struct test *t, int rep, long tag_base)
{
	wc->job.test = *t;
	wc->job.rep = rep;
	wc->job.tag_base = tag_base;
	wc->released = 0;
	memset(wc->fresh, 0, sizeof wc->fresh);
	memset(wc->reused, 0, sizeof wc->reused);
}

/* The kept process wakes on CPU 0, where a fresh child would build its state: its
 * affinity is set while it sleeps, so no migration is needed. */
void give_job(int proc)
{
	cpu_set_t cpu0;
	if (settings.state_check)
		fresh_digest(proc);
	int seen = wc->jobs[proc];
	if (!workers[proc]) {
		workers[proc] = fork();
		if (workers[proc] < 0)
			fatal("fork");
		if (workers[proc] == 0)
			worker_main(proc, seen);
	}
	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	if (sched_setaffinity(workers[proc], sizeof cpu0, &cpu0) < 0)
		fatal("sched_setaffinity (a kept test process to CPU 0)");
	set_and_wake(&wc->jobs[proc], seen + 1);
}

int check_jobs(const int engaged[2], char *why, size_t whylen)
{
	for (int proc = 0; proc < 2; proc++)
		if (engaged[proc] && state_difference(&wc->fresh[proc], &wc->reused[proc], why, whylen))
			return -1;
	return 0;
}

void kill_workers(void)
{
	for (int proc = 0; proc < 2; proc++)
		if (workers[proc] > 0)
			kill(workers[proc], SIGKILL);
	for (int proc = 0; proc < 2; proc++)
		if (workers[proc] > 0)
			waitpid(workers[proc], NULL, 0);
	workers[0] = workers[1] = 0;
}

void end_jobs(const struct test *t, const int engaged[2], int limit_ms)
{
	int kept = 0;
	for (int proc = 0; proc < 2; proc++) {
		if (!engaged[proc])
			continue;
		if (!process_execs(t, proc)) {
			kept++;
			continue;
		}
		waitpid(workers[proc], NULL, 0);
		workers[proc] = 0;
	}
	if (wait_at_least(&wc->released, kept, limit_ms) < 0)
		kill_workers();
}
