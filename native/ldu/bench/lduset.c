/*
 * lduset.c - the LDU benchmark: an rmap-like set under an update-heavy load.
 *
 * Every worker owns a ring of objects and keeps `window` of them in the set:
 * an update alternately inserts the next object of its ring and removes its
 * oldest one, as fork and exit add and drop mappings of a shared file.  With
 * probability 1 - update_pct/100 an operation is a walk over the whole set
 * instead (an rmap walk).  The set also holds `shared` objects that are never
 * updated (the mappings of long-lived processes).  --mode picks the set:
 * ldu-percore, ldu-global, rwlock or harris.
 *
 *   lduset --threads --workers 2 --duration 5 --mode ldu-percore --param update_pct=90
 *
 * Parameters: update_pct (0..100, default 90), window (default 16),
 * shared (default 64).  Besides ops/s the JSON `extra` reports, as shares of
 * the workers' wall time in the measured window:
 *   idle_pct       neither running nor runnable, i.e. asleep in a lock: wall time
 *                  - thread CPU time - runqueue wait (/proc/thread-self/schedstat);
 *                  in a VM it also holds time the hypervisor stole
 *   preempted_pct  runnable but waiting for a CPU (other load on the machine)
 *   lock_wait_pct  inside lock acquisitions that had to block (measured by the set)
 * plus the raw sums behind them.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "objset.h"

static const char *const modes[] = {"ldu-percore", "ldu-global", "rwlock", "harris", NULL};

enum { SUM_UPDATES, SUM_WALKS, SUM_CPU_NS, SUM_RUNQUEUE_NS, SUM_LOCK_WAIT_NS, SUM_LOGS_APPLIED };
static const char *const sums[] = {"updates", "walks", "cpu_ns", "runqueue_ns", "lock_wait_ns",
                                   "logs_applied", NULL};

/* Scheduler times and the set's counters are folded into the harness's sums
 * this often: reading schedstat is a system call. */
#define FOLD_EVERY_OPS 1024

struct bench {
    struct objset *set;
    long update_pct, window, shared;
    struct objset_worker *setup_worker;
    struct set_object *shared_objects;
};

struct worker_state {
    struct objset_worker *handle;
    long ring_size, head, tail, updates;
    uint64_t random;
    int schedstat_fd;          /* this thread's /proc/thread-self/schedstat */
    uint64_t cpu_ns_folded, runqueue_ns_folded;
    struct objset_stats stats_folded;
    struct set_object ring[];  /* 2 * window objects; `window` of them in the set */
};

/* schedstat holds "<ns on CPU> <ns runnable but waiting> <timeslices>"; its
 * first field lags (it is brought up to date only at scheduler ticks), so CPU
 * time comes from the thread clock instead. */
static void read_times(int schedstat_fd, uint64_t *cpu_ns, uint64_t *runqueue_ns)
{
    char text[128];
    ssize_t length = pread(schedstat_fd, text, sizeof text - 1, 0);
    if (length <= 0)
        hc_fail("cannot read /proc/thread-self/schedstat");
    text[length] = 0;
    if (sscanf(text, "%*s %" SCNu64, runqueue_ns) != 1)
        hc_fail("unexpected /proc/thread-self/schedstat: %s", text);
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    *cpu_ns = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void process_setup(struct hc_run *run)
{
    struct bench *b = calloc(1, sizeof *b);
    b->update_pct = hc_param_long(run, "update_pct", 90);
    b->window = hc_param_long(run, "window", 16);
    b->shared = hc_param_long(run, "shared", 64);
    if (b->update_pct < 0 || b->update_pct > 100)
        hc_fail("--param update_pct=%ld: expected 0 to 100", b->update_pct);
    if (b->window < 1 || b->window > 1 << 20)
        hc_fail("--param window=%ld: expected 1 to 1048576", b->window);
    if (b->shared < 0 || b->shared > 1 << 20)
        hc_fail("--param shared=%ld: expected 0 to 1048576", b->shared);
    b->set = objset_create(run->mode, (unsigned)run->workers + 1);
    if (!b->set)
        hc_fail("cannot create a %s set", run->mode);
    b->setup_worker = objset_attach(b->set, 0);
    b->shared_objects = alloc_aligned_zeroed((size_t)b->shared * sizeof *b->shared_objects);
    if (!b->setup_worker || (b->shared && !b->shared_objects))
        hc_fail("out of memory setting up the set");
    for (long i = 0; i < b->shared; i++) {
        /* keys interleave with the workers' objects, as mappings do */
        set_object_init(&b->shared_objects[i], (uint64_t)i * 1000);
        objset_insert(b->setup_worker, &b->shared_objects[i]);
    }
    run->data = b;
}

static void worker_setup(struct hc_worker *w)
{
    struct bench *b = w->run->data;
    /* On whole cache lines of its own: workers' states must not share a line. */
    struct worker_state *s = alloc_aligned_zeroed(sizeof(struct worker_state) +
                                                  2 * (size_t)b->window * sizeof(struct set_object));
    if (!s)
        hc_fail("worker %d: out of memory", w->index);
    s->ring_size = 2 * b->window;
    /* its own queue (0 is the setup's): w->cpu repeats when workers outnumber the
     * host's CPUs, as the emulated CPUs of scalecheck sharing do */
    s->handle = objset_attach(b->set, (unsigned)w->index + 1);
    if (!s->handle)
        hc_fail("worker %d: cannot attach to the set", w->index);
    for (long i = 0; i < s->ring_size; i++)
        set_object_init(&s->ring[i], (uint64_t)(i * 997 + w->index * 31) % ((uint64_t)b->shared * 1000 + 1000));
    for (s->head = 0; s->head < b->window; s->head++)
        objset_insert(s->handle, &s->ring[s->head]);
    s->random = 0x9e3779b97f4a7c15ull * (uint64_t)(w->index + 1);
    s->schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (s->schedstat_fd < 0)
        hc_fail("cannot open /proc/thread-self/schedstat (needed for idle time)");
    read_times(s->schedstat_fd, &s->cpu_ns_folded, &s->runqueue_ns_folded);
    w->data = s;
}

static void count_visit(struct set_object *object, void *arg)
{
    (void)object;
    (*(size_t *)arg)++;
}

static void fold_counters(struct hc_worker *w, struct worker_state *s)
{
    uint64_t cpu_ns, runqueue_ns;
    read_times(s->schedstat_fd, &cpu_ns, &runqueue_ns);
    const struct objset_stats *stats = objset_worker_stats(s->handle);
    hc_add_extra(w, SUM_CPU_NS, cpu_ns - s->cpu_ns_folded);
    hc_add_extra(w, SUM_RUNQUEUE_NS, runqueue_ns - s->runqueue_ns_folded);
    hc_add_extra(w, SUM_LOCK_WAIT_NS, stats->lock_wait_ns - s->stats_folded.lock_wait_ns);
    hc_add_extra(w, SUM_LOGS_APPLIED, stats->logs_applied - s->stats_folded.logs_applied);
    s->cpu_ns_folded = cpu_ns;
    s->runqueue_ns_folded = runqueue_ns;
    s->stats_folded = *stats;
}

static void worker(struct hc_worker *w)
{
    struct bench *b = w->run->data;
    struct worker_state *s = w->data;
    uint64_t updates = 0, walks = 0, ops = 0;
    while (hc_running(w)) {
        s->random ^= s->random >> 12;
        s->random ^= s->random << 25;
        s->random ^= s->random >> 27;
        uint64_t draw = (s->random * 0x2545f4914f6cdd1dull) >> 32;
        if ((long)(draw % 100) < b->update_pct) {
            if (s->updates++ % 2 == 0)
                objset_insert(s->handle, &s->ring[s->head++ % s->ring_size]);
            else
                objset_remove(s->handle, &s->ring[s->tail++ % s->ring_size]);
            updates++;
        } else {
            size_t visited = 0;
            objset_walk(s->handle, count_visit, &visited);
            if (visited < (size_t)b->shared)
                hc_fail("walk saw %zu objects, fewer than the %ld permanent ones", visited, b->shared);
            walks++;
        }
        hc_count(w);
        if (++ops % FOLD_EVERY_OPS == 0) {
            hc_add_extra(w, SUM_UPDATES, updates);
            hc_add_extra(w, SUM_WALKS, walks);
            updates = walks = 0;
            fold_counters(w, s);
        }
    }
}

/* Out of the loop's traced region: what the workers do to leave the set empty is not what
 * they do per operation. */
static void worker_teardown(struct hc_worker *w)
{
    struct worker_state *s = w->data;
    while (s->tail < s->head)
        objset_remove(s->handle, &s->ring[s->tail++ % s->ring_size]);
    objset_barrier(s->handle);
    objset_detach(s->handle);
    close(s->schedstat_fd);
    free(s);
}

static void report(struct hc_run *run)
{
    struct bench *b = run->data;
    double worker_ns = hc_measured_seconds(run) * 1e9 * run->workers;
    double cpu_ns = (double)hc_measured_extra(run, SUM_CPU_NS);
    double runqueue_ns = (double)hc_measured_extra(run, SUM_RUNQUEUE_NS);
    double idle_pct = 100.0 * (1.0 - (cpu_ns + runqueue_ns) / worker_ns);
    /* Folding every FOLD_EVERY_OPS operations blurs the window's edges a little. */
    hc_extra_number(run, "idle_pct", idle_pct < 0 ? 0 : idle_pct);
    hc_extra_number(run, "preempted_pct", 100.0 * runqueue_ns / worker_ns);
    hc_extra_number(run, "lock_wait_pct",
                    100.0 * (double)hc_measured_extra(run, SUM_LOCK_WAIT_NS) / worker_ns);
    hc_extra_number(run, "update_pct", (double)b->update_pct);
    hc_extra_number(run, "window", (double)b->window);
    hc_extra_number(run, "shared", (double)b->shared);
}

static void process_teardown(struct hc_run *run)
{
    struct bench *b = run->data;
    for (long i = 0; i < b->shared; i++)
        objset_remove(b->setup_worker, &b->shared_objects[i]);
    objset_barrier(b->setup_worker);
    objset_detach(b->setup_worker);
    objset_destroy(b->set);
    free(b->shared_objects);
    free(b);
}

const struct hc_benchmark hc_benchmark = {
    .name = "lduset",
    .description = "rmap-like set: workers insert/remove their own objects and walk the set (LDU vs rwlock vs Harris)",
    .modes = modes,
    .kind = HC_THREADS_ONLY,
    .extra_sums = sums,
    .process_setup = process_setup,
    .worker_setup = worker_setup,
    .worker = worker,
    .worker_teardown = worker_teardown,
    .report = report,
    .process_teardown = process_teardown,
};
