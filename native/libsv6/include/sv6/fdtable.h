/*
 * fdtable.h - a process's file descriptor table: POSIX lowest-fd allocation
 * beside per-core partitions for O_ANYFD.
 *
 * Partition 0 holds the POSIX fds 0 .. FDTABLE_PART_SIZE-1; lowest-fd
 * allocation searches only it (every other fd is larger).  Partition p > 0
 * belongs to core p-1: an O_ANYFD open on core c takes a slot of partition c+1,
 * fd = (c+1) << 16 | index, so it writes only its own partition's lock and
 * counter and never the lines a lowest-fd open or another core's open writes.
 * (Core c's partition is c+1 rather than c so that core 0's O_ANYFD opens stay
 * off the POSIX partition.)
 *
 * Slots hold opaque pointers.  Allocation and lookup are lock-free: callers read inside an EBR
 * section and may use what they find without taking a reference, because the
 * owner of a removed value frees it only after a grace period.
 *
 * Unless no other thread can have read it: an O_ANYFD partition belongs to the
 * thread that made its slots (its first fd), and another thread's lookup in it
 * first marks the partition foreign, for good, and only then reads the slot.  A
 * value that its partition's owner removes from a partition never marked was
 * read by no other thread (fdtable_remove says so), so the caller may free it at
 * once: the commutative case, each thread closing the fds it opened, then shares
 * no grace period, which costs a line between the cores at each epoch's end and
 * keeps memory from its reuse meanwhile.
 */
#ifndef SV6_FDTABLE_H
#define SV6_FDTABLE_H

#include "sv6/core.h"
#include "sv6/lock.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define FDTABLE_PART_BITS 16
#define FDTABLE_PART_SIZE 1024 /* slots per partition (of 1 << 16 numbers) */
#define FDTABLE_PARTS (SV6_NCORES + 1)

struct fdtable_part {
    /* Allocation is lock-free (a compare-and-swap on a free slot), so an open
     * writes only the slot it takes: it shares nothing with a close of another
     * fd, which writes only that fd's slot (and this lock). */
    SV6_ALIGNED _Atomic(_Atomic(void *) *) slots; /* FDTABLE_PART_SIZE, allocated at the
                                                   * partition's first fd: a new process
                                                   * (spawn) costs a few lines, not every
                                                   * core's partition */
    /* O_ANYFD partitions: where the owning core's next search starts (any
     * free fd will do there); only that core's allocations write it. */
    _Atomic unsigned next;
    /* The thread that made slots (an address of its own), and whether another
     * thread's lookup has read a slot since: beside slots, which every lookup
     * reads; foreign is written once. */
    _Atomic(const void *) owner;
    atomic_bool foreign;
    /* Held by remove, visit and each: a slot's value stays while it is held. */
    SV6_ALIGNED struct sv6_lock lock;
    /* Every slot ever filled lies below it (raised before a slot is taken):
     * fdtable_each scans only that far, so a short-lived process (a spawned
     * child with a few fds) costs a few lines to tear down, not
     * FDTABLE_PART_SIZE slots per partition.  On a line of its own: an open
     * that raises it writes nothing a lookup or a close reads. */
    SV6_ALIGNED _Atomic unsigned bound;
};

struct fdtable {
    struct fdtable_part parts[FDTABLE_PARTS];
};

void fdtable_init(struct fdtable *t);
void fdtable_destroy(struct fdtable *t); /* must be empty */

/* The lowest free POSIX fd, or -EMFILE. */
int fdtable_alloc_lowest(struct fdtable *t, void *value);
/* A free fd in the calling core's partition, or -EMFILE. */
int fdtable_alloc_any(struct fdtable *t, void *value);
/* Puts value at fd if it is free: 0, -EBADF (not an fd) or -EEXIST. */
int fdtable_install(struct fdtable *t, int fd, void *value);
/* Inside an EBR section: the value at fd or NULL. */
void *fdtable_get(struct fdtable *t, int fd);
/* Removes and returns the value at fd, NULL if there was none.  *alone (if not
 * NULL): whether no other thread can hold the value, as above. */
void *fdtable_remove(struct fdtable *t, int fd, bool *alone);
/* Calls fn(fd, value, arg) with fd's partition held still: 0, or -EBADF if
 * fd holds nothing (a reference taken in fn is safe against a racing close). */
int fdtable_visit(struct fdtable *t, int fd, void (*fn)(int fd, void *value, void *arg),
                  void *arg);
/* Calls fn on every (fd, value), each partition held still while visited
 * (posix_spawn and fork copy references under it). */
void fdtable_each(struct fdtable *t, void (*fn)(int fd, void *value, void *arg), void *arg);

#endif
