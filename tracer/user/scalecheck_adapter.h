/*
 * scalecheck's adapter API: how scalecheck runs the tests of a model on a C library.
 *
 * A library's adapter is one C file that includes this header and defines three things:
 *
 *   SC_OPS          the table of the model's operations: name, number of arguments and
 *                   the function that performs one call;
 *   sc_setup()      builds the library's state that a test's `setup` describes (called
 *                   before each repeat of each test, on the harness's main thread);
 *   sc_teardown()   frees it again (after the repeat's two calls).
 *
 * and may define sc_thread_init(side), run once on each of the two calling threads before
 * any test (register the thread with the library, warm its allocator caches).
 *
 * scalecheck compiles the adapter, the library and its harness (trace_harness.c) into one static
 * program and runs it under qemu-x86_64 with the tracing plugin. For each test the harness
 * runs call A on thread A and then call B on thread B, each between markers; every memory
 * access made between a thread's markers (the adapter's call function, the library, libc
 * underneath) is recorded, and the lines both calls touched, one of them writing, are the
 * test's conflicts. A call function must therefore touch no state of its own but the
 * library's: its arguments come in `call`, its result goes into `result`, both private to
 * the calling thread.
 *
 * A call (struct sc_call) carries the process it runs in (the test's `proc`, 0 when the
 * test names none) and the model's arguments in the order of the operation's @operation
 * signature, each with its name: sc_arg(call, i) by order, sc_arg_int(call, "fd") and
 * sc_arg_str(call, "pn") by name (booleans are 0/1, strings are the test's text).
 *
 * The setup is the test's `setup`, flattened to paths: nested keys and list indices joined
 * by '.', so `{"procs": [{"fds": {"13": {"file": 0}}}]}` gives `procs.0.fds.13.file` = 0
 * and a model state `self.count = Int().any()` gives `count`. sc_state_get reads a path's
 * integer, sc_state_text its text (strings such as a pipe end "r"), and sc_state_key walks
 * the keys under a path (the fds of a process, the entries of a table, a list's indices).
 * The tests file's header constants are there too, as `constants.NAME`.
 *
 * A result is written as in the test file (docs/format-tests.md): sc_ok / sc_ok_bool /
 * sc_error / sc_signal start it, sc_result_field and sc_result_list add fields
 * ({"ret":0,"nlink":1}, {"ret":0,"fds":[10,11]}). scalecheck compares it with the
 * model's expected results of both orders, wildcards included. See docs/usertarget.md and
 * examples/.
 */
#ifndef SCALECHECK_ADAPTER_H
#define SCALECHECK_ADAPTER_H

#include <stddef.h>

#define SC_RESULT_LEN 160
#define SC_MAX_ARGS 8
#define SC_NAME_LEN 24
#define SC_TEXT_LEN 40

/* A test's setup: flattened paths of the model's initial state. */
struct sc_state;

/* The integer at `path`, or `fallback` when the setup has none there. */
long sc_state_get(const struct sc_state *state, const char *path, long fallback);
/* The text at `path` as the test wrote it, or NULL. */
const char *sc_state_text(const struct sc_state *state, const char *path);
/* The n-th distinct key directly under `path` ("" for the top), in the test's order,
 * copied into key: 1, or 0 when there are fewer than n + 1 keys. */
int sc_state_key(const struct sc_state *state, const char *path, int n, char *key, size_t keylen);

/* One call: its process and arguments, on the calling thread's stack while it runs. */
struct sc_arg {
	char name[SC_NAME_LEN];
	char text[SC_TEXT_LEN];
	long value; /* the integer of text (0 for a string) */
};

struct sc_call {
	int proc;
	int nargs;
	struct sc_arg args[SC_MAX_ARGS];
};

long sc_arg(const struct sc_call *call, int i);
/* By name; an adapter asking for an argument the model does not have is a bug in the
 * adapter: the test program stops (the test is recorded as a crash). */
long sc_arg_int(const struct sc_call *call, const char *name);
const char *sc_arg_str(const struct sc_call *call, const char *name);

/* A call's result, in the test file's JSON form (docs/format-tests.md). */
struct sc_result {
	char text[SC_RESULT_LEN];
};

void sc_ok(struct sc_result *result, long value);       /* {"ret": value} */
void sc_ok_bool(struct sc_result *result, int value);   /* {"ret": true|false} */
void sc_error(struct sc_result *result, const char *errno_name); /* {"errno": name} */
void sc_signal(struct sc_result *result, const char *signal_name); /* {"signal": name} */
/* Adds "name": value (or a list of n values) to a result begun by one of the above. */
void sc_result_field(struct sc_result *result, const char *name, long value);
void sc_result_list(struct sc_result *result, const char *name, const long *values, int n);

typedef void sc_call_fn(const struct sc_call *call, struct sc_result *result);

struct sc_op {
	const char *name;
	int nargs;
	sc_call_fn *call;
};

/* Defined by the adapter: the operations, ended by an entry whose name is NULL. */
extern const struct sc_op SC_OPS[];

/* Defined by the adapter: returns 0, or -1 with a reason written into why. */
int sc_setup(const struct sc_state *state, char *why, size_t whylen);
void sc_teardown(void);

/* May be defined by the adapter (a weak default does nothing). */
void sc_thread_init(int side);

#endif
