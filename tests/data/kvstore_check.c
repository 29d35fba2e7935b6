/* Checks that a kvstore implementation (examples/kvstore) is a correct table, alone and
 * under concurrency: built with one implementation and run by tests/test_kvstore_example.py.
 * Prints "ok", or what went wrong (exit 1). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvstore.h"

#define KEYS 40 /* more keys than buckets: chains hold several nodes */
#define VALUES 4
#define THREADS 4
#define ROUNDS 20000

static int failures;

static void fail(const char *what, long key, long got, long want)
{
	if (failures++ < 5)
		printf("%s: key %ld: got %ld, want %ld\n", what, key, got, want);
}

/* One thread, calls from changing slots, against a reference table. */
static void sequential(void)
{
	long table[KEYS];
	int present[KEYS] = {0};
	unsigned seed = 1;
	kv_init();
	for (int i = 0; i < ROUNDS; i++) {
		kv_register_thread(rand_r(&seed) % 3);
		long key = rand_r(&seed) % KEYS, value = rand_r(&seed) % VALUES, got = -1;
		switch (rand_r(&seed) % 3) {
		case 0:
			kv_put(key, value);
			table[key] = value, present[key] = 1;
			break;
		case 1: {
			int found = kv_get(key, &got) == 0;
			if (found != present[key])
				fail("get: presence", key, found, present[key]);
			else if (found && got != table[key])
				fail("get: value", key, got, table[key]);
			break;
		}
		default:
			got = kv_delete(key) == 0;
			if (got != present[key])
				fail("delete: presence", key, got, present[key]);
			present[key] = 0;
		}
	}
	kv_register_thread(0);
	kv_destroy();
}

static pthread_barrier_t barrier;
static int deleted[THREADS];

/* Each thread reads back what it writes to a key of its own, meanwhile writing and
 * reading keys all threads share, and deleting one shared key at the same moment as the
 * others (exactly one delete may succeed). */
static void *worker(void *arg)
{
	int self = (int)(long)arg;
	unsigned seed = (unsigned)self + 7;
	long own = KEYS + self, got;
	kv_register_thread(self);
	for (int i = 0; i < ROUNDS / 10; i++) {
		kv_put(own, i);
		if (kv_get(own, &got) < 0 || got != i)
			fail("own key after put", own, got, i);
		long shared = rand_r(&seed) % 4;
		if (rand_r(&seed) % 2)
			kv_put(shared, rand_r(&seed) % VALUES);
		else if (kv_get(shared, &got) == 0 && (got < 0 || got >= VALUES))
			fail("shared key", shared, got, 0);
		if (i % 2) {
			kv_delete(own);
			if (kv_get(own, &got) == 0)
				fail("own key after delete", own, got, -1);
		}
		pthread_barrier_wait(&barrier);
		deleted[self] = kv_delete(KEYS + THREADS) == 0;
		pthread_barrier_wait(&barrier);
		if (self == 0) {
			int count = 0;
			for (int t = 0; t < THREADS; t++)
				count += deleted[t];
			if (count != 1)
				fail("racing deletes that succeeded", KEYS + THREADS, count, 1);
			kv_put(KEYS + THREADS, i);
		}
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

static void concurrent(void)
{
	pthread_t threads[THREADS];
	kv_init();
	kv_put(KEYS + THREADS, 0);
	pthread_barrier_init(&barrier, NULL, THREADS);
	for (long t = 0; t < THREADS; t++)
		pthread_create(&threads[t], NULL, worker, (void *)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(threads[t], NULL);
	kv_destroy();
}

int main(void)
{
	sequential();
	concurrent();
	if (failures)
		return 1;
	printf("ok\n");
	return 0;
}
