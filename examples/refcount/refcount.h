/* A reference counter's interface (the shipped `counter` model:
 * src/scalecheck/interfaces/counter.py). Two implementations: shared.c, sharded.c. */
#ifndef REFCOUNT_H
#define REFCOUNT_H

void rc_init(long count);          /* the counter starts at count */
void rc_register_thread(int slot); /* called once by each thread that uses the counter */
void rc_inc(void);
int rc_dec(void);    /* 0, or -1 when the count is already zero */
int rc_iszero(void); /* 1 when the count is zero */

#endif
