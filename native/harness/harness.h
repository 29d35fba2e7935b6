/*
 * harness.h - the shared benchmark harness (the will-it-scale pattern).
 *
 * A benchmark is one small C file that defines `const struct hc_benchmark
 * hc_benchmark` and links with harness.c, which provides main().  The harness
 * parses the command line, starts N workers (threads or processes), pins worker
 * i to the i-th CPU of the process's affinity mask, releases them together,
 * warms up, samples the workers' operation counters once per second, and prints
 * one JSON object as the last line of stdout (see docs/harness.md and
 * docs/format-bench.md).
 *
 * A worker counts operations with hc_count() into a counter slot that is the
 * only thing in its own 128-byte block (two cache lines, so the adjacent-line
 * prefetcher does not couple neighbours either).  Cycles per operation come
 * from the TSC: elapsed TSC ticks of the measured window times the number of
 * workers, divided by the operations counted in it.
 *
 * Command line (every benchmark):
 *   --workers N      number of workers (default 1)
 *   --warmup S       warm-up seconds, fractional allowed (default 1)
 *   --duration S     measured seconds, fractional allowed (default 5)
 *   --mode M         benchmark variant (default: the benchmark's first mode)
 *   --threads        run workers as threads of one process
 *   --processes      run workers as forked processes
 *   --dir PATH       scratch directory (default: a fresh one under $TMPDIR, removed at exit)
 *   --param K=V      benchmark-specific parameter, repeatable (see hc_param)
 *   --help
 *
 * Minimal benchmark:
 *
 *   #include "harness.h"
 *   static void worker(struct hc_worker *w)
 *   {
 *       while (hc_running(w)) {
 *           close(open(...));
 *           hc_count(w);
 *       }
 *   }
 *   const struct hc_benchmark hc_benchmark = {
 *       .name = "openbench",
 *       .worker = worker,
 *   };
 *
 * Stable API: benchmark programs of other families build against this header;
 * only add to it, never change the meaning of what is here.
 */
#ifndef SCALECHECK_HARNESS_H
#define SCALECHECK_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "../../tracer/include/scalecheck_marker.h"

#define HC_MAX_WORKERS 1024
/* Per-worker named accumulators a benchmark may declare (hc_benchmark.extra_sums). */
#define HC_MAX_EXTRA_SUMS 6

/* One worker's counters: written only by that worker, read by the sampler. */
struct hc_slot {
    _Alignas(128) volatile uint64_t ops;
    volatile uint64_t extra[HC_MAX_EXTRA_SUMS];
};
_Static_assert(sizeof(struct hc_slot) == 128 && _Alignof(struct hc_slot) == 128,
               "a worker's counters must fill exactly one 128-byte block");

struct hc_run;

struct hc_worker {
    int index;              /* 0 .. workers-1 */
    int cpu;                /* the CPU this worker is pinned to */
    bool reentered;         /* true when this image was started by hc_reexec() */
    struct hc_run *run;     /* the whole run (read-only for workers) */
    void *data;             /* free for the benchmark (set in worker_setup) */
    struct hc_slot *slot;   /* this worker's counters */
    volatile const int *stop; /* set by the harness when the measured window ends */
    /* With a warm-up, the tracer's region opens at the worker's first look at the stop
     * flag after the measured window opened (hc_running), so that it holds the window's
     * operations only: set until then. */
    bool region_pending;
    volatile const int *window_open; /* set by the harness when the measured window opens */
};

struct hc_run {
    const char *name;       /* hc_benchmark.name */
    const char *mode;       /* selected mode */
    int workers;
    bool processes;         /* workers are processes (else threads) */
    const char *workdir;    /* scratch directory, exists for the whole run */
    double warmup_s, duration_s;
    /*
     * Headline throughput = counted ops per second * ops_scale.  A benchmark
     * whose metric is not "operations" sets it in process_setup, e.g. faultzf
     * counts regions and sets bytes-per-region / 1e9 to report GB/s.
     */
    double ops_scale;
    void *data;             /* free for the benchmark (set in process_setup) */
};

enum hc_worker_kind {
    HC_THREADS_OR_PROCESSES = 0,
    HC_PROCESSES_ONLY,      /* e.g. a worker that exec()s itself */
    HC_THREADS_ONLY,
};

struct hc_benchmark {
    const char *name;
    const char *description;            /* one line, for --help */
    /* Accepted modes, NULL-terminated, first is the default.  NULL: no --mode
     * check by the harness (default mode "default"); the benchmark checks
     * run->mode itself in process_setup and calls hc_fail on a bad one. */
    const char *const *modes;
    enum hc_worker_kind kind;
    bool default_processes;             /* workers are processes unless --threads */
    /* Names of per-worker accumulators, NULL-terminated, at most
     * HC_MAX_EXTRA_SUMS.  Workers add to them with hc_add_extra(w, i, n); the
     * JSON `extra` gets, per name, the total over the measured window
     * ("<name>") and its rate ("<name>_per_sec"). */
    const char *const *extra_sums;

    /* All hooks but `worker` are optional.  Hooks report errors with hc_fail(). */
    void (*process_setup)(struct hc_run *run);   /* once, in the main process, before workers start */
    void (*worker_setup)(struct hc_worker *w);   /* in each worker, after pinning, before the start barrier */
    void (*worker)(struct hc_worker *w);         /* the loop: while (hc_running(w)) { op; hc_count(w); } */
    void (*worker_teardown)(struct hc_worker *w); /* in each worker, after its loop (outside the tracer's region) */
    void (*report)(struct hc_run *run);          /* main process, after the window: add hc_extra_* fields */
    void (*process_teardown)(struct hc_run *run); /* main process, after workers ended */
};

/* Each benchmark file defines exactly this one object. */
extern const struct hc_benchmark hc_benchmark;

/* ---- in the worker loop ---- */

/* Opens the worker's traced region (the harness's, called by hc_running). */
void hc_open_region(struct hc_worker *w);

static inline bool hc_running(const struct hc_worker *w)
{
    /* Every loop looks at the stop flag, whether or not it counts with hc_count (a worker
     * may count only an extra sum). The const is the stable signature's: a worker's state
     * is the harness's own, never a const object. */
    if (__builtin_expect(w->region_pending, 0) && __atomic_load_n(w->window_open, __ATOMIC_RELAXED))
        hc_open_region((struct hc_worker *)w);
    return !__atomic_load_n(w->stop, __ATOMIC_RELAXED);
}

static inline void hc_count_n(struct hc_worker *w, uint64_t n)
{
    /* Single writer: a plain load and a relaxed store, no locked instruction. */
    __atomic_store_n(&w->slot->ops, w->slot->ops + n, __ATOMIC_RELAXED);
    /* A NOP; under scalecheck's tracer, the end of this worker's turn. */
    SC_MARK_OPERATION_END();
}

static inline void hc_count(struct hc_worker *w)
{
    hc_count_n(w, 1);
}

static inline void hc_add_extra(struct hc_worker *w, int sum_index, uint64_t amount)
{
    __atomic_store_n(&w->slot->extra[sum_index], w->slot->extra[sum_index] + amount,
                     __ATOMIC_RELAXED);
}

static inline uint64_t hc_rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

/*
 * Replace the calling worker process's image with `path` (a build of the same
 * benchmark source, e.g. a private copy of it) and call hc_benchmark.worker
 * again in the new image with w->reentered set; counters, mode, parameters and
 * the stop flag carry over.  Processes mode only.  Returns only on failure
 * (after reporting it through hc_fail).
 */
void hc_reexec(struct hc_worker *w, const char *path);

/* ---- anywhere ---- */

/* Report a failure (one line) and end the run with exit status 1.  From a
 * worker process the main process prints it; the message becomes the last
 * line of stderr. */
__attribute__((noreturn, format(printf, 1, 2))) void hc_fail(const char *fmt, ...);

/* --param K=V lookup; the default when absent.  hc_param_long fails the run on
 * a non-number and accepts the suffixes K, M, G (powers of 1024). */
const char *hc_param(const struct hc_run *run, const char *key, const char *fallback);
long hc_param_long(const struct hc_run *run, const char *key, long fallback);

/* Path of this program's own executable (from /proc/self/exe). */
const char *hc_self_exe(void);
/* Path of program `name` in the directory of this executable (a helper built
 * beside it); fails the run when it is not there. */
const char *hc_sibling_exe(const char *name);

/* ---- in report() (main process) ---- */

void hc_extra_number(struct hc_run *run, const char *key, double value);
void hc_extra_string(struct hc_run *run, const char *key, const char *value);
void hc_extra_bool(struct hc_run *run, const char *key, bool value);

/* Figures of the measured window, for derived extra fields (e.g. wait cycles per op). */
double hc_measured_seconds(const struct hc_run *run);
uint64_t hc_measured_ops(const struct hc_run *run);
uint64_t hc_measured_extra(const struct hc_run *run, int sum_index);
double hc_tsc_hz(const struct hc_run *run);

#endif
