/* The id table model (model.py) on the opaque-handle library idtab.c: the adapter keeps
 * the handle; the tracer types the table from idtab_new's declared return type. */
#include <stdio.h>

#include "idtab.h"
#include "scalecheck_adapter.h"

/* The model's ids and one above them, taken when they are all used. */
#define IDS 5

static struct idtab *tab;

static void call_alloc(const struct sc_call *call, struct sc_result *result)
{
	int id = idtab_alloc(tab, sc_arg_int(call, "value"));
	if (id >= 0)
		sc_ok(result, id);
	else
		sc_error(result, "ENOMEM");
}

static void call_lookup(const struct sc_call *call, struct sc_result *result)
{
	long value;
	if (idtab_lookup(tab, (int)sc_arg_int(call, "id"), &value) == 0)
		sc_ok(result, value);
	else
		sc_error(result, "ENOENT");
}

static void call_free(const struct sc_call *call, struct sc_result *result)
{
	if (idtab_free(tab, (int)sc_arg_int(call, "id")) == 0)
		sc_ok(result, 0);
	else
		sc_error(result, "ENOENT");
}

const struct sc_op SC_OPS[] = {
	{"alloc", 1, call_alloc},
	{"lookup", 1, call_lookup},
	{"free", 1, call_free},
	{0, 0, 0},
};

int sc_setup(const struct sc_state *state, char *why, size_t whylen)
{
	(void)why, (void)whylen;
	tab = idtab_new(IDS);
	for (int id = 0; id < IDS; id++) {
		char path[32];
		snprintf(path, sizeof path, "slots.%d.present", id);
		if (sc_state_get(state, path, 0)) {
			snprintf(path, sizeof path, "slots.%d", id);
			idtab_put(tab, id, sc_state_get(state, path, 0));
		}
	}
	return 0;
}

void sc_teardown(void)
{
	idtab_destroy(tab);
}

void sc_thread_init(int side)
{
	(void)side;
}
