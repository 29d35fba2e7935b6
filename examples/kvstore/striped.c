/* Per-writer chains with lock-free reads. Each bucket has one chain per writer slot (a
 * thread registers its slot; the thread that builds the table has slot 0), each chain
 * with its lock on a cache line of its own. A put writes only into its own chain: a new
 * version of the key's node, stamped with the time. get reads every chain of the bucket
 * and answers from the newest version; delete writes a version that says "absent".
 *
 * So calls on different buckets share nothing, and neither do two puts of one key: the
 * second put does not look at the first's chain, it writes a newer version into its own
 * (put(k, v) || put(k, v) on an empty table commutes, and is conflict-free). A put that
 * finds its value already the newest writes nothing, so put(k, v) || get(k) with k
 * holding v is conflict-free too. It looks for that value in its own chain and in slot 0's
 * (where the table's builder put it) and, when found, checks every chain for a newer
 * version before writing nothing. delete takes every lock of the bucket: whether the key
 * is there and its removal are one step.
 *
 * Versions are immutable and kept until kv_destroy, so a lock-free get never reads freed
 * memory (a real store would use RCU or epochs). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "kvstore.h"

#define BUCKETS 16
#define SLOTS 4 /* threads beyond SLOTS share slots: still correct, not conflict-free */

struct version {
	long value;
	int present;
	long stamp; /* CLOCK_MONOTONIC ns: the newest version of a key wins */
	int slot;   /* breaks ties between stamps */
	struct version *older;
};

struct node {
	long key;
	struct version *_Atomic current;
	struct node *_Atomic next;
};

struct chain {
	pthread_mutex_t lock;
	struct node *_Atomic head;
} __attribute__((aligned(64)));

static struct chain buckets[BUCKETS][SLOTS];
static __thread int my_slot;

void kv_register_thread(int slot)
{
	my_slot = slot % SLOTS;
}

void kv_init(void)
{
	for (int b = 0; b < BUCKETS; b++) {
		for (int s = 0; s < SLOTS; s++) {
			pthread_mutex_init(&buckets[b][s].lock, NULL);
			atomic_store(&buckets[b][s].head, NULL);
		}
	}
}

void kv_destroy(void)
{
	for (int b = 0; b < BUCKETS; b++) {
		for (int s = 0; s < SLOTS; s++) {
			for (struct node *n = atomic_load(&buckets[b][s].head), *next; n; n = next) {
				next = atomic_load(&n->next);
				for (struct version *v = atomic_load(&n->current), *older; v; v = older) {
					older = v->older;
					free(v);
				}
				free(n);
			}
		}
	}
}

static struct node *find(struct chain *chain, long key)
{
	struct node *n = atomic_load_explicit(&chain->head, memory_order_acquire);
	while (n && n->key != key)
		n = atomic_load_explicit(&n->next, memory_order_acquire);
	return n;
}

static int newer(const struct version *a, const struct version *b)
{
	return !b || a->stamp > b->stamp || (a->stamp == b->stamp && a->slot > b->slot);
}

/* The newest version of key among the chains of bucket whose slots are in mask. */
static struct version *newest(struct chain *bucket, long key, unsigned mask)
{
	struct version *found = NULL;
	for (int s = 0; s < SLOTS; s++) {
		struct node *n = mask >> s & 1 ? find(&bucket[s], key) : NULL;
		struct version *v = n ? atomic_load_explicit(&n->current, memory_order_acquire) : NULL;
		if (v && newer(v, found))
			found = v;
	}
	return found;
}

/* Writes a new version of key into the caller's chain (its lock held). */
static void write_version(struct chain *chain, long key, long value, int present)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	struct version *v = malloc(sizeof *v);
	*v = (struct version){value, present, now.tv_sec * 1000000000L + now.tv_nsec, my_slot, NULL};
	struct node *n = find(chain, key);
	if (!n) {
		n = malloc(sizeof *n);
		n->key = key;
		atomic_init(&n->current, NULL);
		atomic_init(&n->next, atomic_load(&chain->head));
		atomic_store_explicit(&chain->head, n, memory_order_release);
	}
	v->older = atomic_load(&n->current);
	atomic_store_explicit(&n->current, v, memory_order_release);
}

void kv_put(long key, long value)
{
	struct chain *bucket = buckets[key % BUCKETS];
	struct version *seen = newest(bucket, key, 1u | 1u << my_slot);
	if (seen && seen->present && seen->value == value && newest(bucket, key, ~0u) == seen)
		return;
	pthread_mutex_lock(&bucket[my_slot].lock);
	write_version(&bucket[my_slot], key, value, 1);
	pthread_mutex_unlock(&bucket[my_slot].lock);
}

int kv_get(long key, long *value)
{
	struct version *v = newest(buckets[key % BUCKETS], key, ~0u);
	if (!v || !v->present)
		return -1;
	*value = v->value;
	return 0;
}

int kv_delete(long key)
{
	struct chain *bucket = buckets[key % BUCKETS];
	struct version *seen = newest(bucket, key, ~0u);
	if (!seen || !seen->present)
		return -1;
	for (int s = 0; s < SLOTS; s++)
		pthread_mutex_lock(&bucket[s].lock);
	seen = newest(bucket, key, ~0u);
	int present = seen && seen->present;
	if (present)
		write_version(&bucket[my_slot], key, 0, 0);
	for (int s = SLOTS - 1; s >= 0; s--)
		pthread_mutex_unlock(&bucket[s].lock);
	return present ? 0 : -1;
}
