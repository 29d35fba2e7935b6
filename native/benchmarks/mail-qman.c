/* mail-qman SPOOL SOCKET MAILDIR DELIVER THREADS fork-exec|posix-spawn
 * The queue manager: THREADS threads each receive a message ID from the
 * datagram socket, read its envelope, spawn DELIVER with the message on stdin,
 * wait for it, and remove the message from the spool.  Runs until SIGTERM (or
 * until its parent dies); then it finishes the deliveries under way and exits, so
 * no mail-deliver outlives it. */
#define _GNU_SOURCE
#include "mail-common.h"
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

const char *mail_program_name = "mail-qman";

static const char *spool, *maildir, *deliver;
static enum spawn_method method;
static int sock;

/* Deliveries under way, so SIGTERM can wait for them. */
static pthread_mutex_t delivery_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t delivery_done = PTHREAD_COND_INITIALIZER;
static int deliveries_under_way;
static bool stopping;

static void deliver_one(const char *id)
{
    char path[4200], why[256];
    snprintf(path, sizeof path, "%s/todo/%s", spool, id);
    int envelope_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (envelope_fd < 0)
        mail_fail("open envelope %s: %s", path, strerror(errno));
    size_t length;
    char *mailbox = mail_read_all(envelope_fd, &length);
    close(envelope_fd);

    snprintf(path, sizeof path, "%s/mess/%s", spool, id);
    int message_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (message_fd < 0)
        mail_fail("open message %s: %s", path, strerror(errno));
    char *argv[] = {(char *)deliver, (char *)maildir, mailbox, NULL};
    pid_t pid = spawn_program(method, deliver, argv, message_fd);
    if (pid < 0)
        mail_fail("spawn %s: %s", deliver, strerror(errno));
    if (wait_program(pid, "mail-deliver", why, sizeof why) != 0)
        mail_fail("%s", why);
    close(message_fd);
    free(mailbox);
    if (unlink(path) != 0)
        mail_fail("unlink %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/todo/%s", spool, id);
    if (unlink(path) != 0)
        mail_fail("unlink %s: %s", path, strerror(errno));
}

static void *queue_thread(void *arg)
{
    (void)arg;
    char id[MAIL_ID_MAX];
    for (;;) {
        ssize_t n = recv(sock, id, sizeof id - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            mail_fail("recv: %s", strerror(errno));
        id[n] = '\0';
        pthread_mutex_lock(&delivery_lock);
        bool stop = stopping;
        deliveries_under_way += !stop;
        pthread_mutex_unlock(&delivery_lock);
        if (stop)
            break;
        deliver_one(id);
        pthread_mutex_lock(&delivery_lock);
        deliveries_under_way--;
        pthread_cond_signal(&delivery_done);
        pthread_mutex_unlock(&delivery_lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 7)
        mail_fail("usage: mail-qman SPOOL SOCKET MAILDIR DELIVER THREADS fork-exec|posix-spawn");
    spool = argv[1];
    maildir = argv[3];
    deliver = argv[4];
    int threads = atoi(argv[5]);
    int m = spawn_method_from_name(argv[6]);
    if (threads < 1 || m < 0)
        mail_fail("bad THREADS %s or spawn method %s", argv[5], argv[6]);
    method = m;
    prctl(PR_SET_PDEATHSIG, SIGTERM);

    sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (sock < 0 || strlen(argv[2]) >= sizeof addr.sun_path)
        mail_fail("socket %s: %s", argv[2], sock < 0 ? strerror(errno) : "path too long");
    strcpy(addr.sun_path, argv[2]);
    unlink(argv[2]);
    if (bind(sock, (struct sockaddr *)&addr, sizeof addr) != 0)
        mail_fail("bind %s: %s", argv[2], strerror(errno));

    /* Only the main thread takes SIGTERM, so a delivery is never cut by the handler. */
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    for (int i = 0; i < threads; i++) {
        pthread_t thread;
        int err = pthread_create(&thread, NULL, queue_thread, NULL);
        if (err)
            mail_fail("pthread_create: %s", strerror(err));
    }
    int sig;
    sigwait(&term, &sig);
    pthread_mutex_lock(&delivery_lock);
    stopping = true;
    while (deliveries_under_way > 0)
        pthread_cond_wait(&delivery_done, &delivery_lock);
    /* Threads blocked in recv() end with the process. */
    _exit(0);
}
