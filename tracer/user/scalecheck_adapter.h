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
 * scalecheck compiles the adapter, the library and its harness (harness.c) into one static
 * program and runs it under qemu-x86_64 with the tracing plugin. For each test the harness
 * runs call A on thread A and then call B on thread B, each between markers; every memory
 * access made between a thread's markers (the adapter's call function, the library, libc
 * underneath) is recorded, and the lines both calls touched, one of them writing, are the
 * test's conflicts. A call function must therefore touch no state of its own but the
 * library's: its arguments come in `args`, its result goes into `result`, both private to
 * the calling thread.
 *
 * Arguments are the model's, as integers, in the order of the operation's @operation
 * signature (booleans are 0/1). The setup is the model's initial state, flattened to paths:
 * for a model with `self.count = Int().any()`, `sc_state_get(s, "count", 0)`; for
 * `self.table = Dict(Key, Value).any()`, entry k is `table.k.present` (0/1) and its value
 * `table.k`. Results are written with sc_ok / sc_ok_bool / sc_error and compared with the
 * model's expected results. See docs/usertarget.md and examples/.
 */
#ifndef SCALECHECK_ADAPTER_H
#define SCALECHECK_ADAPTER_H

#include <stddef.h>

#define SC_RESULT_LEN 160

/* A test's setup: flattened paths of the model's initial state. */
struct sc_state;

/* The value at `path`, or `fallback` when the setup does not mention it. */
long sc_state_get(const struct sc_state *state, const char *path, long fallback);

/* A call's result, in the test file's JSON form (docs/format-tests.md). */
struct sc_result {
	char text[SC_RESULT_LEN];
};

void sc_ok(struct sc_result *result, long value);       /* {"ret": value} */
void sc_ok_bool(struct sc_result *result, int value);   /* {"ret": true|false} */
void sc_error(struct sc_result *result, const char *errno_name); /* {"errno": name} */

typedef void sc_call_fn(const long *args, struct sc_result *result);

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
