/*
 * docomp (DragonFly 5.6 report): each worker compiles a small C file with the
 * system compiler, waits for it, and repeats.  The headline is execs/s: the
 * compiles/s times the programs one compile execs (the driver plus the
 * commands `cc -###` lists, e.g. cc1 and as), counted once in setup.
 * The compiler is --param cc=PATH, else $CC, else `cc` on PATH.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "spawn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char small_program[] =
    "#include <stdio.h>\n"
    "#include <string.h>\n"
    "struct point { double x, y; };\n"
    "static double dot(struct point a, struct point b) { return a.x * b.x + a.y * b.y; }\n"
    "int checksum(const char *text)\n"
    "{\n"
    "    int sum = 0;\n"
    "    for (size_t i = 0; i < strlen(text); i++)\n"
    "        sum = sum * 31 + text[i];\n"
    "    return sum;\n"
    "}\n"
    "int main(int argc, char **argv)\n"
    "{\n"
    "    struct point a = {1, 2}, b = {3, argc};\n"
    "    printf(\"%d %f\\n\", checksum(argv[0]), dot(a, b));\n"
    "    return 0;\n"
    "}\n";

static char compiler[4096];
static char source_path[4200];
static int execs_per_compile;

static bool find_on_path(const char *name, char *out, size_t size)
{
    if (strchr(name, '/')) {
        snprintf(out, size, "%s", name);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    char *dirs = strdup(path ? path : "/usr/bin:/bin");
    bool found = false;
    for (char *dir = strtok(dirs, ":"); dir && !found; dir = strtok(NULL, ":")) {
        snprintf(out, size, "%s/%s", dir, name);
        found = access(out, X_OK) == 0;
    }
    free(dirs);
    return found;
}

/* The driver itself plus every command line `cc -###` would run (one-space indented). */
static int count_execs_per_compile(const char *workdir)
{
    char command[12000];
    snprintf(command, sizeof command, "'%s' -### -c '%s' -o '%s/probe.o' 2>&1", compiler,
             source_path, workdir);
    FILE *out = popen(command, "r");
    if (!out)
        hc_fail("run %s -###: %s", compiler, strerror(errno));
    char line[8192];
    int commands = 0;
    while (fgets(line, sizeof line, out))
        commands += line[0] == ' ' && line[1] != ' ' && line[1] != '\n'; /* gcc and clang indent commands by one space */
    pclose(out);
    return 1 + commands;
}

static void process_setup(struct hc_run *run)
{
    const char *wanted = hc_param(run, "cc", getenv("CC") ? getenv("CC") : "cc");
    if (!find_on_path(wanted, compiler, sizeof compiler))
        hc_fail("no C compiler: %s not found on PATH (install gcc or pass --param cc=PATH)", wanted);
    snprintf(source_path, sizeof source_path, "%s/small.c", run->workdir);
    FILE *f = fopen(source_path, "w");
    if (!f || fputs(small_program, f) < 0 || fclose(f) != 0)
        hc_fail("write %s: %s", source_path, strerror(errno));
    execs_per_compile = count_execs_per_compile(run->workdir);
    run->ops_scale = execs_per_compile;
}

static void worker(struct hc_worker *w)
{
    char object[4300], why[256];
    snprintf(object, sizeof object, "%s/small-%d.o", w->run->workdir, w->index);
    char *argv[] = {compiler, "-O2", "-c", source_path, "-o", object, NULL};
    while (hc_running(w)) {
        pid_t pid = spawn_program(SPAWN_FORK_EXEC, compiler, argv, -1);
        if (pid < 0)
            hc_fail("start %s: %s", compiler, strerror(errno));
        if (wait_program(pid, compiler, why, sizeof why) != 0)
            hc_fail("%s", why);
        hc_count(w);
    }
}

static void report(struct hc_run *run)
{
    hc_extra_string(run, "compiler", compiler);
    hc_extra_number(run, "execs_per_compile", execs_per_compile);
    hc_extra_number(run, "compiles_per_sec", hc_measured_ops(run) / hc_measured_seconds(run));
}

const struct hc_benchmark hc_benchmark = {
    .name = "docomp",
    .description = "N concurrent compiles of a small C file with the system compiler; execs/s",
    .default_processes = true,
    .process_setup = process_setup,
    .worker = worker,
    .report = report,
};
