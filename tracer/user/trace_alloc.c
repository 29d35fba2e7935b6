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
 *
 * The entry points are scalecheck_alloc_entries.h's. Built with SC_INTERPOSE for a
 * program linked with shared libraries: the entry points are defined under their own
 * names, wrapper lines name code in a shared object by its offset and path ("W start end
 * /lib/x.so"), and the objects' load addresses are written where SCALECHECK_LINK_MAP says
 * ("base path" lines) before main.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "trace_alloc.h"

#define MAX_WRAPPERS 64
#define MAX_CODE_RANGES 64
/* How far above an allocation's frame the wrappers' callers are looked for: a few small
 * frames (a wrapper tail-called has no return address there; beyond, stale words). */
#define STACK_WORDS 64

static __thread struct alloc_log *my_log;

/* Line-aligned: the harness's static data never shares a line with the library's. */
static struct {
	int n, ncode;
	uintptr_t start[MAX_WRAPPERS], end[MAX_WRAPPERS];
	/* The loaded objects' executable segments: where a return address can point. */
	uintptr_t code_start[MAX_CODE_RANGES], code_end[MAX_CODE_RANGES];
} __attribute__((aligned(64))) wrappers;

struct alloc_log *sc_alloc_logs[3] __attribute__((aligned(64)));

/* What dl_iterate_phdr is asked: the load address of the object whose file is path, or
 * (path NULL) every object's code ranges. */
struct object_query { const char *path; uintptr_t base; int found; };

static int note_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct object_query *want = data;
	char real[PATH_MAX] = "";
	if (info->dlpi_name[0] && !realpath(info->dlpi_name, real))
		return 0;
	if (want->path && !strcmp(real, want->path)) {
		want->base = info->dlpi_addr;
		want->found = 1;
		return 1;
	}
	for (int i = 0; !want->path && i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && wrappers.ncode < MAX_CODE_RANGES) {
			wrappers.code_start[wrappers.ncode] = info->dlpi_addr + ph->p_vaddr;
			wrappers.code_end[wrappers.ncode++] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		}
	}
	return 0;
}

void sc_alloc_add_wrapper(char **tok, int n)
{
	char path[PATH_MAX] = "";
	struct object_query object = {path, 0, 0}, code = {NULL, 0, 0};
	if (!wrappers.ncode)
		dl_iterate_phdr(note_object, &code);
	if (n < 3 || n > 4 || wrappers.n == MAX_WRAPPERS)
		return;
	unsigned long start = strtoul(tok[1], NULL, 16), end = strtoul(tok[2], NULL, 16);
	if (n == 4) {
		snprintf(path, sizeof path, "%s", tok[3]);
		if (dl_iterate_phdr(note_object, &object), !object.found)
			return; /* not loaded */
	}
	wrappers.start[wrappers.n] = start + object.base;
	wrappers.end[wrappers.n++] = end + object.base;
}

static int is_code(uintptr_t word)
{
	for (int i = 0; i < wrappers.ncode; i++)
		if (word >= wrappers.code_start[i] + 8 && word < wrappers.code_end[i])
			return 1;
	return 0;
}

/* The wrapper whose code holds pc, or -1. */
static int wrapper_of(uintptr_t pc)
{
	for (int i = 0; i < wrappers.n; i++)
		if (pc >= wrappers.start[i] && pc < wrappers.end[i])
			return i;
	return -1;
}

/* Where code jumps when it is a PLT entry (`[endbr64] [bnd] jmp *got(%rip)`, the GOT
 * bound at load): a shared object's call of its own exported wrapper goes through one. */
static uintptr_t plt_target(uintptr_t entry)
{
	const unsigned char *code = (const unsigned char *)entry;
	if (!is_code(entry + 8))
		return 0;
	if (code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa)
		code += 4;
	if (code[0] == 0xf2)
		code++;
	if (code[0] != 0xff || code[1] != 0x25)
		return 0;
	int32_t rel;
	uintptr_t target;
	memcpy(&rel, code + 2, sizeof rel);
	memcpy(&target, code + 6 + rel, sizeof target);
	return target;
}

/* Whether word is a return address after a call of wrapper w: `call rel32` to its start
 * or to a PLT entry of it, or `call *` through a register or memory (ff /2, two to seven
 * bytes long). */
static int returns_from(uintptr_t word, int w)
{
	if (!is_code(word))
		return 0;
	const unsigned char *code = (const unsigned char *)word;
	if (code[-5] == 0xe8) {
		int32_t rel;
		memcpy(&rel, code - 5 + 1, sizeof rel);
		uintptr_t callee = word + (uintptr_t)(intptr_t)rel;
		return callee == wrappers.start[w] || plt_target(callee) == wrappers.start[w];
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

static void *block_got(void *addr, size_t size, void *caller)
{
	if (addr && my_log && my_log->n < MAX_ALLOCS) {
		uintptr_t site = site_of((uintptr_t)caller, __builtin_frame_address(0));
		my_log->entries[my_log->n++] = (struct alloc){(uintptr_t)addr, size, site, 0};
	}
	return addr;
}

/* Logged in the thread's own log, like an allocation (never in another thread's: that
 * would be a conflict of the harness's). */
static void block_given(void *addr)
{
	if (addr && my_log && my_log->n < MAX_ALLOCS)
		my_log->entries[my_log->n++] = (struct alloc){(uintptr_t)addr, 0, 0, 1};
}

#include "../include/scalecheck_alloc_entries.h"

#ifdef SC_INTERPOSE
static int print_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	char real[PATH_MAX];
	if (info->dlpi_name[0] && realpath(info->dlpi_name, real))
		fprintf(data, "%#lx %s\n", (unsigned long)info->dlpi_addr, real);
	return 0;
}

/* Where the shared objects were loaded, for the host to name their code and data. */
__attribute__((constructor)) static void write_link_map(void)
{
	const char *path = getenv("SCALECHECK_LINK_MAP");
	FILE *out = path ? fopen(path, "w") : NULL;
	if (out) {
		dl_iterate_phdr(print_object, out);
		fclose(out);
	}
}
#endif

void sc_alloc_log_start(int slot)
{
	struct alloc_log *log = mmap(NULL, sizeof *log, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (log == MAP_FAILED) {
		perror("scalecheck harness: allocation log");
		exit(3);
	}
	sc_alloc_logs[slot] = my_log = log;
}
