/* fs.c - names, files, pipes and sockets (see sv6.h, sv6_impl.h).
 *
 * Each public call is one EBR section around a static do_* function, so what
 * the call finds stays allocated until it returns (see sv6_impl.h). */
#include "sv6_impl.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

static void truncate_to_zero(struct sv6_inode *inode);

/* ------------------------------------------------------------ names */

static void add_nlink(struct sv6_world *w, struct sv6_inode *inode, int delta)
{
    if (w->shared_nlink)
        atomic_fetch_add(&inode->shared_nlink, delta);
    else
        refcache_add(&w->rc, &inode->nlink, delta);
}

static uint64_t read_nlink(struct sv6_world *w, struct sv6_inode *inode)
{
    return (uint64_t)(w->shared_nlink ? atomic_load(&inode->shared_nlink)
                                      : refcache_read(&w->rc, &inode->nlink));
}

static int do_open(struct sv6_proc *p, const char *name, int flags)
{
    struct sv6_world *w = p->world;
    struct sv6_inode *inode;
    for (;;) {
        inode = dir_lookup(&w->root, name);
        if (inode) {
            if ((flags & O_CREAT) && (flags & O_EXCL))
                return -EEXIST;
            refcache_inc(&w->rc, &inode->ref); /* its entry's reference counts */
            /* Truncating an empty file writes nothing: the idempotent update
             * would conflict with every reader of the length (lseek, read). */
            if ((flags & O_TRUNC) && sv6_inode_length_reaching(inode, 1) != 0)
                truncate_to_zero(inode);
            break;
        }
        if (!(flags & O_CREAT))
            return -ENOENT;
        inode = sv6_new_inode(w);
        int inserted = dir_insert(&w->root, name, inode);
        if (inserted == 0)
            break;
        /* Never published: dropping both references frees it at a tick. */
        refcache_add(&w->rc, &inode->ref, -2);
        if (inserted != -EEXIST || (flags & O_EXCL))
            return inserted;
        /* Another thread created the name meanwhile: open that one. */
    }
    struct sv6_file *f = sv6_new_file(w, FILE_INODE);
    f->inode = inode;
    return sv6_install(p, f, flags & SV6_O_ANYFD);
}

int sv6_open(struct sv6_proc *p, const char *name, int flags)
{
    ebr_enter();
    int result = do_open(p, name, flags);
    ebr_exit();
    return result;
}

static int do_link(struct sv6_proc *p, const char *old, const char *new_name)
{
    struct sv6_world *w = p->world;
    struct sv6_inode *inode = dir_lookup(&w->root, old);
    if (!inode)
        return -ENOENT;
    if (dir_lookup(&w->root, new_name))
        return -EEXIST;
    refcache_inc(&w->rc, &inode->ref); /* for the new entry */
    int result = dir_insert(&w->root, new_name, inode);
    if (result == 0)
        add_nlink(w, inode, 1);
    else
        refcache_dec(&w->rc, &inode->ref);
    return result;
}

int sv6_link(struct sv6_proc *p, const char *old, const char *new_name)
{
    ebr_enter();
    int result = do_link(p, old, new_name);
    ebr_exit();
    return result;
}

int sv6_unlink(struct sv6_proc *p, const char *name)
{
    struct sv6_world *w = p->world;
    ebr_enter();
    void *old;
    int result = dir_remove(&w->root, name, &old);
    if (result == 0) /* the entry's reference goes when the entry is freed */
        add_nlink(w, old, -1);
    ebr_exit();
    return result;
}

int sv6_rename(struct sv6_proc *p, const char *src, const char *dst)
{
    struct sv6_world *w = p->world;
    ebr_enter();
    void *moved, *replaced;
    int result = dir_rename(&w->root, src, dst, &moved, &replaced);
    if (result == 0 && replaced) /* dst named it; now it has one name fewer */
        add_nlink(w, replaced, -1);
    ebr_exit();
    return result;
}

static void fill_inode_stat(struct sv6_world *w, struct sv6_inode *inode, unsigned mask,
                            struct sv6_stat *st)
{
    st->mask = mask;
    st->ino = mask & SV6_STATX_INO ? inode->ino : 0;
    /* Only when asked: reading the link count sums every core's cache. */
    st->nlink = mask & SV6_STATX_NLINK ? read_nlink(w, inode) : 0;
    st->size = mask & SV6_STATX_SIZE ? sv6_inode_length(inode) : 0;
}

int sv6_stat(struct sv6_proc *p, const char *name, struct sv6_stat *st)
{
    ebr_enter();
    struct sv6_inode *inode = dir_lookup(&p->world->root, name);
    if (inode)
        fill_inode_stat(p->world, inode, SV6_STATX_ALL, st);
    ebr_exit();
    return inode ? 0 : -ENOENT;
}

/* ------------------------------------------------------------ descriptors */

static int do_fstatx(struct sv6_proc *p, int fd, unsigned mask, struct sv6_stat *st)
{
    struct sv6_file *f = sv6_file_at(p, fd);
    if (!f)
        return -EBADF;
    if (f->kind == FILE_INODE) {
        fill_inode_stat(p->world, f->inode, mask, st);
        return 0;
    }
    /* Pipes and sockets: one name-less object with one link. */
    st->mask = mask;
    st->ino = mask & SV6_STATX_INO ? (f->pipe ? f->pipe->ino : f->sock_ino) : 0;
    st->nlink = mask & SV6_STATX_NLINK ? 1 : 0;
    st->size = 0;
    return 0;
}

int sv6_fstatx(struct sv6_proc *p, int fd, unsigned mask, struct sv6_stat *st)
{
    ebr_enter();
    int result = do_fstatx(p, fd, mask, st);
    ebr_exit();
    return result;
}

int sv6_fstat(struct sv6_proc *p, int fd, struct sv6_stat *st)
{
    return sv6_fstatx(p, fd, SV6_STATX_ALL, st);
}

/* Under off_lock: a peek that saw the count unchanged saw no change of off. */
static void set_offset(struct sv6_file *f, uint64_t off)
{
    atomic_fetch_add(&f->off_changes, 1);
    atomic_store(&f->off, off);
    atomic_fetch_add(&f->off_changes, 1);
}

static off_t do_lseek(struct sv6_proc *p, int fd, off_t off, int whence)
{
    struct sv6_file *f = sv6_file_at(p, fd);
    if (!f)
        return -EBADF;
    if (f->kind != FILE_INODE)
        return -ESPIPE;
    /* A seek below offset 0 fails at the moment the base was read, without the
     * lock: a failing lseek writes nothing, and neither does one that stays. */
    off_t seen = whence == SEEK_SET   ? 0
                 : whence == SEEK_CUR ? (off_t)atomic_load(&f->off)
                 : whence == SEEK_END ? (off_t)sv6_inode_length(f->inode)
                                      : -1;
    if (seen < 0 || seen + off < 0)
        return -EINVAL;
    /* Already there (a seek to the current offset): nothing to write either. */
    if ((uint64_t)(seen + off) == atomic_load(&f->off))
        return seen + off;
    pthread_mutex_lock(&f->off_lock);
    off_t base = whence == SEEK_SET   ? 0
                 : whence == SEEK_CUR ? (off_t)f->off
                 : whence == SEEK_END ? (off_t)sv6_inode_length(f->inode)
                                      : -1;
    off_t result = -EINVAL;
    if (base >= 0 && base + off >= 0) {
        set_offset(f, (uint64_t)(base + off));
        result = base + off;
    }
    pthread_mutex_unlock(&f->off_lock);
    return result;
}

off_t sv6_lseek(struct sv6_proc *p, int fd, off_t off, int whence)
{
    ebr_enter();
    off_t result = do_lseek(p, fd, off, whence);
    ebr_exit();
    return result;
}

int sv6_close(struct sv6_proc *p, int fd)
{
    struct sv6_file *f = fdtable_remove(&p->fds, fd);
    if (!f)
        return -EBADF;
    refcache_dec(&p->world->rc, &f->ref);
    return 0;
}

/* ------------------------------------------------------------ file data */

/* One page of a file, never changed once published: a writer puts a changed
 * copy in its place, so readers copy it without a lock. */
struct file_page {
    struct ebr_node ebr;
    unsigned char bytes[SV6_PAGE_SIZE];
};

static void page_free(struct ebr_node *node)
{
    free(SV6_CONTAINER_OF(node, struct file_page, ebr));
}

static void page_free_now(void *value, void *arg)
{
    (void)arg;
    page_free(&((struct file_page *)value)->ebr);
}

void sv6_inode_drop_data(struct sv6_inode *inode)
{
    radix_destroy(&inode->pages, page_free_now, NULL);
}

/* How many of the n bytes at off lie below length. */
static size_t bytes_inside(uint64_t length, uint64_t off, size_t n)
{
    return off >= length ? 0 : (length - off < n ? (size_t)(length - off) : n);
}

/* Calls fn on each page's part of the bytes [off, off + n). */
static void each_page_part(uint64_t off, size_t n, unsigned char *buf,
                           void (*fn)(struct sv6_inode *, uint64_t page, size_t in_page,
                                      unsigned char *part, size_t len),
                           struct sv6_inode *inode)
{
    while (n > 0) {
        size_t in_page = off % SV6_PAGE_SIZE;
        size_t len = SV6_PAGE_SIZE - in_page < n ? SV6_PAGE_SIZE - in_page : n;
        fn(inode, off / SV6_PAGE_SIZE, in_page, buf, len);
        off += len;
        buf += len;
        n -= len;
    }
}

static void page_read(struct sv6_inode *inode, uint64_t page, size_t in_page,
                      unsigned char *part, size_t len)
{
    struct file_page *found = radix_get(&inode->pages, page);
    if (found)
        memcpy(part, found->bytes + in_page, len);
    else
        memset(part, 0, len); /* a hole */
}

/* A changed copy replaces the page only if the page is still the one copied,
 * so of two writers of one page neither loses the other's bytes.  Bytes the
 * page (or a hole's zeros) already holds are not written again, as anonymous
 * pages do: such a write publishes nothing. */
static void page_write(struct sv6_inode *inode, uint64_t page, size_t in_page,
                       unsigned char *part, size_t len)
{
    struct file_page *fresh = NULL;
    for (;;) {
        struct file_page *old = radix_get(&inode->pages, page);
        if (sv6_page_holds(old ? old->bytes : NULL, in_page, part, len)) {
            free(fresh);
            return;
        }
        if (!fresh && !(fresh = malloc(sizeof *fresh)))
            abort();
        if (len < SV6_PAGE_SIZE) {
            if (old)
                memcpy(fresh->bytes, old->bytes, SV6_PAGE_SIZE);
            else
                memset(fresh->bytes, 0, SV6_PAGE_SIZE);
        }
        memcpy(fresh->bytes + in_page, part, len);
        if (radix_replace(&inode->pages, page, old, fresh)) {
            if (old)
                ebr_retire(&old->ebr, page_free);
            return;
        }
    }
}

/* need, or less: the largest length anyone may need to see (off + n). */
static uint64_t saturating_end(uint64_t off, size_t n)
{
    return n > UINT64_MAX - off ? UINT64_MAX : off + n;
}

/* A length line (base or a core's end) holds an end and the truncation
 * generation it was written in; an end of an earlier generation counts as 0.
 * So a truncation writes no length line, and a call that finds every line's
 * end, whatever its generation, at or below its offset knows that it lies past
 * the end without reading what a truncation writes. */
#define END_BITS 49 /* ends up to SV6_FILE_MAX = 2^48 */
#define END_MASK ((1ull << END_BITS) - 1)
#define GENERATIONS (1u << (64 - END_BITS))

static uint64_t line_end(uint64_t line)
{
    return line & END_MASK;
}

static uint64_t make_line(uint64_t end, unsigned generation)
{
    return (uint64_t)generation << END_BITS | end;
}

/* The generation of a truncation count that is even (no truncation running). */
static unsigned generation_of(uint64_t truncations)
{
    return (unsigned)(truncations / 2 % GENERATIONS);
}

static uint64_t valid_end(uint64_t line, unsigned generation)
{
    return line >> END_BITS == generation ? line_end(line) : 0;
}

/* The i-th length line in reading order: base (only the tick writes it, and
 * the truncation where generations wrap around), the caller's core's end (only
 * its writers write it), then the other cores' ends. */
static _Atomic uint64_t *length_line(struct sv6_inode *inode, unsigned own, unsigned i)
{
    if (i == 0)
        return &inode->base;
    if (i == 1)
        return &inode->ends[own].end;
    unsigned c = i - 2;
    return &inode->ends[c >= own ? c + 1 : c].end;
}

#define LENGTH_LINES (SV6_NCORES + 1)

/* With no truncation running, in generation: the length if below need, else
 * a length >= need.  A proof of "length >= need" found early reads nothing
 * that a write past the end on another core writes. */
static uint64_t length_reaching(struct sv6_inode *inode, uint64_t need, unsigned generation)
{
    unsigned own = sv6_core();
    uint64_t length = 0;
    for (unsigned i = 0; i < LENGTH_LINES && length < need; i++) {
        uint64_t end = valid_end(atomic_load(length_line(inode, own, i)), generation);
        length = end > length ? end : length;
    }
    return length;
}

/* Without reading the truncation count: a bound >= the length at some moment
 * of the call when every line's end is at or below limit, else UINT64_MAX
 * (stopping at the first line above it).  A line's end only drops when its
 * core writes it in a new generation, after a truncation that made the length
 * 0 during the call, so the largest end read bounds the length then. */
static uint64_t length_bound_below(struct sv6_inode *inode, uint64_t limit)
{
    unsigned own = sv6_core();
    uint64_t bound = 0;
    for (unsigned i = 0; i < LENGTH_LINES; i++) {
        uint64_t end = line_end(atomic_load(length_line(inode, own, i)));
        if (end > limit)
            return UINT64_MAX;
        bound = end > bound ? end : bound;
    }
    return bound;
}

/* Reads the length as length_reaching(need) and, when buf is given, the bytes
 * [off, off + n) below it (zeros past it), again until no truncation
 * overlapped.  Every valid end only grows within a generation, so a proof of
 * "length >= need" holds from the moment it was read until the next
 * truncation.  A read whose whole page lies past the end returns a bound at
 * or below that page's start (length_bound_below) without reading the
 * truncation count. */
static uint64_t read_consistent(struct sv6_inode *inode, void *buf, size_t n, uint64_t off,
                                uint64_t need)
{
    if (buf) {
        uint64_t bound = length_bound_below(inode, off / SV6_PAGE_SIZE * SV6_PAGE_SIZE);
        if (bound != UINT64_MAX) {
            memset(buf, 0, n);
            return bound;
        }
    }
    for (;;) {
        uint64_t truncations = atomic_load(&inode->truncations);
        if (truncations % 2 == 0) {
            uint64_t length = length_reaching(inode, need, generation_of(truncations));
            if (buf) {
                size_t inside = bytes_inside(length, off, n);
                each_page_part(off, inside, buf, page_read, inode);
                memset((unsigned char *)buf + inside, 0, n - inside);
            }
            if (atomic_load(&inode->truncations) == truncations)
                return length;
        }
        sched_yield(); /* a truncation ran meanwhile: what was read may be gone */
    }
}

uint64_t sv6_inode_length(struct sv6_inode *inode)
{
    return read_consistent(inode, NULL, 0, 0, UINT64_MAX);
}

uint64_t sv6_inode_length_reaching(struct sv6_inode *inode, uint64_t need)
{
    return read_consistent(inode, NULL, 0, 0, need);
}

uint64_t sv6_inode_read(struct sv6_inode *inode, void *buf, size_t n, uint64_t off)
{
    return read_consistent(inode, buf, n, off, saturating_end(off, n));
}

bool sv6_inode_past_end(struct sv6_inode *inode, uint64_t start)
{
    /* As read_consistent: with every line's end at or below start, the
     * length was at most start at some moment, found without reading the
     * truncation count that an O_TRUNC writes. */
    return length_bound_below(inode, start) != UINT64_MAX ||
           sv6_inode_length_reaching(inode, start + 1) <= start;
}

/* The generation of a caller that holds a writer lock (no truncation runs). */
static unsigned writer_generation(struct sv6_inode *inode)
{
    return generation_of(atomic_load(&inode->truncations));
}

/* Under the core's writer lock: the end of a write past the length goes on
 * the core's own line, and the inode on the core's grown list for the tick. */
static void grow_end(struct sv6_inode *inode, unsigned core, uint64_t new_end,
                     unsigned generation)
{
    struct inode_end *own = &inode->ends[core];
    if (new_end <= valid_end(atomic_load(&own->end), generation))
        return;
    atomic_store(&own->end, make_line(new_end, generation));
    if (own->queued)
        return;
    own->queued = true;
    struct sv6_world *w = inode->world;
    refcache_inc(&w->rc, &inode->ref); /* the list's, dropped by the tick */
    struct grown_list *list = &w->grown[core];
    pthread_mutex_lock(&list->lock);
    own->next_grown = list->head;
    list->head = inode;
    pthread_mutex_unlock(&list->lock);
}

uint64_t sv6_inode_write(struct sv6_inode *inode, const void *buf, size_t n, uint64_t off,
                         bool extend)
{
    unsigned core = sv6_core();
    pthread_mutex_lock(&inode->writers[core].lock);
    /* No truncation runs while the lock is held, so the length reads once. */
    unsigned generation = writer_generation(inode);
    uint64_t length = extend ? 0 : length_reaching(inode, off + n, generation);
    size_t count = extend ? n : bytes_inside(length, off, n);
    /* page_write only reads the bytes it is given. */
    each_page_part(off, count, (unsigned char *)buf, page_write, inode);
    /* After the pages: a reader that sees the new end finds them.  A write
     * that base or the core's own end already covers writes no end; it reads
     * no other core's end, so it shares nothing with their writes past the
     * end. */
    if (extend && valid_end(atomic_load(&inode->base), generation) < off + count)
        grow_end(inode, core, off + count, generation);
    pthread_mutex_unlock(&inode->writers[core].lock);
    return length;
}

/* Holding every writer lock: base becomes the length, so later calls find
 * their proof there, and the inode leaves core's grown list. */
static void fold_ends(struct sv6_inode *inode, unsigned core)
{
    for (unsigned c = 0; c < SV6_NCORES; c++)
        pthread_mutex_lock(&inode->writers[c].lock);
    unsigned generation = writer_generation(inode);
    uint64_t line = make_line(length_reaching(inode, UINT64_MAX, generation), generation);
    if (line != atomic_load(&inode->base))
        atomic_store(&inode->base, line);
    inode->ends[core].queued = false;
    for (unsigned c = SV6_NCORES; c-- > 0;)
        pthread_mutex_unlock(&inode->writers[c].lock);
}

void sv6_fold_grown_lengths(struct sv6_world *w)
{
    for (unsigned core = 0; core < SV6_NCORES; core++) {
        struct grown_list *list = &w->grown[core];
        pthread_mutex_lock(&list->lock);
        struct sv6_inode *inode = list->head;
        list->head = NULL;
        pthread_mutex_unlock(&list->lock);
        while (inode) {
            /* Read before it leaves the list: a writer may queue it again. */
            struct sv6_inode *next = inode->ends[core].next_grown;
            fold_ends(inode, core);
            refcache_dec(&w->rc, &inode->ref);
            inode = next;
        }
    }
}

static void drop_page(uint64_t page, void *value, void *arg)
{
    struct sv6_inode *inode = arg;
    if (radix_replace(&inode->pages, page, value, NULL))
        ebr_retire(&((struct file_page *)value)->ebr, page_free);
}

/* Inside an EBR section: no writer runs meanwhile (every core's writer lock
 * is held) and readers that overlap it read again. */
static void truncate_to_zero(struct sv6_inode *inode)
{
    for (unsigned c = 0; c < SV6_NCORES; c++)
        pthread_mutex_lock(&inode->writers[c].lock);
    uint64_t truncations = atomic_fetch_add(&inode->truncations, 1) + 1;
    /* The new generation makes every length line's end count as 0.  Only
     * when generations wrap around are the lines cleared, so that no line of
     * an old generation can pass for one of the new. */
    if (generation_of(truncations + 1) == 0)
        for (unsigned i = 0; i < LENGTH_LINES; i++)
            atomic_store(length_line(inode, 0, i), 0);
    radix_each(&inode->pages, drop_page, inode);
    atomic_fetch_add(&inode->truncations, 1);
    for (unsigned c = SV6_NCORES; c-- > 0;)
        pthread_mutex_unlock(&inode->writers[c].lock);
}

/* Whether f's offset lies at or past the end of its file at some moment of the
 * call, found without off_lock: a read there returns 0 and writes nothing (not
 * the lock either), so two of them, or one and an lseek that fails or stays,
 * share no written byte.  False when it may not (the read takes the lock). */
static bool offset_past_end(struct sv6_file *f)
{
    uint64_t changes = atomic_load(&f->off_changes);
    uint64_t off = atomic_load(&f->off);
    return changes % 2 == 0 && length_bound_below(f->inode, off) != UINT64_MAX &&
           atomic_load(&f->off_changes) == changes;
}

/* Read through a file description: the bytes read. */
static ssize_t inode_read(struct sv6_inode *inode, void *buf, size_t n, uint64_t off)
{
    return (ssize_t)bytes_inside(sv6_inode_read(inode, buf, n, off), off, n);
}

/* Written through a file description: all n bytes, or -EFBIG. */
static ssize_t inode_write(struct sv6_inode *inode, const void *buf, size_t n, uint64_t off)
{
    if (n == 0) /* changes nothing, wherever it is */
        return 0;
    if (off > SV6_FILE_MAX || n > SV6_FILE_MAX - off)
        return -EFBIG;
    sv6_inode_write(inode, buf, n, off, true);
    return (ssize_t)n;
}

/* One write's bytes.  next is on a line of its own: the writer that appends
 * after the last chunk writes only it, while a reader of that chunk reads its
 * bytes and writes its taken. */
struct pipe_chunk {
    struct ebr_node ebr;
    SV6_ALIGNED struct pipe_chunk *_Atomic next;
    SV6_ALIGNED size_t len;
    size_t taken; /* bytes read so far; under read_lock */
    unsigned char bytes[];
};

static struct pipe_chunk *chunk_new(const void *bytes, size_t len)
{
    struct pipe_chunk *c = sv6_zalloc(sizeof *c + len);
    c->len = len;
    if (len)
        memcpy(c->bytes, bytes, len);
    return c;
}

static void chunk_free(struct ebr_node *node)
{
    free(SV6_CONTAINER_OF(node, struct pipe_chunk, ebr));
}

static struct sv6_pipe *pipe_create(struct sv6_world *w)
{
    struct sv6_pipe *pipe = sv6_zalloc(sizeof *pipe);
    pthread_mutex_init(&pipe->read_lock, NULL);
    pthread_mutex_init(&pipe->write_lock, NULL);
    pipe->tail = chunk_new(NULL, 0); /* the front: read, nothing after it */
    atomic_init(&pipe->head, pipe->tail);
    pipe->ino = sv6_new_ino(w);
    atomic_init(&pipe->ends, 2);
    return pipe;
}

void sv6_pipe_destroy(struct sv6_pipe *pipe)
{
    struct pipe_chunk *c = atomic_load(&pipe->head);
    while (c) {
        struct pipe_chunk *next = atomic_load(&c->next);
        chunk_free(&c->ebr);
        c = next;
    }
    pthread_mutex_destroy(&pipe->read_lock);
    pthread_mutex_destroy(&pipe->write_lock);
    free(pipe);
}

static ssize_t pipe_read(struct sv6_pipe *pipe, void *buf, size_t n)
{
    /* Empty: -EAGAIN without the lock, so reads of an empty pipe write nothing
     * (the front chunk stays allocated until the section ends). */
    if (n == 0 || !atomic_load(&atomic_load(&pipe->head)->next))
        return n == 0 ? 0 : -EAGAIN;
    pthread_mutex_lock(&pipe->read_lock);
    size_t count = 0;
    struct pipe_chunk *front = atomic_load(&pipe->head), *c;
    while (count < n && (c = atomic_load(&front->next))) {
        size_t take = c->len - c->taken < n - count ? c->len - c->taken : n - count;
        memcpy((unsigned char *)buf + count, c->bytes + c->taken, take);
        c->taken += take;
        count += take;
        if (c->taken < c->len)
            break;
        /* c is read: it becomes the front, and the old front, which no writer
         * reaches any more (c follows it), goes after a grace period. */
        atomic_store(&pipe->head, c);
        ebr_retire(&front->ebr, chunk_free);
        front = c;
    }
    pthread_mutex_unlock(&pipe->read_lock);
    return count ? (ssize_t)count : -EAGAIN; /* never blocks, as in the model */
}

static ssize_t pipe_write(struct sv6_pipe *pipe, const void *buf, size_t n)
{
    if (n == 0)
        return 0;
    struct pipe_chunk *c = chunk_new(buf, n);
    pthread_mutex_lock(&pipe->write_lock);
    /* Published with its bytes: a reader that finds it reads them. */
    atomic_store(&pipe->tail->next, c);
    pipe->tail = c;
    pthread_mutex_unlock(&pipe->write_lock);
    return (ssize_t)n;
}

static ssize_t do_read(struct sv6_proc *p, int fd, void *buf, size_t n)
{
    struct sv6_file *f = sv6_file_at(p, fd);
    if (!f)
        return -EBADF;
    switch (f->kind) {
    case FILE_PIPE_READ:
        return pipe_read(f->pipe, buf, n);
    case FILE_PIPE_WRITE:
        return -EBADF;
    case FILE_SOCKET:
        return usock_recv(f->sock, buf, n);
    case FILE_INODE:
        break;
    }
    if (n > 0 && offset_past_end(f))
        return 0;
    pthread_mutex_lock(&f->off_lock);
    ssize_t count = inode_read(f->inode, buf, n, f->off);
    if (count > 0)
        set_offset(f, f->off + (uint64_t)count);
    pthread_mutex_unlock(&f->off_lock);
    return count;
}

ssize_t sv6_read(struct sv6_proc *p, int fd, void *buf, size_t n)
{
    ebr_enter();
    ssize_t result = do_read(p, fd, buf, n);
    ebr_exit();
    return result;
}

static ssize_t do_write(struct sv6_proc *p, int fd, const void *buf, size_t n)
{
    struct sv6_file *f = sv6_file_at(p, fd);
    if (!f)
        return -EBADF;
    switch (f->kind) {
    case FILE_PIPE_WRITE:
        return pipe_write(f->pipe, buf, n);
    case FILE_PIPE_READ:
        return -EBADF;
    case FILE_SOCKET:
        return usock_send(f->sock, buf, n);
    case FILE_INODE:
        break;
    }
    pthread_mutex_lock(&f->off_lock);
    ssize_t count = inode_write(f->inode, buf, n, f->off);
    if (count > 0)
        set_offset(f, f->off + (uint64_t)count);
    pthread_mutex_unlock(&f->off_lock);
    return count;
}

ssize_t sv6_write(struct sv6_proc *p, int fd, const void *buf, size_t n)
{
    ebr_enter();
    ssize_t result = do_write(p, fd, buf, n);
    ebr_exit();
    return result;
}

/* pread and pwrite: the file at fd, or why there is none to use. */
static ssize_t positional_file(struct sv6_proc *p, int fd, off_t off, struct sv6_file **f)
{
    *f = sv6_file_at(p, fd);
    if (!*f)
        return -EBADF;
    if ((*f)->kind != FILE_INODE)
        return -ESPIPE;
    return off < 0 ? -EINVAL : 0;
}

ssize_t sv6_pread(struct sv6_proc *p, int fd, void *buf, size_t n, off_t off)
{
    ebr_enter();
    struct sv6_file *f;
    ssize_t result = positional_file(p, fd, off, &f);
    if (result == 0)
        result = inode_read(f->inode, buf, n, (uint64_t)off);
    ebr_exit();
    return result;
}

ssize_t sv6_pwrite(struct sv6_proc *p, int fd, const void *buf, size_t n, off_t off)
{
    ebr_enter();
    struct sv6_file *f;
    ssize_t result = positional_file(p, fd, off, &f);
    if (result == 0)
        result = inode_write(f->inode, buf, n, (uint64_t)off);
    ebr_exit();
    return result;
}

/* ------------------------------------------------------------ pipes, sockets */

int sv6_pipe(struct sv6_proc *p, int fds[2])
{
    struct sv6_world *w = p->world;
    struct sv6_pipe *pipe = pipe_create(w);
    struct sv6_file *reader = sv6_new_file(w, FILE_PIPE_READ);
    struct sv6_file *writer = sv6_new_file(w, FILE_PIPE_WRITE);
    reader->pipe = writer->pipe = pipe;
    fds[0] = sv6_install(p, reader, false);
    fds[1] = sv6_install(p, writer, false);
    if (fds[1] < 0) {
        if (fds[0] >= 0)
            sv6_close(p, fds[0]);
        return fds[1];
    }
    return fds[0] < 0 ? fds[0] : 0;
}

int sv6_socket(struct sv6_proc *p, bool unordered, int flags)
{
    struct sv6_file *f = sv6_new_file(p->world, FILE_SOCKET);
    f->sock = sv6_zalloc(sizeof *f->sock);
    usock_init(f->sock, !unordered);
    f->sock_ino = sv6_new_ino(p->world);
    return sv6_install(p, f, flags & SV6_O_ANYFD);
}

static ssize_t socket_call(struct sv6_proc *p, int fd, void *buf, size_t n, bool send)
{
    ebr_enter();
    struct sv6_file *f = sv6_file_at(p, fd);
    ssize_t result = !f                       ? -EBADF
                     : f->kind != FILE_SOCKET ? -ENOTSOCK
                     : send                   ? usock_send(f->sock, buf, n)
                                              : usock_recv(f->sock, buf, n);
    ebr_exit();
    return result;
}

ssize_t sv6_send(struct sv6_proc *p, int fd, const void *buf, size_t n)
{
    return socket_call(p, fd, (void *)buf, n, true);
}

ssize_t sv6_recv(struct sv6_proc *p, int fd, void *buf, size_t n)
{
    return socket_call(p, fd, buf, n, false);
}
