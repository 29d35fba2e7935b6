/*
 * alloc_sites.so: preloaded (LD_PRELOAD, inside qemu-x86_64) into a benchmark that
 * `scalecheck sharing` traces, so that a heap line is named by the allocation that holds
 * it (its site and size), which is the same in every run, rather than by the code that
 * touched it, which is not (src/scalecheck/bench/sharing.py, docs/many-cores.md).
 *
 * Every allocation entry point is defined under its own name over glibc's __libc_
 * functions (the dynamic linker binds every object's calls to the preloaded ones), and a
 * library allocator's hand-outs come through scalecheck_malloclike (scalecheck_alloc.h).
 * Each thread records (address, size, site, TSC) of every block it gets, and (address,
 * 0, 0, TSC) of every block it gives back, in memory of its own, so the workers share no
 * line through it; it appends them to the file SCALECHECK_ALLOC_SITES names when it
 * exits (the process's last thread at exit, or the thread a default SIGTERM hits); a name ending in '/' is a directory where
 * each process appends to a file of its own, named by its pid (`scalecheck profile`: a
 * program and its children share the variable, and each has a heap of its own). The TSC (the harness's clock: its result
 * gives the measured window's) tells which blocks held a line while the workers ran.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <x86intrin.h>

#include "../include/scalecheck_alloc.h"

struct site_record { uint64_t addr, size, site, tsc; };

/* Records a thread keeps before it writes them out and starts again (reserved, not
 * committed: pages are touched as records come). */
#define RECORDS_PER_BUFFER (1u << 20)

struct site_buffer { uint32_t count; struct site_record records[RECORDS_PER_BUFFER]; };

static __thread struct site_buffer *mine;
/* Set while this thread is inside the recorder: an allocation made by pthread_setspecific
 * or by the write-out is not recorded. */
static __thread int recording;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *old, size_t size);
void *__libc_memalign(size_t alignment, size_t size);
void __libc_free(void *addr);

static void write_out(struct site_buffer *buffer)
{
	const char *path = getenv("SCALECHECK_ALLOC_SITES");
	char own[4096];
	if (path && *path && path[strlen(path) - 1] == '/') {
		snprintf(own, sizeof own, "%s%ld", path, (long)getpid());
		path = own;
	}
	int fd = path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
	const char *bytes = (const char *)buffer->records;
	size_t left = buffer->count * sizeof *buffer->records;
	while (fd >= 0 && left > 0) {
		ssize_t wrote = write(fd, bytes, left);
		if (wrote <= 0 && errno != EINTR)
			break;
		bytes += wrote > 0 ? wrote : 0;
		left -= wrote > 0 ? (size_t)wrote : 0;
	}
	if (fd >= 0)
		close(fd);
	buffer->count = 0;
}

static void thread_exit(void *buffer)
{
	write_out(buffer);
}

static void make_key(void)
{
	pthread_key_create(&exit_key, thread_exit);
}

static struct site_buffer *my_buffer(void)
{
	if (!mine) {
		void *buffer = mmap(NULL, sizeof *mine, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (buffer == MAP_FAILED)
			return NULL;
		mine = buffer;
		pthread_once(&key_once, make_key);
		pthread_setspecific(exit_key, mine);
	}
	return mine;
}

/* A block handed out (site: the return address into the function that asked) or, with
 * site NULL, given back. */
static void *recorded(void *addr, size_t size, void *site)
{
	if (!addr || recording)
		return addr;
	recording = 1;
	struct site_buffer *buffer = my_buffer();
	if (buffer) {
		if (buffer->count == RECORDS_PER_BUFFER)
			write_out(buffer);
		buffer->records[buffer->count++] =
			(struct site_record){(uintptr_t)addr, size, (uintptr_t)site, __rdtsc()};
	}
	recording = 0;
	return addr;
}

__attribute__((destructor)) static void process_exit(void)
{
	if (mine)
		write_out(mine);
}

/* A server stopped by SIGTERM's default action runs no exit handlers: the thread that
 * takes it writes its records first, then dies of it as it would have. */
static void terminated(int signal_number)
{
	if (mine)
		write_out(mine);
	signal(signal_number, SIG_DFL);
	raise(signal_number);
}

/* Only where SIGTERM would kill at once: a handler the program sets replaces this one. */
__attribute__((constructor)) static void catch_terminate(void)
{
	struct sigaction current;
	if (sigaction(SIGTERM, NULL, &current) == 0 && current.sa_handler == SIG_DFL)
		signal(SIGTERM, terminated);
}

void *malloc(size_t size)
{
	return recorded(__libc_malloc(size), size, __builtin_return_address(0));
}

void *calloc(size_t n, size_t size)
{
	return recorded(__libc_calloc(n, size), n * size, __builtin_return_address(0));
}

void *realloc(void *old, size_t size)
{
	recorded(old, 0, NULL);
	return recorded(__libc_realloc(old, size), size, __builtin_return_address(0));
}

void free(void *addr)
{
	recorded(addr, 0, NULL);
	__libc_free(addr);
}

void *memalign(size_t alignment, size_t size)
{
	return recorded(__libc_memalign(alignment, size), size, __builtin_return_address(0));
}

void *aligned_alloc(size_t alignment, size_t size)
{
	return recorded(__libc_memalign(alignment, size), size, __builtin_return_address(0));
}

int posix_memalign(void **out, size_t alignment, size_t size)
{
	if (!alignment || (alignment & (alignment - 1)) || alignment % sizeof(void *))
		return EINVAL;
	void *block = __libc_memalign(alignment, size);
	if (!block)
		return ENOMEM;
	*out = recorded(block, size, __builtin_return_address(0));
	return 0;
}

void scalecheck_malloclike(void *addr, size_t size, void *site)
{
	recorded(addr, size, site);
}

void scalecheck_freelike(void *addr)
{
	recorded(addr, 0, NULL);
}
