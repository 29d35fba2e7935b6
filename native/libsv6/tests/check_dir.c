/* check_dir.c - the hashed directory: results of insert, remove and rename,
 * each entry's reference dropped exactly once, and under threads: lock-free
 * lookups while entries are removed and freed, and each thread's names ending
 * as its own model says. */
#include "check.h"

#include "sv6/dir.h"

#include <errno.h>
#include <string.h>

struct value {
    _Atomic int refs; /* references held by entries */
    int magic;
};
#define MAGIC 0x5eed

static void hold(void *v, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&((struct value *)v)->refs, 1);
}

static void drop(void *v, void *ctx)
{
    (void)ctx;
    CHECK(atomic_fetch_sub(&((struct value *)v)->refs, 1) > 0, "dropped below zero");
}

static const struct dir_ops counting = {.hold = hold, .drop = drop};

static int insert(struct dir *d, const char *name, struct value *v)
{
    hold(v, NULL); /* the entry's reference */
    int result = dir_insert(d, name, v);
    if (result != 0)
        drop(v, NULL);
    return result;
}

int check_dir_unit(const struct check_args *args)
{
    (void)args;
    struct dir *d = malloc(sizeof *d);
    CHECK(d, "out of memory");
    dir_init(d, &counting);
    enum { N = 2000 }; /* > DIR_BUCKETS: many buckets hold several names */
    static struct value vals[N];
    char name[32], other[32];
    ebr_enter();
    for (int i = 0; i < N; i++) {
        vals[i].magic = MAGIC;
        snprintf(name, sizeof name, "n%d", i);
        CHECK(insert(d, name, &vals[i]) == 0, "insert %s", name);
        CHECK(insert(d, name, &vals[i]) == -EEXIST, "insert %s twice", name);
    }
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "n%d", i);
        CHECK(dir_lookup(d, name) == &vals[i], "lookup %s", name);
    }
    CHECK(dir_lookup(d, "missing") == NULL, "lookup of a missing name");
    void *old, *moved, *replaced;
    CHECK(dir_remove(d, "missing", &old) == -ENOENT, "remove missing");
    CHECK(dir_remove(d, "n0", &old) == 0 && old == &vals[0], "remove n0");
    CHECK(dir_lookup(d, "n0") == NULL, "n0 gone");
    /* Rename onto a fresh name and onto an existing one, in every pair of
     * buckets the names happen to fall in (same bucket included). */
    for (int i = 1; i < N / 2; i++) {
        snprintf(name, sizeof name, "n%d", i);
        snprintf(other, sizeof other, "m%d", i);
        CHECK(dir_rename(d, name, other, &moved, &replaced) == 0, "rename %s", name);
        CHECK(moved == &vals[i] && replaced == NULL, "rename %s to a new name", name);
        CHECK(dir_lookup(d, name) == NULL && dir_lookup(d, other) == &vals[i], "moved %s", name);
        snprintf(name, sizeof name, "n%d", N - i);
        CHECK(dir_rename(d, other, name, &moved, &replaced) == 0, "rename over %s", name);
        CHECK(moved == &vals[i] && replaced == &vals[N - i], "rename over %s", name);
        CHECK(dir_lookup(d, name) == &vals[i] && !dir_lookup(d, other), "over %s", name);
    }
    CHECK(dir_rename(d, "missing", "x", &moved, &replaced) == -ENOENT, "rename missing");
    snprintf(name, sizeof name, "n%d", N - 1);
    CHECK(dir_rename(d, name, name, &moved, &replaced) == 0 && replaced == NULL, "to itself");
    CHECK(dir_lookup(d, name) == &vals[1], "rename to itself keeps it");
    char long_name[DIR_NAME_MAX + 2];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    CHECK(insert(d, long_name, &vals[0]) == -ENAMETOOLONG, "long name");
    ebr_exit();
    ebr_drain(); /* removed and replaced entries drop their references */
    int named = 0;
    for (int i = 0; i < N; i++)
        named += atomic_load(&vals[i].refs);
    CHECK(named == N - 1 - (N / 2 - 1), "%d references for %d names", named, N / 2);
    dir_destroy(d);
    for (int i = 0; i < N; i++)
        CHECK(atomic_load(&vals[i].refs) == 0, "value %d keeps %d", i, atomic_load(&vals[i].refs));
    free(d);
    printf("ok, dir unit checks passed\n");
    return 0;
}

/* ------------------------------------------------------------ stress */

enum { OWN = 24, SHARED = 16 };

struct dir_stress {
    struct dir dir;
    struct value values[64][OWN];
    struct value shared_values[SHARED];
    _Atomic unsigned long lookups, changes;
};

static void dir_body(unsigned index, void *arg)
{
    struct dir_stress *s = arg;
    uint64_t rng = index * 31 + 5;
    /* This thread's model of its own names: model[k] = value index or -1. */
    int model[OWN];
    char name[32], other[32];
    for (int k = 0; k < OWN; k++)
        model[k] = -1;
    unsigned long lookups = 0, changes = 0;
    while (!check_stop()) {
        unsigned what = check_below(&rng, 10);
        int k = (int)check_below(&rng, OWN), j = (int)check_below(&rng, OWN);
        snprintf(name, sizeof name, "t%u.%d", index, k);
        snprintf(other, sizeof other, "t%u.%d", index, j);
        ebr_enter();
        if (what < 4) {
            /* Anyone's names: whatever is found must still be readable. */
            snprintf(name, sizeof name, "t%u.%d", check_below(&rng, 4), k);
            struct value *v = dir_lookup(&s->dir, name);
            CHECK(!v || v->magic == MAGIC, "lookup found garbage");
            v = dir_lookup(&s->dir, k < SHARED ? (snprintf(other, sizeof other, "s%d", k), other)
                                               : name);
            CHECK(!v || v->magic == MAGIC, "lookup found garbage");
            lookups += 2;
        } else if (what < 6) {
            int result = insert(&s->dir, name, &s->values[index][k]);
            CHECK(result == (model[k] < 0 ? 0 : -EEXIST), "insert %s: %d", name, result);
            if (model[k] < 0)
                model[k] = k;
        } else if (what < 8) {
            void *old;
            int result = dir_remove(&s->dir, name, &old);
            CHECK(result == (model[k] < 0 ? -ENOENT : 0), "remove %s: %d", name, result);
            CHECK(result != 0 || old == &s->values[index][model[k]], "removed the wrong value");
            model[k] = -1;
        } else if (what < 9) {
            void *moved, *replaced;
            int result = dir_rename(&s->dir, name, other, &moved, &replaced);
            CHECK(result == (model[k] < 0 ? -ENOENT : 0), "rename %s: %d", name, result);
            if (result == 0 && k != j) {
                CHECK(replaced == (model[j] < 0 ? NULL : &s->values[index][model[j]]),
                      "rename replaced the wrong value");
                model[j] = model[k];
                model[k] = -1;
            }
        } else {
            /* Shared names, changed by every thread. */
            snprintf(name, sizeof name, "s%d", k % SHARED);
            void *old;
            if (check_below(&rng, 2))
                insert(&s->dir, name, &s->shared_values[k % SHARED]);
            else
                dir_remove(&s->dir, name, &old);
        }
        ebr_exit();
        changes += what >= 4;
    }
    ebr_enter();
    for (int k = 0; k < OWN; k++) {
        snprintf(name, sizeof name, "t%u.%d", index, k);
        struct value *v = dir_lookup(&s->dir, name);
        CHECK(v == (model[k] < 0 ? NULL : &s->values[index][model[k]]), "final %s", name);
    }
    ebr_exit();
    atomic_fetch_add(&s->lookups, lookups);
    atomic_fetch_add(&s->changes, changes);
}

int check_dir_stress(const struct check_args *args)
{
    CHECK(args->threads <= 64, "threads");
    struct dir_stress *s = calloc(1, sizeof *s);
    CHECK(s, "out of memory");
    dir_init(&s->dir, &counting);
    for (int t = 0; t < 64; t++)
        for (int k = 0; k < OWN; k++)
            s->values[t][k].magic = MAGIC;
    for (int k = 0; k < SHARED; k++)
        s->shared_values[k].magic = MAGIC;
    check_run_threads(args->threads, args->seconds, dir_body, s);
    ebr_drain();
    dir_destroy(&s->dir);
    for (int t = 0; t < 64; t++)
        for (int k = 0; k < OWN; k++)
            CHECK(atomic_load(&s->values[t][k].refs) == 0, "a reference was never dropped");
    for (int k = 0; k < SHARED; k++)
        CHECK(atomic_load(&s->shared_values[k].refs) == 0, "a reference was never dropped");
    printf("ok, %lu lookups and %lu changes on %u threads\n", atomic_load(&s->lookups),
           atomic_load(&s->changes), args->threads);
    free(s);
    return 0;
}
