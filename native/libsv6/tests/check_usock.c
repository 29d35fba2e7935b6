/* check_usock.c - datagram sockets: local delivery, stealing when the local
 * queue is empty, ordered mode's FIFO, a capacity split into per-partition
 * shares (a full partition spills, the socket full only when all are), two
 * senders into one socket with room sharing no line, and under threads: every
 * datagram received exactly once, receivers on cores without senders served by
 * stealing, a bounded socket holding exactly its capacity afterwards. */
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

/* Sends from `core` until the socket refuses: how many it took. */
static unsigned fill_from(struct usock *s, unsigned core)
{
    sv6_core_set(core);
    unsigned sent = 0;
    while (send_int(s, (int)sent) == sizeof(int))
        sent++;
    return sent;
}

/* A capacity of 40 over SV6_NCORES partitions: shares of 3 (the remainder's) and 2.
 * A sender fills its own partition first, then spills into the next ones; the
 * socket refuses only at 40, and takes one more after any receive. */
static void check_capacity_shares(void)
{
    static struct usock s;
    usock_init(&s, false);
    usock_set_capacity(&s, 40);
    sv6_core_set(5);
    for (int i = 0; i < 3; i++)
        CHECK(send_int(&s, i) == sizeof(int), "send %d into partition 5's room", i);
    for (unsigned c = 0; c < SV6_NCORES; c++)
        CHECK(atomic_load(&s.queues[c].length) == (c == 5 ? 3u : 0u),
              "a sender with room in its partition queued on partition %u", c);
    CHECK(send_int(&s, 3) == sizeof(int) && atomic_load(&s.queues[6].length) == 1,
          "a full partition spills into the next");
    CHECK(fill_from(&s, 9) == 36, "the socket takes exactly its capacity");
    for (unsigned c = 0; c < SV6_NCORES; c++)
        CHECK(atomic_load(&s.queues[c].length) == 40 / SV6_NCORES + (c < 40 % SV6_NCORES),
              "partition %u not at its share when the socket is full", c);
    sv6_core_set(0);
    CHECK(recv_int(&s) >= 0, "receive from a full socket");
    CHECK(fill_from(&s, 12) == 1, "one place again after a receive, wherever it was");
    usock_destroy(&s);

    usock_init(&s, true);
    usock_set_capacity(&s, 2);
    CHECK(fill_from(&s, 3) == 2 && fill_from(&s, 4) == 0, "ordered socket of capacity 2");
    usock_destroy(&s);
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
    check_capacity_shares();
    printf("ok, usock unit checks passed\n");
    return 0;
}

enum { MAX_SENT = 1 << 20 };

struct usock_stress {
    struct usock sock;
    bool ordered;
    size_t capacity; /* 0: unbounded; else a sender meeting a full socket tries again */
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
            unsigned msg[2] = {index / 2, seq};
            ssize_t n = usock_send(&s->sock, msg, sizeof msg);
            if (n == -EAGAIN && s->capacity)
                continue;
            CHECK(n == sizeof msg, "send: %zd", n);
            atomic_store(&s->sent[index / 2], ++seq);
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
    /* Unordered, ordered, and unordered with a capacity below the partitions' count,
     * so that senders spill and meet a full socket. */
    for (int mode = 0; mode < 3; mode++) {
        bool ordered = mode == 1;
        struct usock_stress *s = aligned_alloc(SV6_PLACEMENT, sizeof *s);
        CHECK(s, "out of memory");
        memset(s, 0, sizeof *s);
        usock_init(&s->sock, ordered);
        s->ordered = ordered;
        s->capacity = mode == 2 ? 5 : 0;
        usock_set_capacity(&s->sock, s->capacity);
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
        if (s->capacity)
            CHECK(fill_from(&s->sock, 0) == s->capacity,
                  "the emptied socket does not take exactly its capacity");
        total_taken += sent;
        steals += atomic_load(&s->sock.steals);
        usock_destroy(&s->sock);
        free(s->received);
        free(s);
    }
    printf("ok, %lu datagrams each received once, %lu by stealing\n", total_taken, steals);
    return 0;
}

/* Which lines of a socket differ between two copies of it. */
enum { USOCK_LINES = sizeof(struct usock) / SV6_CACHELINE };

static void lines_written(const struct usock *before, const struct usock *after,
                          bool written[USOCK_LINES])
{
    for (size_t l = 0; l < USOCK_LINES; l++)
        written[l] = memcmp((const char *)before + l * SV6_CACHELINE,
                            (const char *)after + l * SV6_CACHELINE, SV6_CACHELINE) != 0;
}

/* The partition holding datagrams sent on `core` (the socket held none before). */
static unsigned partition_of_send(struct usock *s, unsigned core)
{
    for (unsigned c = 0; c < SV6_NCORES; c++)
        if (atomic_load(&s->queues[c].length))
            return c;
    CHECK(false, "the send on core %u queued nowhere", core);
    return SV6_NCORES;
}

/* One send on `core` while every partition in `fenced` is overwritten with a
 * pattern: a read of its length would find it full (or the sum of all lengths
 * overflowing), of its lock held, of its queue a wild pointer; a write would
 * change the pattern.  Afterwards the fenced partitions are put back as they were. */
static void send_fenced(struct usock *s, unsigned core, const bool fenced[SV6_NCORES])
{
    static struct usock saved;
    memcpy(&saved, s, sizeof saved);
    for (unsigned c = 0; c < SV6_NCORES; c++)
        if (fenced[c])
            memset(&s->queues[c], 0xff, sizeof s->queues[c]);
    sv6_core_set(core);
    CHECK(send_int(s, (int)core) == sizeof(int), "send on core %u into a socket with room", core);
    unsigned char expected[sizeof s->queues[0]];
    memset(expected, 0xff, sizeof expected);
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        if (!fenced[c])
            continue;
        CHECK(memcmp(&s->queues[c], expected, sizeof expected) == 0,
              "the send on core %u wrote partition %u", core, c);
        memcpy(&s->queues[c], &saved.queues[c], sizeof s->queues[c]);
    }
}

/* The tracer's case: sends on cores 1 and 2 into one empty unordered socket with
 * room.  The first reads and writes nothing outside its own partition; the second
 * nothing of the first's partition; the lines each writes are the other's by no
 * line; both datagrams are there. */
static void check_two_sends(size_t capacity)
{
    static struct usock s, before, after_one, after_two;
    usock_init(&s, false);
    usock_set_capacity(&s, capacity);
    memcpy(&before, &s, sizeof s);
    bool fenced[SV6_NCORES];
    for (unsigned c = 0; c < SV6_NCORES; c++)
        fenced[c] = c != 1;
    send_fenced(&s, 1, fenced);
    CHECK(partition_of_send(&s, 1) == 1, "capacity %zu: core 1 did not queue at home", capacity);
    memcpy(&after_one, &s, sizeof s);
    for (unsigned c = 0; c < SV6_NCORES; c++)
        fenced[c] = c == 1;
    send_fenced(&s, 2, fenced);
    memcpy(&after_two, &s, sizeof s);
    static bool one[USOCK_LINES], two[USOCK_LINES];
    lines_written(&before, &after_one, one);
    lines_written(&after_one, &after_two, two);
    for (size_t l = 0; l < USOCK_LINES; l++)
        CHECK(!(one[l] && two[l]), "capacity %zu: socket line %zu written by both sends",
              capacity, l);
    sv6_core_set(0);
    int a = recv_int(&s), b = recv_int(&s);
    CHECK(a + b == 3 && recv_int(&s) == -EAGAIN, "capacity %zu: received %d and %d", capacity,
          a, b);
    usock_destroy(&s);
}

enum { SEND_ROUNDS = 2000 };

/* Threads on cores 1 and 2 (core 0's idles) each send one datagram into each of SEND_ROUNDS sockets of
 * the model's capacity 2, at the same moments: every send succeeds. */
static void two_senders_body(unsigned index, void *arg)
{
    struct usock *socks = arg;
    for (unsigned r = 0; index && r < SEND_ROUNDS; r++)
        CHECK(send_int(&socks[r], (int)index) == sizeof(int),
              "round %u: the send on core %u refused", r, index);
}

int check_usock_two_senders(const struct check_args *args)
{
    (void)args;
    check_two_sends(2);
    check_two_sends(2 * SV6_NCORES);
    check_two_sends(0);
    struct usock *socks = aligned_alloc(SV6_PLACEMENT, SEND_ROUNDS * sizeof *socks);
    CHECK(socks, "out of memory");
    for (unsigned r = 0; r < SEND_ROUNDS; r++) {
        usock_init(&socks[r], false);
        usock_set_capacity(&socks[r], 2);
    }
    check_run_threads(3, 0, two_senders_body, socks);
    sv6_core_set(0);
    for (unsigned r = 0; r < SEND_ROUNDS; r++) {
        int a = recv_int(&socks[r]), b = recv_int(&socks[r]);
        CHECK(a + b == 3 && recv_int(&socks[r]) == -EAGAIN, "round %u: received %d, %d", r, a,
              b);
        usock_destroy(&socks[r]);
    }
    free(socks);
    printf("ok, two senders into one socket with room share no line (%u rounds)\n", SEND_ROUNDS);
    return 0;
}
