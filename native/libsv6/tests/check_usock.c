/* check_usock.c - datagram sockets: local delivery, stealing when the local
 * queue is empty, ordered mode's FIFO, and under threads: every datagram
 * received exactly once, receivers on cores without senders served by stealing. */
#include "check.h"

#include "sv6/usock.h"

#include <errno.h>
#include <stdalign.h>
#include <string.h>

_Static_assert(alignof(struct usock_queue) == SV6_PLACEMENT, "queue lock on its own line");

static ssize_t send_int(struct usock *s, int value)
{
    return usock_send(s, &value, sizeof value);
}

static int recv_int(struct usock *s)
{
    int value = -1;
    ssize_t n = usock_recv(s, &value, sizeof value);
    return n < 0 ? (int)n : value;
}

int check_usock_unit(const struct check_args *args)
{
    (void)args;
    static struct usock s;
    usock_init(&s, false);
    sv6_core_set(0);
    CHECK(recv_int(&s) == -EAGAIN, "empty socket");
    CHECK(send_int(&s, 10) == sizeof(int), "send");
    CHECK(recv_int(&s) == 10 && atomic_load(&s.steals) == 0, "local receive");
    sv6_core_set(1);
    send_int(&s, 11);
    sv6_core_set(2);
    CHECK(recv_int(&s) == 11, "stolen from core 1");
    CHECK(atomic_load(&s.steals) == 1, "steal counted");
    CHECK(recv_int(&s) == -EAGAIN, "empty again");
    char big[100] = "datagram", small[4];
    CHECK(usock_send(&s, big, sizeof big) == sizeof big, "send 100");
    CHECK(usock_recv(&s, small, sizeof small) == sizeof big, "a truncated datagram's length");
    CHECK(memcmp(small, "data", 4) == 0, "truncated contents");
    static char huge[USOCK_MAX_DATAGRAM + 1];
    CHECK(usock_send(&s, huge, sizeof huge) == -EMSGSIZE, "too large");
    send_int(&s, 12); /* left unreceived: destroy frees it */
    usock_destroy(&s);

    usock_init(&s, true);
    for (int i = 0; i < 10; i++) {
        sv6_core_set((unsigned)i);
        send_int(&s, i);
    }
    for (int i = 0; i < 10; i++) {
        sv6_core_set((unsigned)(9 - i));
        CHECK(recv_int(&s) == i, "ordered socket out of order at %d", i);
    }
    usock_destroy(&s);
    printf("ok, usock unit checks passed\n");
    return 0;
}

enum { MAX_SENT = 1 << 20 };

struct usock_stress {
    struct usock sock;
    bool ordered;
    unsigned senders;
    _Atomic unsigned char (*received)[MAX_SENT]; /* [sender][seq] */
    _Atomic unsigned sent[64];
    _Atomic unsigned long taken;
};

/* Even threads send, odd threads receive: receivers' own queues stay empty,
 * so they live off stealing. */
static void usock_body(unsigned index, void *arg)
{
    struct usock_stress *s = arg;
    int last[64];
    for (int i = 0; i < 64; i++)
        last[i] = -1;
    unsigned seq = 0;
    while (!check_stop()) {
        if (index % 2 == 0 && seq < MAX_SENT) {
            unsigned msg[2] = {index / 2, seq++};
            CHECK(usock_send(&s->sock, msg, sizeof msg) == sizeof msg, "send");
            atomic_store(&s->sent[index / 2], seq);
        } else if (index % 2 == 1 || seq >= MAX_SENT) {
            unsigned msg[2];
            if (usock_recv(&s->sock, msg, sizeof msg) != sizeof msg)
                continue;
            CHECK(msg[0] < s->senders && msg[1] < MAX_SENT, "garbage datagram");
            CHECK(atomic_fetch_add(&s->received[msg[0]][msg[1]], 1) == 0, "received twice");
            if (s->ordered) {
                CHECK((int)msg[1] > last[msg[0]], "ordered socket reordered a sender");
                last[msg[0]] = (int)msg[1];
            }
            atomic_fetch_add(&s->taken, 1);
        }
    }
}

int check_usock_stress(const struct check_args *args)
{
    CHECK(args->threads >= 2, "needs a sender and a receiver");
    unsigned long total_taken = 0, steals = 0;
    for (int ordered = 0; ordered <= 1; ordered++) {
        struct usock_stress *s = aligned_alloc(SV6_PLACEMENT, sizeof *s);
        CHECK(s, "out of memory");
        memset(s, 0, sizeof *s);
        usock_init(&s->sock, ordered);
        s->ordered = ordered;
        s->senders = (args->threads + 1) / 2;
        s->received = calloc(s->senders, sizeof *s->received);
        CHECK(s->received, "out of memory");
        check_run_threads(args->threads, args->seconds / 2, usock_body, s);
        /* Whatever is left: drain and account for it. */
        unsigned msg[2];
        while (usock_recv(&s->sock, msg, sizeof msg) == sizeof msg) {
            CHECK(atomic_fetch_add(&s->received[msg[0]][msg[1]], 1) == 0, "received twice");
            atomic_fetch_add(&s->taken, 1);
        }
        unsigned long sent = 0;
        for (unsigned i = 0; i < s->senders; i++) {
            unsigned n = atomic_load(&s->sent[i]);
            sent += n;
            for (unsigned q = 0; q < n; q++)
                CHECK(atomic_load(&s->received[i][q]) == 1, "datagram %u/%u lost", i, q);
        }
        CHECK(sent == atomic_load(&s->taken), "%lu sent, %lu received", sent,
              atomic_load(&s->taken));
        if (!ordered)
            CHECK(atomic_load(&s->sock.steals) > 0, "receivers never stole");
        total_taken += sent;
        steals += atomic_load(&s->sock.steals);
        usock_destroy(&s->sock);
        free(s->received);
        free(s);
    }
    printf("ok, %lu datagrams each received once, %lu by stealing\n", total_taken, steals);
    return 0;
}
