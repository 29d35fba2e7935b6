/* ulsched: see include/ulsched.h for the interface and docs/scheduler.md for the design. */
#define _GNU_SOURCE
#include "ulsched.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

#define CACHE_LINE 64
#define MAX_PROCS 1024
/* Sanitizers need far more stack than plain code; the memory is only reserved. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STACK_SIZE (1024 * 1024)
#else
#define STACK_SIZE (256 * 1024)
#endif
/* Rounds of scanning every sub-queue before an idle processor sleeps: long enough to
 * catch a thread that a peer is about to make ready (a few microseconds), short enough
 * not to burn a CPU. */
#define IDLE_SPIN_ROUNDS 256
/* One pop in this many first looks at a random other sub-queue (fairness check). */
#define FAIRNESS_CHECK_PERIOD 16
/* A sub-queue whose oldest thread waited this much longer than ours gets help. */
#define FAIRNESS_SLACK_NS 20000
#define EMPTY_TIMESTAMP UINT64_MAX

void uls_switch(void **save_sp, void *load_sp);
void uls_trampoline(void);

static void fatal(const char *msg)
{
    fprintf(stderr, "ulsched: %s\n", msg);
    abort();
}

static long futex(_Atomic uint32_t *word, int op, uint32_t value)
{
    return syscall(SYS_futex, word, op, value, NULL, NULL, 0);
}

/* ---- spin lock (held for a handful of instructions) ---- */

typedef struct {
    _Atomic int held;
} spinlock;

static void spin_pause(unsigned *spins)
{
    /* If the holder's kernel thread was preempted, give the CPU back instead of
     * spinning for a whole time slice. */
    if (++*spins % 128 == 0)
        sched_yield();
    else
        _mm_pause();
}

static void spin_lock(spinlock *l)
{
    unsigned spins = 0;
    for (;;) {
        if (!atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
            return;
        while (atomic_load_explicit(&l->held, memory_order_relaxed))
            spin_pause(&spins);
    }
}

static bool spin_trylock(spinlock *l)
{
    return !atomic_load_explicit(&l->held, memory_order_relaxed) &&
           !atomic_exchange_explicit(&l->held, 1, memory_order_acquire);
}

static void spin_unlock(spinlock *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_release);
}

/* ---- threads ---- */

enum post_switch_action { AFTER_YIELD, AFTER_PARK, AFTER_EXIT };
enum park_state { RUNNING = 0, PERMIT = 1, PARKED = 2 };
#define JOINER_DONE ((uls_thread *)1)

struct uls_thread {
    void *saved_sp;
    uls_thread *ready_next;
    uint64_t ready_since; /* rdtsc when it was queued: the relaxed-FIFO timestamp */
    enum post_switch_action post_action;
    _Atomic int park_state;
    /* semaphore wait queue, guarded by the semaphore word's lock bit */
    uls_thread *sem_next;
    uls_thread *sem_tail; /* valid in the queue's first waiter only */
    _Atomic int sem_granted;
    void (*fn)(void *);
    void *arg;
    void *stack_base; /* mmap'ed: guard page, then the stack */
    _Atomic(uls_thread *) joiner;
    _Atomic uint32_t finished;   /* futex word for joins from kernel threads */
    _Atomic int references;      /* the thread itself and its joiner */
#if defined(__SANITIZE_ADDRESS__)
    void *asan_fake_stack;
#endif
#if defined(__SANITIZE_THREAD__)
    void *tsan_fiber;
#endif
};

/* ---- processors and sub-queues ---- */

typedef struct {
    spinlock lock;
    uls_thread *head, *tail;
    _Atomic uint64_t head_since; /* EMPTY_TIMESTAMP when empty; read without the lock */
} __attribute__((aligned(CACHE_LINE))) lane;

typedef struct {
    int id;
    int cpu;
    pthread_t kernel_thread;
    void *saved_sp;           /* the processor's own (scheduler loop) context */
    uls_thread *current;
    uint64_t rng;
    unsigned pops;
    _Atomic uint32_t sleeping; /* futex word: 1 while asleep or about to sleep */
    _Atomic uint64_t context_switches, steals, fairness_steals, sleeps;
#if defined(__SANITIZE_ADDRESS__)
    void *asan_fake_stack;
    const void *stack_bottom;
    size_t stack_size;
#endif
#if defined(__SANITIZE_THREAD__)
    void *tsan_fiber;
#endif
} __attribute__((aligned(CACHE_LINE))) processor;

static struct {
    int nprocs;
    processor *procs;
    lane *lanes; /* lanes[i] is processor i's sub-queue */
    _Atomic int started;
    _Atomic int stopping;
    _Atomic int idle_count __attribute__((aligned(CACHE_LINE)));
    _Atomic unsigned spread_cursor __attribute__((aligned(CACHE_LINE)));
    uint64_t fairness_slack_ticks;
} sched;

static __thread processor *this_processor;

/* A user thread may resume on another kernel thread after any switch, so the
 * processor must be re-read from TLS every time; noinline keeps the compiler from
 * caching the TLS address across a switch inside one function. */
static __attribute__((noinline)) processor *current_processor(void)
{
    processor *p = this_processor;
    __asm__ volatile("" : : : "memory");
    return p;
}

/* Per-processor counters have a single writer, so a plain load and store suffice (no
 * locked instruction on the hot path). */
static void count_event(_Atomic uint64_t *counter)
{
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static uint64_t xorshift(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

static uint64_t now_ticks(void)
{
    return __rdtsc();
}

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- sub-queue operations ---- */

static void lane_push(lane *l, uls_thread *t)
{
    t->ready_next = NULL;
    t->ready_since = now_ticks();
    spin_lock(&l->lock);
    if (l->tail) {
        l->tail->ready_next = t;
    } else {
        l->head = t;
        atomic_store_explicit(&l->head_since, t->ready_since, memory_order_relaxed);
    }
    l->tail = t;
    spin_unlock(&l->lock);
}

static uls_thread *lane_pop_locked(lane *l)
{
    uls_thread *t = l->head;
    if (!t)
        return NULL;
    l->head = t->ready_next;
    if (!l->head)
        l->tail = NULL;
    atomic_store_explicit(&l->head_since, l->head ? l->head->ready_since : EMPTY_TIMESTAMP,
                          memory_order_relaxed);
    return t;
}

static uls_thread *lane_pop(lane *l)
{
    if (atomic_load_explicit(&l->head_since, memory_order_relaxed) == EMPTY_TIMESTAMP)
        return NULL;
    spin_lock(&l->lock);
    uls_thread *t = lane_pop_locked(l);
    spin_unlock(&l->lock);
    return t;
}

/* Stealing never waits for a lock: a busy sub-queue is being served by its owner. */
static uls_thread *lane_try_steal(lane *l)
{
    if (atomic_load_explicit(&l->head_since, memory_order_relaxed) == EMPTY_TIMESTAMP)
        return NULL;
    if (!spin_trylock(&l->lock))
        return NULL;
    uls_thread *t = lane_pop_locked(l);
    spin_unlock(&l->lock);
    return t;
}

static bool any_work(void)
{
    for (int i = 0; i < sched.nprocs; i++)
        if (atomic_load_explicit(&sched.lanes[i].head_since, memory_order_relaxed) != EMPTY_TIMESTAMP)
            return true;
    return false;
}

/* ---- idle sleep ----
 * A processor about to sleep sets its `sleeping` word, increments idle_count, then
 * looks at every sub-queue once more. Whoever makes a thread ready pushes it, then reads
 * idle_count. With sequentially consistent fences between the two steps on both sides,
 * at least one of them sees the other: either the sleeper finds the new thread, or the
 * waker sees idle_count > 0 and wakes a sleeper. That is why no wake-up is lost. */

/* A full store-load barrier. ThreadSanitizer does not support fences, so its build uses
 * a sequentially consistent read-modify-write of a private word instead (on x86 both
 * are full barriers). */
static void store_load_barrier(void)
{
#if defined(__SANITIZE_THREAD__)
    static _Atomic int barrier_word;
    atomic_fetch_add(&barrier_word, 0);
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

static void wake_one_sleeper(void)
{
    store_load_barrier();
    if (atomic_load_explicit(&sched.idle_count, memory_order_relaxed) == 0)
        return;
    int start = (int)(atomic_fetch_add_explicit(&sched.spread_cursor, 1, memory_order_relaxed) %
                      (unsigned)sched.nprocs);
    for (int k = 0; k < sched.nprocs; k++) {
        processor *p = &sched.procs[(start + k) % sched.nprocs];
        uint32_t expected = 1;
        if (atomic_load_explicit(&p->sleeping, memory_order_relaxed) == 1 &&
            atomic_compare_exchange_strong(&p->sleeping, &expected, 0)) {
            futex(&p->sleeping, FUTEX_WAKE_PRIVATE, 1);
            return;
        }
    }
}

static void sleep_until_woken(processor *p)
{
    atomic_store(&p->sleeping, 1);
    atomic_fetch_add(&sched.idle_count, 1);
    store_load_barrier();
    if (any_work() || atomic_load(&sched.stopping)) {
        uint32_t expected = 1;
        /* If a waker claimed us meanwhile, its futex wake will simply find nobody. */
        atomic_compare_exchange_strong(&p->sleeping, &expected, 0);
    } else {
        count_event(&p->sleeps);
        while (atomic_load(&p->sleeping) == 1)
            futex(&p->sleeping, FUTEX_WAIT_PRIVATE, 1);
    }
    atomic_fetch_sub(&sched.idle_count, 1);
}

/* Makes t ready on a sub-queue: the caller's own when it runs on a processor (t then
 * probably finds warm caches), else spread round-robin. */
static void make_ready(uls_thread *t, bool spread)
{
    processor *p = current_processor();
    int target;
    if (p && !spread)
        target = p->id;
    else
        target = (int)(atomic_fetch_add_explicit(&sched.spread_cursor, 1, memory_order_relaxed) %
                       (unsigned)sched.nprocs);
    lane_push(&sched.lanes[target], t);
    /* The only processor cannot be asleep while it runs this: skip the barrier. */
    if (!(p && sched.nprocs == 1))
        wake_one_sleeper();
}

/* ---- finding the next thread ---- */

static uls_thread *steal_from_others(processor *p)
{
    int n = sched.nprocs;
    int start = (int)(xorshift(&p->rng) % (uint64_t)n);
    for (int k = 0; k < n; k++) {
        int victim = (start + k) % n;
        if (victim == p->id)
            continue;
        uls_thread *t = lane_try_steal(&sched.lanes[victim]);
        if (t) {
            count_event(&p->steals);
            return t;
        }
    }
    return NULL;
}

static uls_thread *next_thread(processor *p)
{
    lane *own = &sched.lanes[p->id];
    if (sched.nprocs > 1 && ++p->pops % FAIRNESS_CHECK_PERIOD == 0) {
        int other = (int)(xorshift(&p->rng) % (uint64_t)(sched.nprocs - 1));
        if (other >= p->id)
            other++;
        uint64_t theirs = atomic_load_explicit(&sched.lanes[other].head_since, memory_order_relaxed);
        uint64_t ours = atomic_load_explicit(&own->head_since, memory_order_relaxed);
        if (theirs != EMPTY_TIMESTAMP && theirs + sched.fairness_slack_ticks < ours) {
            uls_thread *t = lane_try_steal(&sched.lanes[other]);
            if (t) {
                count_event(&p->fairness_steals);
                return t;
            }
        }
    }
    uls_thread *t = lane_pop(own);
    return t ? t : steal_from_others(p);
}

/* ---- switching (with the annotations sanitizers need to follow stacks) ---- */

static void switch_to_thread(processor *p, uls_thread *t)
{
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_start_switch_fiber(&p->asan_fake_stack, (char *)t->stack_base + getpagesize(),
                                   STACK_SIZE);
#endif
#if defined(__SANITIZE_THREAD__)
    __tsan_switch_to_fiber(t->tsan_fiber, 0);
#endif
    uls_switch(&p->saved_sp, t->saved_sp);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(p->asan_fake_stack, NULL, NULL);
#endif
}

static void switch_to_processor(uls_thread *t, enum post_switch_action action)
{
    processor *p = current_processor();
    t->post_action = action;
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_start_switch_fiber(action == AFTER_EXIT ? NULL : &t->asan_fake_stack,
                                   p->stack_bottom, p->stack_size);
#endif
#if defined(__SANITIZE_THREAD__)
    __tsan_switch_to_fiber(p->tsan_fiber, 0);
#endif
    uls_switch(&t->saved_sp, p->saved_sp);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(t->asan_fake_stack, NULL, NULL);
#endif
}

static void release_thread(uls_thread *t)
{
    if (atomic_fetch_sub(&t->references, 1) != 1)
        return;
#if defined(__SANITIZE_THREAD__)
    __tsan_destroy_fiber(t->tsan_fiber);
#endif
    munmap(t->stack_base, STACK_SIZE + (size_t)getpagesize());
    free(t);
}

/* Runs on the processor's stack once t's context is saved, so t may now be resumed
 * elsewhere without two processors sharing its stack. */
static void after_switch(processor *p, uls_thread *t)
{
    switch (t->post_action) {
    case AFTER_YIELD:
        lane_push(&sched.lanes[p->id], t);
        break;
    case AFTER_PARK: {
        int expected = RUNNING;
        if (!atomic_compare_exchange_strong(&t->park_state, &expected, PARKED)) {
            /* An unpark arrived while it was switching out: run it again right away. */
            atomic_store(&t->park_state, RUNNING);
            lane_push(&sched.lanes[p->id], t);
        }
        break;
    }
    case AFTER_EXIT: {
        atomic_store(&t->finished, 1);
        uls_thread *joiner = atomic_exchange(&t->joiner, JOINER_DONE);
        if (joiner)
            uls_unpark(joiner);
        futex(&t->finished, FUTEX_WAKE_PRIVATE, INT_MAX);
        release_thread(t);
        break;
    }
    }
}

static void *processor_main(void *arg)
{
    processor *p = arg;
    this_processor = p;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(p->cpu, &one);
    /* Best effort: a processor that cannot be pinned still works, just less predictably. */
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
#if defined(__SANITIZE_ADDRESS__)
    pthread_attr_t attr;
    void *bottom;
    pthread_getattr_np(pthread_self(), &attr);
    pthread_attr_getstack(&attr, &bottom, &p->stack_size);
    p->stack_bottom = bottom;
    pthread_attr_destroy(&attr);
#endif
#if defined(__SANITIZE_THREAD__)
    p->tsan_fiber = __tsan_get_current_fiber();
#endif

    for (;;) {
        uls_thread *t = NULL;
        for (int round = 0; round < IDLE_SPIN_ROUNDS && !t; round++) {
            t = next_thread(p);
            if (!t)
                _mm_pause();
        }
        if (!t) {
            if (atomic_load(&sched.stopping) && !any_work())
                break;
            sleep_until_woken(p);
            continue;
        }
        p->current = t;
        count_event(&p->context_switches);
        switch_to_thread(p, t);
        p->current = NULL;
        after_switch(p, t);
    }
    this_processor = NULL;
    return NULL;
}

/* ---- public interface ---- */

static void thread_entry(uls_thread *t)
{
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
    t->fn(t->arg);
    switch_to_processor(t, AFTER_EXIT);
    fatal("a finished thread was resumed");
}

static uint64_t ticks_per_microsecond(void)
{
    uint64_t ns0 = monotonic_ns(), t0 = now_ticks();
    struct timespec pause = {0, 5 * 1000 * 1000};
    nanosleep(&pause, NULL);
    uint64_t ns1 = monotonic_ns(), t1 = now_ticks();
    uint64_t per_us = (t1 - t0) * 1000 / (ns1 - ns0 ? ns1 - ns0 : 1);
    return per_us ? per_us : 1;
}

static void stop_processors(int running);

int uls_start(int nprocs)
{
    if (nprocs < 1 || nprocs > MAX_PROCS) {
        errno = EINVAL;
        return -1;
    }
    int expected = 0;
    if (!atomic_compare_exchange_strong(&sched.started, &expected, 1)) {
        errno = EBUSY;
        return -1;
    }
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) == 0)
        fatal("cannot read the CPU affinity mask");
    int cpus[CPU_SETSIZE], ncpus = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[ncpus++] = c;

    sched.nprocs = nprocs;
    sched.procs = aligned_alloc(CACHE_LINE, sizeof(processor) * (size_t)nprocs);
    sched.lanes = aligned_alloc(CACHE_LINE, sizeof(lane) * (size_t)nprocs);
    if (!sched.procs || !sched.lanes)
        fatal("out of memory");
    memset(sched.procs, 0, sizeof(processor) * (size_t)nprocs);
    memset(sched.lanes, 0, sizeof(lane) * (size_t)nprocs);
    for (int i = 0; i < nprocs; i++)
        atomic_store(&sched.lanes[i].head_since, EMPTY_TIMESTAMP);
    atomic_store(&sched.stopping, 0);
    atomic_store(&sched.idle_count, 0);
    sched.fairness_slack_ticks = ticks_per_microsecond() * FAIRNESS_SLACK_NS / 1000;
    for (int i = 0; i < nprocs; i++) {
        processor *p = &sched.procs[i];
        p->id = i;
        p->cpu = cpus[i % ncpus];
        p->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    }
    for (int i = 0; i < nprocs; i++) {
        int err = pthread_create(&sched.procs[i].kernel_thread, NULL, processor_main, &sched.procs[i]);
        if (err) {
            stop_processors(i);
            errno = err;
            return -1;
        }
    }
    return 0;
}

void uls_stop(void)
{
    if (!atomic_load(&sched.started))
        fatal("uls_stop() without uls_start()");
    stop_processors(sched.nprocs);
}

static void stop_processors(int running)
{
    atomic_store(&sched.stopping, 1);
    for (int i = 0; i < running; i++) {
        atomic_store(&sched.procs[i].sleeping, 0);
        futex(&sched.procs[i].sleeping, FUTEX_WAKE_PRIVATE, 1);
    }
    for (int i = 0; i < running; i++)
        pthread_join(sched.procs[i].kernel_thread, NULL);
    free(sched.procs);
    free(sched.lanes);
    sched.procs = NULL;
    sched.lanes = NULL;
    atomic_store(&sched.started, 0);
}

uls_thread *uls_create(void (*fn)(void *), void *arg)
{
    if (!atomic_load(&sched.started))
        fatal("uls_create() before uls_start()");
    size_t page = (size_t)getpagesize();
    uls_thread *t = aligned_alloc(CACHE_LINE, (sizeof(uls_thread) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE);
    if (!t)
        return NULL;
    memset(t, 0, sizeof *t);
    t->stack_base = mmap(NULL, STACK_SIZE + page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->stack_base == MAP_FAILED) {
        free(t);
        return NULL;
    }
    mprotect(t->stack_base, page, PROT_NONE); /* guard page: overflow faults, never corrupts */
    t->fn = fn;
    t->arg = arg;
    atomic_store(&t->references, 2);

    /* Initial frame, read by uls_switch's pops (r15 first) and its ret into the
     * trampoline; the 16 bytes of padding leave the stack 16-byte aligned there. */
    uintptr_t top = ((uintptr_t)t->stack_base + page + STACK_SIZE) & ~(uintptr_t)15;
    uintptr_t *frame = (uintptr_t *)(top - 16 - 8 * 7);
    frame[0] = 0;                          /* r15 */
    frame[1] = 0;                          /* r14 */
    frame[2] = (uintptr_t)thread_entry;    /* r13 */
    frame[3] = (uintptr_t)t;               /* r12 */
    frame[4] = 0;                          /* rbx */
    frame[5] = 0;                          /* rbp: ends frame-pointer walks */
    frame[6] = (uintptr_t)uls_trampoline;  /* return address */
    t->saved_sp = frame;
#if defined(__SANITIZE_THREAD__)
    t->tsan_fiber = __tsan_create_fiber(0);
#endif
    make_ready(t, true);
    return t;
}

uls_thread *uls_self(void)
{
    processor *p = current_processor();
    return p ? p->current : NULL;
}

void uls_join(uls_thread *t)
{
    uls_thread *self = uls_self();
    if (self) {
        uls_thread *expected = NULL;
        if (atomic_compare_exchange_strong(&t->joiner, &expected, self)) {
            /* `finished` is set before the joiner is unparked, so this loop ends. */
            while (!atomic_load(&t->finished))
                uls_park();
        }
    } else {
        while (!atomic_load(&t->finished))
            futex(&t->finished, FUTEX_WAIT_PRIVATE, 0);
    }
    release_thread(t);
}

void uls_yield(void)
{
    uls_thread *self = uls_self();
    if (!self)
        fatal("uls_yield() called outside a user thread");
    switch_to_processor(self, AFTER_YIELD);
}

void uls_park(void)
{
    uls_thread *self = uls_self();
    if (!self)
        fatal("uls_park() called outside a user thread");
    int expected = PERMIT;
    if (atomic_compare_exchange_strong(&self->park_state, &expected, RUNNING))
        return;
    switch_to_processor(self, AFTER_PARK);
}

void uls_unpark(uls_thread *t)
{
    int state = atomic_load(&t->park_state);
    for (;;) {
        if (state == PERMIT)
            return;
        if (state == RUNNING) {
            if (atomic_compare_exchange_weak(&t->park_state, &state, PERMIT))
                return;
        } else if (atomic_compare_exchange_weak(&t->park_state, &state, RUNNING)) {
            make_ready(t, false);
            return;
        }
    }
}

/* ---- the one-word semaphore ----
 * bit 0: lock, held for a few instructions while the wait queue changes;
 * bit 1: set when threads wait: the rest of the word points to the first waiter;
 * otherwise the word holds count << 2. */
#define SEM_LOCK ((uintptr_t)1)
#define SEM_WAITERS ((uintptr_t)2)
#define SEM_UNIT ((uintptr_t)4)

void uls_sem_init(uls_sem *sem, unsigned long count)
{
    atomic_store(&sem->word, (uintptr_t)count * SEM_UNIT);
}

static uintptr_t sem_lock(uls_sem *sem, uintptr_t word)
{
    unsigned spins = 0;
    for (;;) {
        if (!(word & SEM_LOCK) &&
            atomic_compare_exchange_weak_explicit(&sem->word, &word, word | SEM_LOCK,
                                                  memory_order_acquire, memory_order_relaxed))
            return word;
        spin_pause(&spins);
        word = atomic_load_explicit(&sem->word, memory_order_relaxed);
    }
}

void uls_sem_P(uls_sem *sem)
{
    uls_thread *self = uls_self();
    if (!self)
        fatal("uls_sem_P() called outside a user thread");
    uintptr_t word = atomic_load_explicit(&sem->word, memory_order_relaxed);
    while (!(word & (SEM_LOCK | SEM_WAITERS)) && word >= SEM_UNIT) {
        if (atomic_compare_exchange_weak_explicit(&sem->word, &word, word - SEM_UNIT,
                                                  memory_order_acquire, memory_order_relaxed))
            return;
    }
    word = sem_lock(sem, word);
    if (!(word & SEM_WAITERS) && word >= SEM_UNIT) { /* a V came in meanwhile */
        atomic_store_explicit(&sem->word, word - SEM_UNIT, memory_order_release);
        return;
    }
    self->sem_next = NULL;
    atomic_store_explicit(&self->sem_granted, 0, memory_order_relaxed);
    if (word & SEM_WAITERS) {
        uls_thread *first = (uls_thread *)(word & ~(SEM_LOCK | SEM_WAITERS));
        first->sem_tail->sem_next = self;
        first->sem_tail = self;
        atomic_store_explicit(&sem->word, word, memory_order_release);
    } else {
        self->sem_tail = self;
        atomic_store_explicit(&sem->word, (uintptr_t)self | SEM_WAITERS, memory_order_release);
    }
    /* Loop because a permit from an unrelated uls_unpark() may end a park early. */
    while (!atomic_load_explicit(&self->sem_granted, memory_order_acquire))
        uls_park();
}

void uls_sem_V(uls_sem *sem)
{
    uintptr_t word = atomic_load_explicit(&sem->word, memory_order_relaxed);
    while (!(word & (SEM_LOCK | SEM_WAITERS))) {
        if (atomic_compare_exchange_weak_explicit(&sem->word, &word, word + SEM_UNIT,
                                                  memory_order_release, memory_order_relaxed))
            return;
    }
    word = sem_lock(sem, word);
    if (!(word & SEM_WAITERS)) {
        atomic_store_explicit(&sem->word, word + SEM_UNIT, memory_order_release);
        return;
    }
    uls_thread *first = (uls_thread *)(word & ~(SEM_LOCK | SEM_WAITERS));
    uls_thread *rest = first->sem_next;
    if (rest) {
        rest->sem_tail = first->sem_tail;
        atomic_store_explicit(&sem->word, (uintptr_t)rest | SEM_WAITERS, memory_order_release);
    } else {
        atomic_store_explicit(&sem->word, 0, memory_order_release);
    }
    atomic_store_explicit(&first->sem_granted, 1, memory_order_release);
    uls_unpark(first);
}

long uls_sem_value(uls_sem *sem)
{
    uintptr_t word = sem_lock(sem, atomic_load(&sem->word));
    long value;
    if (word & SEM_WAITERS) {
        value = 0;
        for (uls_thread *t = (uls_thread *)(word & ~(SEM_LOCK | SEM_WAITERS)); t; t = t->sem_next)
            value--;
    } else {
        value = (long)(word / SEM_UNIT);
    }
    atomic_store_explicit(&sem->word, word, memory_order_release);
    return value;
}

uls_stats uls_get_stats(void)
{
    uls_stats s = {0};
    for (int i = 0; i < sched.nprocs; i++) {
        processor *p = &sched.procs[i];
        s.context_switches += atomic_load_explicit(&p->context_switches, memory_order_relaxed);
        s.steals += atomic_load_explicit(&p->steals, memory_order_relaxed);
        s.fairness_steals += atomic_load_explicit(&p->fairness_steals, memory_order_relaxed);
        s.sleeps += atomic_load_explicit(&p->sleeps, memory_order_relaxed);
    }
    return s;
}
