/*
 * import.h - the import's lifecycle (import.c) for the importers that
 * are not a directory: hub.c fills a scan from a server's file list and
 * brings its own workers, and import.c keeps the rest (lock, claim,
 * manifest, intent record, READY or FAILED, indexes) as for a directory.
 */
#ifndef WSTORE_IMPORT_H
#define WSTORE_IMPORT_H

#include <stdint.h>

#include <wstore/wstore.h>

#include "lock.h"
#include "manifest.h"
#include "reuse.h"
#include "scan.h"

struct import;

/* What an importer changes in the lifecycle; each may be NULL (the
 * directory import's step). */
typedef struct wstore__import_hooks {
	/* with the lock held, before the manifest is built: make the id
	 * free (default: wstore__import_claim) */
	int (*claim)(struct import *im);
	/* after the manifest is built, attempted/done allocated: write the
	 * intent record (default: wstore__intent_write); may mark files
	 * done (already stored: their chunks are neither cleared nor
	 * written) */
	int (*begin)(struct import *im);
	/* store every chunk of every file not done (default: pipeline.c) */
	int (*workers)(struct import *im);
} wstore__import_hooks;

struct import {
	wstore_store *s;
	const wstore_import_options *o;
	wstore__scan scan; /* files: rel and size are all the lifecycle uses */
	wstore_manifest *m;
	uint64_t chunk_size;
	uint64_t *attempted;	  /* per file: chunks put (or tried) */
	char *done;		  /* per file: finished and hashed */
	const wstore__held *lock; /* the checkpoint's, held while importing */
	const wstore__import_hooks *hooks;
	void *ctx; /* the hooks' */
	/* the files the store held when the import began, by SHA-256 (NULL:
	 * none): workers put a file from one instead of writing its bytes
	 * (wstore__reuse_put), or share its blocks (wstore__reuse_dedupe) */
	wstore__reuse *reuse;
};

/* Make room, take the checkpoint's lock and import im->scan's files
 * (source_uri recorded in the manifest). */
int wstore__import_run(struct import *im, const char *source_uri);
/* Free what wstore__import_run allocated, and im->scan. */
void wstore__import_free(struct import *im);
/* With the lock held: refuse a READY id, delete a FAILED one, reclaim
 * what a killed import's intent record lists. */
int wstore__import_claim(wstore_store *s, const char *id);

#endif
