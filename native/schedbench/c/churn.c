/* churn: each thread picks a random counting semaphore, V's it (waking whoever waits
 * there, or raising the count) and P's it (blocking when the count is 0). Who wakes whom is random, so threads keep
 * being unblocked by processors other than the one they last ran on. */
#include "bench.h"
#include "rt.h"

#include <stdatomic.h>
#include <stdlib.h>

static rt_sem **spots;
static int nspots;
static _Atomic int waiters_ready;

static void validate(const bench_options *o)
{
    int spot_count = o->spots ? o->spots : o->threads / 2;
    if (o->threads < spot_count + o->procs)
        bench_usage_error("-t %d must be at least spots (%d) + processors (%d)", o->threads,
                          spot_count, o->procs);
}

static void setup(const bench_options *o)
{
    nspots = o->spots ? o->spots : o->threads / 2;
    spots = malloc(sizeof(rt_sem *) * (size_t)nspots);
    for (int i = 0; i < nspots; i++)
        spots[i] = rt_sem_new();
}

static void thread_main(int index)
{
    uint64_t rng = bench_seed(index);
    /* The first `nspots` threads start by waiting (one per spot) instead of posting.
     * Without that debt every P would find the unit its own V just added and nobody
     * would ever block; with it, a V usually wakes a waiter and the P then blocks. */
    int skip_post = index < nspots;
    rt_sem *spot = spots[index % nspots];
    /* The others start once every waiter is about to wait: a poster that ran before
     * any waiter existed would never block, and on a cooperative scheduler with one
     * processor it would then run alone forever. */
    if (skip_post) {
        atomic_fetch_add(&waiters_ready, 1);
    } else {
        while (atomic_load(&waiters_ready) < nspots)
            rt_yield();
    }
    for (;;) {
        if (!skip_post)
            rt_sem_V(spot);
        skip_post = 0;
        rt_sem_P(spot);
        bench_count(index);
        if (bench_must_stop(index))
            break;
        spot = spots[bench_random(&rng) % (uint64_t)nspots];
    }
}

static void drain(void)
{
    for (int i = 0; i < nspots; i++)
        rt_sem_V(spots[i]);
}

static void extra_json(FILE *out)
{
    fprintf(out, ", \"spots\": %d", nspots);
}

const bench_spec bench = {
    .name = "churn", .extra_flags = "s", .default_threads_per_proc = 100,
    .validate = validate, .setup = setup, .thread_main = thread_main,
    .drain = drain, .extra_json = extra_json,
};
