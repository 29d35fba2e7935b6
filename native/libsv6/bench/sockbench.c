/*
 * sv6-sockbench (sv6's sockbench) on libsv6: each worker is a client and a server of
 * its own pair: as the client it sends a 1-byte request to the one socket all servers
 * receive from and waits for the 1-byte reply on its own socket; as the server it takes
 * one request and answers its sender. Modes: the shared socket is
 *   ordered    one queue: every send and receive takes its lock
 *   unordered  per-core queues: a request waits on its client's core, where that core's
 *              server takes it
 *   unordered-capacity  the same, the socket bounded to REQUEST_CAPACITY datagrams: a
 *              send takes a place in its core's share of the capacity (each worker has
 *              one request out, so no partition fills and no send spills)
 * Workers are threads of one libsv6 process; with --processes each is a process of its
 * own with a copy of the world made before the fork, sharing no memory: the control
 * (catalog: sv6-sockbench-private).
 */
#include "arena.h"
#include "harness.h"
#include "sv6/core.h"
#include "sv6/sv6.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const modes[] = {"ordered", "unordered", "unordered-capacity", NULL};

/* One place per core's partition (SV6_NCORES): the least capacity that gives every
 * partition a share. */
#define REQUEST_CAPACITY SV6_NCORES

struct sock_run {
    struct sv6_world *world;
    struct sv6_proc *proc;
    int request;
    int reply[HC_MAX_WORKERS];
};

static void process_setup(struct hc_run *run)
{
    arena_keep_freed();
    struct sock_run *s = calloc(1, sizeof *s);
    if (!s)
        hc_fail("out of memory");
    bool unordered = strncmp(run->mode, "unordered", strlen("unordered")) == 0;
    s->world = sv6_world_create(SV6_WORLD_SELF_TICK);
    s->proc = sv6_proc_create(s->world);
    s->request = sv6_socket(s->proc, unordered, SV6_O_ANYFD);
    for (int i = 0; i < run->workers; i++)
        s->reply[i] = sv6_socket(s->proc, unordered, SV6_O_ANYFD);
    if (s->request < 0)
        hc_fail("socket: %d", s->request);
    if (strcmp(run->mode, "unordered-capacity") == 0 &&
        sv6_socket_capacity(s->proc, s->request, REQUEST_CAPACITY) < 0)
        hc_fail("socket capacity");
    run->data = s;
}

/* As a server: answers one waiting request, if there is one. */
static void serve_one(struct sock_run *s)
{
    unsigned char client;
    ssize_t n = sv6_recv(s->proc, s->request, &client, 1);
    if (n != 1 && n != -EAGAIN)
        hc_fail("recv request: %zd", n);
    if (n == 1 && sv6_send(s->proc, s->reply[client], &client, 1) != 1)
        hc_fail("send reply");
}

/* As a client: one request, then serving requests until its reply is in (a worker that
 * only waited would stall whenever the request it needs answered waits for a worker the
 * host did not run); 0 once the run is over. */
static int round_trip(struct hc_worker *w, struct sock_run *s)
{
    unsigned char me = (unsigned char)w->index, answer;
    if (sv6_send(s->proc, s->request, &me, 1) != 1)
        hc_fail("send request");
    for (;;) {
        serve_one(s);
        ssize_t n = sv6_recv(s->proc, s->reply[w->index], &answer, 1);
        if (n == 1)
            return 1;
        if (n != -EAGAIN)
            hc_fail("recv reply: %zd", n);
        if (!hc_running(w))
            return 0;
    }
}

static void worker(struct hc_worker *w)
{
    struct sock_run *s = w->run->data;
    sv6_core_set((unsigned)w->index);
    while (hc_running(w) && round_trip(w, s))
        hc_count(w);
}

static void process_teardown(struct hc_run *run)
{
    struct sock_run *s = run->data;
    sv6_proc_destroy(s->proc);
    sv6_world_destroy(s->world);
    free(s);
}

const struct hc_benchmark hc_benchmark = {
    .name = "sv6-sockbench",
    .description = "libsv6: each worker a client and a server: 1-byte request over one shared socket, ordered or unordered, 1-byte reply",
    .modes = modes,
    .kind = HC_THREADS_OR_PROCESSES,
    .process_setup = process_setup,
    .worker_setup = worker_ready,
    .worker = worker,
    .process_teardown = process_teardown,
};
