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

#define SV6_CACHELINE 64
/* Every shared counter and lock starts its own cache line: two cores that
 * update different ones never write the same line. */
#define SV6_ALIGNED _Alignas(SV6_CACHELINE)

/* The calling thread's core slot, 0 .. SV6_NCORES-1. */
unsigned sv6_core(void);
/* Pins the calling thread to a slot (taken modulo SV6_NCORES). */
void sv6_core_set(unsigned core);

#define SV6_CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - __builtin_offsetof(type, member)))

#endif
