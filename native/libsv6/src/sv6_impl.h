/*
 * sv6_impl.h - the objects behind sv6.h and how their lifetimes are counted.
 *
 * References (refcache objects, so that taking and dropping them writes only
 * the caller's core cache):
 *   inode->ref  one per directory entry naming it, per open file, per mapped page;
 *   file->ref   one per fd slot holding it (spawned children share files);
 *   pipe->ends  its two files (a plain atomic: it changes twice in a pipe's life).
 * A file page replaced by a writer, or killed by a truncation and then
 * replaced or swept by a writer, is freed after an EBR grace period: readers
 * copy it without a lock.
 * inode->nlink is a refcache counter, never freed: link and unlink on different
 * cores add to their own caches; fstat reads it with the consistent read.
 *
 * Every operation runs inside one EBR section, so what it finds through an fd
 * slot, a directory entry or a page slot stays allocated until it returns, even
 * if another thread removes it meanwhile.  Taking a new reference to a found
 * object is safe where the thing it was found through still holds one until a
 * grace period has passed: directory entries (dropped when the entry is freed)
 * and a file's inode (dropped by the file's release, which refcache runs only
 * after a grace period).  An fd slot's reference is dropped at once by close,
 * so spawn copies fds under the fd table's partition lock.
 */
#ifndef SV6_IMPL_H
#define SV6_IMPL_H

#include "sv6/alloc.h"
#include "sv6/dir.h"
#include "sv6/fdtable.h"
#include "sv6/radix.h"
#include "sv6/refcache.h"
#include "sv6/sv6.h"
#include "sv6/usock.h"

#include <stdlib.h>
#include <string.h>

struct ino_counter {
    SV6_ALIGNED _Atomic uint64_t next;
};

struct sv6_world {
    struct refcache rc;
    struct dir_ops names_own_inodes; /* entries hold inode references */
    struct dir root;
    struct ino_counter inos[SV6_NCORES]; /* per core: creates share no counter */
    bool shared_nlink; /* SV6_WORLD_SHARED_NLINK */
};

/* Per core, each on a line of its own (fs.c, "truncation"): the lock that the
 * core's writers of one inode take, with the core's write clock (2 * the
 * stamp of its last write, + 1 while a write runs; read only by
 * truncations); and the core's truncation stamp (2 * the stamp, + 1 while a
 * truncation runs; read by every reader and writer of file data). */
struct core_writer {
    SV6_ALIGNED struct sv6_lock lock;
    _Atomic uint64_t clock;
};

struct truncation_stamp {
    SV6_ALIGNED _Atomic uint64_t word;
};

struct page_mark {
    /* Written under its core's writer lock: pages before stamp, so a reader
     * that finds the stamp finds the pages that go with it. */
    SV6_ALIGNED _Atomic uint64_t pages;
    _Atomic uint64_t stamp; /* the stamp of the write that set pages */
};

struct sv6_inode {
    struct refcache_obj ref;
    struct refcache_obj nlink;
    SV6_ALIGNED _Atomic int64_t shared_nlink; /* instead, with SV6_WORLD_SHARED_NLINK */
    struct sv6_world *world;
    uint64_t ino;
    /* File data and length: page number -> struct page_holder (fs.c), the
     * page's bytes (replaced as a whole by its writers) and where its written
     * bytes end.  The length is where the highest live page ends, so calls on
     * different pages share nothing, a write past the end included, and a
     * call past the end reads only the slots from its page up. */
    struct radix pages;
    struct core_writer writers[SV6_NCORES];
    /* A holder is live while its stamp is above every truncation stamp: an
     * O_TRUNC writes only its own core's stamp, and the holders it kills read
     * as empty slots until a writer replaces or sweeps them. */
    struct truncation_stamp truncation_stamps[SV6_NCORES];
    /* Per core, one past the highest page it made under its mark's stamp (0:
     * none): pages go only by truncation, which kills the marks of older
     * stamps, so the largest live mark is one past the highest live page, and
     * the exact length is one radix lookup instead of a walk of every slot.
     * Only the exact length (fstat, stat, SEEK_END) reads them; a write that
     * makes a page past its core's mark writes its core's line. */
    struct page_mark marks[SV6_NCORES];
};

/* What a slot of inode->pages holds while its page exists (from the page's
 * first write to the next truncation, which kills it: a killed holder stays in
 * its slot, read as empty, until a writer replaces or sweeps it).  The file's
 * length is where its highest live page's end lies (page * SV6_PAGE_SIZE +
 * end; the pages below it are inside the file, holes and dead holders
 * included): so a write writes only its own pages' slots and ends, and a call
 * that asks whether the file has a byte at or past offset o reads only the
 * slots from o's page up.  end and bytes are on lines of their own: finding
 * the length reads nothing that a writer inside the page's end (which swaps
 * bytes only) writes. */

struct page_holder {
    struct ebr_node ebr;
    uint64_t stamp; /* its writer's; live while above every truncation stamp */
    SV6_ALIGNED _Atomic uint64_t end; /* where the page's written bytes end; only grows */
    SV6_ALIGNED struct page_copy *_Atomic bytes;
};

/* A pipe is a queue of chunks (fs.c) with a lock at each end, as in Michael
 * and Scott's two-lock queue: readers take from the front under read_lock,
 * writers append under write_lock, so a read of a non-empty pipe and a write
 * share no written byte. */
struct pipe_chunk;

struct sv6_pipe {
    SV6_ALIGNED struct sv6_lock read_lock;
    struct pipe_chunk *_Atomic head; /* read up to; its next is the first unread */
    SV6_ALIGNED struct sv6_lock write_lock;
    struct pipe_chunk *tail;
    SV6_ALIGNED uint64_t ino;
    atomic_int ends;
};

enum file_kind { FILE_INODE, FILE_PIPE_READ, FILE_PIPE_WRITE, FILE_SOCKET };

struct sv6_file {
    struct refcache_obj ref;
    struct sv6_world *world;
    enum file_kind kind;
    struct sv6_inode *inode;
    struct sv6_pipe *pipe;
    struct usock *sock;
    uint64_t sock_ino;
    /* A reference beside its fd's was taken (spawn or an fd copy): its close
     * leaves the release to refcache, which alone knows when the last goes. */
    atomic_bool copied;
    SV6_ALIGNED struct sv6_lock off_lock;
    _Atomic uint64_t off; /* changed under off_lock; lseek and read peek without it */
    _Atomic uint64_t off_changes; /* odd while off changes: a peek reads again */
};

struct mmap_hint {
    SV6_ALIGNED _Atomic uint64_t next_page;
};

struct sv6_proc {
    struct sv6_world *world;
    struct fdtable fds;
    struct radix vm; /* page number -> struct sv6_mapping */
    struct mmap_hint hints[SV6_NCORES];
};

/* A page's bytes, never changed once published: a writer puts a changed copy
 * in its place, so readers copy it without a lock (file pages in fs.c,
 * anonymous pages in vm.c).  The first line holds the grace-period link, which
 * only a retirement writes; it is also where a free block is linked (by
 * malloc, or by a thread that keeps it), which the allocation that hands it
 * out writes.  The bytes that readers read start on the next line. */
struct page_copy {
    struct ebr_node ebr;
    SV6_ALIGNED unsigned char bytes[SV6_PAGE_SIZE];
};

/* Uninitialized; always inlined, as sv6_alloc_lines, for the tracer's names. */
static inline __attribute__((always_inline)) struct page_copy *sv6_page_copy_alloc(void)
{
    return sv6_alloc_lines(sizeof(struct page_copy));
}

static inline void sv6_page_copy_free(struct ebr_node *node)
{
    sv6_free_lines(SV6_CONTAINER_OF(node, struct page_copy, ebr), sizeof(struct page_copy));
}
/* Whether a page's bytes (NULL: a page never written, all zeros) hold the n
 * bytes of buf at in_page: a writer of such bytes publishes nothing, so it
 * shares nothing with the page's readers. */
static inline bool sv6_page_holds(const unsigned char *bytes, size_t in_page,
                                  const unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != (bytes ? bytes[in_page + i] : 0))
            return false;
    return true;
}
uint64_t sv6_new_ino(struct sv6_world *w);
/* An inode with link count 1 and two references (for its entry and a file). */
struct sv6_inode *sv6_new_inode(struct sv6_world *w);
struct sv6_file *sv6_new_file(struct sv6_world *w, enum file_kind kind);
/* Releases f now, without refcache's review or a grace period: for a file whose
 * only reference was its fd's, which no other thread can have read. */
void sv6_file_release_now(struct sv6_file *f);
/* Largest file length: the page numbers of inode->pages. */
#define SV6_FILE_MAX ((1ull << RADIX_KEY_BITS) * SV6_PAGE_SIZE)
/* Inside an EBR section: bytes [off, off + n) that lie below the file's length
 * into buf, the rest zeros; returns that length, or when it reaches off + n
 * any length >= off + n, or with no page from off's page up that page's start
 * (sv6_inode_length_reaching).  Each page is read whole, at one moment,
 * without a lock and writing nothing. */
uint64_t sv6_inode_read(struct sv6_inode *inode, void *buf, size_t n, uint64_t off);
/* The file's exact length (read again when a truncation ended meanwhile). */
uint64_t sv6_inode_length(struct sv6_inode *inode);
/* Inside an EBR section: with no page of the file from need - 1's page up,
 * that page's start (the length is at or below it; found without reading the
 * truncation stamps); else the length if it is below need, else some length
 * >= need.  It reads only the slots from that page up. */
uint64_t sv6_inode_length_reaching(struct sv6_inode *inode, uint64_t need);
/* Inside an EBR section: writes buf at off (off + n <= SV6_FILE_MAX), all of
 * it and growing the length when extend (returns 0: it reads no length),
 * else only the bytes below the length (returns that length, or as
 * sv6_inode_read some length >= off + n, or off's page start). */
uint64_t sv6_inode_write(struct sv6_inode *inode, const void *buf, size_t n, uint64_t off,
                         bool extend);
/* Frees a pipe that no one can reach any more, with its unread data. */
void sv6_pipe_destroy(struct sv6_pipe *pipe);
/* Frees the pages of an inode that no one can reach any more. */
void sv6_inode_drop_data(struct sv6_inode *inode);
/* Installs a new file (its one reference goes to the slot): fd or -EMFILE. */
int sv6_install(struct sv6_proc *p, struct sv6_file *f, bool anyfd);
/* Inside an EBR section: the file at fd, or NULL. */
struct sv6_file *sv6_file_at(struct sv6_proc *p, int fd);
/* Fork-style spawn: the child gets every mapping of the parent. */
void sv6_vm_copy(struct sv6_proc *parent, struct sv6_proc *child);
/* Frees every mapping at once: sv6_proc_destroy, when no other thread uses p. */
void sv6_vm_destroy(struct sv6_proc *p);

#endif
