/* usock.c - per-core datagram queues with stealing (see usock.h). */
#include "sv6/usock.h"

#include "sv6/alloc.h"

#include <errno.h>
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

/* Whether the queues hold the socket's capacity (an ordered socket has one queue). */
static bool full(struct usock *s)
{
    if (!s->capacity)
        return false;
    size_t held = 0;
    for (unsigned c = 0; c < (s->ordered ? 1u : SV6_NCORES); c++)
        held += atomic_load(&s->queues[c].length);
    return held >= s->capacity;
}

static unsigned home_queue(const struct usock *s)
{
    return s->ordered ? 0 : sv6_core();
}

ssize_t usock_send(struct usock *s, const void *buf, size_t n)
{
    if (n > USOCK_MAX_DATAGRAM)
        return -EMSGSIZE;
    if (full(s))
        return -EAGAIN;
    struct usock_msg *m = sv6_alloc_lines(sizeof *m + n);
    m->next = NULL;
    m->length = n;
    memcpy(m->data, buf, n);
    struct usock_queue *q = &s->queues[home_queue(s)];
    sv6_lock(&q->lock);
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    atomic_fetch_add(&q->length, 1);
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
