/*
 * meta.h - pins and last-read times (meta.c).
 *
 * Owns: the record "weight/meta/models/{ckpt}" (pin and last-read time)
 * and its lock "weight/locks/meta/{ckpt}" on stores without an atomic
 * update.  wstore_pin is in wstore/lease.h.
 */
#ifndef WSTORE_META_H
#define WSTORE_META_H

#include <stdint.h>

#include "wstore/wstore.h"

/* Record that id is being read: at most one write per checkpoint per
 * interval (60 s, $WSTORE_LAST_READ_INTERVAL_MS); best effort, keeps the
 * caller's last error. */
void wstore__touch(wstore_store *s, const char *id);
/* Pin and last-read time of id (0, 0 when there is no record). */
int wstore__meta_read(int *pinned, int64_t *last_ms, wstore_store *s,
		      const char *id);
/* Remove id's pin and last-read record (after it was deleted). */
int wstore__meta_remove(wstore_store *s, const char *id);

#endif
