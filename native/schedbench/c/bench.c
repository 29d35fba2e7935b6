/* Options, measurement and output shared by all C scheduler benchmarks (see bench.h). */
#define _GNU_SOURCE
#include "bench.h"
#include "rt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_DURATION 5.0
#define MAX_SAMPLES 3600

typedef struct {
    _Atomic uint64_t ops;
} __attribute__((aligned(64))) padded_counter;

static bench_options opts;
static padded_counter *counters;
static _Atomic int stop_flag __attribute__((aligned(64)));
static rt_sem **start_gates;
static _Atomic int exited_threads __attribute__((aligned(64)));

static void vreport(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s-%s: ", bench.name, rt_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void bench_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    exit(2);
}

void bench_failure(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    fflush(stdout);
    _exit(1); /* other threads may be stuck: do not wait for them */
}

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t bench_seed(int index)
{
    return 0x9E3779B97F4A7C15ull * (uint64_t)(index + 1) | 1;
}

uint64_t bench_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

void bench_count(int index)
{
    /* Only thread `index` writes its counter; the main thread reads it for samples. */
    _Atomic uint64_t *c = &counters[index].ops;
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

int bench_must_stop(int index)
{
    if (opts.iterations &&
        atomic_load_explicit(&counters[index].ops, memory_order_relaxed) >= (uint64_t)opts.iterations)
        atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
    return atomic_load_explicit(&stop_flag, memory_order_relaxed);
}

static uint64_t total_ops(void)
{
    uint64_t sum = 0;
    for (int i = 0; i < opts.threads; i++)
        sum += atomic_load_explicit(&counters[i].ops, memory_order_relaxed);
    return sum;
}

static void thread_body(void *arg)
{
    int index = (int)(long)arg;
    /* Wait for the start, so thread creation is not measured (blocking, because
     * spinning kernel threads would starve the one creating the others). */
    rt_sem_P(start_gates[index]);
    bench.thread_main(index);
    atomic_fetch_add(&exited_threads, 1);
}

static long parse_long(char flag, const char *text, long min)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || end == text || v < min)
        bench_usage_error("-%c needs an integer >= %ld, got '%s'", flag, min, text);
    return v;
}

static void usage(void)
{
    printf("usage: %s-%s [-d seconds | -i iterations] [-W seconds] [-t threads] [-p processors]",
           bench.name, rt_name);
    for (const char *f = bench.extra_flags; *f; f++)
        printf(" [-%c N]", *f);
    printf("\n  -d  measure for this many seconds (default %.0f)\n"
           "  -i  stop once one thread has done this many operations\n"
           "  -W  run this many seconds before measuring (default 0)\n"
           "  -t  user threads (default %d per processor)\n"
           "  -p  processors (default 1)\n"
           "  -r  threads per ring (cycle)    -s  spots (churn, locality)\n"
           "  -w  words touched per operation (locality)   -S 0|1  share data (locality)\n"
           "  -e 0|1  non-leaders park instead of yield (transfer)\n"
           "The last stdout line is a JSON object (docs/format-bench.md).\n",
           DEFAULT_DURATION, bench.default_threads_per_proc);
}

static void parse_options(int argc, char **argv)
{
    opts = (bench_options){.duration = 0, .procs = 1, .ring = 5, .spots = 0, .work_words = 256};
    int threads_given = 0, duration_given = 0;
    char optstring[64] = "hd:i:t:p:W:";
    for (const char *f = bench.extra_flags; *f; f++) {
        size_t n = strlen(optstring);
        optstring[n] = *f;
        optstring[n + 1] = ':';
        optstring[n + 2] = 0;
    }
    opterr = 0;
    int c;
    while ((c = getopt(argc, argv, optstring)) != -1) {
        switch (c) {
        case 'h':
            usage();
            exit(0);
        case 'd': {
            char *end;
            opts.duration = strtod(optarg, &end);
            if (*end || end == optarg || !(opts.duration > 0) || opts.duration > MAX_SAMPLES)
                bench_usage_error("-d needs seconds in (0, %d], got '%s'", MAX_SAMPLES, optarg);
            duration_given = 1;
            break;
        }
        case 'W': {
            char *end;
            opts.warmup = strtod(optarg, &end);
            if (*end || end == optarg || !(opts.warmup >= 0) || opts.warmup > MAX_SAMPLES)
                bench_usage_error("-W needs seconds in [0, %d], got '%s'", MAX_SAMPLES, optarg);
            break;
        }
        case 'i': opts.iterations = parse_long('i', optarg, 1); break;
        case 't': opts.threads = (int)parse_long('t', optarg, 1); threads_given = 1; break;
        case 'p': opts.procs = (int)parse_long('p', optarg, 1); break;
        case 'r': opts.ring = (int)parse_long('r', optarg, 1); break;
        case 's': opts.spots = (int)parse_long('s', optarg, 1); break;
        case 'w': opts.work_words = (int)parse_long('w', optarg, 1); break;
        case 'S': opts.share = (int)parse_long('S', optarg, 0); break;
        case 'e': opts.exhaust = (int)parse_long('e', optarg, 0); break;
        default:
            bench_usage_error("unknown option or missing value: -%c (see -h)", optopt ? optopt : c);
        }
    }
    if (optind < argc)
        bench_usage_error("unexpected argument '%s' (see -h)", argv[optind]);
    if (duration_given && opts.iterations)
        bench_usage_error("give either -d or -i, not both");
    if (!duration_given && !opts.iterations)
        opts.duration = DEFAULT_DURATION;
    if (opts.procs > 1024)
        bench_usage_error("-p %d: at most 1024 processors", opts.procs);
    if (opts.share > 1 || opts.exhaust > 1)
        bench_usage_error("-S and -e take 0 or 1");
    if (!threads_given)
        opts.threads = opts.procs * bench.default_threads_per_proc;
    if (opts.threads > 100000)
        bench_usage_error("-t %d: at most 100000 threads", opts.threads);
    if (bench.validate)
        bench.validate(&opts);
}

static void print_json_string(const char *key, const char *value)
{
    printf("\"%s\": \"%s\"", key, value);
}

int main(int argc, char **argv)
{
    parse_options(argc, argv);
    counters = aligned_alloc(64, sizeof(padded_counter) * (size_t)opts.threads);
    if (!counters)
        bench_failure("out of memory for %d counters", opts.threads);
    memset(counters, 0, sizeof(padded_counter) * (size_t)opts.threads);

    rt_init(opts.procs);
    bench.setup(&opts);
    start_gates = malloc(sizeof(rt_sem *) * (size_t)opts.threads);
    for (int i = 0; i < opts.threads; i++)
        start_gates[i] = rt_sem_new();
    rt_thread **threads = malloc(sizeof(rt_thread *) * (size_t)opts.threads);
    for (int i = 0; i < opts.threads; i++) {
        threads[i] = rt_spawn(thread_body, (void *)(long)i);
        if (!threads[i])
            bench_failure("could not create thread %d of %d", i, opts.threads);
    }

    /* Samples are rates over equal slices of the run, one per second when possible. */
    int nsamples = opts.iterations ? MAX_SAMPLES : (opts.duration >= 2 ? (int)opts.duration : 1);
    double slice = opts.iterations ? 1.0 : opts.duration / nsamples;
    double *samples = malloc(sizeof(double) * (size_t)nsamples);
    int taken = 0;

    if (bench.started)
        bench.started();
    for (int i = 0; i < opts.threads; i++)
        rt_sem_V(start_gates[i]);
    if (opts.warmup > 0) {
        struct timespec warmup = {(time_t)opts.warmup,
                                  (long)((opts.warmup - (double)(time_t)opts.warmup) * 1e9)};
        nanosleep(&warmup, NULL);
    }
    /* Operations done while the gates were opening (or warming up) are not measured. */
    uint64_t baseline_ops = total_ops();
    double start = bench_now();
    double slice_start = start;
    uint64_t slice_ops = baseline_ops;
    const struct timespec poll = {0, 1000 * 1000};
    for (;;) {
        nanosleep(&poll, NULL);
        double now = bench_now();
        int stopping = opts.iterations ? atomic_load(&stop_flag) : now - start >= opts.duration;
        if (now - slice_start >= slice - 0.0005 || stopping) {
            uint64_t ops = total_ops();
            if (taken < nsamples && (now - slice_start >= slice * 0.5 || taken == 0))
                samples[taken++] = (double)(ops - slice_ops) / (now - slice_start);
            slice_ops = ops;
            slice_start = now;
        }
        if (stopping)
            break;
    }
    atomic_store(&stop_flag, 1);
    double elapsed = bench_now() - start;
    uint64_t measured_ops = total_ops() - baseline_ops;
    while (atomic_load(&exited_threads) < opts.threads) {
        bench.drain();
        nanosleep(&poll, NULL);
    }
    for (int i = 0; i < opts.threads; i++)
        rt_join(threads[i]);
    uint64_t final_ops = total_ops();

    double ops_per_sec = (double)measured_ops / elapsed;
    double ns_per_op = measured_ops ? elapsed * 1e9 / (double)measured_ops : 0;
    double per_proc = ops_per_sec / opts.procs;
    printf("%s %s: %.0f ops/s, %.1f ns/op, %.0f ops/s per processor (%d processors, %d threads, %.2f s)\n",
           bench.name, rt_name, ops_per_sec, ns_per_op, per_proc, opts.procs, opts.threads, elapsed);

    printf("{\"benchmark\": \"sched-%s\", ", bench.name);
    print_json_string("mode", "");
    printf(", ");
    print_json_string("runtime", rt_name);
    printf(", \"workers\": %d, \"ops_per_sec\": %.3f, \"samples\": [", opts.procs, ops_per_sec);
    for (int i = 0; i < taken; i++)
        printf("%s%.3f", i ? ", " : "", samples[i]);
    printf("], \"cycles_per_op\": null, \"extra\": {\"ns_per_op\": %.3f, \"ns_per_op_per_proc\": %.3f, "
           "\"ops_per_sec_per_proc\": %.3f, \"processors\": %d, \"threads\": %d, \"seconds\": %.6f, "
           "\"measured_ops\": %llu, \"total_ops\": %llu",
           ns_per_op, ns_per_op * opts.procs, per_proc, opts.procs, opts.threads, elapsed,
           (unsigned long long)measured_ops, (unsigned long long)final_ops);
    if (bench.extra_json)
        bench.extra_json(stdout);
    rt_extra_json(stdout);
    printf("}}\n");
    fflush(stdout);
    rt_fini();
    return 0;
}
