/*
 * memset, wrapped at link time in a static program (ld --wrap=memset, the list in
 * src/scalecheck/run/user/program_build.py): on the main thread (setup and teardown, never
 * inside a region) a block of zeros is read from /dev/zero, the kernel writing it. Under
 * the plugin every store of memset's costs a callback, in a region or not: libsv6's setup
 * zeroes its 173 KB world at each test repeat, 22k callbacks, a quarter of the program's
 * (of 2.4 ns each, with the TCG code around them some 60 us a world). The
 * memory ends the same, the heap is not touched, and the calls' memsets run as before:
 * the wrapper looks at its registers only, then jumps to memset.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "trace_zero.h"

/* Smaller blocks are zeroed by memset: under qemu-x86_64 with the plugin a read of 4 KiB
 * costs what memset's does (1.1 and 1.2 us), one of 16 KiB 2 against 4.8 us, of 173 KB
 * 11 against 70 us. */
#define ZERO_BY_READ_MIN 8192

void *__real_memset(void *s, int c, size_t n);
void *__wrap_memset(void *s, int c, size_t n);

/* Line-aligned, as all the harness's static data. 0: not opened yet; -1: cannot be. */
static struct {
	int fd;
} __attribute__((aligned(64))) zero;

static int zero_fd(void)
{
	if (zero.fd)
		return zero.fd;
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	zero.fd = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, SC_HARNESS_FD_MIN);
	if (fd >= 0)
		close(fd);
	return zero.fd;
}

/* n bytes at s zeroed by reads of /dev/zero; what they leave, by memset. */
static __attribute__((noinline, cold)) void *zero_by_read(void *s, size_t n)
{
	char *at = s;
	int fd = zero_fd();
	while (n && fd >= 0) {
		ssize_t got = read(fd, at, n);
		if (got <= 0)
			break;
		at += got;
		n -= (size_t)got;
	}
	__real_memset(at, 0, n);
	return s;
}

void *__wrap_memset(void *s, int c, size_t n)
{
	if (c == 0 && n >= ZERO_BY_READ_MIN && sc_on_main_stack())
		return zero_by_read(s, n);
	return __real_memset(s, c, n);
}
