/*
 * usage.h - usage, quota and eviction (usage.c).
 *
 * Owns: the usage report (`wstore df`), the LRU eviction order, and the
 * room check of an import against the store's quota and the backend's
 * free space.  The public calls are in wstore/lease.h.
 */
#ifndef WSTORE_USAGE_H
#define WSTORE_USAGE_H

#include <stdint.h>

#include "wstore/wstore.h"

/* Before an import of bytes under id: refuse (WSTORE_EBUSY, with the
 * sizes) what would not fit under the quota or in the free space,
 * evicting first when the store says "evict": "lru". */
int wstore__make_room(wstore_store *s, const char *id, uint64_t bytes,
		      wstore_evict_fn fn, void *ctx);

#endif
