/* spawn.h - start a helper program by fork+exec or posix_spawn, and wait for it.
 * Shared by the benchmarks that spawn processes and by mail-qman. */
#ifndef SCALECHECK_SPAWN_H
#define SCALECHECK_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

enum spawn_method { SPAWN_FORK_EXEC, SPAWN_POSIX_SPAWN };

/* "fork-exec" / "posix-spawn" -> method; returns -1 for any other name. */
int spawn_method_from_name(const char *name);

/* Starts `path` with `argv`; its stdin is `stdin_fd` unless that is -1.
 * Returns the child's pid, or -1 with errno set. */
pid_t spawn_program(enum spawn_method method, const char *path, char *const argv[], int stdin_fd);

/* Waits for `pid`.  Returns 0 when it exited with status 0; otherwise -1 and
 * a one-line description in `why`. */
int wait_program(pid_t pid, const char *what, char *why, size_t why_size);

#endif
