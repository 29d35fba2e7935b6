/* radix.c - radix array with direct slots for the smallest keys, lock-free
 * reads and freed empty nodes (radix.h). */
#include "sv6/radix.h"

#include "sv6/alloc.h"

#include <sched.h>
#include <stdlib.h>

/* What a leaf's slot holds while a pruner claims the empty leaf: NULL to
 * readers; a writer that meets it waits for the claim to be dropped or, when
 * the leaf died, starts again from the root. */
static char claimed_mark;
#define CLAIMED ((void *)&claimed_mark)

static void *value_of(void *slot_value)
{
    return slot_value == CLAIMED ? NULL : slot_value;
}

static struct radix_node *new_node(struct radix *r)
{
    struct radix_node *node = sv6_alloc_lines(sizeof *node);
    atomic_init(&node->dead, false);
    for (unsigned i = 0; i < RADIX_FANOUT; i++)
        atomic_init(&node->slots[i], NULL);
    atomic_fetch_add(&r->cores[sv6_core()].nodes, 1);
    return node;
}

static void free_node(struct radix_node *node)
{
    sv6_free_lines(node, sizeof *node);
}

static void free_node_later(struct ebr_node *ebr)
{
    free_node(SV6_CONTAINER_OF(ebr, struct radix_node, ebr));
}

void radix_init(struct radix *r, bool root_on_demand)
{
    for (unsigned key = 0; key < RADIX_DIRECT; key++)
        atomic_init(&r->direct[key], NULL);
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        atomic_init(&r->cores[c].nodes, 0);
        for (unsigned i = 0; i < RADIX_EMPTIED; i++)
            atomic_init(&r->cores[c].emptied[i], 0);
    }
    atomic_init(&r->root, root_on_demand ? NULL : new_node(r));
}

long radix_nodes(struct radix *r)
{
    long nodes = 0;
    for (unsigned c = 0; c < SV6_NCORES; c++)
        nodes += atomic_load(&r->cores[c].nodes);
    return nodes;
}

static unsigned index_at(uint64_t key, unsigned level);

/* Calls fn(key, value, arg) on every value below node (whose keys start with
 * prefix); frees the nodes on the way back when free_nodes (destroy).  No
 * direct key is in the nodes. */
static void walk_below(struct radix_node *node, unsigned level, uint64_t prefix,
                       void (*fn)(uint64_t key, void *value, void *arg), void *arg,
                       bool free_nodes)
{
    for (unsigned i = 0; i < RADIX_FANOUT; i++) {
        void *child = value_of(atomic_load(&node->slots[i]));
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

/* Calls fn(key, value, arg) on every value, direct slots first. */
static void walk(struct radix *r, void (*fn)(uint64_t key, void *value, void *arg), void *arg,
                 bool free_nodes)
{
    for (uint64_t key = 0; key < RADIX_DIRECT; key++) {
        void *value = atomic_load(&r->direct[key]);
        if (value)
            fn(key, value, arg);
    }
    struct radix_node *root = atomic_load(&r->root);
    if (root)
        walk_below(root, 0, 0, fn, arg, free_nodes);
}

void radix_destroy(struct radix *r, void (*fn)(void *value, void *arg), void *arg)
{
    struct destroy_call call = {fn, arg};
    walk(r, destroy_value, &call, true);
}

void radix_each(struct radix *r, void (*fn)(uint64_t key, void *value, void *arg), void *arg)
{
    walk(r, fn, arg, false);
}

static unsigned index_at(uint64_t key, unsigned level)
{
    return (unsigned)(key >> (RADIX_BITS * (RADIX_LEVELS - 1 - level))) & (RADIX_FANOUT - 1);
}

void *radix_get(struct radix *r, uint64_t key)
{
    if (key < RADIX_DIRECT)
        return atomic_load(&r->direct[key]);
    struct radix_node *node = atomic_load(&r->root);
    for (unsigned level = 0; node && level + 1 < RADIX_LEVELS; level++)
        node = value_of(atomic_load(&node->slots[index_at(key, level)]));
    return node ? value_of(atomic_load(&node->slots[index_at(key, RADIX_LEVELS - 1)])) : NULL;
}

/* The first value below node (at level) whose key is >= *key, with *key set
 * to that key; NULL if none.  It reads only slots at or after *key's index on
 * each level, so it shares nothing with writers of smaller keys. */
static void *next_below(struct radix_node *node, unsigned level, uint64_t *key)
{
    unsigned shift = RADIX_BITS * (RADIX_LEVELS - 1 - level);
    uint64_t above = *key >> shift >> RADIX_BITS << RADIX_BITS << shift;
    for (unsigned i = index_at(*key, level); i < RADIX_FANOUT; i++) {
        void *child = value_of(atomic_load(&node->slots[i]));
        if (child && level + 1 < RADIX_LEVELS)
            child = next_below(child, level + 1, key);
        if (child)
            return child;
        *key = above | (uint64_t)(i + 1) << shift; /* the next slot's first key */
    }
    return NULL;
}

void *radix_next(struct radix *r, uint64_t *key)
{
    for (; *key < RADIX_DIRECT; (*key)++) {
        void *value = atomic_load(&r->direct[*key]);
        if (value)
            return value;
    }
    struct radix_node *root = atomic_load(&r->root);
    return *key >> RADIX_KEY_BITS || !root ? NULL : next_below(root, 0, key);
}

/* What slot holds, waiting while a pruner claims node; CLAIMED when node died
 * (the caller starts again from the root). */
static void *settled(struct radix_node *node, _Atomic(void *) *slot)
{
    for (;;) {
        void *value = atomic_load(slot);
        if (value != CLAIMED || atomic_load(&node->dead))
            return value;
        sched_yield(); /* the pruner gives up or kills the node */
    }
}

/* Puts a new node in *slot by compare-and-swap if it is still empty (the
 * loser of a race frees its own). */
static void make_node(struct radix *r, _Atomic(void *) *slot)
{
    void *expected = NULL;
    struct radix_node *fresh = new_node(r);
    if (!atomic_compare_exchange_strong(slot, &expected, fresh)) {
        atomic_fetch_sub(&r->cores[sv6_core()].nodes, 1);
        free_node(fresh);
    }
}

/* The leaf for key; NULL when it does not exist and create is false, CLAIMED
 * when a node on the way died.  A missing node (the root too) is made. */
static struct radix_node *find_leaf(struct radix *r, uint64_t key, bool create)
{
    if (!atomic_load(&r->root) && create)
        make_node(r, &r->root); /* never pruned: it stays */
    struct radix_node *node = atomic_load(&r->root);
    if (!node)
        return NULL;
    for (unsigned level = 0; level + 1 < RADIX_LEVELS; level++) {
        _Atomic(void *) *slot = &node->slots[index_at(key, level)];
        void *child = settled(node, slot);
        while (!child) {
            if (!create)
                return NULL;
            make_node(r, slot);
            child = settled(node, slot);
        }
        if (child == CLAIMED)
            return CLAIMED;
        node = child;
    }
    return node;
}

/* Claims every slot of an empty node in index order, so that no writer can
 * fill one; false (and the claims dropped) if one holds a value or the node
 * died meanwhile.  Whoever holds slot 0 holds the claim, so another pruner
 * can only meet it there, and waits. */
static bool claim_empty(struct radix_node *node)
{
    for (;;) {
        void *expected = NULL;
        if (atomic_compare_exchange_strong(&node->slots[0], &expected, CLAIMED))
            break;
        if (expected != CLAIMED || atomic_load(&node->dead))
            return false;
        sched_yield();
    }
    for (unsigned i = 1; i < RADIX_FANOUT; i++) {
        void *expected = NULL;
        if (!atomic_compare_exchange_strong(&node->slots[i], &expected, CLAIMED)) {
            while (i-- > 0)
                atomic_store(&node->slots[i], NULL);
            return false;
        }
    }
    return true;
}

/* Whether no slot of node holds a value: read without locks, it stops at the
 * first value.  Of two writers emptying the last two slots at once, at least
 * one sees the other's slot empty (sequentially consistent atomics). */
static bool looks_empty(struct radix_node *node)
{
    for (unsigned i = 0; i < RADIX_FANOUT; i++)
        if (value_of(atomic_load(&node->slots[i])))
            return false;
    return true;
}

/* Unhooks empty nodes on key's path, from the leaf upwards.  Only the pruner
 * that holds a node's claims takes it out of its parent's slot. */
static void prune(struct radix *r, uint64_t key)
{
    for (unsigned depth = RADIX_LEVELS - 1; depth > 0; depth--) {
        struct radix_node *parent = atomic_load(&r->root);
        for (unsigned level = 0; parent && level + 1 < depth; level++)
            parent = value_of(atomic_load(&parent->slots[index_at(key, level)]));
        if (!parent)
            return;
        _Atomic(void *) *slot = &parent->slots[index_at(key, depth - 1)];
        struct radix_node *child = value_of(atomic_load(slot));
        if (!child || !looks_empty(child) || !claim_empty(child))
            return;
        atomic_store(&child->dead, true);
        atomic_store(slot, NULL);
        atomic_fetch_sub(&r->cores[sv6_core()].nodes, 1);
        ebr_retire(&child->ebr, free_node_later);
    }
}

/* Prunes the leaves noted in core's list and empties it. */
static void prune_noted(struct radix *r, struct radix_core *core)
{
    for (unsigned i = 0; i < RADIX_EMPTIED; i++) {
        uint64_t noted = atomic_exchange(&core->emptied[i], 0);
        if (noted)
            prune(r, noted - 1);
    }
}

/* Notes in the calling core's list that key's leaf may be empty now (once per
 * leaf); a full list is pruned first.  Only the pruning reads other slots of
 * the leaf or writes its nodes, so removing a value writes only its own slot
 * and the core's list. */
static void note_emptied(struct radix *r, uint64_t key)
{
    struct radix_core *core = &r->cores[sv6_core()];
    for (;;) {
        for (unsigned i = 0; i < RADIX_EMPTIED; i++) {
            uint64_t noted = atomic_load(&core->emptied[i]);
            if (noted && (noted - 1) >> RADIX_BITS == key >> RADIX_BITS)
                return;
        }
        for (unsigned i = 0; i < RADIX_EMPTIED; i++) {
            uint64_t free_entry = 0;
            if (atomic_compare_exchange_strong(&core->emptied[i], &free_entry, key + 1))
                return;
        }
        prune_noted(r, core);
    }
}

void radix_prune_emptied(struct radix *r)
{
    ebr_enter();
    for (unsigned c = 0; c < SV6_NCORES; c++)
        prune_noted(r, &r->cores[c]);
    ebr_exit();
}

/* Stores value at key where it holds expected (any value when !only_if);
 * returns what it held.  Slots change by compare-and-swap, without a lock,
 * so writers of different keys write nothing in common; storing what is
 * already there writes nothing at all.  A direct slot has no leaf: no claim
 * to wait for and nothing to prune. */
static void *store(struct radix *r, uint64_t key, void *value, bool only_if, void *expected)
{
    ebr_enter(); /* the nodes walked stay allocated */
    void *old;
    for (;;) {
        struct radix_node *leaf = NULL;
        _Atomic(void *) *slot = key < RADIX_DIRECT ? &r->direct[key] : NULL;
        old = NULL;
        if (!slot) {
            leaf = find_leaf(r, key, value != NULL);
            if (!leaf)
                break; /* removing from a missing leaf */
            if (leaf == CLAIMED)
                continue;
            slot = &leaf->slots[index_at(key, RADIX_LEVELS - 1)];
        }
        old = leaf ? settled(leaf, slot) : atomic_load(slot);
        if (old == CLAIMED)
            continue; /* the leaf died */
        if ((only_if && old != expected) || old == value)
            break;
        if (atomic_compare_exchange_strong(slot, &old, value)) {
            if (!value && leaf)
                note_emptied(r, key);
            break;
        }
    }
    ebr_exit();
    return old;
}

void *radix_swap(struct radix *r, uint64_t key, void *value)
{
    return store(r, key, value, false, NULL);
}

bool radix_replace(struct radix *r, uint64_t key, void *expected, void *value)
{
    return store(r, key, value, true, expected) == expected;
}
