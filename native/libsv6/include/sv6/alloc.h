/*
 * alloc.h - memory on whole pairs of cache lines (SV6_PLACEMENT), freed blocks
 * kept per thread.
 *
 * Every object that threads share gets pairs of lines of its own: malloc's
 * header of the chunk lies on the pair before it and the next chunk's header on
 * the pair after it, so no byte a caller uses shares a line (or a line's
 * prefetched pair) with a header or with another allocation, whose writes
 * (malloc's included) would otherwise meet this object's readers.  "lines" in
 * the names below count SV6_PLACEMENT units.
 *
 * Freed blocks of up to SV6_LINES_KEPT_MAX lines go to a list of the freeing
 * thread, one list per size in lines, and the next allocation of that size on
 * that thread takes the newest: sv6's per-core free lists.  glibc's
 * aligned_alloc takes its arena's lock whenever the process has a second
 * thread and never draws on glibc's own per-thread cache, so without these
 * lists an open/close pair of threads costs more than the same pair in a
 * single-threaded process.  A list holds at most SV6_LINES_KEPT_BYTES (at
 * least 16 blocks); a thread's blocks go back to malloc when it exits.  Under
 * AddressSanitizer nothing is kept, so that it sees every block's lifetime, and
 * each free's size is checked against the block's.
 *
 * Blocks handed out or taken back through the lists are reported to
 * scalecheck's harness (scalecheck_alloc.h), which names heap data by the
 * allocation that holds it.  sv6_alloc_lines is always inlined so that the
 * allocating function is the one that asks for it.
 */
#ifndef SV6_ALLOC_H
#define SV6_ALLOC_H

#include "sv6/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Kept: an inode (72 pairs of lines), a page's copy and a radix node (33 each). */
#define SV6_LINES_KEPT_MAX 96
#define SV6_LINES_KEPT_BYTES (256u << 10)

/* A kept block of exactly `lines` lines, or NULL. */
void *sv6_lines_take(size_t lines);
/* Keeps block p of `lines` lines for the calling thread; false: the caller frees it. */
bool sv6_lines_keep(void *p, size_t lines);
/* How many blocks the calling thread keeps (for tests). */
size_t sv6_lines_kept(void);

static inline size_t sv6_lines_of(size_t size)
{
    return (size + SV6_PLACEMENT - 1) / SV6_PLACEMENT;
}

/* Aborts when out of memory: an in-memory model has nothing to fall back on. */
static inline __attribute__((always_inline)) void *sv6_alloc_lines(size_t size)
{
    size_t lines = sv6_lines_of(size);
    void *p = sv6_lines_take(lines);
    if (!p)
        p = aligned_alloc(SV6_PLACEMENT, lines * SV6_PLACEMENT);
    if (!p)
        abort();
    return p;
}

/* sv6_alloc_lines, zeroed. */
static inline __attribute__((always_inline)) void *sv6_zalloc(size_t size)
{
    return memset(sv6_alloc_lines(size), 0, size);
}

/* Frees p, of `size` bytes as asked of sv6_alloc_lines (NULL: nothing). */
static inline void sv6_free_lines(void *p, size_t size)
{
    if (p && !sv6_lines_keep(p, sv6_lines_of(size)))
        free(p);
}

#endif
