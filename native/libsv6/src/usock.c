/* usock.c - per-core datagram partitions with spilling and stealing (see usock.h). */
#include "sv6/usock.h"

#include "sv6/alloc.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct usock_msg {
    struct usock_msg *next;
    size_t length;
    unsigned char data[];
};

void usock_init(struct usock *s, bool ordered)
{
    s->ordered = ordered;
    s->capacity = 0;
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        sv6_lock_init(&s->queues[c].lock);
        atomic_init(&s->queues[c].length, 0);
        atomic_init(&s->queues[c].taken, 0);
        s->queues[c].head = s->queues[c].tail = NULL;
    }
    atomic_init(&s->steals, 0);
}

void usock_destroy(struct usock *s)
{
    for (unsigned c = 0; c < SV6_NCORES; c++) {
        struct usock_msg *m = s->queues[c].head;
        while (m) {
            struct usock_msg *next = m->next;
            sv6_free_lines(m, sizeof *m + m->length);
            m = next;
        }
    }
}

void usock_set_capacity(struct usock *s, size_t capacity)
{
    s->capacity = capacity;
}

static unsigned home_queue(const struct usock *s)
{
    return s->ordered ? 0 : sv6_core();
}

/* The partitions: one per core, or an ordered socket's one queue. */
static unsigned partitions(const struct usock *s)
{
    return s->ordered ? 1 : SV6_NCORES;
}

/* Partition p's share of the capacity: the capacity split evenly, the remainder to the
 * first partitions, so the shares add up to it exactly; unbounded without a capacity. */
static size_t share(const struct usock *s, unsigned p)
{
    if (!s->capacity)
        return SIZE_MAX;
    unsigned n = partitions(s);
    return s->capacity / n + (p < s->capacity % n);
}

/* A place for one datagram in partition p, if it holds less than its share.  A
 * partition without a share is passed over without reading its line. */
static bool reserve(struct usock *s, unsigned p)
{
    size_t limit = share(s, p);
    if (!limit)
        return false;
    _Atomic size_t *length = &s->queues[p].length;
    size_t held = atomic_load(length);
    while (held < limit)
        if (atomic_compare_exchange_weak(length, &held, held + 1))
            return true;
    return false;
}

/* Load balancing for a sender whose partition is full: the next partitions in turn,
 * starting after its own (as receivers steal), the first with room taking the
 * datagram.  A full partition's line is only read.  -1 when none had room. */
static int spill(struct usock *s, unsigned home)
{
    unsigned n = partitions(s);
    for (unsigned i = 1; i <= n; i++)
        if (reserve(s, (home + i) % n))
            return (int)((home + i) % n);
    return -1;
}

/* The datagrams ever taken from the partitions that have a share (only grows). */
static unsigned long taken_total(struct usock *s)
{
    unsigned long total = 0;
    for (unsigned p = 0; p < partitions(s); p++)
        if (share(s, p))
            total += atomic_load(&s->queues[p].taken);
    return total;
}

/* The partition that takes the datagram: the sender's own while it has room, else
 * another one with room; -1 only when every partition was full at one moment: a
 * round found none with room and no datagram was taken from any of them meanwhile
 * (a partition seen full stays full until a receive takes from it). */
static int place(struct usock *s)
{
    unsigned home = home_queue(s);
    if (reserve(s, home))
        return (int)home;
    for (;;) {
        int p = spill(s, home);
        if (p >= 0)
            return p;
        unsigned long taken = taken_total(s);
        p = spill(s, home);
        if (p >= 0 || taken_total(s) == taken)
            return p;
    }
}

ssize_t usock_send(struct usock *s, const void *buf, size_t n)
{
    if (n > USOCK_MAX_DATAGRAM)
        return -EMSGSIZE;
    int p = place(s);
    if (p < 0)
        return -EAGAIN;
    struct usock_msg *m = sv6_alloc_lines(sizeof *m + n);
    m->next = NULL;
    m->length = n;
    memcpy(m->data, buf, n);
    struct usock_queue *q = &s->queues[p];
    sv6_lock(&q->lock);
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    sv6_unlock(&q->lock);
    return (ssize_t)n;
}

static struct usock_msg *take(struct usock_queue *q)
{
    if (atomic_load(&q->length) == 0)
        return NULL;
    sv6_lock(&q->lock);
    struct usock_msg *m = q->head;
    if (m) {
        q->head = m->next;
        if (!q->head)
            q->tail = NULL;
        /* Counted before its place is freed: a sender that saw the partition full
         * and then sees the count unchanged knows it stayed full (place). */
        atomic_fetch_add(&q->taken, 1);
        atomic_fetch_sub(&q->length, 1);
    }
    sv6_unlock(&q->lock);
    return m;
}

ssize_t usock_recv(struct usock *s, void *buf, size_t n)
{
    unsigned home = home_queue(s);
    struct usock_msg *m = take(&s->queues[home]);
    /* Load balancing: the next cores' queues in turn, starting after ours so
     * that receivers on different cores do not all raid the same queue. */
    for (unsigned i = 1; !m && !s->ordered && i < SV6_NCORES; i++) {
        m = take(&s->queues[(home + i) % SV6_NCORES]);
        if (m)
            atomic_fetch_add(&s->steals, 1);
    }
    if (!m)
        return -EAGAIN;
    size_t length = m->length;
    memcpy(buf, m->data, length < n ? length : n);
    sv6_free_lines(m, sizeof *m + length);
    return (ssize_t)length;
}
