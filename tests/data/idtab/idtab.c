/* A naive id table: one mutex, the lowest free id, and a count of the ids taken. Its
 * table and its slots are two heap blocks that idtab_new makes; no global points to
 * them (the caller keeps the handle). */
#include <pthread.h>
#include <stdlib.h>

#include "idtab.h"

struct slot {
	int used;
	long value;
};

struct idtab {
	pthread_mutex_t lock;
	long taken;
	int ids;
	struct slot *slots;
};

struct idtab *idtab_new(int ids)
{
	struct idtab *t = malloc(sizeof *t);
	pthread_mutex_init(&t->lock, NULL);
	t->taken = 0;
	t->ids = ids;
	t->slots = calloc((size_t)ids, sizeof *t->slots);
	return t;
}

void idtab_destroy(struct idtab *t)
{
	pthread_mutex_destroy(&t->lock);
	free(t->slots);
	free(t);
}

static int valid(const struct idtab *t, int id)
{
	return id >= 0 && id < t->ids;
}

int idtab_alloc(struct idtab *t, long value)
{
	int id;
	pthread_mutex_lock(&t->lock);
	for (id = 0; id < t->ids && t->slots[id].used; id++)
		;
	if (id < t->ids) {
		t->slots[id] = (struct slot){1, value};
		t->taken++;
	}
	pthread_mutex_unlock(&t->lock);
	return id < t->ids ? id : -1;
}

int idtab_lookup(struct idtab *t, int id, long *value)
{
	pthread_mutex_lock(&t->lock);
	int found = valid(t, id) && t->slots[id].used;
	if (found)
		*value = t->slots[id].value;
	pthread_mutex_unlock(&t->lock);
	return found ? 0 : -1;
}

int idtab_free(struct idtab *t, int id)
{
	pthread_mutex_lock(&t->lock);
	int found = valid(t, id) && t->slots[id].used;
	if (found) {
		t->slots[id].used = 0;
		t->taken--;
	}
	pthread_mutex_unlock(&t->lock);
	return found ? 0 : -1;
}

void idtab_put(struct idtab *t, int id, long value)
{
	if (valid(t, id) && !t->slots[id].used) {
		t->slots[id] = (struct slot){1, value};
		t->taken++;
	}
}
