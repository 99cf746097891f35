/*
 * readv.h - what read.c (checkpoint and file handles of the read API)
 * offers the rest of the library besides include/wstore/read.h.
 *
 * Owns: mapping byte ranges of a file onto its chunks, each chunk checked
 * against the manifest and fetched at most once per call.
 */
#ifndef WSTORE_READV_H
#define WSTORE_READV_H

#include <stddef.h>
#include <stdint.h>

#include "wstore/read.h"
#include "manifest.h"

/* One destination range of a scatter read. */
typedef struct wstore__seg {
	uint64_t off; /* offset in the file */
	uint64_t len;
	void *dst;
} wstore__seg;

/*
 * Read every segment of f (all inside the file; any order, may overlap)
 * reading each chunk needed at most once.  segs is reordered.
 */
int wstore__file_readv(wstore_file *f, wstore__seg *segs, size_t n);
/*
 * After a read of bytes of f (a record of ck's manifest) that gave rc, and
 * before they are handed out: rc, or WSTORE_ECHANGED when ck was deleted
 * or replaced by another import since it was opened (generation.h).
 */
int wstore__checkpoint_settle(wstore_checkpoint *ck, const wstore__file_rec *f,
			      int rc);
/* Whether ck is vouched for by a generation record (1) or by its
 * manifest (0); for tests. */
int wstore__checkpoint_by_generation(const wstore_checkpoint *ck);
/* The generation id of the import ck opened, "" when ck is vouched for
 * by its manifest; valid as long as ck. */
const char *wstore__checkpoint_generation(const wstore_checkpoint *ck);
/* A good size for sequential buffered reads of f: small when the backend
 * reads ranges, else the chunk size (so each chunk is fetched once). */
size_t wstore__file_window(const wstore_file *f);

#endif
