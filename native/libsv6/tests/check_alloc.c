/* check_alloc.c - line blocks: whole lines, a freed block handed out again to
 * its size on its thread (not beyond the list's limit, never one too large),
 * every kept block given back to malloc when its thread exits; under threads:
 * no block is ever held by two owners, also when blocks are freed by a thread
 * other than the one that allocated them. */
#include "check.h"

#include "sv6/alloc.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define KEEPS 0 /* AddressSanitizer sees every block's lifetime: nothing is kept */
#else
#define KEEPS 1
#endif

static void *kept_blocks_thread(void *arg)
{
    (void)arg;
    void *blocks[100];
    for (int i = 0; i < 100; i++)
        blocks[i] = sv6_alloc_lines(16 * SV6_PLACEMENT);
    for (int i = 0; i < 100; i++)
        sv6_free_lines(blocks[i], 16 * SV6_PLACEMENT);
    return (void *)(uintptr_t)sv6_lines_kept();
}

int check_alloc_unit(const struct check_args *args)
{
    (void)args;
    void *p = sv6_alloc_lines(SV6_PLACEMENT + 36); /* two units */
    CHECK((uintptr_t)p % SV6_PLACEMENT == 0, "not on a pair boundary: %p", p);
    size_t before = sv6_lines_kept();
    sv6_free_lines(p, SV6_PLACEMENT + 36);
    CHECK(sv6_lines_kept() == before + KEEPS, "kept %zu after one free", sv6_lines_kept());
    void *one_line = sv6_alloc_lines(SV6_PLACEMENT);
    CHECK(one_line != p || !KEEPS, "a 2-unit block handed out for 1 unit");
    void *again = sv6_alloc_lines(2 * SV6_PLACEMENT);
    CHECK(again == p || !KEEPS, "the kept 2-unit block not handed out again");
    CHECK(sv6_lines_kept() == before, "kept %zu, not %zu", sv6_lines_kept(), before);
    sv6_free_lines(one_line, SV6_PLACEMENT);
    sv6_free_lines(again, 2 * SV6_PLACEMENT);

    void *large = sv6_alloc_lines((SV6_LINES_KEPT_MAX + 1) * SV6_PLACEMENT);
    size_t kept = sv6_lines_kept();
    sv6_free_lines(large, (SV6_LINES_KEPT_MAX + 1) * SV6_PLACEMENT);
    CHECK(sv6_lines_kept() == kept, "a block above SV6_LINES_KEPT_MAX kept");

    /* A list stops at SV6_LINES_KEPT_BYTES. */
    enum { LINES = 8, MANY = SV6_LINES_KEPT_BYTES / (LINES * SV6_PLACEMENT) + 50 };
    static void *many[MANY];
    kept = sv6_lines_kept();
    for (int i = 0; i < MANY; i++)
        many[i] = sv6_alloc_lines(LINES * SV6_PLACEMENT);
    for (int i = 0; i < MANY; i++)
        sv6_free_lines(many[i], LINES * SV6_PLACEMENT);
    size_t limit = KEEPS * (SV6_LINES_KEPT_BYTES / (LINES * SV6_PLACEMENT));
    CHECK(sv6_lines_kept() <= kept + limit, "kept %zu > limit %zu", sv6_lines_kept() - kept, limit);

    /* What an exited thread kept goes back to malloc. */
    size_t used_before = mallinfo2().uordblks;
    pthread_t thread;
    void *thread_kept;
    CHECK(pthread_create(&thread, NULL, kept_blocks_thread, NULL) == 0, "pthread_create");
    CHECK(pthread_join(thread, &thread_kept) == 0, "pthread_join");
    CHECK((uintptr_t)thread_kept == KEEPS * 100, "the thread kept %zu", (size_t)(uintptr_t)thread_kept);
    size_t used_after = mallinfo2().uordblks;
    CHECK(used_after < used_before + 100 * 16 * SV6_PLACEMENT / 2,
          "%zu bytes still allocated after the thread's exit", used_after - used_before);
    if (!KEEPS) {
        /* A free that names another size than the allocation's stops the program. */
        fflush(NULL);
        pid_t child = fork();
        CHECK(child >= 0, "fork");
        if (child == 0) {
            freopen("/dev/null", "w", stderr);
            sv6_free_lines(sv6_alloc_lines(2 * SV6_PLACEMENT), SV6_PLACEMENT);
            _exit(0);
        }
        int status;
        CHECK(waitpid(child, &status, 0) == child, "waitpid");
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
              "a 2-line block freed as 1 line did not abort (status %#x)", status);
    }
    printf("ok, alloc unit checks passed (blocks kept: %s)\n",
           KEEPS ? "yes" : "no, AddressSanitizer, which checks each freed size");
    return 0;
}

/* Each thread holds up to HELD blocks, each filled with its owner's stamp;
 * a block is checked when freed, and half the frees go through a hand-over
 * slot to be freed by the next thread.  Two owners of one block would break
 * a stamp. */
enum { HELD = 64, HANDOVERS = 16 };

struct handed {
    void *_Atomic block;
    size_t size;
};

struct alloc_stress {
    struct handed slots[HANDOVERS];
    _Atomic unsigned long allocations, handed_over;
};

static void stamp(void *block, size_t size, uint64_t value)
{
    uint64_t *words = block;
    for (size_t i = 0; i < size / sizeof *words; i++)
        words[i] = value;
}

static void check_stamp(const void *block, size_t size, uint64_t value)
{
    const uint64_t *words = block;
    for (size_t i = 0; i < size / sizeof *words; i++)
        CHECK(words[i] == value, "block %p word %zu: %llx, not %llx", block, i,
              (unsigned long long)words[i], (unsigned long long)value);
}

static void alloc_stress_body(unsigned index, void *arg)
{
    struct alloc_stress *s = arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (index + 1);
    void *held[HELD] = {0};
    size_t sizes[HELD] = {0};
    uint64_t stamps[HELD] = {0};
    unsigned long allocations = 0, handed_over = 0;
    while (!check_stop()) {
        unsigned i = check_below(&rng, HELD);
        if (held[i]) {
            check_stamp(held[i], sizes[i], stamps[i]);
            struct handed *slot = &s->slots[check_below(&rng, HANDOVERS)];
            void *expected = NULL;
            /* The size travels with the block: whoever takes it frees it. */
            stamp(held[i], sizes[i], 0);
            if (check_below(&rng, 2) && atomic_compare_exchange_strong(&slot->block, &expected, (void *)1)) {
                slot->size = sizes[i];
                atomic_store(&slot->block, held[i]);
                handed_over++;
            } else {
                sv6_free_lines(held[i], sizes[i]);
            }
            held[i] = NULL;
        } else {
            sizes[i] = (1 + check_below(&rng, SV6_LINES_KEPT_MAX + 8)) * SV6_PLACEMENT;
            held[i] = sv6_alloc_lines(sizes[i]);
            stamps[i] = check_random(&rng) | 1;
            stamp(held[i], sizes[i], stamps[i]);
            allocations++;
        }
        struct handed *slot = &s->slots[check_below(&rng, HANDOVERS)];
        void *block = atomic_load(&slot->block);
        if (block && block != (void *)1 && atomic_compare_exchange_strong(&slot->block, &block, (void *)1)) {
            size_t size = slot->size;
            atomic_store(&slot->block, NULL);
            check_stamp(block, size, 0);
            sv6_free_lines(block, size);
        }
    }
    for (unsigned i = 0; i < HELD; i++)
        sv6_free_lines(held[i], sizes[i]);
    atomic_fetch_add(&s->allocations, allocations);
    atomic_fetch_add(&s->handed_over, handed_over);
}

int check_alloc_stress(const struct check_args *args)
{
    static struct alloc_stress s;
    check_run_threads(args->threads, args->seconds, alloc_stress_body, &s);
    for (unsigned i = 0; i < HANDOVERS; i++) {
        void *block = atomic_load(&s.slots[i].block);
        if (block)
            sv6_free_lines(block, s.slots[i].size);
    }
    printf("ok, %lu allocations, %lu blocks freed by another thread, no block held twice\n",
           atomic_load(&s.allocations), atomic_load(&s.handed_over));
    return 0;
}
