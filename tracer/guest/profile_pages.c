/*
 * scalecheck profile's map of user pages: `profile_pages OUT MS` writes to OUT, every MS
 * milliseconds until it is killed, which process had each guest-physical page of user
 * memory mapped where (/proc/PID/maps and /proc/PID/pagemap), so that the host can name the
 * program's lines by the files and symbols mapped there (src/scalecheck/bench/
 * profile_user.py). Only pages of writable mappings; a page is written again only when its
 * owner (process, address) changed, and a process's maps only in a round that writes one
 * of its pages. It stays on CPU 0, so that its own memory does not move between CPUs, and
 * it reads and writes only with preadv2 and pwritev2, which the host leaves out of the
 * profile (profile_guest.PAGE_MAP_CALLS): its reads of pagemap touch the struct pages of
 * the program's memory.
 *
 *   P pid comm            then its /proc/PID/maps lines, verbatim
 *   G frame vaddr         (hex) a page of the last P's process
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAMES (1u << 20) /* 4 GiB of guest RAM */
#define PAGE 4096u
#define PRESENT (1ull << 63)
#define FRAME_BITS ((1ull << 55) - 1)
#define MAPS_BYTES (1 << 16)

/* The owner (pid and page address, hashed) last written for each frame. */
static uint64_t written[MAX_FRAMES];

/* The system calls themselves: the C library's wrappers may call preadv or writev. */
static ssize_t read_at(int fd, void *buf, size_t size, uint64_t offset)
{
	struct iovec iov = {buf, size};

	return syscall(SYS_preadv2, fd, &iov, 1, (unsigned long)offset, 0ul, 0);
}

static ssize_t write_here(void *fd, const char *buf, size_t size)
{
	struct iovec iov = {(void *)buf, size};

	/* offset -1: at the file's position */
	return syscall(SYS_pwritev2, *(int *)fd, &iov, 1, -1l, 0ul, 0);
}

static size_t read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
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

/* Writes the pages of one mapping whose owner changed; says the process first. */
static void mapping_pages(FILE *out, int pagemap, long pid, uint64_t start, uint64_t end,
			  int *said, const char *header)
{
	uint64_t entries[512];

	for (uint64_t at = start; at < end; at += 512 * (uint64_t)PAGE) {
		uint64_t pages = (end - at) / PAGE < 512 ? (end - at) / PAGE : 512;
		ssize_t got = read_at(pagemap, entries, pages * 8, at / PAGE * 8);

		for (uint64_t i = 0; got > 0 && i < (uint64_t)got / 8; i++) {
			uint64_t frame = entries[i] & FRAME_BITS, vaddr = at + i * PAGE;
			uint64_t owner = ((uint64_t)pid << 40) ^ (vaddr / PAGE) ^ 1;

			if (!(entries[i] & PRESENT) || frame >= MAX_FRAMES || written[frame] == owner)
				continue;
			if (!*said) {
				fputs(header, out);
				*said = 1;
			}
			written[frame] = owner;
			fprintf(out, "G %" PRIx64 " %" PRIx64 "\n", frame, vaddr);
		}
	}
}

static void process_pages(FILE *out, long pid)
{
	static char maps[MAPS_BYTES], header[MAPS_BYTES + 64];
	char path[64], comm[32] = "";
	int said = 0;

	snprintf(path, sizeof path, "/proc/%ld/comm", pid);
	read_file(path, comm, sizeof comm);
	comm[strcspn(comm, "\n")] = 0;
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	if (!read_file(path, maps, sizeof maps))
		return; /* a kernel thread, or gone */
	snprintf(header, sizeof header, "P %ld %s\n%s", pid, comm, maps);
	snprintf(path, sizeof path, "/proc/%ld/pagemap", pid);
	int pagemap = open(path, O_RDONLY);
	if (pagemap < 0)
		return;
	for (char *line = maps; *line;) {
		uint64_t start, end;
		char perms[5] = "";
		char *next = strchr(line, '\n');

		/* only writable mappings: a line a CPU wrote is in one */
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s", &start, &end, perms) == 3 &&
		    perms[1] == 'w')
			mapping_pages(out, pagemap, pid, start, end, &said, header);
		line = next ? next + 1 : line + strlen(line);
	}
	close(pagemap);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	static int fd;
	FILE *out = NULL;
	long pause_ms = atol(argv[2]);
	struct timespec pause = {pause_ms / 1000, (pause_ms % 1000) * 1000000};

	cpu_set_t first;

	CPU_ZERO(&first);
	CPU_SET(0, &first);
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0)
		out = fopencookie(&fd, "w", (cookie_io_functions_t){.write = write_here});
	if (!out || sched_setaffinity(0, sizeof first, &first) != 0)
		return 1;
	for (;;) {
		DIR *proc = opendir("/proc");
		struct dirent *entry;

		while (proc && (entry = readdir(proc)))
			if (isdigit((unsigned char)entry->d_name[0]))
				process_pages(out, atol(entry->d_name));
		if (proc)
			closedir(proc);
		fflush(out);
		nanosleep(&pause, NULL);
	}
}
