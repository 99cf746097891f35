/*
 * hubfile.c - one file of a Hub commit, fetched on its own
 * (wstore_hub_fetch_file): no store, no checkpoint, its bytes handed to
 * the caller's sink as they arrive and checked at the end against the
 * hash the listing gave (SHA-256 for an LFS file, the git blob SHA-1
 * otherwise).  A mirror streams a file to its clients with it while the
 * import of the snapshot takes the same bytes from the mirror's copy
 * (wstore_hub_options.open_file), so the upstream sends each file once.
 *
 * The bytes are trusted by no one until the end: the sink gets them
 * before they are checked, and the caller learns only from the return
 * code whether they were the file.  A file larger than a few MiB is
 * hashed on a thread of its own behind the receive (hashpipe.c), so the
 * hash's time (SHA-256 is slower than loopback) overlaps the transfer's
 * instead of adding to it; the return still waits for the last byte's
 * hash.  The HTTP client is the import's
 * (hubfetch.c): the same token rules, redirects, limits and retries.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "abi.h"
#include "digest.h"
#include "error.h"
#include "hashpipe.h"
#include "hubfetch.h"
#include "hubtrust.h"
#include "names.h"
#include "util.h"

struct one {
	wstore_hub_sink sink;
	wstore_progress_fn cancel;
	void *ctx;
	wstore__sha256 *sha256; /* an LFS file's */
	EVP_MD_CTX *sha1;	/* a git file's blob id */
	/* a large file's hash, on a thread of its own (hashpipe.c) */
	wstore__hashpipe *pipe;
	uint64_t got;
};

static int up_sha256(void *h, const void *data, size_t n)
{
	wstore__sha256_update(h, data, n);
	return 0;
}

static int up_sha1(void *h, const void *data, size_t n)
{
	return EVP_DigestUpdate(h, data, n) ? 0 : -ENOMEM;
}

static int one_stop(void *ctx)
{
	const struct one *o = ctx;

	return o->cancel && o->cancel(o->got, 0, "", o->ctx);
}

static int one_sink(void *ctx, const void *data, size_t n)
{
	struct one *o = ctx;
	int rc;

	if (o->pipe)
		rc = wstore__hashpipe_put(o->pipe, data, n);
	else
		rc = o->sha256 ? up_sha256(o->sha256, data, n)
			       : up_sha1(o->sha1, data, n);
	if (rc < 0)
		return wstore__err(rc, "hashing the file failed");
	o->got += n;
	if ((rc = o->sink(o->ctx, data, n)) != 0)
		return wstore__err(rc < 0 ? rc : WSTORE_ECANCELED,
				   "the caller stopped the transfer");
	return 0;
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

/* The hash the file is checked against, made. */
static int one_hash(struct one *o, const wstore_hub_file *f)
{
	char head[64];
	int hn;

	if (f->sha256 && *f->sha256) {
		if (!(o->sha256 = wstore__sha256_new()))
			return -ENOMEM;
		return 0;
	}
	/* git's blob id: sha1("blob <size>\0" + bytes) */
	hn = snprintf(head, sizeof(head), "blob %" PRIu64, f->size);
	if (!(o->sha1 = EVP_MD_CTX_new()) ||
	    !EVP_DigestInit_ex(o->sha1, EVP_sha1(), NULL) ||
	    !EVP_DigestUpdate(o->sha1, head, (size_t)hn + 1))
		return wstore__err(-ENOMEM, "SHA-1 failed");
	return 0;
}

/* The bytes received against the listing's hash. */
static int one_check(struct one *o, const wstore_hub_file *f, const char *url)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn = 0;
	char got[65];

	if (o->pipe && wstore__hashpipe_finish(o->pipe) < 0)
		return wstore__err(-ENOMEM, "hashing the file failed");
	if (o->sha256) {
		wstore__sha256_hex(o->sha256, got);
		if (strcmp(got, f->sha256))
			return wstore__err(WSTORE_EVERIFY,
					   "file '%s' from '%s': the server's "
					   "sha256 is %s, the bytes received "
					   "hash to %s",
					   f->path, url, f->sha256, got);
		return 0;
	}
	if (!EVP_DigestFinal_ex(o->sha1, d, &dn) || dn != 20)
		return wstore__err(-ENOMEM, "SHA-1 failed");
	hex(got, d, 20);
	if (strcmp(got, f->oid))
		return wstore__err(WSTORE_EVERIFY,
				   "file '%s' from '%s': the server's git blob "
				   "sha1 is %s, the bytes received hash to %s",
				   f->path, url, f->oid, got);
	return 0;
}

/* The hash the file is checked against, started: on a thread of its own
 * for a file larger than the pipe's ring (inline when no thread can be
 * had: slower, as right). */
static int one_begin(struct one *o, const wstore_hub_file *f)
{
	int rc = one_hash(o, f);

	if (rc == 0 && f->size >= HASHPIPE_RING)
		o->pipe = o->sha256 ? wstore__hashpipe_new(up_sha256, o->sha256)
				    : wstore__hashpipe_new(up_sha1, o->sha1);
	return rc;
}

static int check_args(const wstore_hub_options *o, const char *commit,
		      const wstore_hub_file *f)
{
	wstore__hub_limits lim;
	int rc;

	if (!o->repo || (rc = wstore__hub_repo_ok(o->repo)) < 0)
		return o->repo ? rc
			       : wstore__err(WSTORE_EINVAL,
					     "hub file: no repository");
	if (!wstore__is_hex(commit, 40))
		return wstore__err(WSTORE_EINVAL,
				   "hub file: the commit is not 40 hex");
	if (!f->path || (rc = wstore__path_importable(f->path)) < 0)
		return wstore__err(WSTORE_EINVAL, "hub file: bad path");
	if (!wstore__is_hex(f->oid, 40) ||
	    (f->sha256 && *f->sha256 && !wstore__is_hex(f->sha256, 64)))
		return wstore__err(WSTORE_EINVAL,
				   "hub file '%s': no hash to check it by",
				   f->path);
	wstore__hub_limits_of(&lim, o);
	if (f->size > lim.max_file_size)
		return wstore__err(WSTORE_EINVAL,
				   "hub file '%s' of %" PRIu64
				   " bytes: more than %" PRIu64
				   " (hub_max_file_size)",
				   f->path, f->size, lim.max_file_size);
	return 0;
}

/* The URL of f at commit (*url malloc'ed), the endpoint parsed. */
static int file_url(char **url, wstore__endpoint *ep,
		    const wstore_hub_options *o, const char *commit,
		    const wstore_hub_file *f)
{
	const char *slash = strchr(o->repo, '/');
	char org[128];
	int rc = wstore__endpoint_parse(ep, o->endpoint && *o->endpoint
						    ? o->endpoint
						    : WSTORE__HUB_DEFAULT);

	if (rc < 0)
		return rc;
	snprintf(org, sizeof(org), "%.*s", (int)(slash - o->repo), o->repo);
	{
		const char *segs[] = { org, slash + 1, "resolve", commit,
				       NULL };

		return wstore__hub_url(url, ep, segs, f->path, NULL);
	}
}

int wstore_hub_fetch_file(const wstore_hub_options *hub, const char *commit,
			  const wstore_hub_file *file, wstore_hub_sink sink,
			  wstore_progress_fn cancel, void *ctx)
{
	struct one one = { sink, cancel, ctx, NULL, NULL, NULL, 0 };
	wstore__endpoint ep = { 0 };
	wstore__http *http = NULL;
	wstore_hub_options o;
	uint64_t off = 0;
	char *url = NULL;
	int rc;

	if (!hub || !file || !sink)
		return wstore__err(WSTORE_EINVAL, "hub file: argument missing");
	if ((rc = wstore__hub_opts(&o, hub)) < 0)
		return rc;
	if ((rc = check_args(&o, commit, file)) < 0)
		return rc;
	rc = file_url(&url, &ep, &o, commit, file);
	if (rc == 0)
		rc = one_begin(&one, file);
	if (rc == 0)
		rc = wstore__http_new(&http, &o, &ep, one_stop, &one);
	if (rc == 0 && file->size > 0)
		rc = wstore__http_fetch(http, url, file->size, &off, one_sink,
					&one);
	if (rc == 0)
		rc = one_check(&one, file, url);
	wstore__http_free(http);
	wstore__endpoint_free(&ep);
	wstore__hashpipe_free(one.pipe); /* before the hashes it feeds */
	wstore__sha256_free(one.sha256);
	EVP_MD_CTX_free(one.sha1);
	free(url);
	return rc;
}
