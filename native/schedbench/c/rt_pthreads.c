/* Benchmarks on plain kernel threads: every user thread is a pthread and the process is
 * confined to `procs` CPUs.
 *
 * The semaphore hands V's unit to the oldest waiter, as ours and Tokio's do. A bare
 * POSIX semaphore does not: the poster's own sem_wait right after its sem_post takes
 * the unit back before the woken thread runs, so in churn nobody would ever block. So
 * waiters queue in FIFO order under a mutex and each sleeps on a private POSIX
 * semaphore used as its park word. */
#define _GNU_SOURCE
#include "rt.h"
#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdlib.h>

const char *const rt_name = "pthreads";

#define THREAD_STACK_SIZE (256 * 1024)

struct rt_thread {
    pthread_t id;
    void (*fn)(void *);
    void *arg;
};

typedef struct waiter {
    sem_t park;
    struct waiter *next;
} waiter;

struct rt_sem {
    pthread_mutex_t lock;
    long count;
    waiter *first, *last;
};

static __thread waiter self_waiter;
static __thread int self_waiter_ready;

void rt_init(int procs)
{
    cpu_set_t allowed, chosen;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        bench_failure("cannot read the CPU affinity mask");
    if (procs > CPU_COUNT(&allowed))
        bench_usage_error("-p %d: only %d CPUs available to pthreads", procs, CPU_COUNT(&allowed));
    CPU_ZERO(&chosen);
    for (int c = 0, picked = 0; c < CPU_SETSIZE && picked < procs; c++)
        if (CPU_ISSET(c, &allowed)) {
            CPU_SET(c, &chosen);
            picked++;
        }
    /* Threads created later inherit the mask of the main thread. */
    if (sched_setaffinity(0, sizeof chosen, &chosen) != 0)
        bench_failure("cannot restrict the process to %d CPUs", procs);
}

void rt_fini(void)
{
}

static void *trampoline(void *arg)
{
    rt_thread *t = arg;
    t->fn(t->arg);
    return NULL;
}

rt_thread *rt_spawn(void (*fn)(void *), void *arg)
{
    rt_thread *t = malloc(sizeof *t);
    if (!t)
        return NULL;
    t->fn = fn;
    t->arg = arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, THREAD_STACK_SIZE);
    int err = pthread_create(&t->id, &attr, trampoline, t);
    pthread_attr_destroy(&attr);
    if (err) {
        free(t);
        return NULL;
    }
    return t;
}

void rt_join(rt_thread *t)
{
    pthread_join(t->id, NULL);
    free(t);
}

void rt_yield(void)
{
    sched_yield();
}

rt_sem *rt_sem_new(void)
{
    rt_sem *s = aligned_alloc(64, (sizeof(rt_sem) + 63) / 64 * 64);
    if (!s)
        bench_failure("out of memory for a semaphore");
    pthread_mutex_init(&s->lock, NULL);
    s->count = 0;
    s->first = s->last = NULL;
    return s;
}

void rt_sem_P(rt_sem *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->count > 0) {
        s->count--;
        pthread_mutex_unlock(&s->lock);
        return;
    }
    waiter *me = &self_waiter;
    if (!self_waiter_ready) {
        sem_init(&me->park, 0, 0);
        self_waiter_ready = 1;
    }
    me->next = NULL;
    if (s->last)
        s->last->next = me;
    else
        s->first = me;
    s->last = me;
    pthread_mutex_unlock(&s->lock);
    while (sem_wait(&me->park) != 0)
        ; /* EINTR: try again */
}

void rt_sem_V(rt_sem *s)
{
    pthread_mutex_lock(&s->lock);
    waiter *w = s->first;
    if (!w) {
        s->count++;
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->first = w->next;
    if (!s->first)
        s->last = NULL;
    pthread_mutex_unlock(&s->lock);
    sem_post(&w->park);
}

void rt_extra_json(FILE *out)
{
    (void)out;
}
