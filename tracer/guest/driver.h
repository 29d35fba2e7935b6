/*
 * scalecheck guest driver: declarations shared by its parts.
 *
 *   driver.c  main: the guest's file systems, memory layout, output
 *   parse.c   a test's setup and call lines (the wire format, scalecheck_wire.h)
 *   setup.c   building a test's files, pipes, sockets, fd tables and mappings
 *   coord.c   coordination: the test processes, the hand-offs between the two calls
 *   workers.c the test processes, kept and reused from one repeat to the next
 *   statecheck.c  whether a reused test process holds what a fresh one would
 *   ops.c     one function per operation, found through a dispatch table
 *   facts.c   kernel facts for naming: symbols and per-cpu area offsets
 */
#ifndef SCALECHECK_DRIVER_H
#define SCALECHECK_DRIVER_H

#include <stddef.h>
#include <sys/stat.h>

#include "../include/scalecheck_abi.h"
#include "../include/scalecheck_marker.h"
#include "../include/scalecheck_wire.h"

#define MAX_TOKENS 10
#define TOKEN_LEN 48
#define RESULT_LEN 160
/* Every fd below SC_FD_BASE is a copy of this one, on /dev/null (see build_process). */
#define DEVNULL_FD 991
/* Model socket i is, in every test process, a receiving AF_UNIX datagram socket at fd
 * SOCK_FD_BASE + 2i and the process's own sender connected to it at SOCK_FD_BASE + 2i + 1. */
#define SOCK_FD_BASE 900
/* An exec's report channel, between the exec'd image (exec_image.c) and the driver's
 * stand-in (op_exec): what the new image found after the exec. */
#define EXEC_REPORT_FD 990
struct exec_report { unsigned long open_fds, mapped_pages; };
/* The model's pages are among the MODEL_PAGES pages from SC_MAP_BASE. */
#define MODEL_PAGES 64
/* The driver's own pages, kept by a test process from repeat to repeat from
 * DRIVER_PAGES_BASE: each side's participant pages (struct participant) at
 * DRIVER_PAGES_BASE + side * DRIVER_SIDE_PAGES * SC_UNIT (the names, data and stat pages,
 * a gap so that no VMA merges them, the untouched page), then a gap and the stack of a
 * process's second participant thread. Not the model's: the state check leaves the range
 * up to DRIVER_PAGES_END out. */
#define DRIVER_PAGES_BASE 0x200000000UL
#define DRIVER_SIDE_PAGES 8
#define DRIVER_UNTOUCHED_PAGE 4
#define DRIVER_STACK (DRIVER_PAGES_BASE + (2 * DRIVER_SIDE_PAGES + 1) * SC_UNIT)
#define DRIVER_STACK_SIZE (1UL << 20)
#define DRIVER_PAGES_END (DRIVER_STACK + DRIVER_STACK_SIZE)

struct participant;
struct call_spec;

/* An operation: runs its call between the markers and writes the result as JSON into res. */
typedef void op_fn(struct participant *p, const struct call_spec *c, char *res, size_t len);

struct inode_spec { int nlink, nunits; unsigned char data[SC_MAX_UNITS]; };
struct pipe_spec { int nbytes; unsigned char data[SC_MAX_UNITS]; };
struct fd_spec { int proc, fd, is_pipe, inode, off, pipe, write_end, cloexec; };
struct map_spec { int proc, anon, writable, data, inode, off; unsigned long va; };
struct sock_spec { int nmsgs; unsigned char data[SC_SOCK_CAPACITY]; };
struct call_spec { int proc, ntok; op_fn *run; char tok[MAX_TOKENS][TOKEN_LEN]; };

struct test {
	long index;
	int nnames, ninodes, npipes, nfds, nmaps, nsocks, ncalls;
	char names[SC_MAX_NAMES][TOKEN_LEN];
	int name_inode[SC_MAX_NAMES];
	struct inode_spec inodes[SC_MAX_INODES];
	struct pipe_spec pipes[SC_MAX_PIPES];
	struct fd_spec fds[SC_MAX_FDS];
	struct map_spec maps[SC_MAX_MAPS];
	struct sock_spec socks[SC_MAX_SOCKETS];
	struct call_spec calls[2];
};

/* One participant's private buffers, each on its own pages so that copies to and from
 * user memory by the two calls never share a cache line. */
struct participant {
	int side;
	long tag;
	const struct test *t;
	const struct call_spec *call;
	char *names;         /* page: path names */
	unsigned char *data; /* page: read/write buffer */
	struct stat *st;     /* page: stat buffer and pipe fds */
	int *pipefds;
	void *untouched;     /* page never touched: see drain_own_lru_batches */
};


/* driver.c */
/* Repeats alternate between two test directories (see run_repeat). */
extern const char *const TEST_DIRS[2];
/* The batch's settings (its first line). */
extern struct sc_wire_settings settings;
void fatal(const char *what) __attribute__((noreturn));

/* parse.c: runs the batch's tests (the text after its settings line) */
void run_batch(const char *path, char *tests);

/* setup.c */
void setup_init(void);
void inode_path(const struct test *t, int inode, char *path, size_t len);
void clean_test_dir(void);
int build_files_and_pipes(const struct test *t, char *why, size_t whylen);
void close_shared_fds(const struct test *t);
void limit_socket_queues(void);
int build_process(const struct test *t, int proc, char *why, size_t whylen);

/* coord.c */
void coordination_init(void);
void run_repeat(const struct test *t, int rep, const struct sc_wire_settings *s);
long now_ms(void);
int wait_at_least(int *word, int target, int limit_ms);
void set_and_wake(int *word, int value);
void futex_wake(int *word);
void drain_own_lru_batches(void *untouched_page);
void run_process_calls(const struct test *t, int proc, long tag_base);
void report_setup_error(const char *why);

/* workers.c */
/* Set in a reused test process while it takes fds from the coordinator (coordinator_fd). */
extern int coordinator_pidfd;
int coordinator_fd(int fd);
struct job { int rep; long tag_base; struct test test; };
/* The repeat the test processes build and run next. */
void set_job(const struct test *t, int rep, long tag_base);
/* Gives the test process of `proc` the job (forked first if there is none). */
void give_job(int proc);
/* settings state_check=1: -1 (and why) when a reused process differs from a fresh one. */
int check_jobs(const int engaged[2], char *why, size_t whylen);
/* After the repeat's end (finish): waits until the test processes are ready for the next. */
void end_jobs(const struct test *t, const int engaged[2], int limit_ms);
void kill_workers(void);
void workers_init(void);

/* statecheck.c */
enum { STATE_FDS, STATE_MAPS, STATE_CWD, STATE_SIGNALS, STATE_SCHEDULING, STATE_PARTS };
struct state_digest { unsigned long part[STATE_PARTS]; };
void state_digest(struct state_digest *d);
int state_difference(const struct state_digest *fresh, const struct state_digest *reused, char *why, size_t len);
void leak_state(long test_index);

/* ops.c */
op_fn *find_op(const char *name);
int first_side(const struct test *t);
void run_call(struct participant *p, char *res, size_t len);
int process_execs(const struct test *t, int proc);
void install_fault_handlers(void);

/* facts.c */
void dump_kernel_facts(void);

#endif
