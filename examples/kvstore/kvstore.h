/* A small key-value store's interface (the model: model.py). Two implementations:
 * locked.c (one mutex over a hash table) and striped.c (a chain per bucket and writer,
 * lock-free get). */
#ifndef KVSTORE_H
#define KVSTORE_H

void kv_init(void);
void kv_destroy(void);
void kv_register_thread(int slot); /* once per thread; the table's builder has slot 0 */
void kv_put(long key, long value);
int kv_get(long key, long *value); /* 0, or -1 when the key is absent */
int kv_delete(long key);           /* 0, or -1 when the key is absent */

#endif
