/* scalecheck adapter for the reference counters (tracer/user/scalecheck_adapter.h):
 * builds the counter from a test's setup and performs the model's three operations. */
#include "refcount.h"
#include "scalecheck_adapter.h"

static void call_inc(const struct sc_call *call, struct sc_result *result)
{
	(void)call;
	rc_inc();
	sc_ok(result, 0);
}

static void call_dec(const struct sc_call *call, struct sc_result *result)
{
	(void)call;
	if (rc_dec() < 0)
		sc_error(result, "EINVAL");
	else
		sc_ok(result, 0);
}

static void call_iszero(const struct sc_call *call, struct sc_result *result)
{
	(void)call;
	sc_ok_bool(result, rc_iszero());
}

const struct sc_op SC_OPS[] = {
	{"inc", 0, call_inc},
	{"dec", 0, call_dec},
	{"iszero", 0, call_iszero},
	{0, 0, 0},
};

int sc_setup(const struct sc_state *state, char *why, size_t whylen)
{
	(void)why, (void)whylen;
	rc_init(sc_state_get(state, "count", 0));
	return 0;
}

void sc_teardown(void)
{
}

void sc_thread_init(int side)
{
	rc_register_thread(side);
}
