/*
 * tree.c - a treap: a binary search tree ordered by (key, address) that is
 * also a heap on a priority hashed from the object's key.  The hash makes
 * the shape random-like (expected depth O(log n)) without storing anything
 * beyond the two child links.  Not from the address: where the allocator put
 * the objects (each thread's arena, placed in the order the threads started)
 * would then decide which objects sit near the root, and so which ones every
 * update's path writes, differently in each run (scalecheck sharing's
 * per-object lines).  Objects of one key share a priority, which a heap
 * allows.
 */
#include "tree.h"

#include "objset_impl.h"

static uint64_t priority(const struct set_object *object)
{
    uint64_t x = object->key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static struct set_object *rotate_right(struct set_object *top)
{
    struct set_object *left = top->tree_left;
    top->tree_left = left->tree_right;
    left->tree_right = top;
    return left;
}

static struct set_object *rotate_left(struct set_object *top)
{
    struct set_object *right = top->tree_right;
    top->tree_right = right->tree_left;
    right->tree_left = top;
    return right;
}

/* Stores a child link only when it changes.  Most links on a search path stay
 * the same, and not writing them keeps those lines clean in the other CPUs'
 * caches, so concurrent and later walks of the tree do not miss on them. */
static void set_link(struct set_object **link, struct set_object *value)
{
    if (*link != value)
        *link = value;
}

static struct set_object *insert_below(struct set_object *top, struct set_object *object)
{
    if (!top)
        return object;
    if (object_before(object, top)) {
        set_link(&top->tree_left, insert_below(top->tree_left, object));
        if (priority(top->tree_left) > priority(top))
            top = rotate_right(top);
    } else {
        set_link(&top->tree_right, insert_below(top->tree_right, object));
        if (priority(top->tree_right) > priority(top))
            top = rotate_left(top);
    }
    return top;
}

/* Joins two treaps where everything in `low` orders before everything in `high`. */
static struct set_object *join(struct set_object *low, struct set_object *high)
{
    if (!low)
        return high;
    if (!high)
        return low;
    if (priority(low) > priority(high)) {
        set_link(&low->tree_right, join(low->tree_right, high));
        return low;
    }
    set_link(&high->tree_left, join(low, high->tree_left));
    return high;
}

static struct set_object *remove_below(struct set_object *top, struct set_object *object)
{
    if (!top)
        objset_die("tree: removing object %p (key %llu) that is not in the tree",
                   (void *)object, (unsigned long long)object->key);
    if (top == object)
        return join(top->tree_left, top->tree_right);
    if (object_before(object, top))
        set_link(&top->tree_left, remove_below(top->tree_left, object));
    else
        set_link(&top->tree_right, remove_below(top->tree_right, object));
    return top;
}

void tree_insert(struct set_object **root, struct set_object *object)
{
    object->tree_left = object->tree_right = NULL;
    set_link(root, insert_below(*root, object));
}

void tree_remove(struct set_object **root, struct set_object *object)
{
    set_link(root, remove_below(*root, object));
}

size_t tree_walk(struct set_object *top, objset_visit_fn visit, void *arg)
{
    if (!top)
        return 0;
    size_t visited = tree_walk(top->tree_left, visit, arg);
    visit(top, arg);
    return visited + 1 + tree_walk(top->tree_right, visit, arg);
}
