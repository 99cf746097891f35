/*
 * reuse.h - files the store already holds, found by SHA-256 (reuse.c), so
 * that an import stores a file it already has once: every import path
 * (a directory, a Hub, a bundle, a copy from another store) asks here
 * before it writes a file's bytes.
 *
 * Owns: a table of the store's READY files by SHA-256 and size, read once
 * per import from every READY manifest, and the two ways of using it:
 *  - wstore__reuse_put, for an importer that knows a file's SHA-256
 *    before it has the bytes (a Hub's LFS hash, a manifest): the file is
 *    put from the held one without fetching it (a clone of the held data
 *    file on the file store, else a copy of its chunks inside the store),
 *    then checked against the SHA-256 before it counts;
 *  - wstore__reuse_dedupe, for an importer that learns the hash only by
 *    reading the bytes (a directory, a bundle): once the file store's new
 *    data file holds them, its blocks are shared with the held data file
 *    (FIDEDUPERANGE: the kernel compares the bytes first).
 * Either shares blocks only where the file system can (XFS, btrfs), and a
 * held file that cannot be used is never an error: the importer writes
 * the bytes as it would have.  Deleting one checkpoint unlinks only its
 * own data files, so it never touches another's bytes.
 */
#ifndef WSTORE_REUSE_H
#define WSTORE_REUSE_H

#include <stdint.h>

#include "wstore/wstore.h"
#include "manifest.h"

typedef struct wstore__reuse wstore__reuse;

/*
 * The READY files of store s (every checkpoint in the global index but
 * skip_id, which may be NULL) by SHA-256 and size; files of 0 bytes are
 * left out.  A checkpoint that cannot be read is left out too: reuse is
 * an optimisation, so only -ENOMEM fails.  *out is NULL when nothing is
 * held; every call below takes NULL as an empty table.  The table is
 * read-only once built: threads may share it.
 */
int wstore__reuse_new(wstore__reuse **out, wstore_store *s,
		      const char *skip_id);
void wstore__reuse_free(wstore__reuse *r);
/* Whether the table holds a file with this SHA-256 (lower-case hex) and
 * size: 1 or 0. */
int wstore__reuse_has(const wstore__reuse *r, const char *sha256,
		      uint64_t size);

/*
 * Put file dst of an import (its record as the new manifest has it: chunk
 * keys, size, chunk_size and its sha256, which must be set) from a held
 * file of the same SHA-256 and size, without its bytes coming from
 * outside:
 *  - fd >= 0: the empty data file begin_file opened for dst (the file
 *    store): the held data file is cloned into it (FICLONE), else copied
 *    (copy_file_range), else its chunks are read and written;
 *  - fd < 0: each of dst's chunks is put, read from the held file's
 *    chunks (another chunk size is fine).
 * The bytes are hashed as they are read and must give dst's SHA-256.
 * progress (may be NULL) is told of the bytes done; non-zero cancels.
 * Returns 1 when dst holds the file; 0 when no held file could be used
 * (none held, it was deleted meanwhile, a hash mismatch, a read error):
 * then nothing of dst is left (fd truncated to 0, chunks put removed) and
 * the last error is cleared; < 0 only for a cancel or -ENOMEM, and then
 * dst may hold a part (the importer's failure path removes it).
 */
int wstore__reuse_put(const wstore__reuse *r, wstore_store *s,
		      const wstore__file_rec *dst, int fd,
		      int (*progress)(uint64_t n, void *ctx), void *ctx);

/*
 * File store: fd (open for writing) holds all of rec's bytes, whose
 * SHA-256 rec->sha256 was computed from them.  If a held data file has
 * that SHA-256 and size, share its blocks with fd where the file system
 * can (FIDEDUPERANGE, which compares the bytes first: a held file that
 * differs is left alone).  Returns the bytes now shared (0: none); never
 * an error (the last error is cleared).
 */
uint64_t wstore__reuse_dedupe(const wstore__reuse *r, wstore_store *s,
			      const wstore__file_rec *rec, int fd);

/*
 * What the file store's READY data files share (`wstore df`): *out_shared
 * the bytes of their blocks that are shared with another file (another
 * checkpoint's data file, or the source a reflink import cloned), counted
 * once per file; *out_saved the bytes the store's files hold once for
 * several of them (*out_shared less the distinct blocks those take).
 * FIEMAP of every data file.  WSTORE_EUNSUPPORTED on a store that does
 * not keep local files; a file that cannot be mapped is left out.
 */
int wstore__reuse_shared(uint64_t *out_shared, uint64_t *out_saved,
			 wstore_store *s);

#endif
