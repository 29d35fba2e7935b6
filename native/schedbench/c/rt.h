/* The runtime a C benchmark runs on: our scheduler (rt_ours.c) or pthreads
 * (rt_pthreads.c). Benchmarks use only threads, yield and counting semaphores, so the
 * same source measures both. */
#ifndef SCHEDBENCH_RT_H
#define SCHEDBENCH_RT_H

#include <stdio.h>

typedef struct rt_thread rt_thread;
typedef struct rt_sem rt_sem;

extern const char *const rt_name;

void rt_init(int procs);
void rt_fini(void);
rt_thread *rt_spawn(void (*fn)(void *), void *arg);
void rt_join(rt_thread *t);
void rt_yield(void);
rt_sem *rt_sem_new(void); /* count 0; lives until the process exits */
void rt_sem_P(rt_sem *s);
void rt_sem_V(rt_sem *s);  /* callable from the benchmark's main thread too */
void rt_extra_json(FILE *out); /* runtime counters as ', "key": value' members */

#endif
