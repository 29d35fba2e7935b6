/*
 * empty: the harness's own ceiling - a loop that only counts (bench/harness_overhead.py).
 * Mode "shared-line" also stores to one cache line all workers share, the false-sharing
 * contrast that shows what the per-worker counter slots avoid.  Mode "pass-line" passes
 * that line from worker to worker in turn: each counted operation moves it once from the
 * last worker's cache to the next one's, so at 2 workers the time per operation is what
 * one transfer of a line between their CPUs costs (catalog entry line-transfer; the
 * tracer counts a load's transfer and a store's invalidation per pass).  Mode
 * "publish-line" has worker 0 store to that line at every operation while the others
 * only load it: the writer holds the line beside the readers, so its stores move no data
 * but invalidate their copies (the tracer's invalidations, bench/sharing.py).  Mode
 * "split-pair" has the even workers store to the first line of a 128-byte-aligned pair and
 * the odd ones to the second: no line is shared, but x86's L2 spatial prefetcher fetches a
 * line's pair with it (the tracer's pair transfers; catalog entry pair-split).  Mode
 * "atomic-line" has every worker increment the shared word atomically (a lock-prefixed
 * add) at every operation: the line moves by atomic read-modify-writes only (the tracer's
 * kinds).
 *
 * The "*-work" modes measure what one move of each kind costs a core that has other work
 * beside it (a store waits in the store buffer, a load feeds the work that follows):
 * every operation makes one access and then `--param work=N` dependent multiply-adds.
 * "store-work": every worker stores the work's value; "atomic-work": every worker adds to
 * it atomically; "load-work": worker 0 stores (an invalidation of the readers' copies) and
 * the others load it and start their work from the value (each reader's operations are
 * the extra sum reader_ops).  `--param line=own` gives each worker its own line (128 bytes
 * apart, no pair shared) with the same instructions: the difference in time per operation
 * is what the moves cost (bench/machine_probe.py).
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

static volatile uint64_t *shared_word;

static void process_setup(struct hc_run *run)
{
    (void)run;
    /* Shared between forked workers too. */
    shared_word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared_word == MAP_FAILED)
        hc_fail("mmap: %s", strerror(errno));
}

static void own_line(struct hc_worker *w)
{
    while (hc_running(w))
        hc_count(w);
}

static void shared_line(struct hc_worker *w)
{
    while (hc_running(w)) {
        __atomic_store_n(shared_word, w->slot->ops, __ATOMIC_RELAXED);
        hc_count(w);
    }
}

/* The word counts the passes: worker i holds the line while it is i modulo the workers. */
static void pass_line(struct hc_worker *w)
{
    const uint64_t workers = (uint64_t)w->run->workers, me = (uint64_t)w->index;
    while (hc_running(w)) {
        uint64_t passes = __atomic_load_n(shared_word, __ATOMIC_ACQUIRE);
        if (passes % workers != me)
            continue; /* not this worker's turn: the line is on its way */
        __atomic_store_n(shared_word, passes + 1, __ATOMIC_RELEASE);
        hc_count(w);
    }
}

/* The mapping is page-aligned: its first two lines are one pair. */
static void split_pair(struct hc_worker *w)
{
    volatile uint64_t *mine = shared_word + (w->index % 2) * (64 / sizeof *shared_word);
    while (hc_running(w)) {
        __atomic_store_n(mine, w->slot->ops, __ATOMIC_RELAXED);
        hc_count(w);
    }
}

static void atomic_line(struct hc_worker *w)
{
    while (hc_running(w)) {
        __atomic_fetch_add(shared_word, 1, __ATOMIC_RELAXED);
        hc_count(w);
    }
}

static void publish_line(struct hc_worker *w)
{
    while (hc_running(w)) {
        if (w->index == 0)
            __atomic_store_n(shared_word, w->slot->ops, __ATOMIC_RELAXED);
        else
            (void)__atomic_load_n(shared_word, __ATOMIC_RELAXED);
        hc_count(w);
    }
}

/* N dependent multiply-adds from x: work no out-of-order core can finish early. */
static uint64_t work_on(uint64_t x, long n)
{
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static long work_length(struct hc_worker *w)
{
    return hc_param_long(w->run, "work", 100);
}

/* The word this worker accesses: the shared one, or its own 128 bytes apart (line=own). */
static volatile uint64_t *work_word(struct hc_worker *w)
{
    const char *line = hc_param(w->run, "line", "shared");
    if (strcmp(line, "own") == 0)
        return shared_word + (size_t)w->index * (128 / sizeof *shared_word);
    if (strcmp(line, "shared") != 0)
        hc_fail("--param line=%s: shared or own", line);
    return shared_word;
}

/* Every worker writes the word at every operation: a plain store, or a locked add. */
static void write_work(struct hc_worker *w, bool atomic)
{
    volatile uint64_t *word = work_word(w);
    long n = work_length(w);
    uint64_t x = (uint64_t)w->index;
    while (hc_running(w)) {
        if (atomic)
            __atomic_fetch_add(word, x, __ATOMIC_RELAXED);
        else
            __atomic_store_n(word, x, __ATOMIC_RELAXED);
        x = work_on(x, n);
        hc_count(w);
    }
}

static void store_work(struct hc_worker *w)
{
    write_work(w, false);
}

static void atomic_work(struct hc_worker *w)
{
    write_work(w, true);
}

enum { READER_OPS };
static const char *const work_sums[] = {"reader_ops", NULL};

static void load_work(struct hc_worker *w)
{
    volatile uint64_t *word = work_word(w);
    long n = work_length(w);
    uint64_t x = (uint64_t)w->index;
    while (hc_running(w)) {
        if (w->index == 0) {
            __atomic_store_n(word, x, __ATOMIC_RELAXED);
            x = work_on(x, n);
        } else {
            x = work_on(x ^ __atomic_load_n(word, __ATOMIC_RELAXED), n);
            hc_add_extra(w, READER_OPS, 1);
        }
        hc_count(w);
    }
}

static const char *const modes[] = {"own-line",   "shared-line", "pass-line", "publish-line",
                                    "split-pair", "atomic-line", "store-work", "atomic-work",
                                    "load-work",  NULL};
static void (*const loops[])(struct hc_worker *) = {own_line,     shared_line, pass_line,
                                                     publish_line, split_pair,  atomic_line,
                                                     store_work,   atomic_work, load_work};

static void worker(struct hc_worker *w)
{
    for (size_t i = 0; modes[i]; i++)
        if (strcmp(w->run->mode, modes[i]) == 0) {
            loops[i](w);
            return;
        }
}

const struct hc_benchmark hc_benchmark = {
    .name = "empty",
    .description = "counts an empty loop: the ceiling the harness itself allows per core",
    .modes = modes,
    .extra_sums = work_sums,
    .process_setup = process_setup,
    .worker = worker,
};
