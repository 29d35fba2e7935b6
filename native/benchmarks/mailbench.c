/*
 * mailbench (sv6): a qmail-like mail server under N client workers that keep
 * spawning mail-enqueue and feeding it a message.  mail-enqueue spools the
 * message and notifies mail-qman over a Unix datagram socket; mail-qman's N
 * threads spawn mail-deliver, which writes into the client's Maildir.  The
 * headline is messages enqueued per second; extra reports how many reached a
 * Maildir.
 *
 * The mode is '+'-joined choices, one per API the sv6 paper swaps:
 *   fork-exec | posix-spawn             how clients and mail-qman start helpers
 *   lowest-fd | any-fd                  descriptor allocation (O_ANYFD)
 *   ordered-socket | unordered-socket   notification socket delivery order
 * e.g. "posix-spawn+any-fd+unordered-socket".  Unnamed choices take the first
 * (standard POSIX) value.  Linux has neither O_ANYFD nor unordered datagram
 * sockets, so those choices fail the run with the reason here.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "mail-common.h"
#include "spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *mail_program_name = "mailbench";

struct mail_setup {
    enum spawn_method method;
    const char *enqueue;
    char spool[4200], socket_path[4200], maildir[4200];
    char message[1024];
    pid_t qman;
};

static struct mail_setup mail;

static void parse_mode(const char *mode)
{
    char *choices = strdup(mode);
    mail.method = SPAWN_FORK_EXEC;
    for (char *choice = strtok(choices, "+"); choice; choice = strtok(NULL, "+")) {
        int method = spawn_method_from_name(choice);
        if (method >= 0)
            mail.method = method;
        else if (strcmp(choice, "any-fd") == 0)
            hc_fail("mode %s: any-fd needs O_ANYFD, which Linux does not have", mode);
        else if (strcmp(choice, "unordered-socket") == 0)
            hc_fail("mode %s: Linux has no unordered datagram socket", mode);
        else if (strcmp(choice, "lowest-fd") != 0 && strcmp(choice, "ordered-socket") != 0 &&
                 strcmp(choice, "default") != 0)
            hc_fail("mode %s: unknown choice %s (fork-exec, posix-spawn, lowest-fd, any-fd, "
                    "ordered-socket, unordered-socket)", mode, choice);
    }
    free(choices);
}

static void make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        hc_fail("mkdir %s: %s", path, strerror(errno));
}

static void make_dirs(const struct hc_run *run)
{
    char path[4300];
    make_dir(mail.spool);
    snprintf(path, sizeof path, "%s/mess", mail.spool);
    make_dir(path);
    snprintf(path, sizeof path, "%s/todo", mail.spool);
    make_dir(path);
    make_dir(mail.maildir);
    for (int i = 0; i < run->workers; i++) {
        static const char *const parts[] = {"", "/tmp", "/new", "/cur"};
        for (int p = 0; p < 4; p++) {
            snprintf(path, sizeof path, "%s/user%d%s", mail.maildir, i, parts[p]);
            make_dir(path);
        }
    }
}

static void start_queue_manager(const struct hc_run *run)
{
    const char *qman = hc_sibling_exe("mail-qman");
    char threads[16];
    snprintf(threads, sizeof threads, "%d", run->workers);
    char *argv[] = {(char *)qman, mail.spool, mail.socket_path, mail.maildir,
                    (char *)hc_sibling_exe("mail-deliver"), threads,
                    mail.method == SPAWN_POSIX_SPAWN ? "posix-spawn" : "fork-exec", NULL};
    mail.qman = spawn_program(SPAWN_FORK_EXEC, qman, argv, -1);
    if (mail.qman < 0)
        hc_fail("start mail-qman: %s", strerror(errno));
    /* Ready once its socket exists. */
    for (int waited_ms = 0; access(mail.socket_path, F_OK) != 0; waited_ms++) {
        int status;
        if (waitpid(mail.qman, &status, WNOHANG) == mail.qman) {
            mail.qman = 0;
            hc_fail("mail-qman exited during startup");
        }
        if (waited_ms > 10000)
            hc_fail("mail-qman did not create %s within 10 s", mail.socket_path);
        usleep(1000);
    }
}

static void process_setup(struct hc_run *run)
{
    parse_mode(run->mode);
    mail.enqueue = hc_sibling_exe("mail-enqueue");
    snprintf(mail.spool, sizeof mail.spool, "%s/spool", run->workdir);
    snprintf(mail.socket_path, sizeof mail.socket_path, "%s/qman.sock", run->workdir);
    snprintf(mail.maildir, sizeof mail.maildir, "%s/mail", run->workdir);
    for (size_t i = 0; i + 1 < sizeof mail.message; i++)
        mail.message[i] = i % 64 == 63 ? '\n' : 'a' + i % 26;
    make_dirs(run);
    start_queue_manager(run);
}

static void worker(struct hc_worker *w)
{
    char mailbox[32], why[256];
    snprintf(mailbox, sizeof mailbox, "user%d", w->index);
    char *argv[] = {(char *)mail.enqueue, mail.spool, mail.socket_path, mailbox, NULL};
    while (hc_running(w)) {
        int pipe_fds[2];
        if (pipe2(pipe_fds, O_CLOEXEC) != 0)
            hc_fail("pipe: %s", strerror(errno));
        pid_t pid = spawn_program(mail.method, mail.enqueue, argv, pipe_fds[0]);
        if (pid < 0)
            hc_fail("spawn mail-enqueue: %s", strerror(errno));
        close(pipe_fds[0]);
        mail_write_all(pipe_fds[1], mail.message, strlen(mail.message), "message to mail-enqueue");
        close(pipe_fds[1]);
        if (wait_program(pid, "mail-enqueue", why, sizeof why) != 0)
            hc_fail("%s", why);
        hc_count(w);
    }
}

static int count_entries(const char *path)
{
    DIR *dir = opendir(path);
    int n = 0;
    for (struct dirent *e; dir && (e = readdir(dir));)
        n += e->d_name[0] != '.';
    if (dir)
        closedir(dir);
    return n;
}

static void stop_queue_manager(void)
{
    if (mail.qman > 0) {
        kill(mail.qman, SIGTERM);
        waitpid(mail.qman, NULL, 0);
        mail.qman = 0;
    }
}

static void report(struct hc_run *run)
{
    stop_queue_manager();
    int delivered = 0;
    char path[4300];
    for (int i = 0; i < run->workers; i++) {
        snprintf(path, sizeof path, "%s/user%d/new", mail.maildir, i);
        delivered += count_entries(path);
    }
    snprintf(path, sizeof path, "%s/todo", mail.spool);
    hc_extra_number(run, "delivered_whole_run", delivered);
    hc_extra_number(run, "left_in_queue", count_entries(path));
    hc_extra_string(run, "spawn", mail.method == SPAWN_POSIX_SPAWN ? "posix_spawn" : "fork+exec");
}

static void process_teardown(struct hc_run *run)
{
    (void)run;
    stop_queue_manager();
}

const struct hc_benchmark hc_benchmark = {
    .name = "mailbench",
    .description = "qmail-like pipeline (mail-enqueue -> mail-qman -> mail-deliver); modes "
                   "fork-exec|posix-spawn[+lowest-fd|any-fd][+ordered-socket|unordered-socket]",
    .process_setup = process_setup,
    .worker = worker,
    .report = report,
    .process_teardown = process_teardown,
};
