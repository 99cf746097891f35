/*
 * gitoid.c - the object ids a Hub repository gives its files, which
 * clients check and name their caches by:
 *  - a file the Hub keeps in LFS (a weight file, or any file over 10 MiB)
 *    is stored in git as a pointer ("version https://git-lfs.github.com/
 *    spec/v1\noid sha256:<hex>\nsize <n>\n"): its tree oid and blobId are
 *    the git blob id of that pointer, its ETag the file's SHA-256, and
 *    /raw/ answers the pointer itself;
 *  - any other file's oid and ETag is its git blob id,
 *    sha1("blob <size>\0" + bytes), which `hf cache verify` recomputes.
 * The manifest has SHA-256 digests only, so the blob id of a small file
 * is computed from its bytes on first use and kept with the open
 * checkpoint (struct wck) for as long as it is open.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "http.h"

/* Files over this size are LFS files on the Hub. */
#define LFS_MIN_SIZE (10u << 20)
/* Read block when hashing a small file. */
#define HASH_BLOCK (1u << 20)

int wfile_is_lfs(const wstore_file_info *fi)
{
	return fi->sha256[0] &&
	       (!strcmp(fi->type, "WEIGHT") || fi->size > LFS_MIN_SIZE);
}

size_t wlfs_pointer(char *out, size_t cap, const wstore_file_info *fi)
{
	int n = snprintf(out, cap,
			 "version https://git-lfs.github.com/spec/v1\n"
			 "oid sha256:%s\nsize %" PRIu64 "\n",
			 fi->sha256, fi->size);

	return n < 0 ? 0 : (size_t)n;
}

static void hex(char *out, const unsigned char *d, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = '\0';
}

/* The git blob id of size bytes, fed by read(ctx, buf, cap, off) (bytes
 * read, or a negative code). */
static int blob_id(char out[41], uint64_t size,
		   int (*rd)(void *ctx, char *buf, size_t cap, uint64_t off,
			     size_t *got),
		   void *ctx)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char d[EVP_MAX_MD_SIZE];
	char head[32], *buf = NULL;
	unsigned dl = 0;
	uint64_t off = 0;
	int rc = -ENOMEM, n;

	n = snprintf(head, sizeof(head), "blob %" PRIu64, size);
	if (!md || !EVP_DigestInit_ex(md, EVP_sha1(), NULL) ||
	    !EVP_DigestUpdate(md, head, (size_t)n + 1))
		goto out;
	if (size && !(buf = malloc(HASH_BLOCK)))
		goto out;
	while (off < size) {
		size_t got = 0;

		if ((rc = rd(ctx, buf, HASH_BLOCK, off, &got)) < 0)
			goto out;
		rc = -ENOMEM;
		if (got == 0 || !EVP_DigestUpdate(md, buf, got))
			goto out;
		off += got;
	}
	if (!EVP_DigestFinal_ex(md, d, &dl) || dl != 20)
		goto out;
	hex(out, d, 20);
	rc = 0;
out:
	free(buf);
	EVP_MD_CTX_free(md);
	return rc;
}

struct mem {
	const char *p;
	size_t n;
};

static int mem_read(void *ctx, char *buf, size_t cap, uint64_t off, size_t *got)
{
	const struct mem *m = ctx;
	size_t left = m->n - (size_t)off;

	*got = left < cap ? left : cap;
	memcpy(buf, m->p + off, *got);
	return 0;
}

static int file_read(void *ctx, char *buf, size_t cap, uint64_t off,
		     size_t *got)
{
	return wstore_file_pread(ctx, buf, cap, off, got);
}

/* The blob id of file i of k's checkpoint, computed from its bytes. */
static int content_id(char out[41], struct wck *k, const wstore_file_info *fi)
{
	wstore_file *f = NULL;
	int rc = wstore_file_open(&f, k->ck, fi->path);

	if (rc == 0)
		rc = blob_id(out, fi->size, file_read, f);
	wstore_file_free(f);
	return rc;
}

int wfile_oid(char out[41], struct wck *k, const wstore_file_info *fi)
{
	const wstore_manifest *m = wstore_checkpoint_manifest(k->ck);
	size_t n = wstore_manifest_file_count(m);
	int64_t i;
	int rc;

	if (wfile_is_lfs(fi)) {
		char ptr[256];
		struct mem mm = { ptr, wlfs_pointer(ptr, sizeof(ptr), fi) };

		return blob_id(out, mm.n, mem_read, &mm);
	}
	i = wstore_manifest_find(m, fi->path);
	pthread_mutex_lock(&k->mu);
	if (!k->oids && i >= 0)
		k->oids = calloc(n ? n : 1, sizeof(*k->oids));
	if (k->oids && i >= 0 && k->oids[i][0]) {
		memcpy(out, k->oids[i], 41);
		pthread_mutex_unlock(&k->mu);
		return 0;
	}
	pthread_mutex_unlock(&k->mu);
	/* computed outside the lock: two requests may both compute it */
	if ((rc = content_id(out, k, fi)) < 0)
		return rc;
	pthread_mutex_lock(&k->mu);
	if (k->oids && i >= 0)
		memcpy(k->oids[i], out, 41);
	pthread_mutex_unlock(&k->mu);
	return 0;
}
