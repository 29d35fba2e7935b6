/* cycle: rings of r threads; each waits on its own semaphore, then posts the next
 * thread's. Only one token runs around each ring, so every operation is a real
 * block and wake-up through the ready queues. */
#include "bench.h"
#include "rt.h"

#include <stdlib.h>

static rt_sem **sems;
static int ring, rings;

static void validate(const bench_options *o)
{
    if (o->threads % o->ring != 0)
        bench_usage_error("-t %d is not a multiple of the ring size -r %d", o->threads, o->ring);
}

static void setup(const bench_options *o)
{
    ring = o->ring;
    rings = o->threads / o->ring;
    sems = malloc(sizeof(rt_sem *) * (size_t)o->threads);
    for (int i = 0; i < o->threads; i++)
        sems[i] = rt_sem_new();
}

static void thread_main(int index)
{
    int first = index - index % ring;
    rt_sem *next = sems[first + (index - first + 1) % ring];
    /* The stop is read while holding the token and the token is passed on even when
     * stopping: a thread that receives the token after a stopping thread is ordered
     * after that read, so it sees the stop too, passes the token and leaves; the token
     * dies at the first thread that left. (Reading the stop after passing the token
     * lets a later thread miss it and wait forever.) */
    for (;;) {
        rt_sem_P(sems[index]);
        int stopping = bench_must_stop(index);
        rt_sem_V(next);
        bench_count(index);
        if (stopping)
            break;
    }
}

static void started(void)
{
    for (int r = 0; r < rings; r++)
        rt_sem_V(sems[r * ring]);
}

static void drain(void)
{
}

static void extra_json(FILE *out)
{
    fprintf(out, ", \"ring_size\": %d, \"rings\": %d", ring, rings);
}

const bench_spec bench = {
    .name = "cycle", .extra_flags = "r", .default_threads_per_proc = 500,
    .validate = validate, .setup = setup, .thread_main = thread_main,
    .started = started, .drain = drain, .extra_json = extra_json,
};
