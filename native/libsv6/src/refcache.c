/* refcache.c - per-core delta caches and true-zero review (see refcache.h). */
#include "sv6/refcache.h"

#include <sched.h>
#include <stdint.h>
#include <time.h>

/* Lock-free tries of the consistent read before it locks every core. */
#define READ_TRIES 8

void refcache_init(struct refcache *rc)
{
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        struct refcache_core *core = &rc->cores[c];
        sv6_lock_init(&core->lock);
        core->review = core->review_tail = NULL;
        atomic_init(&core->waiting, 0);
        atomic_init(&core->used, 0);
        atomic_init(&core->flushed, 0);
        core->changes = 0;
        atomic_init(&core->stalls, 0);
        atomic_init(&core->stalled_in, 0);
        atomic_init(&core->releasing, 0);
    }
    atomic_init(&rc->epoch, 1);
    rc->self_ticking = false;
    atomic_init(&rc->consistent_retries, 0);
    rc->after_flush = NULL;
    rc->after_flush_arg = NULL;
}

void refcache_obj_init(struct refcache_obj *obj, int64_t count,
                       void (*release)(struct refcache_obj *obj))
{
    atomic_init(&obj->global, count);
    atomic_init(&obj->dirty, false);
    sv6_lock_init(&obj->review_lock);
    obj->queued = false;
    obj->review_epoch = 0;
    obj->review_next = NULL;
    obj->weak = NULL;
    obj->release = release;
}

/* The slot's seq odd: what follows may change its delta or object (the
 * consistent read retries while odd or changed).  Only the core's lock holder
 * writes a slot, its counts and seq (SV6_HOLDER_ADD). */
static void seq_begin(struct refcache_slot *slot)
{
    SV6_HOLDER_ADD(&slot->seq, 1);
    atomic_thread_fence(memory_order_release);
}

static void seq_end(struct refcache_slot *slot)
{
    SV6_HOLDER_ADD(&slot->seq, 1);
}

static unsigned slot_index(const struct refcache_obj *obj)
{
    uintptr_t bits = (uintptr_t)obj / SV6_PLACEMENT;
    return (unsigned)((bits ^ bits >> 8) % REFCACHE_SLOTS);
}

/* Under core->lock: obj at the end of the core's review list. */
static void append_review(struct refcache_core *core, struct refcache_obj *obj)
{
    obj->review_next = NULL;
    if (core->review_tail)
        core->review_tail->review_next = obj;
    else
        core->review = obj;
    core->review_tail = obj;
}

/* Under core->lock: queue obj, whose global count is now zero, for review. */
static void queue_review(struct refcache *rc, struct refcache_core *core,
                         struct refcache_obj *obj)
{
    sv6_lock(&obj->review_lock);
    if (!obj->queued) {
        obj->queued = true;
        /* Deltas cached before now are flushed by the next full round and
         * set dirty again; clearing here starts the window at t0. */
        atomic_store(&obj->dirty, false);
        obj->review_epoch = atomic_load(&rc->epoch);
        append_review(core, obj);
        SV6_HOLDER_ADD(&core->waiting, 1);
    }
    sv6_unlock(&obj->review_lock);
}

/* Under core->lock with the slot's seq odd: move the slot's delta into its object. */
static void flush_slot(struct refcache *rc, struct refcache_core *core,
                       struct refcache_slot *slot)
{
    struct refcache_obj *obj = atomic_load(&slot->obj);
    if (!obj)
        return;
    int64_t delta = atomic_load_explicit(&slot->delta, memory_order_relaxed);
    /* touched, even if delta is 0; seen by whoever sees the new global count */
    atomic_store_explicit(&obj->dirty, true, memory_order_relaxed);
    int64_t now = atomic_fetch_add(&obj->global, delta) + delta;
    atomic_store_explicit(&slot->delta, 0, memory_order_relaxed);
    atomic_store_explicit(&slot->obj, NULL, memory_order_relaxed);
    SV6_HOLDER_ADD(&core->used, (unsigned)-1);
    if (now == 0 && obj->release)
        queue_review(rc, core, obj);
}

static void tick_core(struct refcache *rc, struct refcache_core *core);
static void end_epoch(struct refcache *rc, struct refcache_core *self);

static long elapsed_ns(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - since->tv_sec) * 1000000000L + (now.tv_nsec - since->tv_nsec);
}

/* Self-ticking, no lock of core held, REFCACHE_WAITING_MAX objects on core's
 * review list: ticks core again, yielding in between, so that the epochs end
 * (helping a lagging core as end_epoch does) and the list is reviewed, until
 * fewer wait or REFCACHE_WAIT_NS has passed. */
static void wait_for_epochs(struct refcache *rc, struct refcache_core *core)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (atomic_load(&core->waiting) >= REFCACHE_WAITING_MAX && elapsed_ns(&start) < REFCACHE_WAIT_NS) {
        sched_yield();
        sv6_lock(&core->lock);
        tick_core(rc, core);
        sv6_unlock(&core->lock);
        end_epoch(rc, core);
    }
}

void refcache_add(struct refcache *rc, struct refcache_obj *obj, int64_t delta)
{
    struct refcache_core *core = &rc->cores[sv6_core()];
    struct refcache_slot *slot = &core->slots[slot_index(obj)];
    sv6_lock(&core->lock);
    seq_begin(slot);
    if (atomic_load_explicit(&slot->obj, memory_order_relaxed) != obj) {
        flush_slot(rc, core, slot); /* evict whoever had the slot */
        atomic_store_explicit(&slot->obj, obj, memory_order_relaxed);
        SV6_HOLDER_ADD(&core->used, 1);
    }
    SV6_HOLDER_ADD(&slot->delta, delta);
    seq_end(slot);
    /* Self-ticking: this core's own timer tick, counted in changes. */
    bool tick = rc->self_ticking && ++core->changes >= REFCACHE_FLUSH_EVERY;
    if (tick)
        tick_core(rc, core);
    sv6_unlock(&core->lock);
    if (tick) {
        end_epoch(rc, core);
        if (atomic_load(&core->waiting) >= REFCACHE_WAITING_MAX)
            wait_for_epochs(rc, core);
    }
}

void refcache_inc(struct refcache *rc, struct refcache_obj *obj)
{
    refcache_add(rc, obj, 1);
}

void refcache_dec(struct refcache *rc, struct refcache_obj *obj)
{
    refcache_add(rc, obj, -1);
}

static int64_t cached_delta(struct refcache_core *core, struct refcache_obj *obj)
{
    struct refcache_slot *slot = &core->slots[slot_index(obj)];
    return atomic_load(&slot->obj) == obj ? atomic_load(&slot->delta) : 0;
}

int64_t refcache_read(struct refcache *rc, struct refcache_obj *obj)
{
    /* obj's deltas live only in its slot of each core, and every change of its
     * count (an add, an eviction, a flush) bumps that slot's sequence number. */
    unsigned index = slot_index(obj);
    uint64_t seqs[SV6_NCORES];
    for (unsigned try = 0; try < READ_TRIES; try++) {
        int64_t sum = 0;
        bool busy = false;
        for (unsigned c = 0; c < SV6_NCORES && !busy; c++) {
            seqs[c] = atomic_load(&rc->cores[c].slots[index].seq);
            busy = seqs[c] & 1;
            sum += cached_delta(&rc->cores[c], obj);
        }
        if (!busy) {
            sum += atomic_load(&obj->global);
            /* Unchanged sequence numbers: no slot of obj and no flush into its
             * global count moved while we summed, so the sum is one instant. */
            bool stable = true;
            for (unsigned c = 0; c < SV6_NCORES && stable; c++)
                stable = atomic_load(&rc->cores[c].slots[index].seq) == seqs[c];
            if (stable)
                return sum;
        }
        atomic_fetch_add(&rc->consistent_retries, 1);
        sched_yield();
    }
    /* Busy caches: hold them all still (in core order, as nobody else holds
     * two core locks, this cannot deadlock). */
    for (unsigned c = 0; c < SV6_NCORES; c++)
        sv6_lock(&rc->cores[c].lock);
    int64_t sum = atomic_load(&obj->global);
    for (unsigned c = 0; c < SV6_NCORES; c++)
        sum += cached_delta(&rc->cores[c], obj);
    for (unsigned c = SV6_NCORES; c-- > 0;)
        sv6_unlock(&rc->cores[c].lock);
    return sum;
}

static void run_release(struct ebr_node *node)
{
    struct refcache_obj *obj = SV6_CONTAINER_OF(node, struct refcache_obj, ebr);
    struct refcache *rc = obj->owner;
    obj->release(obj);
    atomic_fetch_sub(&rc->cores[sv6_core()].releasing, 1);
}

/* Under the lock of the core whose list holds obj, epoch >= obj->review_epoch
 * + 2: true when obj leaves the review list (freed, or alive again), false when
 * it must wait another round. */
static bool review(struct refcache *rc, struct refcache_obj *obj, uint64_t epoch)
{
    sv6_lock(&obj->review_lock);
    bool done = true, freed = false;
    if (atomic_load(&obj->global) != 0) {
        obj->queued = false; /* alive again; a later zero queues it anew */
    } else {
        struct refcache_weak *weak = obj->weak;
        if (weak) /* a weak upgrade marks dirty under this lock */
            sv6_lock(&weak->lock);
        if (atomic_load(&obj->dirty)) {
            /* Touched since t0: the count may be cached somewhere; the window
             * starts again now. */
            atomic_store(&obj->dirty, false);
            obj->review_epoch = epoch;
            done = false;
        } else {
            if (weak)
                weak->obj = NULL;
            freed = true;
        }
        if (weak)
            sv6_unlock(&weak->lock);
    }
    sv6_unlock(&obj->review_lock);
    if (freed) {
        obj->owner = rc;
        atomic_fetch_add(&rc->cores[sv6_core()].releasing, 1);
        ebr_retire(&obj->ebr, run_release);
    }
    return done;
}

/* Under core->lock: reviews the objects of its list whose two epochs have
 * passed: a prefix, as the list is in epoch order (one that must wait again
 * goes to the end with the current epoch).  review_epoch is written under
 * review_lock by queue_review, which only runs for objects not queued, and by
 * review, which runs only here, so reading it under the core lock is safe. */
static void review_due(struct refcache *rc, struct refcache_core *core)
{
    uint64_t epoch = atomic_load(&rc->epoch);
    struct refcache_obj *obj;
    while ((obj = core->review) && obj->review_epoch + 2 <= epoch) {
        core->review = obj->review_next;
        if (!core->review)
            core->review_tail = NULL;
        if (review(rc, obj, epoch))
            SV6_HOLDER_ADD(&core->waiting, (unsigned)-1);
        else
            append_review(core, obj);
    }
}

/* Under core->lock: moves every cached delta into its object, in the current
 * epoch. */
static void flush_core(struct refcache *rc, struct refcache_core *core)
{
    uint64_t epoch = atomic_load(&rc->epoch);
    for (unsigned i = 0; i < REFCACHE_SLOTS && atomic_load(&core->used) > 0; i++) {
        struct refcache_slot *slot = &core->slots[i];
        if (!atomic_load(&slot->obj))
            continue; /* nothing moves: the consistent read need not retry */
        seq_begin(slot);
        flush_slot(rc, core, slot);
        seq_end(slot);
    }
    /* Read before the flush: the flush happened in that epoch or later. */
    atomic_store(&core->flushed, epoch);
    core->changes = 0;
}

/* Under core->lock: one core's share of a tick. */
static void tick_core(struct refcache *rc, struct refcache_core *core)
{
    flush_core(rc, core);
    review_due(rc, core);
}

/* Counts a failed try of self to end epoch: how many in a row it has made in
 * that epoch (a lagging core that flushes lets the epoch end, which starts the
 * count anew).  Relaxed: only threads of self's core write these. */
static unsigned stalled(struct refcache_core *self, uint64_t epoch)
{
    if (atomic_load_explicit(&self->stalled_in, memory_order_relaxed) != epoch) {
        atomic_store_explicit(&self->stalled_in, epoch, memory_order_relaxed);
        atomic_store_explicit(&self->stalls, 0, memory_order_relaxed);
    }
    unsigned stalls = atomic_load_explicit(&self->stalls, memory_order_relaxed) + 1;
    atomic_store_explicit(&self->stalls, stalls, memory_order_relaxed);
    return stalls;
}

/* Ends the current epoch e if every core has flushed in it or holds nothing
 * now (neither deltas nor objects to review): either way whatever a core
 * cached before e began has reached the global counts.  A helper (the core
 * `self` that just ticked; NULL from refcache_tick) that has failed
 * REFCACHE_STALLS times in a row flushes the core holding the epoch back (if
 * its lock is free), so that a core whose thread stopped calling does not stop
 * every core's reviews.  That core's review list is left to it (its frees stay
 * on its thread, by the allocator that made them) unless it made no change
 * since its last flush: then it looks idle and is reviewed here too. */
static void end_epoch(struct refcache *rc, struct refcache_core *self)
{
    uint64_t epoch = atomic_load(&rc->epoch);
    unsigned tries = 0; /* self's in this epoch, counted at the first lagging core */
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        struct refcache_core *core = &rc->cores[c];
        uint64_t flushed = atomic_load(&core->flushed);
        if (flushed >= epoch)
            continue;
        if (self && tries == 0)
            tries = stalled(self, epoch);
        /* It flushed in the last epoch: busy, it will flush in this one and end
         * it itself.  A first try leaves alone its line that every add writes
         * (reading it there costs two transfers of the line per epoch). */
        if (tries == 1 && flushed + 1 == epoch)
            return;
        if (atomic_load(&core->used) == 0 && atomic_load(&core->waiting) == 0)
            continue;
        if (!self || tries < REFCACHE_STALLS || !sv6_trylock(&core->lock))
            return;
        bool idle = core->changes == 0;
        flush_core(rc, core);
        if (idle)
            review_due(rc, core);
        sv6_unlock(&core->lock);
    }
    atomic_compare_exchange_strong(&rc->epoch, &epoch, epoch + 1);
}

unsigned refcache_tick(struct refcache *rc)
{
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        struct refcache_core *core = &rc->cores[c];
        sv6_lock(&core->lock);
        flush_core(rc, core);
        sv6_unlock(&core->lock);
        if (rc->after_flush)
            rc->after_flush(c, rc->after_flush_arg);
    }
    end_epoch(rc, NULL);
    unsigned waiting = 0;
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        struct refcache_core *core = &rc->cores[c];
        sv6_lock(&core->lock);
        review_due(rc, core);
        waiting += atomic_load(&core->waiting);
        sv6_unlock(&core->lock);
    }
    return waiting;
}

/* Objects handed to EBR whose release has not run yet. */
static long releasing(struct refcache *rc)
{
    long sum = 0;
    for (unsigned c = 0; c < SV6_NCORES; c++)
        sum += atomic_load(&rc->cores[c].releasing);
    return sum;
}

void refcache_quiesce(struct refcache *rc)
{
    /* A release may drop references to other objects (a file its inode): those
     * show up at the next tick.  Done when a tick after the last release finds
     * nothing at zero and nothing waits for EBR. */
    for (;;) {
        unsigned waiting = refcache_tick(rc);
        ebr_drain();
        if (waiting == 0 && releasing(rc) == 0 && refcache_tick(rc) == 0)
            return;
    }
}

void refcache_weak_init(struct refcache_weak *weak, struct refcache_obj *obj)
{
    sv6_lock_init(&weak->lock);
    weak->obj = obj;
    sv6_lock(&obj->review_lock);
    obj->weak = weak;
    sv6_unlock(&obj->review_lock);
}

struct refcache_obj *refcache_weak_get(struct refcache_weak *weak)
{
    sv6_lock(&weak->lock);
    struct refcache_obj *obj = weak->obj;
    if (obj) {
        /* Straight into the global count, not the core cache: taking a core
         * lock here would order weak -> core against the flush's core -> obj
         * -> weak.  Upgrades are the rare path; the dirty mark makes a review
         * that already saw zero look again. */
        atomic_store(&obj->dirty, true);
        atomic_fetch_add(&obj->global, 1);
    }
    sv6_unlock(&weak->lock);
    return obj;
}
