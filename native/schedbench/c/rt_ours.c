/* Benchmarks on ulsched (native/sched): user threads on pinned processors. */
#include "rt.h"
#include "bench.h"
#include "ulsched.h"

#include <stdlib.h>

const char *const rt_name = "ours";

struct rt_sem {
    uls_sem sem;
};

void rt_init(int procs)
{
    if (uls_start(procs) != 0)
        bench_failure("cannot start %d processors", procs);
}

void rt_fini(void)
{
    uls_stop();
}

rt_thread *rt_spawn(void (*fn)(void *), void *arg)
{
    return (rt_thread *)uls_create(fn, arg);
}

void rt_join(rt_thread *t)
{
    uls_join((uls_thread *)t);
}

void rt_yield(void)
{
    uls_yield();
}

rt_sem *rt_sem_new(void)
{
    rt_sem *s = aligned_alloc(64, 64); /* one semaphore per cache line */
    if (!s)
        bench_failure("out of memory for a semaphore");
    uls_sem_init(&s->sem, 0);
    return s;
}

void rt_sem_P(rt_sem *s)
{
    uls_sem_P(&s->sem);
}

void rt_sem_V(rt_sem *s)
{
    uls_sem_V(&s->sem);
}

void rt_extra_json(FILE *out)
{
    uls_stats s = uls_get_stats();
    fprintf(out, ", \"context_switches\": %llu, \"steals\": %llu, \"fairness_steals\": %llu, \"sleeps\": %llu",
            (unsigned long long)s.context_switches, (unsigned long long)s.steals,
            (unsigned long long)s.fairness_steals, (unsigned long long)s.sleeps);
}
