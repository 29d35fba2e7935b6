/* scalecheck adapter for the key-value stores (tracer/user/scalecheck_adapter.h). */
#include <stdio.h>

#include "kvstore.h"
#include "scalecheck_adapter.h"

#define KEYS 4 /* the model's KeyId values */

static void call_put(const struct sc_call *call, struct sc_result *result)
{
	kv_put(sc_arg_int(call, "key"), sc_arg_int(call, "value"));
	sc_ok(result, 0);
}

static void call_get(const struct sc_call *call, struct sc_result *result)
{
	long value;
	if (kv_get(sc_arg(call, 0), &value) < 0)
		sc_error(result, "ENOENT");
	else
		sc_ok(result, value);
}

static void call_delete(const struct sc_call *call, struct sc_result *result)
{
	if (kv_delete(sc_arg(call, 0)) < 0)
		sc_error(result, "ENOENT");
	else
		sc_ok(result, 0);
}

const struct sc_op SC_OPS[] = {
	{"put", 2, call_put},
	{"get", 1, call_get},
	{"delete", 1, call_delete},
	{0, 0, 0},
};

/* The table holds key k when the setup says table.k.present; its value is table.k. */
int sc_setup(const struct sc_state *state, char *why, size_t whylen)
{
	(void)why, (void)whylen;
	kv_init();
	for (long k = 0; k < KEYS; k++) {
		char path[32];
		snprintf(path, sizeof path, "table.%ld.present", k);
		if (sc_state_get(state, path, 0)) {
			snprintf(path, sizeof path, "table.%ld", k);
			kv_put(k, sc_state_get(state, path, 0));
		}
	}
	return 0;
}

void sc_teardown(void)
{
	kv_destroy();
}

/* The setup runs on the harness's main thread (slot 0); calls A and B get slots 1 and 2. */
void sc_thread_init(int side)
{
	kv_register_thread(1 + side);
}
