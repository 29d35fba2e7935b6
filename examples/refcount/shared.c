/* One shared atomic counter: every inc and dec writes the same cache line, so no two
 * calls that change the count are conflict-free. */
#include <stdatomic.h>

#include "refcount.h"

static _Atomic long count;

void rc_init(long initial)
{
	atomic_store(&count, initial);
}

void rc_register_thread(int slot)
{
	(void)slot;
}

void rc_inc(void)
{
	atomic_fetch_add(&count, 1);
}

int rc_dec(void)
{
	long seen = atomic_load(&count);
	do {
		if (seen == 0)
			return -1;
	} while (!atomic_compare_exchange_weak(&count, &seen, seen - 1));
	return 0;
}

int rc_iszero(void)
{
	return atomic_load(&count) == 0;
}
