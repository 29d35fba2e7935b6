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
            if (flags & O_TRUNC)
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
    sv6_lock(&f->off_lock);
    off_t base = whence == SEEK_SET   ? 0
                 : whence == SEEK_CUR ? (off_t)f->off
                 : whence == SEEK_END ? (off_t)sv6_inode_length(f->inode)
                                      : -1;
    off_t result = -EINVAL;
    if (base >= 0 && base + off >= 0) {
        set_offset(f, (uint64_t)(base + off));
        result = base + off;
    }
    sv6_unlock(&f->off_lock);
    return result;
}

off_t sv6_lseek(struct sv6_proc *p, int fd, off_t off, int whence)
{
    ebr_enter();
    off_t result = do_lseek(p, fd, off, whence);
    ebr_exit();
    return result;
}

/* A regular file that its own thread opened with O_ANYFD and closes, never read
 * or copied by another thread, goes at once (fdtable.h): its count is its fd's
 * reference alone.  Pipes and sockets keep the grace period: other threads
 * reach their ends through more than the fd. */
int sv6_close(struct sv6_proc *p, int fd)
{
    bool alone;
    struct sv6_file *f = fdtable_remove(&p->fds, fd, &alone);
    if (!f)
        return -EBADF;
    if (alone && f->kind == FILE_INODE && !atomic_load(&f->copied))
        sv6_file_release_now(f);
    else
        refcache_dec(&p->world->rc, &f->ref);
    return 0;
}

/* ------------------------------------------------------------ file data */

/* No writer writes into it any more (killed by a truncation, or the inode is
 * gone): bytes is the page's last copy. */
static void holder_free(struct ebr_node *node)
{
    struct page_holder *holder = SV6_CONTAINER_OF(node, struct page_holder, ebr);
    sv6_page_copy_free(&atomic_load(&holder->bytes)->ebr);
    sv6_free_lines(holder, sizeof *holder);
}

static void holder_free_now(void *value, void *arg)
{
    (void)arg;
    holder_free(&((struct page_holder *)value)->ebr);
}

void sv6_inode_drop_data(struct sv6_inode *inode)
{
    radix_destroy(&inode->pages, holder_free_now, NULL);
}

/* ------------------------------------------------------------ truncation
 *
 * An O_TRUNC writes only its own core's truncation stamp, so two of them on
 * one file share no written line.  Every page holder carries the stamp of the
 * write that made it, and is live while its stamp is above every truncation
 * stamp (their largest is the *cut*): a dead holder reads as an empty slot.
 * A write stamps its pages cut + 1 and leaves that stamp in its core's write
 * clock; a truncation sets its stamp one above every core's clock, so it
 * kills every page written before it without touching a slot.
 *
 * A write and a truncation meet as Dekker's two threads do: the write marks
 * its core's clock running and then reads the stamps (the cut); the
 * truncation marks its stamp running and then reads the clocks.  So at least
 * one sees the other.  Either the write sees the truncation, under way (it
 * unmarks its clock, waits and starts again) or ended (its stamp is in the
 * cut): the write comes after it, treating what it killed as gone.  Or the
 * truncation sees the write running and waits for it to end: the write comes
 * before it, and everything it made or wrote into is stamped at most its
 * clock, so killed.
 * Hence the writes that run at any moment all write under one cut, and a
 * write's pages are all live or all dead.  A truncation happens when it
 * stores its stamp; readers read the cut before and after and read again
 * when it moved, as under a sequence lock. */

static uint64_t stamp_of(uint64_t word)
{
    return word / 2;
}

static bool running(uint64_t word)
{
    return word % 2 == 1;
}

/* The largest truncation stamp; *busy: whether a truncation is under way. */
static uint64_t truncation_cut(struct sv6_inode *inode, bool *busy)
{
    uint64_t cut = 0;
    *busy = false;
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        uint64_t word = atomic_load(&inode->truncation_stamps[c].word);
        cut = stamp_of(word) > cut ? stamp_of(word) : cut;
        *busy = *busy || running(word);
    }
    return cut;
}

static bool truncation_running(struct sv6_inode *inode)
{
    bool busy;
    truncation_cut(inode, &busy);
    return busy;
}

/* The pages as one call sees them: a holder stamped at or below cut is dead. */
struct page_view {
    struct sv6_inode *inode;
    uint64_t cut;
};

static struct page_holder *live_or_null(const struct page_view *view, struct page_holder *holder)
{
    return holder && holder->stamp > view->cut ? holder : NULL;
}

static struct page_holder *live_at(const struct page_view *view, uint64_t page)
{
    return live_or_null(view, radix_get(&view->inode->pages, page));
}

/* The live holder of the smallest page >= *page (*page set to it), or NULL.
 * It reads only the slots from *page up. */
static struct page_holder *next_live(const struct page_view *view, uint64_t *page)
{
    struct page_holder *holder;
    while ((holder = radix_next(&view->inode->pages, page)) && !live_or_null(view, holder))
        ++*page;
    return holder;
}

/* Under the core's writer lock: marks the core's clock running and returns the
 * cut that the write runs under, read after the mark and with no truncation
 * under way. */
static uint64_t write_begin(struct sv6_inode *inode, unsigned core)
{
    _Atomic uint64_t *clock = &inode->writers[core].clock;
    uint64_t idle = atomic_load(clock);
    for (;;) {
        atomic_store(clock, idle + 1);
        bool busy;
        uint64_t cut = truncation_cut(inode, &busy);
        if (!busy)
            return cut;
        atomic_store(clock, idle); /* a truncation is under way: it goes first */
        while (truncation_running(inode))
            sched_yield();
    }
}

/* For a core's first write after a truncation: empties a slot that holds a
 * dead holder, which is freed after a grace period (no write of the cut
 * writes into it; a reader that found it reads again, the cut having moved). */
static void sweep_dead(uint64_t page, void *value, void *arg)
{
    const struct page_view *view = arg;
    struct page_holder *holder = value;
    if (!live_or_null(view, holder) && radix_replace(&view->inode->pages, page, holder, NULL))
        ebr_retire(&holder->ebr, holder_free);
}

/* Whether the file has no filled slot from page first up: its length is at or
 * below first's start.  It reads no slot of a smaller page, so it shares
 * nothing with a write that ends at or below that start.  A slot emptied by
 * a sweep held a dead holder, so slots found empty were all empty, or dead,
 * at one moment of the call (right after the last truncation that ended
 * meanwhile, if one did): pages come only by writes until a truncation. */
static bool no_page_from(struct sv6_inode *inode, uint64_t first)
{
    return radix_next(&inode->pages, &first) == NULL;
}

/* O_TRUNC: kills every page written before it, writing only its own core's
 * stamp (a second truncation on the same core waits while it runs).  A file
 * with no filled slot is empty and its truncation writes nothing: the
 * idempotent update would conflict with every reader of the length (lseek,
 * read).  One with dead holders only is empty too, and truncated again
 * harmlessly. */
static void truncate_to_zero(struct sv6_inode *inode)
{
    if (no_page_from(inode, 0))
        return;
    _Atomic uint64_t *mine = &inode->truncation_stamps[sv6_core()].word;
    uint64_t word = atomic_load(mine);
    while (running(word) || !atomic_compare_exchange_weak(mine, &word, word + 1)) {
        sched_yield();
        word = atomic_load(mine);
    }
    uint64_t stamp = stamp_of(word);
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        uint64_t clock;
        while (running(clock = atomic_load(&inode->writers[c].clock)))
            sched_yield(); /* a write that began before this truncation: it goes first */
        stamp = stamp_of(clock) + 1 > stamp ? stamp_of(clock) + 1 : stamp;
    }
    atomic_store(mine, 2 * stamp);
}

/* ------------------------------------------------------------ pages */

/* How many of the n bytes at off lie below length. */
static size_t bytes_inside(uint64_t length, uint64_t off, size_t n)
{
    return off >= length ? 0 : (length - off < n ? (size_t)(length - off) : n);
}

/* Calls fn on each page's part of the bytes [off, off + n). */
static void each_page_part(uint64_t off, size_t n, unsigned char *buf,
                           void (*fn)(const struct page_view *, uint64_t page, size_t in_page,
                                      unsigned char *part, size_t len),
                           const struct page_view *view)
{
    while (n > 0) {
        size_t in_page = off % SV6_PAGE_SIZE;
        size_t len = SV6_PAGE_SIZE - in_page < n ? SV6_PAGE_SIZE - in_page : n;
        fn(view, off / SV6_PAGE_SIZE, in_page, buf, len);
        off += len;
        buf += len;
        n -= len;
    }
}

static void page_read(const struct page_view *view, uint64_t page, size_t in_page,
                      unsigned char *part, size_t len)
{
    struct page_holder *holder = live_at(view, page);
    if (holder)
        memcpy(part, atomic_load(&holder->bytes)->bytes + in_page, len);
    else
        memset(part, 0, len); /* a hole */
}

/* Before a new page shows, its core's mark covers it under the write's stamp
 * (a mark of an older stamp is dead and starts again from this page): the
 * exact length never misses a page that a reader has seen. */
static void mark_page(const struct page_view *view, uint64_t page)
{
    struct page_mark *mark = &view->inode->marks[sv6_core()];
    uint64_t stamp = view->cut + 1;
    if (atomic_load(&mark->stamp) != stamp) {
        atomic_store(&mark->pages, page + 1);
        atomic_store(&mark->stamp, stamp);
    } else if (atomic_load(&mark->pages) <= page) {
        atomic_store(&mark->pages, page + 1);
    }
}

/* Under the caller's core's writer lock, between write_begin and the clock's
 * reset.  A changed copy replaces the bytes only if they are still the ones
 * copied, so of two writers of one page neither loses the other's bytes.  The
 * end grows after the bytes: a reader that finds the new end finds them.
 * Bytes the page already holds below its end are not written again (as
 * anonymous pages do): such a write publishes nothing.  Zeros into a hole are
 * a new page: telling a hole inside the file from one past its end would read
 * the slots above, which a write that grows the file fills.  A dead holder is
 * a hole: a new holder replaces it. */
static void page_write(const struct page_view *view, uint64_t page, size_t in_page,
                       unsigned char *part, size_t len)
{
    struct sv6_inode *inode = view->inode;
    struct page_copy *fresh = NULL;
    uint64_t end = in_page + len;
    for (;;) {
        struct page_holder *found = radix_get(&inode->pages, page);
        struct page_holder *holder = live_or_null(view, found);
        struct page_copy *old = holder ? atomic_load(&holder->bytes) : NULL;
        if (sv6_page_holds(old ? old->bytes : NULL, in_page, part, len) &&
            holder && atomic_load(&holder->end) >= end) {
            sv6_free_lines(fresh, sizeof *fresh);
            return;
        }
        if (!fresh)
            fresh = sv6_page_copy_alloc();
        if (len < SV6_PAGE_SIZE) {
            if (old)
                memcpy(fresh->bytes, old->bytes, SV6_PAGE_SIZE);
            else
                memset(fresh->bytes, 0, SV6_PAGE_SIZE);
        }
        memcpy(fresh->bytes + in_page, part, len);
        if (!holder) {
            mark_page(view, page);
            holder = sv6_zalloc(sizeof *holder);
            holder->stamp = view->cut + 1;
            atomic_init(&holder->end, end);
            atomic_init(&holder->bytes, fresh);
            if (radix_replace(&inode->pages, page, found, holder)) {
                if (found) /* dead: no writer of this cut writes into it */
                    ebr_retire(&found->ebr, holder_free);
                return;
            }
            sv6_free_lines(holder, sizeof *holder); /* another writer's page came first: copy that one */
            continue;
        }
        if (atomic_compare_exchange_strong(&holder->bytes, &old, fresh)) {
            ebr_retire(&old->ebr, sv6_page_copy_free);
            uint64_t seen = atomic_load(&holder->end);
            while (seen < end && !atomic_compare_exchange_weak(&holder->end, &seen, end))
                continue; /* seen is now the other writer's end */
            return;
        }
    }
}

/* need, or less: the largest length anyone may need to see (off + n). */
static uint64_t saturating_end(uint64_t off, size_t n)
{
    return n > UINT64_MAX - off ? UINT64_MAX : off + n;
}

/* The length as the live pages from page first up show it: first's start
 * when there is none (the length is at or below it), else the highest page's
 * end, or the first page's end that reaches need.  Pages only come and ends
 * only grow under one cut, so while the cut stays the highest page found was
 * the highest when its end was read, and what it returns was the length (or
 * at least need) then. */
static uint64_t length_from(const struct page_view *view, uint64_t first, uint64_t need)
{
    uint64_t length = first * SV6_PAGE_SIZE, page = first;
    struct page_holder *holder;
    bool found = false;
    while ((!found || length < need) && (holder = next_live(view, &page))) {
        length = page++ * SV6_PAGE_SIZE + atomic_load(&holder->end);
        found = true;
    }
    return length;
}

/* Reads the length as length_from(off's page, need) and, when buf is given,
 * the bytes [off, off + n) below it (zeros past it), again until the cut
 * stayed the same throughout.  With no filled slot from off's page up it
 * returns that page's start without reading the truncation stamps (see
 * no_page_from). */
static uint64_t read_consistent(struct sv6_inode *inode, void *buf, size_t n, uint64_t off,
                                uint64_t need)
{
    uint64_t first = off / SV6_PAGE_SIZE;
    if (no_page_from(inode, first)) {
        if (buf)
            memset(buf, 0, n);
        return first * SV6_PAGE_SIZE;
    }
    for (;;) {
        bool busy;
        struct page_view view = {inode, truncation_cut(inode, &busy)};
        uint64_t length = length_from(&view, first, need);
        if (buf) {
            size_t inside = bytes_inside(length, off, n);
            each_page_part(off, inside, buf, page_read, &view);
            memset((unsigned char *)buf + inside, 0, n - inside);
        }
        if (truncation_cut(inode, &busy) == view.cut)
            return length;
        sched_yield(); /* a truncation happened meanwhile: what was read may be gone */
    }
}

/* One past the highest page made under the cut (0: none). */
static uint64_t highest_mark(const struct page_view *view)
{
    uint64_t pages = 0;
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        const struct page_mark *mark = &view->inode->marks[c];
        if (atomic_load(&mark->stamp) <= view->cut)
            continue; /* set before a truncation */
        uint64_t mark_pages = atomic_load(&mark->pages);
        pages = mark_pages > pages ? mark_pages : pages;
    }
    return pages;
}

/* The exact length: the highest live page's end, found through the marks.
 * A page marked but not shown yet belongs to a write still running: then the
 * slots say what the length is. */
uint64_t sv6_inode_length(struct sv6_inode *inode)
{
    for (;;) {
        bool busy;
        struct page_view view = {inode, truncation_cut(inode, &busy)};
        uint64_t pages = highest_mark(&view);
        struct page_holder *top = pages ? live_at(&view, pages - 1) : NULL;
        uint64_t length = !pages ? 0
                          : top  ? (pages - 1) * SV6_PAGE_SIZE + atomic_load(&top->end)
                                 : length_from(&view, 0, UINT64_MAX);
        if (truncation_cut(inode, &busy) == view.cut)
            return length;
        sched_yield(); /* a truncation happened meanwhile */
    }
}

uint64_t sv6_inode_length_reaching(struct sv6_inode *inode, uint64_t need)
{
    return read_consistent(inode, NULL, 0, need ? need - 1 : 0, need);
}

uint64_t sv6_inode_read(struct sv6_inode *inode, void *buf, size_t n, uint64_t off)
{
    return read_consistent(inode, buf, n, off, saturating_end(off, n));
}

uint64_t sv6_inode_write(struct sv6_inode *inode, const void *buf, size_t n, uint64_t off,
                         bool extend)
{
    unsigned core = sv6_core();
    sv6_lock(&inode->writers[core].lock);
    _Atomic uint64_t *clock = &inode->writers[core].clock;
    uint64_t last = stamp_of(atomic_load(clock));
    struct page_view view = {inode, write_begin(inode, core)};
    /* This core's first write since a truncation frees what the truncation
     * killed and no write replaced since.  Once per core and truncation; a
     * file never truncated (every test state of scalecheck) has cut 0 and
     * never sweeps, so no write reads slots of other pages for it. */
    if (view.cut > 0 && last <= view.cut)
        radix_each(&inode->pages, sweep_dead, &view);
    /* The cut stays while the clock runs, so the length reads once.  A write
     * that extends reads no length: it writes only its own pages' slots and
     * ends, none of which a call past its end reads. */
    uint64_t length =
        extend ? 0 : length_from(&view, off / SV6_PAGE_SIZE, saturating_end(off, n));
    size_t count = extend ? n : bytes_inside(length, off, n);
    /* page_write only reads the bytes it is given. */
    each_page_part(off, count, (unsigned char *)buf, page_write, &view);
    atomic_store(clock, 2 * (view.cut + 1));
    sv6_unlock(&inode->writers[core].lock);
    return length;
}

/* Whether f's offset lies at or past the end of its file at some moment of the
 * call, found without off_lock (and, with no page from the offset's page up,
 * without the truncation stamps): a read there returns 0 and writes nothing
 * (not the lock either), so two of them, or one and an lseek that fails or
 * stays, share no written byte.  False when it may not (the read takes the
 * lock). */
static bool offset_past_end(struct sv6_file *f)
{
    uint64_t changes = atomic_load(&f->off_changes);
    uint64_t off = atomic_load(&f->off);
    return changes % 2 == 0 && sv6_inode_length_reaching(f->inode, off + 1) <= off &&
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
    struct pipe_chunk *c = SV6_CONTAINER_OF(node, struct pipe_chunk, ebr);
    sv6_free_lines(c, sizeof *c + c->len);
}

static struct sv6_pipe *pipe_create(struct sv6_world *w)
{
    struct sv6_pipe *pipe = sv6_zalloc(sizeof *pipe);
    sv6_lock_init(&pipe->read_lock);
    sv6_lock_init(&pipe->write_lock);
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
    sv6_free_lines(pipe, sizeof *pipe);
}

static ssize_t pipe_read(struct sv6_pipe *pipe, void *buf, size_t n)
{
    /* Empty: -EAGAIN without the lock, so reads of an empty pipe write nothing
     * (the front chunk stays allocated until the section ends). */
    if (n == 0 || !atomic_load(&atomic_load(&pipe->head)->next))
        return n == 0 ? 0 : -EAGAIN;
    sv6_lock(&pipe->read_lock);
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
    sv6_unlock(&pipe->read_lock);
    return count ? (ssize_t)count : -EAGAIN; /* never blocks, as in the model */
}

static ssize_t pipe_write(struct sv6_pipe *pipe, const void *buf, size_t n)
{
    if (n == 0)
        return 0;
    struct pipe_chunk *c = chunk_new(buf, n);
    sv6_lock(&pipe->write_lock);
    /* Published with its bytes: a reader that finds it reads them. */
    atomic_store(&pipe->tail->next, c);
    pipe->tail = c;
    sv6_unlock(&pipe->write_lock);
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
    sv6_lock(&f->off_lock);
    ssize_t count = inode_read(f->inode, buf, n, f->off);
    if (count > 0)
        set_offset(f, f->off + (uint64_t)count);
    sv6_unlock(&f->off_lock);
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
    sv6_lock(&f->off_lock);
    ssize_t count = inode_write(f->inode, buf, n, f->off);
    if (count > 0)
        set_offset(f, f->off + (uint64_t)count);
    sv6_unlock(&f->off_lock);
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

int sv6_socket_capacity(struct sv6_proc *p, int fd, size_t capacity)
{
    ebr_enter();
    struct sv6_file *f = sv6_file_at(p, fd);
    int result = !f ? -EBADF : f->kind != FILE_SOCKET ? -ENOTSOCK : 0;
    if (result == 0)
        usock_set_capacity(f->sock, capacity);
    ebr_exit();
    return result;
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
