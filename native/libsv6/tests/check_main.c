/* check_main.c - sv6_check CHECK [--threads N] [--seconds S] [--ops N] [--seed N]
 *
 * Prints "ok, ..." and exits 0 when the check passes; a failed check prints
 * one line and exits 1; bad usage prints one line and exits 2. */
#include "check.h"

#include "sv6/core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static const struct {
    const char *name;
    int (*run)(const struct check_args *args);
} CHECKS[] = {
    {"alloc-unit", check_alloc_unit},         {"alloc-stress", check_alloc_stress},
    {"ebr-stall", check_ebr_stall},
    {"refcache-unit", check_refcache_unit},   {"refcache-stress", check_refcache_stress},
    {"fdtable-unit", check_fdtable_unit},     {"fdtable-stress", check_fdtable_stress},
    {"dir-unit", check_dir_unit},             {"dir-stress", check_dir_stress},
    {"radix-unit", check_radix_unit},         {"radix-stress", check_radix_stress},
    {"usock-unit", check_usock_unit},         {"usock-stress", check_usock_stress},
    {"usock-two-senders", check_usock_two_senders},
    {"posix-unit", check_posix_unit},         {"posix-stress", check_posix_stress},
    {"conformance", check_conformance},       {"leak-on-purpose", check_leak_on_purpose},
};

static atomic_bool stop_flag;

bool check_stop(void)
{
    return atomic_load_explicit(&stop_flag, memory_order_relaxed);
}

struct runner {
    unsigned index;
    void (*body)(unsigned index, void *arg);
    void *arg;
};

static void *run_one(void *p)
{
    struct runner *r = p;
    sv6_core_set(r->index);
    r->body(r->index, r->arg);
    return NULL;
}

void check_run_threads(unsigned threads, double seconds, void (*body)(unsigned index, void *arg),
                       void *arg)
{
    pthread_t ids[64];
    struct runner runners[64];
    CHECK(threads >= 1 && threads <= 64, "threads %u", threads);
    atomic_store(&stop_flag, false);
    for (unsigned i = 0; i < threads; i++) {
        runners[i] = (struct runner){.index = i, .body = body, .arg = arg};
        CHECK(pthread_create(&ids[i], NULL, run_one, &runners[i]) == 0, "pthread_create");
    }
    struct timespec wait = {.tv_sec = (time_t)seconds,
                            .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&wait, NULL);
    atomic_store(&stop_flag, true);
    for (unsigned i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
}

static _Noreturn void usage(const char *message, const char *value)
{
    fprintf(stderr, "sv6_check: %s%s\n", message, value ? value : "");
    exit(2);
}

static double number(const char *option, const char *text)
{
    char *end;
    double value = text ? strtod(text, &end) : 0;
    if (!text || *end || value < 0)
        usage("bad value for ", option);
    return value;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage("usage: sv6_check CHECK [--threads N] [--seconds S] [--ops N] [--seed N]", NULL);
    struct check_args args = {.threads = 2, .seconds = 0.5, .ops = 10000, .seed = 1};
    for (int i = 2; i < argc; i += 2) {
        const char *option = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(option, "--threads") == 0)
            args.threads = (unsigned)number(option, value);
        else if (strcmp(option, "--seconds") == 0)
            args.seconds = number(option, value);
        else if (strcmp(option, "--ops") == 0)
            args.ops = (unsigned long)number(option, value);
        else if (strcmp(option, "--seed") == 0)
            args.seed = (uint64_t)number(option, value);
        else
            usage("unknown option ", option);
    }
    if (args.threads < 1 || args.threads > 64)
        usage("--threads must be 1 to 64", NULL);
    if (args.seed == 0)
        args.seed = 1; /* xorshift's state must not be zero */
    for (size_t i = 0; i < sizeof CHECKS / sizeof CHECKS[0]; i++)
        if (strcmp(argv[1], CHECKS[i].name) == 0)
            return CHECKS[i].run(&args);
    usage("unknown check ", argv[1]);
}
