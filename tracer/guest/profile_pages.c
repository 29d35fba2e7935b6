/*
 * scalecheck profile's map of user pages: `profile_pages OUT MS` writes to OUT, every MS
 * milliseconds until it is killed, which process had each guest-physical page of user
 * memory mapped where (the lines of ../common/page_owners.h), so that the host can name the
 * program's lines by the files and symbols mapped there (src/scalecheck/bench/
 * profile_user.py). A page is written again only when its owner (process, address)
 * changed, and a process's maps only in a round that writes one of its pages. It stays on
 * CPU 0, so that its own memory does not move between CPUs.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../common/page_owners.h"

/* The owner (pid and page address, hashed) last written for each frame. */
static uint64_t written[SC_MAX_FRAMES];

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	long pause_ms = atol(argv[2]);
	struct timespec pause = {pause_ms / 1000, (pause_ms % 1000) * 1000000};
	FILE *out = sc_page_owners_open(argv[1], 1);
	cpu_set_t first;

	CPU_ZERO(&first);
	CPU_SET(0, &first);
	if (!out || sched_setaffinity(0, sizeof first, &first) != 0)
		return 1;
	for (;;) {
		DIR *proc = opendir("/proc");
		struct dirent *entry;

		while (proc && (entry = readdir(proc)))
			if (isdigit((unsigned char)entry->d_name[0]))
				sc_process_pages(out, atol(entry->d_name), written, -1);
		if (proc)
			closedir(proc);
		fflush(out);
		nanosleep(&pause, NULL);
	}
}
