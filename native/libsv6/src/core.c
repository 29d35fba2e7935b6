/* core.c - per-thread core slots (see core.h). */
#include "sv6/core.h"

#include <stdatomic.h>

static _Thread_local int thread_core = -1;
static SV6_ALIGNED atomic_uint next_core;

unsigned sv6_core(void)
{
    if (thread_core < 0)
        thread_core = (int)(atomic_fetch_add(&next_core, 1) % SV6_NCORES);
    return (unsigned)thread_core;
}

void sv6_core_set(unsigned core)
{
    thread_core = (int)(core % SV6_NCORES);
}
