/*
 * check_conformance.c - random sequences of the POSIX model's operations on
 * libsv6 and on a sequential reference of their semantics
 * (src/scalecheck/interfaces/posix.py), compared call by call: the paper's 18,
 * datagram sockets (an ordered and an unordered one, each of capacity
 * SOCK_CAPACITY), fork and posix_spawn (fstatx runs as half of fstat's calls).
 *
 * The reference counts file data in units, as the model does; libsv6 is driven
 * the way a driver maps a unit: one page per unit for files and mappings, one
 * byte for pipes.  Fds and addresses that the model lets the implementation
 * choose (O_ANYFD, mmap without MAP_FIXED) are taken from libsv6's answer after
 * checking they were free.
 */
#include "check.h"

#include "sv6/core.h"
#include "sv6/sv6.h"

#include <errno.h>
#include <string.h>

#define PAGE SV6_PAGE_SIZE
enum { NAMES = 4, MAX_INODES = 4096, MAX_UNITS = 16, MAX_FDS = 64, MAX_MAPS = 64,
       NPAGES = 4, MAX_PIPE = 64, SOCK_CAPACITY = 2, NSOCKS = 2, SOCK_FD = 900, NOPS = 22 };
static const uint64_t MAP_BASE = 1ull << 32;

struct ref_inode {
    int nlink;
    int length;
    unsigned char data[MAX_UNITS];
    uint64_t ino; /* libsv6's number for it, 0 until seen */
};

struct ref_pipe {
    unsigned char data[MAX_PIPE];
    int head, tail;
    uint64_t ino;
};

enum ref_kind { REF_FILE, REF_PIPE_READ, REF_PIPE_WRITE };

struct ref_fd {
    int fd; /* -1: free entry */
    enum ref_kind kind;
    int object; /* inode or pipe index */
    int off;
};

struct ref_map {
    uint64_t page; /* 0: free entry */
    bool anon, writable;
    int inode, off;
    unsigned char anondata;
};

struct ref_proc {
    struct ref_fd fds[MAX_FDS];
    struct ref_map maps[MAX_MAPS];
};

/* A socket's queued messages, oldest first (an unordered one may give any). */
struct ref_sock {
    bool unordered;
    unsigned char data[SOCK_CAPACITY];
    int length;
};

struct reference {
    int names[NAMES]; /* inode index or -1 */
    struct ref_sock socks[NSOCKS];
    struct ref_inode inodes[MAX_INODES];
    int ninodes;
    struct ref_pipe pipes[MAX_INODES];
    int npipes;
    struct ref_proc procs[2];
};

struct run {
    struct reference ref;
    struct sv6_world *world;
    struct sv6_proc *procs[2];
    uint64_t rng;
    unsigned long step;
    unsigned long counts[NOPS];
    unsigned char page[PAGE];
};

#define AGREE(r, cond, fmt, ...) CHECK(cond, "step %lu: " fmt, (r)->step, ##__VA_ARGS__)

static const char *name_of(int k)
{
    static const char *names[NAMES] = {"f0", "f1", "f2", "f3"};
    return names[k];
}

static struct ref_fd *ref_fd(struct ref_proc *p, int fd)
{
    for (int i = 0; i < MAX_FDS; i++)
        if (p->fds[i].fd == fd && fd >= 0)
            return &p->fds[i];
    return NULL;
}

static int ref_lowest_fd(struct ref_proc *p)
{
    for (int fd = 0;; fd++)
        if (!ref_fd(p, fd))
            return fd;
}

static struct ref_fd *ref_add_fd(struct run *r, struct ref_proc *p, int fd, enum ref_kind kind,
                                 int object)
{
    AGREE(r, !ref_fd(p, fd), "fd %d handed out while in use", fd);
    for (int i = 0; i < MAX_FDS; i++) {
        if (p->fds[i].fd < 0) {
            p->fds[i] = (struct ref_fd){.fd = fd, .kind = kind, .object = object, .off = 0};
            return &p->fds[i];
        }
    }
    CHECK(0, "reference out of fds");
}

static struct ref_map *ref_map(struct ref_proc *p, uint64_t page)
{
    for (int i = 0; i < MAX_MAPS; i++)
        if (p->maps[i].page == page && page)
            return &p->maps[i];
    return NULL;
}

/* libsv6's inode numbers are its own; the reference checks they name inodes
 * one to one. */
static void same_ino(struct run *r, uint64_t *known, uint64_t ino)
{
    if (*known == 0) {
        for (int i = 0; i < r->ref.ninodes; i++)
            AGREE(r, r->ref.inodes[i].ino != ino, "ino %lu names two inodes", (unsigned long)ino);
        for (int i = 0; i < r->ref.npipes; i++)
            AGREE(r, r->ref.pipes[i].ino != ino, "ino %lu names two objects", (unsigned long)ino);
        *known = ino;
    }
    AGREE(r, *known == ino, "ino %lu, expected %lu", (unsigned long)ino, (unsigned long)*known);
}

static void expect_stat(struct run *r, int result, const struct sv6_stat *st, int inode)
{
    AGREE(r, result == 0, "stat failed: %d", result);
    struct ref_inode *in = &r->ref.inodes[inode];
    same_ino(r, &in->ino, st->ino);
    AGREE(r, st->nlink == (uint64_t)in->nlink, "nlink %lu, expected %d", (unsigned long)st->nlink,
          in->nlink);
    AGREE(r, st->size == (uint64_t)in->length * PAGE, "size %lu, expected %d units",
          (unsigned long)st->size, in->length);
}

/* A unit of file data read back: every byte of the page the same. */
static int unit_value(struct run *r, const unsigned char *page)
{
    for (int i = 1; i < PAGE; i++)
        AGREE(r, page[i] == page[0], "a unit with mixed bytes");
    return page[0];
}

static void write_unit(struct ref_inode *in, int off, unsigned char byte)
{
    in->data[off] = byte;
    if (off + 1 > in->length)
        in->length = off + 1;
}

/* Arguments: mostly things that exist, sometimes not. */
static int pick_fd(struct run *r, struct ref_proc *p)
{
    int used[MAX_FDS], n = 0;
    for (int i = 0; i < MAX_FDS; i++)
        if (p->fds[i].fd >= 0)
            used[n++] = p->fds[i].fd;
    if (n == 0 || check_below(&r->rng, 6) == 0)
        return (int)check_below(&r->rng, 6);
    return used[check_below(&r->rng, (unsigned)n)];
}

static uint64_t pick_page(struct run *r, struct ref_proc *p)
{
    if (check_below(&r->rng, 3) == 0) { /* one placed by mmap without MAP_FIXED */
        for (int i = 0; i < MAX_MAPS; i++)
            if (p->maps[i].page && p->maps[i].page >= MAP_BASE / PAGE + NPAGES)
                return p->maps[i].page;
    }
    return MAP_BASE / PAGE + check_below(&r->rng, NPAGES);
}

static unsigned char pick_byte(struct run *r)
{
    return (unsigned char)('A' + check_below(&r->rng, 3));
}

/* ------------------------------------------------------------ operations */

static void op_open(struct run *r, int pid)
{
    int k = (int)check_below(&r->rng, NAMES);
    bool creat = check_below(&r->rng, 2), excl = check_below(&r->rng, 2),
         trunc = check_below(&r->rng, 4) == 0, anyfd = check_below(&r->rng, 2);
    int flags = (creat ? O_CREAT : 0) | (excl ? O_EXCL : 0) | (trunc ? O_TRUNC : 0) |
                (anyfd ? SV6_O_ANYFD : 0);
    int fd = sv6_open(r->procs[pid], name_of(k), flags);
    struct reference *ref = &r->ref;
    int inode = ref->names[k];
    if (inode >= 0 && creat && excl) {
        AGREE(r, fd == -EEXIST, "open O_EXCL of an existing name: %d", fd);
        return;
    }
    if (inode < 0 && !creat) {
        AGREE(r, fd == -ENOENT, "open of a missing name: %d", fd);
        return;
    }
    if (inode >= 0 && trunc) {
        memset(ref->inodes[inode].data, 0, MAX_UNITS);
        ref->inodes[inode].length = 0;
    }
    if (inode < 0) {
        CHECK(ref->ninodes < MAX_INODES, "reference out of inodes");
        inode = ref->ninodes++;
        ref->inodes[inode] = (struct ref_inode){.nlink = 1};
        ref->names[k] = inode;
    }
    struct ref_proc *p = &ref->procs[pid];
    if (anyfd)
        AGREE(r, fd >= 0, "open O_ANYFD: %d", fd);
    else
        AGREE(r, fd == ref_lowest_fd(p), "open: fd %d, lowest free %d", fd, ref_lowest_fd(p));
    ref_add_fd(r, p, fd, REF_FILE, inode);
}

static void op_link(struct run *r, int pid)
{
    int old = (int)check_below(&r->rng, NAMES), new_name = (int)check_below(&r->rng, NAMES);
    int result = sv6_link(r->procs[pid], name_of(old), name_of(new_name));
    struct reference *ref = &r->ref;
    int expected = ref->names[old] < 0 ? -ENOENT : ref->names[new_name] >= 0 ? -EEXIST : 0;
    AGREE(r, result == expected, "link: %d, expected %d", result, expected);
    if (expected == 0) {
        ref->names[new_name] = ref->names[old];
        ref->inodes[ref->names[old]].nlink++;
    }
}

static void op_unlink(struct run *r, int pid)
{
    int k = (int)check_below(&r->rng, NAMES);
    int result = sv6_unlink(r->procs[pid], name_of(k));
    struct reference *ref = &r->ref;
    AGREE(r, result == (ref->names[k] < 0 ? -ENOENT : 0), "unlink: %d", result);
    if (ref->names[k] >= 0) {
        ref->inodes[ref->names[k]].nlink--;
        ref->names[k] = -1;
    }
}

static void op_rename(struct run *r, int pid)
{
    int src = (int)check_below(&r->rng, NAMES), dst = (int)check_below(&r->rng, NAMES);
    int result = sv6_rename(r->procs[pid], name_of(src), name_of(dst));
    struct reference *ref = &r->ref;
    AGREE(r, result == (ref->names[src] < 0 ? -ENOENT : 0), "rename: %d", result);
    if (ref->names[src] < 0 || src == dst)
        return;
    if (ref->names[dst] >= 0)
        ref->inodes[ref->names[dst]].nlink--;
    ref->names[dst] = ref->names[src];
    ref->names[src] = -1;
}

static void op_stat(struct run *r, int pid)
{
    int k = (int)check_below(&r->rng, NAMES);
    struct sv6_stat st;
    int result = sv6_stat(r->procs[pid], name_of(k), &st);
    if (r->ref.names[k] < 0)
        AGREE(r, result == -ENOENT, "stat of a missing name: %d", result);
    else
        expect_stat(r, result, &st, r->ref.names[k]);
}

static void op_fstat(struct run *r, int pid)
{
    int fd = pick_fd(r, &r->ref.procs[pid]);
    bool statx = check_below(&r->rng, 2);
    struct sv6_stat st;
    int result = statx ? sv6_fstatx(r->procs[pid], fd, SV6_STATX_INO | SV6_STATX_SIZE, &st)
                       : sv6_fstat(r->procs[pid], fd, &st);
    struct ref_fd *f = ref_fd(&r->ref.procs[pid], fd);
    if (!f) {
        AGREE(r, result == -EBADF, "fstat of a free fd: %d", result);
    } else if (f->kind != REF_FILE) {
        AGREE(r, result == 0 && st.size == 0, "fstat of a pipe");
        AGREE(r, st.nlink == (statx ? 0 : 1), "a pipe's link count");
        same_ino(r, &r->ref.pipes[f->object].ino, st.ino);
    } else if (statx) {
        /* No link count asked for, none given. */
        AGREE(r, result == 0 && st.nlink == 0, "fstatx");
        struct sv6_stat full = st;
        full.nlink = (uint64_t)r->ref.inodes[f->object].nlink;
        expect_stat(r, result, &full, f->object);
    } else {
        expect_stat(r, result, &st, f->object);
    }
}

static void op_lseek(struct run *r, int pid)
{
    int fd = pick_fd(r, &r->ref.procs[pid]);
    int off = (int)check_below(&r->rng, 4) - 1;
    static const int whences[] = {SEEK_SET, SEEK_CUR, SEEK_END};
    int w = (int)check_below(&r->rng, 3);
    off_t result = sv6_lseek(r->procs[pid], fd, (off_t)off * PAGE, whences[w]);
    struct ref_fd *f = ref_fd(&r->ref.procs[pid], fd);
    if (!f || f->kind != REF_FILE) {
        AGREE(r, result == (f ? -ESPIPE : -EBADF), "lseek: %ld", (long)result);
        return;
    }
    int base = w == 0 ? 0 : w == 1 ? f->off : r->ref.inodes[f->object].length;
    if (base + off < 0) {
        AGREE(r, result == -EINVAL, "lseek before 0: %ld", (long)result);
        return;
    }
    f->off = base + off;
    AGREE(r, result == (off_t)f->off * PAGE, "lseek: %ld, expected %d units", (long)result,
          f->off);
}

static void op_close(struct run *r, int pid)
{
    struct ref_proc *p = &r->ref.procs[pid];
    int fd = pick_fd(r, p);
    int result = sv6_close(r->procs[pid], fd);
    struct ref_fd *f = ref_fd(p, fd);
    AGREE(r, result == (f ? 0 : -EBADF), "close: %d", result);
    if (f)
        f->fd = -1;
}

static void op_pipe(struct run *r, int pid)
{
    int fds[2];
    struct ref_proc *p = &r->ref.procs[pid];
    int result = sv6_pipe(r->procs[pid], fds);
    AGREE(r, result == 0, "pipe: %d", result);
    CHECK(r->ref.npipes < MAX_INODES, "reference out of pipes");
    int pipe = r->ref.npipes++;
    r->ref.pipes[pipe] = (struct ref_pipe){.head = 0};
    AGREE(r, fds[0] == ref_lowest_fd(p), "pipe's read end %d", fds[0]);
    ref_add_fd(r, p, fds[0], REF_PIPE_READ, pipe);
    AGREE(r, fds[1] == ref_lowest_fd(p), "pipe's write end %d", fds[1]);
    ref_add_fd(r, p, fds[1], REF_PIPE_WRITE, pipe);
}

static void op_read(struct run *r, int pid, bool positional)
{
    struct ref_proc *p = &r->ref.procs[pid];
    int fd = pick_fd(r, p), off = (int)check_below(&r->rng, 4);
    struct ref_fd *f = ref_fd(p, fd);
    bool pipe = f && f->kind != REF_FILE;
    size_t n = pipe ? 1 : PAGE;
    ssize_t result = positional ? sv6_pread(r->procs[pid], fd, r->page, n, (off_t)off * PAGE)
                                : sv6_read(r->procs[pid], fd, r->page, n);
    if (!f || (positional && pipe) || (pipe && f->kind == REF_PIPE_WRITE)) {
        ssize_t expected = !f ? -EBADF : positional ? -ESPIPE : -EBADF;
        AGREE(r, result == expected, "read: %ld, expected %ld", (long)result, (long)expected);
        return;
    }
    if (pipe) {
        struct ref_pipe *rp = &r->ref.pipes[f->object];
        if (rp->head == rp->tail) {
            AGREE(r, result == -EAGAIN, "read of an empty pipe: %ld", (long)result);
            return;
        }
        AGREE(r, result == 1 && r->page[0] == rp->data[rp->head], "pipe read");
        rp->head++;
        return;
    }
    struct ref_inode *in = &r->ref.inodes[f->object];
    int at = positional ? off : f->off;
    if (at >= in->length) {
        AGREE(r, result == 0, "read past the end: %ld", (long)result);
        return;
    }
    AGREE(r, result == PAGE && unit_value(r, r->page) == in->data[at], "read of unit %d", at);
    if (!positional)
        f->off++;
}

static void op_write(struct run *r, int pid, bool positional)
{
    struct ref_proc *p = &r->ref.procs[pid];
    int fd = pick_fd(r, p), off = (int)check_below(&r->rng, 4);
    unsigned char byte = pick_byte(r);
    struct ref_fd *f = ref_fd(p, fd);
    bool pipe = f && f->kind != REF_FILE;
    memset(r->page, byte, PAGE);
    size_t n = pipe ? 1 : PAGE;
    ssize_t result = positional ? sv6_pwrite(r->procs[pid], fd, r->page, n, (off_t)off * PAGE)
                                : sv6_write(r->procs[pid], fd, r->page, n);
    if (!f || (positional && pipe) || (pipe && f->kind == REF_PIPE_READ)) {
        ssize_t expected = !f ? -EBADF : positional ? -ESPIPE : -EBADF;
        AGREE(r, result == expected, "write: %ld, expected %ld", (long)result, (long)expected);
        return;
    }
    AGREE(r, result == (ssize_t)n, "write: %ld", (long)result);
    if (pipe) {
        struct ref_pipe *rp = &r->ref.pipes[f->object];
        CHECK(rp->tail < MAX_PIPE, "reference pipe full");
        rp->data[rp->tail++] = byte;
    } else if (positional) {
        write_unit(&r->ref.inodes[f->object], off, byte);
    } else {
        CHECK(f->off < MAX_UNITS, "reference file full");
        write_unit(&r->ref.inodes[f->object], f->off++, byte);
    }
}

static void op_mmap(struct run *r, int pid)
{
    struct ref_proc *p = &r->ref.procs[pid];
    bool anon = check_below(&r->rng, 2), writable = check_below(&r->rng, 2),
         fixed = check_below(&r->rng, 3) != 0;
    uint64_t page = MAP_BASE / PAGE + check_below(&r->rng, NPAGES);
    int fd = pick_fd(r, p), off = (int)check_below(&r->rng, 4);
    int64_t result = sv6_mmap(r->procs[pid], fixed ? page * PAGE : 0, PAGE,
                              PROT_READ | (writable ? PROT_WRITE : 0),
                              (anon ? MAP_ANONYMOUS : 0) | (fixed ? MAP_FIXED : 0),
                              anon ? -1 : fd, anon ? 0 : (off_t)off * PAGE);
    struct ref_fd *f = anon ? NULL : ref_fd(p, fd);
    if (!anon && (!f || f->kind != REF_FILE)) {
        int64_t expected = !f ? -EBADF : f->kind == REF_PIPE_WRITE ? -EACCES : -ENODEV;
        AGREE(r, result == expected, "mmap: %ld, expected %ld", (long)result, (long)expected);
        return;
    }
    if (fixed) {
        AGREE(r, result == (int64_t)(page * PAGE), "mmap fixed: %ld", (long)result);
    } else {
        AGREE(r, result > 0 && result % PAGE == 0, "mmap: %ld", (long)result);
        page = (uint64_t)result / PAGE;
        AGREE(r, !ref_map(p, page), "mmap chose a mapped page");
    }
    struct ref_map *m = ref_map(p, page);
    for (int i = 0; !m && i < MAX_MAPS; i++)
        if (!p->maps[i].page)
            m = &p->maps[i];
    CHECK(m, "reference out of mappings");
    *m = (struct ref_map){.page = page, .anon = anon, .writable = writable,
                          .inode = anon ? 0 : f->object, .off = anon ? 0 : off, .anondata = 0};
}

static void op_munmap(struct run *r, int pid)
{
    struct ref_proc *p = &r->ref.procs[pid];
    uint64_t page = pick_page(r, p);
    AGREE(r, sv6_munmap(r->procs[pid], page * PAGE, PAGE) == 0, "munmap");
    struct ref_map *m = ref_map(p, page);
    if (m)
        m->page = 0;
}

static void op_mprotect(struct run *r, int pid)
{
    struct ref_proc *p = &r->ref.procs[pid];
    uint64_t page = pick_page(r, p);
    bool writable = check_below(&r->rng, 2);
    int result = sv6_mprotect(r->procs[pid], page * PAGE, PAGE,
                              PROT_READ | (writable ? PROT_WRITE : 0));
    struct ref_map *m = ref_map(p, page);
    AGREE(r, result == (m ? 0 : -ENOMEM), "mprotect: %d", result);
    if (m)
        m->writable = writable;
}

static void op_memaccess(struct run *r, int pid, bool write)
{
    struct ref_proc *p = &r->ref.procs[pid];
    uint64_t page = pick_page(r, p);
    unsigned char byte = pick_byte(r);
    memset(r->page, byte, PAGE);
    int result = write ? sv6_memwrite(r->procs[pid], page * PAGE, r->page, PAGE)
                       : sv6_memread(r->procs[pid], page * PAGE, r->page, PAGE);
    struct ref_map *m = ref_map(p, page);
    if (!m || (write && !m->writable)) {
        AGREE(r, result == SV6_SIGSEGV, "memaccess: %d, expected SIGSEGV", result);
        return;
    }
    if (m->anon) {
        AGREE(r, result == 0, "anonymous memaccess: %d", result);
        if (write)
            m->anondata = byte;
        else
            AGREE(r, unit_value(r, r->page) == m->anondata, "memread of anonymous memory");
        return;
    }
    struct ref_inode *in = &r->ref.inodes[m->inode];
    if (m->off >= in->length) {
        AGREE(r, result == SV6_SIGBUS, "memaccess past the end: %d", result);
        return;
    }
    AGREE(r, result == 0, "memaccess: %d", result);
    if (write)
        in->data[m->off] = byte;
    else
        AGREE(r, unit_value(r, r->page) == in->data[m->off], "memread of a file");
}

/* A socket call on one of cores 0-2, then back on the run's own core: sends into an
 * unordered socket fill their partitions' shares of the capacity and spill, receives
 * steal, and the socket must still be full and empty exactly when the model says. */
static ssize_t on_some_core(struct run *r, ssize_t (*call)(struct sv6_proc *, int, void *, size_t),
                            int pid, int fd, unsigned char *byte)
{
    unsigned own = sv6_core();
    sv6_core_set(check_below(&r->rng, 3));
    ssize_t result = call(r->procs[pid], fd, byte, 1);
    sv6_core_set(own);
    return result;
}

static ssize_t send_call(struct sv6_proc *p, int fd, void *buf, size_t n)
{
    return sv6_send(p, fd, buf, n);
}

static void op_sendto(struct run *r, int pid)
{
    int k = (int)check_below(&r->rng, NSOCKS);
    struct ref_sock *q = &r->ref.socks[k];
    unsigned char byte = (unsigned char)(0x41 + check_below(&r->rng, 4));
    ssize_t result = on_some_core(r, send_call, pid, SOCK_FD + k, &byte);
    if (q->length == SOCK_CAPACITY) {
        AGREE(r, result == -EAGAIN, "send to a full socket: %zd", result);
        return;
    }
    AGREE(r, result == 1, "send: %zd", result);
    q->data[q->length++] = byte;
}

static void op_recvfrom(struct run *r, int pid)
{
    int k = (int)check_below(&r->rng, NSOCKS);
    struct ref_sock *q = &r->ref.socks[k];
    unsigned char byte = 0;
    ssize_t result = on_some_core(r, sv6_recv, pid, SOCK_FD + k, &byte);
    if (q->length == 0) {
        AGREE(r, result == -EAGAIN, "receive from an empty socket: %zd", result);
        return;
    }
    AGREE(r, result == 1, "receive: %zd", result);
    /* Ordered: the oldest; unordered: any queued message (the implementation's choice). */
    int found = -1;
    for (int i = 0; i < (q->unordered ? q->length : 1) && found < 0; i++)
        if (q->data[i] == byte)
            found = i;
    AGREE(r, found >= 0, "received %#x, which the socket did not hold there", byte);
    memmove(&q->data[found], &q->data[found + 1], (size_t)(q->length - found - 1));
    q->length--;
}

/* fork (every fd) or posix_spawn (one fd as the child's 0): the caller is unchanged. */
static void op_spawn(struct run *r, int pid, bool all)
{
    int fd = pick_fd(r, &r->ref.procs[pid]);
    const struct sv6_spawn_fd action = {.parent_fd = fd, .child_fd = 0};
    struct sv6_proc *child = NULL;
    int result = sv6_spawn(r->procs[pid], &action, all ? SV6_SPAWN_ALL : 1, &child);
    if (!all && !ref_fd(&r->ref.procs[pid], fd)) {
        AGREE(r, result == -EBADF && !child, "posix_spawn of a free fd: %d", result);
        return;
    }
    AGREE(r, result == 0 && child, "%s: %d", all ? "fork" : "posix_spawn", result);
    sv6_proc_destroy(child);
}

static void step(struct run *r)
{
    int pid = (int)check_below(&r->rng, 2);
    unsigned op = check_below(&r->rng, NOPS);
    r->counts[op]++;
    switch (op) {
    case 0: op_open(r, pid); break;
    case 1: op_link(r, pid); break;
    case 2: op_unlink(r, pid); break;
    case 3: op_rename(r, pid); break;
    case 4: op_stat(r, pid); break;
    case 5: op_fstat(r, pid); break;
    case 6: op_lseek(r, pid); break;
    case 7: op_close(r, pid); break;
    case 8: op_pipe(r, pid); break;
    case 9: op_read(r, pid, false); break;
    case 10: op_write(r, pid, false); break;
    case 11: op_read(r, pid, true); break;
    case 12: op_write(r, pid, true); break;
    case 13: op_mmap(r, pid); break;
    case 14: op_munmap(r, pid); break;
    case 15: op_mprotect(r, pid); break;
    case 16: op_memaccess(r, pid, false); break;
    case 17: op_memaccess(r, pid, true); break;
    case 18: op_sendto(r, pid); break;
    case 19: op_recvfrom(r, pid); break;
    case 20: op_spawn(r, pid, true); break;
    default: op_spawn(r, pid, false); break;
    }
}

int check_conformance(const struct check_args *args)
{
    /* Many short sequences from fresh state: each keeps the small state space
     * (4 names, a handful of fds and pages) dense with interesting cases. */
    enum { SEQUENCE = 200 };
    struct run *r = calloc(1, sizeof *r);
    CHECK(r, "out of memory");
    unsigned long sequences = 0;
    for (unsigned long done = 0; done < args->ops; sequences++) {
        memset(&r->ref, 0, sizeof r->ref);
        for (int k = 0; k < NAMES; k++)
            r->ref.names[k] = -1;
        for (int pid = 0; pid < 2; pid++)
            for (int i = 0; i < MAX_FDS; i++)
                r->ref.procs[pid].fds[i].fd = -1;
        r->rng = args->seed * 0x9e3779b97f4a7c15ull + sequences + 1;
        /* Odd seeds: the shared link-count baseline, which must agree too. */
        r->world = sv6_world_create(args->seed % 2 ? SV6_WORLD_SHARED_NLINK : 0);
        r->procs[0] = sv6_proc_create(r->world);
        r->procs[1] = sv6_proc_create(r->world);
        for (int k = 0; k < NSOCKS; k++) {
            r->ref.socks[k].unordered = k == 1;
            int fd = sv6_socket(r->procs[0], k == 1, 0);
            CHECK(fd >= 0 && sv6_socket_capacity(r->procs[0], fd, SOCK_CAPACITY) == 0, "socket");
            CHECK(sv6_fd_install(r->procs[0], SOCK_FD + k, r->procs[0], fd) == 0 &&
                      sv6_fd_install(r->procs[1], SOCK_FD + k, r->procs[0], fd) == 0,
                  "installing a socket");
            sv6_close(r->procs[0], fd);
        }
        for (unsigned i = 0; i < SEQUENCE && done < args->ops; i++, done++) {
            r->step = done;
            step(r);
            if (check_below(&r->rng, 16) == 0)
                sv6_world_tick(r->world); /* frees must not change results */
        }
        sv6_proc_destroy(r->procs[0]);
        sv6_proc_destroy(r->procs[1]);
        sv6_world_destroy(r->world);
    }
    printf("ok, %lu operations in %lu sequences agree with the reference (", args->ops, sequences);
    for (int op = 0; op < NOPS; op++)
        printf("%s%lu", op ? " " : "", r->counts[op]);
    printf(" per operation)\n");
    free(r);
    return 0;
}
