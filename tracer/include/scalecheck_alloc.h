/*
 * For a library with an allocator of its own (a free list, a per-thread cache): how it
 * tells scalecheck's user-space harness that a block changed hands without malloc or
 * free seeing it, so that the tracer still names heap data by the allocation that holds
 * it (docs/usertarget.md).  As Valgrind's MALLOCLIKE_BLOCK and FREELIKE_BLOCK requests:
 * outside the harness both are undefined weak symbols, and the library calls them only
 * when their address is not NULL.
 */
#ifndef SCALECHECK_ALLOC_H
#define SCALECHECK_ALLOC_H

#include <stddef.h>

/* addr .. addr+size is handed out now; site is the return address into the function
 * that asked for it (the name the tracer gives the block). */
extern void scalecheck_malloclike(void *addr, size_t size, void *site) __attribute__((weak));
/* The block at addr is taken back (it may be handed out again later). */
extern void scalecheck_freelike(void *addr) __attribute__((weak));

#endif
