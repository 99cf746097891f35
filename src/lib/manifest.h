/*
 * manifest.h - the manifest in memory (manifest.c).
 *
 * Owns: struct wstore_manifest and its file records, their JSON encoding
 * and decoding and the checks docs/format.md puts on them.
 */
#ifndef WSTORE_MANIFEST_H
#define WSTORE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "wstore/wstore.h"

/* One file of a checkpoint as its manifest records it (the public
 * wstore_file of wstore/read.h is something else: an open read handle). */
typedef struct wstore__file_rec {
	char *path;
	char *type;
	char *key;
	char *sha256;
	uint64_t size;
	uint64_t chunk_size;
	char **chunks; /* nchunks keys */
	uint64_t nchunks;
} wstore__file_rec;

struct wstore_manifest {
	char *checkpoint_id;
	char *model_id;
	char *revision;
	char *status; /* "READY" or "FAILED" */
	char *source_uri;
	char *error; /* NULL when READY */
	int64_t created_at;
	int64_t updated_at;
	uint64_t total_size;
	wstore__file_rec *files; /* sorted by path */
	size_t nfiles;
};

/* Empty manifest with all strings set to "" (status "FAILED"). */
wstore_manifest *wstore__manifest_new(void);
/* Append a file record; takes a copy of path; returns it or NULL. */
wstore__file_rec *wstore__manifest_add_file(wstore_manifest *m,
					    const char *path);
/* Append a chunk key to a file record (copied). */
int wstore__file_rec_add_chunk(wstore__file_rec *f, const char *key);
/* Sort files by path (bytewise) and recompute total_size. */
void wstore__manifest_sort(wstore_manifest *m);

#endif
