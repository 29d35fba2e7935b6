/*
 * check.h - what the sv6_check programs share: arguments, failing with one
 * line, a per-thread random generator and a timed thread runner.
 */
#ifndef SV6_CHECK_H
#define SV6_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct check_args {
    unsigned threads;
    double seconds;
    unsigned long ops;
    uint64_t seed;
};

/* A failed check: one line on stderr, exit 1. */
#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

static inline uint64_t check_random(uint64_t *state)
{
    /* xorshift64*: fast, deterministic per seed, good enough for test mixes */
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 2685821657736338717ull;
}

static inline unsigned check_below(uint64_t *state, unsigned n)
{
    return (unsigned)(check_random(state) % n);
}

/* Runs body(index, arg) on `threads` threads; each thread i gets core slot i
 * and should loop until check_stop() is true (set after `seconds`). */
void check_run_threads(unsigned threads, double seconds, void (*body)(unsigned index, void *arg),
                       void *arg);
bool check_stop(void);

int check_alloc_unit(const struct check_args *args);
int check_alloc_stress(const struct check_args *args);
int check_ebr_stall(const struct check_args *args);
int check_refcache_unit(const struct check_args *args);
int check_refcache_stress(const struct check_args *args);
int check_fdtable_unit(const struct check_args *args);
int check_fdtable_stress(const struct check_args *args);
int check_dir_unit(const struct check_args *args);
int check_dir_stress(const struct check_args *args);
int check_radix_unit(const struct check_args *args);
int check_radix_stress(const struct check_args *args);
int check_usock_unit(const struct check_args *args);
int check_usock_stress(const struct check_args *args);
int check_usock_two_senders(const struct check_args *args);
int check_posix_unit(const struct check_args *args);
int check_posix_stress(const struct check_args *args);
int check_conformance(const struct check_args *args);
int check_leak_on_purpose(const struct check_args *args);

#endif
