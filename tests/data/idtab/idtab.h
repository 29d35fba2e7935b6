/* An id table behind an opaque handle: its users never see its struct. */
#ifndef IDTAB_H
#define IDTAB_H

struct idtab;

struct idtab *idtab_new(int ids);
void idtab_destroy(struct idtab *t);
/* The lowest free id, holding value, or -1 when all are taken. */
int idtab_alloc(struct idtab *t, long value);
/* 0 and the id's value, or -1 when the id is free (or no id). */
int idtab_lookup(struct idtab *t, int id, long *value);
/* 0, or -1 when the id is free (or no id). */
int idtab_free(struct idtab *t, int id);
/* Holds value at id (the setup of a test). */
void idtab_put(struct idtab *t, int id, long value);

#endif
