/* yield: every thread yields in a loop. */
#include "bench.h"
#include "rt.h"

static void setup(const bench_options *o)
{
    (void)o;
}

static void thread_main(int index)
{
    do {
        rt_yield();
        bench_count(index);
    } while (!bench_must_stop(index));
}

static void drain(void)
{
}

const bench_spec bench = {
    .name = "yield", .extra_flags = "", .default_threads_per_proc = 100,
    .setup = setup, .thread_main = thread_main, .drain = drain,
};
