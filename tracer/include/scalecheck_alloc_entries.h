/*
 * Every allocation entry point of the C library, defined once for both recorders of heap
 * blocks: the user harness's allocation log (tracer/user/trace_alloc.c) and the
 * allocation-site recorder preloaded into a profiled or benchmarked program
 * (tracer/sharing/alloc_sites.c). Included once, by one file of a program, after it
 * defines
 *
 *   static void *block_got(void *addr, size_t size, void *site);   returns addr
 *   static void block_given(void *addr);
 *
 * which each entry point calls (site: the return address into the function that asked;
 * addr may be NULL: nothing was handed out). Static, so that the entry point and its
 * hook are one frame, as the harness's stack scan for a wrapper's caller expects.
 *
 * With SC_INTERPOSE the entry points are defined under their own names over glibc's
 * __libc_ functions (the dynamic linker binds every object's calls to them: a preloaded
 * object, or a program linked with shared libraries); without, as ld --wrap's
 * __wrap_malloc and so on over __real_malloc (a static program; the list of names in
 * src/scalecheck/run/user/program_build.py).
 */
#ifndef SCALECHECK_ALLOC_ENTRIES_H
#define SCALECHECK_ALLOC_ENTRIES_H

#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdlib.h>

#include "scalecheck_alloc.h"

#ifdef SC_INTERPOSE
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *old, size_t size);
void *__libc_memalign(size_t alignment, size_t size);
void *__libc_valloc(size_t size);
void *__libc_pvalloc(size_t size);
void __libc_free(void *addr);
#define ENTRY(name) name
#define REAL(name) __libc_##name

static void *__libc_aligned_alloc(size_t alignment, size_t size)
{
	return __libc_memalign(alignment, size);
}

static int __libc_posix_memalign(void **out, size_t alignment, size_t size)
{
	if (!alignment || (alignment & (alignment - 1)) || alignment % sizeof(void *))
		return EINVAL;
	void *block = __libc_memalign(alignment, size);
	if (!block)
		return ENOMEM;
	*out = block;
	return 0;
}
#else
#define ENTRY(name) __wrap_##name
#define REAL(name) __real_##name
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *old, size_t size);
void *__real_aligned_alloc(size_t alignment, size_t size);
int __real_posix_memalign(void **out, size_t alignment, size_t size);
void *__real_memalign(size_t alignment, size_t size);
void *__real_valloc(size_t size);
void *__real_pvalloc(size_t size);
void __real_free(void *addr);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *old, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size);
int __wrap_posix_memalign(void **out, size_t alignment, size_t size);
void *__wrap_memalign(size_t alignment, size_t size);
void *__wrap_valloc(size_t size);
void *__wrap_pvalloc(size_t size);
void __wrap_free(void *addr);
#endif

void *ENTRY(malloc)(size_t size)
{
	return block_got(REAL(malloc)(size), size, __builtin_return_address(0));
}

void *ENTRY(calloc)(size_t n, size_t size)
{
	return block_got(REAL(calloc)(n, size), n * size, __builtin_return_address(0));
}

void *ENTRY(realloc)(void *old, size_t size)
{
	block_given(old);
	return block_got(REAL(realloc)(old, size), size, __builtin_return_address(0));
}

void *ENTRY(aligned_alloc)(size_t alignment, size_t size)
{
	return block_got(REAL(aligned_alloc)(alignment, size), size, __builtin_return_address(0));
}

int ENTRY(posix_memalign)(void **out, size_t alignment, size_t size)
{
	int err = REAL(posix_memalign)(out, alignment, size);
	if (!err)
		block_got(*out, size, __builtin_return_address(0));
	return err;
}

void *ENTRY(memalign)(size_t alignment, size_t size)
{
	return block_got(REAL(memalign)(alignment, size), size, __builtin_return_address(0));
}

void *ENTRY(valloc)(size_t size)
{
	return block_got(REAL(valloc)(size), size, __builtin_return_address(0));
}

void *ENTRY(pvalloc)(size_t size)
{
	return block_got(REAL(pvalloc)(size), size, __builtin_return_address(0));
}

void ENTRY(free)(void *addr)
{
	block_given(addr);
	REAL(free)(addr);
}

/* A library's own allocator hands out or takes back a block (scalecheck_alloc.h). */
void scalecheck_malloclike(void *addr, size_t size, void *site)
{
	block_got(addr, size, site);
}

void scalecheck_freelike(void *addr)
{
	block_given(addr);
}

#endif
