/* Unit tests of ulsched. Usage: test_ulsched [-p processors] [-q] [test-name...]
 * -q (quick) divides the loop counts by 10, for the much slower sanitizer builds.
 * Prints "ok <name> ..." per passing test; a failing check prints "FAIL <name>: why"
 * and exits 1; a test that hangs (a lost wake-up) is killed by an alarm and exits 1. */
#define _GNU_SOURCE
#include "ulsched.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TIME_LIMIT_SECONDS 120

static const char *current_test = "";
static int nprocs = 2;
static int scale = 1; /* divisor of loop counts */

#define CHECK(cond, ...)                                      \
    do {                                                      \
        if (!(cond)) {                                        \
            fprintf(stderr, "FAIL %s: ", current_test);       \
            fprintf(stderr, __VA_ARGS__);                     \
            fprintf(stderr, "\n");                            \
            exit(1);                                          \
        }                                                     \
    } while (0)

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: time limit reached (lost wake-up or deadlock)\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(1);
}

static void start(void)
{
    CHECK(uls_start(nprocs) == 0, "uls_start(%d) failed", nprocs);
}

/* ---- park/unpark races ---- */

#define PAIRS 32
#define ROUNDS 20000

typedef struct {
    _Atomic int turn; /* 1: the server's turn, 0: the client's */
    uls_thread *client, *server;
    _Atomic long exchanges;
    unsigned seed;
} pair;

static pair pairs[PAIRS];
static _Atomic int chaos_stop;
static _Atomic int all_created; /* uls_create's result is stored only after it returns */
static _Atomic int partners_done; /* threads that no longer touch their partner */

static void maybe_yield(unsigned *seed)
{
    if (rand_r(seed) % 8 == 0)
        uls_yield();
}

static void client_main(void *arg)
{
    pair *p = arg;
    while (!atomic_load(&all_created))
        uls_yield();
    for (int i = 0; i < ROUNDS / scale; i++) {
        atomic_store(&p->turn, 1);
        uls_unpark(p->server);
        maybe_yield(&p->seed);
        while (atomic_load(&p->turn) != 0)
            uls_park();
    }
    atomic_fetch_add(&partners_done, 1);
}

static void server_main(void *arg)
{
    pair *p = arg;
    unsigned seed = p->seed * 7 + 1;
    for (int i = 0; i < ROUNDS / scale; i++) {
        while (atomic_load(&p->turn) != 1)
            uls_park();
        atomic_fetch_add(&p->exchanges, 1);
        atomic_store(&p->turn, 0);
        uls_unpark(p->client);
        maybe_yield(&seed);
    }
    atomic_fetch_add(&partners_done, 1);
}

/* Spurious permits from a kernel thread: parks must tolerate them, and unparks from
 * outside the processors must still wake sleeping processors. */
static void *chaos_main(void *arg)
{
    (void)arg;
    unsigned seed = 12345;
    while (!atomic_load(&chaos_stop)) {
        pair *p = &pairs[rand_r(&seed) % PAIRS];
        uls_unpark(rand_r(&seed) % 2 ? p->client : p->server);
        if (rand_r(&seed) % 64 == 0)
            usleep(10);
    }
    return NULL;
}

static void test_park_unpark_stress(void)
{
    start();
    memset(pairs, 0, sizeof pairs);
    atomic_store(&all_created, 0);
    atomic_store(&partners_done, 0);
    /* Create servers first so a client never unparks a thread that does not exist. */
    for (int i = 0; i < PAIRS; i++) {
        pairs[i].seed = (unsigned)i + 1;
        pairs[i].server = uls_create(server_main, &pairs[i]);
        CHECK(pairs[i].server, "uls_create failed");
    }
    for (int i = 0; i < PAIRS; i++) {
        pairs[i].client = uls_create(client_main, &pairs[i]);
        CHECK(pairs[i].client, "uls_create failed");
    }
    atomic_store(&all_created, 1);
    pthread_t chaos;
    atomic_store(&chaos_stop, 0);
    pthread_create(&chaos, NULL, chaos_main, NULL);
    /* The chaos thread holds pointers to every thread: stop it before any join. */
    long total = 0;
    while (total < (long)PAIRS * (ROUNDS / scale)) {
        usleep(1000);
        total = 0;
        for (int i = 0; i < PAIRS; i++)
            total += atomic_load(&pairs[i].exchanges);
    }
    atomic_store(&chaos_stop, 1);
    pthread_join(chaos, NULL);
    /* A thread may still be inside its last uls_unpark(partner) when the partner returns:
     * free (join) none until every one has finished touching its partner. */
    while (atomic_load(&partners_done) < 2 * PAIRS)
        usleep(1000);
    for (int i = 0; i < PAIRS; i++) {
        uls_join(pairs[i].client);
        uls_join(pairs[i].server);
    }
    CHECK(total == (long)PAIRS * (ROUNDS / scale), "%ld exchanges, expected %ld", total, (long)PAIRS * (ROUNDS / scale));
    uls_stop();
    printf("ok park_unpark_stress %ld exchanges\n", total);
}

/* ---- wake-ups from a kernel thread while processors go idle between rounds ---- */

#define SLEEPERS 8
#define GENERATIONS 20000
#define WAKEUP_DEADLINE_SECONDS 2.0

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static _Atomic int generation;
static _Atomic int acknowledged;

static void sleeper_main(void *arg)
{
    (void)arg;
    for (int gen = 1; gen <= GENERATIONS / scale; gen++) {
        while (atomic_load(&generation) < gen)
            uls_park();
        atomic_fetch_add(&acknowledged, 1);
    }
}

static void test_idle_wakeups(void)
{
    start();
    atomic_store(&generation, 0);
    atomic_store(&acknowledged, 0);
    uls_thread *threads[SLEEPERS];
    for (int i = 0; i < SLEEPERS; i++)
        threads[i] = uls_create(sleeper_main, NULL);
    unsigned seed = 99;
    for (int gen = 1; gen <= GENERATIONS / scale; gen++) {
        /* A random pause of up to ~40 us lands the next wake-up anywhere in an idle
         * processor's way to sleep (spinning, announcing, re-checking, asleep). */
        double resume = now_seconds() + (rand_r(&seed) % 40) * 1e-6;
        while (now_seconds() < resume)
            ;
        atomic_store(&generation, gen);
        for (int i = 0; i < SLEEPERS; i++)
            uls_unpark(threads[i]);
        double deadline = now_seconds() + WAKEUP_DEADLINE_SECONDS;
        while (atomic_load(&acknowledged) < gen * SLEEPERS) {
            /* The processors alone must run every sleeper: no help from here. */
            CHECK(now_seconds() < deadline, "lost wake-up: generation %d not run within %.0f s", gen,
                  WAKEUP_DEADLINE_SECONDS);
        }
    }
    for (int i = 0; i < SLEEPERS; i++)
        uls_join(threads[i]);
    uls_stats stats = uls_get_stats();
    uls_stop();
    printf("ok idle_wakeups %d generations, %llu processor sleeps\n", GENERATIONS / scale,
           (unsigned long long)stats.sleeps);
}

/* ---- create and join ---- */

#define JOIN_THREADS 2000
#define CHILDREN 200

static _Atomic int ran[JOIN_THREADS];
static _Atomic int children_done;

static void mark_main(void *arg)
{
    int i = (int)(long)arg;
    if (i % 3 == 0)
        uls_yield();
    atomic_fetch_add(&ran[i], 1);
}

static void child_main(void *arg)
{
    long yields = (long)arg;
    for (long i = 0; i < yields; i++)
        uls_yield();
    atomic_fetch_add(&children_done, 1);
}

static void parent_main(void *arg)
{
    (void)arg;
    uls_thread *children[CHILDREN];
    for (long i = 0; i < CHILDREN; i++)
        children[i] = uls_create(child_main, (void *)(i % 5));
    /* Some children finish before their join, some after: both paths are taken. */
    for (int i = 0; i < CHILDREN; i++) {
        uls_join(children[i]);
        CHECK(atomic_load(&children_done) >= 1, "join returned before any child finished");
    }
}

static void test_join_all(void)
{
    start();
    memset(ran, 0, sizeof ran);
    static uls_thread *threads[JOIN_THREADS];
    for (long i = 0; i < JOIN_THREADS / scale; i++)
        threads[i] = uls_create(mark_main, (void *)i);
    for (int i = 0; i < JOIN_THREADS / scale; i++)
        uls_join(threads[i]);
    for (int i = 0; i < JOIN_THREADS / scale; i++)
        CHECK(atomic_load(&ran[i]) == 1, "thread %d ran %d times", i, atomic_load(&ran[i]));

    atomic_store(&children_done, 0);
    uls_thread *parent = uls_create(parent_main, NULL);
    uls_join(parent);
    CHECK(atomic_load(&children_done) == CHILDREN, "%d of %d children finished",
          atomic_load(&children_done), CHILDREN);
    uls_stop();
    printf("ok join_all %d joined from a kernel thread, %d from a user thread\n", JOIN_THREADS / scale,
           CHILDREN);
}

/* ---- semaphore counts ---- */

#define PRODUCERS 8
#define PER_PRODUCER 20000
#define LOCKERS 16
#define LOCK_ROUNDS 5000

static uls_sem items, mutex;
static _Atomic long consumed;
static long protected_counter; /* only touched while holding `mutex` */

static void producer_main(void *arg)
{
    unsigned seed = (unsigned)(long)arg;
    for (int i = 0; i < PER_PRODUCER / scale; i++) {
        uls_sem_V(&items);
        maybe_yield(&seed);
    }
}

static void consumer_main(void *arg)
{
    unsigned seed = (unsigned)(long)arg;
    for (int i = 0; i < PER_PRODUCER / scale; i++) {
        uls_sem_P(&items);
        atomic_fetch_add(&consumed, 1);
        maybe_yield(&seed);
    }
}

static void locker_main(void *arg)
{
    unsigned seed = (unsigned)(long)arg;
    for (int i = 0; i < LOCK_ROUNDS / scale; i++) {
        uls_sem_P(&mutex);
        long seen = protected_counter;
        maybe_yield(&seed); /* others must wait on the semaphore meanwhile */
        protected_counter = seen + 1;
        uls_sem_V(&mutex);
    }
}

static void take_five(void *arg)
{
    (void)arg;
    for (int i = 0; i < 5; i++)
        uls_sem_P(&items);
}

static void test_semaphore_counts(void)
{
    start();
    uls_sem_init(&items, 0);
    for (int i = 0; i < 5; i++)
        uls_sem_V(&items);
    CHECK(uls_sem_value(&items) == 5, "count %ld after 5 V, expected 5", uls_sem_value(&items));
    uls_thread *taker = uls_create(take_five, NULL);
    uls_join(taker);
    CHECK(uls_sem_value(&items) == 0, "count %ld after 5 P, expected 0", uls_sem_value(&items));

    atomic_store(&consumed, 0);
    uls_thread *threads[2 * PRODUCERS];
    for (long i = 0; i < PRODUCERS; i++) {
        threads[2 * i] = uls_create(consumer_main, (void *)(i + 100));
        threads[2 * i + 1] = uls_create(producer_main, (void *)(i + 1));
    }
    for (int i = 0; i < 2 * PRODUCERS; i++)
        uls_join(threads[i]);
    CHECK(atomic_load(&consumed) == (long)PRODUCERS * (PER_PRODUCER / scale), "consumed %ld",
          atomic_load(&consumed));
    CHECK(uls_sem_value(&items) == 0, "count %ld after balanced P/V", uls_sem_value(&items));
    uls_sem_V(&items);
    uls_sem_V(&items);
    CHECK(uls_sem_value(&items) == 2, "count %ld, expected 2", uls_sem_value(&items));

    uls_sem_init(&mutex, 1);
    protected_counter = 0;
    uls_thread *lockers[LOCKERS];
    for (long i = 0; i < LOCKERS; i++)
        lockers[i] = uls_create(locker_main, (void *)(i + 7));
    for (int i = 0; i < LOCKERS; i++)
        uls_join(lockers[i]);
    CHECK(protected_counter == (long)LOCKERS * (LOCK_ROUNDS / scale), "counter %ld, expected %ld",
          protected_counter, (long)LOCKERS * (LOCK_ROUNDS / scale));
    CHECK(uls_sem_value(&mutex) == 1, "mutex count %ld, expected 1", uls_sem_value(&mutex));
    uls_stop();
    printf("ok semaphore_counts %ld items, %ld critical sections\n", atomic_load(&consumed),
           protected_counter);
}

/* ---- shutdown ---- */

static _Atomic int shutdown_ran;

static void tiny_main(void *arg)
{
    (void)arg;
    uls_yield();
    atomic_fetch_add(&shutdown_ran, 1);
}

static void test_shutdown(void)
{
    atomic_store(&shutdown_ran, 0);
    for (int round = 0; round < 50; round++) {
        start();
        if (round % 2) /* let every processor fall asleep first */
            usleep(2000);
        uls_thread *a = uls_create(tiny_main, NULL), *b = uls_create(tiny_main, NULL);
        uls_join(a);
        uls_join(b);
        uls_stop();
    }
    CHECK(atomic_load(&shutdown_ran) == 100, "%d threads ran, expected 100", atomic_load(&shutdown_ran));
    CHECK(uls_start(0) == -1, "uls_start(0) accepted");
    start();
    CHECK(uls_start(1) == -1, "second uls_start accepted");
    uls_stop();
    printf("ok shutdown 50 start/stop cycles\n");
}

static const struct {
    const char *name;
    void (*run)(void);
} tests[] = {
    {"park_unpark_stress", test_park_unpark_stress},
    {"idle_wakeups", test_idle_wakeups},
    {"join_all", test_join_all},
    {"semaphore_counts", test_semaphore_counts},
    {"shutdown", test_shutdown},
};

int main(int argc, char **argv)
{
    int first_name = 1;
    for (;;) {
        if (first_name + 1 < argc && strcmp(argv[first_name], "-p") == 0) {
            nprocs = atoi(argv[first_name + 1]);
            first_name += 2;
        } else if (first_name < argc && strcmp(argv[first_name], "-q") == 0) {
            scale = 10;
            first_name++;
        } else {
            break;
        }
    }
    signal(SIGALRM, on_alarm);
    alarm(TIME_LIMIT_SECONDS);
    int ntests = (int)(sizeof tests / sizeof tests[0]);
    for (int i = 0; i < ntests; i++) {
        int selected = first_name >= argc;
        for (int a = first_name; a < argc; a++)
            selected |= strcmp(argv[a], tests[i].name) == 0;
        if (!selected)
            continue;
        current_test = tests[i].name;
        tests[i].run();
        fflush(stdout);
    }
    return 0;
}
