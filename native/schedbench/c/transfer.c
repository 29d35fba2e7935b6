/* transfer: a leader spins until every other thread has acknowledged its round, then
 * names a random next leader. Non-leaders acknowledge and then either yield (-e 0) or
 * block on their semaphore (-e 1). The spinning leader holds its processor, so threads
 * queued behind it only progress if the scheduler moves them elsewhere.
 *
 * With -e 1 the leader wakes the others at the start of its round, after publishing the
 * new round number: a thread woken by the previous round's leader may acknowledge that
 * old round and block again, and would otherwise never see the new round (the stall of
 * the published ports). One operation is one round. */
#include "bench.h"
#include "rt.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <x86intrin.h>

#define STALL_SECONDS 5.0

typedef struct {
    _Atomic long seen; /* last round this thread acknowledged */
    rt_sem *wake;
} __attribute__((aligned(64))) member;

static member *members;
static int nthreads, exhaust;
static _Atomic long round_number __attribute__((aligned(64)));
static _Atomic int leader __attribute__((aligned(64)));
static _Atomic int done __attribute__((aligned(64)));

static void setup(const bench_options *o)
{
    nthreads = o->threads;
    exhaust = o->exhaust;
    members = aligned_alloc(64, sizeof(member) * (size_t)nthreads);
    for (int i = 0; i < nthreads; i++) {
        atomic_init(&members[i].seen, 0);
        members[i].wake = rt_sem_new();
    }
}

static void wake_others(int me)
{
    for (int i = 0; i < nthreads; i++)
        if (i != me)
            rt_sem_V(members[i].wake);
}

static void lead(int me, uint64_t *rng)
{
    long round = atomic_load(&round_number) + 1;
    atomic_store(&round_number, round);
    atomic_store(&members[me].seen, round);
    if (bench_must_stop(me)) {
        atomic_store(&done, 1);
        if (exhaust)
            wake_others(me);
        return;
    }
    if (exhaust)
        wake_others(me);
    double start = bench_now();
    for (int i = 0; i < nthreads; i++) {
        for (unsigned spins = 0; atomic_load(&members[i].seen) != round; spins++) {
            _mm_pause();
            if (spins % 1024 == 0 && bench_now() - start > STALL_SECONDS)
                bench_failure("round %ld stalled: thread %d did not acknowledge within %.0f s",
                              round, i, STALL_SECONDS);
        }
    }
    int next = (int)(bench_random(rng) % (uint64_t)nthreads);
    atomic_store(&leader, next);
    bench_count(me);
    if (exhaust && next != me)
        rt_sem_V(members[next].wake);
}

static void thread_main(int index)
{
    uint64_t rng = bench_seed(index);
    while (!atomic_load(&done)) {
        if (atomic_load(&leader) == index) {
            lead(index, &rng);
        } else {
            atomic_store(&members[index].seen, atomic_load(&round_number));
            if (exhaust)
                rt_sem_P(members[index].wake);
            else
                rt_yield();
        }
    }
}

static void drain(void)
{
    for (int i = 0; i < nthreads; i++)
        rt_sem_V(members[i].wake);
}

static void extra_json(FILE *out)
{
    fprintf(out, ", \"exhaust\": %s, \"rounds\": %ld", exhaust ? "true" : "false",
            atomic_load(&round_number));
}

const bench_spec bench = {
    .name = "transfer", .extra_flags = "e", .default_threads_per_proc = 1,
    .setup = setup, .thread_main = thread_main,
    .drain = drain, .extra_json = extra_json,
};
