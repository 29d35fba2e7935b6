/*
 * radix.h - RadixVM's radix array: one value per page number, looked up
 * without locks, with interior nodes freed once they hold nothing.
 *
 * Four levels of 512 slots cover 36-bit page numbers (48-bit addresses of
 * 4 KiB pages).  No node has a lock: every slot changes by compare-and-swap
 * (RadixVM locks per slot), so writers of different keys write no common
 * byte, and a missing node is made and put in place the same way.  A writer
 * that empties a slot only notes its key in its own core's list of emptied
 * leaves; the core prunes them when the list is full (or radix_prune_emptied
 * asks): so removing a value writes nothing but its slot, and a node made by
 * one call is still there for the next.  Pruning claims a node found empty
 * slot by slot (a mark that readers read as empty and writers wait on; a slot
 * holding a value makes the pruner drop its claims), marks it dead (a writer
 * that reached it meanwhile starts again from the root), unhooks it, and frees
 * it after an EBR grace period, so lock-free readers never touch freed
 * memory.  (The original RadixVM kept empty nodes forever.)  The smallest
 * keys are not in the nodes at all but in direct slots (RADIX_DIRECT).
 */
#ifndef SV6_RADIX_H
#define SV6_RADIX_H

#include "sv6/core.h"
#include "sv6/ebr.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define RADIX_BITS 9
#define RADIX_FANOUT (1u << RADIX_BITS)
#define RADIX_LEVELS 4
#define RADIX_KEY_BITS (RADIX_BITS * RADIX_LEVELS)

struct radix_node {
    SV6_ALIGNED atomic_bool dead; /* claimed empty and unhooked from its parent */
    struct ebr_node ebr;
    _Atomic(void *) slots[RADIX_FANOUT];
};

/* Leaves a core emptied and has not pruned yet, at most this many. */
#define RADIX_EMPTIED 8

/* One core's part: nodes made minus nodes freed on it, and the keys of the
 * leaves it emptied (key + 1; 0 is a free entry).  Written only by threads on
 * that core, so that writers in different regions share nothing; entries
 * change by atomic exchange, as two threads may share a core slot. */
struct radix_core {
    SV6_ALIGNED _Atomic long nodes;
    _Atomic uint64_t emptied[RADIX_EMPTIED];
};

/* Keys below this have slots of their own in struct radix, as an ext2 inode
 * has direct blocks: a file's first 64 pages (256 KiB) need no node, so two
 * writers of different pages of a small file share no byte even on the file's
 * first writes (a node path made by one is read by the other).  64 slots are
 * 512 bytes, eight lines; a file's 4,160-byte root is made by its first key
 * at or above RADIX_DIRECT (radix_init's root_on_demand), so a small file has
 * no node at all, and a larger file pays for its node path once.  Direct slots are never pruned.
 * The address space's array (sv6_proc.vm) is keyed by virtual page number:
 * only a MAP_FIXED mapping in the first 256 KiB of the address space would use
 * its direct slots (mmap places others at 64 TiB and up, the POSIX tests map
 * at 4 GiB and up), so it gains nothing from them and is not keyed otherwise. */
#define RADIX_DIRECT 64

struct radix {
    _Atomic(void *) root; /* the root node; NULL until a key needs one */
    SV6_ALIGNED _Atomic(void *) direct[RADIX_DIRECT]; /* keys below RADIX_DIRECT */
    struct radix_core cores[SV6_NCORES];
};

/* root_on_demand: the root is made by the first key that needs a node, not
 * now.  An address space makes it now: otherwise the first mappings of two
 * threads would both race to make it, and share its pointer's line. */
void radix_init(struct radix *r, bool root_on_demand);
/* No other thread may use it; calls fn on every value still present. */
void radix_destroy(struct radix *r, void (*fn)(void *value, void *arg), void *arg);

/* Inside an EBR section: calls fn on every (key, value) present; values stored
 * or removed meanwhile may or may not be seen.  Fork-style spawn copies an
 * address space with it. */
void radix_each(struct radix *r, void (*fn)(uint64_t key, void *value, void *arg), void *arg);
/* Nodes alive (the root included, once made; direct slots are none), for tests: exact
 * when no writer runs. */
long radix_nodes(struct radix *r);
/* Prunes every core's emptied leaves now (tests, before counting nodes). */
void radix_prune_emptied(struct radix *r);
/* Inside an EBR section: the value at key or NULL. */
void *radix_get(struct radix *r, uint64_t key);
/* Inside an EBR section: the value at the smallest key >= *key, with *key set
 * to that key, or NULL (no such value).  It reads only the slots on *key's
 * path and those after it, so a writer of a smaller key that makes no node
 * shares nothing with it (fs.c asks this way whether a file has a page at or
 * past a given one). */
void *radix_next(struct radix *r, uint64_t *key);
/* Stores value (NULL removes) and returns what was there. */
void *radix_swap(struct radix *r, uint64_t key, void *value);
/* Stores value only where key holds expected (NULL: nothing); false if it
 * held something else. */
bool radix_replace(struct radix *r, uint64_t key, void *expected, void *value);

#endif
