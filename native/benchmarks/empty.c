/*
 * empty: the harness's own ceiling - a loop that only counts (bench/harness_overhead.py).
 * Mode "shared-line" also stores to one cache line all workers share, the false-sharing
 * contrast that shows what the per-worker counter slots avoid.
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

static void worker(struct hc_worker *w)
{
    if (strcmp(w->run->mode, "shared-line") == 0) {
        while (hc_running(w)) {
            __atomic_store_n(shared_word, w->slot->ops, __ATOMIC_RELAXED);
            hc_count(w);
        }
        return;
    }
    while (hc_running(w))
        hc_count(w);
}

static const char *const modes[] = {"own-line", "shared-line", NULL};

const struct hc_benchmark hc_benchmark = {
    .name = "empty",
    .description = "counts an empty loop: the ceiling the harness itself allows per core",
    .modes = modes,
    .process_setup = process_setup,
    .worker = worker,
};
