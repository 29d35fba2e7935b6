/*
 * sv6.h - the POSIX model's operations on in-memory state, built from the
 * scalable parts (refcache, fdtable, dir, radix, usock).
 *
 * A world is one file system (a single flat root directory) shared by any
 * number of processes; a process is an fd table and an address space.  Threads
 * call into any process at once.  Every call returns what the model's operation
 * returns: a result >= 0, or -errno, or for memread/memwrite a fault
 * (SV6_SIGSEGV, SV6_SIGBUS).  Offsets and lengths are bytes; mappings have page
 * granularity (SV6_PAGE_SIZE).
 *
 * Reclamation is lazy: an unreferenced file, inode or pipe is freed two
 * refcache epochs after its count was last seen at zero.  Epochs end at
 * sv6_world_tick, or by themselves in a world created with SV6_WORLD_SELF_TICK.
 */
#ifndef SV6_SV6_H
#define SV6_SV6_H

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>

#define SV6_PAGE_SIZE 4096
/* open: any free fd, from the calling core's partition (not the lowest). */
#define SV6_O_ANYFD 0x40000000
/* Faults of memread/memwrite, below every -errno. */
#define SV6_SIGSEGV (-4096 - SIGSEGV)
#define SV6_SIGBUS (-4096 - SIGBUS)

/* fstatx: which fields to fill; leaving out NLINK reads no link count, so the
 * call commutes with link and unlink of the same file. */
#define SV6_STATX_INO 1u
#define SV6_STATX_NLINK 2u
#define SV6_STATX_SIZE 4u
#define SV6_STATX_ALL (SV6_STATX_INO | SV6_STATX_NLINK | SV6_STATX_SIZE)

struct sv6_stat {
    unsigned mask; /* the fields filled */
    uint64_t ino;
    uint64_t nlink;
    uint64_t size;
};

struct sv6_world;
struct sv6_proc;

/* sv6_world_create flags. */
/* No ticker needed: each core flushes its own reference cache every
 * REFCACHE_FLUSH_EVERY changes it makes, from those calls, ends the epoch when
 * every core has flushed in it, and frees what waited two epochs (sv6 did this
 * from each core's timer tick).  The frees run on the threads that call. */
#define SV6_WORLD_SELF_TICK 1u
/* Link counts in one shared atomic counter per inode instead of refcache:
 * the non-scalable baseline of statbench's "shared counter" mode. */
#define SV6_WORLD_SHARED_NLINK 2u

struct sv6_world *sv6_world_create(unsigned flags);
/* Every process must be destroyed first; frees everything. */
void sv6_world_destroy(struct sv6_world *w);
/* Flushes the reference caches, ends an epoch and frees what is unreferenced. */
void sv6_world_tick(struct sv6_world *w);
/* Consistent reads of link counts that had to retry (see refcache.h). */
unsigned long sv6_world_read_retries(struct sv6_world *w);

struct sv6_proc *sv6_proc_create(struct sv6_world *w);
/* Closes every fd and unmaps everything; no other thread may use p. */
void sv6_proc_destroy(struct sv6_proc *p);

/* posix_spawn-style creation: the child starts with an empty address space
 * and exactly the fds listed (child_fd = a copy of parent_fd), built directly
 * rather than copied and closed.  SV6_SPAWN_ALL is fork-style, for
 * comparison: every fd copied at its number and the whole address space (file
 * pages shared with the file, anonymous pages copied).  0 or -EBADF. */
struct sv6_spawn_fd {
    int parent_fd;
    int child_fd;
};
#define SV6_SPAWN_ALL ((size_t)-1)
int sv6_spawn(struct sv6_proc *parent, const struct sv6_spawn_fd *fds, size_t n,
              struct sv6_proc **child);

/* Puts at dst_fd (which must be free) a new reference to src's open file at
 * src_fd, sharing its offset: dup across processes, for building a given state
 * (scalecheck's adapter installs a test's fds at their numbers).  0 or -EBADF. */
int sv6_fd_install(struct sv6_proc *dst, int dst_fd, struct sv6_proc *src, int src_fd);

/* Names (flags: O_CREAT, O_EXCL, O_TRUNC, SV6_O_ANYFD). */
int sv6_open(struct sv6_proc *p, const char *name, int flags);
int sv6_link(struct sv6_proc *p, const char *old, const char *new_name);
int sv6_unlink(struct sv6_proc *p, const char *name);
int sv6_rename(struct sv6_proc *p, const char *src, const char *dst);
int sv6_stat(struct sv6_proc *p, const char *name, struct sv6_stat *st);

/* File descriptors. */
int sv6_fstat(struct sv6_proc *p, int fd, struct sv6_stat *st);
int sv6_fstatx(struct sv6_proc *p, int fd, unsigned mask, struct sv6_stat *st);
off_t sv6_lseek(struct sv6_proc *p, int fd, off_t off, int whence);
int sv6_close(struct sv6_proc *p, int fd);
int sv6_pipe(struct sv6_proc *p, int fds[2]);
ssize_t sv6_read(struct sv6_proc *p, int fd, void *buf, size_t n);
/* Writes to a file that would end past 2^48 bytes fail with -EFBIG. */
ssize_t sv6_write(struct sv6_proc *p, int fd, const void *buf, size_t n);
ssize_t sv6_pread(struct sv6_proc *p, int fd, void *buf, size_t n, off_t off);
ssize_t sv6_pwrite(struct sv6_proc *p, int fd, const void *buf, size_t n, off_t off);

/* Datagram sockets (read and write on their fds send and receive too). */
int sv6_socket(struct sv6_proc *p, bool unordered, int flags);
/* Bounds the socket at fd to capacity queued datagrams (see usock.h): 0 or -EBADF. */
int sv6_socket_capacity(struct sv6_proc *p, int fd, size_t capacity);
ssize_t sv6_send(struct sv6_proc *p, int fd, const void *buf, size_t n);
ssize_t sv6_recv(struct sv6_proc *p, int fd, void *buf, size_t n);

/* Virtual memory (prot: PROT_READ, PROT_WRITE; flags: MAP_ANONYMOUS,
 * MAP_FIXED; mappings are always shared with the file).  mmap returns the
 * address or -errno. */
int64_t sv6_mmap(struct sv6_proc *p, uint64_t addr, size_t len, int prot, int flags, int fd,
                 off_t off);
int sv6_munmap(struct sv6_proc *p, uint64_t addr, size_t len);
int sv6_mprotect(struct sv6_proc *p, uint64_t addr, size_t len, int prot);
int sv6_memread(struct sv6_proc *p, uint64_t addr, void *buf, size_t n);
int sv6_memwrite(struct sv6_proc *p, uint64_t addr, const void *buf, size_t n);

#endif
