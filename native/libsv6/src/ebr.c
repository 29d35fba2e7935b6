/* ebr.c - epoch-based reclamation (see ebr.h for the argument). */
#include "sv6/ebr.h"

#include "sv6/core.h"
#include "sv6/lock.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_THREADS 256
/* Try to reclaim once this many more callbacks per two slots in use wait than
 * after the last try: a try scans every thread's slot, whose announcements those
 * threads keep writing (a line moved per slot), and moves the epoch, which every
 * thread then reads again; a batch that grows with the slots keeps those moves
 * per retirement about the same as threads are added (up to RECLAIM_BATCH_MAX),
 * while two or three threads (refcache's waits on reclamation) keep the batch and
 * the callbacks held as they were. */
#define RECLAIM_BATCH 128
#define RECLAIM_BATCH_MAX (EBR_PENDING_MAX / 2)
/* How long a thread holding EBR_PENDING_MAX callbacks (ebr.h) waits in ebr_exit:
 * the caller may hold a lock that the stalled section waits for. */
#define EBR_WAIT_NS (20 * 1000 * 1000L)

/* One per thread.  The retired list stays in the slot when its thread exits
 * (the next thread to take the slot, or ebr_drain, runs it); its lock is
 * only contended by ebr_drain. */
struct slot {
    SV6_ALIGNED _Atomic uint64_t announced; /* epoch << 1 | 1 inside, 0 outside */
    atomic_bool in_use;
    struct sv6_lock lock;
    /* Oldest first, under lock: one thread retires onto its slot, so epochs
     * never decrease along it and what has expired is a prefix. */
    struct ebr_node *retired;
    struct ebr_node **retired_end; /* the link after the newest */
    _Atomic unsigned pending; /* length of retired; read without the lock */
};

static SV6_ALIGNED _Atomic uint64_t global_epoch = 1;
/* Slots ever taken: 0 .. slots_used-1 (only grows, rarely written). */
static SV6_ALIGNED _Atomic unsigned slots_used;
static struct slot slots[MAX_THREADS];
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;

struct thread_state {
    struct slot *slot;
    unsigned nesting;
    bool reclaiming; /* callbacks run by this thread may retire and exit */
    /* Pending count at which this thread tries to reclaim next.  While
     * another thread's section holds the epoch back, a try reclaims little:
     * trying again at every exit would read that thread's slot each time. */
    unsigned reclaim_at;
};
static _Thread_local struct thread_state self;

static void on_thread_exit(void *unused)
{
    (void)unused;
    atomic_store(&self.slot->in_use, false);
    self.slot = NULL;
}

static void setup(void)
{
    for (unsigned i = 0; i < MAX_THREADS; i++) {
        sv6_lock_init(&slots[i].lock);
        slots[i].retired_end = &slots[i].retired;
    }
    if (pthread_key_create(&exit_key, on_thread_exit) != 0) {
        fprintf(stderr, "ebr: pthread_key_create failed\n");
        abort();
    }
}

static struct slot *my_slot(void)
{
    if (self.slot)
        return self.slot;
    pthread_once(&setup_once, setup);
    for (unsigned i = 0; i < MAX_THREADS; i++) {
        bool expected = false;
        if (atomic_compare_exchange_strong(&slots[i].in_use, &expected, true)) {
            unsigned used = atomic_load(&slots_used);
            while (used < i + 1 && !atomic_compare_exchange_weak(&slots_used, &used, i + 1))
                ;
            self.slot = &slots[i];
            pthread_setspecific(exit_key, &self);
            return self.slot;
        }
    }
    fprintf(stderr, "ebr: more than %d threads at once\n", MAX_THREADS);
    abort();
}

/* Advances the global epoch if every thread inside a section has seen it. */
static uint64_t try_advance(void)
{
    uint64_t epoch = atomic_load(&global_epoch);
    unsigned used = atomic_load(&slots_used);
    for (unsigned i = 0; i < used; i++) {
        uint64_t announced = atomic_load(&slots[i].announced);
        if ((announced & 1) && (announced >> 1) != epoch)
            return epoch;
    }
    atomic_compare_exchange_strong(&global_epoch, &epoch, epoch + 1);
    return atomic_load(&global_epoch);
}

/* Takes out of slot's list the callbacks retired at or before `upto` whose
 * grace period is over at `epoch`. */
static struct ebr_node *take_expired(struct slot *slot, uint64_t upto, uint64_t epoch)
{
    sv6_lock(&slot->lock);
    struct ebr_node *expired = slot->retired, *node;
    struct ebr_node **end = &slot->retired; /* the link ending the expired prefix */
    unsigned count = 0;
    while ((node = *end) && node->epoch <= upto && node->epoch + 2 <= epoch) {
        end = &node->next;
        count++;
    }
    if (count > 0) {
        *end = NULL;
        slot->retired = node;
        if (!node)
            slot->retired_end = &slot->retired;
        SV6_HOLDER_ADD(&slot->pending, -count);
    }
    sv6_unlock(&slot->lock);
    return count > 0 ? expired : NULL;
}

/* No lock held: callbacks may retire more (onto this thread's slot). */
static unsigned long run(struct ebr_node *list)
{
    unsigned long ran = 0;
    self.reclaiming = true;
    while (list) {
        struct ebr_node *node = list;
        list = node->next;
        node->reclaim(node);
        ran++;
    }
    self.reclaiming = false;
    return ran;
}

static long elapsed_ns(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - since->tv_sec) * 1000000000L + (now.tv_nsec - since->tv_nsec);
}

/* Outside any section of this thread, with EBR_PENDING_MAX callbacks held:
 * yields to the readers that hold the epoch back and reclaims as it moves,
 * until fewer wait or EBR_WAIT_NS has passed. */
static void wait_for_readers(struct slot *slot)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (atomic_load(&slot->pending) >= EBR_PENDING_MAX && elapsed_ns(&start) < EBR_WAIT_NS) {
        sched_yield();
        run(take_expired(slot, UINT64_MAX, try_advance()));
    }
}

void ebr_enter(void)
{
    struct slot *slot = my_slot();
    if (self.nesting++ > 0)
        return;
    /* Announce, then check the epoch did not move meanwhile: a writer that
     * advanced it without seeing the announcement must not be trusted. */
    for (;;) {
        uint64_t epoch = atomic_load(&global_epoch);
        atomic_store(&slot->announced, epoch << 1 | 1);
        if (atomic_load(&global_epoch) == epoch)
            return;
    }
}

void ebr_exit(void)
{
    if (--self.nesting > 0)
        return;
    struct slot *slot = self.slot;
    /* Leaving needs no fence (a reclaimer that still sees the announcement
     * only waits longer): a plain store, not a locked exchange. */
    atomic_store_explicit(&slot->announced, 0, memory_order_release);
    unsigned pending = atomic_load(&slot->pending);
    if (pending < self.reclaim_at) /* an ebr_drain ran this list meanwhile */
        self.reclaim_at = pending;
    if (self.reclaiming)
        return;
    unsigned pairs = atomic_load_explicit(&slots_used, memory_order_relaxed) / 2;
    unsigned batch = RECLAIM_BATCH * (pairs > 1 ? pairs : 1);
    if (pending >= self.reclaim_at + (batch < RECLAIM_BATCH_MAX ? batch : RECLAIM_BATCH_MAX)) {
        run(take_expired(slot, UINT64_MAX, try_advance()));
        self.reclaim_at = atomic_load(&slot->pending);
    }
    /* At every exit, not only every RECLAIM_BATCH: a wait that timed out lets
     * one more section's callbacks in, not a batch. */
    if (pending >= EBR_PENDING_MAX) {
        wait_for_readers(slot);
        self.reclaim_at = atomic_load(&slot->pending);
    }
}

void ebr_retire(struct ebr_node *node, void (*reclaim)(struct ebr_node *node))
{
    struct slot *slot = my_slot();
    node->reclaim = reclaim;
    node->epoch = atomic_load(&global_epoch);
    sv6_lock(&slot->lock);
    node->next = NULL;
    *slot->retired_end = node;
    slot->retired_end = &node->next;
    SV6_HOLDER_ADD(&slot->pending, 1);
    sv6_unlock(&slot->lock);
}

unsigned long ebr_drain(void)
{
    my_slot();
    /* Everything retired so far carries an epoch <= upto; what others retire
     * later carries a larger one once the epoch moves, so this ends even
     * while other threads keep retiring. */
    uint64_t upto = atomic_load(&global_epoch);
    unsigned long ran = 0;
    for (;;) {
        uint64_t epoch = try_advance();
        bool left = false;
        /* Slots past slots_used were never taken: nothing was retired there. */
        unsigned used = atomic_load(&slots_used);
        for (unsigned i = 0; i < used; i++) {
            ran += run(take_expired(&slots[i], upto, epoch));
            sv6_lock(&slots[i].lock);
            for (struct ebr_node *node = slots[i].retired; node && !left; node = node->next)
                left = node->epoch <= upto;
            sv6_unlock(&slots[i].lock);
        }
        if (!left)
            return ran;
        sched_yield(); /* a reader still inside keeps the epoch back */
    }
}
