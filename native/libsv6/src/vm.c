/* vm.c - mmap, munmap, mprotect, memread, memwrite on a radix array of pages.
 *
 * The address space keeps one struct sv6_mapping per mapped page (RadixVM's
 * per-page metadata), so calls on different pages change different slots and,
 * in different 2 MiB regions, different radix nodes.  A mapping's protection
 * and what it shows (its backing) lie on lines of their own: an mmap that
 * keeps a page's protection replaces only the backing, so it shares nothing
 * with calls that need only the protection (an mprotect that changes nothing,
 * a memwrite that faults on a read-only page).  A replaced or unmapped page's
 * mapping or backing is freed after a grace period: memread and memwrite find
 * them without a lock. */
#include "sv6_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What a mapped page shows, replaced whole by an mmap that keeps the
 * protection. */
struct page_backing {
    /* Its own line: writers of neighbouring pages share nothing. */
    SV6_ALIGNED _Atomic(struct page_copy *) data; /* anonymous; NULL: never written */
    struct sv6_inode *inode; /* NULL: anonymous */
    uint64_t file_page;      /* page of the file mapped here */
    struct sv6_world *world;
    struct ebr_node ebr;
};

struct sv6_mapping {
    SV6_ALIGNED atomic_bool writable;
    /* Held by the writers of the protection or the backing, so that each
     * change applies to the other's latest value; readers take no lock. */
    SV6_ALIGNED struct sv6_lock lock;
    _Atomic(struct page_backing *) backing;
    struct ebr_node ebr;
};

/* A new anonymous page: a copy of from (NULL: zeros). */
static struct page_copy *anon_page_copy(const struct page_copy *from)
{
    struct page_copy *page = sv6_page_copy_alloc();
    if (from)
        memcpy(page->bytes, from->bytes, SV6_PAGE_SIZE);
    else
        memset(page->bytes, 0, SV6_PAGE_SIZE);
    return page;
}

static void backing_free(struct ebr_node *node)
{
    struct page_backing *b = SV6_CONTAINER_OF(node, struct page_backing, ebr);
    if (b->inode)
        refcache_dec(&b->world->rc, &b->inode->ref);
    struct page_copy *data = atomic_load(&b->data);
    sv6_free_lines(data, sizeof *data);
    sv6_free_lines(b, sizeof *b);
}

static void mapping_free(struct ebr_node *node)
{
    struct sv6_mapping *m = SV6_CONTAINER_OF(node, struct sv6_mapping, ebr);
    backing_free(&atomic_load(&m->backing)->ebr);
    sv6_free_lines(m, sizeof *m);
}

static void mapping_retire(struct sv6_mapping *m)
{
    if (m)
        ebr_retire(&m->ebr, mapping_free);
}

static void mapping_drop_now(void *value, void *arg)
{
    (void)arg;
    mapping_free(&((struct sv6_mapping *)value)->ebr);
}

void sv6_vm_destroy(struct sv6_proc *p)
{
    radix_destroy(&p->vm, mapping_drop_now, NULL);
}

static bool page_range(uint64_t addr, size_t len, uint64_t *first, uint64_t *count)
{
    if (addr % SV6_PAGE_SIZE || len == 0)
        return false;
    *first = addr / SV6_PAGE_SIZE;
    *count = (len + SV6_PAGE_SIZE - 1) / SV6_PAGE_SIZE;
    return *first + *count <= (1ull << RADIX_KEY_BITS);
}

/* A new backing of inode (NULL: anonymous) page file_page; the caller holds a
 * reference to inode that counts until it returns (see sv6_impl.h). */
static struct page_backing *new_backing(struct sv6_world *w, struct sv6_inode *inode,
                                        uint64_t file_page)
{
    struct page_backing *b = sv6_zalloc(sizeof *b);
    b->world = w;
    b->inode = inode;
    b->file_page = file_page;
    atomic_init(&b->data, NULL);
    if (inode)
        refcache_inc(&w->rc, &inode->ref);
    return b;
}

static struct sv6_mapping *new_mapping(struct page_backing *backing, bool writable)
{
    struct sv6_mapping *m = sv6_zalloc(sizeof *m);
    atomic_init(&m->writable, writable);
    sv6_lock_init(&m->lock);
    atomic_init(&m->backing, backing);
    return m;
}

/* One page of the parent's address space into the child's, as fork does: a
 * file page stays shared with the file, an anonymous page is copied. */
static void copy_page(uint64_t page, void *value, void *arg)
{
    struct sv6_mapping *from = value;
    struct sv6_proc *child = arg;
    struct page_backing *shown = atomic_load(&from->backing); /* freed after ebr_exit */
    struct page_backing *backing = new_backing(child->world, shown->inode, shown->file_page);
    struct page_copy *data = atomic_load(&shown->data);
    if (data)
        atomic_init(&backing->data, anon_page_copy(data));
    mapping_retire(
        radix_swap(&child->vm, page, new_mapping(backing, atomic_load(&from->writable))));
}

void sv6_vm_copy(struct sv6_proc *parent, struct sv6_proc *child)
{
    /* The parent's mappings found here are not freed before ebr_exit, and each
     * holds its inode reference until then (see sv6_impl.h). */
    ebr_enter();
    radix_each(&parent->vm, copy_page, child);
    ebr_exit();
}

/* Without MAP_FIXED: count free pages from the calling core's own region. */
static uint64_t place(struct sv6_proc *p, uint64_t count)
{
    _Atomic uint64_t *next = &p->hints[sv6_core()].next_page;
    for (;;) {
        uint64_t first = atomic_fetch_add(next, count);
        uint64_t i = 0;
        while (i < count && !radix_get(&p->vm, first + i))
            i++;
        if (i == count)
            return first;
    }
}

/* Whether mapping m (NULL: none) is already what mmap would put there: the same
 * file page, or a never written anonymous page, with the same protection.  Such
 * an mmap changes nothing and writes nothing, so it shares nothing with calls
 * that use the page. */
static bool maps_already(struct sv6_mapping *m, struct sv6_inode *inode, uint64_t file_page,
                         bool writable)
{
    if (!m || atomic_load(&m->writable) != writable)
        return false;
    struct page_backing *b = atomic_load(&m->backing);
    return b->inode == inode && b->file_page == file_page && (inode || !atomic_load(&b->data));
}

/* Puts backing in place of m's, retiring the old one, if m is still page's
 * mapping and has protection writable: whether it did.  It writes neither
 * the slot nor the protection. */
static bool replace_backing(struct sv6_proc *p, uint64_t page, struct sv6_mapping *m,
                            struct page_backing *backing, bool writable)
{
    sv6_lock(&m->lock);
    bool kept = radix_get(&p->vm, page) == m && atomic_load(&m->writable) == writable;
    struct page_backing *old = kept ? atomic_exchange(&m->backing, backing) : NULL;
    sv6_unlock(&m->lock);
    if (old)
        ebr_retire(&old->ebr, backing_free);
    return kept;
}

/* Maps page to inode's file_page (NULL: a new anonymous page): only the backing
 * when the page's mapping has that protection already, else a new mapping. */
static void map_page(struct sv6_proc *p, uint64_t page, struct sv6_inode *inode,
                     uint64_t file_page, bool writable)
{
    struct sv6_mapping *m = radix_get(&p->vm, page);
    if (maps_already(m, inode, file_page, writable))
        return;
    struct page_backing *backing = new_backing(p->world, inode, file_page);
    if (m && atomic_load(&m->writable) == writable &&
        replace_backing(p, page, m, backing, writable))
        return;
    mapping_retire(radix_swap(&p->vm, page, new_mapping(backing, writable)));
}

static int64_t do_mmap(struct sv6_proc *p, uint64_t addr, size_t len, int prot, int flags,
                       int fd, off_t off)
{
    struct sv6_inode *inode = NULL;
    if (!(flags & MAP_ANONYMOUS)) {
        struct sv6_file *f = sv6_file_at(p, fd);
        if (!f)
            return -EBADF;
        if (f->kind == FILE_PIPE_WRITE)
            return -EACCES; /* mapping needs read access first */
        if (f->kind != FILE_INODE)
            return -ENODEV;
        inode = f->inode;
    }
    uint64_t first, count;
    bool fixed = flags & MAP_FIXED;
    if (off < 0 || off % SV6_PAGE_SIZE || !page_range(fixed ? addr : 0, len, &first, &count))
        return -EINVAL;
    if (!fixed)
        first = place(p, count);
    for (uint64_t i = 0; i < count; i++)
        map_page(p, first + i, inode, inode ? (uint64_t)off / SV6_PAGE_SIZE + i : 0,
                 prot & PROT_WRITE);
    return (int64_t)(first * SV6_PAGE_SIZE);
}

int64_t sv6_mmap(struct sv6_proc *p, uint64_t addr, size_t len, int prot, int flags, int fd,
                 off_t off)
{
    ebr_enter();
    int64_t result = do_mmap(p, addr, len, prot, flags, fd, off);
    ebr_exit();
    return result;
}

int sv6_munmap(struct sv6_proc *p, uint64_t addr, size_t len)
{
    uint64_t first, count;
    if (!page_range(addr, len, &first, &count))
        return -EINVAL;
    for (uint64_t i = 0; i < count; i++)
        mapping_retire(radix_swap(&p->vm, first + i, NULL));
    return 0;
}

int sv6_mprotect(struct sv6_proc *p, uint64_t addr, size_t len, int prot)
{
    uint64_t first, count;
    if (!page_range(addr, len, &first, &count))
        return -EINVAL;
    ebr_enter();
    int result = 0;
    for (uint64_t i = 0; i < count && result == 0; i++)
        if (!radix_get(&p->vm, first + i))
            result = -ENOMEM;
    for (uint64_t i = 0; i < count && result == 0; i++) {
        struct sv6_mapping *m = radix_get(&p->vm, first + i);
        /* Unmapped meanwhile: nothing left to protect.  Unchanged: nothing
         * written, so memread and memwrite of the page do not conflict with it. */
        bool writable = prot & PROT_WRITE;
        if (m && atomic_load(&m->writable) != writable) {
            sv6_lock(&m->lock);
            atomic_store(&m->writable, writable);
            sv6_unlock(&m->lock);
        }
    }
    ebr_exit();
    return result;
}

static void anon_read(struct page_backing *b, size_t in_page, unsigned char *buf, size_t n)
{
    struct page_copy *page = atomic_load(&b->data);
    if (page)
        memcpy(buf, page->bytes + in_page, n);
    else
        memset(buf, 0, n); /* never written: the zero page */
}

/* Publishes a changed copy if the page is still the one copied (so of two
 * writers neither loses the other's bytes).  Bytes the page already holds are
 * not written again: such a write writes nothing. */
static void anon_write(struct page_backing *b, size_t in_page, const unsigned char *buf, size_t n)
{
    struct page_copy *old = atomic_load(&b->data);
    while (!sv6_page_holds(old ? old->bytes : NULL, in_page, buf, n)) {
        struct page_copy *fresh = anon_page_copy(old);
        memcpy(fresh->bytes + in_page, buf, n);
        if (atomic_compare_exchange_strong(&b->data, &old, fresh)) {
            if (old)
                ebr_retire(&old->ebr, sv6_page_copy_free);
            return;
        }
        sv6_free_lines(fresh, sizeof *fresh); /* another writer's page came first: old is now that one */
    }
}

/* One page's part of a memread or memwrite: 0 or a fault. */
static int access_page(struct sv6_proc *p, uint64_t addr, unsigned char *buf, size_t n,
                       bool write)
{
    struct sv6_mapping *m = radix_get(&p->vm, addr / SV6_PAGE_SIZE);
    if (!m || (write && !atomic_load(&m->writable)))
        return SV6_SIGSEGV;
    size_t in_page = addr % SV6_PAGE_SIZE;
    struct page_backing *b = atomic_load(&m->backing);
    if (!b->inode) {
        if (write)
            anon_write(b, in_page, buf, n);
        else
            anon_read(b, in_page, buf, n);
        return 0;
    }
    struct sv6_inode *inode = b->inode;
    uint64_t start = b->file_page * SV6_PAGE_SIZE, at = start + in_page;
    /* Wholly past the end: decided without a writer lock, from the slots of
     * this page and the file's pages above it only. */
    if (write && sv6_inode_length_reaching(inode, start + 1) <= start)
        return SV6_SIGBUS;
    /* Bytes past the end in the file's last page are not part of the file:
     * they read as zeros and writes to them are lost. */
    uint64_t length = write ? sv6_inode_write(inode, buf, n, at, false)
                            : sv6_inode_read(inode, buf, n, at);
    return start >= length ? SV6_SIGBUS : 0; /* the page lies wholly past the end */
}

static int access_range(struct sv6_proc *p, uint64_t addr, unsigned char *buf, size_t n,
                        bool write)
{
    ebr_enter();
    int result = 0;
    while (n > 0 && result == 0) {
        size_t room = SV6_PAGE_SIZE - addr % SV6_PAGE_SIZE;
        size_t part = n < room ? n : room;
        result = access_page(p, addr, buf, part, write);
        addr += part;
        buf += part;
        n -= part;
    }
    ebr_exit();
    return result;
}

int sv6_memread(struct sv6_proc *p, uint64_t addr, void *buf, size_t n)
{
    return access_range(p, addr, buf, n, false);
}

int sv6_memwrite(struct sv6_proc *p, uint64_t addr, const void *buf, size_t n)
{
    return access_range(p, addr, (unsigned char *)buf, n, true);
}
