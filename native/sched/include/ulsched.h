/* ulsched: a scalable user-level thread scheduler.
 *
 * M user threads run on P processors (kernel threads pinned to CPUs). Each processor
 * owns one sub-queue of a relaxed-FIFO ready queue; a processor takes work from its own
 * sub-queue, steals round-robin from the others when it runs dry, and now and then
 * checks a random other sub-queue and helps it when that sub-queue's oldest thread has
 * waited noticeably longer than its own (timestamps), so a thread cannot starve behind a
 * spinner. Idle processors spin briefly, then sleep on a futex; see docs/scheduler.md.
 *
 * One scheduler per process: uls_start() .. uls_stop(). Scheduling is cooperative: a
 * thread keeps its processor until it yields, parks, blocks on a semaphore or returns.
 */
#ifndef ULSCHED_H
#define ULSCHED_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct uls_thread uls_thread;

/* A counting semaphore in one word. The count may grow past 1 (V without a waiter),
 * waiters are served in FIFO order. Zero-initialised means count 0. */
typedef struct {
    _Atomic uintptr_t word;
} uls_sem;

typedef struct {
    uint64_t context_switches; /* threads resumed by processors */
    uint64_t steals;           /* threads taken from another processor's empty-handed scan */
    uint64_t fairness_steals;  /* threads taken because another sub-queue was older */
    uint64_t sleeps;           /* times a processor went to sleep on its futex */
} uls_stats;

/* Starts nprocs processors; processor i is pinned to the i-th CPU of the process's
 * affinity mask (modulo its size). Returns 0, or -1 with errno set (EINVAL: bad nprocs,
 * EBUSY: already started, EAGAIN etc.: a kernel thread could not be created). */
int uls_start(int nprocs);

/* Stops the processors. Every thread created must have been joined first. */
void uls_stop(void);

/* Creates a ready thread running fn(arg); NULL with errno set on failure.
 * Callable from user threads and kernel threads. */
uls_thread *uls_create(void (*fn)(void *), void *arg);

/* Waits until t has returned and frees it. From a user thread it parks; from a kernel
 * thread it sleeps on a futex. Each thread is joined exactly once. */
void uls_join(uls_thread *t);

/* The calling user thread, or NULL on a kernel thread. */
uls_thread *uls_self(void);

/* Puts the calling user thread at the back of its processor's sub-queue. */
void uls_yield(void);

/* Blocks the calling user thread until uls_unpark() gives it a permit (an unpark that
 * comes first is remembered: at most one permit is kept, like a binary semaphore). */
void uls_park(void);

/* Gives t a permit; makes it ready if it is parked. Callable from any thread. */
void uls_unpark(uls_thread *t);

void uls_sem_init(uls_sem *sem, unsigned long count);
/* P: takes one unit, blocking the calling user thread while the count is 0. */
void uls_sem_P(uls_sem *sem);
/* V: wakes the oldest waiter or adds one unit. Callable from any thread. */
void uls_sem_V(uls_sem *sem);
/* The count when nobody waits, else minus the number of waiters (for tests). */
long uls_sem_value(uls_sem *sem);

/* Sums of the processors' counters since uls_start(). */
uls_stats uls_get_stats(void);

#endif
