/* world.c - worlds, processes, files and their lifetimes (see sv6_impl.h). */
#include "sv6_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ inodes */

static void inode_hold(void *value, void *ctx)
{
    struct sv6_world *w = ctx;
    refcache_inc(&w->rc, &((struct sv6_inode *)value)->ref);
}

static void inode_drop(void *value, void *ctx)
{
    struct sv6_world *w = ctx;
    refcache_dec(&w->rc, &((struct sv6_inode *)value)->ref);
}

static void inode_release(struct refcache_obj *obj)
{
    struct sv6_inode *inode = SV6_CONTAINER_OF(obj, struct sv6_inode, ref);
    sv6_inode_drop_data(inode);
    sv6_free_lines(inode, sizeof *inode);
}

struct sv6_inode *sv6_new_inode(struct sv6_world *w)
{
    struct sv6_inode *inode = sv6_zalloc(sizeof *inode);
    /* Two references: the new directory entry's and the new file's. */
    refcache_obj_init(&inode->ref, 2, inode_release);
    refcache_obj_init(&inode->nlink, 1, NULL);
    atomic_init(&inode->shared_nlink, 1);
    inode->world = w;
    inode->ino = sv6_new_ino(w);
    radix_init(&inode->pages, true);
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        sv6_lock_init(&inode->writers[c].lock);
        atomic_init(&inode->writers[c].clock, 0);
        atomic_init(&inode->truncation_stamps[c].word, 0);
        atomic_init(&inode->marks[c].pages, 0);
        atomic_init(&inode->marks[c].stamp, 0);
    }
    return inode;
}

uint64_t sv6_new_ino(struct sv6_world *w)
{
    unsigned core = sv6_core();
    return atomic_fetch_add(&w->inos[core].next, 1) * SV6_NCORES + core + 1;
}

/* ------------------------------------------------------------ files */

static void file_release(struct refcache_obj *obj)
{
    struct sv6_file *f = SV6_CONTAINER_OF(obj, struct sv6_file, ref);
    if (f->inode)
        refcache_dec(&f->world->rc, &f->inode->ref);
    if (f->pipe && atomic_fetch_sub(&f->pipe->ends, 1) == 1)
        sv6_pipe_destroy(f->pipe);
    if (f->sock) {
        usock_destroy(f->sock);
        sv6_free_lines(f->sock, sizeof *f->sock);
    }
    sv6_free_lines(f, sizeof *f);
}

void sv6_file_release_now(struct sv6_file *f)
{
    file_release(&f->ref);
}

struct sv6_file *sv6_new_file(struct sv6_world *w, enum file_kind kind)
{
    struct sv6_file *f = sv6_zalloc(sizeof *f);
    refcache_obj_init(&f->ref, 1, file_release);
    f->world = w;
    f->kind = kind;
    sv6_lock_init(&f->off_lock);
    return f;
}

int sv6_install(struct sv6_proc *p, struct sv6_file *f, bool anyfd)
{
    int fd = anyfd ? fdtable_alloc_any(&p->fds, f) : fdtable_alloc_lowest(&p->fds, f);
    if (fd < 0)
        refcache_dec(&p->world->rc, &f->ref);
    return fd;
}

struct sv6_file *sv6_file_at(struct sv6_proc *p, int fd)
{
    return fdtable_get(&p->fds, fd);
}

/* ------------------------------------------------------------ worlds */

struct sv6_world *sv6_world_create(unsigned flags)
{
    struct sv6_world *w = sv6_zalloc(sizeof *w);
    refcache_init(&w->rc);
    w->rc.self_ticking = flags & SV6_WORLD_SELF_TICK;
    w->names_own_inodes = (struct dir_ops){.hold = inode_hold, .drop = inode_drop, .ctx = w};
    dir_init(&w->root, &w->names_own_inodes);
    w->shared_nlink = flags & SV6_WORLD_SHARED_NLINK;
    return w;
}

void sv6_world_tick(struct sv6_world *w)
{
    refcache_tick(&w->rc);
    /* Leaving a section runs the release callbacks whose grace period ended. */
    ebr_enter();
    ebr_exit();
}

unsigned long sv6_world_read_retries(struct sv6_world *w)
{
    return atomic_load(&w->rc.consistent_retries);
}

void sv6_world_destroy(struct sv6_world *w)
{
    ebr_drain(); /* entries unlinked earlier drop their references */
    dir_destroy(&w->root);
    refcache_quiesce(&w->rc);
    sv6_free_lines(w, sizeof *w);
}

/* ------------------------------------------------------------ processes */

struct sv6_proc *sv6_proc_create(struct sv6_world *w)
{
    struct sv6_proc *p = sv6_zalloc(sizeof *p);
    p->world = w;
    fdtable_init(&p->fds);
    radix_init(&p->vm, false);
    /* Each core picks addresses for mmap without a fixed address from its
     * own region, so those calls share no counter. */
    for (unsigned c = 0; c < SV6_NCORES; c++)
        atomic_init(&p->hints[c].next_page, (1ull << 34) + ((uint64_t)c << 29));
    return p;
}

/* The table goes away with its slots: each slot's reference is dropped. */
static void drop_slot(int fd, void *value, void *arg)
{
    struct sv6_proc *p = arg;
    struct sv6_file *f = value;
    (void)fd;
    refcache_dec(&p->world->rc, &f->ref);
}

void sv6_proc_destroy(struct sv6_proc *p)
{
    fdtable_each(&p->fds, drop_slot, p);
    sv6_vm_destroy(p);
    fdtable_destroy(&p->fds);
    sv6_free_lines(p, sizeof *p);
}

struct copy_args {
    struct sv6_proc *child;
    int child_fd; /* -1: the parent's number */
    int result;
};

/* Before a second reference to f is taken, copying fd `from` to fd `to`: a close
 * of either must then leave the release to refcache (sv6_close).  Only a file
 * at an O_ANYFD fd can be released at once, and the mark is written once:
 * copies between other fds, and copies after the first, write nothing that a
 * concurrent copy reads. */
static void mark_copied(struct sv6_file *f, int from, int to)
{
    if ((from >> FDTABLE_PART_BITS || to >> FDTABLE_PART_BITS) && !atomic_load(&f->copied))
        atomic_store(&f->copied, true);
}

/* Under the parent's partition lock: the slot's reference still counts, so a
 * new one may be taken even if another thread is closing the fd. */
static void copy_to_child(int fd, void *value, void *arg)
{
    struct copy_args *copy = arg;
    struct sv6_file *f = value;
    int child_fd = copy->child_fd < 0 ? fd : copy->child_fd;
    mark_copied(f, fd, child_fd);
    refcache_inc(&copy->child->world->rc, &f->ref);
    if (fdtable_install(&copy->child->fds, child_fd, f) != 0) {
        refcache_dec(&copy->child->world->rc, &f->ref);
        copy->result = -EBADF;
    }
}

int sv6_fd_install(struct sv6_proc *dst, int dst_fd, struct sv6_proc *src, int src_fd)
{
    struct copy_args copy = {.child = dst, .child_fd = dst_fd, .result = 0};
    if (fdtable_visit(&src->fds, src_fd, copy_to_child, &copy) != 0)
        return -EBADF;
    return copy.result;
}

/* posix_spawn's copy of one named fd, without its partition's lock (which every spawn
 * and close of an fd of that partition would otherwise share): the reference is taken,
 * then the slot is read again.  Still holding the file there, the slot's reference
 * counted all along (a file whose count reached zero cannot be put back: only a holder
 * may make a new reference), so the new one is safe; gone, it is dropped and the copy
 * fails as after the close.  The EBR section keeps the file's memory meanwhile. */
static int copy_fd_unlocked(struct sv6_proc *parent, int fd, struct sv6_proc *child,
                            int child_fd)
{
    int result = -EBADF;
    ebr_enter();
    struct sv6_file *f = fdtable_get(&parent->fds, fd);
    if (f) {
        mark_copied(f, fd, child_fd);
        refcache_inc(&child->world->rc, &f->ref);
        if (fdtable_get(&parent->fds, fd) == f && fdtable_install(&child->fds, child_fd, f) == 0)
            result = 0;
        else
            refcache_dec(&child->world->rc, &f->ref);
    }
    ebr_exit();
    return result;
}

int sv6_spawn(struct sv6_proc *parent, const struct sv6_spawn_fd *fds, size_t n,
              struct sv6_proc **child)
{
    struct sv6_proc *c = sv6_proc_create(parent->world);
    struct copy_args copy = {.child = c, .child_fd = -1, .result = 0};
    if (n == SV6_SPAWN_ALL) {
        fdtable_each(&parent->fds, copy_to_child, &copy);
        sv6_vm_copy(parent, c);
    } else {
        for (size_t i = 0; i < n && copy.result == 0; i++)
            copy.result = copy_fd_unlocked(parent, fds[i].parent_fd, c, fds[i].child_fd);
    }
    if (copy.result != 0) {
        sv6_proc_destroy(c);
        return copy.result;
    }
    *child = c;
    return 0;
}
