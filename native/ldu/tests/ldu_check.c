/*
 * ldu_check.c - correctness checks of every objset implementation.
 *
 *   ldu_check sequential   --impl NAME [--objects N] [--ops N] [--seed S]
 *   ldu_check concurrent   --impl NAME [--threads N] [--pairs N] [--seconds S] [--read-pct P] [--seed S]
 *   ldu_check precondition --impl NAME      (debug builds: must abort on a double insert)
 *   ldu_check shape        --impl NAME [--objects N] [--seed S]   (tree sets)
 *
 * sequential: one thread drives several workers (so LDU logs land on several
 * queues) through random alternating updates and compares every walk with a
 * model: same members, key order, no duplicates.
 *
 * concurrent: each thread owns pairs (A, B) of objects and cycles each pair
 * through insert B, remove A, insert A, remove B, so at every instant at least
 * one of the pair is in the set.  Around every update the owner bumps the
 * object's version (odd while the update runs).  A walk reads all versions
 * before and after itself; for every object whose version did not move and
 * was even, the walk must agree with the state that version implies (the
 * object's last update).  For "rwlock", whose walks are atomic snapshots,
 * every walk must also contain one object of every pair; for the others a
 * walk that misses both is allowed and counted (see objset_walk in objset.h).
 * LDU walks that find logs they cannot apply merge them into their view
 * instead; the count of such walks is printed, so a run shows it exercised
 * that path.
 * Now and then a thread also churns a heap object: insert, walk, remove,
 * objset_barrier, free - while other threads' walks read every object they
 * visit, so a barrier that returns too early is a use-after-free (ASan).
 * shape: the same keys inserted in the same order into two sets whose objects
 * lie at different addresses give the same tree (each object's children have
 * the same keys): where the allocator put the objects must not decide which
 * ones sit near the root (scalecheck sharing's per-object lines would differ
 * from run to run).
 * Prints one line of counts; exits 1 on the first violation, 2 on bad usage.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "objset.h"

struct test_object {
    struct set_object hook;    /* first, so a set_object * is a test_object * */
    unsigned id;
};

__attribute__((format(printf, 1, 2))) static void usage_error(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "ldu_check: ");
    vfprintf(stderr, fmt, args);
    va_end(args);
    fprintf(stderr, " (usage: ldu_check sequential|concurrent|precondition --impl NAME [options])\n");
    exit(2);
}

static void fail(const char *impl, const char *what, unsigned long detail)
{
    fprintf(stderr, "ldu_check: %s: %s (%lu)\n", impl, what, detail);
    exit(1);
}

static uint64_t next_random(uint64_t *state)
{
    /* xorshift64*: reproducible from --seed, no shared state between threads */
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545f4914f6cdd1dull;
}

struct options {
    const char *command, *impl;
    long objects, ops, threads, pairs, read_pct;
    double seconds;
    uint64_t seed;
};

static long parse_long(const char *option, const char *text, long low, long high)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end || value < low || value > high)
        usage_error("%s: not a whole number in range", option);
    return value;
}

static struct options parse_options(int argc, char **argv)
{
    struct options o = {.objects = 64, .ops = 200000, .threads = 4, .pairs = 16,
                        .read_pct = 20, .seconds = 1.0, .seed = 1};
    if (argc < 2)
        usage_error("missing command");
    o.command = argv[1];
    if (strcmp(o.command, "sequential") && strcmp(o.command, "concurrent") &&
        strcmp(o.command, "precondition") && strcmp(o.command, "shape"))
        usage_error("unknown command %s", o.command);
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc)
            usage_error("%s needs a value", argv[i]);
        const char *option = argv[i], *value = argv[++i];
        if (!strcmp(option, "--impl")) {
            o.impl = value;
        } else if (!strcmp(option, "--objects")) {
            o.objects = parse_long(option, value, 1, 1 << 20);
        } else if (!strcmp(option, "--ops")) {
            o.ops = parse_long(option, value, 1, 1L << 40);
        } else if (!strcmp(option, "--threads")) {
            o.threads = parse_long(option, value, 1, 256);
        } else if (!strcmp(option, "--pairs")) {
            o.pairs = parse_long(option, value, 1, 4096);
        } else if (!strcmp(option, "--read-pct")) {
            o.read_pct = parse_long(option, value, 0, 100);
        } else if (!strcmp(option, "--seed")) {
            o.seed = (uint64_t)parse_long(option, value, 1, 1L << 62);
        } else if (!strcmp(option, "--seconds")) {
            char *end;
            o.seconds = strtod(value, &end);
            if (end == value || *end || !(o.seconds > 0 && o.seconds < 3600))
                usage_error("--seconds %s: expected a number of seconds below 3600", value);
        } else {
            usage_error("unknown option %s", option);
        }
    }
    if (!o.impl)
        usage_error("--impl is required");
    return o;
}

static struct objset *create_set(const char *impl, unsigned max_workers)
{
    struct objset *set = objset_create(impl, max_workers);
    if (!set && errno == EINVAL)
        usage_error("unknown implementation %s", impl);
    if (!set)
        fail(impl, "cannot create the set", 0);
    return set;
}

static struct objset_worker *attach(struct objset *set, const char *impl, unsigned cpu)
{
    struct objset_worker *worker = objset_attach(set, cpu);
    if (!worker)
        fail(impl, "cannot attach a worker", cpu);
    return worker;
}

/* ---- sequential ---- */

struct ordered_walk {
    const struct set_object *previous;
    unsigned char *seen;       /* per object id */
    bool out_of_order;
};

static void visit_ordered(struct set_object *object, void *arg)
{
    struct ordered_walk *walk = arg;
    const struct set_object *previous = walk->previous;
    if (previous && (previous->key > object->key ||
                     (previous->key == object->key && (uintptr_t)previous >= (uintptr_t)object)))
        walk->out_of_order = true;
    walk->seen[((struct test_object *)object)->id]++;
    walk->previous = object;
}

static int run_sequential(const struct options *o)
{
    enum { WORKERS = 3 };
    uint64_t random = o->seed;
    struct objset *set = create_set(o->impl, WORKERS);
    struct objset_worker *workers[WORKERS];
    for (unsigned w = 0; w < WORKERS; w++)
        workers[w] = attach(set, o->impl, w);
    size_t n = (size_t)o->objects;
    struct test_object *objects = alloc_aligned_zeroed(n * sizeof *objects);
    bool *present = calloc(n, sizeof *present);
    unsigned char *seen = calloc(n, 1);
    for (size_t i = 0; i < n; i++) {
        /* few distinct keys, so ties (ordered by address) are common */
        set_object_init(&objects[i].hook, next_random(&random) % (n / 4 + 1));
        objects[i].id = (unsigned)i;
    }
    long walks = 0;
    for (long op = 0; op < o->ops; op++) {
        struct objset_worker *worker = workers[next_random(&random) % WORKERS];
        if (next_random(&random) % 8 == 0 || op == o->ops - 1) {
            struct ordered_walk walk = {.seen = seen};
            memset(seen, 0, n);
            size_t visited = objset_walk(worker, visit_ordered, &walk);
            size_t members = 0;
            for (size_t i = 0; i < n; i++) {
                members += present[i];
                if (seen[i] != present[i])
                    fail(o->impl, "walk disagrees with the model on object", i);
            }
            if (visited != members)
                fail(o->impl, "walk's count differs from the model's size", visited);
            if (walk.out_of_order)
                fail(o->impl, "walk out of key order at walk", (unsigned long)walks);
            walks++;
        } else {
            size_t i = next_random(&random) % n;
            if (present[i])
                objset_remove(worker, &objects[i].hook);
            else
                objset_insert(worker, &objects[i].hook);
            present[i] = !present[i];
        }
    }
    /* Empty the set so the final state is known for every implementation. */
    for (size_t i = 0; i < n; i++)
        if (present[i])
            objset_remove(workers[0], &objects[i].hook);
    struct ordered_walk walk = {.seen = seen};
    if (objset_walk(workers[0], visit_ordered, &walk) != 0)
        fail(o->impl, "set not empty after removing everything", 0);
    for (unsigned w = 0; w < WORKERS; w++)
        objset_detach(workers[w]);
    objset_destroy(set);
    printf("sequential %s: ok, %ld ops, %ld walks, %zu objects\n", o->impl, o->ops, walks, n);
    free(objects);
    free(present);
    free(seen);
    return 0;
}

/* ---- concurrent ---- */

struct shared_state {
    const struct options *o;
    struct objset *set;
    bool snapshot_walks;       /* the implementation promises atomic snapshot walks */
    size_t nobjects;           /* objects of thread t, pair p: 2 * (t * pairs + p) + {0: A, 1: B} */
    struct test_object *objects;
    atomic_ulong *versions;
    atomic_int stop;
};

struct thread_state {
    struct shared_state *shared;
    unsigned index;
    pthread_t thread;
    long updates, walks, objects_checked, pairs_checked, pairs_missed;
    unsigned long merged_walks;    /* LDU: walks that read unapplied logs */
};

struct counting_walk {
    unsigned char *seen;       /* per object id */
    size_t nobjects;           /* ids at or above this are churned objects: not counted */
};

static void visit_count(struct set_object *object, void *arg)
{
    struct counting_walk *walk = arg;
    unsigned id = ((struct test_object *)object)->id;
    if (id < walk->nobjects)
        walk->seen[id]++;
}

static void check_walk(struct thread_state *self, struct objset_worker *worker,
                       unsigned long *before, unsigned long *after, unsigned char *seen)
{
    struct shared_state *s = self->shared;
    const char *impl = s->o->impl;
    for (size_t i = 0; i < s->nobjects; i++)
        before[i] = atomic_load(&s->versions[i]);
    memset(seen, 0, s->nobjects);
    struct counting_walk walk = {.seen = seen, .nobjects = s->nobjects};
    objset_walk(worker, visit_count, &walk);
    for (size_t i = 0; i < s->nobjects; i++)
        after[i] = atomic_load(&s->versions[i]);
    for (size_t i = 0; i < s->nobjects; i++) {
        if (seen[i] > 1)
            fail(impl, "walk visited an object twice; object", i);
        if (before[i] == after[i] && before[i] % 2 == 0) {
            bool last_update_inserted = (before[i] / 2) % 2 == 1;
            if (seen[i] != last_update_inserted)
                fail(impl, last_update_inserted ? "walk missed an object whose last update "
                                                  "was an insert; object"
                                                : "walk saw an object whose last update "
                                                  "was a remove; object",
                     i);
            self->objects_checked++;
        }
    }
    for (size_t pair = 0; pair < s->nobjects / 2; pair++) {
        if (!seen[2 * pair] && !seen[2 * pair + 1]) {
            if (s->snapshot_walks)
                fail(impl, "snapshot walk saw neither object of a pair that always has one; pair",
                     pair);
            self->pairs_missed++;
        }
    }
    self->pairs_checked += (long)(s->nobjects / 2);
}

static void update(struct shared_state *s, struct objset_worker *worker, size_t id, bool insert)
{
    atomic_fetch_add(&s->versions[id], 1);   /* odd: update in progress */
    if (insert)
        objset_insert(worker, &s->objects[id].hook);
    else
        objset_remove(worker, &s->objects[id].hook);
    atomic_fetch_add(&s->versions[id], 1);
}

static void churn(struct thread_state *self, struct objset_worker *worker, uint64_t key)
{
    struct shared_state *s = self->shared;
    struct test_object *temporary = alloc_aligned_zeroed(sizeof *temporary);
    set_object_init(&temporary->hook, key);
    temporary->id = (unsigned)s->nobjects;
    objset_insert(worker, &temporary->hook);
    unsigned char *seen = calloc(s->nobjects, 1);
    struct counting_walk walk = {.seen = seen, .nobjects = s->nobjects};
    objset_walk(worker, visit_count, &walk);   /* so LDU applies the insert to the tree */
    objset_remove(worker, &temporary->hook);
    objset_barrier(worker);
    free(temporary);
    free(seen);
}

static void *concurrent_thread(void *arg)
{
    struct thread_state *self = arg;
    struct shared_state *s = self->shared;
    const struct options *o = s->o;
    struct objset_worker *worker = attach(s->set, o->impl, self->index);
    uint64_t random = o->seed * 7919 + self->index + 1;
    size_t pairs = (size_t)o->pairs, first_pair = self->index * pairs;
    unsigned char *phase = calloc(pairs, 1);   /* 0..3: next step of each own pair */
    unsigned long *before = calloc(s->nobjects, sizeof *before);
    unsigned long *after = calloc(s->nobjects, sizeof *after);
    unsigned char *seen = calloc(s->nobjects, 1);
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        if ((long)(next_random(&random) % 100) < o->read_pct) {
            check_walk(self, worker, before, after, seen);
            self->walks++;
            continue;
        }
        if (next_random(&random) % 16 == 0) {
            churn(self, worker, next_random(&random) % (2 * s->nobjects));
            continue;
        }
        size_t p = next_random(&random) % pairs;
        size_t a = 2 * (first_pair + p), b = a + 1;
        switch (phase[p]) {
        case 0: update(s, worker, b, true); break;    /* {A} -> {A, B} */
        case 1: update(s, worker, a, false); break;   /* -> {B} */
        case 2: update(s, worker, a, true); break;    /* -> {A, B} */
        case 3: update(s, worker, b, false); break;   /* -> {A} */
        }
        phase[p] = (phase[p] + 1) % 4;
        self->updates++;
    }
    /* A last walk of this thread's own view, then leave everything in place
     * for the final quiescent check. */
    check_walk(self, worker, before, after, seen);
    self->merged_walks = objset_worker_stats(worker)->merged_walks;
    objset_detach(worker);
    free(phase);
    free(before);
    free(after);
    free(seen);
    return NULL;
}

static int run_concurrent(const struct options *o)
{
    struct shared_state s = {.o = o};
    unsigned threads = (unsigned)o->threads;
    s.set = create_set(o->impl, threads + 1);
    s.snapshot_walks = strcmp(o->impl, "rwlock") == 0;
    s.nobjects = 2 * threads * (size_t)o->pairs;
    s.objects = alloc_aligned_zeroed(s.nobjects * sizeof *s.objects);
    s.versions = calloc(s.nobjects, sizeof *s.versions);
    struct objset_worker *main_worker = attach(s.set, o->impl, threads);
    for (size_t i = 0; i < s.nobjects; i++) {
        /* A (even ids) in the upper half of the key space, B in the lower, so
         * a walk reaches B first: a non-atomic walk can then miss both. */
        uint64_t pair = i / 2;
        set_object_init(&s.objects[i].hook, i % 2 ? pair : s.nobjects + pair);
        s.objects[i].id = (unsigned)i;
        if (i % 2 == 0)
            update(&s, main_worker, i, true);
    }
    struct thread_state *states = calloc(threads, sizeof *states);
    for (unsigned t = 0; t < threads; t++) {
        states[t] = (struct thread_state){.shared = &s, .index = t};
        if (pthread_create(&states[t].thread, NULL, concurrent_thread, &states[t]))
            fail(o->impl, "cannot create thread", t);
    }
    struct timespec duration = {.tv_sec = (time_t)o->seconds,
                                .tv_nsec = (long)((o->seconds - (time_t)o->seconds) * 1e9)};
    nanosleep(&duration, NULL);
    atomic_store(&s.stop, 1);
    long updates = 0, walks = 0, objects_checked = 0, pairs_checked = 0, pairs_missed = 0;
    unsigned long merged_walks = 0;
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(states[t].thread, NULL);
        updates += states[t].updates;
        walks += states[t].walks;
        objects_checked += states[t].objects_checked;
        pairs_checked += states[t].pairs_checked;
        pairs_missed += states[t].pairs_missed;
        merged_walks += states[t].merged_walks;
    }
    /* Quiescent: the walk must match every object's last update exactly. */
    struct thread_state final = {.shared = &s};
    unsigned long *before = calloc(s.nobjects, sizeof *before);
    unsigned long *after = calloc(s.nobjects, sizeof *after);
    unsigned char *seen = calloc(s.nobjects, 1);
    check_walk(&final, main_worker, before, after, seen);
    if (final.objects_checked != (long)s.nobjects)
        fail(o->impl, "versions moved after all threads stopped", (unsigned long)final.objects_checked);
    for (size_t i = 0; i < s.nobjects; i++)
        if (seen[i])
            objset_remove(main_worker, &s.objects[i].hook);
    objset_detach(main_worker);
    objset_destroy(s.set);
    printf("concurrent %s: ok, %u threads, %ld updates, %ld walks, %ld object states checked, "
           "%ld of %ld pairs missed by non-snapshot walks, %lu walks read unapplied logs\n",
           o->impl, threads, updates, walks, objects_checked, pairs_missed, pairs_checked,
           merged_walks);
    free(before);
    free(after);
    free(seen);
    free(states);
    free(s.objects);
    free(s.versions);
    return 0;
}

/* ---- precondition ---- */

static int run_precondition(const struct options *o)
{
    struct objset *set = create_set(o->impl, 1);
    struct objset_worker *worker = attach(set, o->impl, 0);
    struct set_object object;
    set_object_init(&object, 1);
    objset_insert(worker, &object);
    objset_insert(worker, &object);   /* violates the alternation precondition */
    printf("precondition %s: double insert was not detected (release build?)\n", o->impl);
    return 1;
}

static void visit_none(struct set_object *object, void *arg)
{
    (void)object;
    (void)arg;
}

/* Fills a set with objects[0..n) of keys 7 * i, in an order drawn from seed. */
static void fill_in_order(const char *impl, struct set_object *objects, long n, uint64_t seed)
{
    struct objset *set = create_set(impl, 1);
    struct objset_worker *worker = attach(set, impl, 0);
    long *order = malloc((size_t)n * sizeof *order);
    if (!order)
        fail(impl, "out of memory", 0);
    for (long i = 0; i < n; i++) {
        set_object_init(&objects[i], (uint64_t)i * 7);
        order[i] = i;
    }
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(next_random(&seed) % (uint64_t)(i + 1)), kept = order[i];
        order[i] = order[j];
        order[j] = kept;
    }
    for (long i = 0; i < n; i++)
        objset_insert(worker, &objects[order[i]]);
    objset_walk(worker, visit_none, NULL);   /* LDU: applies the logs */
    free(order);
}

static bool same_key(const struct set_object *a, const struct set_object *b)
{
    return a == b || (a && b && a->key == b->key);
}

static int run_shape(const struct options *o)
{
    /* the second array a few lines further on in a larger block: other addresses */
    struct set_object *first = calloc((size_t)o->objects, sizeof *first);
    struct set_object *block = calloc((size_t)o->objects + 5, sizeof *block);
    if (!first || !block)
        fail(o->impl, "out of memory", 0);
    struct set_object *second = block + 5;
    fill_in_order(o->impl, first, o->objects, o->seed);
    fill_in_order(o->impl, second, o->objects, o->seed);
    for (long i = 0; i < o->objects; i++)
        if (!same_key(first[i].tree_left, second[i].tree_left) ||
            !same_key(first[i].tree_right, second[i].tree_right))
            fail(o->impl, "the tree's shape follows the objects' addresses at key", (unsigned long)i * 7);
    printf("shape %s: ok, %ld objects at two places, one tree\n", o->impl, o->objects);
    return 0;   /* the sets are left as they are: the process ends */
}

int main(int argc, char **argv)
{
    struct options o = parse_options(argc, argv);
    if (!strcmp(o.command, "sequential"))
        return run_sequential(&o);
    if (!strcmp(o.command, "concurrent"))
        return run_concurrent(&o);
    if (!strcmp(o.command, "shape"))
        return run_shape(&o);
    return run_precondition(&o);
}
