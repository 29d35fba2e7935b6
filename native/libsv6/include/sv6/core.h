/*
 * core.h - the "core" a thread runs on, and cache-line placement.
 *
 * libsv6 runs in user space, so a "core" is a slot index that each thread gets
 * on first use (round robin) or sets itself (a benchmark pins thread i to CPU i
 * and says so).  Per-core structures are indexed by it; two threads that share
 * a slot stay correct because every per-core structure has its own lock, they
 * only lose the scalability that a slot of their own gives.
 */
#ifndef SV6_CORE_H
#define SV6_CORE_H

#ifndef SV6_NCORES
#define SV6_NCORES 16
#endif

/* The unit of coherence: what the tracer counts. */
#define SV6_CACHELINE 64
/* The unit of placement: a 128-byte-aligned pair of lines.  x86's L2 spatial
 * prefetcher fetches a line's pair with it, so two cores writing the two lines
 * of one pair slow each other as if they shared a line (fstatx's threads ran at
 * 0.85 of their processes' ratio placed on single lines; docs/libsv6.md). */
#define SV6_PLACEMENT (2 * SV6_CACHELINE)
/* Every shared counter and lock starts its own pair of lines: two cores that
 * update different ones never write the same line or its pair. */
#define SV6_ALIGNED _Alignas(SV6_PLACEMENT)

/* The calling thread's core slot, 0 .. SV6_NCORES-1. */
unsigned sv6_core(void);
/* Pins the calling thread to a slot (taken modulo SV6_NCORES). */
void sv6_core_set(unsigned core);

#define SV6_CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - __builtin_offsetof(type, member)))

#endif
