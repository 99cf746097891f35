/*
 * intent.h - import intent records, "weight/intents/models/{ckpt}" (see
 * intent.c and docs/format.md, "Intent records").  Library-internal.
 */
#ifndef WSTORE_INTENT_H
#define WSTORE_INTENT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <wstore/wstore.h>

/* Record, before the first chunk is written, every chunk key manifest m
 * lists (the import's whole key set) and the chunk size. */
int wstore__intent_write(wstore_store *s, const wstore_manifest *m,
			 uint64_t chunk_size);

/* The chunk keys an intent lists (a NULL-terminated array the caller
 * frees with wstore_strings_free): 0, WSTORE_ENOTFOUND, WSTORE_ECORRUPT,
 * or a store error. */
/* The same with one more member, name: extra (what an importer keeps to
 * resume, e.g. hub.c's "hub"); other readers ignore it. */
int wstore__intent_write_with(wstore_store *s, const wstore_manifest *m,
			      uint64_t chunk_size, const char *name,
			      json_t *extra);
/* The record of ckpt parsed (*out: a new reference), WSTORE_ENOTFOUND or
 * WSTORE_ECORRUPT. */
int wstore__intent_get(json_t **out, wstore_store *s, const char *ckpt);

int wstore__intent_read(char ***out, size_t *out_n, wstore_store *s,
			const char *ckpt);

/*
 * Remove every key the intent of ckpt lists (only keys under
 * "weight/models/{ckpt}/", never another checkpoint's, never the
 * manifest), then the intent itself.  An absent intent is success; an
 * unreadable one is removed (on stores that can list keys, after removing
 * every chunk key under the checkpoint's prefix).  The caller holds the
 * checkpoint's lock.
 */
int wstore__intent_reclaim(wstore_store *s, const char *ckpt);

/* An unreadable intent or manifest names no keys: on stores that can list
 * keys, remove every key under "weight/models/{ckpt}/" but the manifest
 * (0 on stores that cannot list). */
int wstore__sweep_ckpt(wstore_store *s, const char *ckpt);

/* Remove the intent key and its marks (its chunks are listed by a
 * manifest now). */
int wstore__intent_drop(wstore_store *s, const char *ckpt);

/*
 * Marks: one small record per file an import stored and verified,
 * "weight/intents/verified/{ckpt}/{seq}" (seq 0, 1, ... with no gap: the
 * caller numbers them in order), so that recording a file costs the same
 * however many came before (hub.c's resume).  marks reads them in order
 * up to the first missing or unreadable one (*out: a new JSON array);
 * marks_drop removes them (intent_drop does too).
 */
int wstore__intent_mark(wstore_store *s, const char *ckpt, uint64_t seq,
			json_t *rec);
int wstore__intent_marks(json_t **out, wstore_store *s, const char *ckpt);
int wstore__intent_marks_drop(wstore_store *s, const char *ckpt);

#endif
