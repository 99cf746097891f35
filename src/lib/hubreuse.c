/*
 * hubreuse.c - a Hub import fetches only the files the store lacks: a
 * listed file whose bytes the store already holds (an earlier revision of
 * the model, another checkpoint) is put from the held copy (reuse.c:
 * a clone where the file system has reflink, else a copy inside the
 * store), and never asked of the server.
 *
 * Which held file: the listing gives an LFS file's SHA-256, which the
 * table of held files (wstore__reuse_new) is keyed by.  A file kept in git
 * comes with its git blob id only, so a held file of the same model at
 * the same path and size is read (it is small: at most SMALL_MAX) and its
 * blob id computed; when it is the listed one, that file's SHA-256 is the
 * one to put.  Either way reuse.c hashes every byte it copies and the put
 * counts only when they give that SHA-256, so a held file never stands in
 * for other bytes.
 *
 * The held checkpoints of the model (at most HELD_MAX, the newest) are
 * read once per import, on the first file kept in git.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "hub.h"
#include "reuse.h"
#include "store.h"
#include "util.h"

#define HELD_MAX 8
#define SMALL_MAX ((uint64_t)16 << 20)

struct wstore__hub_held {
	size_t n;
	wstore_manifest *m[HELD_MAX];
};

void wstore__hub_held_free(struct wstore__hub_held *held)
{
	if (!held)
		return;
	for (size_t i = 0; i < held->n; i++)
		wstore_manifest_free(held->m[i]);
	free(held);
}

/* Keep m among the HELD_MAX newest (m is taken). */
static void hold(struct wstore__hub_held *held, wstore_manifest *m)
{
	size_t at = held->n;

	if (held->n == HELD_MAX) {
		size_t old = 0;

		for (size_t i = 1; i < held->n; i++)
			if (held->m[i]->updated_at < held->m[old]->updated_at)
				old = i;
		if (held->m[old]->updated_at >= m->updated_at) {
			wstore_manifest_free(m);
			return;
		}
		wstore_manifest_free(held->m[old]);
		at = old;
	} else {
		held->n++;
	}
	held->m[at] = m;
}

/* The READY checkpoints of the model but this import's own. */
static struct wstore__hub_held *held_read(struct import *im)
{
	struct wstore__hub_held *held = calloc(1, sizeof(*held));
	char **ids = NULL;
	size_t n = 0;

	if (!held)
		return NULL;
	if (wstore_list_model(&ids, &n, im->s, im->o->model_id) < 0)
		n = 0;
	for (size_t i = 0; i < n; i++) {
		wstore_manifest *m = NULL;

		if (!strcmp(ids[i], im->o->checkpoint_id) ||
		    wstore_manifest_read(&m, im->s, ids[i]) < 0)
			continue;
		if (strcmp(m->status, "READY") ||
		    strcmp(m->model_id, im->o->model_id))
			wstore_manifest_free(m);
		else
			hold(held, m);
	}
	wstore_strings_free(ids);
	wstore__clear_err();
	return held;
}

/* The git blob id of file path of checkpoint id, read from the store:
 * 0 with out set, or an error. */
static int blob_id(char out[41], wstore_store *s, const char *id,
		   const char *path, uint64_t size)
{
	wstore_checkpoint *ck = NULL;
	wstore_file *f = NULL;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char d[EVP_MAX_MD_SIZE];
	char head[32], *buf = malloc(size ? (size_t)size : 1);
	size_t got = 0;
	unsigned dl = 0;
	int rc = -ENOMEM,
	    hn = snprintf(head, sizeof(head), "blob %" PRIu64, size);

	if (!md || !buf)
		goto out;
	if ((rc = wstore_checkpoint_open(&ck, s, id)) < 0 ||
	    (rc = wstore_file_open(&f, ck, path)) < 0)
		goto out;
	for (uint64_t off = 0; off < size; off += got)
		if ((rc = wstore_file_pread(f, buf + off, (size_t)(size - off),
					    off, &got)) < 0 ||
		    (got == 0 && (rc = WSTORE_ECORRUPT)))
			goto out;
	rc = -ENOMEM;
	if (!EVP_DigestInit_ex(md, EVP_sha1(), NULL) ||
	    !EVP_DigestUpdate(md, head, (size_t)hn + 1) ||
	    !EVP_DigestUpdate(md, buf, (size_t)size) ||
	    !EVP_DigestFinal_ex(md, d, &dl) || dl != 20)
		goto out;
	for (unsigned i = 0; i < 20; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	rc = 0;
out:
	wstore_file_free(f);
	wstore_checkpoint_free(ck);
	EVP_MD_CTX_free(md);
	free(buf);
	return rc;
}

/* The SHA-256 of a held file with f's git blob id, or NULL. */
static const char *held_sha256(struct import *im, const wstore__hub_file *f)
{
	wstore__hub *h = im->ctx;
	struct wstore__hub_held *held;
	char oid[41];

	if (f->size == 0 || f->size > SMALL_MAX)
		return NULL;
	pthread_mutex_lock(&h->mu);
	if (!h->held)
		h->held = held_read(im);
	held = h->held;
	pthread_mutex_unlock(&h->mu);
	for (size_t i = 0; held && i < held->n; i++) {
		const wstore_manifest *m = held->m[i];
		int64_t k = wstore_manifest_find(m, f->path);

		if (k < 0 || m->files[k].size != f->size ||
		    !m->files[k].sha256 || strlen(m->files[k].sha256) != 64)
			continue;
		if (blob_id(oid, im->s, m->checkpoint_id, f->path, f->size) ==
			    0 &&
		    !strcmp(oid, f->oid))
			return m->files[k].sha256;
	}
	wstore__clear_err();
	return NULL;
}

int wstore__hub_reuse(struct import *im, size_t i, int fd, char sha256[65],
		      int (*progress)(uint64_t n, void *ctx), void *ctx)
{
	wstore__hub *h = im->ctx;
	const wstore__hub_file *f = &h->files[i];
	wstore__file_rec *rec = &im->m->files[i];
	const char *sha = f->sha256[0] ? f->sha256 : NULL;
	int rc;

	if (!im->reuse || f->size == 0)
		return 0;
	if (!sha && !(sha = held_sha256(im, f)))
		return 0;
	if (!wstore__reuse_has(im->reuse, sha, f->size))
		return 0;
	memcpy(sha256, sha, 65);
	if (wstore__set_str(&rec->sha256, sha256) < 0)
		return -ENOMEM;
	rc = wstore__reuse_put(im->reuse, im->s, rec, fd, progress, ctx);
	return rc;
}
