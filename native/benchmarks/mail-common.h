/* mail-common.h - what mail-enqueue, mail-qman, mail-deliver and mailbench share.
 *
 * Spool layout (qmail-like): SPOOL/mess/ID holds a message, SPOOL/todo/ID its
 * envelope (the mailbox name); mail-enqueue sends ID to mail-qman's Unix
 * datagram socket.  Maildirs: MAILDIR/MAILBOX/{tmp,new,cur}. */
#ifndef SCALECHECK_MAIL_COMMON_H
#define SCALECHECK_MAIL_COMMON_H

#include <stddef.h>
#include <sys/types.h>

#define MAIL_ID_MAX 64

/* Print "PROGRAM: error: ..." and exit 1. */
__attribute__((noreturn, format(printf, 1, 2))) void mail_fail(const char *fmt, ...);

/* Everything readable from fd; the buffer is NUL-terminated and malloc()ed. */
char *mail_read_all(int fd, size_t *length);
void mail_write_all(int fd, const void *data, size_t length, const char *what);
/* Writes a whole file (created or truncated). */
void mail_write_file(const char *path, const void *data, size_t length);
/* A name unique across processes and time: pid, clock and a counter. */
void mail_unique_id(char out[MAIL_ID_MAX]);

extern const char *mail_program_name;

#endif
