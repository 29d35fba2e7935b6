/*
 * dir.h - a directory: a hash table of name -> value with a lock per bucket and
 * lock-free lookup.
 *
 * Writers (insert, remove, rename) lock only the buckets of the names they
 * change, so operations on names in different buckets write no common line.
 * Lookups lock nothing: they run inside an EBR section, and a removed entry is
 * freed only after a grace period.
 *
 * Each entry owns one reference to its value, given by whoever inserts it.  The
 * entry drops it (ops->drop) only when it is freed, after the grace period: so a
 * lookup may take a new reference to the value it found (its entry's reference
 * still counts), which is what lets open take a reference without a lock.
 */
#ifndef SV6_DIR_H
#define SV6_DIR_H

#include "sv6/core.h"
#include "sv6/lock.h"
#include "sv6/ebr.h"

#include <stdatomic.h>

#define DIR_NAME_MAX 63
#define DIR_BUCKETS 512

struct dir_ops {
    void (*hold)(void *value, void *ctx); /* one more reference */
    void (*drop)(void *value, void *ctx); /* one fewer */
    void *ctx;
};

struct dir_entry {
    _Atomic(struct dir_entry *) next;
    void *value;
    const struct dir_ops *ops;
    struct ebr_node ebr;
    char name[DIR_NAME_MAX + 1];
};

struct dir_bucket {
    SV6_ALIGNED struct sv6_lock lock;
    _Atomic(struct dir_entry *) head;
};

struct dir {
    const struct dir_ops *ops;
    struct dir_bucket buckets[DIR_BUCKETS];
};

void dir_init(struct dir *d, const struct dir_ops *ops);
/* Frees the remaining entries at once, dropping their references; no other
 * thread may use the directory. */
void dir_destroy(struct dir *d);

/* Inside an EBR section: the value of name or NULL. */
void *dir_lookup(struct dir *d, const char *name);
/* 0 (the entry took over one reference of the caller's), -EEXIST or
 * -ENAMETOOLONG. */
int dir_insert(struct dir *d, const char *name, void *value);
/* 0 and *old = the removed value, or -ENOENT.  *old stays valid until the
 * caller's EBR section ends. */
int dir_remove(struct dir *d, const char *name, void **old);
/* Moves src's value to dst under both buckets' locks: 0 with *moved = the
 * value renamed and *replaced = dst's former value or NULL (valid until the
 * caller's EBR section ends),
 * -ENOENT without src, -ENAMETOOLONG.  src == dst changes nothing. */
int dir_rename(struct dir *d, const char *src, const char *dst, void **moved, void **replaced);

#endif
