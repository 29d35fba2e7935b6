/* tree.h - intrusive ordered tree (a treap) over set_object; the caller locks. */
#ifndef LDU_TREE_H
#define LDU_TREE_H

#include "objset.h"

void tree_insert(struct set_object **root, struct set_object *object);
void tree_remove(struct set_object **root, struct set_object *object);
size_t tree_walk(struct set_object *root, objset_visit_fn visit, void *arg);

/* The order every implementation uses: key, then address. */
static inline int object_before(const struct set_object *a, const struct set_object *b)
{
    return a->key < b->key || (a->key == b->key && (uintptr_t)a < (uintptr_t)b);
}

#endif
