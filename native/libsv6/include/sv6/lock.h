/*
 * lock.h - the lock of every libsv6 structure: a spinlock.
 *
 * Every critical section in libsv6 is short (a slot, a list link, a page
 * copy) and none waits for anything, which is what sv6's kernel spinlocks
 * assume too.  Taking one costs one locked instruction and releasing it a
 * plain store; a pthread mutex costs a locked instruction each way (glibc
 * drops both only while a process has a single thread, which libsv6's users
 * never are), and the per-core locks of refcache are taken several times by
 * every open and close.  A waiter spins briefly, then yields its CPU, so a
 * holder that was preempted gets to run.
 */
#ifndef SV6_LOCK_H
#define SV6_LOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

struct sv6_lock {
    atomic_bool held;
};

/* Spins (with the CPU's pause hint) before a waiter yields. */
#define SV6_LOCK_SPINS 128

static inline void sv6_lock_init(struct sv6_lock *l)
{
    atomic_init(&l->held, false);
}

static inline bool sv6_trylock(struct sv6_lock *l)
{
    /* Read first: a waiter spins on its cached copy, not with locked writes. */
    return !atomic_load_explicit(&l->held, memory_order_relaxed) &&
           !atomic_exchange_explicit(&l->held, true, memory_order_acquire);
}

static inline void sv6_lock(struct sv6_lock *l)
{
    for (unsigned spins = 0; !sv6_trylock(l); spins++) {
        if (spins < SV6_LOCK_SPINS) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();
        }
    }
}

static inline void sv6_unlock(struct sv6_lock *l)
{
    atomic_store_explicit(&l->held, false, memory_order_release);
}

/* Adds to an atomic counter that only the holder of its lock writes (lock-free
 * readers may read it): a load and a release store, as the lock already keeps
 * other writers out, where an atomic add would be one more locked instruction. */
#define SV6_HOLDER_ADD(counter, delta)                                                          \
    atomic_store_explicit((counter),                                                           \
                          atomic_load_explicit((counter), memory_order_relaxed) + (delta),     \
                          memory_order_release)

#endif
