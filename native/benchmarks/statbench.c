/*
 * statbench (sv6 linkbench): n/2 workers fstat one file while the other n/2
 * link it to a per-worker name and unlink that name.  Mode "fstat" asks for the
 * link count (does not commute with link/unlink); mode "statx" asks for every
 * basic field but STATX_NLINK (Linux's counterpart of sv6's fstatx, which does).
 * The headline counts stats; link+unlink pairs go to extra.link_unlinks.
 * --param layout=mixed: every worker does both in turn (one stat, then one link and
 * unlink of its own name), so that one worker is a baseline for two on a machine with
 * too few cores to give the split layout a one-worker point.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { LINK_UNLINKS };

struct statbench {
    int fd;
    char path[4096];
};

static struct statbench bench;

static bool is_mixed(const struct hc_run *run)
{
    const char *layout = hc_param(run, "layout", "split");
    if (strcmp(layout, "mixed") != 0 && strcmp(layout, "split") != 0)
        hc_fail("--param layout=%s: expected split or mixed", layout);
    return strcmp(layout, "mixed") == 0;
}

/* Split: odd workers link/unlink, so n workers give ceil(n/2) statters and floor(n/2) linkers. */
static int stat_workers(const struct hc_run *run)
{
    return is_mixed(run) ? run->workers : (run->workers + 1) / 2;
}

static void process_setup(struct hc_run *run)
{
    snprintf(bench.path, sizeof bench.path, "%s/statbench-file", run->workdir);
    bench.fd = open(bench.path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (bench.fd < 0)
        hc_fail("create %s: %s", bench.path, strerror(errno));
}

static void stat_once(struct hc_worker *w, bool want_nlink)
{
    const unsigned int mask_without_nlink = STATX_BASIC_STATS & ~STATX_NLINK;
    struct stat st;
    struct statx stx;
    int rc = want_nlink ? fstat(bench.fd, &st)
                        : statx(bench.fd, "", AT_EMPTY_PATH, mask_without_nlink, &stx);
    if (rc != 0)
        hc_fail("%s: %s", w->run->mode, strerror(errno));
    hc_count(w);
}

static void link_unlink_once(struct hc_worker *w, const char *name)
{
    if (link(bench.path, name) != 0)
        hc_fail("link %s: %s", name, strerror(errno));
    if (unlink(name) != 0)
        hc_fail("unlink %s: %s", name, strerror(errno));
    hc_add_extra(w, LINK_UNLINKS, 1);
}

static void worker(struct hc_worker *w)
{
    bool want_nlink = strcmp(w->run->mode, "fstat") == 0;
    bool mixed = is_mixed(w->run);
    bool stats = mixed || w->index % 2 == 0, links = mixed || w->index % 2 == 1;
    char name[4200];
    snprintf(name, sizeof name, "%s/link-%d", w->run->workdir, w->index);
    while (hc_running(w)) {
        if (stats)
            stat_once(w, want_nlink);
        if (links)
            link_unlink_once(w, name);
    }
}

static void report(struct hc_run *run)
{
    int statters = stat_workers(run);
    hc_extra_number(run, "stat_workers", statters);
    hc_extra_number(run, "link_workers", is_mixed(run) ? run->workers : run->workers / 2);
    hc_extra_number(run, "stats_per_sec_per_stat_worker",
                    hc_measured_ops(run) / hc_measured_seconds(run) / statters);
    /* The harness's cycles_per_op spreads the link/unlink time over the stats too. */
    hc_extra_number(run, "cycles_per_stat",
                    hc_tsc_hz(run) * hc_measured_seconds(run) * statters / hc_measured_ops(run));
}

static const char *const modes[] = {"fstat", "statx", NULL};
static const char *const sums[] = {"link_unlinks", NULL};

const struct hc_benchmark hc_benchmark = {
    .name = "statbench",
    .description = "n/2 workers fstat (or statx without STATX_NLINK) one file, n/2 link/unlink it (or each both in turn)",
    .modes = modes,
    .extra_sums = sums,
    .process_setup = process_setup,
    .worker = worker,
    .report = report,
};
