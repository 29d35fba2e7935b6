/*
 * arena.h - each worker's memory and first-use state made ready before its loop (the sv6
 * benchmarks).
 *
 * glibc gives each thread an arena of its own, grown one page per mprotect() (a thread's
 * arena has no top pad) and trimmed back with madvise(): with threads, every growth takes
 * the one address space's mmap_lock for writing and changes its page tables, and every
 * new page faults under that lock, beside the other worker (bench/sharing.py --system
 * names the kernel's mm_struct, VMA tree and TLB flush lines moving between them).  A
 * process's main arena grows by brk() in 128 KiB steps.  So before the loop each worker
 * grows its arena by ARENA_RESERVE_BYTES, touching each page, and gives it back to its
 * arena; process_setup keeps freed memory from being trimmed.  Threads and processes
 * (the control) do the same.
 *
 * A thread's first libsv6 call also claims its epoch slot (the slot array's count, a
 * CAS on the first free slot), registers its free lists' exit key with pthreads, and
 * makes its glibc arena (mmap and mprotect): lines both threads write once.  Made in the
 * loop they are counted against it; worker_ready makes them before.
 */
#ifndef SV6_BENCH_ARENA_H
#define SV6_BENCH_ARENA_H

#include "harness.h"
#include "sv6/alloc.h"
#include "sv6/ebr.h"

#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

enum { ARENA_RESERVE_BYTES = 32 << 20, ARENA_RESERVE_BLOCK = 16 << 10 };

/* In process_setup: freed memory stays with its arena (no trimming, and no threshold
 * that glibc moves at run time). */
static inline void arena_keep_freed(void)
{
    if (mallopt(M_TRIM_THRESHOLD, INT_MAX) != 1)
        hc_fail("mallopt(M_TRIM_THRESHOLD) failed");
}

/* This thread's arena grown, its pages touched, then all free. */
static inline void arena_reserve(void)
{
    enum { BLOCKS = ARENA_RESERVE_BYTES / ARENA_RESERVE_BLOCK };
    void *blocks[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(ARENA_RESERVE_BLOCK);
        if (!blocks[i])
            hc_fail("out of memory reserving the arena");
        memset(blocks[i], 0, ARENA_RESERVE_BLOCK);
    }
    for (int i = BLOCKS; i-- > 0;)
        free(blocks[i]);
}

/* The workers' worker_setup: the thread's epoch slot and free lists claimed, its arena
 * reserved. */
static inline void worker_ready(struct hc_worker *w)
{
    (void)w;
    ebr_enter();
    ebr_exit();
    sv6_free_lines(sv6_alloc_lines(SV6_PLACEMENT), SV6_PLACEMENT);
    arena_reserve();
}

#endif
