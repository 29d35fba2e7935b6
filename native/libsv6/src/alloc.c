/* alloc.c - each thread's lists of freed line blocks (see alloc.h). */
#include "sv6/alloc.h"

#include <malloc.h>
#include <pthread.h>
#include <stdio.h>

/* How the allocator tells a tracer (scalecheck's user-space harness, or any tool that
 * defines them) that a block changed hands without malloc or free seeing it, as
 * Valgrind's MALLOCLIKE_BLOCK and FREELIKE_BLOCK requests: weak, so outside such a tool
 * both are NULL and never called. Declared here so that libsv6 builds on its own; the
 * harness's side is tracer/include/scalecheck_alloc.h. */
extern void scalecheck_malloclike(void *addr, size_t size, void *site) __attribute__((weak));
extern void scalecheck_freelike(void *addr) __attribute__((weak));

/* AddressSanitizer sees every block's lifetime only if none is kept. */
#if defined(__SANITIZE_ADDRESS__)
#define KEEPING false
#else
#define KEEPING true
#endif

/* A kept block's first word links it to the next one of its list. */
struct kept {
    struct kept *next;
};

struct kept_list {
    struct kept *newest;
    size_t count;
};

struct thread_lists {
    struct kept_list by_lines[SV6_LINES_KEPT_MAX + 1];
    bool registered; /* with exit_key: the lists go back to malloc at exit */
};

static _Thread_local struct thread_lists mine;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;

static void give_back(void *unused)
{
    (void)unused;
    for (size_t lines = 1; lines <= SV6_LINES_KEPT_MAX; lines++) {
        struct kept_list *list = &mine.by_lines[lines];
        while (list->newest) {
            struct kept *block = list->newest;
            list->newest = block->next;
            free(block);
        }
        list->count = 0;
    }
    mine.registered = false;
}

static void setup(void)
{
    if (pthread_key_create(&exit_key, give_back) != 0)
        abort();
}

static size_t list_limit(size_t lines)
{
    size_t blocks = SV6_LINES_KEPT_BYTES / (lines * SV6_PLACEMENT);
    return blocks < 16 ? 16 : blocks;
}

/* Not inlined: its return address is in the function that asked (the site the
 * harness names the block by). */
__attribute__((noinline)) void *sv6_lines_take(size_t lines)
{
    if (lines > SV6_LINES_KEPT_MAX)
        return NULL;
    struct kept_list *list = &mine.by_lines[lines];
    struct kept *block = list->newest;
    if (!block)
        return NULL;
    list->newest = block->next;
    list->count--;
    if (scalecheck_malloclike)
        scalecheck_malloclike(block, lines * SV6_PLACEMENT, __builtin_return_address(0));
    return block;
}

__attribute__((noinline)) bool sv6_lines_keep(void *p, size_t lines)
{
    if (!KEEPING) {
        /* AddressSanitizer knows each block's size: a free that names another size
         * than its allocation's (elsewhere it would put the block on the list of
         * that size, to be handed out too small) stops here. */
        if (malloc_usable_size(p) != lines * SV6_PLACEMENT) {
            fprintf(stderr, "sv6_free_lines: a block of %zu bytes freed as %zu lines\n",
                    malloc_usable_size(p), lines);
            abort();
        }
        return false;
    }
    if (lines > SV6_LINES_KEPT_MAX)
        return false;
    struct kept_list *list = &mine.by_lines[lines];
    if (list->count >= list_limit(lines))
        return false;
    if (!mine.registered) {
        pthread_once(&setup_once, setup);
        /* Any non-NULL value: the destructor runs at the thread's exit. */
        if (pthread_setspecific(exit_key, &mine) != 0)
            return false;
        mine.registered = true;
    }
    if (scalecheck_freelike)
        scalecheck_freelike(p);
    struct kept *block = p;
    block->next = list->newest;
    list->newest = block;
    list->count++;
    return true;
}

size_t sv6_lines_kept(void)
{
    size_t blocks = 0;
    for (size_t lines = 1; lines <= SV6_LINES_KEPT_MAX; lines++)
        blocks += mine.by_lines[lines].count;
    return blocks;
}
