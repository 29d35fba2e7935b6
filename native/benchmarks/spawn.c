/* spawn.c - see spawn.h. */
#define _GNU_SOURCE
#include "spawn.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int spawn_method_from_name(const char *name)
{
    if (strcmp(name, "fork-exec") == 0)
        return SPAWN_FORK_EXEC;
    if (strcmp(name, "posix-spawn") == 0)
        return SPAWN_POSIX_SPAWN;
    return -1;
}

pid_t spawn_program(enum spawn_method method, const char *path, char *const argv[], int stdin_fd)
{
    extern char **environ;
    if (method == SPAWN_FORK_EXEC) {
        pid_t pid = fork();
        if (pid == 0) {
            /* Only async-signal-safe calls between fork and exec: the parent may be threaded. */
            if (stdin_fd >= 0 && dup2(stdin_fd, STDIN_FILENO) < 0)
                _exit(126);
            execv(path, argv);
            _exit(127);
        }
        return pid;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (stdin_fd >= 0)
        posix_spawn_file_actions_adddup2(&actions, stdin_fd, STDIN_FILENO);
    pid_t pid;
    int err = posix_spawn(&pid, path, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err) {
        errno = err;
        return -1;
    }
    return pid;
}

int wait_program(pid_t pid, const char *what, char *why, size_t why_size)
{
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(why, why_size, "waitpid %s: %s", what, strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFSIGNALED(status))
        snprintf(why, why_size, "%s killed by signal %d (%s)", what, WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else if (WEXITSTATUS(status) == 127)
        snprintf(why, why_size, "%s could not be executed (status 127)", what);
    else
        snprintf(why, why_size, "%s exited with status %d", what, WEXITSTATUS(status));
    return -1;
}
