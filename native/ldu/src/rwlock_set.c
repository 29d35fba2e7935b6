/* rwlock_set.c - the baseline: the ordered tree under a reader-writer lock,
 * as Linux's rmap guards its trees with an rw-semaphore. */
#include <pthread.h>
#include <stdlib.h>

#include "objset_impl.h"
#include "tree.h"

struct rwlock_set {
    struct objset base;
    pthread_rwlock_t lock;
    struct set_object *root;
};

static struct objset *rwlock_create(const struct objset_ops *ops, unsigned max_workers)
{
    (void)max_workers;
    struct rwlock_set *set = alloc_aligned_zeroed(sizeof *set);
    if (!set)
        return NULL;
    set->base.ops = ops;
    /* glibc prefers readers by default, which starves updaters on an
     * update-heavy load; Linux's rw-semaphore does not starve writers either. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&set->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return &set->base;
}

static void rwlock_destroy(struct objset *base)
{
    struct rwlock_set *set = (struct rwlock_set *)base;
    pthread_rwlock_destroy(&set->lock);
    free(set);
}

static struct objset_worker *rwlock_attach(struct objset *set, unsigned cpu)
{
    (void)cpu;
    struct objset_worker *worker = alloc_aligned_zeroed(sizeof *worker);
    if (worker)
        worker->set = set;
    return worker;
}

static void rwlock_detach(struct objset_worker *worker)
{
    free(worker);
}

static void write_lock(struct objset_worker *worker, struct rwlock_set *set)
{
    ACQUIRE_LOCK(&worker->stats, pthread_rwlock_trywrlock(&set->lock),
                 pthread_rwlock_wrlock(&set->lock));
}

static void rwlock_insert(struct objset_worker *worker, struct set_object *object)
{
    struct rwlock_set *set = (struct rwlock_set *)worker->set;
    write_lock(worker, set);
    tree_insert(&set->root, object);
    pthread_rwlock_unlock(&set->lock);
}

static void rwlock_remove(struct objset_worker *worker, struct set_object *object)
{
    struct rwlock_set *set = (struct rwlock_set *)worker->set;
    write_lock(worker, set);
    tree_remove(&set->root, object);
    pthread_rwlock_unlock(&set->lock);
}

static size_t rwlock_walk(struct objset_worker *worker, objset_visit_fn visit, void *arg)
{
    struct rwlock_set *set = (struct rwlock_set *)worker->set;
    ACQUIRE_LOCK(&worker->stats, pthread_rwlock_tryrdlock(&set->lock),
                 pthread_rwlock_rdlock(&set->lock));
    size_t visited = tree_walk(set->root, visit, arg);
    pthread_rwlock_unlock(&set->lock);
    return visited;
}

static void rwlock_barrier(struct objset_worker *worker)
{
    /* A remove returns with the object unlinked under the write lock, so no
     * walker can still hold it. */
    (void)worker;
}

const struct objset_ops rwlock_ops = {
    .name = "rwlock",
    .create = rwlock_create,
    .destroy = rwlock_destroy,
    .attach = rwlock_attach,
    .detach = rwlock_detach,
    .insert = rwlock_insert,
    .remove = rwlock_remove,
    .walk = rwlock_walk,
    .barrier = rwlock_barrier,
};
