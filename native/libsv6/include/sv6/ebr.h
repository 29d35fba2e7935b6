/*
 * ebr.h - epoch-based reclamation: the RCU-like grace periods behind libsv6's
 * lock-free readers (directory lookup, radix walks, fd lookup).
 *
 * A thread reads shared pointers only between ebr_enter and ebr_exit.  Whatever
 * a writer unlinks it hands to ebr_retire with the global epoch of that moment,
 * r.  The global epoch advances only when every thread inside a critical section
 * has announced the current one, so a reader that could still hold the pointer
 * keeps the epoch at r+1 or below; the retired callback runs once it reaches r+2.
 *
 * Callbacks may retire more (a file's callback drops its inode), and run with no
 * lock of the caller held: retire only queues, reclaiming happens in ebr_exit.
 *
 * A thread preempted inside a section holds the epoch back for its whole time
 * off the CPU while the others keep retiring (2-thread commutative mailbench on
 * a loaded host: 67,000 callbacks behind one epoch, 745 MB).  So a thread that
 * holds EBR_PENDING_MAX callbacks waits in its outermost ebr_exit, yielding,
 * until the epoch moves (for a bounded time: it may hold a lock that the
 * stalled section waits for).
 */
#ifndef SV6_EBR_H
#define SV6_EBR_H

#include <stdint.h>

#define EBR_PENDING_MAX 2048

struct ebr_node {
    struct ebr_node *next;
    uint64_t epoch;
    void (*reclaim)(struct ebr_node *node);
};

/* Critical sections nest; only the outermost announces and leaves. */
void ebr_enter(void);
void ebr_exit(void);
/* Queues node->reclaim(node) to run after a grace period.  Any thread, in or
 * out of a critical section. */
void ebr_retire(struct ebr_node *node, void (*reclaim)(struct ebr_node *node));
/* Outside any critical section: waits for the grace period of every callback
 * retired (by any thread) before the call, and runs them.  Returns how many
 * ran.  Teardown uses it: callbacks that still point at a structure about to
 * be freed must have run. */
unsigned long ebr_drain(void);

#endif
