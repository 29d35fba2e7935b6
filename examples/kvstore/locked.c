/* One mutex over a chained hash table: every call takes the same lock, so any two calls
 * conflict on it, even two gets. */
#include <pthread.h>
#include <stdlib.h>

#include "kvstore.h"

#define BUCKETS 16

struct node {
	long key, value;
	struct node *next;
};

struct table {
	pthread_mutex_t lock;
	struct node *buckets[BUCKETS];
};

static struct table *table;

void kv_init(void)
{
	table = calloc(1, sizeof *table);
	pthread_mutex_init(&table->lock, NULL);
}

void kv_destroy(void)
{
	for (int b = 0; b < BUCKETS; b++) {
		for (struct node *n = table->buckets[b], *next; n; n = next) {
			next = n->next;
			free(n);
		}
	}
	free(table);
}

void kv_register_thread(int slot)
{
	(void)slot; /* every thread takes the one mutex */
}

static struct node **find(long key)
{
	struct node **link = &table->buckets[key % BUCKETS];
	while (*link && (*link)->key != key)
		link = &(*link)->next;
	return link;
}

void kv_put(long key, long value)
{
	pthread_mutex_lock(&table->lock);
	struct node **link = find(key);
	if (*link) {
		(*link)->value = value;
	} else {
		struct node *n = malloc(sizeof *n);
		*n = (struct node){key, value, NULL};
		*link = n;
	}
	pthread_mutex_unlock(&table->lock);
}

int kv_get(long key, long *value)
{
	pthread_mutex_lock(&table->lock);
	struct node *n = *find(key);
	if (n)
		*value = n->value;
	pthread_mutex_unlock(&table->lock);
	return n ? 0 : -1;
}

int kv_delete(long key)
{
	pthread_mutex_lock(&table->lock);
	struct node **link = find(key), *n = *link;
	if (n) {
		*link = n->next;
		free(n);
	}
	pthread_mutex_unlock(&table->lock);
	return n ? 0 : -1;
}
