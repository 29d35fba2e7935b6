/* check_fdtable.c - fd tables: lowest-fd and per-core O_ANYFD allocation, and
 * under threads: no fd handed out twice, each core in its own partition. */
#include "check.h"

#include "sv6/fdtable.h"

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stddef.h>

/* Each partition starts a cache line of its own, and its lock (which close
 * writes) has another: a lock-free open reads only the first. */
_Static_assert(alignof(struct fdtable_part) == SV6_PLACEMENT, "partition alignment");
_Static_assert(offsetof(struct fdtable_part, lock) == SV6_PLACEMENT, "lock on a line of its own");
_Static_assert(sizeof(struct fdtable_part) % SV6_PLACEMENT == 0, "partition size");

static int values[8];

static void record_fd(int fd, void *value, void *arg)
{
    (void)value;
    *(int *)arg = fd;
}

static void count_fd(int fd, void *value, void *arg)
{
    (void)fd;
    (void)value;
    ++*(unsigned *)arg;
}

struct other_thread {
    struct fdtable *t;
    int fd;
    void *found;
    bool remove, alone;
};

/* Another thread's lookup (or remove) of fd. */
static void *other_thread_body(void *arg)
{
    struct other_thread *o = arg;
    o->found = o->remove ? fdtable_remove(o->t, o->fd, &o->alone) : fdtable_get(o->t, o->fd);
    return NULL;
}

static void *as_other_thread(struct fdtable *t, int fd, bool remove, bool *alone)
{
    struct other_thread o = {.t = t, .fd = fd, .remove = remove};
    pthread_t thread;
    if (pthread_create(&thread, NULL, other_thread_body, &o) != 0 || pthread_join(thread, NULL) != 0)
        abort();
    if (alone)
        *alone = o.alone;
    return o.found;
}

/* Whether a removed value may be freed at once (fdtable.h): only its O_ANYFD
 * partition's owner's remove, and only until another thread has looked in. */
static int check_alone(struct fdtable *t)
{
    bool alone;
    sv6_core_set(5);
    int fd = fdtable_alloc_any(t, &values[0]);
    CHECK(fdtable_get(t, fd) == &values[0], "the owner's own lookup");
    CHECK(fdtable_remove(t, fd, &alone) == &values[0] && alone, "the owner's remove is alone");
    fd = fdtable_alloc_any(t, &values[0]);
    CHECK(as_other_thread(t, fd, true, &alone) == &values[0] && !alone,
          "another thread's remove is not alone");
    fd = fdtable_alloc_any(t, &values[0]);
    CHECK(as_other_thread(t, fd, false, NULL) == &values[0], "another thread's lookup");
    CHECK(fdtable_remove(t, fd, &alone) == &values[0] && !alone, "a value another thread read");
    fd = fdtable_alloc_any(t, &values[0]);
    CHECK(fdtable_remove(t, fd, &alone) == &values[0] && !alone, "the partition stays foreign");
    fd = fdtable_alloc_lowest(t, &values[0]);
    CHECK(fdtable_remove(t, fd, &alone) == &values[0] && !alone, "a lowest fd is never alone");
    return 0;
}

int check_fdtable_unit(const struct check_args *args)
{
    (void)args;
    struct fdtable *t = malloc(sizeof *t);
    CHECK(t, "out of memory");
    fdtable_init(t);
    for (int i = 0; i < 3; i++)
        CHECK(fdtable_alloc_lowest(t, &values[i]) == i, "lowest %d", i);
    CHECK(fdtable_remove(t, 1, NULL) == &values[1], "remove 1");
    CHECK(fdtable_remove(t, 1, NULL) == NULL, "remove 1 twice");
    CHECK(fdtable_alloc_lowest(t, &values[3]) == 1, "lowest reuses 1");
    CHECK(fdtable_alloc_lowest(t, &values[4]) == 3, "then 3");

    sv6_core_set(0);
    int any0 = fdtable_alloc_any(t, &values[5]);
    CHECK(any0 == (1 << 16), "core 0's first O_ANYFD fd is %d", any0);
    sv6_core_set(3);
    int any3 = fdtable_alloc_any(t, &values[6]);
    CHECK(any3 == (4 << 16), "core 3's first O_ANYFD fd is %d", any3);
    CHECK(fdtable_get(t, any3) == &values[6], "get any fd");
    CHECK(fdtable_alloc_lowest(t, &values[7]) == 4, "O_ANYFD leaves the lowest fds alone");

    CHECK(fdtable_install(t, 10, &values[0]) == 0, "install 10");
    CHECK(fdtable_install(t, 10, &values[0]) == -EEXIST, "install 10 twice");
    CHECK(fdtable_install(t, -1, &values[0]) == -EBADF, "install -1");
    CHECK(fdtable_install(t, FDTABLE_PARTS << 16, &values[0]) == -EBADF, "past the parts");
    CHECK(fdtable_get(t, FDTABLE_PART_SIZE) == NULL, "past a partition");
    CHECK(fdtable_get(t, -5) == NULL, "negative");
    int visited = -1;
    CHECK(fdtable_visit(t, 2, record_fd, &visited) == 0 && visited == 2, "visit 2");
    CHECK(fdtable_visit(t, 5, record_fd, &visited) == -EBADF, "visit a free fd");

    unsigned seen = 0;
    for (int fd = 0; fd < (FDTABLE_PARTS << 16); fd++)
        if (fdtable_get(t, fd))
            seen++;
    CHECK(seen == 8, "%u fds in use", seen);
    /* each scans a partition only up to its highest slot ever taken: one
     * taken at the end of a partition is visited too. */
    CHECK(fdtable_install(t, 2 << 16 | (FDTABLE_PART_SIZE - 1), &values[1]) == 0, "install last");
    unsigned each_seen = 0;
    fdtable_each(t, count_fd, &each_seen);
    CHECK(each_seen == 9, "each visited %u of 9 fds", each_seen);
    for (int fd = 0; fd < (FDTABLE_PARTS << 16); fd++)
        fdtable_remove(t, fd, NULL);

    /* A full partition says EMFILE. */
    for (int i = 0; i < FDTABLE_PART_SIZE; i++)
        CHECK(fdtable_alloc_lowest(t, &values[0]) == i, "fill %d", i);
    CHECK(fdtable_alloc_lowest(t, &values[0]) == -EMFILE, "full");
    for (int i = 0; i < FDTABLE_PART_SIZE; i++)
        fdtable_remove(t, i, NULL);
    if (check_alone(t) != 0)
        return 1;
    fdtable_destroy(t);
    free(t);
    printf("ok, fdtable unit checks passed\n");
    return 0;
}

struct fd_stress {
    struct fdtable table;
    _Atomic unsigned long allocations;
};

static void fd_body(unsigned index, void *arg)
{
    struct fd_stress *s = arg;
    uint64_t rng = index + 7;
    /* fd_of[k] >= 0: this thread owns that fd, and its slot holds &tags[k] (a
     * distinct address: the value names its owner and slot). */
    int fd_of[32], tags[32];
    for (int k = 0; k < 32; k++)
        fd_of[k] = -1;
    unsigned long count = 0;
    while (!check_stop()) {
        int k = (int)check_below(&rng, 32);
        if (fd_of[k] < 0) {
            bool any = check_below(&rng, 2);
            int fd = any ? fdtable_alloc_any(&s->table, &tags[k])
                         : fdtable_alloc_lowest(&s->table, &tags[k]);
            CHECK(fd >= 0, "allocation failed: %d", fd);
            if (any)
                CHECK(fd >> 16 == (int)sv6_core() + 1, "fd %#x outside core %u's partition",
                      fd, sv6_core());
            else
                CHECK(fd < FDTABLE_PART_SIZE, "lowest fd %d", fd);
            fd_of[k] = fd;
            count++;
        } else {
            /* Still ours: nobody else was given the same fd. */
            CHECK(fdtable_get(&s->table, fd_of[k]) == &tags[k], "fd %d taken over", fd_of[k]);
            CHECK(fdtable_remove(&s->table, fd_of[k], NULL) == &tags[k], "fd %d removed", fd_of[k]);
            fd_of[k] = -1;
        }
    }
    for (int k = 0; k < 32; k++)
        CHECK(fd_of[k] < 0 || fdtable_remove(&s->table, fd_of[k], NULL) == &tags[k], "final remove");
    atomic_fetch_add(&s->allocations, count);
}

int check_fdtable_stress(const struct check_args *args)
{
    struct fd_stress *s = aligned_alloc(SV6_PLACEMENT, sizeof *s);
    CHECK(s, "out of memory");
    fdtable_init(&s->table);
    atomic_init(&s->allocations, 0);
    check_run_threads(args->threads, args->seconds, fd_body, s);
    for (int fd = 0; fd < (FDTABLE_PARTS << 16); fd++)
        CHECK(fdtable_get(&s->table, fd) == NULL, "fd %d left", fd);
    printf("ok, %lu allocations on %u threads, none handed out twice\n",
           atomic_load(&s->allocations), args->threads);
    fdtable_destroy(&s->table);
    free(s);
    return 0;
}
