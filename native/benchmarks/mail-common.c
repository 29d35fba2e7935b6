/* mail-common.c - see mail-common.h. */
#define _GNU_SOURCE
#include "mail-common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void mail_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", mail_program_name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

char *mail_read_all(int fd, size_t *length)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf)
            mail_fail("out of memory");
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            mail_fail("read: %s", strerror(errno));
        if (n == 0)
            break;
        len += n;
        if (cap - len < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    *length = len;
    return buf;
}

void mail_write_all(int fd, const void *data, size_t length, const char *what)
{
    const char *p = data;
    while (length > 0) {
        ssize_t n = write(fd, p, length);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            mail_fail("write %s: %s", what, strerror(errno));
        p += n;
        length -= n;
    }
}

void mail_write_file(const char *path, const void *data, size_t length)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        mail_fail("create %s: %s", path, strerror(errno));
    mail_write_all(fd, data, length, path);
    if (close(fd) != 0)
        mail_fail("close %s: %s", path, strerror(errno));
}

void mail_unique_id(char out[MAIL_ID_MAX])
{
    static unsigned long counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, MAIL_ID_MAX, "%ld.%ld.%09ld.%lu", (long)getpid(), (long)ts.tv_sec,
             ts.tv_nsec, __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
}
