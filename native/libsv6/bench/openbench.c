/*
 * sv6-openbench (sv6's fdbench) on libsv6: each worker close(open(own file)) in
 * one shared libsv6 process.  Modes:
 *   lowest  POSIX lowest-fd allocation: every open writes partition 0's lock
 *   anyfd   O_ANYFD: each core allocates from its own partition
 * Workers are threads of one libsv6 process.  With --processes each worker is
 * a process of its own with a copy of the world made before the fork, so the
 * workers share no memory at all: the control that shows what two workers can
 * reach on the machine itself (catalog: sv6-openbench-private).
 */
#include "arena.h"
#include "harness.h"
#include "sv6/core.h"
#include "sv6/sv6.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const modes[] = {"lowest", "anyfd", NULL};

struct open_run {
    struct sv6_world *world;
    struct sv6_proc *proc;
    int flags;
};

static void process_setup(struct hc_run *run)
{
    arena_keep_freed();
    struct open_run *s = calloc(1, sizeof *s);
    if (!s)
        hc_fail("out of memory");
    s->flags = strcmp(run->mode, "anyfd") == 0 ? SV6_O_ANYFD : 0;
    s->world = sv6_world_create(SV6_WORLD_SELF_TICK);
    s->proc = sv6_proc_create(s->world);
    for (int i = 0; i < run->workers; i++) {
        char name[32];
        snprintf(name, sizeof name, "open-%d", i);
        int fd = sv6_open(s->proc, name, O_CREAT);
        if (fd < 0 || sv6_close(s->proc, fd) != 0)
            hc_fail("create %s: %d", name, fd);
    }
    run->data = s;
}

static void worker(struct hc_worker *w)
{
    struct open_run *s = w->run->data;
    char name[32];
    snprintf(name, sizeof name, "open-%d", w->index);
    sv6_core_set((unsigned)w->index);
    while (hc_running(w)) {
        int fd = sv6_open(s->proc, name, s->flags);
        if (fd < 0 || sv6_close(s->proc, fd) != 0)
            hc_fail("open %s: %d", name, fd);
        hc_count(w);
    }
}

static void process_teardown(struct hc_run *run)
{
    struct open_run *s = run->data;
    sv6_proc_destroy(s->proc);
    sv6_world_destroy(s->world);
    free(s);
}

const struct hc_benchmark hc_benchmark = {
    .name = "sv6-openbench",
    .description = "libsv6: each worker close(open(own file)), lowest fd or O_ANYFD",
    .modes = modes,
    .kind = HC_THREADS_OR_PROCESSES,
    .process_setup = process_setup,
    .worker_setup = worker_ready,
    .worker = worker,
    .process_teardown = process_teardown,
};
