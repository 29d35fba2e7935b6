/*
 * open_loop: an independent measurement of what openbench measures, sharing no code
 * with the harness.  N pinned threads each close(open()) their own file; every thread
 * times itself with clock_gettime (checked every 256 operations) and counts only what
 * it completes inside its own measured window, and the CPU time it got in that window.
 *
 * usage: open_loop THREADS WARMUP_S DURATION_S DIR
 * prints "<ops per second> <ops per CPU-second of the threads>" on stdout
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct thread_job {
    int cpu;
    char path[4096];
    double warmup_s, duration_s;
    unsigned long measured_ops;
    double measured_s, measured_cpu_s;
};

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *open_close_loop(void *arg)
{
    struct thread_job *job = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(job->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    double start = monotonic_s(), measure_from = start + job->warmup_s;
    double measure_until = measure_from + job->duration_s, now = start, counted_from = 0;
    double cpu_from = 0;
    unsigned long ops = 0;
    bool counting = false;
    while (now < measure_until) {
        for (int i = 0; i < 256; i++) {
            int fd = open(job->path, O_RDWR);
            if (fd < 0) {
                perror(job->path);
                exit(1);
            }
            close(fd);
        }
        now = monotonic_s();
        if (!counting && now >= measure_from) {
            counting = true;
            counted_from = now;
            cpu_from = thread_cpu_s();
        } else if (counting) {
            ops += 256;
        }
    }
    job->measured_ops = ops;
    job->measured_s = now - counted_from;
    job->measured_cpu_s = thread_cpu_s() - cpu_from;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: open_loop THREADS WARMUP_S DURATION_S DIR\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    struct thread_job *jobs = calloc(threads, sizeof *jobs);
    pthread_t *ids = calloc(threads, sizeof *ids);
    for (int i = 0; i < threads; i++) {
        jobs[i].cpu = i;
        jobs[i].warmup_s = atof(argv[2]);
        jobs[i].duration_s = atof(argv[3]);
        snprintf(jobs[i].path, sizeof jobs[i].path, "%s/loop-%d", argv[4], i);
        int fd = open(jobs[i].path, O_CREAT | O_RDWR, 0644);
        if (fd < 0) {
            perror(jobs[i].path);
            return 1;
        }
        close(fd);
    }
    for (int i = 0; i < threads; i++)
        pthread_create(&ids[i], NULL, open_close_loop, &jobs[i]);
    double rate = 0, ops = 0, cpu_s = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ids[i], NULL);
        rate += jobs[i].measured_ops / jobs[i].measured_s;
        ops += jobs[i].measured_ops;
        cpu_s += jobs[i].measured_cpu_s;
        unlink(jobs[i].path);
    }
    printf("%.1f %.1f\n", rate, ops / cpu_s);
    return 0;
}
