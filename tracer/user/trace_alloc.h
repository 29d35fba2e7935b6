/*
 * The harness's allocation log (trace_alloc.c): every heap block the setup and the two
 * calls get or give back, each thread logging in memory of its own.
 */
#ifndef TRACE_ALLOC_H
#define TRACE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#define MAX_ALLOCS 1024

/* An allocation, or (is_free) the release of one: the snapshot leaves freed memory out. */
struct alloc { uintptr_t addr; size_t size; uintptr_t site; int is_free; };
struct alloc_log { int n; struct alloc entries[MAX_ALLOCS]; };

/* The main thread's (slot 0, setup) and the two calling threads' (1, 2) logs. */
extern struct alloc_log *sc_alloc_logs[3];

/* Gives the calling thread the log of a slot, on pages of its own. */
void sc_alloc_log_start(int slot);

/* A batch line "W start end [file]": code of an allocation wrapper of the library's
 * (g_malloc, strdup), in the program or at offsets into a loaded shared object: an
 * allocation made from there is named by the wrapper's caller. */
void sc_alloc_add_wrapper(const char *line);

#endif
