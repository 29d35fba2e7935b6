/*
 * objset.h - a set of objects ordered by key, with interchangeable
 * implementations behind one interface:
 *
 *   "ldu-percore"  ordered tree + rwlock; updates are logged on per-core queues (LDU)
 *   "ldu-global"   the same with one global log queue
 *   "rwlock"       ordered tree under a reader-writer lock (what Linux's rmap does)
 *   "harris"       Harris's lock-free sorted list with epoch-based reclamation
 *
 * The set never allocates or frees the objects: the caller owns them and embeds
 * a struct set_object in its own structure (like Linux's vm_area_struct embeds
 * its rmap hooks).
 *
 * Usage precondition (all implementations, checked in LDU_DEBUG builds): the
 * updates of one object are issued by one thread at a time (or serialized by
 * the caller), and they alternate - insert, remove, insert, ... - starting
 * with insert.  An object is never inserted twice in a row nor removed while
 * absent.  LDU relies on it: with at most one update of an object pending, an
 * update can simply cancel the pending opposite one.
 *
 * Threads: every thread that touches a set first attaches (objset_attach) and
 * uses its own worker handle; all workers must detach before objset_destroy.
 */
#ifndef LDU_OBJSET_H
#define LDU_OBJSET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct set_object;

/* One deferred update of one object (LDU).  Two of them live in every object. */
struct ldu_log {
    struct ldu_log *next;      /* queue link, valid while queued */
    struct set_object *object;
    int inserts;               /* 1: the insert log, 0: the remove log */
    atomic_int pending;        /* the mark: 1 while the update still has to be applied */
    atomic_int queued;         /* 1 while linked in a queue (or being linked) */
};

/* Two cache lines: the first is what walks read (written only when the tree
 * changes), the second what the object's updater writes on every LDU update.
 * Sharing one line, each update would take the walkers' line away from their
 * CPU (false sharing).  Allocate arrays of objects with alloc_aligned_zeroed. */
struct set_object {
    uint64_t key;              /* order of the set (ties broken by address) */
    struct set_object *tree_left, *tree_right;   /* tree hooks (LDU and rwlock sets) */
    _Alignas(64) struct ldu_log insert_log;
    struct ldu_log remove_log;
    int debug_present;         /* the owner's view of membership; used by LDU_DEBUG checks */
};

/* Per-worker counters; a worker's own, read by the same thread. */
struct objset_stats {
    uint64_t lock_waits;       /* lock acquisitions that had to block */
    uint64_t lock_wait_ns;     /* time spent blocked in them */
    uint64_t syncs;            /* LDU: synchronize() runs by this worker */
    uint64_t logs_applied;     /* LDU: logged updates this worker applied to the tree */
    uint64_t merged_walks;     /* LDU: walks that read still-queued logs instead of applying them */
};

struct objset;
struct objset_worker;

typedef void (*objset_visit_fn)(struct set_object *object, void *arg);

/* The implementation names above, NULL-terminated. */
extern const char *const objset_impl_names[];

void set_object_init(struct set_object *object, uint64_t key);

/* Zeroed memory on whole cache lines, released with free(): for objects that
 * embed a struct set_object (64-byte aligned) and for per-thread state that
 * must not share a line with a neighbour's.  Always inlined, so that an
 * allocation's return address is in the function that asked for the block: a
 * tracer names the block by it (scalecheck sharing, docs/heap-names.md). */
static inline __attribute__((always_inline)) void *alloc_aligned_zeroed(size_t size)
{
    size_t rounded = (size + 63) / 64 * 64;
    void *memory = aligned_alloc(64, rounded);
    if (memory)
        memset(memory, 0, rounded);
    return memory;
}

/* Returns NULL if impl_name is unknown or max_workers is 0 (errno EINVAL), or
 * if memory ran out.  max_workers bounds how many workers may be attached at once. */
struct objset *objset_create(const char *impl_name, unsigned max_workers);
void objset_destroy(struct objset *set);
const char *objset_impl_name(const struct objset *set);

/* cpu picks the per-core queue of "ldu-percore" (there are max_workers of them:
 * give each worker its own number below max_workers, as a benchmark running a
 * worker per core does); any number is accepted.  Returns NULL when max_workers
 * workers are attached already. */
struct objset_worker *objset_attach(struct objset *set, unsigned cpu);
void objset_detach(struct objset_worker *worker);

void objset_insert(struct objset_worker *worker, struct set_object *object);
void objset_remove(struct objset_worker *worker, struct set_object *object);

/* Calls visit on every member in key order; returns how many it visited.
 * "rwlock" walks are atomic snapshots.  LDU and "harris" walks are
 * linearizable per object only: an object whose last update completed before
 * the walk began, with no update of it during the walk, is visited exactly
 * when that update was an insert; an object updated during the walk may or
 * may not be.  Across objects the walk is not a snapshot: it may show a later
 * update of one object without an earlier update (by the same thread) of
 * another, because LDU applies logs out of their issue order and a walk reads
 * the logs it cannot apply at different moments (docs/ldu.md). */
size_t objset_walk(struct objset_worker *worker, objset_visit_fn visit, void *arg);

/* Waits until every object this worker removed before the call may be
 * freed or reused for another set: LDU applies and unqueues the logs embedded
 * in it, Harris's list waits for concurrent walkers to be done with it (an
 * epoch grace period).  Call it between the last remove and free(). */
void objset_barrier(struct objset_worker *worker);

const struct objset_stats *objset_worker_stats(const struct objset_worker *worker);

#endif
