/* A sharded counter (the idea of refcache): each thread keeps part of the count in a
 * shard of its own cache line. inc adds to the caller's shard; dec and iszero are answered
 * from it while it holds a reference. Only when the caller's shard is empty does a call
 * look at the others (dec then takes a reference from another shard): that is where two
 * calls can still conflict, and where the model says they may have to. */
#include <stdatomic.h>

#include "refcount.h"

#define SHARDS 2

struct shard {
	_Atomic long count;
} __attribute__((aligned(64)));

static struct shard shards[SHARDS];
static __thread int my_shard;

/* The count is spread over the shards; the larger half goes to the last one. */
void rc_init(long initial)
{
	for (int i = 0; i < SHARDS; i++)
		atomic_store(&shards[i].count, initial / SHARDS + (i == SHARDS - 1 ? initial % SHARDS : 0));
}

void rc_register_thread(int slot)
{
	my_shard = slot % SHARDS;
}

void rc_inc(void)
{
	atomic_fetch_add_explicit(&shards[my_shard].count, 1, memory_order_relaxed);
}

/* Takes one reference from shard i if it holds one. */
static int take(int i)
{
	long seen = atomic_load(&shards[i].count);
	while (seen > 0)
		if (atomic_compare_exchange_weak(&shards[i].count, &seen, seen - 1))
			return 1;
	return 0;
}

int rc_dec(void)
{
	if (take(my_shard))
		return 0;
	for (int i = 0; i < SHARDS; i++)
		if (i != my_shard && take(i))
			return 0;
	return -1;
}

int rc_iszero(void)
{
	if (atomic_load(&shards[my_shard].count) > 0)
		return 0;
	long total = 0;
	for (int i = 0; i < SHARDS; i++)
		total += atomic_load(&shards[i].count);
	return total == 0;
}
