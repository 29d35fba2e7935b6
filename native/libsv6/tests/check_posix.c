/* check_posix.c - the POSIX layer: each operation's results and errors, files
 * outliving their names, spawn's fd tables, and under threads on two processes
 * with self-ticking frees meanwhile (no ticker): file contents, link counts and
 * mappings stay right, and everything is freed at the end (LeakSanitizer). */
#include "check.h"

#include "sv6/sv6.h"
#include "sv6/core.h"
#include "sv6/ebr.h"

#include "../src/sv6_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#define PAGE SV6_PAGE_SIZE

static uint64_t nlink_of(struct sv6_proc *p, const char *name)
{
    struct sv6_stat st;
    CHECK(sv6_stat(p, name, &st) == 0, "stat %s", name);
    return st.nlink;
}

static void check_names(struct sv6_proc *p0)
{
    CHECK(sv6_open(p0, "a", 0) == -ENOENT, "open without O_CREAT");
    CHECK(sv6_open(p0, "a", O_CREAT) == 0, "lowest fd 0");
    CHECK(sv6_open(p0, "a", O_CREAT | O_EXCL) == -EEXIST, "O_EXCL");
    CHECK(sv6_open(p0, "a", O_CREAT) == 1, "fd 1");
    CHECK(sv6_link(p0, "a", "b") == 0 && nlink_of(p0, "a") == 2, "link");
    CHECK(sv6_link(p0, "a", "b") == -EEXIST, "link onto a name");
    CHECK(sv6_link(p0, "zz", "c") == -ENOENT, "link of a missing name");
    struct sv6_stat st, sx;
    CHECK(sv6_fstat(p0, 0, &st) == 0 && st.nlink == 2 && st.size == 0, "fstat");
    CHECK(sv6_fstatx(p0, 0, SV6_STATX_INO | SV6_STATX_SIZE, &sx) == 0, "fstatx");
    CHECK(sx.ino == st.ino && sx.nlink == 0 && sx.mask == (SV6_STATX_INO | SV6_STATX_SIZE),
          "fstatx without the link count");
    CHECK(sv6_rename(p0, "b", "c") == 0 && nlink_of(p0, "c") == 2, "rename");
    CHECK(sv6_stat(p0, "b", &st) == -ENOENT, "renamed away");
    CHECK(sv6_rename(p0, "b", "c") == -ENOENT, "rename of a missing name");
    CHECK(sv6_open(p0, "d", O_CREAT) == 2, "create d");
    CHECK(sv6_rename(p0, "c", "d") == 0, "rename over d");
    CHECK(nlink_of(p0, "d") == 2, "d is a's inode now");
    CHECK(sv6_fstat(p0, 2, &st) == 0 && st.nlink == 0, "the old d has no name left");
    CHECK(sv6_rename(p0, "a", "d") == 0 && nlink_of(p0, "d") == 1, "rename onto a link");
    CHECK(sv6_unlink(p0, "d") == 0 && sv6_unlink(p0, "d") == -ENOENT, "unlink");
    CHECK(sv6_fstat(p0, 0, &st) == 0 && st.nlink == 0, "open after its last name went");
    for (int fd = 0; fd < 3; fd++)
        CHECK(sv6_close(p0, fd) == 0, "close %d", fd);
    CHECK(sv6_close(p0, 0) == -EBADF && sv6_close(p0, -1) == -EBADF, "close twice");
}

static void check_data(struct sv6_proc *p0, struct sv6_proc *p1)
{
    char buf[16] = {0};
    int fd = sv6_open(p0, "f", O_CREAT);
    CHECK(sv6_write(p0, fd, "hello", 5) == 5 && sv6_lseek(p0, fd, 0, SEEK_CUR) == 5, "write");
    int other = sv6_open(p1, "f", 0);
    CHECK(other == 0, "p1's own fd table starts at 0");
    CHECK(sv6_read(p1, other, buf, 16) == 5 && memcmp(buf, "hello", 5) == 0, "shared file");
    CHECK(sv6_read(p1, other, buf, 16) == 0, "end of file");
    CHECK(sv6_pwrite(p1, other, "XY", 2, 8) == 2, "pwrite past the end");
    CHECK(sv6_pread(p0, fd, buf, 16, 4) == 6 && memcmp(buf, "o\0\0\0XY", 6) == 0, "zeros");
    CHECK(sv6_pread(p0, fd, buf, 16, -1) == -EINVAL, "negative offset");
    CHECK(sv6_pwrite(p0, fd, "x", 1, (off_t)1 << 48) == -EFBIG, "past the largest file");
    CHECK(sv6_lseek(p0, fd, -1, SEEK_END) == 9 && sv6_lseek(p0, fd, -20, SEEK_CUR) == -EINVAL,
          "lseek");
    CHECK(sv6_lseek(p0, fd, 0, 42) == -EINVAL && sv6_lseek(p0, 9, 0, SEEK_SET) == -EBADF, "bad");
    int trunc = sv6_open(p0, "f", O_TRUNC);
    struct sv6_stat st;
    CHECK(sv6_fstat(p1, other, &st) == 0 && st.size == 0, "O_TRUNC");
    CHECK(sv6_pread(p0, fd, buf, 16, 0) == 0, "truncated");
    CHECK(sv6_pwrite(p0, fd, "Z", 1, 3) == 1 && sv6_pread(p0, fd, buf, 4, 0) == 4, "regrow");
    CHECK(memcmp(buf, "\0\0\0Z", 4) == 0, "truncated data reads as zeros after regrowth");

    int fds[2];
    CHECK(sv6_pipe(p0, fds) == 0 && fds[0] == 2 && fds[1] == 3, "pipe: %d %d", fds[0], fds[1]);
    CHECK(sv6_read(p0, fds[0], buf, 1) == -EAGAIN, "empty pipe");
    CHECK(sv6_write(p0, fds[1], "pq", 2) == 2 && sv6_read(p0, fds[0], buf, 1) == 1, "pipe io");
    CHECK(buf[0] == 'p' && sv6_read(p0, fds[0], buf, 8) == 1 && buf[0] == 'q', "pipe order");
    CHECK(sv6_read(p0, fds[1], buf, 1) == -EBADF && sv6_write(p0, fds[0], "x", 1) == -EBADF,
          "wrong pipe ends");
    CHECK(sv6_lseek(p0, fds[0], 0, SEEK_SET) == -ESPIPE, "lseek on a pipe");
    CHECK(sv6_pread(p0, fds[0], buf, 1, 0) == -ESPIPE, "pread on a pipe");
    CHECK(sv6_fstat(p0, fds[0], &st) == 0 && st.nlink == 1 && st.size == 0, "fstat of a pipe");

    int any = sv6_open(p0, "f", SV6_O_ANYFD);
    CHECK(any >> 16 == (int)sv6_core() + 1, "O_ANYFD fd %#x", any);
    CHECK(sv6_open(p0, "f", 0) == 4, "lowest fd unaffected by O_ANYFD");
    const int opened[] = {fd, trunc, fds[0], fds[1], any, 4};
    for (unsigned i = 0; i < sizeof opened / sizeof opened[0]; i++)
        CHECK(sv6_close(p0, opened[i]) == 0, "close %d", opened[i]);
    CHECK(sv6_close(p1, other) == 0, "close p1's");
}

static void check_vm(struct sv6_proc *p0, struct sv6_proc *p1)
{
    char buf[8];
    const uint64_t base = 1ull << 32;
    int64_t anon = sv6_mmap(p0, base, PAGE, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_FIXED,
                            -1, 0);
    CHECK(anon == (int64_t)base, "fixed anonymous mapping");
    CHECK(sv6_memread(p0, base + 10, buf, 4) == 0 && memcmp(buf, "\0\0\0\0", 4) == 0, "zeros");
    CHECK(sv6_memwrite(p0, base + PAGE - 2, "abcd", 4) == SV6_SIGSEGV, "write into a hole");
    CHECK(sv6_memwrite(p0, base + 1, "ab", 2) == 0, "anonymous write");
    /* Mapping a written anonymous page again gives zeros (an mmap that would
     * change nothing is skipped; this one changes the data). */
    CHECK(sv6_mmap(p0, base, PAGE, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
                  (int64_t)base &&
              sv6_memread(p0, base + 1, buf, 2) == 0 && memcmp(buf, "\0\0", 2) == 0,
          "a new anonymous mapping over written bytes");
    CHECK(sv6_memwrite(p0, base + 1, "ab", 2) == 0, "anonymous write");
    CHECK(sv6_memread(p1, base + 1, buf, 2) == SV6_SIGSEGV, "another address space");
    CHECK(sv6_mprotect(p0, base, PAGE, PROT_READ) == 0, "mprotect");
    CHECK(sv6_memwrite(p0, base, "x", 1) == SV6_SIGSEGV, "write to a read-only page");
    CHECK(sv6_memread(p0, base + 1, buf, 2) == 0 && memcmp(buf, "ab", 2) == 0, "still readable");
    CHECK(sv6_mprotect(p0, base + PAGE, PAGE, PROT_READ) == -ENOMEM, "mprotect of a hole");
    CHECK(sv6_munmap(p0, base, PAGE) == 0 && sv6_memread(p0, base, buf, 1) == SV6_SIGSEGV,
          "munmap");
    CHECK(sv6_munmap(p0, base, PAGE) == 0, "munmap of a hole");
    CHECK(sv6_munmap(p0, base + 1, PAGE) == -EINVAL, "unaligned");

    int fd = sv6_open(p1, "m", O_CREAT);
    CHECK(sv6_pwrite(p1, fd, "page", 4, PAGE) == 4, "a file of two pages");
    int64_t at = sv6_mmap(p1, 0, 3 * PAGE, PROT_READ | PROT_WRITE, 0, fd, 0);
    CHECK(at > 0 && at % PAGE == 0, "mmap anywhere: %lld", (long long)at);
    uint64_t a = (uint64_t)at;
    CHECK(sv6_memwrite(p1, a + PAGE - 1, "12", 2) == 0, "write across two file pages");
    CHECK(sv6_pread(p1, fd, buf, 6, PAGE - 1) == 5 && memcmp(buf, "12age", 5) == 0,
          "a mapping writes through to the file");
    CHECK(sv6_memread(p1, a + PAGE + 3, buf, 2) == 0 && buf[0] == 'e' && buf[1] == 0,
          "past the end in the last page reads zeros");
    CHECK(sv6_memread(p1, a + 2 * PAGE, buf, 1) == SV6_SIGBUS, "a page past the end");
    CHECK(sv6_memwrite(p1, a + 2 * PAGE, "x", 1) == SV6_SIGBUS, "a page past the end");
    int64_t second = sv6_mmap(p1, 0, PAGE, PROT_READ, 0, fd, PAGE);
    CHECK(second > 0 && (uint64_t)second != a, "a second mapping elsewhere");
    CHECK(sv6_memread(p1, (uint64_t)second, buf, 4) == 0 && memcmp(buf, "2age", 4) == 0,
          "file offset");
    CHECK(sv6_mmap(p1, 0, PAGE, PROT_READ, 0, 99, 0) == -EBADF, "mmap of a bad fd");
    CHECK(sv6_mmap(p1, 0, PAGE, PROT_READ, 0, fd, 1) == -EINVAL, "unaligned offset");
    int fds[2];
    sv6_pipe(p1, fds);
    CHECK(sv6_mmap(p1, 0, PAGE, PROT_READ, 0, fds[0], 0) == -ENODEV, "mmap of a pipe");
    CHECK(sv6_mmap(p1, 0, PAGE, PROT_READ, 0, fds[1], 0) == -EACCES, "mmap of a write end");
    /* The mapping keeps the file alive after its fd and name are gone. */
    CHECK(sv6_close(p1, fd) == 0 && sv6_unlink(p1, "m") == 0, "close, unlink");
    CHECK(sv6_memread(p1, a + PAGE, buf, 4) == 0 && memcmp(buf, "2age", 4) == 0, "kept alive");
    /* Replacing a mapping with MAP_FIXED. */
    CHECK(sv6_mmap(p1, a, PAGE, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
              (int64_t)a,
          "fixed over a mapping");
    CHECK(sv6_memread(p1, a, buf, 1) == 0 && buf[0] == 0, "replaced by zeros");
    /* One that keeps the protection replaces only what the page shows: the
     * slot keeps its mapping, whose protection mprotect and a faulting
     * memwrite read. */
    CHECK(sv6_mprotect(p1, a + PAGE, PAGE, PROT_READ) == 0, "the file page read-only");
    void *kept = radix_get(&p1->vm, a / PAGE + 1);
    CHECK(sv6_mmap(p1, a + PAGE, PAGE, PROT_READ, MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
                  (int64_t)(a + PAGE) &&
              radix_get(&p1->vm, a / PAGE + 1) == kept,
          "an mmap that keeps the protection keeps the mapping");
    CHECK(sv6_memread(p1, a + PAGE, buf, 1) == 0 && buf[0] == 0 &&
              sv6_memwrite(p1, a + PAGE, "x", 1) == SV6_SIGSEGV,
          "and shows the new page, read-only");
    CHECK(sv6_mmap(p1, a + PAGE, PAGE, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_FIXED, -1,
                   0) == (int64_t)(a + PAGE) &&
              sv6_memwrite(p1, a + PAGE, "x", 1) == 0,
          "one that changes it maps the page writable");
    sv6_close(p1, fds[0]);
    sv6_close(p1, fds[1]);
}

/* Fork-style spawn copies the address space: the child sees the parent's pages;
 * anonymous ones are its own copy from then on, file ones stay shared. */
static void check_fork_memory(struct sv6_proc *p0, int fd)
{
    const uint64_t anon = 1ull << 33, file = anon + SV6_PAGE_SIZE;
    char c;
    CHECK(sv6_mmap(p0, anon, SV6_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_FIXED, -1,
                   0) == (int64_t)anon, "map an anonymous page");
    CHECK(sv6_memwrite(p0, anon, "a", 1) == 0, "write the parent's page");
    CHECK(sv6_mmap(p0, file, SV6_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_FIXED, fd, 0) ==
          (int64_t)file, "map the file");
    struct sv6_proc *forked;
    CHECK(sv6_spawn(p0, NULL, SV6_SPAWN_ALL, &forked) == 0, "fork-style spawn");
    CHECK(sv6_memread(forked, anon, &c, 1) == 0 && c == 'a', "the child has the parent's page");
    CHECK(sv6_memwrite(forked, anon, "b", 1) == 0 && sv6_memread(p0, anon, &c, 1) == 0 && c == 'a',
          "the child's anonymous page is a copy");
    CHECK(sv6_memwrite(forked, file, "F", 1) == 0 && sv6_memread(p0, file, &c, 1) == 0 && c == 'F',
          "a file page stays shared");
    struct sv6_proc *spawned;
    const struct sv6_spawn_fd none[] = {{fd, 0}};
    CHECK(sv6_spawn(p0, none, 1, &spawned) == 0, "posix_spawn-style spawn");
    CHECK(sv6_memread(spawned, anon, &c, 1) == SV6_SIGSEGV, "posix_spawn starts with no memory");
    sv6_proc_destroy(spawned);
    sv6_proc_destroy(forked);
    CHECK(sv6_munmap(p0, anon, 2 * SV6_PAGE_SIZE) == 0, "unmap");
}

static void check_spawn_and_sockets(struct sv6_proc *p0)
{
    char buf[8];
    int fd = sv6_open(p0, "s", O_CREAT);
    sv6_write(p0, fd, "spawned", 7);
    int sock = sv6_socket(p0, true, SV6_O_ANYFD);
    CHECK(sock >> 16 == (int)sv6_core() + 1, "socket with O_ANYFD");
    struct sv6_proc *child;
    const struct sv6_spawn_fd map[] = {{fd, 0}, {sock, 5}};
    CHECK(sv6_spawn(p0, map, 2, &child) == 0, "spawn");
    CHECK(sv6_read(child, 0, buf, 8) == 0, "the child shares the file offset");
    CHECK(sv6_pread(child, 0, buf, 7, 0) == 7 && memcmp(buf, "spawned", 7) == 0, "child's fd");
    CHECK(sv6_close(child, 1) == -EBADF, "only the listed fds");
    CHECK(sv6_send(child, 5, "hi", 2) == 2, "child sends");
    CHECK(sv6_recv(p0, sock, buf, 8) == 2 && memcmp(buf, "hi", 2) == 0, "parent receives");
    CHECK(sv6_recv(p0, sock, buf, 8) == -EAGAIN, "one datagram");
    CHECK(sv6_send(p0, fd, "x", 1) == -ENOTSOCK, "send on a file");
    const struct sv6_spawn_fd bad[] = {{77, 0}};
    struct sv6_proc *none = NULL;
    CHECK(sv6_spawn(p0, bad, 1, &none) == -EBADF && !none, "spawn with a bad fd");
    struct sv6_proc *forked;
    CHECK(sv6_spawn(p0, NULL, SV6_SPAWN_ALL, &forked) == 0, "fork-style spawn");
    CHECK(sv6_write(forked, sock, "z", 1) == 1 && sv6_read(child, 5, buf, 1) == 1, "shared");
    sv6_proc_destroy(child);
    sv6_proc_destroy(forked);
    check_fork_memory(p0, fd);
    CHECK(sv6_close(p0, fd) == 0 && sv6_close(p0, sock) == 0, "close");
}

/* The inode of fd, which stays while fd is open. */
static struct sv6_inode *inode_of(struct sv6_proc *p, int fd)
{
    ebr_enter();
    struct sv6_inode *inode = sv6_file_at(p, fd)->inode;
    ebr_exit();
    return inode;
}

static uint64_t size_of(struct sv6_proc *p, int fd)
{
    struct sv6_stat st;
    CHECK(sv6_fstat(p, fd, &st) == 0, "fstat %d", fd);
    return st.size;
}

/* Which words the length is made of and who writes them: a write past the end
 * writes nothing of the inode but its core's mark and its own page's slot (the
 * slots of the pages below it stay), a write inside a page's end swaps the page's bytes and
 * leaves its end, and a read past the end reads no slot below its page (a
 * planted holder below it, whose end would reach past the read, is not
 * seen).  The length stays exact through truncations. */
static void check_length(struct sv6_proc *p0)
{
    static char page[PAGE];
    char byte;
    sv6_core_set(1);
    int fd = sv6_open(p0, "len", O_CREAT);
    for (int i = 0; i < 3; i++)
        CHECK(sv6_pwrite(p0, fd, page, PAGE, i * PAGE) == PAGE, "fill page %d", i);
    ebr_enter();
    struct sv6_inode *inode = inode_of(p0, fd);
    static struct sv6_inode before;
    memcpy(&before, inode, sizeof before);
    struct page_holder *below[3];
    for (unsigned i = 0; i < 3; i++)
        below[i] = radix_get(&inode->pages, i);
    sv6_core_set(2);
    CHECK(sv6_pwrite(p0, fd, "y", 1, 3 * PAGE) == 1 && size_of(p0, fd) == 3 * PAGE + 1,
          "write past the end");
    static struct sv6_inode after;
    memcpy(&after, inode, sizeof after);
    CHECK(atomic_load(&after.marks[2].pages) == 4, "a page past the end raises its core's mark");
    memcpy(&after.marks[2], &before.marks[2], sizeof after.marks[2]);
    memcpy(&after.writers[2], &before.writers[2], sizeof after.writers[2]);
    /* Page 3's slot is a direct slot (RADIX_DIRECT), so a word of the inode. */
    CHECK(atomic_load(&after.pages.direct[3]) != NULL, "page 3's slot is in the inode");
    atomic_store(&after.pages.direct[3], NULL);
    CHECK(memcmp(&before, &after, sizeof before) == 0,
          "a write past the end writes no inode word but its core's mark, lock and clock");
    for (unsigned i = 0; i < 3; i++)
        CHECK(radix_get(&inode->pages, i) == below[i], "slot %u kept", i);
    struct page_holder *holder = radix_get(&inode->pages, 3);
    CHECK(holder && atomic_load(&holder->end) == 1, "page 3 ends after its byte");
    struct page_copy *bytes = atomic_load(&below[1]->bytes);
    CHECK((uintptr_t)bytes->bytes % SV6_CACHELINE == 0,
          "a page copy's bytes share a line with malloc's header");
    CHECK(sv6_pwrite(p0, fd, "x", 1, PAGE + 5) == 1, "write inside");
    CHECK(atomic_load(&below[1]->end) == PAGE && atomic_load(&below[1]->bytes) != bytes &&
              radix_get(&inode->pages, 1) == below[1],
          "a write inside swaps the bytes only");
    struct page_holder planted = {.stamp = 1, .end = 2 * PAGE}; /* live, bytes up to page 6 */
    CHECK(radix_replace(&inode->pages, 4, NULL, &planted), "plant a holder in slot 4");
    CHECK(sv6_pread(p0, fd, &byte, 1, 5 * PAGE) == 0, "a read at page 5 reads no slot below");
    CHECK(size_of(p0, fd) == 3 * PAGE + 1, "fstat goes to the marked page, walking no slot");
    CHECK(radix_replace(&inode->pages, 4, &planted, NULL), "take the planted holder out");
    ebr_exit();
    int again = sv6_open(p0, "len", O_TRUNC);
    CHECK(size_of(p0, fd) == 0 && sv6_pread(p0, fd, &byte, 1, 0) == 0, "truncated");
    CHECK(sv6_pwrite(p0, fd, "z", 1, 2 * PAGE + 7) == 1 && size_of(p0, fd) == 2 * PAGE + 8,
          "a page after holes");
    CHECK(sv6_pread(p0, fd, &byte, 1, PAGE) == 1 && byte == 0, "a hole inside reads a zero");
    CHECK(sv6_pread(p0, fd, &byte, 1, 2 * PAGE + 8) == 0, "the end inside the last page");
    CHECK(sv6_close(p0, fd) == 0 && sv6_close(p0, again) == 0 && sv6_unlink(p0, "len") == 0,
          "clean up");
    sv6_core_set(2);
}

/* The inode's cache lines that differ between two copies of it. */
static void lines_changed(const struct sv6_inode *a, const struct sv6_inode *b,
                          bool changed[sizeof *a / SV6_CACHELINE])
{
    for (size_t l = 0; l < sizeof *a / SV6_CACHELINE; l++)
        changed[l] = memcmp((const char *)a + l * SV6_CACHELINE,
                            (const char *)b + l * SV6_CACHELINE, SV6_CACHELINE) != 0;
}

/* Whether line l of an inode holds part of field [start, start + size). */
static bool line_of(size_t l, size_t start, size_t size)
{
    return l * SV6_CACHELINE < start + size && start < (l + 1) * SV6_CACHELINE;
}

/* Two O_TRUNCs of one non-empty file on two cores write no common line (each
 * writes only its own core's truncation stamp, and no page slot); the file is
 * empty after them, a write on a third core after them shows without what they
 * killed, and that core's first write frees the killed pages. */
static void check_truncation_lines(struct sv6_proc *p0)
{
    static char page[PAGE];
    static struct sv6_inode before, after_one, after_two;
    static bool one[sizeof before / SV6_CACHELINE], two[sizeof before / SV6_CACHELINE];
    char byte;
    sv6_core_set(0);
    int fd = sv6_open(p0, "trunc", O_CREAT);
    memset(page, 'p', PAGE);
    for (int i = 0; i < 3; i++)
        CHECK(sv6_pwrite(p0, fd, page, PAGE, i * PAGE) == PAGE, "fill page %d", i);
    ebr_enter();
    struct sv6_inode *inode = inode_of(p0, fd);
    struct page_holder *holders[3];
    for (unsigned i = 0; i < 3; i++)
        holders[i] = radix_get(&inode->pages, i);
    memcpy(&before, inode, sizeof before);
    sv6_core_set(1);
    int first = sv6_open(p0, "trunc", O_TRUNC);
    memcpy(&after_one, inode, sizeof after_one);
    sv6_core_set(2);
    int second = sv6_open(p0, "trunc", O_TRUNC | SV6_O_ANYFD);
    memcpy(&after_two, inode, sizeof after_two);
    lines_changed(&before, &after_one, one);
    lines_changed(&after_one, &after_two, two);
    for (size_t l = 0; l < sizeof before / SV6_CACHELINE; l++) {
        CHECK(!(one[l] && two[l]), "inode line %zu written by both truncations", l);
        for (unsigned core = 1; core <= 2; core++)
            CHECK(!(core == 1 ? one : two)[l] ||
                      line_of(l, offsetof(struct sv6_inode, truncation_stamps[core]),
                              sizeof inode->truncation_stamps[core]),
                  "the truncation on core %u wrote inode line %zu, not its stamp's", core, l);
    }
    for (unsigned i = 0; i < 3; i++)
        CHECK(radix_get(&inode->pages, i) == holders[i], "slot %u written by a truncation", i);
    ebr_exit();
    CHECK(first >= 0 && second >= 0 && size_of(p0, fd) == 0 &&
              sv6_pread(p0, fd, &byte, 1, 0) == 0 && sv6_lseek(p0, fd, 0, SEEK_END) == 0,
          "empty after both truncations");
    sv6_core_set(3);
    CHECK(sv6_pwrite(p0, fd, "w", 1, PAGE) == 1 && size_of(p0, fd) == PAGE + 1,
          "a write after the truncations makes the length");
    CHECK(sv6_pread(p0, fd, page, 2, PAGE - 1) == 2 && page[0] == 0 && page[1] == 'w',
          "a killed page reads as a hole below the new one");
    ebr_enter();
    CHECK(!radix_get(&inode->pages, 0) && !radix_get(&inode->pages, 2),
          "the first write after a truncation frees the killed pages");
    ebr_exit();
    CHECK(sv6_close(p0, fd) == 0 && sv6_close(p0, first) == 0 && sv6_close(p0, second) == 0 &&
              sv6_unlink(p0, "trunc") == 0,
          "clean up");
    sv6_core_set(2);
}

/* A call run on a thread of its own, so that a check can hold what the call
 * must not need (a lock, a truncation under way) and see it return anyway. */
struct background_call {
    int64_t (*call)(void *arg);
    void *arg;
    pthread_t thread;
    atomic_bool returned;
    int64_t result;
};

static void *background_main(void *arg)
{
    struct background_call *c = arg;
    c->result = c->call(c->arg);
    atomic_store(&c->returned, true);
    return NULL;
}

/* Starts c's call and waits for it up to ms milliseconds: whether it returned
 * by then.  The caller releases what it holds, then calls background_join. */
static bool background_returns(struct background_call *c, int ms)
{
    atomic_init(&c->returned, false);
    CHECK(pthread_create(&c->thread, NULL, background_main, c) == 0, "thread");
    for (int waited = 0; waited < ms && !atomic_load(&c->returned); waited++)
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 1000 * 1000}, NULL);
    return atomic_load(&c->returned);
}

static void background_join(struct background_call *c)
{
    pthread_join(c->thread, NULL);
}

struct fd_call {
    struct sv6_proc *p;
    int fd;
    uint64_t addr;
};

static int64_t read_byte(void *arg)
{
    struct fd_call *c = arg;
    char byte;
    return sv6_read(c->p, c->fd, &byte, 1);
}

static int64_t memwrite_byte(void *arg)
{
    struct fd_call *c = arg;
    return sv6_memwrite(c->p, c->addr, "x", 1);
}

/* A read at the end of the file returns 0 without the offset lock (another
 * thread holds it meanwhile) and without changing the offset. */
static void check_read_at_end(struct sv6_proc *p0)
{
    int fd = sv6_open(p0, "end", O_CREAT);
    CHECK(sv6_write(p0, fd, "ab", 2) == 2, "write");
    ebr_enter();
    struct sv6_file *f = sv6_file_at(p0, fd);
    ebr_exit();
    uint64_t changes = atomic_load(&f->off_changes);
    sv6_lock(&f->off_lock);
    struct fd_call args = {.p = p0, .fd = fd};
    struct background_call r = {.call = read_byte, .arg = &args};
    CHECK(background_returns(&r, 2000) && r.result == 0,
          "a read at the end returns 0 without the offset lock");
    sv6_unlock(&f->off_lock);
    background_join(&r);
    CHECK(atomic_load(&f->off_changes) == changes && sv6_lseek(p0, fd, 0, SEEK_CUR) == 2,
          "and changes no offset");
    char buf[2];
    CHECK(sv6_lseek(p0, fd, 1, SEEK_SET) == 1 && sv6_read(p0, fd, buf, 2) == 1 && buf[0] == 'b',
          "a read inside");
    CHECK(sv6_close(p0, fd) == 0 && sv6_unlink(p0, "end") == 0, "clean up");
}

static int64_t truncate_on_core_1(void *arg)
{
    sv6_core_set(1);
    return sv6_open(arg, "wait", O_TRUNC);
}

static int64_t write_on_core_1(void *arg)
{
    struct fd_call *c = arg;
    sv6_core_set(1);
    return sv6_pwrite(c->p, c->fd, "n", 1, 0);
}

/* A write and a truncation that overlap: the truncation waits for a write
 * that runs (its clock held running here) and then kills what the write was
 * stamped with; a write waits for a truncation under way (its stamp held
 * running here) and then comes after it. */
static void check_write_truncation_order(struct sv6_proc *p0)
{
    int fd = sv6_open(p0, "wait", O_CREAT);
    CHECK(sv6_pwrite(p0, fd, "old", 3, 0) == 3, "write");
    struct sv6_inode *inode = inode_of(p0, fd);
    _Atomic uint64_t *clock = &inode->writers[3].clock;
    uint64_t idle = atomic_load(clock);
    atomic_store(clock, 2 * 40 + 1); /* a write of stamp 40 runs on core 3 */
    struct background_call t = {.call = truncate_on_core_1, .arg = p0};
    CHECK(!background_returns(&t, 200), "a truncation waits for a running write");
    atomic_store(clock, 2 * 40);
    background_join(&t);
    uint64_t stamp = atomic_load(&inode->truncation_stamps[1].word);
    CHECK(t.result >= 0 && stamp == 2 * 41, "the truncation kills stamp 40: %lu",
          (unsigned long)stamp);
    atomic_store(clock, idle);
    CHECK(sv6_pwrite(p0, fd, "old", 3, 0) == 3, "write again");
    atomic_fetch_add(&inode->truncation_stamps[2].word, 1); /* a truncation runs on core 2 */
    struct fd_call args = {.p = p0, .fd = fd};
    struct background_call w = {.call = write_on_core_1, .arg = &args};
    CHECK(!background_returns(&w, 200), "a write waits for a truncation under way");
    /* It ends killing what was written after the first one (stamp 42). */
    atomic_store(&inode->truncation_stamps[2].word, 2 * 42);
    background_join(&w);
    char buf[4];
    CHECK(w.result == 1 && sv6_pread(p0, fd, buf, 4, 0) == 1 && buf[0] == 'n',
          "the write comes after the truncation");
    CHECK(sv6_close(p0, t.result) == 0 && sv6_close(p0, fd) == 0 && sv6_unlink(p0, "wait") == 0,
          "clean up");
}

/* A memwrite of a mapped page wholly past the end faults without reaching the
 * writers (a truncation is left under way here, which a writer waits for), as
 * a memread there does. */
static void check_memwrite_past_end(struct sv6_proc *p0)
{
    int fd = sv6_open(p0, "past", O_CREAT);
    CHECK(sv6_pwrite(p0, fd, "ab", 2, PAGE) == 2, "a file of two pages");
    int64_t at = sv6_mmap(p0, 0, 3 * PAGE, PROT_READ | PROT_WRITE, 0, fd, 0);
    CHECK(at > 0, "mmap");
    struct sv6_inode *inode = inode_of(p0, fd);
    atomic_fetch_add(&inode->truncation_stamps[0].word, 1);
    struct fd_call past = {.p = p0, .addr = (uint64_t)at + 2 * PAGE};
    struct background_call w = {.call = memwrite_byte, .arg = &past};
    bool returned = background_returns(&w, 2000);
    atomic_fetch_sub(&inode->truncation_stamps[0].word, 1);
    background_join(&w);
    CHECK(returned && w.result == SV6_SIGBUS,
          "a memwrite past the end faults while a truncation runs");
    CHECK(sv6_munmap(p0, (uint64_t)at, 3 * PAGE) == 0 && sv6_close(p0, fd) == 0 &&
              sv6_unlink(p0, "past") == 0,
          "clean up");
}

/* A write of bytes a file page already holds publishes no page: readers of the
 * page share nothing with it.  Zeros into a hole make a page, so that the write
 * reads no slot above its own (which a write growing the file fills). */
static void check_unchanged_page_write(struct sv6_proc *p0)
{
    char buf[4];
    int fd = sv6_open(p0, "same", O_CREAT);
    CHECK(sv6_pwrite(p0, fd, "abc", 3, 0) == 3, "write");
    int64_t at = sv6_mmap(p0, 0, PAGE, PROT_READ | PROT_WRITE, 0, fd, 0);
    CHECK(at > 0, "mmap");
    struct sv6_inode *inode = inode_of(p0, fd);
    struct page_holder *holder = radix_get(&inode->pages, 0);
    struct page_copy *bytes = atomic_load(&holder->bytes);
    CHECK(sv6_pwrite(p0, fd, "bc", 2, 1) == 2 && sv6_memwrite(p0, (uint64_t)at, "a", 1) == 0 &&
              sv6_write(p0, fd, "ab", 2) == 2,
          "writes of the bytes there");
    CHECK(atomic_load(&holder->bytes) == bytes, "publish no page");
    CHECK(sv6_pwrite(p0, fd, "e", 1, 3 * PAGE) == 1, "a page after a hole");
    CHECK(sv6_pwrite(p0, fd, "\0\0", 2, 2 * PAGE) == 2 && radix_get(&inode->pages, 2) &&
              size_of(p0, fd) == 3 * PAGE + 1,
          "zeros into a hole below another page make a page; the length stays");
    CHECK(sv6_pwrite(p0, fd, "\0", 1, 5 * PAGE) == 1 && radix_get(&inode->pages, 5) &&
              size_of(p0, fd) == 5 * PAGE + 1,
          "zeros past the end make a page: the length is where the last page ends");
    CHECK(sv6_pwrite(p0, fd, "abd", 3, 0) == 3 && atomic_load(&holder->bytes) != bytes,
          "a changed byte publishes a page");
    CHECK(sv6_pread(p0, fd, buf, 4, 0) == 4 && memcmp(buf, "abd\0", 4) == 0, "read back");
    CHECK(sv6_munmap(p0, (uint64_t)at, PAGE) == 0 && sv6_close(p0, fd) == 0 &&
              sv6_unlink(p0, "same") == 0,
          "clean up");
}

/* A file released at its close (fdtable.h) only while its fd held its one
 * reference: copied to another fd, in the same process or a child, it stays for
 * the copy (under AddressSanitizer a use after free stops the check). */
static void check_private_close(struct sv6_world *w, struct sv6_proc *p)
{
    int fd = sv6_open(p, "private", O_CREAT | SV6_O_ANYFD);
    CHECK(fd >= 0 && sv6_pwrite(p, fd, "pv", 2, 0) == 2, "create private");
    CHECK(sv6_fd_install(p, 900, p, fd) == 0, "copy to fd 900");
    CHECK(sv6_close(p, fd) == 0, "close the O_ANYFD fd");
    char buf[2];
    CHECK(sv6_pread(p, 900, buf, 2, 0) == 2 && !memcmp(buf, "pv", 2), "the copy reads");
    CHECK(sv6_close(p, 900) == 0, "close the copy");
    struct sv6_proc *child = sv6_proc_create(w);
    fd = sv6_open(p, "private", SV6_O_ANYFD);
    CHECK(fd >= 0 && sv6_fd_install(child, 7, p, fd) == 0, "copy into a child");
    CHECK(sv6_close(p, fd) == 0, "close the parent's");
    CHECK(sv6_pread(child, 7, buf, 2, 0) == 2 && !memcmp(buf, "pv", 2), "the child's reads");
    sv6_proc_destroy(child);
    int lowest = sv6_open(p, "private", 0), high = 3 << 16 | 5;
    CHECK(lowest >= 0 && sv6_fd_install(p, high, p, lowest) == 0, "copy to an O_ANYFD number");
    CHECK(sv6_close(p, high) == 0, "close the copy in the partition");
    CHECK(sv6_pread(p, lowest, buf, 2, 0) == 2 && !memcmp(buf, "pv", 2), "the lowest fd reads");
    CHECK(sv6_close(p, lowest) == 0, "close the lowest fd");
    CHECK(sv6_unlink(p, "private") == 0, "unlink private");
}

int check_posix_unit(const struct check_args *args)
{
    (void)args;
    sv6_core_set(2);
    struct sv6_world *w = sv6_world_create(0);
    struct sv6_proc *p0 = sv6_proc_create(w), *p1 = sv6_proc_create(w);
    check_names(p0);
    check_data(p0, p1);
    check_vm(p0, p1);
    check_spawn_and_sockets(p0);
    check_length(p0);
    check_truncation_lines(p0);
    check_write_truncation_order(p0);
    check_read_at_end(p0);
    check_memwrite_past_end(p0);
    check_unchanged_page_write(p0);
    check_private_close(w, p0);
    sv6_proc_destroy(p0);
    sv6_proc_destroy(p1);
    sv6_world_destroy(w);
    printf("ok, posix unit checks passed\n");
    return 0;
}

/* ------------------------------------------------------------ stress */

#define MAX_STRESS_THREADS 64 /* as many as check_run_threads allows */

struct posix_stress {
    struct sv6_world *world;
    struct sv6_proc *procs[2];
    int shared_fd[2]; /* "shared" open in each process */
    uint64_t shared_anon; /* two anonymous pages here in each process */
    int pipe_fds[2];  /* one pipe, at the same fds in both processes */
    _Atomic unsigned long ops, links, stats, pipe_sent, pipe_received;
    unsigned threads;
    _Atomic int any_fd[MAX_STRESS_THREADS]; /* each thread's O_ANYFD fd open now, or -1 */
};

static void posix_body(unsigned index, void *arg)
{
    struct posix_stress *s = arg;
    struct sv6_proc *p = s->procs[index % 2];
    uint64_t rng = index * 7919 + 11;
    char name[32], alias[32], buf[PAGE], expect[PAGE];
    snprintf(name, sizeof name, "own%u", index);
    snprintf(alias, sizeof alias, "link%u", index);
    memset(expect, 'a' + (int)index, sizeof expect);
    int fd = sv6_open(p, name, O_CREAT | O_EXCL | SV6_O_ANYFD);
    CHECK(fd >= 0, "create %s", name);
    CHECK(sv6_pwrite(p, fd, expect, PAGE, 0) == PAGE, "pwrite");
    const uint64_t page = (1ull << 32) + (uint64_t)index * 4 * PAGE;
    unsigned long ops = 0, links = 0, stats = 0, sent = 0, received = 0;
    uint32_t last_seen[MAX_STRESS_THREADS] = {0}; /* per writer, of its records read here */
    while (!check_stop()) {
        ops++;
        switch (check_below(&rng, 13)) {
        case 0: { /* open/close of the own file, any fd */
            int again = sv6_open(p, name, check_below(&rng, 2) ? SV6_O_ANYFD : 0);
            CHECK(again >= 0, "open %s: %d", name, again);
            CHECK(sv6_pread(p, again, buf, PAGE, 0) == PAGE && !memcmp(buf, expect, PAGE),
                  "contents of %s", name);
            CHECK(sv6_close(p, again) == 0, "close");
            break;
        }
        case 1: /* link and unlink the shared file: others fstat it */
            CHECK(sv6_link(p, "shared", alias) == 0, "link shared %s", alias);
            CHECK(sv6_unlink(p, alias) == 0, "unlink %s", alias);
            links++;
            break;
        case 2: {
            struct sv6_stat st;
            CHECK(sv6_fstat(p, s->shared_fd[index % 2], &st) == 0, "fstat");
            CHECK(st.nlink >= 1 && st.nlink <= 1 + s->threads, "nlink %lu",
                  (unsigned long)st.nlink);
            CHECK(sv6_fstatx(p, s->shared_fd[index % 2], SV6_STATX_SIZE, &st) == 0, "fstatx");
            stats++;
            break;
        }
        case 3: { /* map the own file, check it, unmap */
            int64_t at = sv6_mmap(p, page, PAGE, PROT_READ | PROT_WRITE, MAP_FIXED, fd, 0);
            CHECK(at == (int64_t)page, "mmap");
            CHECK(sv6_memread(p, page, buf, PAGE) == 0 && !memcmp(buf, expect, PAGE), "memread");
            CHECK(sv6_memwrite(p, page, expect, 16) == 0, "memwrite");
            CHECK(sv6_munmap(p, page, PAGE) == 0, "munmap");
            break;
        }
        case 4: { /* anonymous memory elsewhere in the same address space */
            int64_t at = sv6_mmap(p, 0, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_ANONYMOUS, -1, 0);
            CHECK(at > 0, "mmap anywhere");
            CHECK(sv6_memwrite(p, (uint64_t)at + PAGE, "q", 1) == 0, "anonymous write");
            CHECK(sv6_memread(p, (uint64_t)at + PAGE, buf, 1) == 0 && buf[0] == 'q', "read");
            CHECK(sv6_munmap(p, (uint64_t)at, 2 * PAGE) == 0, "munmap");
            break;
        }
        case 5: { /* a pipe to a spawned child */
            int fds[2];
            CHECK(sv6_pipe(p, fds) == 0, "pipe");
            struct sv6_proc *child;
            const struct sv6_spawn_fd map[] = {{fds[1], 1}};
            CHECK(sv6_spawn(p, map, 1, &child) == 0, "spawn");
            CHECK(sv6_close(p, fds[1]) == 0, "close the write end");
            CHECK(sv6_write(child, 1, "c", 1) == 1, "child writes");
            sv6_proc_destroy(child);
            CHECK(sv6_read(p, fds[0], buf, 2) == 1 && buf[0] == 'c', "parent reads");
            CHECK(sv6_close(p, fds[0]) == 0, "close the read end");
            break;
        }
        case 6: { /* create and delete a scratch name */
            snprintf(buf, 32, "tmp%u", index);
            int t = sv6_open(p, buf, O_CREAT | O_EXCL);
            CHECK(t >= 0, "create tmp");
            CHECK(sv6_rename(p, buf, alias) == 0 && sv6_unlink(p, alias) == 0, "rename, unlink");
            CHECK(sv6_close(p, t) == 0, "close tmp");
            break;
        }
        case 7: { /* its own byte of pages that every thread writes at once: not lost */
            const char mine = (char)(1 + ops % 100);
            CHECK(sv6_pwrite(p, s->shared_fd[index % 2], &mine, 1, index) == 1, "pwrite");
            CHECK(sv6_pread(p, s->shared_fd[index % 2], buf, 1, index) == 1 && buf[0] == mine,
                  "a byte of a shared page lost");
            CHECK(sv6_memwrite(p, s->shared_anon + index, &mine, 1) == 0, "anonymous write");
            CHECK(sv6_memread(p, s->shared_anon + index, buf, 1) == 0 && buf[0] == mine,
                  "a byte of a shared anonymous page lost");
            break;
        }
        case 8: { /* two whole pages per write and truncations of one file: a read of
                   * either page sees nothing or one writer's page (never page 0 a
                   * hole under page 1: a write lives or dies whole) */
            int churn = sv6_open(p, "churn", O_CREAT | (check_below(&rng, 2) ? O_TRUNC : 0));
            CHECK(churn >= 0, "open churn");
            char pages[2 * PAGE];
            memcpy(pages, expect, PAGE);
            memcpy(pages + PAGE, expect, PAGE);
            CHECK(sv6_pwrite(p, churn, pages, 2 * PAGE, 0) == 2 * PAGE, "pwrite churn");
            for (int half = 0; half < 2; half++) {
                ssize_t got = sv6_pread(p, churn, buf, PAGE, half * PAGE);
                bool whole = got == PAGE && buf[0] >= 'a' && !memcmp(buf, buf + 1, PAGE - 1);
                CHECK(got == 0 || whole, "churn read %zd bytes of page %d, not one writer's",
                      got, half);
            }
            CHECK(sv6_close(p, churn) == 0, "close churn");
            break;
        }
        case 9: { /* one record into the shared pipe, one out: each writer's in order */
            uint64_t record = (uint64_t)index << 32 | (uint32_t)++sent, got;
            CHECK(sv6_write(p, s->pipe_fds[1], &record, sizeof record) == sizeof record, "put");
            ssize_t n = sv6_read(p, s->pipe_fds[0], &got, sizeof got);
            CHECK(n == sizeof got || n == -EAGAIN, "a read of a record got %zd bytes", n);
            if (n == sizeof got) {
                unsigned writer = (unsigned)(got >> 32);
                CHECK(writer < s->threads && (uint32_t)got > last_seen[writer],
                      "record %u of writer %u after %u", (unsigned)(uint32_t)got, writer,
                      last_seen[writer]);
                last_seen[writer] = (uint32_t)got;
                received++;
            }
            break;
        }
        case 10: { /* the page after the shared one, remapped and reprotected by every
                    * thread: always mapped, holding zeros or the byte written */
            const uint64_t page_after = s->shared_anon + PAGE;
            int prot = PROT_READ | (check_below(&rng, 2) ? PROT_WRITE : 0);
            if (check_below(&rng, 2))
                CHECK(sv6_mmap(p, page_after, PAGE, prot, MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
                          (int64_t)page_after,
                      "remap");
            else
                CHECK(sv6_mprotect(p, page_after, PAGE, prot) == 0, "mprotect");
            int written = sv6_memwrite(p, page_after, "z", 1);
            CHECK(written == 0 || written == SV6_SIGSEGV, "memwrite: %d", written);
            CHECK(sv6_memread(p, page_after, buf, 1) == 0 && (buf[0] == 0 || buf[0] == 'z'),
                  "memread");
            break;
        }
        case 11: { /* an O_ANYFD fd of the own file, which a thread of the same process
                    * may be reading (fstat) while it closes: the close must not free
                    * the file under that lookup (fdtable.h) */
            int mine = sv6_open(p, name, SV6_O_ANYFD);
            CHECK(mine >= 0, "open %s with O_ANYFD: %d", name, mine);
            atomic_store(&s->any_fd[index], mine);
            int theirs = atomic_load(&s->any_fd[(index + 2) % s->threads]);
            struct sv6_stat st;
            int got = theirs >= 0 ? sv6_fstat(p, theirs, &st) : -EBADF;
            CHECK(got == -EBADF || (got == 0 && st.size == PAGE), "fstat of another's fd: %d",
                  got);
            atomic_store(&s->any_fd[index], -1);
            CHECK(sv6_close(p, mine) == 0, "close %d", mine);
            break;
        }
        default: { /* the own file by name */
            struct sv6_stat st;
            CHECK(sv6_stat(p, name, &st) == 0 && st.nlink == 1 && st.size == PAGE, "stat");
        }
        }
    }
    CHECK(sv6_close(p, fd) == 0, "close own");
    atomic_fetch_add(&s->ops, ops);
    atomic_fetch_add(&s->links, links);
    atomic_fetch_add(&s->stats, stats);
    atomic_fetch_add(&s->pipe_sent, sent);
    atomic_fetch_add(&s->pipe_received, received);
}

/* One thread opens and closes O_ANYFD fds of a file while the other keeps
 * looking the newest up: a close must not free the file under a lookup (under
 * AddressSanitizer a use after free stops the check). */
struct any_fd_race {
    struct sv6_proc *proc;
    _Atomic int fd;
    _Atomic unsigned long closes, lookups;
};

static void any_fd_race_body(unsigned index, void *arg)
{
    struct any_fd_race *r = arg;
    while (!check_stop()) {
        if (index == 0) {
            int fd = sv6_open(r->proc, "race", SV6_O_ANYFD);
            CHECK(fd >= 0, "open race: %d", fd);
            atomic_store(&r->fd, fd);
            CHECK(sv6_close(r->proc, fd) == 0, "close race");
            atomic_fetch_add(&r->closes, 1);
        } else {
            struct sv6_stat st;
            int fd = atomic_load(&r->fd), got = fd >= 0 ? sv6_fstat(r->proc, fd, &st) : -EBADF;
            CHECK(got == -EBADF || (got == 0 && st.size == 1), "fstat race: %d", got);
            atomic_fetch_add(&r->lookups, 1);
        }
    }
}

static void any_fd_race(struct sv6_world *w, double seconds)
{
    struct any_fd_race r = {.proc = sv6_proc_create(w)};
    atomic_init(&r.fd, -1);
    int fd = sv6_open(r.proc, "race", O_CREAT);
    CHECK(fd >= 0 && sv6_pwrite(r.proc, fd, "r", 1, 0) == 1 && sv6_close(r.proc, fd) == 0,
          "create race");
    check_run_threads(2, seconds, any_fd_race_body, &r);
    CHECK(atomic_load(&r.closes) > 0 && atomic_load(&r.lookups) > 0, "the race ran");
    sv6_proc_destroy(r.proc);
}

int check_posix_stress(const struct check_args *args)
{
    struct posix_stress s = {.threads = args->threads, .shared_anon = 1ull << 31};
    for (unsigned i = 0; i < MAX_STRESS_THREADS; i++)
        atomic_init(&s.any_fd[i], -1);
    s.world = sv6_world_create(SV6_WORLD_SELF_TICK); /* frees while threads run */
    for (int i = 0; i < 2; i++) {
        s.procs[i] = sv6_proc_create(s.world);
        s.shared_fd[i] = sv6_open(s.procs[i], "shared", O_CREAT);
        CHECK(s.shared_fd[i] >= 0, "shared");
        CHECK(sv6_mmap(s.procs[i], s.shared_anon, 2 * PAGE, PROT_READ | PROT_WRITE,
                       MAP_ANONYMOUS | MAP_FIXED, -1, 0) == (int64_t)s.shared_anon,
              "shared anonymous pages");
    }
    CHECK(sv6_pipe(s.procs[0], s.pipe_fds) == 0, "pipe");
    for (int end = 0; end < 2; end++)
        CHECK(sv6_fd_install(s.procs[1], s.pipe_fds[end], s.procs[0], s.pipe_fds[end]) == 0,
              "the pipe in the second process");
    check_run_threads(args->threads, args->seconds, posix_body, &s);
    uint64_t left;
    while (sv6_read(s.procs[0], s.pipe_fds[0], &left, sizeof left) == sizeof left)
        atomic_fetch_add(&s.pipe_received, 1);
    CHECK(atomic_load(&s.pipe_sent) == atomic_load(&s.pipe_received),
          "%lu records into the pipe, %lu out", atomic_load(&s.pipe_sent),
          atomic_load(&s.pipe_received));
    struct sv6_stat st;
    CHECK(sv6_stat(s.procs[0], "shared", &st) == 0 && st.nlink == 1, "shared's final nlink");
    sv6_proc_destroy(s.procs[0]);
    sv6_proc_destroy(s.procs[1]);
    any_fd_race(s.world, args->seconds < 0.5 ? args->seconds : 0.5);
    printf("ok, %lu operations (%lu link+unlink, %lu fstat, %lu pipe records) on %u threads, "
           "%lu retried reads\n",
           atomic_load(&s.ops), atomic_load(&s.links), atomic_load(&s.stats),
           atomic_load(&s.pipe_sent), args->threads, sv6_world_read_retries(s.world));
    sv6_world_destroy(s.world);
    return 0;
}

/* Guards the leak checks: a world left undestroyed must be reported by the
 * AddressSanitizer build (exit code and "LeakSanitizer" on stderr). */
int check_leak_on_purpose(const struct check_args *args)
{
    (void)args;
    struct sv6_world *w = sv6_world_create(0);
    struct sv6_proc *p = sv6_proc_create(w);
    CHECK(sv6_open(p, "kept", O_CREAT) == 0, "open");
    printf("ok, a world left undestroyed on purpose\n");
    return 0;
}
