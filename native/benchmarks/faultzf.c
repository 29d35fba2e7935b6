/*
 * faultzf (DragonFly 5.6 report): each worker mmap()s a private anonymous
 * region, writes one byte per page (one zero-fill fault each), munmap()s it,
 * and repeats.  Headline in GB/s of zero-filled memory.  Transparent huge pages
 * are turned off for the region so every fault is a base-page fault, as in the
 * report; --param region=SIZE (default 16M).
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t region_bytes;
static long page_bytes;

static void process_setup(struct hc_run *run)
{
    page_bytes = sysconf(_SC_PAGESIZE);
    long region = hc_param_long(run, "region", 16L << 20);
    if (region < page_bytes)
        hc_fail("--param region=%ld: must be at least one page (%ld bytes)", region, page_bytes);
    region_bytes = (size_t)region;
    run->ops_scale = region_bytes / 1e9;
}

static void worker(struct hc_worker *w)
{
    while (hc_running(w)) {
        char *region = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED)
            hc_fail("mmap %zu bytes: %s", region_bytes, strerror(errno));
        madvise(region, region_bytes, MADV_NOHUGEPAGE);
        for (size_t offset = 0; offset < region_bytes; offset += page_bytes)
            ((volatile char *)region)[offset] = 1;
        if (munmap(region, region_bytes) != 0)
            hc_fail("munmap: %s", strerror(errno));
        hc_count(w);
    }
}

static void report(struct hc_run *run)
{
    double regions_per_sec = hc_measured_ops(run) / hc_measured_seconds(run);
    hc_extra_number(run, "region_bytes", (double)region_bytes);
    hc_extra_number(run, "regions_per_sec", regions_per_sec);
    hc_extra_number(run, "faults_per_sec", regions_per_sec * (region_bytes / page_bytes));
}

const struct hc_benchmark hc_benchmark = {
    .name = "faultzf",
    .description = "each worker mmap()s a private region, touches every page, munmap()s; GB/s",
    .default_processes = true,
    .process_setup = process_setup,
    .worker = worker,
    .report = report,
};
