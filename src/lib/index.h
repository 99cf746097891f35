/*
 * index.h - the model index objects (index.c).
 *
 * Owns: the global and per-model index values (JSON arrays of ids) and
 * their lossless concurrent update, through the backend's update or a lock
 * built on put_new.
 */
#ifndef WSTORE_INDEX_H
#define WSTORE_INDEX_H

#include <stddef.h>

#include "wstore/wstore.h"

/* Add or remove id in an index object without losing concurrent updates.
 * model_id: the model of a per-model index, NULL for the global one (used
 * to rebuild a corrupt index from the manifests). */
int wstore__index_add(wstore_store *s, const char *key, const char *id,
		      const char *model_id);
int wstore__index_remove(wstore_store *s, const char *key, const char *id,
			 const char *model_id);
/* Parse an index value (JSON array of strings).  Empty -> empty list. */
int wstore__index_parse(char ***out, size_t *out_n, const char *json,
			size_t len);

#endif
