/*
 * migrate.c - `wstore admin migrate`: the file store's checkpoints moved
 * from one file per chunk key to one data file per checkpoint file
 * (docs/format.md, "Layout of the file store").
 *
 * Per checkpoint, under the lock "weight/locks/models/{id}" that import,
 * delete and gc take: re-read the manifest, then hand each file to the
 * backend's migrate_file (src/lib/backends/file_migrate.c), which builds
 * the data file beside the chunk files, publishes it by rename and then
 * removes the chunk files.  Chunk keys stay what the manifest and every
 * reader speak, so the manifest itself is never rewritten: a checkpoint
 * is readable at every step, and a re-run finishes what a killed one
 * left.  A checkpoint whose lock is held is skipped and reported; FAILED
 * ones are left to `model delete`.  Files whose chunk keys are not the
 * file store's own ("<file key>/chunks/<i>") or whose record has no
 * chunk size (old single-chunk records) stay as they are: the old layout
 * is read forever.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"
#include "error.h"
#include "lock.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "util.h"

#define HASH_BUF (1u << 20)

struct mig {
	wstore_store *s;
	wstore_migrate_options o;
	wstore_migrate_stats *st;
	uint64_t done, total; /* bytes, for progress */
	int busy;	      /* some checkpoint was left: locked */
	int failed;	      /* first error of a checkpoint that failed */
	char why[1024];	      /* and its message */
};

/* Files of m that migrate_file takes: the file store's own chunk keys
 * and a chunk size. */
static int convertible(const wstore__file_rec *f)
{
	char key[WSTORE__KEY_MAX];

	if (!f->key || f->nchunks == 0 || f->chunk_size == 0)
		return 0;
	for (uint64_t i = 0; i < f->nchunks; i++) {
		wstore__key_chunk(key, f->key, i);
		if (strcmp(key, f->chunks[i]))
			return 0;
	}
	return 1;
}

/* --verify: the new data file (fd) against the manifest's SHA-256. */
struct sha_check {
	const char *id;
	const wstore__file_rec *f;
};

static int check_sha(int fd, void *ctx)
{
	struct sha_check *c = ctx;
	wstore__sha256 *h = wstore__sha256_new();
	char *buf = malloc(HASH_BUF), hex[65];
	uint64_t off = 0;
	int rc = 0;

	if (!h || !buf) {
		rc = wstore__errc(-ENOMEM, "cannot check '%s'", c->f->path);
		goto out;
	}
	for (;;) {
		ssize_t n = pread(fd, buf, HASH_BUF, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = wstore__errc(-errno,
					  "cannot read the new data "
					  "file of '%s'",
					  c->f->path);
			goto out;
		}
		if (n == 0)
			break;
		wstore__sha256_update(h, buf, (size_t)n);
		off += (uint64_t)n;
	}
	wstore__sha256_hex(h, hex);
	if (!c->f->sha256 || strcmp(hex, c->f->sha256))
		rc = wstore__err(
			WSTORE_EVERIFY,
			"file '%s' of checkpoint '%s' does not match "
			"its SHA-256 (a damaged chunk): left as it was",
			c->f->path, c->id);
out:
	free(buf);
	wstore__sha256_free(h);
	return rc;
}

static void report(struct mig *g, const char *id, int code, uint64_t files,
		   const char *msg)
{
	if (g->o.on_checkpoint)
		g->o.on_checkpoint(id, code, files, msg,
				   g->o.on_checkpoint_ctx);
}

static int progress(struct mig *g, uint64_t n, const char *path)
{
	g->done += n;
	if (g->o.progress &&
	    g->o.progress(g->done, g->total, path, g->o.progress_ctx))
		return wstore__err(WSTORE_ECANCELED, "migrate interrupted");
	if (wstore__interrupted())
		return wstore__err(WSTORE_ECANCELED, "migrate interrupted");
	return 0;
}

/* The files of one checkpoint, its lock held (or a dry run): the number
 * converted, or the error that stopped it. */
static int convert(struct mig *g, const char *id, const wstore_manifest *m,
		   int64_t *out_files)
{
	wstore_backend *b = g->s->b;
	unsigned flags = g->o.dry_run ? WSTORE_MIGRATE_DRY_RUN : 0;
	int rc = 0;

	*out_files = 0;
	for (size_t i = 0; i < m->nfiles && rc == 0; i++) {
		const wstore__file_rec *f = &m->files[i];
		struct sha_check c = { id, f };

		if (!convertible(f))
			continue;
		rc = b->migrate_file(b, f->key, f->chunk_size, f->size, flags,
				     g->o.verify ? check_sha : NULL, &c);
		if (rc > 0) {
			++*out_files;
			g->st->files++;
			g->st->bytes += f->size;
			rc = 0;
		}
		if (rc == 0)
			rc = progress(g, f->size, f->path);
	}
	return rc;
}

static uint64_t convertible_bytes(const wstore_manifest *m)
{
	uint64_t n = 0;

	for (size_t i = 0; i < m->nfiles; i++)
		if (convertible(&m->files[i]))
			n += m->files[i].size;
	return n;
}

/* One checkpoint: 0 (done or skipped), or WSTORE_ECANCELED. */
static int migrate_id(struct mig *g, const char *id)
{
	char lockname[WSTORE__KEY_MAX], msg[1024];
	wstore__held *h = NULL;
	wstore_manifest *m = NULL;
	int64_t files = 0;
	int rc = 0;

	g->st->checkpoints++;
	snprintf(lockname, sizeof(lockname), "models/%s", id);
	if (!g->o.dry_run && (rc = wstore__lock(g->s, lockname, &h)) < 0) {
		snprintf(msg, sizeof(msg), "%s%s",
			 rc == WSTORE_EBUSY ? "busy (an import, delete, gc or "
					      "migrate holds its lock): "
					    : "",
			 wstore_last_error());
		goto skip;
	}
	rc = wstore_manifest_read(&m, g->s, id);
	if (rc == WSTORE_ENOTFOUND) { /* deleted meanwhile */
		wstore__unlock(g->s, h);
		return 0;
	}
	if (rc == 0 && strcmp(m->status, "READY"))
		rc = wstore__err(WSTORE_ENOTREADY,
				 "checkpoint '%s' is %s: left as it is "
				 "('wstore model delete' removes it)",
				 id, m->status);
	if (rc == 0)
		rc = convert(g, id, m, &files);
	snprintf(msg, sizeof(msg), "%s", rc < 0 ? wstore_last_error() : "");
	wstore_manifest_free(m);
	wstore__unlock(g->s, h);
	if (rc == WSTORE_ECANCELED)
		return rc;
	if (rc == 0) {
		if (files > 0)
			g->st->converted++;
		else
			g->st->current++;
		report(g, id, 0, (uint64_t)files, "");
		return 0;
	}
skip:
	g->st->skipped++;
	if (rc == WSTORE_EBUSY)
		g->busy = 1;
	else if (rc != WSTORE_ENOTREADY && !g->failed) {
		g->failed = rc;
		snprintf(g->why, sizeof(g->why), "%s", msg);
	}
	report(g, id, rc, (uint64_t)files, msg);
	return 0;
}

static int opts_in(wstore_migrate_options *dst,
		   const wstore_migrate_options *src)
{
	const wstore_migrate_options def = WSTORE_MIGRATE_OPTIONS_INIT;

	if (src && src->version != WSTORE_MIGRATE_OPTIONS_VERSION)
		return wstore__err(WSTORE_EINVAL,
				   "migrate options of version %u: this "
				   "library knows version %u",
				   src->version,
				   WSTORE_MIGRATE_OPTIONS_VERSION);
	*dst = src ? *src : def;
	return 0;
}

int wstore_migrate(wstore_migrate_stats *out, wstore_store *s,
		   const wstore_migrate_options *opts)
{
	wstore_migrate_stats local;
	struct mig g = { .s = s };
	char **ids = NULL;
	size_t n = 0;
	int rc;

	if (!out)
		out = &local;
	memset(out, 0, sizeof(*out));
	g.st = out;

	if ((rc = opts_in(&g.o, opts)) < 0)
		return rc;
	if (!WSTORE__HAS(s->b, migrate_file))
		return wstore__err(WSTORE_EUNSUPPORTED,
				   "nothing to migrate: the %s store has no "
				   "file layout",
				   s->b->name);
	if ((rc = wstore_list_all(&ids, &n, s)) < 0)
		return rc;
	/* the bytes to look at, for progress (manifests read unlocked) */
	for (size_t i = 0; i < n; i++) {
		wstore_manifest *m = NULL;

		if (wstore_manifest_read(&m, s, ids[i]) == 0 &&
		    !strcmp(m->status, "READY"))
			g.total += convertible_bytes(m);
		wstore_manifest_free(m);
	}
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = migrate_id(&g, ids[i]);
	wstore_strings_free(ids);
	if (rc < 0)
		return rc;
	if (g.failed)
		return wstore__err(g.failed,
				   "%" PRIu64 " checkpoint(s) left as they "
				   "were; the first: %s",
				   out->skipped, g.why);
	if (g.busy)
		return wstore__err(WSTORE_EBUSY,
				   "%" PRIu64 " checkpoint(s) left as they "
				   "were: locked; run it again to finish",
				   out->skipped);
	return 0;
}

int wstore_migrate_sized(wstore_migrate_stats *out, size_t out_size,
			 wstore_store *s, const wstore_migrate_options *opts)
{
	wstore_migrate_stats full;
	int rc;

	if (out && out_size < sizeof(full))
		return wstore__err(WSTORE_EINVAL,
				   "wstore_migrate_stats of %zu bytes is "
				   "smaller than its first layout (%zu bytes)",
				   out_size, sizeof(full));
	memset(&full, 0, sizeof(full));
	rc = wstore_migrate(&full, s, opts);
	if (out) {
		memcpy(out, &full, sizeof(full));
		memset((char *)out + sizeof(full), 0, out_size - sizeof(full));
	}
	return rc;
}
