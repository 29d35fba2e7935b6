/* Striped locks with lock-free reads: each bucket has its own lock on its own cache line,
 * so calls on keys of different buckets share nothing; get takes no lock at all and only
 * reads. Within a bucket, calls that change nothing write nothing: the list head sits on
 * a line apart from the lock, a delete of an absent key and a put of the value already
 * there do not take the lock or store. Deleted nodes are kept until kv_destroy, so a
 * concurrent get never reads freed memory (a real store would use RCU or epochs). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kvstore.h"

#define BUCKETS 16

struct node {
	long key;
	_Atomic long value;
	struct node *_Atomic next;
	struct node *retired_next;
};

struct bucket {
	pthread_mutex_t lock;
	struct node *retired;
	struct node *_Atomic head __attribute__((aligned(64)));
} __attribute__((aligned(64)));

static struct bucket buckets[BUCKETS];

void kv_init(void)
{
	for (int b = 0; b < BUCKETS; b++) {
		pthread_mutex_init(&buckets[b].lock, NULL);
		atomic_store(&buckets[b].head, NULL);
		buckets[b].retired = NULL;
	}
}

static void free_list(struct node *n, int retired)
{
	while (n) {
		struct node *next = retired ? n->retired_next : atomic_load(&n->next);
		free(n);
		n = next;
	}
}

void kv_destroy(void)
{
	for (int b = 0; b < BUCKETS; b++) {
		free_list(atomic_load(&buckets[b].head), 0);
		free_list(buckets[b].retired, 1);
	}
}

static struct node *find(struct bucket *bucket, long key)
{
	struct node *n = atomic_load_explicit(&bucket->head, memory_order_acquire);
	while (n && n->key != key)
		n = atomic_load_explicit(&n->next, memory_order_acquire);
	return n;
}

void kv_put(long key, long value)
{
	struct bucket *bucket = &buckets[key % BUCKETS];
	struct node *n = find(bucket, key);
	if (n && atomic_load_explicit(&n->value, memory_order_acquire) == value)
		return;
	pthread_mutex_lock(&bucket->lock);
	n = find(bucket, key);
	if (n) {
		atomic_store_explicit(&n->value, value, memory_order_release);
	} else {
		n = malloc(sizeof *n);
		n->key = key;
		atomic_init(&n->value, value);
		atomic_init(&n->next, atomic_load(&bucket->head));
		atomic_store_explicit(&bucket->head, n, memory_order_release);
	}
	pthread_mutex_unlock(&bucket->lock);
}

int kv_get(long key, long *value)
{
	struct node *n = find(&buckets[key % BUCKETS], key);
	if (!n)
		return -1;
	*value = atomic_load_explicit(&n->value, memory_order_acquire);
	return 0;
}

int kv_delete(long key)
{
	struct bucket *bucket = &buckets[key % BUCKETS];
	if (!find(bucket, key))
		return -1;
	pthread_mutex_lock(&bucket->lock);
	struct node *_Atomic *link = &bucket->head;
	struct node *n;
	while ((n = atomic_load(link)) && n->key != key)
		link = &n->next;
	if (n) {
		atomic_store_explicit(link, atomic_load(&n->next), memory_order_release);
		n->retired_next = bucket->retired;
		bucket->retired = n;
	}
	pthread_mutex_unlock(&bucket->lock);
	return n ? 0 : -1;
}
