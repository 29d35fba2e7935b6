/* radix.c - radix array with lock-free reads and freed empty nodes (radix.h). */
#include "sv6/radix.h"

#include <stdlib.h>

static struct radix_node *new_node(struct radix *r)
{
    struct radix_node *node = aligned_alloc(SV6_CACHELINE, sizeof *node);
    if (!node)
        abort();
    pthread_mutex_init(&node->lock, NULL);
    node->count = 0;
    node->dead = false;
    for (unsigned i = 0; i < RADIX_FANOUT; i++)
        atomic_init(&node->slots[i], NULL);
    atomic_fetch_add(&r->counts[sv6_core()].nodes, 1);
    return node;
}

static void free_node(struct radix_node *node)
{
    pthread_mutex_destroy(&node->lock);
    free(node);
}

static void free_node_later(struct ebr_node *ebr)
{
    free_node(SV6_CONTAINER_OF(ebr, struct radix_node, ebr));
}

void radix_init(struct radix *r)
{
    for (unsigned c = 0; c < SV6_NCORES; c++)
        atomic_init(&r->counts[c].nodes, 0);
    r->root = new_node(r);
}

long radix_nodes(struct radix *r)
{
    long nodes = 0;
    for (unsigned c = 0; c < SV6_NCORES; c++)
        nodes += atomic_load(&r->counts[c].nodes);
    return nodes;
}

static unsigned index_at(uint64_t key, unsigned level);

/* Calls fn(key, value, arg) on every value below node (whose keys start with
 * prefix); frees the nodes on the way back when free_nodes (destroy). */
static void walk_below(struct radix_node *node, unsigned level, uint64_t prefix,
                       void (*fn)(uint64_t key, void *value, void *arg), void *arg,
                       bool free_nodes)
{
    for (unsigned i = 0; i < RADIX_FANOUT; i++) {
        void *child = atomic_load(&node->slots[i]);
        uint64_t key = prefix << RADIX_BITS | i;
        if (!child)
            continue;
        if (level + 1 < RADIX_LEVELS)
            walk_below(child, level + 1, key, fn, arg, free_nodes);
        else
            fn(key, child, arg);
    }
    if (free_nodes)
        free_node(node);
}

struct destroy_call {
    void (*fn)(void *value, void *arg);
    void *arg;
};

static void destroy_value(uint64_t key, void *value, void *arg)
{
    struct destroy_call *call = arg;
    (void)key;
    if (call->fn)
        call->fn(value, call->arg);
}

void radix_destroy(struct radix *r, void (*fn)(void *value, void *arg), void *arg)
{
    struct destroy_call call = {fn, arg};
    walk_below(r->root, 0, 0, destroy_value, &call, true);
}

void radix_each(struct radix *r, void (*fn)(uint64_t key, void *value, void *arg), void *arg)
{
    walk_below(r->root, 0, 0, fn, arg, false);
}

static unsigned index_at(uint64_t key, unsigned level)
{
    return (unsigned)(key >> (RADIX_BITS * (RADIX_LEVELS - 1 - level))) & (RADIX_FANOUT - 1);
}

void *radix_get(struct radix *r, uint64_t key)
{
    struct radix_node *node = r->root;
    for (unsigned level = 0; node && level + 1 < RADIX_LEVELS; level++)
        node = atomic_load(&node->slots[index_at(key, level)]);
    return node ? atomic_load(&node->slots[index_at(key, RADIX_LEVELS - 1)]) : NULL;
}

/* The leaf for key, locked and alive; NULL when it does not exist and create
 * is false. */
static struct radix_node *lock_leaf(struct radix *r, uint64_t key, bool create)
{
retry:;
    struct radix_node *node = r->root;
    for (unsigned level = 0; level + 1 < RADIX_LEVELS; level++) {
        _Atomic(void *) *slot = &node->slots[index_at(key, level)];
        struct radix_node *child = atomic_load(slot);
        if (!child) {
            if (!create)
                return NULL;
            pthread_mutex_lock(&node->lock);
            if (node->dead) {
                pthread_mutex_unlock(&node->lock);
                goto retry;
            }
            child = atomic_load(slot);
            if (!child) {
                child = new_node(r);
                atomic_store(slot, child);
                node->count++;
            }
            pthread_mutex_unlock(&node->lock);
        }
        node = child;
    }
    pthread_mutex_lock(&node->lock);
    if (node->dead) {
        pthread_mutex_unlock(&node->lock);
        goto retry;
    }
    return node;
}

/* Unhooks empty nodes on key's path, from the leaf upwards. */
static void prune(struct radix *r, uint64_t key)
{
    ebr_enter();
    for (unsigned depth = RADIX_LEVELS - 1; depth > 0; depth--) {
        struct radix_node *parent = r->root;
        for (unsigned level = 0; parent && level + 1 < depth; level++)
            parent = atomic_load(&parent->slots[index_at(key, level)]);
        if (!parent)
            break;
        _Atomic(void *) *slot = &parent->slots[index_at(key, depth - 1)];
        struct radix_node *child = atomic_load(slot);
        if (!child)
            break;
        /* Parent before child, the only order in which two locks are held. */
        pthread_mutex_lock(&parent->lock);
        pthread_mutex_lock(&child->lock);
        bool empty = !parent->dead && atomic_load(slot) == child && !child->dead &&
                     child->count == 0;
        if (empty) {
            child->dead = true;
            atomic_store(slot, NULL);
            parent->count--;
        }
        pthread_mutex_unlock(&child->lock);
        pthread_mutex_unlock(&parent->lock);
        if (!empty)
            break;
        atomic_fetch_sub(&r->counts[sv6_core()].nodes, 1);
        ebr_retire(&child->ebr, free_node_later);
    }
    ebr_exit();
}

static void *store(struct radix *r, uint64_t key, void *value, bool only_if_free, bool *stored)
{
    struct radix_node *leaf = lock_leaf(r, key, value != NULL);
    if (!leaf) {
        *stored = true; /* removing from a missing leaf */
        return NULL;
    }
    _Atomic(void *) *slot = &leaf->slots[index_at(key, RADIX_LEVELS - 1)];
    void *old = atomic_load(slot);
    *stored = !(only_if_free && old);
    if (*stored) {
        atomic_store(slot, value);
        leaf->count += (value != NULL) - (old != NULL);
    }
    bool empty = leaf->count == 0;
    pthread_mutex_unlock(&leaf->lock);
    if (empty)
        prune(r, key);
    return old;
}

void *radix_swap(struct radix *r, uint64_t key, void *value)
{
    bool stored;
    return store(r, key, value, false, &stored);
}

bool radix_insert(struct radix *r, uint64_t key, void *value)
{
    bool stored;
    store(r, key, value, true, &stored);
    return stored;
}
