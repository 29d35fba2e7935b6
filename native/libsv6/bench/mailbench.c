/*
 * sv6-mailbench on libsv6: a qmail-like pipeline of libsv6 processes.  Each
 * worker is a thread of the one mail client and of the queue manager.  Each
 * client thread hands mail-enqueue a channel of its own, as sv6's client
 * threads do (each its own pipe for the message): its fd for the queue
 * manager's socket, in its core's partition (commutative) or the lowest free
 * one (regular).  Per message it spawns a mail-enqueue process that writes the
 * message and its envelope into the spool and notifies the queue manager over
 * a datagram socket; then, as queue manager, it receives a notification (its
 * own or another worker's), reads the envelope, spawns a mail-deliver process
 * with the message's fd, which writes the mail into the user's maildir (tmp
 * name, then rename to new), and removes the spool files; the user's reader
 * then removes the mail.  Counted: messages delivered.  Modes (sv6's two
 * configurations):
 *   regular       lowest fds, an ordered socket, fork-style spawn (every fd copied)
 *   commutative   O_ANYFD, an unordered socket, posix_spawn-style (only the fds needed)
 * The libsv6 processes run on the worker's thread.  With --processes each
 * worker is a process of its own with a copy of the world made before the
 * fork, so it delivers only its own messages: the control of the same code
 * sharing no memory (catalog: sv6-mailbench-private).
 */
#include "arena.h"
#include "harness.h"
#include "sv6/core.h"
#include "sv6/fdtable.h"
#include "sv6/sv6.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const modes[] = {"regular", "commutative", NULL};

enum { MESSAGE_BYTES = 256, CHILD_SOCKET = 3 };

struct mail_run {
    struct sv6_world *world;
    struct sv6_proc *client, *qman;
    int *client_socks; /* per worker: its fd of the queue manager's socket in the client */
    int qman_sock;
    bool commutative;
    int open_flags;
};

static void process_setup(struct hc_run *run)
{
    arena_keep_freed();
    struct mail_run *s = calloc(1, sizeof *s);
    if (!s)
        hc_fail("out of memory");
    s->commutative = strcmp(run->mode, "commutative") == 0;
    s->open_flags = s->commutative ? SV6_O_ANYFD : 0;
    s->world = sv6_world_create(SV6_WORLD_SELF_TICK);
    s->qman = sv6_proc_create(s->world);
    s->qman_sock = sv6_socket(s->qman, s->commutative, 0);
    if (s->qman_sock < 0 || sv6_spawn(s->qman, NULL, 0, &s->client) != 0)
        hc_fail("setup: socket %d", s->qman_sock);
    s->client_socks = calloc((size_t)run->workers, sizeof *s->client_socks);
    if (!s->client_socks)
        hc_fail("out of memory");
    for (int i = 0; i < run->workers; i++) {
        /* The first fd of worker i's core partition (O_ANYFD's numbering), or the
         * lowest one free. */
        int fd = s->commutative ? (i % SV6_NCORES + 1) << FDTABLE_PART_BITS : CHILD_SOCKET + i;
        if (sv6_fd_install(s->client, fd, s->qman, s->qman_sock) != 0)
            hc_fail("setup: client socket %d", fd);
        s->client_socks[i] = fd;
    }
    run->data = s;
}

static void must(long result, const char *what, const char *name)
{
    if (result < 0)
        hc_fail("%s %s: %ld", what, name, result);
}

static void write_file(struct mail_run *s, struct sv6_proc *p, const char *name, const void *data,
                       size_t n)
{
    int fd = sv6_open(p, name, O_CREAT | O_EXCL | s->open_flags);
    must(fd, "create", name);
    must(sv6_write(p, fd, data, n), "write", name);
    must(sv6_close(p, fd), "close", name);
}

/* A child of `parent` with `fd` at child_fd (posix_spawn-style), or with a copy
 * of every fd (fork-style, the regular mode). */
static struct sv6_proc *spawn(struct mail_run *s, struct sv6_proc *parent, int fd, int child_fd,
                              int *fd_in_child)
{
    struct sv6_proc *child;
    const struct sv6_spawn_fd pass[] = {{fd, child_fd}};
    int result = s->commutative ? sv6_spawn(parent, pass, 1, &child)
                                : sv6_spawn(parent, NULL, SV6_SPAWN_ALL, &child);
    must(result, "spawn", "child");
    *fd_in_child = s->commutative ? child_fd : fd;
    return child;
}

static void enqueue(struct mail_run *s, int client_sock, const char *id, int user,
                    const char *body)
{
    int sock;
    struct sv6_proc *e = spawn(s, s->client, client_sock, CHILD_SOCKET, &sock);
    char name[64], envelope[64];
    snprintf(name, sizeof name, "spool/mess.%s", id);
    write_file(s, e, name, body, MESSAGE_BYTES);
    snprintf(name, sizeof name, "spool/todo.%s", id);
    int n = snprintf(envelope, sizeof envelope, "user%d", user);
    write_file(s, e, name, envelope, (size_t)n);
    must(sv6_send(e, sock, id, strlen(id) + 1), "notify", id);
    sv6_proc_destroy(e);
}

static void deliver(struct mail_run *s, int message_fd, const char *id, const char *user)
{
    int in;
    struct sv6_proc *d = spawn(s, s->qman, message_fd, 0, &in);
    char body[MESSAGE_BYTES], tmp[64], final[64];
    must(sv6_pread(d, in, body, sizeof body, 0), "read message", id);
    snprintf(tmp, sizeof tmp, "mail/%s/tmp.%s", user, id);
    snprintf(final, sizeof final, "mail/%s/new.%s", user, id);
    write_file(s, d, tmp, body, sizeof body);
    must(sv6_rename(d, tmp, final), "rename", tmp);
    sv6_proc_destroy(d);
}

/* One notification: false when every queue was empty. */
static bool manage_one(struct mail_run *s)
{
    char id[32], name[64], user[16] = {0};
    if (sv6_recv(s->qman, s->qman_sock, id, sizeof id) == -EAGAIN)
        return false;
    snprintf(name, sizeof name, "spool/todo.%s", id);
    int todo = sv6_open(s->qman, name, s->open_flags);
    must(todo, "open", name);
    must(sv6_read(s->qman, todo, user, sizeof user - 1), "read", name);
    must(sv6_close(s->qman, todo), "close", name);
    snprintf(name, sizeof name, "spool/mess.%s", id);
    int message = sv6_open(s->qman, name, s->open_flags);
    must(message, "open", name);
    deliver(s, message, id, user);
    must(sv6_close(s->qman, message), "close", name);
    must(sv6_unlink(s->qman, name), "unlink", name);
    snprintf(name, sizeof name, "spool/todo.%s", id);
    must(sv6_unlink(s->qman, name), "unlink", name);
    /* The user reads the mail: keeps the maildir from growing without end. */
    snprintf(name, sizeof name, "mail/%s/new.%s", user, id);
    must(sv6_unlink(s->qman, name), "unlink", name);
    return true;
}

static void worker(struct hc_worker *w)
{
    struct mail_run *s = w->run->data;
    sv6_core_set((unsigned)w->index);
    char body[MESSAGE_BYTES], id[32];
    memset(body, 'm', sizeof body);
    for (unsigned long seq = 0; hc_running(w); seq++) {
        snprintf(id, sizeof id, "%d.%lu", w->index, seq);
        enqueue(s, s->client_socks[w->index], id, w->index % 4, body);
        while (!manage_one(s) && hc_running(w))
            ; /* another worker took ours: take the next one */
        hc_count(w);
    }
}

static void process_teardown(struct hc_run *run)
{
    struct mail_run *s = run->data;
    while (manage_one(s)) /* notifications left when the window closed */
        ;
    sv6_proc_destroy(s->client);
    free(s->client_socks);
    sv6_proc_destroy(s->qman);
    sv6_world_destroy(s->world);
    free(s);
}

const struct hc_benchmark hc_benchmark = {
    .name = "sv6-mailbench",
    .description = "libsv6: mail-enqueue -> queue manager -> mail-deliver processes per message",
    .modes = modes,
    .kind = HC_THREADS_OR_PROCESSES,
    .process_setup = process_setup,
    .worker_setup = worker_ready,
    .worker = worker,
    .process_teardown = process_teardown,
};
