/* check_refcache.c - refcache: exact epochs of a free, consistent reads, weak
 * references, and under threads: no object freed while referenced, every
 * object freed once its count is truly zero. */
#include "check.h"

#include "sv6/refcache.h"

#include <stdatomic.h>
#include <string.h>

struct thing {
    struct refcache_obj ref;
    /* The test's own exact count of references, kept beside refcache's. */
    SV6_ALIGNED _Atomic long held;
    _Atomic int released;
};

static _Atomic long things_alive;

static void release_thing(struct refcache_obj *obj)
{
    struct thing *t = SV6_CONTAINER_OF(obj, struct thing, ref);
    CHECK(atomic_load(&t->held) == 0, "freed with %ld references held", atomic_load(&t->held));
    CHECK(atomic_fetch_add(&t->released, 1) == 0, "released twice");
    atomic_fetch_sub(&things_alive, 1);
    free(t);
}

static struct thing *new_thing(long count)
{
    struct thing *t = aligned_alloc(SV6_PLACEMENT, sizeof *t);
    CHECK(t, "out of memory");
    memset(t, 0, sizeof *t);
    refcache_obj_init(&t->ref, count, release_thing);
    atomic_init(&t->held, count);
    atomic_fetch_add(&things_alive, 1);
    return t;
}

static void take(struct refcache *rc, struct thing *t)
{
    atomic_fetch_add(&t->held, 1);
    refcache_inc(rc, &t->ref);
}

static void drop(struct refcache *rc, struct thing *t)
{
    /* Counted down first: once refcache has the dec, t may be freed. */
    atomic_fetch_sub(&t->held, 1);
    refcache_dec(rc, &t->ref);
}

static void tick_and_drain(struct refcache *rc)
{
    refcache_tick(rc);
    ebr_drain();
}

static struct refcache *new_refcache(void)
{
    struct refcache *rc = aligned_alloc(SV6_PLACEMENT, sizeof *rc);
    CHECK(rc, "out of memory");
    memset(rc, 0, sizeof *rc);
    refcache_init(rc);
    return rc;
}

static void free_refcache(struct refcache *rc)
{
    refcache_quiesce(rc);
    free(rc);
}

/* The hook's script: at (tick, core just flushed), move the one live reference
 * of `thing` from core `from` to core `to` (taken there, dropped here). */
struct move {
    unsigned tick, after_core, from, to;
};

struct moving {
    struct refcache *rc;
    struct thing *thing;
    unsigned tick;
    const struct move *moves;
    unsigned nmoves;
};

static void move_reference(unsigned core, void *arg)
{
    struct moving *m = arg;
    for (unsigned i = 0; i < m->nmoves; i++) {
        const struct move *step = &m->moves[i];
        if (step->tick != m->tick || step->after_core != core)
            continue;
        sv6_core_set(step->to);
        take(m->rc, m->thing);
        sv6_core_set(step->from);
        drop(m->rc, m->thing);
    }
}

/* A reference that keeps moving, within each tick, from a core not yet flushed
 * to one already flushed: every flush sees a net delta of zero, the global
 * count stays zero for two epochs, and yet the object is referenced.  Only the
 * dirty mark of a zero-delta entry keeps it alive. */
static void check_reference_moving_during_ticks(struct refcache *rc)
{
    struct thing *t = new_thing(1);
    sv6_core_set(2);
    take(rc, t);
    sv6_core_set(0);
    drop(rc, t); /* global 1, core 0: -1, core 2: +1; true count 1 */
    static const struct move moves[] = {
        {0, 0, 2, 0}, /* tick 0: core 0 flushed (global 0, queued): move to core 0 */
        {0, 2, 0, 2}, /* after core 2's flush: move back to core 2 */
        {1, 0, 2, 0}, /* tick 1: core 0 flushed: move to core 0 again */
    };
    struct moving m = {.rc = rc, .thing = t, .moves = moves, .nmoves = 3};
    rc->after_flush = move_reference;
    rc->after_flush_arg = &m;
    for (m.tick = 0; m.tick < 2; m.tick++)
        refcache_tick(rc);
    rc->after_flush = NULL;
    for (unsigned i = 0; i < 4; i++)
        tick_and_drain(rc);
    CHECK(atomic_load(&t->released) == 0, "freed while a moving reference held it");
    CHECK(refcache_read(rc, &t->ref) == 1, "count after the moves");
    drop(rc, t);
    for (unsigned i = 0; i < 4; i++)
        tick_and_drain(rc);
    CHECK(atomic_load(&things_alive) == 0, "not freed after the last drop");
}

/* A self-ticking refcache whose core 1 caches a delta on *kept and then goes
 * idle (never flushes); the caller goes on as core 0. */
static struct refcache *self_ticking_with_idle_core(struct thing **kept)
{
    struct refcache *rc = new_refcache();
    rc->self_ticking = true;
    *kept = new_thing(1);
    sv6_core_set(1);
    take(rc, *kept);
    sv6_core_set(0);
    return rc;
}

/* Self-ticking, with no refcache_tick: core 1 caches a delta and goes idle
 * while core 0 keeps creating and dropping objects.  They are freed as core 0
 * goes (it flushes core 1 once core 1 held an epoch back REFCACHE_STALLS
 * times), and core 1's delta still counts. */
static void check_self_ticking(void)
{
    struct thing *kept;
    struct refcache *rc = self_ticking_with_idle_core(&kept);
    long alive_before = atomic_load(&things_alive);
    enum { ROUNDS = 64 * REFCACHE_FLUSH_EVERY };
    for (unsigned i = 0; i < ROUNDS; i++) {
        struct thing *t = new_thing(1);
        take(rc, t);
        drop(rc, t);
        drop(rc, t);
    }
    ebr_drain(); /* releases wait for a grace period, not for a tick */
    long left = atomic_load(&things_alive) - alive_before;
    /* Three changes a round: a tick every ~85 rounds, an object freed two or
     * three epochs after its last drop (and core 1's help costs a few more). */
    CHECK(left < 16 * REFCACHE_FLUSH_EVERY, "%ld of %d dropped objects not freed without a tick",
          left, (int)ROUNDS);
    CHECK(atomic_load(&kept->released) == 0, "freed while the idle core's reference holds it");
    CHECK(refcache_read(rc, &kept->ref) == 2, "the idle core's delta lost");
    drop(rc, kept);
    drop(rc, kept);
    free_refcache(rc);
}

/* Self-ticking with core 1 holding a delta and never flushing (its thread
 * preempted): epochs end only when core 0 helps it, after REFCACHE_STALLS
 * failed tries, so without the bound core 0's review list would grow by 32
 * ticks' worth of objects per epoch; with it, core 0's ticks wait (yielding,
 * ticking again) once REFCACHE_WAITING_MAX objects are listed. */
static void check_waiting_bounded_behind_a_lagging_core(void)
{
    struct thing *kept;
    struct refcache *rc = self_ticking_with_idle_core(&kept);
    unsigned most_waiting = 0;
    enum { OBJECTS = 16 * REFCACHE_WAITING_MAX };
    for (unsigned i = 0; i < OBJECTS; i++) {
        drop(rc, new_thing(1));
        unsigned waiting = atomic_load(&rc->cores[0].waiting);
        if (waiting > most_waiting)
            most_waiting = waiting;
    }
    CHECK(most_waiting <= 2 * REFCACHE_WAITING_MAX,
          "%u objects waited for review behind a lagging core", most_waiting);
    drop(rc, kept);
    drop(rc, kept);
    free_refcache(rc);
}

int check_refcache_unit(const struct check_args *args)
{
    (void)args;
    struct refcache *rc = new_refcache();

    /* A count spread over cores: the consistent read sums it. */
    struct thing *t = new_thing(1);
    for (unsigned c = 0; c < 4; c++) {
        sv6_core_set(c);
        for (unsigned i = 0; i <= c; i++)
            take(rc, t);
    }
    CHECK(refcache_read(rc, &t->ref) == 11, "read %ld", (long)refcache_read(rc, &t->ref));
    /* Drop on other cores than the ones that took: deltas -k on core 5. */
    sv6_core_set(5);
    for (unsigned i = 0; i < 10; i++)
        drop(rc, t);
    CHECK(refcache_read(rc, &t->ref) == 1, "read after drops");
    for (unsigned i = 0; i < 5; i++)
        tick_and_drain(rc);
    CHECK(atomic_load(&t->released) == 0, "freed while its count is 1");

    /* Zero: queued in the tick that flushed it (epoch e), reviewed when the
     * next tick has flushed every core again (epoch e+2), freed after the EBR
     * grace period. */
    drop(rc, t);
    CHECK(refcache_tick(rc) == 1, "not waiting after the flush that saw zero");
    CHECK(ebr_drain() == 0, "freed in the tick that saw zero");
    CHECK(refcache_tick(rc) == 0, "still waiting after a full round");
    CHECK(ebr_drain() == 1, "not freed after a full round");
    CHECK(atomic_load(&things_alive) == 0, "alive: %ld", atomic_load(&things_alive));

    /* Global zero while a delta is cached on another core: the flush leaves it
     * dirty and the true count keeps it. */
    t = new_thing(1);
    sv6_core_set(1);
    take(rc, t);
    sv6_core_set(2);
    drop(rc, t);
    drop(rc, t); /* no reference left but the one cached on core 1 ... */
    atomic_fetch_add(&t->held, 1);
    refcache_add(rc, &t->ref, 1); /* ... and this one, taken back on core 2 */
    for (unsigned i = 0; i < 5; i++)
        tick_and_drain(rc);
    CHECK(atomic_load(&t->released) == 0, "freed at count 1");
    drop(rc, t);
    for (unsigned i = 0; i < 4; i++)
        tick_and_drain(rc);
    CHECK(atomic_load(&things_alive) == 0, "not freed at count 0");

    check_reference_moving_during_ticks(rc);
    check_self_ticking();
    check_waiting_bounded_behind_a_lagging_core();

    /* Weak references: upgrade while alive, even at a count of zero waiting
     * for review (which then keeps it), NULL once freed. */
    struct refcache_weak weak;
    t = new_thing(1);
    refcache_weak_init(&weak, &t->ref);
    CHECK(refcache_weak_get(&weak) == &t->ref, "upgrade of a live object");
    atomic_fetch_add(&t->held, 1);
    drop(rc, t);
    drop(rc, t);
    refcache_tick(rc); /* queued */
    CHECK(refcache_weak_get(&weak) == &t->ref, "upgrade while queued");
    atomic_fetch_add(&t->held, 1);
    for (unsigned i = 0; i < 4; i++)
        tick_and_drain(rc);
    CHECK(atomic_load(&t->released) == 0, "freed after a weak upgrade");
    drop(rc, t);
    for (unsigned i = 0; i < 4; i++)
        tick_and_drain(rc);
    CHECK(atomic_load(&things_alive) == 0, "not freed");
    CHECK(refcache_weak_get(&weak) == NULL, "upgrade of a freed object");

    /* A counter (no release) goes negative and back without a review. */
    struct refcache_obj counter;
    refcache_obj_init(&counter, 0, NULL);
    refcache_dec(rc, &counter);
    tick_and_drain(rc);
    CHECK(refcache_read(rc, &counter) == -1, "counter");
    refcache_inc(rc, &counter);
    CHECK(refcache_tick(rc) == 0, "a counter was queued for review");

    /* Slot collisions evict: many objects on one core keep exact counts. */
    enum { MANY = 3 * REFCACHE_SLOTS };
    static struct thing *many[MANY];
    sv6_core_set(3);
    for (unsigned i = 0; i < MANY; i++) {
        many[i] = new_thing(1);
        take(rc, many[i]);
    }
    for (unsigned i = 0; i < MANY; i++) {
        CHECK(refcache_read(rc, &many[i]->ref) == 2, "object %u", i);
        drop(rc, many[i]);
        drop(rc, many[i]);
    }
    free_refcache(rc);
    CHECK(atomic_load(&things_alive) == 0, "%ld objects never freed", atomic_load(&things_alive));
    printf("ok, refcache unit checks passed\n");
    return 0;
}

/* ------------------------------------------------------------ stress */

enum { ANCHORS = 32, WEAKS = 64 };

struct anchor {
    SV6_ALIGNED struct sv6_lock lock;
    struct thing *thing; /* holds one reference */
};

struct stress {
    struct refcache *rc;
    struct anchor anchors[ANCHORS];
    _Atomic(struct thing *) mailbox[64]; /* references handed to thread i */
    struct refcache_weak weaks[WEAKS];
    struct thing *_Atomic weak_things[WEAKS];
    _Atomic unsigned long created, upgrades, handoffs, reads;
    unsigned ticker_index;
};

static void stress_body(unsigned index, void *arg)
{
    struct stress *s = arg;
    if (index == s->ticker_index) { /* one thread plays the timer tick */
        while (!check_stop())
            tick_and_drain(s->rc);
        return;
    }
    uint64_t rng = 0x9e3779b97f4a7c15ull * (index + 1);
    enum { MAX_HELD = 16 };
    struct thing *held[MAX_HELD];
    unsigned nheld = 0, threads = s->ticker_index;
    while (!check_stop()) {
        unsigned what = check_below(&rng, 100);
        struct anchor *a = &s->anchors[check_below(&rng, ANCHORS)];
        if (what < 30 && nheld < MAX_HELD) {
            /* Take a reference through an anchor: its own one counts. */
            sv6_lock(&a->lock);
            take(s->rc, a->thing);
            held[nheld++] = a->thing;
            sv6_unlock(&a->lock);
        } else if (what < 60 && nheld > 0) {
            drop(s->rc, held[--nheld]);
        } else if (what < 70) {
            /* Replace an anchor's object: the old one may reach zero. */
            struct thing *fresh = new_thing(1);
            atomic_fetch_add(&s->created, 1);
            sv6_lock(&a->lock);
            struct thing *old = a->thing;
            a->thing = fresh;
            sv6_unlock(&a->lock);
            drop(s->rc, old);
        } else if (what < 80 && nheld > 0) {
            /* Hand a reference to another thread (on another core): it was
             * taken here and will be dropped there. */
            unsigned to = check_below(&rng, threads);
            struct thing *prev = atomic_exchange(&s->mailbox[to], held[--nheld]);
            if (prev)
                held[nheld++] = prev;
            atomic_fetch_add(&s->handoffs, 1);
        } else if (what < 85) {
            struct thing *mine = atomic_exchange(&s->mailbox[index], NULL);
            if (mine && nheld < MAX_HELD)
                held[nheld++] = mine;
            else if (mine)
                drop(s->rc, mine);
        } else if (what < 95) {
            unsigned w = check_below(&rng, WEAKS);
            if (check_below(&rng, 16) == 0) { /* its last strong holder lets go */
                struct thing *base = atomic_exchange(&s->weak_things[w], NULL);
                if (base)
                    drop(s->rc, base);
            }
            struct refcache_obj *obj = refcache_weak_get(&s->weaks[w]);
            if (obj) {
                struct thing *t = SV6_CONTAINER_OF(obj, struct thing, ref);
                CHECK(atomic_load(&t->released) == 0, "weak upgrade of a freed object");
                atomic_fetch_add(&t->held, 1);
                atomic_fetch_add(&s->upgrades, 1);
                if (nheld < MAX_HELD)
                    held[nheld++] = t;
                else
                    drop(s->rc, t);
            }
        } else if (nheld > 0) {
            /* A reference we hold: the true count is at least 1. */
            CHECK(refcache_read(s->rc, &held[0]->ref) >= 1, "read below a held reference");
            atomic_fetch_add(&s->reads, 1);
        }
    }
    while (nheld > 0)
        drop(s->rc, held[--nheld]);
}

/* Consistent reads against references that keep moving between two cores:
 * the true count is always BASE or BASE+1, so any other sum is a read that
 * mixed two moments. */
enum { BASE = 5 };

struct read_race {
    struct refcache *rc;
    struct thing *thing;
    _Atomic unsigned long reads, moves;
};

static void read_race_body(unsigned index, void *arg)
{
    struct read_race *r = arg;
    if (index == 0) {
        unsigned long reads = 0;
        while (!check_stop()) {
            int64_t count = refcache_read(r->rc, &r->thing->ref);
            CHECK(count == BASE || count == BASE + 1, "inconsistent read %ld", (long)count);
            reads++;
        }
        atomic_store(&r->reads, reads);
        return;
    }
    if (index == 2) { /* the timer tick, flushing meanwhile */
        while (!check_stop())
            refcache_tick(r->rc);
        return;
    }
    unsigned long moves = 0;
    while (!check_stop()) {
        for (unsigned core = 1; core <= 2; core++) {
            sv6_core_set(core);
            take(r->rc, r->thing); /* BASE + 1 */
            sv6_core_set(3 - core);
            drop(r->rc, r->thing); /* BASE, the reference now counted on `core` */
        }
        moves += 2;
    }
    atomic_store(&r->moves, moves);
}

/* Returns the "reads against moves" part of the report line. */
static void check_consistent_reads(const struct check_args *args, struct refcache *rc,
                                   char *report, size_t size)
{
    struct read_race r = {.rc = rc, .thing = new_thing(BASE)};
    uint64_t retries = atomic_load(&rc->consistent_retries);
    check_run_threads(3, args->seconds / 2, read_race_body, &r);
    retries = atomic_load(&rc->consistent_retries) - retries;
    CHECK(atomic_load(&r.reads) > 100 && atomic_load(&r.moves) > 100, "too little work");
    CHECK(retries > 0, "no read had to retry: the race was not exercised");
    for (int i = 0; i < BASE; i++)
        drop(rc, r.thing);
    snprintf(report, size, "%lu consistent reads against %lu moves (%lu retried)",
             atomic_load(&r.reads), atomic_load(&r.moves), (unsigned long)retries);
}

int check_refcache_stress(const struct check_args *args)
{
    struct stress *s = calloc(1, sizeof *s);
    CHECK(s, "out of memory");
    s->rc = new_refcache();
    s->ticker_index = args->threads; /* threads workers plus the ticker */
    for (unsigned i = 0; i < ANCHORS; i++) {
        sv6_lock_init(&s->anchors[i].lock);
        s->anchors[i].thing = new_thing(1);
    }
    /* Weakly referenced objects: one strong reference each in weak_things,
     * dropped at a random moment; after that they live only while upgrades
     * keep them. */
    for (unsigned i = 0; i < WEAKS; i++) {
        struct thing *t = new_thing(1);
        refcache_weak_init(&s->weaks[i], &t->ref);
        atomic_init(&s->weak_things[i], t);
    }
    char reads_report[128];
    check_consistent_reads(args, s->rc, reads_report, sizeof reads_report);
    /* The workers tick their own cores as well, racing the ticker's full ticks. */
    s->rc->self_ticking = true;
    check_run_threads(args->threads + 1, args->seconds / 2, stress_body, s);
    for (unsigned i = 0; i < 64; i++) {
        struct thing *t = atomic_load(&s->mailbox[i]);
        if (t)
            drop(s->rc, t);
    }
    for (unsigned i = 0; i < WEAKS; i++) {
        struct thing *t = atomic_load(&s->weak_things[i]);
        if (t)
            drop(s->rc, t);
    }
    for (unsigned i = 0; i < ANCHORS; i++) {
        drop(s->rc, s->anchors[i].thing);
    }
    free_refcache(s->rc);
    CHECK(atomic_load(&things_alive) == 0, "%ld objects with a true count of zero not freed",
          atomic_load(&things_alive));
    for (unsigned i = 0; i < WEAKS; i++)
        CHECK(s->weaks[i].obj == NULL, "weak reference %u still set", i);
    printf("ok, %lu objects created, %lu handoffs, %lu weak upgrades, %lu reads, all freed; %s\n",
           atomic_load(&s->created) + ANCHORS + WEAKS, atomic_load(&s->handoffs),
           atomic_load(&s->upgrades), atomic_load(&s->reads), reads_report);
    free(s);
    return 0;
}
