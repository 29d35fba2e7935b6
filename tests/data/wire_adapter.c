/* An adapter for the wire format's round-trip test (tests/test_wire.py): linked with the real
 * user-space harness and run on the host (the markers are no-ops without the plugin), it
 * writes every setup value and call argument it is given to stderr, allocates one block
 * per repeat, and returns results of every form. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scalecheck_adapter.h"

/* Snapshotted through an N line: the host finds it by its symbol. */
unsigned char wire_static[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static unsigned char *block;

static void put(const struct sc_call *call, struct sc_result *result)
{
	fprintf(stderr, "call put proc=%d key=%ld value=%s\n", call->proc, sc_arg_int(call, "key"),
		sc_arg_str(call, "value"));
	static const long fds[2] = {10, 11};
	sc_ok(result, 3);
	sc_result_field(result, "nlink", 1);
	sc_result_list(result, "fds", fds, 2);
}

static void get(const struct sc_call *call, struct sc_result *result)
{
	fprintf(stderr, "call get proc=%d key=%ld\n", call->proc, sc_arg(call, 0));
	sc_error(result, "ENOENT");
}

const struct sc_op SC_OPS[] = {{"put", 2, put}, {"get", 1, get}, {NULL, 0, NULL}};

/* Every value under path, depth first, as "path=text". */
static void print_values(const struct sc_state *state, const char *path)
{
	char key[SC_TEXT_LEN], inner[128];
	const char *text = sc_state_text(state, path);
	if (text)
		fprintf(stderr, "value %s=%s\n", path, text);
	for (int i = 0; sc_state_key(state, path, i, key, sizeof key); i++) {
		snprintf(inner, sizeof inner, "%s%s%s", path, *path ? "." : "", key);
		print_values(state, inner);
	}
}

int sc_setup(const struct sc_state *state, char *why, size_t whylen)
{
	print_values(state, "");
	if (sc_state_get(state, "fail", 0)) {
		snprintf(why, whylen, "asked to fail");
		return -1;
	}
	block = malloc(24);
	memset(block, 0x5a, 24);
	return 0;
}

void sc_teardown(void)
{
	free(block);
}
