/* check_radix.c - the radix array: values by key, direct slots below
 * RADIX_DIRECT that make no node and are never pruned, empty nodes freed once
 * their core's list of emptied leaves is full or pruned, and under threads
 * sharing nodes and direct slots: every thread's keys end as its model says,
 * lock-free reads never see freed nodes, and the tree shrinks back to its
 * root. */
#include "check.h"

#include "sv6/radix.h"

#include <stdalign.h>

_Static_assert(alignof(struct radix_node) == SV6_PLACEMENT, "node on lines of its own");

_Static_assert(RADIX_DIRECT > 2 && RADIX_DIRECT < RADIX_FANOUT - 1,
               "the checks' keys: three direct keys, and one leaf holds RADIX_DIRECT and 511");

static int tags[64][64];

/* Direct slots: the keys below RADIX_DIRECT make no node, next() crosses from
 * them into the nodes, and removing one notes no leaf, so it neither prunes a
 * full list nor is pruned. */
static void check_direct_slots(struct radix *r)
{
    const uint64_t direct[] = {0, 2, RADIX_DIRECT - 1};
    for (unsigned i = 0; i < 3; i++)
        CHECK(radix_replace(r, direct[i], NULL, &tags[4][i]), "insert direct %lu",
              (unsigned long)direct[i]);
    CHECK(radix_nodes(r) == 0, "direct keys made %ld nodes", radix_nodes(r));
    uint64_t at = 1;
    CHECK(radix_next(r, &at) == &tags[4][1] && at == 2, "next from 1: %lu", (unsigned long)at);
    at = 3;
    CHECK(radix_next(r, &at) == &tags[4][2] && at == RADIX_DIRECT - 1, "next to the last direct");
    at = RADIX_DIRECT;
    CHECK(radix_next(r, &at) == NULL, "a direct value found at or past RADIX_DIRECT");
    CHECK(radix_get(r, RADIX_DIRECT) == NULL, "RADIX_DIRECT is not a direct slot");
    radix_swap(r, RADIX_DIRECT, &tags[4][3]);
    CHECK(radix_nodes(r) == 4, "RADIX_DIRECT made %ld nodes, not its root and path of 3",
          radix_nodes(r));
    at = RADIX_DIRECT - 1;
    CHECK(radix_next(r, &at) == &tags[4][2] && at == RADIX_DIRECT - 1, "last direct");
    at = RADIX_DIRECT - 1 + 1;
    CHECK(radix_next(r, &at) == &tags[4][3] && at == RADIX_DIRECT, "across the boundary");
    radix_swap(r, RADIX_DIRECT - 1, NULL);
    at = 3;
    CHECK(radix_next(r, &at) == &tags[4][3] && at == RADIX_DIRECT, "from direct into the nodes");
    radix_swap(r, RADIX_DIRECT, NULL);
    radix_prune_emptied(r);
    CHECK(radix_nodes(r) == 1, "%ld nodes left", radix_nodes(r));
    /* Fill the core's list with emptied leaves; emptying a direct slot then
     * must not prune them (it notes nothing). */
    for (uint64_t leaf = 1; leaf <= RADIX_EMPTIED; leaf++)
        radix_swap(r, leaf << RADIX_BITS, &tags[3][leaf]);
    long grown = radix_nodes(r);
    for (uint64_t leaf = 1; leaf <= RADIX_EMPTIED; leaf++)
        radix_swap(r, leaf << RADIX_BITS, NULL);
    CHECK(radix_swap(r, 0, NULL) == &tags[4][0], "remove direct 0");
    CHECK(radix_nodes(r) == grown, "emptying a direct slot pruned the list: %ld nodes, not %ld",
          radix_nodes(r), grown);
    radix_prune_emptied(r);
    CHECK(radix_nodes(r) == 1, "%ld nodes left", radix_nodes(r));
    CHECK(radix_get(r, 2) == &tags[4][1], "pruning touched a direct slot");
    CHECK(radix_swap(r, 2, NULL) == &tags[4][1] && radix_get(r, 2) == NULL, "remove direct 2");
}

static void count_value(void *value, void *arg)
{
    (void)value;
    (*(unsigned *)arg)++;
}

int check_radix_unit(const struct check_args *args)
{
    (void)args;
    struct radix r;
    radix_init(&r, false);
    CHECK(radix_nodes(&r) == 1, "a new tree made now is not its root");
    radix_destroy(&r, NULL, NULL);
    radix_init(&r, true);
    CHECK(radix_nodes(&r) == 0, "a new tree whose root is made on demand has a node");
    check_direct_slots(&r);
    const uint64_t keys[] = {0,   1, RADIX_DIRECT - 1, RADIX_DIRECT, 511, 512, 1ull << 27,
                             (1ull << RADIX_KEY_BITS) - 1};
    enum { NKEYS = sizeof keys / sizeof keys[0] };
    ebr_enter();
    for (unsigned i = 0; i < NKEYS; i++) {
        CHECK(radix_get(&r, keys[i]) == NULL, "empty at %lu", (unsigned long)keys[i]);
        CHECK(radix_swap(&r, keys[i], &tags[0][i]) == NULL, "first store");
        CHECK(!radix_replace(&r, keys[i], NULL, &tags[1][i]), "insert over a value");
    }
    for (unsigned i = 0; i < NKEYS; i++)
        CHECK(radix_get(&r, keys[i]) == &tags[0][i], "get %lu", (unsigned long)keys[i]);
    /* The next value at or after a key, across leaves and levels. */
    for (unsigned i = 0; i < NKEYS; i++) {
        uint64_t from = i == 0 ? 0 : keys[i - 1] + 1, at = from;
        CHECK(radix_next(&r, &at) == &tags[0][i] && at == keys[i], "next after %lu: %lu",
              (unsigned long)from, (unsigned long)at);
    }
    uint64_t past = keys[NKEYS - 1] + 1, beyond = UINT64_MAX;
    CHECK(radix_next(&r, &past) == NULL && radix_next(&r, &beyond) == NULL, "nothing after");
    /* 0, 1, RADIX_DIRECT - 1 are direct; RADIX_DIRECT and 511 share a leaf;
     * 512 its parent; 1<<27 and the last key apart. */
    long grown = radix_nodes(&r);
    CHECK(grown == 1 + 3 + 1 + 3 + 3, "%ld nodes", grown);
    for (unsigned i = 0; i < 3; i++)
        CHECK(radix_swap(&r, keys[i], NULL) == &tags[0][i], "remove direct");
    CHECK(radix_swap(&r, RADIX_DIRECT, NULL) == &tags[0][3], "remove RADIX_DIRECT");
    CHECK(radix_nodes(&r) == grown, "a leaf with values left was freed");
    CHECK(radix_swap(&r, 511, NULL) == &tags[0][4], "remove 511");
    CHECK(radix_nodes(&r) == grown, "an emptied leaf freed before its core's list was full");
    radix_prune_emptied(&r);
    CHECK(radix_nodes(&r) == grown - 1, "an empty leaf was kept");
    CHECK(radix_swap(&r, 5, NULL) == NULL, "removing nothing");
    for (unsigned i = 5; i < NKEYS; i++)
        CHECK(radix_swap(&r, keys[i], NULL) == &tags[0][i], "remove");
    radix_prune_emptied(&r);
    CHECK(radix_nodes(&r) == 1, "%ld nodes left", radix_nodes(&r));
    /* Keys in RADIX_EMPTIED + 1 leaves of one level-2 node (leaf 0 would hold
     * direct keys): emptying the last leaf finds the core's list full and
     * prunes the others first. */
    for (uint64_t leaf = 1; leaf <= RADIX_EMPTIED + 1; leaf++)
        radix_swap(&r, leaf << RADIX_BITS, &tags[3][leaf]);
    CHECK(radix_nodes(&r) == 3 + RADIX_EMPTIED + 1, "%ld nodes", radix_nodes(&r));
    for (uint64_t leaf = 1; leaf <= RADIX_EMPTIED; leaf++)
        radix_swap(&r, leaf << RADIX_BITS, NULL);
    CHECK(radix_nodes(&r) == 3 + RADIX_EMPTIED + 1, "pruned before the list was full");
    radix_swap(&r, (uint64_t)(RADIX_EMPTIED + 1) << RADIX_BITS, NULL);
    CHECK(radix_nodes(&r) == 4, "a full list left %ld nodes, not 4", radix_nodes(&r));
    radix_prune_emptied(&r);
    CHECK(radix_nodes(&r) == 1, "%ld nodes left", radix_nodes(&r));
    CHECK(radix_replace(&r, 7, NULL, &tags[2][0]) && radix_get(&r, 7) == &tags[2][0], "insert");
    CHECK(radix_replace(&r, 700, NULL, &tags[2][1]), "insert");
    ebr_exit();
    ebr_drain();
    unsigned destroyed = 0;
    radix_destroy(&r, count_value, &destroyed);
    CHECK(destroyed == 2, "destroy visited %u values", destroyed);
    printf("ok, radix unit checks passed\n");
    return 0;
}

struct radix_stress {
    struct radix tree;
    _Atomic unsigned long reads, writes;
    unsigned threads;
};

/* Thread i's keys interleave with the others' in the same leaves and spread
 * over several interior nodes; key 0 of each is a direct slot (thread <
 * RADIX_DIRECT), its keys 8, 16, ... are in the first leaf beside them. */
static uint64_t key_of(unsigned thread, unsigned k)
{
    return (uint64_t)(k % 8) << 20 | (uint64_t)(k / 8) << 6 | thread;
}

static void radix_body(unsigned index, void *arg)
{
    struct radix_stress *s = arg;
    uint64_t rng = index * 977 + 3;
    bool model[64] = {false};
    unsigned long reads = 0, writes = 0;
    while (!check_stop()) {
        unsigned k = check_below(&rng, 64);
        ebr_enter();
        if (check_below(&rng, 2)) {
            unsigned other = check_below(&rng, s->threads);
            int *v = radix_get(&s->tree, key_of(other, k));
            CHECK(!v || v == &tags[other][k], "read a value that was never stored there");
            reads++;
        } else if (model[k]) {
            CHECK(radix_swap(&s->tree, key_of(index, k), NULL) == &tags[index][k], "remove");
            model[k] = false;
            writes++;
        } else {
            CHECK(radix_replace(&s->tree, key_of(index, k), NULL, &tags[index][k]), "insert");
            model[k] = true;
            writes++;
        }
        ebr_exit();
    }
    ebr_enter();
    for (unsigned k = 0; k < 64; k++) {
        CHECK(radix_get(&s->tree, key_of(index, k)) == (model[k] ? &tags[index][k] : NULL),
              "final key %u", k);
        radix_swap(&s->tree, key_of(index, k), NULL);
    }
    ebr_exit();
    atomic_fetch_add(&s->reads, reads);
    atomic_fetch_add(&s->writes, writes);
}

int check_radix_stress(const struct check_args *args)
{
    struct radix_stress *s = aligned_alloc(SV6_PLACEMENT, sizeof *s);
    CHECK(s, "out of memory");
    radix_init(&s->tree, true); /* its root made by the first thread that needs it */
    atomic_init(&s->reads, 0);
    atomic_init(&s->writes, 0);
    s->threads = args->threads;
    check_run_threads(args->threads, args->seconds, radix_body, s);
    radix_prune_emptied(&s->tree);
    ebr_drain();
    CHECK(radix_nodes(&s->tree) == 1, "%ld nodes left in an empty tree",
          radix_nodes(&s->tree));
    radix_destroy(&s->tree, NULL, NULL);
    printf("ok, %lu reads and %lu writes on %u threads, empty nodes all freed\n",
           atomic_load(&s->reads), atomic_load(&s->writes), args->threads);
    free(s);
    return 0;
}
