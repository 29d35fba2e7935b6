/* check_ebr.c - EBR's bound on what a stalled reader holds back (see ebr.h). */
#include "check.h"

#include "sv6/ebr.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

/* Retired by the main thread while the reader stalls inside its section. */
#define STALL_RETIRES (4 * EBR_PENDING_MAX)
/* The reader leaves after this, or once every node is retired. */
#define STALL_MAX_NS (1000 * 1000 * 1000L)

static atomic_bool reader_inside, retiring_done;
static atomic_ulong reclaimed;

static void count_reclaim(struct ebr_node *node)
{
    (void)node;
    atomic_fetch_add(&reclaimed, 1);
}

/* A reader preempted inside its section: it holds the epoch back. */
static void *stalled_reader(void *unused)
{
    (void)unused;
    struct timespec start, now, nap = {0, 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    ebr_enter();
    atomic_store(&reader_inside, true);
    do {
        nanosleep(&nap, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (!atomic_load(&retiring_done) &&
             (now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < STALL_MAX_NS);
    ebr_exit();
    return NULL;
}

/* While one thread stalls inside a section, another retires 4 x EBR_PENDING_MAX
 * callbacks in sections of its own: no more than 2 x EBR_PENDING_MAX may wait
 * at once (without the bound every one of them waits), and all run once the
 * reader has left. */
int check_ebr_stall(const struct check_args *args)
{
    (void)args;
    static struct ebr_node nodes[STALL_RETIRES];
    pthread_t reader;
    CHECK(pthread_create(&reader, NULL, stalled_reader, NULL) == 0, "pthread_create");
    while (!atomic_load(&reader_inside))
        sched_yield();
    unsigned long most_waiting = 0;
    for (unsigned long i = 0; i < STALL_RETIRES; i++) {
        ebr_enter();
        ebr_retire(&nodes[i], count_reclaim);
        ebr_exit();
        unsigned long waiting = i + 1 - atomic_load(&reclaimed);
        if (waiting > most_waiting)
            most_waiting = waiting;
    }
    atomic_store(&retiring_done, true);
    CHECK(pthread_join(reader, NULL) == 0, "pthread_join");
    ebr_drain();
    CHECK(most_waiting <= 2 * EBR_PENDING_MAX, "%lu callbacks waited behind a stalled reader",
          most_waiting);
    CHECK(atomic_load(&reclaimed) == STALL_RETIRES, "%lu of %d callbacks ran",
          atomic_load(&reclaimed), STALL_RETIRES);
    printf("ok, %d callbacks retired behind a stalled reader, at most %lu waiting\n", STALL_RETIRES,
           most_waiting);
    return 0;
}
