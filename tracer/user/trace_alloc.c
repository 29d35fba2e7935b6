/*
 * The harness's allocation log: every allocation entry point is wrapped at link time
 * (ld --wrap, the list in src/scalecheck/run/user/program_build.py) and logs the block
 * and its site, the return address into the function that asked for it.
 *
 * A library that allocates through wrappers of its own (g_malloc, xmalloc, a callback
 * table) would have every block named by the wrapper. The host lists the wrappers' code
 * ("W start end" batch lines); an allocation whose caller lies in one is named by the
 * wrapper's caller instead, found on the stack: the first word above the wrapper's frame
 * that is a return address right after a call of that wrapper (a direct call to its
 * start, or an indirect call), repeated while the caller is a wrapper too. The library's
 * code is built without frame pointers, so the stack is scanned rather than walked.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../include/scalecheck_alloc.h"
#include "trace_alloc.h"

#define MAX_WRAPPERS 64
/* How far above an allocation's frame the wrappers' callers are looked for: a few small
 * frames (a wrapper tail-called has no return address there; beyond, stale words). */
#define STACK_WORDS 64

static __thread struct alloc_log *my_log;

/* Line-aligned: the harness's static data never shares a line with the library's. */
static struct {
	int n;
	uintptr_t start[MAX_WRAPPERS], end[MAX_WRAPPERS];
} __attribute__((aligned(64))) wrappers;

struct alloc_log *sc_alloc_logs[3] __attribute__((aligned(64)));

extern char __executable_start[], __etext[];

void sc_alloc_add_wrapper(const char *line)
{
	unsigned long start, end;
	if (sscanf(line, "W %lx %lx", &start, &end) == 2 && wrappers.n < MAX_WRAPPERS) {
		wrappers.start[wrappers.n] = start;
		wrappers.end[wrappers.n++] = end;
	}
}

/* The wrapper whose code holds pc, or -1. */
static int wrapper_of(uintptr_t pc)
{
	for (int i = 0; i < wrappers.n; i++)
		if (pc >= wrappers.start[i] && pc < wrappers.end[i])
			return i;
	return -1;
}

/* Whether word is a return address after a call of wrapper w: `call rel32` to its start,
 * or `call *` through a register or memory (ff /2, two to seven bytes long). */
static int returns_from(uintptr_t word, int w)
{
	if (word < (uintptr_t)__executable_start + 8 || word >= (uintptr_t)__etext)
		return 0;
	const unsigned char *code = (const unsigned char *)word;
	if (code[-5] == 0xe8) {
		int32_t rel;
		memcpy(&rel, code - 5 + 1, sizeof rel);
		return word + (uintptr_t)(intptr_t)rel == wrappers.start[w];
	}
	static const int lengths[] = {2, 3, 6, 7};
	for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
		const unsigned char *op = code - lengths[i];
		if (op[0] == 0xff && ((op[1] >> 3) & 7) == 2)
			return 1;
		if (op[0] == 0x41 && op[1] == 0xff && ((op[2] >> 3) & 7) == 2)
			return 1;
	}
	return 0;
}

/* The site an allocation is named by: its caller, or, when that is a wrapper, the first
 * caller outside the wrappers found on the stack above frame. */
static __attribute__((noinline)) uintptr_t site_of(uintptr_t caller, const uintptr_t *frame)
{
	int w = wrapper_of(caller);
	for (int i = 0; w >= 0 && i < STACK_WORDS; i++) {
		if (returns_from(frame[i], w)) {
			caller = frame[i];
			w = wrapper_of(caller);
		}
	}
	return caller;
}

static void *logged(void *addr, size_t size, void *caller)
{
	if (addr && my_log && my_log->n < MAX_ALLOCS) {
		uintptr_t site = site_of((uintptr_t)caller, __builtin_frame_address(0));
		my_log->entries[my_log->n++] = (struct alloc){(uintptr_t)addr, size, site, 0};
	}
	return addr;
}

/* Logged in the thread's own log, like an allocation (never in another thread's: that
 * would be a conflict of the harness's). */
static void log_free(void *addr)
{
	if (addr && my_log && my_log->n < MAX_ALLOCS)
		my_log->entries[my_log->n++] = (struct alloc){(uintptr_t)addr, 0, 0, 1};
}

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

void *__wrap_malloc(size_t size)
{
	return logged(__real_malloc(size), size, __builtin_return_address(0));
}

void *__wrap_calloc(size_t n, size_t size)
{
	return logged(__real_calloc(n, size), n * size, __builtin_return_address(0));
}

void *__wrap_realloc(void *old, size_t size)
{
	log_free(old);
	return logged(__real_realloc(old, size), size, __builtin_return_address(0));
}

void *__wrap_aligned_alloc(size_t alignment, size_t size)
{
	return logged(__real_aligned_alloc(alignment, size), size, __builtin_return_address(0));
}

int __wrap_posix_memalign(void **out, size_t alignment, size_t size)
{
	int err = __real_posix_memalign(out, alignment, size);
	if (!err)
		logged(*out, size, __builtin_return_address(0));
	return err;
}

void *__wrap_memalign(size_t alignment, size_t size)
{
	return logged(__real_memalign(alignment, size), size, __builtin_return_address(0));
}

void *__wrap_valloc(size_t size)
{
	return logged(__real_valloc(size), size, __builtin_return_address(0));
}

void *__wrap_pvalloc(size_t size)
{
	return logged(__real_pvalloc(size), size, __builtin_return_address(0));
}

void __wrap_free(void *addr)
{
	log_free(addr);
	__real_free(addr);
}

/* A library's own allocator hands out or takes back a block (scalecheck_alloc.h). */
void scalecheck_malloclike(void *addr, size_t size, void *site)
{
	logged(addr, size, site);
}

void scalecheck_freelike(void *addr)
{
	log_free(addr);
}

void sc_alloc_log_start(int slot)
{
	struct alloc_log *log = mmap(NULL, sizeof *log, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (log == MAP_FAILED) {
		perror("scalecheck harness: allocation log");
		exit(3);
	}
	sc_alloc_logs[slot] = my_log = log;
}
