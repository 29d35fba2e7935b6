/*
 * openbench (sv6 fdbench; will-it-scale open1): each worker close(open()) its
 * own file.  In one process (threads, the default) every open must allocate
 * the lowest free descriptor of the shared table; the setup checks that Linux
 * does so and reports it as extra.lowest_fd_semantics.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct open_worker {
    char path[4200];
};

static bool lowest_fd_semantics;

/* open() must return the lowest free descriptor: free a hole below two open ones. */
static void probe_lowest_fd(const char *path)
{
    int a = open(path, O_RDONLY), b = open(path, O_RDONLY), c = open(path, O_RDONLY);
    if (a < 0 || b < 0 || c < 0)
        hc_fail("open %s: %s", path, strerror(errno));
    close(a);
    int reopened = open(path, O_RDONLY);
    lowest_fd_semantics = reopened == a;
    close(reopened);
    close(b);
    close(c);
}

static void process_setup(struct hc_run *run)
{
    for (int i = 0; i < run->workers; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/open-%d", run->workdir, i);
        int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
        if (fd < 0)
            hc_fail("create %s: %s", path, strerror(errno));
        close(fd);
        if (i == 0)
            probe_lowest_fd(path);
    }
}

static void worker_setup(struct hc_worker *w)
{
    struct open_worker *state = malloc(sizeof *state);
    if (!state)
        hc_fail("out of memory");
    snprintf(state->path, sizeof state->path, "%s/open-%d", w->run->workdir, w->index);
    w->data = state;
}

static void worker(struct hc_worker *w)
{
    const char *path = ((struct open_worker *)w->data)->path;
    while (hc_running(w)) {
        int fd = open(path, O_RDWR);
        if (fd < 0)
            hc_fail("open %s: %s", path, strerror(errno));
        close(fd);
        hc_count(w);
    }
}

static void report(struct hc_run *run)
{
    hc_extra_bool(run, "lowest_fd_semantics", lowest_fd_semantics);
}

const struct hc_benchmark hc_benchmark = {
    .name = "openbench",
    .description = "each worker close(open(own file)); Linux allocates the lowest free FD",
    .process_setup = process_setup,
    .worker_setup = worker_setup,
    .worker = worker,
    .report = report,
};
