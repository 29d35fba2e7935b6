/* The parts every C scheduler benchmark shares, whichever runtime runs it: options,
 * the measurement loop, per-thread operation counters and the output (one human line,
 * then the JSON line of docs/format-bench.md). A benchmark supplies a bench_spec; a
 * runtime supplies the rt_* functions (rt.h). */
#ifndef SCHEDBENCH_BENCH_H
#define SCHEDBENCH_BENCH_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    double duration;  /* -d seconds (used when iterations == 0) */
    double warmup;    /* -W seconds run before measuring */
    long iterations;  /* -i: stop once a thread has done this many operations */
    int threads;      /* -t */
    int procs;        /* -p */
    int ring;         /* -r: threads per ring (cycle) */
    int spots;        /* -s: semaphores (churn) or one-seat spots (locality) */
    int work_words;   /* -w: 8-byte words each thread touches per operation (locality) */
    int share;        /* -S 0|1: hand data over to the woken thread (locality) */
    int exhaust;      /* -e 0|1: non-leaders park instead of yielding (transfer) */
} bench_options;

typedef struct {
    const char *name;
    const char *extra_flags;      /* option letters accepted besides -d -i -t -p */
    int default_threads_per_proc; /* when -t is not given */
    void (*validate)(const bench_options *opts); /* calls bench_usage_error on bad input */
    void (*setup)(const bench_options *opts);    /* before any thread exists */
    void (*thread_main)(int index);              /* the body of thread `index` */
    void (*started)(void);                       /* right after the clock starts; may be NULL */
    void (*drain)(void); /* after stop: release threads blocked for good; called until all exit */
    void (*extra_json)(FILE *out);               /* bench-specific "extra" members; may be NULL */
} bench_spec;

extern const bench_spec bench; /* defined by each benchmark */

/* For benchmark bodies. */
void bench_count(int index);           /* one operation done by thread `index` */
int bench_must_stop(int index);        /* time is up (or -i reached): finish the loop */
uint64_t bench_random(uint64_t *state); /* xorshift64; seed with bench_seed(index) */
uint64_t bench_seed(int index);
void bench_usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void bench_failure(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
double bench_now(void);                /* monotonic seconds */

#endif
