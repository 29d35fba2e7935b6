/* dir.c - per-bucket-locked hash directory (see dir.h). */
#include "sv6/dir.h"

#include "sv6/alloc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void dir_init(struct dir *d, const struct dir_ops *ops)
{
    d->ops = ops;
    for (unsigned b = 0; b < DIR_BUCKETS; b++) {
        sv6_lock_init(&d->buckets[b].lock);
        atomic_init(&d->buckets[b].head, NULL);
    }
}

void dir_destroy(struct dir *d)
{
    for (unsigned b = 0; b < DIR_BUCKETS; b++) {
        struct dir_entry *e = atomic_load(&d->buckets[b].head);
        while (e) {
            struct dir_entry *next = atomic_load(&e->next);
            d->ops->drop(e->value, d->ops->ctx);
            sv6_free_lines(e, sizeof *e);
            e = next;
        }
    }
}

static struct dir_bucket *bucket_of(struct dir *d, const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = (h ^ *c) * 16777619u;
    return &d->buckets[h % DIR_BUCKETS];
}

/* The link that points at name's entry (or at the NULL ending the chain). */
static _Atomic(struct dir_entry *) *find_link(struct dir_bucket *b, const char *name)
{
    _Atomic(struct dir_entry *) *link = &b->head;
    for (struct dir_entry *e; (e = atomic_load(link)); link = &e->next)
        if (strcmp(e->name, name) == 0)
            return link;
    return link;
}

void *dir_lookup(struct dir *d, const char *name)
{
    struct dir_bucket *b = bucket_of(d, name);
    for (struct dir_entry *e = atomic_load(&b->head); e; e = atomic_load(&e->next))
        if (strcmp(e->name, name) == 0)
            return e->value;
    return NULL;
}

static struct dir_entry *new_entry(struct dir *d, const char *name, void *value)
{
    struct dir_entry *e = sv6_alloc_lines(sizeof *e);
    atomic_init(&e->next, NULL);
    e->value = value;
    e->ops = d->ops;
    strcpy(e->name, name);
    return e;
}

static void free_entry(struct ebr_node *node)
{
    struct dir_entry *e = SV6_CONTAINER_OF(node, struct dir_entry, ebr);
    e->ops->drop(e->value, e->ops->ctx);
    sv6_free_lines(e, sizeof *e);
}

/* Whether name is there now, without the bucket lock: a call that fails on it
 * (an insert of a present name, a removal or rename of a missing one) then
 * writes nothing, so it conflicts with no lookup or other failing call. */
static bool present(struct dir *d, const char *name)
{
    ebr_enter();
    bool found = dir_lookup(d, name) != NULL;
    ebr_exit();
    return found;
}

int dir_insert(struct dir *d, const char *name, void *value)
{
    if (strlen(name) > DIR_NAME_MAX)
        return -ENAMETOOLONG;
    if (present(d, name))
        return -EEXIST;
    struct dir_bucket *b = bucket_of(d, name);
    sv6_lock(&b->lock);
    _Atomic(struct dir_entry *) *link = find_link(b, name);
    int result = -EEXIST;
    if (!atomic_load(link)) {
        /* Fully built before it is published: lookups see all of it. */
        atomic_store(link, new_entry(d, name, value));
        result = 0;
    }
    sv6_unlock(&b->lock);
    return result;
}

/* Under the bucket lock: unlinks the entry at *link; freed after a grace
 * period because lookups may be reading it. */
static void *unlink_entry(_Atomic(struct dir_entry *) *link)
{
    struct dir_entry *e = atomic_load(link);
    atomic_store(link, atomic_load(&e->next));
    void *value = e->value;
    ebr_retire(&e->ebr, free_entry);
    return value;
}

int dir_remove(struct dir *d, const char *name, void **old)
{
    if (!present(d, name))
        return -ENOENT;
    struct dir_bucket *b = bucket_of(d, name);
    sv6_lock(&b->lock);
    _Atomic(struct dir_entry *) *link = find_link(b, name);
    int result = -ENOENT;
    if (atomic_load(link)) {
        *old = unlink_entry(link);
        result = 0;
    }
    sv6_unlock(&b->lock);
    return result;
}

static void lock_pair(struct dir_bucket *a, struct dir_bucket *b)
{
    /* Address order, so two renames in opposite directions cannot deadlock. */
    if (a > b) {
        struct dir_bucket *t = a;
        a = b;
        b = t;
    }
    sv6_lock(&a->lock);
    if (b != a)
        sv6_lock(&b->lock);
}

static void unlock_pair(struct dir_bucket *a, struct dir_bucket *b)
{
    sv6_unlock(&a->lock);
    if (b != a)
        sv6_unlock(&b->lock);
}

int dir_rename(struct dir *d, const char *src, const char *dst, void **moved, void **replaced)
{
    if (strlen(src) > DIR_NAME_MAX || strlen(dst) > DIR_NAME_MAX)
        return -ENAMETOOLONG;
    /* Onto itself: nothing changes, so nothing is written. */
    if (strcmp(src, dst) == 0) {
        *replaced = NULL;
        *moved = dir_lookup(d, src);
        return *moved ? 0 : -ENOENT;
    }
    if (!present(d, src))
        return -ENOENT;
    struct dir_bucket *sb = bucket_of(d, src), *db = bucket_of(d, dst);
    lock_pair(sb, db);
    int result = -ENOENT;
    *replaced = NULL;
    _Atomic(struct dir_entry *) *slink = find_link(sb, src);
    if (atomic_load(slink)) {
        result = 0;
        *moved = atomic_load(slink)->value;
        _Atomic(struct dir_entry *) *dlink = find_link(db, dst);
        if (atomic_load(dlink) && atomic_load(dlink)->value == *moved) {
            /* dst already names it: only src goes, dst's entry is not rewritten
             * (a lookup of dst shares nothing with this rename). */
            *replaced = *moved;
            unlink_entry(slink);
        } else {
            /* dst first, then src: a lookup in between sees both names,
             * never neither. */
            struct dir_entry *fresh = new_entry(d, dst, *moved);
            d->ops->hold(*moved, d->ops->ctx); /* src's entry drops its own */
            if (atomic_load(dlink)) {
                struct dir_entry *old = atomic_load(dlink);
                *replaced = old->value;
                atomic_init(&fresh->next, atomic_load(&old->next));
                atomic_store(dlink, fresh);
                ebr_retire(&old->ebr, free_entry);
            } else {
                atomic_store(dlink, fresh);
            }
            /* Same bucket: inserting dst may have moved src's link. */
            unlink_entry(find_link(sb, src));
        }
    }
    unlock_pair(sb, db);
    return result;
}
