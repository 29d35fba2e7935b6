/*
 * harness.c - main() and the machinery behind harness.h (see docs/harness.md).
 *
 * All state the workers share lives in one memfd mapping, so it is the same for
 * threads, forked processes, and processes that exec() themselves (hc_reexec):
 * the memfd stays open across exec and the new image maps it again.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "../../tracer/include/scalecheck_marker.h"

#include <errno.h>
#include <link.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REENTER_FLAG "--hc-reenter"
#define STARTUP_TIMEOUT_S 120.0
/* How long stopped workers get to leave their loop before they are killed, unless
 * HC_STOP_GRACE_S says (an emulated run's operations can take seconds each). */
#define STOP_GRACE_S 3.0

/* Where a worker's traced region opened: its operations counted by then. */
struct hc_region {
    uint64_t start_ops;
    int opened;
};

struct hc_shared {
    _Alignas(128) volatile int stop;
    /* Written once, as stop is: read in every worker's operation during the warm-up. */
    volatile int window_open;
    _Alignas(128) volatile int go;
    volatile int ready;
    volatile int finished;
    volatile int regions_opening; /* workers at the regions' start barrier */
    volatile int failed;
    char error[512];
    /* The run's configuration, so re-exec'd worker images can rebuild it. */
    int workers;
    int processes;
    double warmup_s, duration_s;
    char mode[128];
    char workdir[PATH_MAX];
    char params[4096];          /* "K=V\0K=V\0\0" */
    int cpus[HC_MAX_WORKERS];
    struct hc_slot slots[HC_MAX_WORKERS];
    struct hc_region regions[HC_MAX_WORKERS];
};

_Static_assert(offsetof(struct hc_shared, slots) % 128 == 0, "slots must start on a 128-byte block");
_Static_assert(offsetof(struct hc_shared, go) - offsetof(struct hc_shared, stop) >= 128,
               "the stop flag, read in every worker loop, must not share a line with written fields");

/* Figures of the measured window, kept for report() and the JSON. */
struct window {
    double seconds;
    uint64_t ops;
    uint64_t extra[HC_MAX_EXTRA_SUMS];
    uint64_t tsc_ticks;
    /* The TSC at the window's start: with tsc_ticks, when it ran (scalecheck sharing
     * names a heap line by the blocks that held it then). */
    uint64_t tsc_start;
    /* CPU time the workers themselves (not their children) got in the window; NAN
     * when a worker's clock could not be read. */
    double worker_cpu_seconds;
    /* Wall time from just before the first CPU-clock reading to just after the last, so
     * the share stays <= 1 even if the sampler is preempted between readings. */
    double cpu_wall_seconds;
    double *samples;
    int nsamples;
};

struct growbuf {
    char *text;
    size_t len, cap;
};

static struct hc_shared *shared;
static int shared_fd = -1;
static struct hc_run run;
static struct window window;
static struct growbuf extra_json;
static pid_t main_pid;
static pid_t worker_pids[HC_MAX_WORKERS];
static pthread_t worker_threads[HC_MAX_WORKERS];
static clockid_t worker_cpu_clocks[HC_MAX_WORKERS];
static struct hc_worker worker_states[HC_MAX_WORKERS];
static bool made_own_workdir;
static bool setup_done, teardown_done;
static volatile sig_atomic_t interrupted;

/* ------------------------------------------------------------------ text */

static void buf_printf(struct growbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + need + 1 > b->cap) {
        b->cap = (b->len + need + 1) * 2;
        b->text = realloc(b->text, b->cap);
        if (!b->text) {
            fprintf(stderr, "%s: error: out of memory\n", hc_benchmark.name);
            _exit(1);
        }
    }
    va_start(ap, fmt);
    vsnprintf(b->text + b->len, need + 1, fmt, ap);
    va_end(ap);
    b->len += need;
}

static void buf_json_string(struct growbuf *b, const char *s)
{
    buf_printf(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            buf_printf(b, "\\u%04x", c);
        else
            buf_printf(b, "%c", c);
    }
    buf_printf(b, "\"");
}

static void buf_json_number(struct growbuf *b, double value)
{
    if (isfinite(value))
        buf_printf(b, "%.10g", value);
    else
        buf_printf(b, "null");
}

/* First line of a file, without the newline; "" when unreadable. */
static void read_line(const char *path, char *out, size_t size)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(out, size, f))
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

/* ------------------------------------------------------------- failures */

static bool is_main_process(void)
{
    return getpid() == main_pid;
}

void hc_fail(const char *fmt, ...)
{
    char message[sizeof shared->error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (shared && !is_main_process()) {
        /* A worker process: the main process reports it when it reaps us. */
        if (__atomic_exchange_n(&shared->failed, 1, __ATOMIC_ACQ_REL) == 0)
            memcpy(shared->error, message, sizeof message);
        _exit(1);
    }
    fprintf(stderr, "%s: error: %s\n", hc_benchmark.name, message);
    exit(1);
}

static void remove_entry(const char *path)
{
    if (remove(path) != 0 && errno != ENOENT)
        fprintf(stderr, "%s: warning: cannot remove %s: %s\n", hc_benchmark.name, path,
                strerror(errno));
}

static int remove_tree_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st; (void)type; (void)ftw;
    remove_entry(path);
    return 0;
}

static void stop_worker_processes(void)
{
    for (int i = 0; i < run.workers; i++) {
        if (worker_pids[i] > 0) {
            kill(worker_pids[i], SIGKILL);
            waitpid(worker_pids[i], NULL, 0);
            worker_pids[i] = 0;
        }
    }
}

/* Runs on every exit of the main process, failures included. */
static void cleanup_at_exit(void)
{
    if (!is_main_process())
        return;
    if (shared)
        __atomic_store_n(&shared->stop, 1, __ATOMIC_RELAXED);
    if (run.processes)
        stop_worker_processes();
    if (setup_done && !teardown_done && hc_benchmark.process_teardown) {
        teardown_done = true;
        hc_benchmark.process_teardown(&run);
    }
    if (made_own_workdir)
        nftw(run.workdir, remove_tree_entry, 32, FTW_DEPTH | FTW_PHYS);
}

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* ---------------------------------------------------------- parameters */

const char *hc_param(const struct hc_run *r, const char *key, const char *fallback)
{
    (void)r;
    size_t keylen = strlen(key);
    for (const char *p = shared->params; *p; p += strlen(p) + 1) {
        if (strncmp(p, key, keylen) == 0 && p[keylen] == '=')
            return p + keylen + 1;
    }
    return fallback;
}

long hc_param_long(const struct hc_run *r, const char *key, long fallback)
{
    const char *text = hc_param(r, key, NULL);
    if (!text)
        return fallback;
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    long unit = 1;
    if (*end == 'K' || *end == 'k') unit = 1L << 10, end++;
    else if (*end == 'M' || *end == 'm') unit = 1L << 20, end++;
    else if (*end == 'G' || *end == 'g') unit = 1L << 30, end++;
    if (errno || end == text || *end != '\0')
        hc_fail("--param %s=%s: not a whole number", key, text);
    return value * unit;
}

const char *hc_self_exe(void)
{
    static char path[PATH_MAX];
    if (!path[0]) {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        if (n < 0)
            hc_fail("readlink /proc/self/exe: %s", strerror(errno));
        path[n] = '\0';
    }
    return path;
}

const char *hc_sibling_exe(const char *name)
{
    const char *self = hc_self_exe();
    const char *slash = strrchr(self, '/');
    int dirlen = (int)(slash - self);
    size_t size = dirlen + strlen(name) + 2;
    char *path = malloc(size);
    if (!path)
        hc_fail("out of memory");
    snprintf(path, size, "%.*s/%s", dirlen, self, name);
    if (access(path, X_OK) != 0)
        hc_fail("helper program %s: %s (build with make -C native/benchmarks)", path, strerror(errno));
    return path;
}

/* ------------------------------------------------------- report fields */

static void extra_key(const char *key)
{
    buf_printf(&extra_json, ", ");
    buf_json_string(&extra_json, key);
    buf_printf(&extra_json, ": ");
}

void hc_extra_number(struct hc_run *r, const char *key, double value)
{
    (void)r;
    extra_key(key);
    buf_json_number(&extra_json, value);
}

void hc_extra_string(struct hc_run *r, const char *key, const char *value)
{
    (void)r;
    extra_key(key);
    buf_json_string(&extra_json, value);
}

void hc_extra_bool(struct hc_run *r, const char *key, bool value)
{
    (void)r;
    extra_key(key);
    buf_printf(&extra_json, value ? "true" : "false");
}

double hc_measured_seconds(const struct hc_run *r) { (void)r; return window.seconds; }
uint64_t hc_measured_ops(const struct hc_run *r) { (void)r; return window.ops; }
uint64_t hc_measured_extra(const struct hc_run *r, int i) { (void)r; return window.extra[i]; }
double hc_tsc_hz(const struct hc_run *r)
{
    (void)r;
    return window.seconds > 0 ? window.tsc_ticks / window.seconds : NAN;
}

/* --------------------------------------------------------------- time */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double when)
{
    struct timespec ts = {.tv_sec = (time_t)when,
                          .tv_nsec = (long)((when - (time_t)when) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !interrupted)
        ;
}

/* ------------------------------------------------------------ workers */

static void pin_to_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (err)
        hc_fail("cannot pin worker to CPU %d: %s", cpu, strerror(err));
}

static void init_worker_state(struct hc_worker *w, int index)
{
    w->index = index;
    w->cpu = shared->cpus[index];
    w->run = &run;
    w->slot = &shared->slots[index];
    w->stop = &shared->stop;
    w->window_open = &shared->window_open;
    w->region_pending = shared->warmup_s > 0 && !shared->regions[index].opened;
}

/* After a warm-up the workers open their regions together, as the start barrier has them
 * do without one: the tracer's turns wait for every worker's region, and a worker parked
 * there for one that is still in its operation can hold up the emulator itself (its
 * exclusive sections wait for every running vCPU) until the turns start without it. The
 * stop flag ends the wait of a worker whose partner never comes back to its loop. */
static void wait_for_regions(void)
{
    __atomic_add_fetch(&shared->regions_opening, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&shared->regions_opening, __ATOMIC_ACQUIRE) < run.workers &&
           !__atomic_load_n(&shared->stop, __ATOMIC_RELAXED))
        sched_yield();
}

/* The loop is a region of scalecheck's tracer, tagged with the worker's index
 * (bench/sharing.py runs the workers under qemu-x86_64 with its plugin); the markers are
 * NOPs otherwise. Its operations are counted from here, for transfers per operation. */
void hc_open_region(struct hc_worker *w)
{
    if (w->region_pending)
        wait_for_regions();
    struct hc_region *region = &shared->regions[w->index];
    region->start_ops = w->slot->ops;
    region->opened = 1;
    w->region_pending = false;
    sc_emit_tag((uint32_t)w->index);
    SC_MARK_START();
}

/* The operations the workers counted inside their regions (all but the warm-up's). */
static uint64_t region_ops(void)
{
    uint64_t sum = 0;
    for (int i = 0; i < run.workers; i++)
        if (shared->regions[i].opened)
            sum += shared->slots[i].ops - shared->regions[i].start_ops;
    return sum;
}

static void run_worker(struct hc_worker *w)
{
    pin_to_cpu(w->cpu);
    if (hc_benchmark.worker_setup)
        hc_benchmark.worker_setup(w);
    __atomic_add_fetch(&shared->ready, 1, __ATOMIC_ACQ_REL);
    while (!__atomic_load_n(&shared->go, __ATOMIC_ACQUIRE))
        sched_yield();
    /* Without a warm-up the region is the whole loop; with one, hc_running opens it. */
    if (!w->region_pending)
        hc_open_region(w);
    hc_benchmark.worker(w);
    if (shared->regions[w->index].opened)
        SC_MARK_END();
    if (hc_benchmark.worker_teardown)
        hc_benchmark.worker_teardown(w);
    __atomic_add_fetch(&shared->finished, 1, __ATOMIC_ACQ_REL);
}

static void *worker_thread(void *arg)
{
    run_worker(arg);
    return NULL;
}

void hc_reexec(struct hc_worker *w, const char *path)
{
    if (!run.processes)
        hc_fail("hc_reexec needs --processes");
    char fd_text[16], index_text[16];
    snprintf(fd_text, sizeof fd_text, "%d", shared_fd);
    snprintf(index_text, sizeof index_text, "%d", w->index);
    char *argv[] = {(char *)path, REENTER_FLAG, fd_text, index_text, NULL};
    execv(path, argv);
    hc_fail("exec %s: %s", path, strerror(errno));
}

/* The entry of an image started by hc_reexec(): rebuild the run from the memfd. */
static int reentered_main(char **argv)
{
    shared_fd = atoi(argv[2]);
    int index = atoi(argv[3]);
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED, shared_fd, 0);
    if (shared == MAP_FAILED) {
        fprintf(stderr, "%s: error: re-entered worker cannot map shared state: %s\n",
                hc_benchmark.name, strerror(errno));
        return 1;
    }
    main_pid = 0;   /* not the main process: hc_fail goes through shared->error */
    if (index < 0 || index >= shared->workers)
        hc_fail("re-entered worker index %d out of range", index);
    run.name = hc_benchmark.name;
    run.mode = shared->mode;
    run.workers = shared->workers;
    run.processes = shared->processes;
    run.workdir = shared->workdir;
    run.warmup_s = shared->warmup_s;
    run.duration_s = shared->duration_s;
    run.ops_scale = 1.0;
    struct hc_worker w = {0};
    init_worker_state(&w, index);
    w.reentered = true;
    hc_benchmark.worker(&w);
    __atomic_add_fetch(&shared->finished, 1, __ATOMIC_ACQ_REL);
    return 0;
}

/* Fails the run if a worker process died before the harness stopped it. */
static void check_worker_processes(void)
{
    if (interrupted)
        hc_fail("interrupted by a signal");
    if (!run.processes)
        return;
    for (int i = 0; i < run.workers; i++) {
        int status;
        if (worker_pids[i] <= 0 || waitpid(worker_pids[i], &status, WNOHANG) <= 0)
            continue;
        worker_pids[i] = 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        if (shared->failed)
            hc_fail("%s", shared->error);
        if (WIFSIGNALED(status))
            hc_fail("worker %d killed by signal %d (%s)", i, WTERMSIG(status),
                    strsignal(WTERMSIG(status)));
        hc_fail("worker %d exited with status %d", i, WEXITSTATUS(status));
    }
}

static void start_workers(void)
{
    for (int i = 0; i < run.workers; i++) {
        struct hc_worker *w = &worker_states[i];
        init_worker_state(w, i);
        if (run.processes) {
            fflush(NULL);
            pid_t pid = fork();
            if (pid < 0)
                hc_fail("fork worker %d: %s", i, strerror(errno));
            if (pid == 0) {
                signal(SIGINT, SIG_DFL);
                signal(SIGTERM, SIG_DFL);
                run_worker(w);
                _exit(0);
            }
            worker_pids[i] = pid;
        } else {
            int err = pthread_create(&worker_threads[i], NULL, worker_thread, w);
            if (err)
                hc_fail("create worker thread %d: %s", i, strerror(err));
        }
    }
    for (int i = 0; i < run.workers; i++) {
        int err = run.processes ? clock_getcpuclockid(worker_pids[i], &worker_cpu_clocks[i])
                                : pthread_getcpuclockid(worker_threads[i], &worker_cpu_clocks[i]);
        if (err)
            hc_fail("CPU clock of worker %d: %s", i, strerror(err));
    }
    double deadline = now_s() + STARTUP_TIMEOUT_S;
    while (__atomic_load_n(&shared->ready, __ATOMIC_ACQUIRE) < run.workers) {
        check_worker_processes();
        if (now_s() > deadline)
            hc_fail("workers not ready after %.0f s", STARTUP_TIMEOUT_S);
        usleep(1000);
    }
}

static uint64_t total_ops(void)
{
    uint64_t sum = 0;
    for (int i = 0; i < run.workers; i++)
        sum += __atomic_load_n(&shared->slots[i].ops, __ATOMIC_RELAXED);
    return sum;
}

static uint64_t total_extra(int sum_index)
{
    uint64_t sum = 0;
    for (int i = 0; i < run.workers; i++)
        sum += __atomic_load_n(&shared->slots[i].extra[sum_index], __ATOMIC_RELAXED);
    return sum;
}

static double workers_cpu_seconds(void)
{
    double sum = 0;
    for (int i = 0; i < run.workers; i++) {
        struct timespec ts;
        if (clock_gettime(worker_cpu_clocks[i], &ts) != 0)
            return NAN;
        sum += ts.tv_sec + ts.tv_nsec / 1e9;
    }
    return sum;
}

static int count_extra_sums(void)
{
    int n = 0;
    while (hc_benchmark.extra_sums && hc_benchmark.extra_sums[n])
        n++;
    return n;
}

/* Warm up, then sample once per second (the last sample may be shorter). */
static void measure(void)
{
    int nsums = count_extra_sums();
    uint64_t extra_start[HC_MAX_EXTRA_SUMS];
    window.samples = calloc((size_t)ceil(run.duration_s) + 1, sizeof(double));

    __atomic_store_n(&shared->go, 1, __ATOMIC_RELEASE);
    sleep_until(now_s() + run.warmup_s);
    check_worker_processes();

    double cpu_wall_start = now_s();
    double cpu_start = workers_cpu_seconds();
    double start = now_s();
    uint64_t tsc_start = hc_rdtsc();
    uint64_t ops_start = total_ops();
    __atomic_store_n(&shared->window_open, 1, __ATOMIC_RELAXED);
    for (int s = 0; s < nsums; s++)
        extra_start[s] = total_extra(s);

    double end = start + run.duration_s, previous_time = start;
    uint64_t previous_ops = ops_start;
    while (previous_time < end) {
        double next = fmin(previous_time + 1.0, end);
        sleep_until(next);
        check_worker_processes();
        double t = now_s();
        uint64_t ops = total_ops();
        window.samples[window.nsamples++] = (ops - previous_ops) / (t - previous_time) * run.ops_scale;
        previous_time = t;
        previous_ops = ops;
    }
    window.tsc_ticks = hc_rdtsc() - tsc_start;
    window.tsc_start = tsc_start;
    window.worker_cpu_seconds = workers_cpu_seconds() - cpu_start;
    window.cpu_wall_seconds = now_s() - cpu_wall_start;
    window.seconds = previous_time - start;
    window.ops = previous_ops - ops_start;
    for (int s = 0; s < nsums; s++)
        window.extra[s] = total_extra(s) - extra_start[s];
    __atomic_store_n(&shared->stop, 1, __ATOMIC_RELAXED);
}

/* Give workers STOP_GRACE_S to leave their loops; returns how many did not. */
static int wait_for_workers(void)
{
    const char *grace = getenv("HC_STOP_GRACE_S");
    double deadline = now_s() + (grace && atof(grace) > 0 ? atof(grace) : STOP_GRACE_S);
    if (run.processes) {
        int left = 0;
        for (int i = 0; i < run.workers; i++) {
            while (worker_pids[i] > 0 && now_s() < deadline) {
                check_worker_processes();
                if (worker_pids[i] > 0)
                    usleep(1000);
            }
            left += worker_pids[i] > 0;
        }
        stop_worker_processes();
        return left;
    }
    while (__atomic_load_n(&shared->finished, __ATOMIC_ACQUIRE) < run.workers && now_s() < deadline)
        usleep(1000);
    int left = run.workers - __atomic_load_n(&shared->finished, __ATOMIC_ACQUIRE);
    for (int i = 0; left == 0 && i < run.workers; i++)
        pthread_join(worker_threads[i], NULL);
    return left;
}

/* ----------------------------------------------------- machine & JSON */

static void json_machine(struct growbuf *b)
{
    char model[256] = "unknown", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(model, sizeof model, "%s", colon + 2);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    }
    if (f)
        fclose(f);
    struct utsname uts;
    uname(&uts);
    buf_printf(b, "{\"cpu_model\": ");
    buf_json_string(b, model);
    buf_printf(b, ", \"online_cpus\": %ld, \"kernel\": ", sysconf(_SC_NPROCESSORS_ONLN));
    buf_json_string(b, uts.release);
    buf_printf(b, ", \"kernel_version\": ");
    buf_json_string(b, uts.version);
    buf_printf(b, ", \"mitigations\": {");
    static const char *const vulnerabilities[] = {
        "gather_data_sampling", "itlb_multihit", "l1tf", "mds", "meltdown", "mmio_stale_data",
        "reg_file_data_sampling", "retbleed", "spec_rstack_overflow", "spec_store_bypass",
        "spectre_v1", "spectre_v2", "srbds", "tsx_async_abort", NULL};
    bool first = true;
    for (int i = 0; vulnerabilities[i]; i++) {
        char path[256], state[512];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/vulnerabilities/%s", vulnerabilities[i]);
        read_line(path, state, sizeof state);
        if (!state[0])
            continue;
        buf_printf(b, first ? "" : ", ");
        first = false;
        buf_json_string(b, vulnerabilities[i]);
        buf_printf(b, ": ");
        buf_json_string(b, state);
    }
    buf_printf(b, "}}");
}

/* dl_iterate_phdr's first object is the program itself. */
static int first_object_bias(struct dl_phdr_info *info, size_t size, void *bias)
{
    (void)size;
    *(uintptr_t *)bias = info->dlpi_addr;
    return 1;
}

/* Where the program's image was loaded (0 unless position-independent): with it a
 * code or data address seen at run time (by scalecheck's tracer) is named by the
 * program's symbols. */
static uintptr_t load_bias(void)
{
    uintptr_t bias = 0;
    dl_iterate_phdr(first_object_bias, &bias);
    return bias;
}

/* Every other object with a file (the C library, the loader), with its bias: the
 * tracer's addresses in them are named by their files' symbols. */
static int append_shared_object(struct dl_phdr_info *info, size_t size, void *buf)
{
    struct growbuf *b = buf;
    (void)size;
    if (info->dlpi_name[0] != '/')
        return 0; /* the program itself (named ""), the vDSO (no file) */
    buf_printf(b, "%s{\"path\": ", b->text[b->len - 1] == '[' ? "" : ", ");
    buf_json_string(b, info->dlpi_name);
    buf_printf(b, ", \"bias\": %llu}", (unsigned long long)info->dlpi_addr);
    return 0;
}

static void json_shared_objects(struct growbuf *b)
{
    buf_printf(b, "[");
    dl_iterate_phdr(append_shared_object, b);
    buf_printf(b, "]");
}

/* Worker i -> CPU, with the CPU's package and core, in worker order. */
static void json_topology(struct growbuf *b)
{
    buf_printf(b, "[");
    for (int i = 0; i < run.workers; i++) {
        char path[128], package[32], core[32];
        int cpu = shared->cpus[i];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        read_line(path, package, sizeof package);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        read_line(path, core, sizeof core);
        buf_printf(b, "%s{\"worker\": %d, \"cpu\": %d, \"package\": %s, \"core\": %s}",
                   i ? ", " : "", i, cpu, package[0] ? package : "null", core[0] ? core : "null");
    }
    buf_printf(b, "]");
}

static void print_result(int stragglers, bool oversubscribed)
{
    struct growbuf b = {0};
    double ops_per_sec = window.ops / window.seconds * run.ops_scale;
    buf_printf(&b, "{\"benchmark\": ");
    buf_json_string(&b, run.name);
    buf_printf(&b, ", \"mode\": ");
    buf_json_string(&b, run.mode);
    /* The --param assignments, so a record says which variant ran (e.g. layout=mixed). */
    buf_printf(&b, ", \"params\": {");
    for (const char *p = shared->params; *p; p += strlen(p) + 1) {
        char key[256];
        size_t keylen = (size_t)(strchr(p, '=') - p);
        snprintf(key, sizeof key, "%.*s", (int)keylen, p);
        buf_printf(&b, p == shared->params ? "" : ", ");
        buf_json_string(&b, key);
        buf_printf(&b, ": ");
        buf_json_string(&b, p + keylen + 1);
    }
    buf_printf(&b, "}, \"runtime\": \"\", \"workers\": %d, \"ops_per_sec\": ", run.workers);
    buf_json_number(&b, ops_per_sec);
    buf_printf(&b, ", \"samples\": [");
    for (int i = 0; i < window.nsamples; i++) {
        buf_printf(&b, i ? ", " : "");
        buf_json_number(&b, window.samples[i]);
    }
    buf_printf(&b, "], \"cycles_per_op\": ");
    buf_json_number(&b, window.ops ? (double)window.tsc_ticks * run.workers / window.ops : NAN);
    buf_printf(&b, ", \"extra\": {\"ops\": %llu, \"seconds\": ", (unsigned long long)window.ops);
    buf_json_number(&b, window.seconds);
    buf_printf(&b, ", \"ops_scale\": ");
    buf_json_number(&b, run.ops_scale);
    for (int s = 0; s < count_extra_sums(); s++) {
        char rate_key[128];
        hc_extra_number(&run, hc_benchmark.extra_sums[s], (double)window.extra[s]);
        snprintf(rate_key, sizeof rate_key, "%s_per_sec", hc_benchmark.extra_sums[s]);
        hc_extra_number(&run, rate_key, window.extra[s] / window.seconds);
    }
    if (extra_json.text)
        buf_printf(&b, "%s", extra_json.text);
    buf_printf(&b, "}, \"harness\": {\"workers_are\": \"%s\", \"warmup_s\": ",
               run.processes ? "processes" : "threads");
    buf_json_number(&b, run.warmup_s);
    buf_printf(&b, ", \"duration_s\": ");
    buf_json_number(&b, run.duration_s);
    buf_printf(&b, ", \"tsc_hz\": ");
    buf_json_number(&b, hc_tsc_hz(&run));
    /* Below 1 when other work (or the benchmark's own blocking) kept workers off their CPUs. */
    buf_printf(&b, ", \"worker_cpu_seconds\": ");
    buf_json_number(&b, window.worker_cpu_seconds);
    buf_printf(&b, ", \"worker_cpu_share\": ");
    buf_json_number(&b, window.worker_cpu_seconds / (run.workers * window.cpu_wall_seconds));
    buf_printf(&b, ", \"oversubscribed\": %s, \"workers_killed_at_stop\": %d, \"topology\": ",
               oversubscribed ? "true" : "false", stragglers);
    json_topology(&b);
    buf_printf(&b, ", \"region_ops\": %llu", (unsigned long long)region_ops());
    buf_printf(&b, ", \"window_tsc\": [%llu, %llu]", (unsigned long long)window.tsc_start,
               (unsigned long long)(window.tsc_start + window.tsc_ticks));
    buf_printf(&b, ", \"load_bias\": %llu, \"shared_objects\": ", (unsigned long long)load_bias());
    json_shared_objects(&b);
    buf_printf(&b, "}, \"machine\": ");
    json_machine(&b);
    buf_printf(&b, "}\n");
    fputs(b.text, stdout);
    fflush(stdout);
}

/* -------------------------------------------------------------- main */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: %s [--workers N] [--warmup S] [--duration S] [--mode M]\n"
            "       [--threads | --processes] [--dir PATH] [--param K=V]...\n"
            "%s\n",
            hc_benchmark.name, hc_benchmark.description ? hc_benchmark.description : "");
    if (hc_benchmark.modes) {
        fprintf(out, "modes:");
        for (int i = 0; hc_benchmark.modes[i]; i++)
            fprintf(out, " %s", hc_benchmark.modes[i]);
        fprintf(out, " (default %s)\n", hc_benchmark.modes[0]);
    }
    fprintf(out, "workers are %s by default\n",
            hc_benchmark.default_processes ? "processes" : "threads");
}

static __attribute__((noreturn, format(printf, 1, 2))) void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", hc_benchmark.name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see --help)\n");
    va_end(ap);
    exit(2);
}

static double parse_seconds(const char *option, const char *text)
{
    char *end;
    double value = strtod(text, &end);
    if (end == text || *end || !isfinite(value) || value < 0)
        usage_error("%s %s: expected a number of seconds >= 0", option, text);
    return value;
}

/* "--key value" or "--key=value"; advances *i past the value. */
static const char *option_value(int argc, char **argv, int *i, const char *option)
{
    size_t len = strlen(option);
    if (strncmp(argv[*i], option, len) == 0 && argv[*i][len] == '=')
        return argv[*i] + len + 1;
    if (strcmp(argv[*i], option) != 0)
        return NULL;
    if (*i + 1 >= argc)
        usage_error("%s needs a value", option);
    return argv[++*i];
}

static void add_param(const char *assignment)
{
    if (!strchr(assignment, '=') || assignment[0] == '=')
        usage_error("--param %s: expected KEY=VALUE", assignment);
    size_t used = 0;
    while (shared->params[used])
        used += strlen(shared->params + used) + 1;
    if (used + strlen(assignment) + 2 > sizeof shared->params)
        usage_error("too many --param values");
    strcpy(shared->params + used, assignment);
}

static void parse_arguments(int argc, char **argv)
{
    const char *value;
    bool threads = false, processes = false;
    shared->workers = 1;
    shared->warmup_s = 1.0;
    shared->duration_s = 5.0;
    snprintf(shared->mode, sizeof shared->mode, "%s",
             hc_benchmark.modes ? hc_benchmark.modes[0] : "default");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if ((value = option_value(argc, argv, &i, "--workers"))) {
            char *end;
            long n = strtol(value, &end, 10);
            if (end == value || *end || n < 1 || n > HC_MAX_WORKERS)
                usage_error("--workers %s: expected a whole number from 1 to %d", value,
                            HC_MAX_WORKERS);
            shared->workers = (int)n;
        } else if ((value = option_value(argc, argv, &i, "--warmup"))) {
            shared->warmup_s = parse_seconds("--warmup", value);
        } else if ((value = option_value(argc, argv, &i, "--duration"))) {
            shared->duration_s = parse_seconds("--duration", value);
            if (shared->duration_s <= 0)
                usage_error("--duration must be more than 0 seconds");
        } else if ((value = option_value(argc, argv, &i, "--mode"))) {
            if (strlen(value) >= sizeof shared->mode)
                usage_error("--mode %s: too long", value);
            snprintf(shared->mode, sizeof shared->mode, "%s", value);
        } else if ((value = option_value(argc, argv, &i, "--dir"))) {
            if (strlen(value) >= sizeof shared->workdir)
                usage_error("--dir: path too long");
            snprintf(shared->workdir, sizeof shared->workdir, "%s", value);
        } else if ((value = option_value(argc, argv, &i, "--param"))) {
            add_param(value);
        } else if (strcmp(argv[i], "--threads") == 0) {
            threads = true;
        } else if (strcmp(argv[i], "--processes") == 0) {
            processes = true;
        } else {
            usage_error("unknown argument %s", argv[i]);
        }
    }
    if (threads && processes)
        usage_error("--threads and --processes exclude each other");
    if (threads && hc_benchmark.kind == HC_PROCESSES_ONLY)
        usage_error("workers of %s can only be processes", hc_benchmark.name);
    if (processes && hc_benchmark.kind == HC_THREADS_ONLY)
        usage_error("workers of %s can only be threads", hc_benchmark.name);
    shared->processes = processes || (!threads && (hc_benchmark.default_processes ||
                                                   hc_benchmark.kind == HC_PROCESSES_ONLY));
    if (hc_benchmark.modes) {
        bool known = false;
        for (int i = 0; hc_benchmark.modes[i]; i++)
            known |= strcmp(hc_benchmark.modes[i], shared->mode) == 0;
        if (!known)
            usage_error("unknown mode %s", shared->mode);
    }
}

/* Worker i gets the i-th CPU of the affinity mask (wrapping when oversubscribed). */
static bool assign_cpus(void)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        hc_fail("sched_getaffinity: %s", strerror(errno));
    int cpus[CPU_SETSIZE], ncpus = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &allowed))
            cpus[ncpus++] = cpu;
    for (int i = 0; i < shared->workers; i++)
        shared->cpus[i] = cpus[i % ncpus];
    return shared->workers > ncpus;
}

static void prepare_workdir(void)
{
    if (shared->workdir[0]) {
        if (mkdir(shared->workdir, 0755) != 0 && errno != EEXIST)
            hc_fail("--dir %s: %s", shared->workdir, strerror(errno));
        return;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(shared->workdir, sizeof shared->workdir, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
             hc_benchmark.name);
    if (!mkdtemp(shared->workdir))
        hc_fail("cannot create a scratch directory %s: %s", shared->workdir, strerror(errno));
    made_own_workdir = true;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], REENTER_FLAG) == 0)
        return reentered_main(argv);

    main_pid = getpid();
    /* Not close-on-exec: hc_reexec'd images map it again. */
    shared_fd = memfd_create("scalecheck-harness", 0);
    if (shared_fd < 0 || ftruncate(shared_fd, sizeof *shared) != 0)
        hc_fail("memfd for shared state: %s", strerror(errno));
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED, shared_fd, 0);
    if (shared == MAP_FAILED)
        hc_fail("map shared state: %s", strerror(errno));
    parse_arguments(argc, argv);
    bool oversubscribed = assign_cpus();

    run.name = hc_benchmark.name;
    run.mode = shared->mode;
    run.workers = shared->workers;
    run.processes = shared->processes;
    run.warmup_s = shared->warmup_s;
    run.duration_s = shared->duration_s;
    run.ops_scale = 1.0;
    atexit(cleanup_at_exit);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    /* A benchmark writing to a pipe whose reader died must fail, not vanish. */
    signal(SIGPIPE, SIG_IGN);
    prepare_workdir();
    run.workdir = shared->workdir;

    if (hc_benchmark.process_setup)
        hc_benchmark.process_setup(&run);
    setup_done = true;
    start_workers();
    measure();
    int stragglers = wait_for_workers();
    if (hc_benchmark.report)
        hc_benchmark.report(&run);
    /* Worker threads still in an operation would use what the teardown frees (here or at
     * exit): none, the exit ends them. */
    teardown_done = stragglers > 0 && !run.processes;
    if (hc_benchmark.process_teardown && !teardown_done) {
        teardown_done = true;
        hc_benchmark.process_teardown(&run);
    }
    print_result(stragglers, oversubscribed);
    /* Threads that did not stop in time must not delay the exit. */
    exit(0);
}
