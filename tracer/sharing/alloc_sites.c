/*
 * alloc_sites.so: preloaded (LD_PRELOAD, inside qemu-x86_64) into a benchmark that
 * `scalecheck sharing` traces, so that a heap line is named by the allocation that holds
 * it (its site and size), which is the same in every run, rather than by the code that
 * touched it, which is not (src/scalecheck/bench/sharing.py, docs/many-cores.md).
 *
 * The allocation entry points are scalecheck_alloc_entries.h's (the dynamic linker binds
 * every object's calls to the preloaded ones), and a library allocator's hand-outs come
 * through scalecheck_malloclike (scalecheck_alloc.h). An anonymous mapping the program
 * asks for itself (an allocator of its own over mmap: GCC's garbage-collected pages) is
 * a block too, its site marked SC_SITE_MAPPED (scalecheck_abi.h); the C library's own
 * (malloc's arenas) do not come through here. Each thread records (address, size, site,
 * TSC) of every block it gets, and (address, 0, 0, TSC) of every block it gives back, in
 * memory of its own, so the workers share no line through it; it appends them to the
 * file SCALECHECK_ALLOC_SITES names when it exits (the process's last thread at exit, or
 * the thread a default SIGTERM or SC_RECORDS_SIGNAL hits). A name ending in '/' is a directory (`scalecheck
 * profile`: a program and its children share the variable, and each has a heap of its
 * own) where each process appends to a file of its own, named by its pid, and writes
 * PID.pages when it exits (PID.execve.pages when it calls execve): which frames its writable memory had then
 * (../common/page_owners.h), so that a process living between two of the guest's page
 * map rounds is known too. The TSC (the harness's clock: its result gives the measured
 * window's) tells which blocks held a line while the workers ran.
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
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include "../common/page_owners.h"
#include "../include/scalecheck_abi.h"

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

/* The directory SCALECHECK_ALLOC_SITES names (ending in '/'), or NULL. */
static const char *own_files(void)
{
	const char *path = getenv("SCALECHECK_ALLOC_SITES");
	return path && *path && path[strlen(path) - 1] == '/' ? path : NULL;
}

static void write_out(struct site_buffer *buffer)
{
	const char *path = getenv("SCALECHECK_ALLOC_SITES");
	char own[4096];
	if (own_files()) {
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
		/* A block of its own, named by this function: a line of it moves when the
		 * thread moves to another CPU, the recorder's own cost, said as such. */
		mine->records[mine->count++] = (struct site_record){
			(uintptr_t)buffer, sizeof *mine,
			((uintptr_t)my_buffer + 1) | SC_SITE_MAPPED, __rdtsc()};
		pthread_once(&key_once, make_key);
		pthread_setspecific(exit_key, mine);
	}
	return mine;
}

/* A block handed out (site: the return address into the function that asked) or, with
 * site NULL, given back. */
static void *recorded(void *addr, size_t size, uint64_t site)
{
	if (!addr || recording)
		return addr;
	recording = 1;
	struct site_buffer *buffer = my_buffer();
	if (buffer) {
		if (buffer->count == RECORDS_PER_BUFFER)
			write_out(buffer);
		buffer->records[buffer->count++] =
			(struct site_record){(uintptr_t)addr, size, site, __rdtsc()};
	}
	recording = 0;
	return addr;
}

static void *block_got(void *addr, size_t size, void *site)
{
	return recorded(addr, size, (uintptr_t)site);
}

static void block_given(void *addr)
{
	recorded(addr, 0, 0);
}

#define SC_INTERPOSE
#include "../include/scalecheck_alloc_entries.h"

void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
	void *got = (void *)syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
	if (got != MAP_FAILED && (flags & MAP_ANONYMOUS) && !(flags & MAP_SHARED))
		recorded(got, length, (uintptr_t)__builtin_return_address(0) | SC_SITE_MAPPED);
	return got;
}

/* The same function under its other name (off_t is 64 bits here). */
void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
	__attribute__((alias("mmap")));

int munmap(void *addr, size_t length)
{
	block_given(addr);
	return (int)syscall(SYS_munmap, addr, length);
}

/* This process's pagemap, opened as it started (with its privileges then), and by whom
 * (a forked child's is its parent's: it opens its own). Far above the lowest free fd,
 * which the program's own opens get. */
static int pagemap = -1;
static pid_t pagemap_of;

__attribute__((constructor)) static void open_pagemap(void)
{
	int fd = own_files() ? open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		pagemap = fcntl(fd, F_DUPFD_CLOEXEC, 512);
		close(fd);
		pagemap_of = getpid();
	}
}

/* The process's pages at its end or before an execve (to files of their own: a program
 * that drops its privileges cannot append to the one its forked shell made), in a
 * directory of own files. */
static void write_pages(const char *when)
{
	char path[4096];
	if (!own_files())
		return;
	recording = 1;
	snprintf(path, sizeof path, "%s%ld%s.pages", own_files(), (long)getpid(), when);
	FILE *out = sc_page_owners_open(path, 0);
	if (out) {
		sc_process_pages(out, getpid(), NULL, pagemap_of == getpid() ? pagemap : -1);
		fclose(out);
	}
	recording = 0;
}

/* A forked child about to run another program (a shell's way to start one): its pages
 * first, with the copies its writes since the fork made, which the new program's memory
 * replaces. Once per process: a shell tries execve in each directory of PATH. */
int execve(const char *path, char *const argv[], char *const envp[])
{
	static pid_t written_by;
	if (written_by != getpid()) {
		written_by = getpid();
		write_pages(".execve");
	}
	return (int)syscall(SYS_execve, path, argv, envp);
}

/* A forked child's end without exit handlers (a shell's subshell): as at exit. Its
 * records are its parent's at the fork and its own since, of the heap it copied. */
void _exit(int status)
{
	if (mine)
		write_out(mine);
	write_pages("");
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

__attribute__((destructor)) static void process_exit(void)
{
	if (mine)
		write_out(mine);
	write_pages("");
}

/* A server stopped by SIGTERM's default action runs no exit handlers: the thread that
 * takes it writes its records first, then dies of it as it would have. */
static void terminated(int signal_number)
{
	if (mine)
		write_out(mine);
	write_pages("");
	signal(signal_number, SIG_DFL);
	raise(signal_number);
}

/* Asked for the records (SC_RECORDS_SIGNAL) before the process is stopped: the thread
 * that takes it writes them and the pages, and the process goes on; what it records
 * later is appended at its end, if it has one. */
static void records_asked(int signal_number)
{
	(void)signal_number;
	int saved = errno;
	if (mine)
		write_out(mine);
	write_pages("");
	errno = saved;
}

/* Only where the signal would kill at once (SIGTERM), or be ignored (the records'
 * signal): a handler the program sets replaces this one. Either waits while the other
 * writes (SIGTERM soon after the records' signal: one writing into the other's lines). */
static void handle_if_default(int signal_number, void (*handler)(int))
{
	/* SA_RESTART, as signal() sets: a call the signal interrupts goes on (a compiler
	 * driver's wait would fail, and the build with it) */
	struct sigaction current, mine_too = {.sa_handler = handler, .sa_flags = SA_RESTART};
	if (sigaction(signal_number, NULL, &current) != 0 || current.sa_handler != SIG_DFL)
		return;
	sigemptyset(&mine_too.sa_mask);
	sigaddset(&mine_too.sa_mask, SIGTERM);
	sigaddset(&mine_too.sa_mask, SC_RECORDS_SIGNAL);
	sigaction(signal_number, &mine_too, NULL);
}

__attribute__((constructor)) static void catch_terminate(void)
{
	handle_if_default(SIGTERM, terminated);
	handle_if_default(SC_RECORDS_SIGNAL, records_asked);
}
