/*
 * usock.h - datagram sockets, unordered (per-core queues with load balancing)
 * or ordered (one queue).
 *
 * An unordered socket promises no order between datagrams, so a sender queues
 * on its own core's queue and a receiver takes from its own core's queue: with
 * both on every core, no two cores write a common line.  A receiver whose queue
 * is empty steals from the other cores' queues (load balancing; the original
 * sv6 compiled this out), so no datagram waits while a receiver is idle.  Each
 * queue's lock and length sit on their own line; the length lets a stealer skip
 * empty queues without touching their locks.
 *
 * Receive never blocks: -EAGAIN when every queue is empty.  A socket may be
 * given a capacity (the datagrams it holds at most; 0, the default, is none),
 * split into per-partition shares that add up to it: a sender takes a place in
 * its own core's partition while that has room, reading and writing no other
 * partition's line; only when its partition is full does it spill into the next
 * partitions in turn, passing full ones after a read of their length.  Send
 * fails with -EAGAIN only when every partition was full at one moment, so the
 * socket holds exactly up to its capacity (docs/libsv6-design.md).
 */
#ifndef SV6_USOCK_H
#define SV6_USOCK_H

#include "sv6/core.h"
#include "sv6/lock.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define USOCK_MAX_DATAGRAM 65536

struct usock_msg;

struct usock_queue {
    SV6_ALIGNED struct sv6_lock lock;
    _Atomic size_t length;       /* datagrams queued or being queued here */
    _Atomic unsigned long taken; /* datagrams ever taken from here */
    struct usock_msg *head, *tail;
};

struct usock {
    bool ordered;
    size_t capacity; /* 0: unbounded */
    struct usock_queue queues[SV6_NCORES]; /* ordered: only queues[0] */
    SV6_ALIGNED _Atomic unsigned long steals; /* datagrams taken from another core */
};

void usock_init(struct usock *s, bool ordered);
void usock_destroy(struct usock *s); /* frees datagrams never received */
void usock_set_capacity(struct usock *s, size_t capacity);

/* n bytes as one datagram: n, -EMSGSIZE, or -EAGAIN when the socket is full. */
ssize_t usock_send(struct usock *s, const void *buf, size_t n);
/* One datagram, truncated to n bytes: its length, or -EAGAIN. */
ssize_t usock_recv(struct usock *s, void *buf, size_t n);

#endif
