/*
 * refcache.h - scalable reference counts: per-core delta caches, epoch-based
 * detection of a true zero, weak references and a consistent read.
 *
 * inc and dec touch only the calling core's cache (one lock and one slot on
 * lines no other core writes).  A flush moves a core's deltas into the objects'
 * global counts; an epoch ends once every core has flushed in it (or holds
 * nothing).  refcache_tick flushes every core and ends the epoch; a self-ticking
 * refcache (rc->self_ticking) needs no ticker: each core flushes its own cache
 * every REFCACHE_FLUSH_EVERY changes, from the calls that make them, and ends
 * the epoch when the other cores have flushed in it too (a core that failed to
 * end it REFCACHE_STALLS times in a row flushes the core that held it back, say
 * one whose thread went idle, and reviews it too if it made no change since its
 * last flush).  The true count of an object
 * is its global count plus every cached delta, so a global count of zero proves
 * nothing by itself.  An object whose global count reaches zero at time t0 is
 * queued for review, on the list of the core whose flush saw it, with the epoch
 * e of that moment and examined once the epoch is e+2: by then every core has
 * flushed at least once after t0, or held nothing after t0, which says the
 * same (its deltas of t0 were flushed).  That core's ticks review it.  A flush marks
 * every object it finds in a cache dirty, even with a net delta of zero (a
 * reference that moved between cores leaves such entries).  If the object is
 * still not dirty and still zero, no core held a delta for it at t0, so its true
 * count was zero at t0, and with no reference left nobody can make a new one:
 * it is freed (after an EBR grace period, so lock-free readers that reached it
 * before it became unreachable finish first).  Dirty or nonzero: queued again.
 *
 * A weak reference can give a new strong one until the object is freed: the
 * upgrade marks the object dirty and adds to its global count under the weak
 * reference's lock, which the review takes before it decides.
 *
 * Rule for callers: only a holder of a reference (or a weak reference) may
 * create another; an object found through a pointer that does not count must
 * not be incremented.
 */
#ifndef SV6_REFCACHE_H
#define SV6_REFCACHE_H

#include "sv6/core.h"
#include "sv6/lock.h"
#include "sv6/ebr.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define REFCACHE_SLOTS 256 /* per core, direct mapped by object address */

struct refcache_weak;

struct refcache_obj {
    SV6_ALIGNED _Atomic int64_t global;
    atomic_bool dirty;
    /* Review state: only flushes that reach zero and the review touch these. */
    struct sv6_lock review_lock;
    bool queued;
    uint64_t review_epoch;
    struct refcache_obj *review_next;
    struct refcache_weak *weak;
    /* NULL: a plain counter (a link count), never reviewed or freed. */
    void (*release)(struct refcache_obj *obj);
    struct refcache *owner; /* set when handed to EBR for release */
    struct ebr_node ebr;
};

struct refcache_weak {
    struct sv6_lock lock;
    struct refcache_obj *obj; /* NULL once the object is freed */
};

struct refcache_slot {
    _Atomic(struct refcache_obj *) obj;
    _Atomic int64_t delta;
    /* Odd while the slot or a global count it feeds is being changed: the
     * consistent read sums an object's slots without locks and retries when
     * one moved.  Per slot, not per core, so that reading one object's count
     * reads nothing that counting another object on that core writes. */
    _Atomic uint64_t seq;
};

/* Self-ticking: a core flushes its own cache after this many changes. */
#define REFCACHE_FLUSH_EVERY 1024
/* Self-ticking: failed tries to end an epoch before a lagging core is flushed
 * by the core that tried (a few milliseconds of another core's changes: more
 * than a preempted thread's time slice, so a busy core flushes itself). */
#define REFCACHE_STALLS 32
/* Self-ticking: objects on a core's review list beyond which its ticks wait,
 * yielding, for the epochs to end (a thread preempted on another core holds
 * them back while this one keeps queueing), for at most REFCACHE_WAIT_NS: the
 * caller may hold a lock that the lagging core waits for. */
#define REFCACHE_WAITING_MAX 4096
#define REFCACHE_WAIT_NS (20 * 1000 * 1000L)

struct refcache_core {
    SV6_ALIGNED struct sv6_lock lock;
    /* Objects that reached zero in this core's flushes, waiting for review,
     * oldest first: queued in epoch order, so a tick stops at the first one
     * not yet due.  `waiting` counts them (read without the lock by a core
     * ending an epoch). */
    struct refcache_obj *review, *review_tail;
    _Atomic unsigned waiting;
    _Atomic unsigned used;     /* slots holding an object */
    unsigned changes;          /* since the last flush (self-ticking) */
    /* This core's failed tries to end epoch stalled_in: kept here, not on
     * the lagging core's line, so a try writes nothing of the core it waits
     * for.  Only threads of this core write them. */
    _Atomic unsigned stalls;
    _Atomic uint64_t stalled_in;
    struct refcache_slot slots[REFCACHE_SLOTS];
    /* The epoch of this core's last flush, on a line of its own: written once
     * per flush, so the cores that end epochs read it without taking the line
     * that every add of this core writes. */
    SV6_ALIGNED _Atomic uint64_t flushed;
    /* Objects this core handed to EBR minus releases run on it: a release
     * may run on another core, so one core's figure can be negative; the sum
     * over cores is what waits (a single counter would be a line that every
     * core writes twice for every object freed). */
    SV6_ALIGNED _Atomic long releasing;
};

struct refcache {
    struct refcache_core cores[SV6_NCORES];
    SV6_ALIGNED _Atomic uint64_t epoch;
    SV6_ALIGNED _Atomic uint64_t consistent_retries; /* for tests and docs */
    /* Set after refcache_init, while no other thread uses the refcache; on a
     * line no counter writes (every add reads it). */
    SV6_ALIGNED bool self_ticking;
    /* NULL, or called by refcache_tick after each core's flush (no core lock
     * held): lets a test move references between cores in the middle of a
     * tick, the race that the dirty marks exist for. */
    void (*after_flush)(unsigned core, void *arg);
    void *after_flush_arg;
};

/* rc's memory zeroed, as sv6_zalloc gives it: its slots start empty and are
 * not written again (SV6_NCORES x REFCACHE_SLOTS of them at every world's
 * creation). Needs no destroy: the caller frees the memory once every object
 * is gone (refcache_quiesce until it returns 0 does that). */
void refcache_init(struct refcache *rc);

/* count is the initial reference count, held by the caller.  release runs once
 * the true count is zero and must free the object; NULL makes a counter. */
void refcache_obj_init(struct refcache_obj *obj, int64_t count,
                       void (*release)(struct refcache_obj *obj));
void refcache_inc(struct refcache *rc, struct refcache_obj *obj);
void refcache_dec(struct refcache *rc, struct refcache_obj *obj);
void refcache_add(struct refcache *rc, struct refcache_obj *obj, int64_t delta);

/* The true count at one instant: global plus every core's delta, read without
 * locks and retried while any core's cache changes; after a few failed tries
 * it locks every core, so it always returns. */
int64_t refcache_read(struct refcache *rc, struct refcache_obj *obj);

/* Flush every core, end the epoch, review and free.  Returns how many objects
 * still wait for review.  The caller runs it (tests, teardown, a refcache that
 * does not tick itself). */
unsigned refcache_tick(struct refcache *rc);
/* Ticks and drains EBR until nothing waits for review or release: teardown
 * and tests.  Objects still referenced stay. */
void refcache_quiesce(struct refcache *rc);

/* The weak reference must outlive the object: the review reads obj->weak. */
void refcache_weak_init(struct refcache_weak *weak, struct refcache_obj *obj);
/* A new strong reference, or NULL if the object is gone (or going). */
struct refcache_obj *refcache_weak_get(struct refcache_weak *weak);

#endif
