/*
 * pipeline.h - the import's data path (pipeline.c): reader threads read
 * and hash the source files chunk by chunk, putter threads store the
 * chunks (or, on a store with put_stream, the readers store them as they
 * read), with memory bounded by a pool of chunk buffers.
 *
 * On a store that keeps each file as one local file (begin_file, the file
 * store), the chunks of a file are written into its data file at their
 * offsets instead of being put, or the source file is cloned into it.
 *
 * Owns: threads, buffers and the order of reads and puts.  Knows nothing
 * of locks, intent records, manifests on the store or indexes: import.c
 * runs it between writing the intent record and publishing the manifest.
 */
#ifndef WSTORE_PIPELINE_H
#define WSTORE_PIPELINE_H

#include <stdint.h>

#include "wstore/wstore.h"
#include "manifest.h"
#include "reuse.h"
#include "scan.h"

typedef struct wstore__pipeline {
	wstore_store *s;
	/* the source files; scan->files[i] is m->files[i] (both sorted by
	 * path), whose chunk keys say where each chunk goes */
	const wstore__scan *scan;
	wstore_manifest *m;
	uint64_t chunk_size;
	uint32_t jobs; /* threads of each kind; 0: one per core */
	/* WSTORE_REFLINK_*: clone source files into a store's data files
	 * (begin_file) instead of writing their bytes */
	uint32_t reflink;
	/* called with the bytes stored so far (may be NULL); non-zero
	 * cancels with WSTORE_ECANCELED */
	wstore_progress_fn progress;
	void *progress_ctx;
	/* out, scan->n zeroed entries each, allocated by the caller:
	 * chunks of file i put or tried (what a failure must remove), and
	 * 1 once file i was read whole and m->files[i].sha256 set */
	uint64_t *attempted;
	char *done;
	/* files the store holds (may be NULL): a data file whose bytes one
	 * of them has shares its blocks before it is committed */
	const wstore__reuse *reuse;
} wstore__pipeline;

/* Store every chunk of every file.  0, or the first error of any thread
 * (the others stop), with the last error set; on error some chunks may be
 * stored (attempted says which may be). */
int wstore__pipeline_run(const wstore__pipeline *p);

#endif
