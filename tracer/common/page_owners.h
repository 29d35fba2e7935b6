/*
 * Which process had each guest-physical page of its writable memory mapped where, in the
 * lines `scalecheck profile` reads (src/scalecheck/bench/profile_user.py):
 *
 *   P pid comm            then its /proc/PID/maps lines, verbatim
 *   G frame vaddr         (hex) a page of the last P's process
 *
 * Written by the guest's page map in rounds (tracer/guest/profile_pages.c) and by each
 * process the allocation-site recorder is preloaded into, of itself, when it exits
 * (tracer/sharing/alloc_sites.c): a process that lives between two rounds is seen then.
 * Reads and writes go through preadv2 and pwritev2 only, which the host leaves out of the
 * profile (profile_guest.PAGE_MAP_CALLS): reading pagemap touches the struct pages of the
 * program's memory.
 */
#ifndef PAGE_OWNERS_H
#define PAGE_OWNERS_H

#include <stdint.h>
#include <stdio.h>

#define SC_MAX_FRAMES (1u << 20) /* 4 GiB of guest RAM */

/* A stream that appends to path (created if need be) with pwritev2; NULL if not opened. */
FILE *sc_page_owners_open(const char *path, int truncate);

/* Writes the present pages of process pid's writable mappings and of its mappings of
 * files (a page the kernel filled from the file on one CPU and user code read on another
 * moved too). written: per frame, the owner last written, a page written again only when
 * its owner changed, a file's read-only page only once (NULL: every page); the process
 * and its maps are written before its first page, if any. pagemap: the process's
 * /proc/PID/pagemap opened before (it gives frames if its opener had CAP_SYS_ADMIN: a
 * program that drops its privileges opened it before), or -1: opened here. */
void sc_process_pages(FILE *out, long pid, uint64_t *written, int pagemap);

#endif
