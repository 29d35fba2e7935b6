/* Two threads add to counters in one malloc'd block (shared_counters'); a scratch block of
 * the same size, given back before, held the same address first. The pause lets the
 * guest's page map (a round every 500 ms) see the heap. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static volatile long *counters;
__attribute__((noinline)) static void scratch_buffer(void)
{
	char *scratch = malloc(64);
	memset(scratch, 1, 64);
	free(scratch);
}
__attribute__((noinline)) static void shared_counters(void)
{
	counters = malloc(8 * sizeof *counters);
	memset((void *)counters, 0, 8 * sizeof *counters);
}
static void *worker(void *arg)
{
	for (long i = 0; i < 1000000; i++)
		__atomic_fetch_add(&counters[(long)arg], 1, __ATOMIC_RELAXED);
	return NULL;
}
int main(void)
{
	pthread_t t[2];
	scratch_buffer();
	shared_counters();
	usleep(1500000);
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 0;
}
