/*
 * scalecheck adapter for Concurrency Kit's hash table (ck_ht, Debian's libck-dev), as
 * installed: the key-value model's put, get and delete on a table of direct keys
 * (tracer/user/scalecheck_adapter.h). ck_ht takes its memory from an allocator the
 * caller supplies; these are wrappers of malloc, listed as `allocators` in the manifest
 * so that a block is named by the ck_ht function that asked for it.
 */
#include <ck_ht.h>
#include <stdio.h>
#include <stdlib.h>

#include "scalecheck_adapter.h"

#define KEYS 4 /* the model's KeyId values */

static ck_ht_t table;

/* ck_ht's direct mode reserves key 0 (an empty slot): model key k is k + 1. */
static uintptr_t key_of(long k)
{
	return (uintptr_t)k + 1;
}

static __attribute__((noinline)) void *table_malloc(size_t size)
{
	void *block = malloc(size);
	__asm__ volatile("" ::: "memory"); /* a call, not a jump: the wrapper is a frame */
	return block;
}

static __attribute__((noinline)) void *table_realloc(void *old, size_t old_size, size_t size, bool defer)
{
	(void)old_size, (void)defer;
	void *block = realloc(old, size);
	__asm__ volatile("" ::: "memory");
	return block;
}

static void table_free(void *block, size_t size, bool defer)
{
	(void)size, (void)defer;
	free(block);
}

static struct ck_malloc allocator = {table_malloc, table_realloc, table_free};

static void put(long k, long value)
{
	ck_ht_hash_t hash;
	ck_ht_entry_t entry;
	ck_ht_hash_direct(&hash, &table, key_of(k));
	ck_ht_entry_set_direct(&entry, hash, key_of(k), (uintptr_t)value);
	ck_ht_set_spmc(&table, hash, &entry);
}

static void call_put(const struct sc_call *call, struct sc_result *result)
{
	put(sc_arg_int(call, "key"), sc_arg_int(call, "value"));
	sc_ok(result, 0);
}

/* The hash and the entry ck_ht looks the call's key up by. */
static void lookup_key(const struct sc_call *call, ck_ht_hash_t *hash, ck_ht_entry_t *entry)
{
	uintptr_t key = key_of(sc_arg_int(call, "key"));
	ck_ht_hash_direct(hash, &table, key);
	ck_ht_entry_key_set_direct(entry, key);
}

static void call_get(const struct sc_call *call, struct sc_result *result)
{
	ck_ht_hash_t hash;
	ck_ht_entry_t entry;
	lookup_key(call, &hash, &entry);
	if (ck_ht_get_spmc(&table, hash, &entry))
		sc_ok(result, (long)ck_ht_entry_value_direct(&entry));
	else
		sc_error(result, "ENOENT");
}

static void call_delete(const struct sc_call *call, struct sc_result *result)
{
	ck_ht_hash_t hash;
	ck_ht_entry_t entry;
	lookup_key(call, &hash, &entry);
	if (ck_ht_remove_spmc(&table, hash, &entry))
		sc_ok(result, 0);
	else
		sc_error(result, "ENOENT");
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
	if (!ck_ht_init(&table, CK_HT_MODE_DIRECT, NULL, &allocator, 8, 6602834)) {
		snprintf(why, whylen, "ck_ht_init failed");
		return -1;
	}
	for (long k = 0; k < KEYS; k++) {
		char path[32];
		snprintf(path, sizeof path, "table.%ld.present", k);
		if (sc_state_get(state, path, 0)) {
			snprintf(path, sizeof path, "table.%ld", k);
			put(k, sc_state_get(state, path, 0));
		}
	}
	return 0;
}

void sc_teardown(void)
{
	ck_ht_destroy(&table);
}
