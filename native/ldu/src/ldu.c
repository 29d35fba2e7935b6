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
 * synchronize() runs under the write side of the set's reader-writer lock:
 * it takes every queue's list, and for each log swaps the mark to 0 and, if
 * it was 1, applies the update to the tree.  Walks run under the read side,
 * so they run in parallel and never wait for one another: a walker applies
 * the logs itself only if the lock is free at that moment; otherwise it reads
 * the logs still queued and merges them into its walk of the tree.  Updaters
 * synchronize every SYNC_EVERY_PUSHES pushes (when the lock is free) so the
 * logs stay short.
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
 * it again.  Hence, whenever no synchronize is running, an object is in the
 * tree exactly when its latest update is an insert with a clear mark or a
 * remove with a set mark, and a set mark's log is linked in a queue: a walk
 * under the read lock that reads the queued marks sees every update that
 * completed before it began (ldu_walk).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "objset_impl.h"
#include "tree.h"

/* Bounds how many logs a walker may have to apply or read; small enough that
 * the logs stay in cache, large enough that updaters rarely touch the lock. */
#define SYNC_EVERY_PUSHES 64

struct ldu_queue {
    _Alignas(64) _Atomic(struct ldu_log *) head;
};

struct ldu_set {
    struct objset base;
    pthread_rwlock_t lock;     /* written by synchronize(), read by walks: root, and the
                                * lists' links (a log leaves a list only in synchronize) */
    struct set_object *root;
    unsigned nqueues;
    struct ldu_queue *queues;
};

/* A queued log whose mark was set when a walk looked.  The key is copied so
 * that sorting does not chase the object pointers. */
struct unapplied {
    uint64_t key;
    struct set_object *object;
};

/* A worker's buffer of unapplied logs of one kind, sorted in set order. */
struct unapplied_logs {
    struct unapplied *entries;
    size_t count, capacity;
};

/* Initial size of a buffer; it doubles as needed. */
#define UNAPPLIED_INITIAL 64

struct ldu_worker {
    struct objset_worker base;
    struct ldu_queue *queue;
    unsigned pushes_since_sync;
    struct unapplied_logs inserts, removes;   /* walks: queued logs with a mark set */
};

/* The queues, in a function of their own: a tracer names a heap block by the function
 * that allocated it (scalecheck sharing), so the queues' lines are told from the set's. */
static __attribute__((noinline)) struct ldu_queue *ldu_queues(unsigned count)
{
    return alloc_aligned_zeroed(count * sizeof(struct ldu_queue));
}

/* Per-core: a queue for each worker that may attach, which stands for a core (a
 * benchmark runs a worker per core).  Not the host's CPU count: under emulation N
 * workers run on N emulated CPUs that the host's CPU numbers do not tell apart. */
static struct objset *ldu_create(const struct objset_ops *ops, unsigned max_workers)
{
    struct ldu_set *set = alloc_aligned_zeroed(sizeof *set);
    if (!set)
        return NULL;
    set->base.ops = ops;
    set->nqueues = ops->queues ? ops->queues : max_workers;
    set->queues = ldu_queues(set->nqueues);
    if (!set->queues) {
        free(set);
        return NULL;
    }
    /* Writer-preferring, as the rwlock baseline's: objset_barrier waits for
     * the write lock and must not starve behind a stream of walkers. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&set->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return &set->base;
}

static void ldu_destroy(struct objset *base)
{
    struct ldu_set *set = (struct ldu_set *)base;
    pthread_rwlock_destroy(&set->lock);
    free(set->queues);
    free(set);
}

static struct objset_worker *ldu_attach(struct objset *base, unsigned cpu)
{
    struct ldu_set *set = (struct ldu_set *)base;
    struct ldu_worker *worker = alloc_aligned_zeroed(sizeof *worker);
    if (!worker)
        return NULL;
    worker->inserts.entries = malloc(UNAPPLIED_INITIAL * sizeof *worker->inserts.entries);
    worker->removes.entries = malloc(UNAPPLIED_INITIAL * sizeof *worker->removes.entries);
    if (!worker->inserts.entries || !worker->removes.entries) {
        free(worker->inserts.entries);
        free(worker->removes.entries);
        free(worker);
        return NULL;
    }
    worker->inserts.capacity = worker->removes.capacity = UNAPPLIED_INITIAL;
    worker->base.set = base;
    worker->queue = &set->queues[cpu % set->nqueues];
    return &worker->base;
}

static void ldu_detach(struct objset_worker *base)
{
    struct ldu_worker *worker = (struct ldu_worker *)base;
    free(worker->inserts.entries);
    free(worker->removes.entries);
    free(worker);
}

/* Applies every logged update; the caller holds set->lock for writing. */
static void synchronize(struct ldu_worker *worker, struct ldu_set *set)
{
    worker->base.stats.syncs++;
    worker->pushes_since_sync = 0;
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

/* Applies every logged update if nobody holds the lock; never waits. */
static void try_synchronize(struct ldu_worker *worker, struct ldu_set *set)
{
    if (pthread_rwlock_trywrlock(&set->lock) == 0) {
        synchronize(worker, set);
        pthread_rwlock_unlock(&set->lock);
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
    if (++worker->pushes_since_sync >= SYNC_EVERY_PUSHES)
        try_synchronize(worker, set);
}

static void ldu_insert(struct objset_worker *worker, struct set_object *object)
{
    log_update(worker, &object->insert_log, &object->remove_log);
}

static void ldu_remove(struct objset_worker *worker, struct set_object *object)
{
    log_update(worker, &object->remove_log, &object->insert_log);
}

/* A hint only (relaxed): whether a walker should try to synchronize. */
static bool logs_queued(struct ldu_set *set)
{
    for (unsigned q = 0; q < set->nqueues; q++)
        if (atomic_load_explicit(&set->queues[q].head, memory_order_relaxed))
            return true;
    return false;
}

static bool ordered_before(const struct unapplied *a, uint64_t key, const struct set_object *object)
{
    return a->key < key || (a->key == key && (uintptr_t)a->object < (uintptr_t)object);
}

/* A walk of the tree merged with the unapplied logs, in set order.  The
 * cursors' entries before `next` are behind the walk. */
struct cursor {
    const struct unapplied *next, *end;
};

struct merged_walk {
    struct cursor inserts;     /* visited when the walk reaches their place */
    struct cursor removes;     /* members skipped */
    objset_visit_fn visit;
    void *arg;
    size_t visited;
};

static void remember(struct unapplied_logs *logs, struct set_object *object)
{
    if (logs->count == logs->capacity) {
        size_t capacity = 2 * logs->capacity;
        struct unapplied *grown = realloc(logs->entries, capacity * sizeof *grown);
        if (!grown)
            objset_die("ldu: out of memory for a walk's unapplied logs");
        logs->entries = grown;
        logs->capacity = capacity;
    }
    logs->entries[logs->count++] = (struct unapplied){object->key, object};
}

static int set_order(const void *a, const void *b)
{
    const struct unapplied *x = a, *y = b;
    return ordered_before(x, y->key, y->object) ? -1 : ordered_before(y, x->key, x->object);
}

/* A buffer usually holds the ten or twenty logs made since the last
 * synchronize: insertion sort, which beats qsort's indirect comparisons there
 * (about 3x at 16 to 32 entries); qsort beyond 32, so that a walk that finds many
 * (a large set whose writers rarely get the lock) is not quadratic.  Returns
 * the sorted entries as a cursor. */
static struct cursor sorted(struct unapplied_logs *logs)
{
    struct unapplied *entries = logs->entries;
    size_t count = logs->count;
    if (count > 32) {
        qsort(entries, count, sizeof *entries, set_order);
    } else {
        for (size_t i = 1; i < count; i++) {
            struct unapplied entry = entries[i];
            size_t j = i;
            for (; j > 0 && ordered_before(&entry, entries[j - 1].key, entries[j - 1].object); j--)
                entries[j] = entries[j - 1];
            entries[j] = entry;
        }
    }
    return (struct cursor){entries, entries + count};
}

/*
 * Reads every queued log whose mark is set, into the worker's two buffers,
 * sorted in set order.  Returns whether any was found.  The caller holds the
 * read lock, so no synchronize runs: logs leave the lists only through
 * synchronize, so the lists only grow at their heads and their links stay put
 * while we follow them.  Acquire pairs with the pushes' release, so we see the
 * logs' links.  Only the queued logs are read, never the logs of the members
 * the walk meets: those lines are the updaters' (struct set_object).
 */
static bool collect_unapplied(struct ldu_worker *worker, struct ldu_set *set, struct merged_walk *walk)
{
    worker->inserts.count = worker->removes.count = 0;
    for (unsigned q = 0; q < set->nqueues; q++) {
        for (struct ldu_log *log = atomic_load_explicit(&set->queues[q].head, memory_order_acquire);
             log; log = log->next) {
            if (atomic_load(&log->pending))
                remember(log->inserts ? &worker->inserts : &worker->removes, log->object);
        }
    }
    walk->inserts = sorted(&worker->inserts);
    walk->removes = sorted(&worker->removes);
    return worker->inserts.count || worker->removes.count;
}

/* Visits the objects of unapplied inserts ordered before `object` (all if NULL). */
static void visit_inserts_before(struct merged_walk *walk, const struct set_object *object)
{
    struct cursor *inserts = &walk->inserts;
    for (; inserts->next < inserts->end && (!object || ordered_before(inserts->next, object->key, object));
         inserts->next++) {
        walk->visit(inserts->next->object, walk->arg);
        walk->visited++;
    }
}

static void visit_merged(struct set_object *object, void *arg)
{
    struct merged_walk *walk = arg;
    visit_inserts_before(walk, object);
    /* A member whose remove is not applied yet is gone.  Its entry is the
     * next one: unapplied removes are of members, met in the same order. */
    struct cursor *removes = &walk->removes;
    while (removes->next < removes->end && ordered_before(removes->next, object->key, object))
        removes->next++;
    if (removes->next < removes->end && removes->next->object == object) {
        removes->next++;
        return;
    }
    walk->visit(object, walk->arg);
    walk->visited++;
}

/*
 * A walk never waits for another walk.  If logs are queued and nobody is in
 * the tree (trywrlock), it applies them; then it walks under the read lock,
 * alongside other walkers.  Logs queued meanwhile - by updaters, or because
 * another walker held the read lock so the trywrlock failed - are not
 * applied but read: the walk merges them into its view of the tree.  While
 * any reader is in, no synchronize runs, so for every object the tree and
 * the object's marks are consistent: the object is a member exactly when its
 * latest update is an insert whose mark is clear or a remove whose mark is
 * set, and a set mark's log is linked in a list (docs/ldu.md).  Every update
 * that completed before the walk began is therefore visible: applied in the
 * tree, or found with its mark set in a list whose head we load afterwards.
 */
static size_t ldu_walk(struct objset_worker *base, objset_visit_fn visit, void *arg)
{
    struct ldu_worker *worker = (struct ldu_worker *)base;
    struct ldu_set *set = (struct ldu_set *)base->set;
    if (logs_queued(set))
        try_synchronize(worker, set);
    ACQUIRE_LOCK(&base->stats, pthread_rwlock_tryrdlock(&set->lock),
                 pthread_rwlock_rdlock(&set->lock));
    struct merged_walk walk = {.visit = visit, .arg = arg};
    size_t visited;
    if (!collect_unapplied(worker, set, &walk)) {
        visited = tree_walk(set->root, visit, arg);
    } else {
        base->stats.merged_walks++;
        tree_walk(set->root, visit_merged, &walk);
        visit_inserts_before(&walk, NULL);
        visited = walk.visited;
    }
    pthread_rwlock_unlock(&set->lock);
    return visited;
}

/* After a synchronize under the write lock no log that was queued before it
 * is still linked, and no walker is inside the tree or the lists. */
static void ldu_barrier(struct objset_worker *base)
{
    struct ldu_set *set = (struct ldu_set *)base->set;
    ACQUIRE_LOCK(&base->stats, pthread_rwlock_trywrlock(&set->lock),
                 pthread_rwlock_wrlock(&set->lock));
    synchronize((struct ldu_worker *)base, set);
    pthread_rwlock_unlock(&set->lock);
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
