/* fdtable.c - lowest-fd and per-core fd partitions (see fdtable.h). */
#include "sv6/fdtable.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

/* The calling thread, as partitions' owner: an address no other live thread has. */
static _Thread_local char thread_mark;

void fdtable_init(struct fdtable *t)
{
    for (unsigned p = 0; p < FDTABLE_PARTS; p++) {
        struct fdtable_part *part = &t->parts[p];
        sv6_lock_init(&part->lock);
        atomic_init(&part->next, 0);
        atomic_init(&part->bound, 0);
        atomic_init(&part->slots, NULL);
        atomic_init(&part->owner, NULL);
        atomic_init(&part->foreign, false);
    }
}

void fdtable_destroy(struct fdtable *t)
{
    for (unsigned p = 0; p < FDTABLE_PARTS; p++) {
        free(atomic_load(&t->parts[p].slots));
    }
}

/* The partition's slots, allocated under its lock on first use. */
static _Atomic(void *) *slots_of(struct fdtable_part *part)
{
    _Atomic(void *) *slots = atomic_load(&part->slots);
    if (slots)
        return slots;
    sv6_lock(&part->lock);
    slots = atomic_load(&part->slots);
    if (!slots) {
        slots = calloc(FDTABLE_PART_SIZE, sizeof *slots);
        if (!slots)
            abort();
        atomic_store(&part->owner, &thread_mark);
        atomic_store(&part->slots, slots); /* published whole: lookups read it unlocked */
    }
    sv6_unlock(&part->lock);
    return slots;
}

/* Takes slot i of part if it is free. */
static bool take(struct fdtable_part *part, _Atomic(void *) *slots, unsigned i, void *value)
{
    void *expected = NULL;
    if (atomic_load_explicit(&slots[i], memory_order_relaxed))
        return false;
    unsigned bound = atomic_load(&part->bound);
    while (bound <= i && !atomic_compare_exchange_weak(&part->bound, &bound, i + 1))
        ;
    return atomic_compare_exchange_strong(&slots[i], &expected, value);
}

/* The first free slot from index start on, wrapping around: fd or -EMFILE. */
static int alloc_in(struct fdtable_part *part, unsigned p, unsigned start, void *value)
{
    _Atomic(void *) *slots = slots_of(part);
    for (unsigned k = 0; k < FDTABLE_PART_SIZE; k++) {
        unsigned i = (start + k) % FDTABLE_PART_SIZE;
        if (take(part, slots, i, value)) {
            if (p > 0)
                atomic_store_explicit(&part->next, i + 1, memory_order_relaxed);
            return (int)(p << FDTABLE_PART_BITS | i);
        }
    }
    return -EMFILE;
}

int fdtable_alloc_lowest(struct fdtable *t, void *value)
{
    return alloc_in(&t->parts[0], 0, 0, value);
}

int fdtable_alloc_any(struct fdtable *t, void *value)
{
    unsigned p = sv6_core() + 1;
    struct fdtable_part *part = &t->parts[p];
    return alloc_in(part, p, atomic_load_explicit(&part->next, memory_order_relaxed), value);
}

static bool split(int fd, unsigned *p, unsigned *i)
{
    if (fd < 0)
        return false;
    *p = (unsigned)fd >> FDTABLE_PART_BITS;
    *i = (unsigned)fd & ((1u << FDTABLE_PART_BITS) - 1);
    return *p < FDTABLE_PARTS && *i < FDTABLE_PART_SIZE;
}

int fdtable_install(struct fdtable *t, int fd, void *value)
{
    unsigned p, i;
    if (!split(fd, &p, &i))
        return -EBADF;
    struct fdtable_part *part = &t->parts[p];
    return take(part, slots_of(part), i, value) ? 0 : -EEXIST;
}

/* The slot of fd, or NULL when fd is out of range or its partition unused. */
static _Atomic(void *) *slot_of(struct fdtable *t, int fd)
{
    unsigned p, i;
    if (!split(fd, &p, &i))
        return NULL;
    _Atomic(void *) *slots = atomic_load(&t->parts[p].slots);
    return slots ? &slots[i] : NULL;
}

void *fdtable_get(struct fdtable *t, int fd)
{
    _Atomic(void *) *slot = slot_of(t, fd);
    if (!slot)
        return NULL;
    struct fdtable_part *part = &t->parts[(unsigned)fd >> FDTABLE_PART_BITS];
    if (part != &t->parts[0] &&
        atomic_load_explicit(&part->owner, memory_order_relaxed) != &thread_mark) {
        /* Marked before the slot is read, a fence between: an owner's remove
         * (a store, then a fence, then its read of the mark) either sees the
         * mark or took the value before this read. */
        if (!atomic_load(&part->foreign))
            atomic_store(&part->foreign, true);
        atomic_thread_fence(memory_order_seq_cst);
    }
    return atomic_load(slot);
}

void *fdtable_remove(struct fdtable *t, int fd, bool *alone)
{
    unsigned p, i;
    _Atomic(void *) *slot = slot_of(t, fd);
    if (alone)
        *alone = false;
    if (!slot || !split(fd, &p, &i))
        return NULL;
    /* Closing a free fd writes nothing: it conflicts with no lookup of it. */
    if (!atomic_load(slot))
        return NULL;
    struct fdtable_part *part = &t->parts[p];
    sv6_lock(&part->lock);
    /* Only holders of the lock change a slot that holds something (an
     * allocation only fills an empty one), so no locked exchange is needed. */
    void *value = atomic_load_explicit(slot, memory_order_relaxed);
    atomic_store_explicit(slot, NULL, memory_order_release);
    sv6_unlock(&part->lock);
    if (alone && value && p > 0 &&
        atomic_load_explicit(&part->owner, memory_order_relaxed) == &thread_mark) {
        atomic_thread_fence(memory_order_seq_cst); /* see fdtable_get */
        *alone = !atomic_load(&part->foreign);
    }
    return value;
}

int fdtable_visit(struct fdtable *t, int fd, void (*fn)(int fd, void *value, void *arg),
                  void *arg)
{
    unsigned p, i;
    _Atomic(void *) *slot = slot_of(t, fd);
    if (!slot || !split(fd, &p, &i))
        return -EBADF;
    struct fdtable_part *part = &t->parts[p];
    sv6_lock(&part->lock);
    void *value = atomic_load(slot);
    if (value)
        fn(fd, value, arg);
    sv6_unlock(&part->lock);
    return value ? 0 : -EBADF;
}

void fdtable_each(struct fdtable *t, void (*fn)(int fd, void *value, void *arg), void *arg)
{
    for (unsigned p = 0; p < FDTABLE_PARTS; p++) {
        struct fdtable_part *part = &t->parts[p];
        if (!atomic_load(&part->slots))
            continue; /* never used: nothing to hold still */
        sv6_lock(&part->lock);
        _Atomic(void *) *slots = atomic_load(&part->slots);
        unsigned bound = atomic_load(&part->bound);
        for (unsigned i = 0; i < bound; i++) {
            void *value = atomic_load(&slots[i]);
            if (value)
                fn((int)(p << FDTABLE_PART_BITS | i), value, arg);
        }
        sv6_unlock(&part->lock);
    }
}
