/* objset_impl.h - what every set implementation provides and shares (internal). */
#ifndef LDU_OBJSET_IMPL_H
#define LDU_OBJSET_IMPL_H

#include <time.h>

#include "objset.h"

struct objset_ops {
    const char *name;
    struct objset *(*create)(const struct objset_ops *ops, unsigned max_workers);
    void (*destroy)(struct objset *set);
    struct objset_worker *(*attach)(struct objset *set, unsigned cpu);
    void (*detach)(struct objset_worker *worker);
    void (*insert)(struct objset_worker *worker, struct set_object *object);
    void (*remove)(struct objset_worker *worker, struct set_object *object);
    size_t (*walk)(struct objset_worker *worker, objset_visit_fn visit, void *arg);
    void (*barrier)(struct objset_worker *worker);
    unsigned queues;           /* LDU only: 0 = one queue per worker (per core), else this many */
};

/* The first member of every implementation's set and worker. */
struct objset {
    const struct objset_ops *ops;
};

struct objset_worker {
    struct objset *set;
    struct objset_stats stats;
};

extern const struct objset_ops ldu_percore_ops, ldu_global_ops, rwlock_ops, harris_ops;

/* One-line message on stderr, then abort: a broken invariant, not bad input. */
__attribute__((noreturn, format(printf, 1, 2))) void objset_die(const char *fmt, ...);

static inline uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Failed tries before a waiter goes to sleep in the kernel.  Critical sections
 * are a few microseconds at most, and a futex sleep plus wake-up costs more
 * than that, so waiters spin a little first, as Linux's rw-semaphores and
 * mutexes spin on a running owner. */
#define LOCK_SPIN_TRIES 200

/*
 * Acquires a pthread lock: `try_lock` (an expression, 0 on success) first,
 * spinning on it up to LOCK_SPIN_TRIES times, then `block` (a blocking
 * acquisition).  Only contended acquisitions are timed into `stats`, so an
 * uncontended one costs no clock reads.  A macro because the three pthread
 * lock kinds share no function type.
 */
#define ACQUIRE_LOCK(stats, try_lock, block)                          \
    do {                                                              \
        if ((try_lock) != 0) {                                        \
            uint64_t wait_started = now_ns();                         \
            int tries = 0;                                            \
            while ((try_lock) != 0) {                                 \
                if (++tries == LOCK_SPIN_TRIES) {                     \
                    block;                                            \
                    break;                                            \
                }                                                     \
                cpu_relax();                                          \
            }                                                         \
            (stats)->lock_waits++;                                    \
            (stats)->lock_wait_ns += now_ns() - wait_started;         \
        }                                                             \
    } while (0)

#endif
