/*
 * doexec (DragonFly 5.6 report): each worker process exec()s itself in a loop;
 * the headline is execs/s.  Four variants of who shares the executable:
 *   static-private   static binary, a private copy per worker   (S/DI)
 *   static-shared    static binary, one copy for all workers    (S/SH)
 *   dynamic-private  dynamic binary, private copy; shared libraries stay shared (D/DI)
 *   dynamic-shared   dynamic binary, one copy, everything shared (D/SH)
 * The copies live in the run's scratch directory, so every path is derived
 * from (workdir, mode, worker index) and each re-exec'd image finds its own.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_private(const char *mode)
{
    return strstr(mode, "-private") != NULL;
}

static void image_path(const struct hc_run *run, int worker_index, char *out, size_t size)
{
    if (is_private(run->mode))
        snprintf(out, size, "%s/doexec-%s.%d", run->workdir, run->mode, worker_index);
    else
        snprintf(out, size, "%s/doexec-%s", run->workdir, run->mode);
}

static void copy_executable(const char *from, const char *to)
{
    int in = open(from, O_RDONLY);
    if (in < 0)
        hc_fail("open %s: %s", from, strerror(errno));
    struct stat st;
    fstat(in, &st);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    if (out < 0)
        hc_fail("create %s: %s", to, strerror(errno));
    for (off_t offset = 0; offset < st.st_size;) {
        if (sendfile(out, in, &offset, st.st_size - offset) <= 0)
            hc_fail("copy %s to %s: %s", from, to, strerror(errno));
    }
    close(in);
    close(out);
}

static void process_setup(struct hc_run *run)
{
    const char *source = strncmp(run->mode, "static", 6) == 0 ? hc_sibling_exe("doexec-static")
                                                              : hc_sibling_exe("doexec");
    int copies = is_private(run->mode) ? run->workers : 1;
    for (int i = 0; i < copies; i++) {
        char path[4200];
        image_path(run, i, path, sizeof path);
        copy_executable(source, path);
    }
}

static void worker(struct hc_worker *w)
{
    /* Each image that arrives here is one completed exec. */
    if (w->reentered)
        hc_count(w);
    if (!hc_running(w))
        return;
    char path[4200];
    image_path(w->run, w->index, path, sizeof path);
    hc_reexec(w, path);
}

static const char *const modes[] = {"static-private", "static-shared", "dynamic-private",
                                    "dynamic-shared", NULL};

const struct hc_benchmark hc_benchmark = {
    .name = "doexec",
    .description = "each worker process exec()s itself in a loop (static/dynamic x private/shared binary)",
    .modes = modes,
    .kind = HC_PROCESSES_ONLY,
    .process_setup = process_setup,
    .worker = worker,
};
