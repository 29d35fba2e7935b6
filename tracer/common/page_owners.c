/* The page-owner lines (page_owners.h), shared by the guest's page map and the recorder. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "page_owners.h"

#define PAGE 4096u
#define PRESENT (1ull << 63)
#define FRAME_BITS ((1ull << 55) - 1)
#define MAPS_BYTES (1 << 16)

/* The system calls themselves: the C library's wrappers may call preadv or writev. */
static ssize_t read_at(int fd, void *buf, size_t size, uint64_t offset)
{
	struct iovec iov = {buf, size};

	return syscall(SYS_preadv2, fd, &iov, 1, (unsigned long)offset, 0ul, 0);
}

static ssize_t write_here(void *cookie, const char *buf, size_t size)
{
	struct iovec iov = {(void *)buf, size};

	/* offset -1: at the file's position (its end: opened to append) */
	return syscall(SYS_pwritev2, (int)(intptr_t)cookie, &iov, 1, -1l, 0ul, 0);
}

static int close_here(void *cookie)
{
	return close((int)(intptr_t)cookie);
}

/* The stream's buffer: static, not malloc's, so that its lines are named as this code's
 * data (the recorder writes with its records off: a buffer from the heap would be an
 * unnamed part of the program's heap). One stream is open at a time. */
static char page_owners_buffer[1 << 16];

FILE *sc_page_owners_open(const char *path, int truncate)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND), 0644);
	cookie_io_functions_t calls = {.write = write_here, .close = close_here};
	FILE *out = fd >= 0 ? fopencookie((void *)(intptr_t)fd, "w", calls) : NULL;

	if (fd >= 0 && !out)
		close(fd);
	if (out)
		setvbuf(out, page_owners_buffer, _IOFBF, sizeof page_owners_buffer);
	return out;
}

static size_t read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n;

	if (fd < 0)
		return 0;
	while (got + 1 < size && (n = read_at(fd, buf + got, size - 1 - got, got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = 0;
	return got;
}

/* Writes the pages of one mapping whose owner changed (of a read-only file mapping: a
 * frame not written before, the file's data whoever maps it); says the process first. */
static void mapping_pages(FILE *out, int pagemap, long pid, uint64_t start, uint64_t end,
			  uint64_t *written, const char **header, int writable)
{
	uint64_t entries[512];

	for (uint64_t at = start; at < end; at += 512 * (uint64_t)PAGE) {
		uint64_t pages = (end - at) / PAGE < 512 ? (end - at) / PAGE : 512;
		ssize_t got = read_at(pagemap, entries, pages * 8, at / PAGE * 8);

		for (uint64_t i = 0; got > 0 && i < (uint64_t)got / 8; i++) {
			uint64_t frame = entries[i] & FRAME_BITS, vaddr = at + i * PAGE;
			uint64_t owner = ((uint64_t)pid << 40) ^ (vaddr / PAGE) ^ 1;

			/* frame 0: a process without CAP_SYS_ADMIN is told no frames */
			if (!(entries[i] & PRESENT) || !frame ||
			    (written && (frame >= SC_MAX_FRAMES || written[frame] == owner ||
					 (!writable && written[frame]))))
				continue;
			if (*header) {
				fputs(*header, out);
				*header = NULL;
			}
			if (written)
				written[frame] = owner;
			fprintf(out, "G %" PRIx64 " %" PRIx64 "\n", frame, vaddr);
		}
	}
}

void sc_process_pages(FILE *out, long pid, uint64_t *written, int pagemap)
{
	static char maps[MAPS_BYTES], header[MAPS_BYTES + 64];
	char path[64], comm[32] = "";
	const char *unsaid = header;

	snprintf(path, sizeof path, "/proc/%ld/comm", pid);
	read_file(path, comm, sizeof comm);
	comm[strcspn(comm, "\n")] = 0;
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	if (!read_file(path, maps, sizeof maps))
		return; /* a kernel thread, or gone */
	snprintf(header, sizeof header, "P %ld %s\n%s", pid, comm, maps);
	snprintf(path, sizeof path, "/proc/%ld/pagemap", pid);
	int opened = pagemap < 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (opened >= 0)
		pagemap = opened;
	if (pagemap < 0)
		return;
	for (char *line = maps; *line;) {
		uint64_t start, end;
		char perms[5] = "";
		int path_at = 0;
		char *next = strchr(line, '\n');

		/* writable mappings, and files' (a page the kernel filled, which user code read) */
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %*s %*s %*s %n", &start, &end, perms,
			   &path_at) >= 3 &&
		    (perms[1] == 'w' || (path_at && line[path_at] == '/')))
			mapping_pages(out, pagemap, pid, start, end, written, &unsaid,
				      perms[1] == 'w');
		line = next ? next + 1 : line + strlen(line);
	}
	if (opened >= 0)
		close(opened);
}
