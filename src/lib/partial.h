/*
 * partial.h - the resumable partial files of pull (partial.c): a file
 * being pulled is written into a partial next to its final name; a pull
 * that is interrupted (^C, a canceling progress callback) leaves it, and
 * the next pull of the same file of the same import into that directory
 * takes it and fetches only the chunks it lacks.
 *
 * Owns: the partial's name, ".wstore-part-<id>-<pid>-<owner tag>-<n>",
 * where <id> (32 hex digits) names the import and the file
 * (wstore__partial_ident) and <pid>-<owner tag> the process that wrote
 * it last (owner.h); who may take, keep or remove a partial.
 */
#ifndef WSTORE_PARTIAL_H
#define WSTORE_PARTIAL_H

#include <limits.h>
#include <stdint.h>

#include "digest.h"
#include "manifest.h"

#define WSTORE__PART_TAG ".wstore-part-"
#define WSTORE__PART_ID_LEN 32

/*
 * The id of file f of the import m was read from: a hash of the import's
 * generation id gen ("" for a checkpoint without one: its created_at
 * stands in), the checkpoint id, the file's path, size, SHA-256, chunk
 * size and chunk keys.  A re-import of the id gets a new generation, so
 * its partials never match the old import's.
 */
void wstore__partial_ident(char out[WSTORE__PART_ID_LEN + 1], const char *gen,
			   const wstore_manifest *m, const wstore__file_rec *f);

typedef struct wstore__partial {
	int dirfd; /* not owned */
	int fd;	   /* open read-write, flock held; -1 when closed */
	char name[NAME_MAX + 1];
	int taken; /* 1: an earlier pull's partial, 0: a new empty file */
} wstore__partial;

/* Whether a partial's id names a file the caller still wants kept. */
typedef int (*wstore__partial_wanted)(const char *id, void *ctx);

/*
 * Open the partial for id under dirfd: take one that no process is
 * writing (its owner provably dead, or this very process with the flock
 * free) by renaming it to a name of this process under flock, else create
 * an empty one.  On the way, partials nobody is writing are removed when
 * wanted(id) is false or force is set (force takes none); a partial of a
 * live writer is never touched.  what names the file in errors.
 */
int wstore__partial_open(wstore__partial *p, int dirfd, const char *id,
			 wstore__partial_wanted wanted, void *ctx, int force,
			 const char *what);

/* The same pass without taking or creating anything, for a file already
 * in place: partials of id nobody writes go too. */
void wstore__partial_sweep(int dirfd, const char *id,
			   wstore__partial_wanted wanted, void *ctx);

/*
 * Keep of p's file the longest prefix that ends on a chunk boundary of f,
 * truncate the rest, hash that prefix again into h and leave the offset
 * at its end.  *out_first is the first chunk still to fetch, *out_kept
 * the bytes kept.
 */
int wstore__partial_prefix(wstore__partial *p, const wstore__file_rec *f,
			   wstore__sha256 *h, void *buf, size_t cap,
			   uint64_t *out_first, uint64_t *out_kept);

/* Empty p's file (to fetch the file whole). */
int wstore__partial_reset(wstore__partial *p, const char *what);

/* Sync p's file, close it and rename it to base under dirfd (only over a
 * regular file or a symlink), then sync the directory; on failure the
 * file is removed. */
int wstore__partial_commit(wstore__partial *p, const char *base,
			   const char *what);
/* Leave p's file for a later pull (data synced as far as it can be). */
void wstore__partial_keep(wstore__partial *p);
/* Remove p's file. */
void wstore__partial_drop(wstore__partial *p);

#endif
