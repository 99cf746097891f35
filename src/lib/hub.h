/*
 * hub.h - import from a Hub (hub.c: what to fetch and the lifecycle
 * hooks; hubrun.c: the workers that fetch, hash, check and store).
 */
#ifndef WSTORE_HUB_H
#define WSTORE_HUB_H

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>
#include <wstore/wstore.h>

#include "error.h"
#include "hubtrust.h"
#include "import.h"

/* A file the server lists, in the scan's order (sorted by path). */
typedef struct wstore__hub_file {
	char *path;
	uint64_t size;
	char oid[41];	 /* git blob SHA-1 (of the LFS pointer for LFS) */
	char sha256[65]; /* LFS files: the file's SHA-256; else "" */
} wstore__hub_file;

typedef struct wstore__hub {
	wstore_hub_options o; /* the caller's, current layout */
	wstore__endpoint ep;  /* o.endpoint parsed, its credentials apart */
	wstore__hub_limits lim;
	char org[97], name[97]; /* o.repo's two parts */
	char *commit;
	wstore__hub_file *files; /* n, sorted by path */
	size_t n;
	uint64_t total; /* the sizes of files[] added up (<= the limit) */
	/* the intent record's "hub" member: endpoint, repo, commit,
	 * chunk_size and "files": {path: {"oid":..., "sha256":...}} of the
	 * files kept from a killed run; each file verified after is a mark
	 * (intent.c).  What a re-run keeps is both. */
	json_t *state;
	json_t *kept; /* from a killed run: path -> {oid, sha256}, or NULL */
	struct wstore__hub_held *held; /* hubreuse.c's, read on first use */
	/* the workers' */
	pthread_mutex_t mu;
	size_t next;
	uint64_t marks; /* the intent record's marks written (intent.c) */
	uint64_t bytes_done, last_progress;
	wstore__first_err err;
} wstore__hub;

/* One page of a tree listing (body, len bytes, from url): its files the
 * globs want into h->files (cap: its capacity), each checked (path, hash
 * forms, the limits) before it is kept; an error names what is wrong.
 * Then, once every page is in and h->files sorted (cmp_file): none twice,
 * none both a file and a directory (names_fit). */
int wstore__hub_add_page(wstore__hub *h, const char *body, size_t len,
			 const char *url, size_t *cap);
int wstore__hub_cmp_file(const void *a, const void *b);
int wstore__hub_names_fit(const wstore__hub *h);

/* File i put from a file the store holds with the same bytes
 * (hubreuse.c), fd the data file begin_file opened for it or -1: 1 with
 * its SHA-256 in sha256 (checked over every byte copied), 0 when it must
 * be fetched (nothing of it left), < 0 on a cancel or -ENOMEM. */
int wstore__hub_reuse(struct import *im, size_t i, int fd, char sha256[65],
		      int (*progress)(uint64_t n, void *ctx), void *ctx);
struct wstore__hub_held;
void wstore__hub_held_free(struct wstore__hub_held *held);

/* The workers (hubrun.c): fetch every file not done. */
int wstore__hub_workers(struct import *im);
/* Write the intent record with h->state as its "hub" member (before
 * the workers run). */
int wstore__hub_write_intent(struct import *im);

#endif
