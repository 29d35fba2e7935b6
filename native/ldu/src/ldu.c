/*
 * ldu.c - LDU: lightweight log-based deferred update.
 *
 * The set is the same ordered tree as the rwlock baseline, but updates never
 * take the lock.  Every object embeds an insert log and a remove log, each
 * with a `pending` mark and a `queued` flag.  An update
 *   1. cancels the opposite update if it is still pending (atomic swap of its
 *      mark to 0): insert-then-remove before anyone looked is a no-op;
 *   2. otherwise sets its own mark, and if its log is still linked in a queue
 *      (a cancelled earlier update of the same kind) reuses it;
 *   3. otherwise pushes its log onto a lock-free queue (one global queue, or
 *      the queue of the updater's CPU).
 * synchronize() runs under the mutex: it takes every queue's list, and for
 * each log swaps the mark to 0 and, if it was 1, applies the update to the
 * tree.  Readers synchronize before they walk; updaters synchronize every
 * SYNC_EVERY_PUSHES pushes (when the lock is free) so logs stay short.
 *
 * Why it is correct (see docs/ldu.md for the longer argument): because the
 * updates of an object alternate and are issued one at a time, at most one of
 * its two marks is set, and it belongs to its latest update.  A mark is
 * consumed by exactly one swap, either a cancelling update or synchronize, so
 * each update is applied at most once, and an update's mark is set only after
 * the previous update of the object was consumed, so synchronize applies the
 * updates of one object in order.  The queued/pending hand-off is a Dekker
 * pattern: the updater sets pending then swaps queued; synchronize clears
 * queued then swaps pending (both sequentially consistent), so either
 * synchronize sees the mark or the updater sees the log unqueued and pushes
 * it again.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "objset_impl.h"
#include "tree.h"

/* Bounds how much a reader may have to apply; small enough that the logs stay
 * in cache, large enough that updaters rarely touch the lock. */
#define SYNC_EVERY_PUSHES 64

struct ldu_queue {
    _Alignas(64) _Atomic(struct ldu_log *) head;
};

struct ldu_set {
    struct objset base;
    pthread_mutex_t lock;      /* guards root; held by synchronize() and walks */
    struct set_object *root;
    unsigned nqueues;
    struct ldu_queue *queues;
};

struct ldu_worker {
    struct objset_worker base;
    struct ldu_queue *queue;
    unsigned pushes_since_sync;
};

static struct objset *ldu_create(const struct objset_ops *ops, unsigned max_workers)
{
    (void)max_workers;
    struct ldu_set *set = alloc_aligned_zeroed(sizeof *set);
    if (!set)
        return NULL;
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    set->base.ops = ops;
    set->nqueues = ops->queues ? ops->queues : (unsigned)(cpus > 0 ? cpus : 1);
    set->queues = alloc_aligned_zeroed(set->nqueues * sizeof *set->queues);
    if (!set->queues) {
        free(set);
        return NULL;
    }
    pthread_mutex_init(&set->lock, NULL);
    return &set->base;
}

static void ldu_destroy(struct objset *base)
{
    struct ldu_set *set = (struct ldu_set *)base;
    pthread_mutex_destroy(&set->lock);
    free(set->queues);
    free(set);
}

static struct objset_worker *ldu_attach(struct objset *base, unsigned cpu)
{
    struct ldu_set *set = (struct ldu_set *)base;
    struct ldu_worker *worker = alloc_aligned_zeroed(sizeof *worker);
    if (!worker)
        return NULL;
    worker->base.set = base;
    worker->queue = &set->queues[cpu % set->nqueues];
    return &worker->base;
}

static void ldu_detach(struct objset_worker *worker)
{
    free(worker);
}

/* Applies every logged update; the caller holds set->lock. */
static void synchronize(struct ldu_worker *worker, struct ldu_set *set)
{
    worker->base.stats.syncs++;
    for (unsigned q = 0; q < set->nqueues; q++) {
        /* A load first: most per-core queues are empty, and a swap would
         * take each one's line away from its CPU. */
        if (!atomic_load_explicit(&set->queues[q].head, memory_order_relaxed))
            continue;
        struct ldu_log *log = atomic_exchange_explicit(&set->queues[q].head, NULL,
                                                       memory_order_acquire);
        /* The list is newest-first.  Order does not matter: a log whose mark
         * is set is the latest update of its object, and an update of the
         * same object made after we consume this mark either finds its log
         * still queued ahead of us in this list, or pushes it again. */
        while (log) {
            /* Read the link first: once queued is 0 the updater may push the
             * log again, which rewrites it. */
            struct ldu_log *next = log->next;
            atomic_store(&log->queued, 0);
            if (atomic_exchange(&log->pending, 0)) {
                if (log->inserts)
                    tree_insert(&set->root, log->object);
                else
                    tree_remove(&set->root, log->object);
                worker->base.stats.logs_applied++;
            }
            log = next;
        }
    }
}

static void push(struct ldu_queue *queue, struct ldu_log *log)
{
    struct ldu_log *head = atomic_load_explicit(&queue->head, memory_order_relaxed);
    do
        log->next = head;
    while (!atomic_compare_exchange_weak_explicit(&queue->head, &head, log,
                                                  memory_order_release, memory_order_relaxed));
}

static void log_update(struct objset_worker *base, struct ldu_log *own, struct ldu_log *opposite)
{
    struct ldu_worker *worker = (struct ldu_worker *)base;
    struct ldu_set *set = (struct ldu_set *)base->set;
    /* A cheap load first: the swap would write the line even when nothing is
     * pending.  Acquire, so that our own mark below is ordered after the
     * synchronize() that consumed the opposite one. */
    if (atomic_load_explicit(&opposite->pending, memory_order_acquire) &&
        atomic_exchange(&opposite->pending, 0))
        return;
    atomic_store(&own->pending, 1);
    if (atomic_exchange(&own->queued, 1))
        return;
    push(worker->queue, own);
    if (++worker->pushes_since_sync >= SYNC_EVERY_PUSHES && pthread_mutex_trylock(&set->lock) == 0) {
        synchronize(worker, set);
        pthread_mutex_unlock(&set->lock);
        worker->pushes_since_sync = 0;
    }
}

static void ldu_insert(struct objset_worker *worker, struct set_object *object)
{
    log_update(worker, &object->insert_log, &object->remove_log);
}

static void ldu_remove(struct objset_worker *worker, struct set_object *object)
{
    log_update(worker, &object->remove_log, &object->insert_log);
}

/* Takes the lock and applies all logs; the caller unlocks. */
static void lock_and_synchronize(struct ldu_worker *worker, struct ldu_set *set)
{
    ACQUIRE_LOCK(&worker->base.stats, pthread_mutex_trylock(&set->lock),
                 pthread_mutex_lock(&set->lock));
    synchronize(worker, set);
    worker->pushes_since_sync = 0;
}

static size_t ldu_walk(struct objset_worker *base, objset_visit_fn visit, void *arg)
{
    struct ldu_set *set = (struct ldu_set *)base->set;
    lock_and_synchronize((struct ldu_worker *)base, set);
    size_t visited = tree_walk(set->root, visit, arg);
    pthread_mutex_unlock(&set->lock);
    return visited;
}

/* After a synchronize under the lock no log that was queued before it is
 * still linked, and no walker is inside the tree. */
static void ldu_barrier(struct objset_worker *base)
{
    struct ldu_set *set = (struct ldu_set *)base->set;
    lock_and_synchronize((struct ldu_worker *)base, set);
    pthread_mutex_unlock(&set->lock);
}

const struct objset_ops ldu_percore_ops = {
    .name = "ldu-percore",
    .create = ldu_create,
    .destroy = ldu_destroy,
    .attach = ldu_attach,
    .detach = ldu_detach,
    .insert = ldu_insert,
    .remove = ldu_remove,
    .walk = ldu_walk,
    .barrier = ldu_barrier,
    .queues = 0,
};

const struct objset_ops ldu_global_ops = {
    .name = "ldu-global",
    .create = ldu_create,
    .destroy = ldu_destroy,
    .attach = ldu_attach,
    .detach = ldu_detach,
    .insert = ldu_insert,
    .remove = ldu_remove,
    .walk = ldu_walk,
    .barrier = ldu_barrier,
    .queues = 1,
};
