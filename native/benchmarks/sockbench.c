/*
 * sockbench (sv6's sockbench) on Linux: each worker is a client and a server of its own
 * pair: as the client it sends a 1-byte request and waits for the 1-byte reply on its
 * own reply socket; as the server it takes one request and answers its sender. Workers
 * are threads of one process. Modes, by where requests wait:
 *   dgram-shared   one AF_UNIX datagram socket all servers receive from (a server may
 *                  answer another worker's request: each request names its client)
 *   dgram          one datagram socket per pair
 *   stream         one AF_UNIX stream socket pair per pair
 * Receives never block: a worker waiting for its reply serves requests meanwhile, so
 * that the run ends, and goes on, however requests were interleaved.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const modes[] = {"dgram-shared", "dgram", "stream", NULL};

struct sock_run {
    int shared;
    int request[HC_MAX_WORKERS][2]; /* [0] servers receive, [1] clients send */
    int reply[HC_MAX_WORKERS][2];   /* [0] the client receives, [1] servers send */
};

static void pair(int type, int fds[2])
{
    if (socketpair(AF_UNIX, type | SOCK_NONBLOCK, 0, fds) < 0)
        hc_fail("socketpair: %s", strerror(errno));
}

static void process_setup(struct hc_run *run)
{
    struct sock_run *s = calloc(1, sizeof *s);
    if (!s)
        hc_fail("out of memory");
    s->shared = strcmp(run->mode, "dgram-shared") == 0;
    int type = strcmp(run->mode, "stream") == 0 ? SOCK_STREAM : SOCK_DGRAM;
    for (int i = 0; i < run->workers; i++) {
        if (i == 0 || !s->shared)
            pair(type, s->request[i]);
        else
            memcpy(s->request[i], s->request[0], sizeof s->request[i]);
        pair(SOCK_DGRAM, s->reply[i]);
    }
    run->data = s;
}

/* The extra sums: requests a server answered, its own client's and another worker's (with
 * dgram-shared, where each datagram's buffer was written and read, so which lines move). */
enum { SERVED_OWN, SERVED_OTHER };
static const char *const served[] = {"served_own", "served_other", NULL};

/* As a server: answers one waiting request, if there is one. */
static void serve_one(struct hc_worker *w, struct sock_run *s)
{
    unsigned char client;
    ssize_t n = recv(s->request[w->index][0], &client, 1, 0);
    if (n < 0 && errno != EAGAIN)
        hc_fail("recv request: %s", strerror(errno));
    if (n != 1)
        return;
    if (send(s->reply[client][1], &client, 1, 0) != 1)
        hc_fail("send reply: %s", strerror(errno));
    hc_add_extra(w, client == w->index ? SERVED_OWN : SERVED_OTHER, 1);
}

/* As a client: one request, then serving requests until its reply is in (a worker that
 * only waited would stall whenever the request it needs answered waits for a worker the
 * host did not run); 0 once the run is over. */
static int round_trip(struct hc_worker *w, struct sock_run *s)
{
    unsigned char me = (unsigned char)w->index, answer;
    if (send(s->request[w->index][1], &me, 1, 0) != 1)
        hc_fail("send request: %s", strerror(errno));
    for (;;) {
        serve_one(w, s);
        ssize_t n = recv(s->reply[w->index][0], &answer, 1, 0);
        if (n == 1)
            return 1;
        if (n < 0 && errno != EAGAIN)
            hc_fail("recv reply: %s", strerror(errno));
        if (!hc_running(w))
            return 0;
    }
}

static void worker(struct hc_worker *w)
{
    struct sock_run *s = w->run->data;
    while (hc_running(w) && round_trip(w, s))
        hc_count(w);
}

const struct hc_benchmark hc_benchmark = {
    .name = "sockbench",
    .description = "each worker a client and a server: 1-byte request, 1-byte reply over AF_UNIX sockets",
    .modes = modes,
    .kind = HC_THREADS_ONLY,
    .process_setup = process_setup,
    .worker = worker,
    .extra_sums = served,
};
