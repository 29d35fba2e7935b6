/*
 * procbench (lmbench lat_proc with -P parallelism): each worker repeatedly
 *   fork-exit  forks a child that exits at once,
 *   fork-exec  forks a child that execs a program that exits,
 *   fork-sh    forks a child that runs /bin/sh -c <that program>,
 * and waits for it.  extra.microseconds_per_op is lmbench's per-worker latency.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "spawn.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *helper_path;

static void process_setup(struct hc_run *run)
{
    (void)run;
    helper_path = hc_sibling_exe("proc-exit-helper");
    if (access("/bin/sh", X_OK) != 0)
        hc_fail("/bin/sh: %s", strerror(errno));
}

static pid_t start_child(const char *mode)
{
    if (strcmp(mode, "fork-exit") == 0) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        return pid;
    }
    if (strcmp(mode, "fork-exec") == 0) {
        char *argv[] = {(char *)helper_path, NULL};
        return spawn_program(SPAWN_FORK_EXEC, helper_path, argv, -1);
    }
    char *argv[] = {"sh", "-c", (char *)helper_path, NULL};
    return spawn_program(SPAWN_FORK_EXEC, "/bin/sh", argv, -1);
}

static void worker(struct hc_worker *w)
{
    char why[256];
    while (hc_running(w)) {
        pid_t pid = start_child(w->run->mode);
        if (pid < 0)
            hc_fail("fork: %s", strerror(errno));
        if (wait_program(pid, w->run->mode, why, sizeof why) != 0)
            hc_fail("%s", why);
        hc_count(w);
    }
}

static void report(struct hc_run *run)
{
    double ops_per_sec = hc_measured_ops(run) / hc_measured_seconds(run);
    hc_extra_number(run, "microseconds_per_op", run->workers / ops_per_sec * 1e6);
}

static const char *const modes[] = {"fork-exit", "fork-exec", "fork-sh", NULL};

const struct hc_benchmark hc_benchmark = {
    .name = "procbench",
    .description = "lmbench-style process creation: fork+exit, fork+exec, fork+/bin/sh -c",
    .modes = modes,
    .default_processes = true,
    .process_setup = process_setup,
    .worker = worker,
    .report = report,
};
