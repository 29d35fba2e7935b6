/*
 * sv6-statbench (sv6's linkbench) on libsv6: half the workers (the even ones)
 * fstat one file, the other half link it to a name of their own and unlink it
 * again.  Counted: stats.  Modes, the paper's three:
 *   fstat-refcache  fstat reads the refcache'd link count (a consistent read of
 *                   every core's cache, which the linkers write)
 *   fstatx          fstatx without the link count: shares nothing with link/unlink
 *   fstat-shared    the link count is one shared counter (SV6_WORLD_SHARED_NLINK)
 * Workers are threads of one libsv6 process.  With --processes each worker is
 * a process of its own with a copy of the world made before the fork: the
 * control of the same code sharing no memory (catalog: sv6-statbench-mixed-private).
 * --param layout=mixed: every worker does both in turn (one stat, then one link and
 * unlink of its own name), so that one worker is a baseline for two on a machine with
 * too few cores to give the split layout a one-worker point.
 */
#include "arena.h"
#include "harness.h"
#include "sv6/core.h"
#include "sv6/sv6.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const modes[] = {"fstat-refcache", "fstatx", "fstat-shared", NULL};
static const char *const extra_sums[] = {"links", NULL};

struct stat_run {
    struct sv6_world *world;
    struct sv6_proc *proc;
    int fd;
    bool statx;
};

static void process_setup(struct hc_run *run)
{
    arena_keep_freed();
    struct stat_run *s = calloc(1, sizeof *s);
    if (!s)
        hc_fail("out of memory");
    bool shared = strcmp(run->mode, "fstat-shared") == 0;
    s->statx = strcmp(run->mode, "fstatx") == 0;
    s->world = sv6_world_create(SV6_WORLD_SELF_TICK | (shared ? SV6_WORLD_SHARED_NLINK : 0));
    s->proc = sv6_proc_create(s->world);
    s->fd = sv6_open(s->proc, "file", O_CREAT);
    if (s->fd < 0)
        hc_fail("sv6_open: %d", s->fd);
    run->data = s;
}

static bool is_mixed(const struct hc_run *run)
{
    const char *layout = hc_param(run, "layout", "split");
    if (strcmp(layout, "mixed") != 0 && strcmp(layout, "split") != 0)
        hc_fail("--param layout=%s: expected split or mixed", layout);
    return strcmp(layout, "mixed") == 0;
}

static void stat_once(struct hc_worker *w, const struct stat_run *s)
{
    struct sv6_stat st;
    int result = s->statx ? sv6_fstatx(s->proc, s->fd, SV6_STATX_INO | SV6_STATX_SIZE, &st)
                          : sv6_fstat(s->proc, s->fd, &st);
    if (result != 0)
        hc_fail("fstat: %d", result);
    hc_count(w);
}

static void link_unlink_once(struct hc_worker *w, const struct stat_run *s, const char *name)
{
    if (sv6_link(s->proc, "file", name) != 0 || sv6_unlink(s->proc, name) != 0)
        hc_fail("link/unlink %s", name);
    hc_add_extra(w, 0, 1);
}

static void worker(struct hc_worker *w)
{
    struct stat_run *s = w->run->data;
    sv6_core_set((unsigned)w->index);
    bool mixed = is_mixed(w->run);
    bool stats = mixed || w->index % 2 == 0, links = mixed || w->index % 2 == 1;
    char name[32];
    snprintf(name, sizeof name, "link%d", w->index);
    while (hc_running(w)) {
        if (stats)
            stat_once(w, s);
        if (links)
            link_unlink_once(w, s, name);
    }
}

static void report(struct hc_run *run)
{
    struct stat_run *s = run->data;
    hc_extra_number(run, "stat_workers", is_mixed(run) ? run->workers : (run->workers + 1) / 2);
    hc_extra_number(run, "consistent_read_retries", (double)sv6_world_read_retries(s->world));
}

static void process_teardown(struct hc_run *run)
{
    struct stat_run *s = run->data;
    sv6_proc_destroy(s->proc);
    sv6_world_destroy(s->world);
    free(s);
}

const struct hc_benchmark hc_benchmark = {
    .name = "sv6-statbench",
    .description = "libsv6: even workers fstat one file, odd workers link/unlink it (or each both in turn)",
    .modes = modes,
    .kind = HC_THREADS_OR_PROCESSES,
    .extra_sums = extra_sums,
    .process_setup = process_setup,
    .worker_setup = worker_ready,
    .worker = worker,
    .report = report,
    .process_teardown = process_teardown,
};
