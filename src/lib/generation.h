/*
 * generation.h - generations: how a reader knows that the checkpoint it
 * opened is still the one in the store (generation.c; docs/format.md,
 * "Generations").
 *
 * Owns: the record "weight/meta/generations/{ckpt}" (a random id written
 * by every import before its first chunk, removed by delete before its
 * first chunk), and the guard a reader keeps from open to its last read:
 * after a read, and before its bytes are handed out, the guard confirms
 * that the checkpoint was neither deleted nor replaced by another import
 * of the same id (chunk keys are the same for every import of an id).
 */
#ifndef WSTORE_GENERATION_H
#define WSTORE_GENERATION_H

#include "wstore/wstore.h"
#include "manifest.h"

/* Import, before its first chunk: a new generation for m (its id and
 * created_at).  The caller holds the checkpoint's lock. */
int wstore__gen_write(wstore_store *s, const wstore_manifest *m);
/* Delete, before its first chunk goes (and after it, for a delete
 * interrupted in between): readers of ckpt fail from now on.  Not found
 * is success. */
int wstore__gen_remove(wstore_store *s, const char *ckpt);

typedef struct wstore__guard wstore__guard;

/* Open, step 1, before the manifest is read: note the generation record
 * of ckpt.  *out is the caller's (wstore__guard_free). */
int wstore__guard_new(wstore__guard **out, wstore_store *s, const char *ckpt);
/*
 * Open, step 2, with the READY manifest m read after step 1 (m must
 * outlive the guard): 0 when the guard now vouches for m;
 * WSTORE_ECHANGED when the record changed in between (the checkpoint is
 * being replaced: read the manifest again); a store error.
 */
int wstore__guard_bind(wstore__guard *g, const wstore_manifest *m);
/*
 * After a read of bytes of file f (a record of the bound manifest) that
 * gave rc, and before the bytes are handed out: rc when the checkpoint is
 * still the one bound; WSTORE_ECHANGED (naming the checkpoint and the
 * file) when it was deleted or replaced since, also in place of an
 * rc of WSTORE_ECORRUPT (a chunk gone or another import's); a store
 * error that kept the check from answering (the bytes of a successful read
 * are then not vouched for).  Thread-safe.
 */
int wstore__guard_settle(wstore__guard *g, const wstore__file_rec *f, int rc);
/* Whether g vouches by a generation record (1) or, for a checkpoint
 * without one, by re-reading the manifest (0); for tests. */
int wstore__guard_by_generation(const wstore__guard *g);
/* The generation id of the import g vouches for ("" when it vouches by
 * the manifest); valid as long as g. */
const char *wstore__guard_generation(const wstore__guard *g);
void wstore__guard_free(wstore__guard *g);

#endif
