/* locality: each operation touches a block of data, then sits down on a random one-seat
 * spot. A thread already sitting there is pushed off (woken) and the newcomer blocks
 * until someone pushes it off in turn. With -S 1 the newcomer hands its data block to
 * the thread it wakes, so data keeps moving between threads: a scheduler that runs the
 * woken thread where the waker ran keeps that data in cache. */
#include "bench.h"
#include "rt.h"

#include <stdatomic.h>
#include <stdlib.h>

typedef struct {
    rt_sem *wake;
    uint64_t *data; /* the block this thread touches; swapped between threads with -S 1 */
} __attribute__((aligned(64))) worker;

static worker *workers;
static _Atomic(worker *) *spots;
static int nspots, words, share;

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
    words = o->work_words;
    share = o->share;
    workers = aligned_alloc(64, sizeof(worker) * (size_t)o->threads);
    spots = calloc((size_t)nspots, sizeof *spots);
    for (int i = 0; i < o->threads; i++) {
        workers[i].wake = rt_sem_new();
        workers[i].data = aligned_alloc(64, ((sizeof(uint64_t) * (size_t)words + 63) / 64) * 64);
        for (int w = 0; w < words; w++)
            workers[i].data[w] = (uint64_t)w;
    }
}

static void thread_main(int index)
{
    worker *me = &workers[index];
    uint64_t rng = bench_seed(index);
    do {
        uint64_t *data = me->data;
        for (int w = 0; w < words; w++)
            data[w] += (uint64_t)index;
        worker *previous = atomic_exchange(&spots[bench_random(&rng) % (uint64_t)nspots], me);
        if (previous) {
            if (share) { /* `previous` is blocked (or about to be): its block is free */
                me->data = previous->data;
                previous->data = data;
            }
            rt_sem_V(previous->wake);
        }
        rt_sem_P(me->wake);
        bench_count(index);
    } while (!bench_must_stop(index));
}

static void drain(void)
{
    for (int i = 0; i < nspots; i++) {
        worker *sitting = atomic_exchange(&spots[i], NULL);
        if (sitting)
            rt_sem_V(sitting->wake);
    }
}

static void extra_json(FILE *out)
{
    fprintf(out, ", \"spots\": %d, \"work_words\": %d, \"share\": %s", nspots, words,
            share ? "true" : "false");
}

const bench_spec bench = {
    .name = "locality", .extra_flags = "swS", .default_threads_per_proc = 32,
    .validate = validate, .setup = setup, .thread_main = thread_main,
    .drain = drain, .extra_json = extra_json,
};
