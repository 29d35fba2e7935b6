/*
 * Constants the C side and the Python side of the tracer share. This file is the one
 * place they are defined: src/scalecheck/binding/abi.py reads every `#define SC_...` line
 * below (a plain integer each), so the host's renderings, limits and tag decoding follow
 * whatever is written here.
 */
#ifndef SCALECHECK_ABI_H
#define SCALECHECK_ABI_H

/* A region's tag: (test index << SC_TAG_INDEX_SHIFT) | (repeat << SC_TAG_REP_SHIFT) | side. */
#define SC_TAG_INDEX_SHIFT 8
#define SC_TAG_REP_SHIFT 1
/* The repeat number of unreported warm-up runs (the host ignores their regions). */
#define SC_WARMUP_REP 127

/* The POSIX model's Linux encoding: model fd k is real fd SC_FD_BASE + k (the driver holds
 * every fd below it), model page k is mapped at SC_MAP_BASE + k * SC_UNIT, file data is
 * counted in units of SC_UNIT bytes, and an anyfd open lands at or above SC_ANYFD_BASE. */
#define SC_FD_BASE 10
#define SC_ANYFD_BASE 64
#define SC_MAP_BASE 0x100000000
#define SC_UNIT 4096
/* A datagram socket's queue holds SC_SOCK_CAPACITY messages (the model's SOCK_CAPACITY):
 * the driver sets Linux's net.unix.max_dgram_qlen to one less, as a queue is full when it
 * holds more than that. */
#define SC_SOCK_CAPACITY 2

/* The guest driver's table sizes: a test beyond them is reported as an error by the host. */
#define SC_MAX_NAMES 16
#define SC_MAX_INODES 16
#define SC_MAX_UNITS 16
#define SC_MAX_PIPES 8
#define SC_MAX_FDS 32
#define SC_MAX_MAPS 16
#define SC_MAX_SOCKETS 4

/* The user-space test program's heap: the same addresses in every build and from every
 * directory. Its image ends at SC_USER_IMAGE_END whatever the size of its code and data
 * (its last section, SC_USER_IMAGE_TAIL bytes, tracer/user/trace_harness.c, is linked
 * right below), so qemu-x86_64 starts the program break, glibc's main heap, there; glibc's
 * start-up then takes blocks whose sizes depend on the program's path (the directory it
 * runs from), and the harness pads the heap so that the next block is at
 * SC_USER_HEAP_START. The addresses matter: a library may pick by an object's address
 * (libsv6's refcache picks a slot by address bits 6-21), and false sharing depends on
 * them. */
#define SC_USER_IMAGE_END 0x10108000
#define SC_USER_IMAGE_TAIL 8
#define SC_USER_HEAP_START 0x1010c860

/* The allocation-site recorder's mark on the site of a block that is an anonymous mapping
 * the program made itself (tracer/sharing/alloc_sites.c), not a block of malloc's. */
#define SC_SITE_MAPPED 0x8000000000000000

/* The signal on which the allocation-site recorder writes its records and pages and goes
 * on (tracer/sharing/alloc_sites.c): `scalecheck profile` sends it before it stops what
 * runs, so that a process that handles SIGTERM itself (make) or is killed is known too.
 * SIGWINCH (Linux's number): ignored by default, so a process without the recorder (the
 * guest's busybox) goes on as it was. */
#define SC_RECORDS_SIGNAL 28

#endif
