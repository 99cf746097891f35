/*
 * delete.h - deleting a checkpoint (delete.c).
 *
 * Owns: the delete order (manifest marked FAILED, then files and chunks,
 * then the manifest and the index entries).
 */
#ifndef WSTORE_DELETE_H
#define WSTORE_DELETE_H

#include "wstore/wstore.h"

/* Delete a checkpoint whose lock the caller holds (import uses it to
 * replace a FAILED one). */
int wstore__delete_unlocked(wstore_store *s, const char *id);

#endif
