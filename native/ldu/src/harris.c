/*
 * harris.c - Harris's lock-free sorted linked list (DISC 2001) as a set of
 * objects, the lock-free baseline of the LDU evaluation.
 *
 * A removal first marks the low bit of the node's `next` (logical removal;
 * a marked `next` never changes again), then unlinks the node with a CAS on
 * its predecessor.  Searches unlink runs of marked nodes they meet.  Whoever
 * unlinks a node retires it to the epoch reclaimer: a node cannot be embedded
 * in its object because concurrent walkers may still be reading it after the
 * object was removed and inserted again, so each insert allocates a node.
 */
#include <stdlib.h>

#include "epoch.h"
#include "objset_impl.h"
#include "tree.h"

struct list_node {
    struct retired retired;    /* first: retired nodes are freed as a whole */
    struct set_object *object;
    _Atomic uintptr_t next;    /* struct list_node * | 1 when this node is removed */
};

struct harris_set {
    struct objset base;
    struct list_node head;     /* sentinel, orders before everything */
    struct epoch_domain epochs;
};

struct harris_worker {
    struct objset_worker base;
    struct epoch_participant epoch;
};

static struct list_node *pointer(uintptr_t link) { return (struct list_node *)(link & ~(uintptr_t)1); }
static int marked(uintptr_t link) { return link & 1; }

static struct objset *harris_create(const struct objset_ops *ops, unsigned max_workers)
{
    struct harris_set *set = alloc_aligned_zeroed(sizeof *set);
    if (!set)
        return NULL;
    set->base.ops = ops;
    if (!epoch_domain_init(&set->epochs, max_workers)) {
        free(set);
        return NULL;
    }
    return &set->base;
}

static void harris_destroy(struct objset *base)
{
    struct harris_set *set = (struct harris_set *)base;
    /* Every node still linked (marked or not) is in the list, every unlinked
     * one was retired: the two are disjoint, so each is freed once. */
    struct list_node *node = pointer(atomic_load(&set->head.next));
    while (node) {
        struct list_node *next = pointer(atomic_load(&node->next));
        free(node);
        node = next;
    }
    epoch_domain_fini(&set->epochs);
    free(set);
}

static struct objset_worker *harris_attach(struct objset *base, unsigned cpu)
{
    (void)cpu;
    struct harris_set *set = (struct harris_set *)base;
    struct harris_worker *worker = alloc_aligned_zeroed(sizeof *worker);
    if (!worker)
        return NULL;
    if (!epoch_join(&set->epochs, &worker->epoch)) {
        free(worker);
        return NULL;
    }
    worker->base.set = base;
    return &worker->base;
}

static void harris_detach(struct objset_worker *base)
{
    struct harris_worker *worker = (struct harris_worker *)base;
    epoch_leave(&worker->epoch);
    free(worker);
}

/*
 * Returns the first unmarked node not ordered before `target` (NULL at the
 * end) and in *left_out its unmarked predecessor, adjacent to it; marked
 * nodes found in between are unlinked and retired.  Called between
 * epoch_enter and epoch_exit.
 */
static struct list_node *search(struct harris_set *set, struct harris_worker *worker,
                                const struct set_object *target, struct list_node **left_out)
{
    for (;;) {
        struct list_node *left = &set->head, *left_next = NULL, *right;
        struct list_node *node = &set->head;
        uintptr_t node_next = atomic_load(&node->next);
        for (;;) {
            if (!marked(node_next)) {
                left = node;
                left_next = pointer(node_next);
            }
            node = pointer(node_next);
            if (!node)
                break;
            node_next = atomic_load(&node->next);
            if (!marked(node_next) && !object_before(node->object, target))
                break;
        }
        right = node;
        if (left_next != right) {
            uintptr_t expected = (uintptr_t)left_next;
            if (!atomic_compare_exchange_strong(&left->next, &expected, (uintptr_t)right))
                continue;
            /* Our CAS unlinked the whole marked run: its links are frozen, so
             * nobody else can unlink (and retire) any of it. */
            while (left_next != right) {
                struct list_node *next = pointer(atomic_load(&left_next->next));
                epoch_retire(&worker->epoch, &left_next->retired);
                left_next = next;
            }
        }
        if (right && marked(atomic_load(&right->next)))
            continue;
        *left_out = left;
        return right;
    }
}

static void harris_insert(struct objset_worker *base, struct set_object *object)
{
    struct harris_worker *worker = (struct harris_worker *)base;
    struct harris_set *set = (struct harris_set *)base->set;
    struct list_node *node = malloc(sizeof *node);
    if (!node)
        objset_die("harris: out of memory for a list node");
    node->object = object;
    epoch_enter(&worker->epoch);
    for (;;) {
        struct list_node *left, *right = search(set, worker, object, &left);
        if (right && right->object == object)
            objset_die("harris: object %p (key %llu) inserted twice", (void *)object,
                       (unsigned long long)object->key);
        atomic_store_explicit(&node->next, (uintptr_t)right, memory_order_relaxed);
        uintptr_t expected = (uintptr_t)right;
        if (atomic_compare_exchange_strong(&left->next, &expected, (uintptr_t)node))
            break;
    }
    epoch_exit(&worker->epoch);
}

static void harris_remove(struct objset_worker *base, struct set_object *object)
{
    struct harris_worker *worker = (struct harris_worker *)base;
    struct harris_set *set = (struct harris_set *)base->set;
    struct list_node *left, *right;
    uintptr_t right_next;
    epoch_enter(&worker->epoch);
    for (;;) {
        right = search(set, worker, object, &left);
        if (!right || right->object != object)
            objset_die("harris: removing object %p (key %llu) that is not in the list",
                       (void *)object, (unsigned long long)object->key);
        right_next = atomic_load(&right->next);
        if (!marked(right_next) &&
            atomic_compare_exchange_strong(&right->next, &right_next, right_next | 1))
            break;
    }
    uintptr_t expected = (uintptr_t)right;
    if (atomic_compare_exchange_strong(&left->next, &expected, right_next))
        epoch_retire(&worker->epoch, &right->retired);
    else
        search(set, worker, object, &left);   /* unlinks (and retires) it */
    epoch_exit(&worker->epoch);
}

static size_t harris_walk(struct objset_worker *base, objset_visit_fn visit, void *arg)
{
    struct harris_worker *worker = (struct harris_worker *)base;
    struct harris_set *set = (struct harris_set *)base->set;
    size_t visited = 0;
    epoch_enter(&worker->epoch);
    struct list_node *node = pointer(atomic_load(&set->head.next));
    while (node) {
        uintptr_t next = atomic_load(&node->next);
        if (!marked(next)) {
            visit(node->object, arg);
            visited++;
        }
        node = pointer(next);
    }
    epoch_exit(&worker->epoch);
    return visited;
}

static void harris_barrier(struct objset_worker *base)
{
    epoch_barrier(&((struct harris_worker *)base)->epoch);
}

const struct objset_ops harris_ops = {
    .name = "harris",
    .create = harris_create,
    .destroy = harris_destroy,
    .attach = harris_attach,
    .detach = harris_detach,
    .insert = harris_insert,
    .remove = harris_remove,
    .walk = harris_walk,
    .barrier = harris_barrier,
};
