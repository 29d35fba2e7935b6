/*
 * The main thread's stack at a fixed address (trace_harness.c moves main there): code of
 * the harness tells from its stack pointer alone that it runs on the main thread, outside
 * the calls' regions, with no memory access (which the plugin would record in a region).
 * trace_zero.c uses it to zero the setup's memory by a system call.
 */
#ifndef TRACE_ZERO_H
#define TRACE_ZERO_H

#include <stdint.h>

/* The harness's own fds (/dev/zero, the snapshot files) are moved at or above this, out
 * of the way of a library's. */
#define SC_HARNESS_FD_MIN 512

/* Below qemu-x86_64's first mmap address (1 << 38) and far above the heap. */
#define SC_MAIN_STACK_ADDR 0x1000000000ul
#define SC_MAIN_STACK_SIZE (8ul << 20)

static inline __attribute__((always_inline)) int sc_on_main_stack(void)
{
	uintptr_t sp;
	__asm__("mov %%rsp, %0" : "=r"(sp));
	return sp - SC_MAIN_STACK_ADDR < SC_MAIN_STACK_SIZE;
}

#endif
