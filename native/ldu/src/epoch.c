/* epoch.c - epoch-based reclamation (see epoch.h for the argument). */
#include "epoch.h"

#include <sched.h>
#include <stdlib.h>

#include "objset_impl.h"

/* How many retirements a participant collects before it tries to free some. */
#define RECLAIM_EVERY 64

bool epoch_domain_init(struct epoch_domain *domain, unsigned nslots)
{
    domain->slots = alloc_aligned_zeroed(nslots * sizeof *domain->slots);
    if (!domain->slots)
        return false;
    domain->nslots = nslots;
    atomic_init(&domain->global, 2);   /* so that "epoch - 2" never wraps */
    pthread_mutex_init(&domain->orphans_lock, NULL);
    domain->orphans = NULL;
    return true;
}

static void free_list(struct retired *node)
{
    while (node) {
        struct retired *next = node->next;
        free(node);
        node = next;
    }
}

void epoch_domain_fini(struct epoch_domain *domain)
{
    free_list(domain->orphans);
    pthread_mutex_destroy(&domain->orphans_lock);
    free(domain->slots);
}

bool epoch_join(struct epoch_domain *domain, struct epoch_participant *participant)
{
    for (unsigned i = 0; i < domain->nslots; i++) {
        bool expected = false;
        if (atomic_compare_exchange_strong(&domain->slots[i].in_use, &expected, true)) {
            participant->domain = domain;
            participant->slot = &domain->slots[i];
            participant->retired = NULL;
            participant->retired_since_reclaim = 0;
            return true;
        }
    }
    return false;
}

void epoch_leave(struct epoch_participant *participant)
{
    struct epoch_domain *domain = participant->domain;
    if (participant->retired) {
        struct retired *last = participant->retired;
        while (last->next)
            last = last->next;
        pthread_mutex_lock(&domain->orphans_lock);
        last->next = domain->orphans;
        domain->orphans = participant->retired;
        pthread_mutex_unlock(&domain->orphans_lock);
        participant->retired = NULL;
    }
    atomic_store(&participant->slot->in_use, false);
}

void epoch_enter(struct epoch_participant *participant)
{
    struct epoch_domain *domain = participant->domain;
    uint64_t epoch = atomic_load(&domain->global);
    for (;;) {
        atomic_store(&participant->slot->announced, epoch << 1 | 1);
        /* Re-check after announcing: an announcement of an epoch that has
         * already moved on would hold the global epoch back. */
        uint64_t now = atomic_load(&domain->global);
        if (now == epoch)
            return;
        epoch = now;
    }
}

void epoch_exit(struct epoch_participant *participant)
{
    atomic_store_explicit(&participant->slot->announced, 0, memory_order_release);
}

static void try_advance(struct epoch_domain *domain)
{
    uint64_t epoch = atomic_load(&domain->global);
    for (unsigned i = 0; i < domain->nslots; i++) {
        uint64_t announced = atomic_load(&domain->slots[i].announced);
        if ((announced & 1) && announced >> 1 != epoch)
            return;
    }
    atomic_compare_exchange_strong(&domain->global, &epoch, epoch + 1);
}

/* Frees the nodes of *list retired two or more epochs before `epoch`, keeps the rest. */
static void free_old(struct retired **list, uint64_t epoch)
{
    while (*list) {
        struct retired *node = *list;
        if (node->epoch + 2 <= epoch) {
            *list = node->next;
            free(node);
        } else {
            list = &node->next;
        }
    }
}

void epoch_barrier(struct epoch_participant *participant)
{
    struct epoch_domain *domain = participant->domain;
    uint64_t target = atomic_load(&domain->global) + 2;
    while (atomic_load(&domain->global) < target) {
        try_advance(domain);
        sched_yield();
    }
}

void epoch_retire(struct epoch_participant *participant, struct retired *node)
{
    struct epoch_domain *domain = participant->domain;
    node->epoch = atomic_load(&domain->global);
    node->next = participant->retired;
    participant->retired = node;
    if (++participant->retired_since_reclaim < RECLAIM_EVERY)
        return;
    participant->retired_since_reclaim = 0;
    try_advance(domain);
    uint64_t epoch = atomic_load(&domain->global);
    free_old(&participant->retired, epoch);
    if (pthread_mutex_trylock(&domain->orphans_lock) == 0) {
        free_old(&domain->orphans, epoch);
        pthread_mutex_unlock(&domain->orphans_lock);
    }
}
