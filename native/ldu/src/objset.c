/* objset.c - the public entry points: pick an implementation, check the
 * alternation precondition in debug builds, dispatch. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objset_impl.h"

static const struct objset_ops *const implementations[] = {
    &ldu_percore_ops, &ldu_global_ops, &rwlock_ops, &harris_ops,
};

const char *const objset_impl_names[] = {"ldu-percore", "ldu-global", "rwlock", "harris", NULL};

void objset_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "objset: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

void set_object_init(struct set_object *object, uint64_t key)
{
    memset(object, 0, sizeof *object);
    object->key = key;
    object->insert_log.object = object;
    object->insert_log.inserts = 1;
    object->remove_log.object = object;
}

struct objset *objset_create(const char *impl_name, unsigned max_workers)
{
    if (max_workers == 0) {
        errno = EINVAL;
        return NULL;
    }
    for (size_t i = 0; i < sizeof implementations / sizeof implementations[0]; i++)
        if (strcmp(implementations[i]->name, impl_name) == 0)
            return implementations[i]->create(implementations[i], max_workers);
    errno = EINVAL;
    return NULL;
}

void objset_destroy(struct objset *set)
{
    set->ops->destroy(set);
}

const char *objset_impl_name(const struct objset *set)
{
    return set->ops->name;
}

struct objset_worker *objset_attach(struct objset *set, unsigned cpu)
{
    return set->ops->attach(set, cpu);
}

void objset_detach(struct objset_worker *worker)
{
    worker->set->ops->detach(worker);
}

void objset_insert(struct objset_worker *worker, struct set_object *object)
{
#ifdef LDU_DEBUG
    if (object->debug_present)
        objset_die("insert of object %p (key %llu) that is already in the set: updates of an "
                   "object must alternate insert, remove, insert, ...",
                   (void *)object, (unsigned long long)object->key);
    object->debug_present = 1;
#endif
    worker->set->ops->insert(worker, object);
}

void objset_remove(struct objset_worker *worker, struct set_object *object)
{
#ifdef LDU_DEBUG
    if (!object->debug_present)
        objset_die("remove of object %p (key %llu) that is not in the set: updates of an "
                   "object must alternate insert, remove, insert, ...",
                   (void *)object, (unsigned long long)object->key);
    object->debug_present = 0;
#endif
    worker->set->ops->remove(worker, object);
}

size_t objset_walk(struct objset_worker *worker, objset_visit_fn visit, void *arg)
{
    return worker->set->ops->walk(worker, visit, arg);
}

void objset_barrier(struct objset_worker *worker)
{
    worker->set->ops->barrier(worker);
}

const struct objset_stats *objset_worker_stats(const struct objset_worker *worker)
{
    return &worker->stats;
}
