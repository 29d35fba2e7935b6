/*
 * epoch.h - epoch-based memory reclamation for the lock-free list.
 *
 * A participant announces the global epoch while it holds pointers into the
 * shared structure (epoch_enter .. epoch_exit).  A node unlinked from the
 * structure is retired with the global epoch of that moment, r.  The global
 * epoch only advances when every active participant has announced it, so a
 * participant that could still reach the node keeps the global epoch at r+1
 * or below; the node is freed once the global epoch reaches r+2.
 */
#ifndef LDU_EPOCH_H
#define LDU_EPOCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Embedded as the first member of anything retired; freed with free(). */
struct retired {
    struct retired *next;
    uint64_t epoch;
};

struct epoch_slot {
    _Alignas(64) _Atomic uint64_t announced;   /* epoch << 1 | 1 while active, 0 when not */
    atomic_bool in_use;
};

struct epoch_domain {
    _Alignas(64) _Atomic uint64_t global;
    unsigned nslots;
    struct epoch_slot *slots;
    pthread_mutex_t orphans_lock;
    struct retired *orphans;   /* retired nodes left by participants that left */
};

struct epoch_participant {
    struct epoch_domain *domain;
    struct epoch_slot *slot;
    struct retired *retired;
    unsigned retired_since_reclaim;
};

bool epoch_domain_init(struct epoch_domain *domain, unsigned nslots);
/* No participant may be left; frees every retired node. */
void epoch_domain_fini(struct epoch_domain *domain);

/* false when all slots are taken */
bool epoch_join(struct epoch_domain *domain, struct epoch_participant *participant);
void epoch_leave(struct epoch_participant *participant);

void epoch_enter(struct epoch_participant *participant);
void epoch_exit(struct epoch_participant *participant);
void epoch_retire(struct epoch_participant *participant, struct retired *node);
/* Outside enter/exit: returns once every participant that was active at the
 * call has left that critical section (a grace period). */
void epoch_barrier(struct epoch_participant *participant);

#endif
