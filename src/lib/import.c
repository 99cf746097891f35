/*
 * import.c - import a checkpoint directory into a store (the contract's
 * lifecycle, docs/format.md, "Import"):
 *
 *   scan the source and check it (index.json weight_map, safetensors
 *   headers) -> take the checkpoint's lock -> refuse a READY id, reclaim a
 *   FAILED one (or what a killed import's intent record lists) -> record
 *   this import's intent (every chunk key) -> on write-once stores remove
 *   every chunk key first (it may hold an old value) -> workers stream
 *   files chunk by chunk: read, hash, put (on the file store: write into
 *   the file's data file, or clone the source into it, and rename it into
 *   place) -> sync -> publish the READY manifest
 *   once -> drop the intent record -> add the id to both indexes.
 *
 * On any failure or cancellation the chunks written are removed and a
 * FAILED manifest lists those that could not be.  The workers that read,
 * hash and store the chunks are pipeline.c's; this file keeps the
 * lifecycle around them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "abi.h"
#include "delete.h"
#include "error.h"
#include "generation.h"
#include "import.h"
#include "index.h"
#include "intent.h"
#include "lock.h"
#include "manifest.h"
#include "names.h"
#include "pipeline.h"
#include "util.h"
#include "store.h"
#include "safetensors.h"
#include "scan.h"
#include "source.h"
#include "usage.h"

/* Read, hash and store every chunk (pipeline.c). */
static int run_workers(struct import *im)
{
	if (im->hooks && im->hooks->workers)
		return im->hooks->workers(im);

	wstore__pipeline p = { .s = im->s,
			       .scan = &im->scan,
			       .m = im->m,
			       .chunk_size = im->chunk_size,
			       .jobs = im->o->jobs,
			       .reflink = im->o->reflink,
			       .progress = im->o->progress,
			       .progress_ctx = im->o->progress_ctx,
			       .attempted = im->attempted,
			       .done = im->done,
			       .reuse = im->reuse };

	return wstore__pipeline_run(&p);
}

/* Every file named in model.safetensors.index.json's weight_map must be in
 * the source: an engine would otherwise fail on the READY checkpoint. */
static int check_index_json(const wstore__scan *scan)
{
	const wstore__scan_file *f =
		wstore__scan_find(scan, "model.safetensors.index.json");
	json_error_t jerr;
	json_t *j, *map, *v;
	const char *tensor;
	struct stat st;
	int rc = 0, fd;
	FILE *fp;

	if (!f)
		return 0;
	if ((fd = wstore__source_open(f->abs, &st)) < 0)
		return fd;
	/* through stdio: json_loadfd makes one read(2) per byte, 0.07-0.1 s
	 * for the 53 KB weight map of a 1 GiB checkpoint here */
	if (!(fp = fdopen(fd, "r"))) {
		close(fd);
		return wstore__errc(-errno, "cannot read '%s'", f->abs);
	}
	j = json_loadf(fp, JSON_REJECT_DUPLICATES, &jerr);
	fclose(fp);
	if (!j)
		return wstore__err(WSTORE_EINVAL,
				   "'%s' is not valid JSON: %s (line %d)",
				   f->abs, jerr.text, jerr.line);
	map = json_object_get(j, "weight_map");
	if (!json_is_object(map)) {
		json_decref(j);
		return wstore__err(WSTORE_EINVAL,
				   "'%s' has no weight_map object", f->abs);
	}
	json_object_foreach(map, tensor, v)
	{
		const char *file = json_string_value(v);

		if (!file) {
			rc = wstore__err(
				WSTORE_EINVAL,
				"'%s': weight_map entry '%s' is not a file name",
				f->abs, tensor);
			break;
		}
		if (!wstore__scan_find(scan, file)) {
			rc = wstore__err(
				WSTORE_EINVAL,
				"'%s' names shard '%s' (tensor '%s'), which is not in the source",
				f->abs, file, tensor);
			break;
		}
	}
	json_decref(j);
	return rc;
}

/* Check every .safetensors shard of a source before anything is written
 * (a READY checkpoint must always load). */
static int check_source_shards(const wstore__scan *scan)
{
	for (size_t i = 0; i < scan->n; i++) {
		const wstore__scan_file *f = &scan->files[i];
		size_t n = strlen(f->rel);
		struct stat st;
		int fd, rc;

		if (n < 12 || strcmp(f->rel + n - 12, ".safetensors") != 0)
			continue;
		fd = wstore__source_open(f->abs, &st);
		if (fd < 0)
			return fd;
		rc = wstore__safetensors_check_file(NULL, fd, f->abs);
		close(fd);
		if (rc < 0)
			return wstore__err(WSTORE_EINVAL, "%s",
					   wstore_last_error());
	}
	return 0;
}

static int build_manifest(struct import *im, const char *source_uri)
{
	const wstore_import_options *o = im->o;
	wstore_manifest *m = wstore__manifest_new();
	char key[WSTORE__KEY_MAX], ck[WSTORE__KEY_MAX];

	if (!m)
		return -ENOMEM;
	im->m = m;
	m->created_at = m->updated_at = (int64_t)time(NULL);
	if (wstore__set_str(&m->checkpoint_id, o->checkpoint_id) < 0 ||
	    wstore__set_str(&m->model_id, o->model_id) < 0 ||
	    wstore__set_str(&m->revision, o->revision ? o->revision : "main") <
		    0 ||
	    wstore__set_str(&m->source_uri, source_uri) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < im->scan.n; i++) {
		const wstore__scan_file *sf = &im->scan.files[i];
		wstore__file_rec *f = wstore__manifest_add_file(m, sf->rel);
		uint64_t n = (sf->size + im->chunk_size - 1) / im->chunk_size;

		if (!f)
			return -ENOMEM;
		if (wstore__path_importable(sf->rel) < 0)
			return WSTORE_EINVAL;
		wstore__key_file(key, o->checkpoint_id, sf->rel);
		if (wstore__set_str(&f->key, key) < 0 ||
		    wstore__set_str(&f->type, wstore__file_type(sf->rel)) < 0)
			return -ENOMEM;
		f->size = sf->size;
		f->chunk_size = im->chunk_size;
		for (uint64_t c = 0; c < n; c++) {
			wstore__key_chunk(ck, key, c);
			if (wstore__file_rec_add_chunk(f, ck) < 0)
				return -ENOMEM;
		}
	}
	wstore__manifest_sort(m);
	return 0;
}

static int put_manifest(wstore_store *s, const wstore_manifest *m)
{
	char key[WSTORE__KEY_MAX];
	char *json = NULL;
	size_t len = 0;
	int rc = wstore_manifest_serialize(&json, &len, m);

	if (rc < 0)
		return rc;
	wstore__key_manifest(key, m->checkpoint_id);
	rc = wstore__replace(s, key, json, len);
	free(json);
	return rc;
}

/* Failure path: remove what was written, record what could not be. */
static void leave_failed(struct import *im, int err, const char *msg)
{
	wstore_manifest *m = im->m;

	for (size_t i = 0; i < m->nfiles; i++) {
		wstore__file_rec *f = &m->files[i];
		uint64_t kept = 0;

		for (uint64_t c = 0; c < im->attempted[i]; c++)
			if (wstore__remove(im->s, f->chunks[c]) < 0)
				f->chunks[kept++] = f->chunks[c];
			else
				free(f->chunks[c]);
		for (uint64_t c = im->attempted[i]; c < f->nchunks; c++)
			free(f->chunks[c]);
		f->nchunks = kept;
		if (!im->done[i])
			wstore__set_str(&f->sha256, "");
	}
	wstore__set_str(&m->status, "FAILED");
	wstore__set_str(&m->error, msg);
	m->updated_at = (int64_t)time(NULL);
	if (put_manifest(im->s, m) < 0) {
		/* the intent record still lists every key for a later delete */
		wstore__err(
			err,
			"%s (and the FAILED manifest could not be written: %s)",
			msg, wstore_last_error());
		return;
	}
	/* the FAILED manifest lists what is left */
	wstore__intent_drop(im->s, m->checkpoint_id);
	wstore__err(err, "%s", msg);
}

int wstore_import_check(const wstore_import_options *src)
{
	wstore_import_options oc;
	const wstore_import_options *o = &oc;
	int rc;

	if (!src)
		return wstore__err(WSTORE_EINVAL, "import options missing");
	if ((rc = wstore__import_opts(&oc, src)) < 0)
		return rc;
	if (o->reserved)
		return wstore__err(
			WSTORE_EINVAL,
			"import options: replica_num is a store setting (config key replica_num), not an import option");
	if (wstore_validate_checkpoint_id(o->checkpoint_id) < 0)
		return WSTORE_EINVAL;
	if (!o->model_id || !*o->model_id)
		return wstore__err(WSTORE_EINVAL, "model id must not be empty");
	if (!wstore__utf8_valid(o->model_id))
		return wstore__err(WSTORE_EINVAL,
				   "model id '%s' is not valid UTF-8",
				   o->model_id);
	if (o->revision && !*o->revision)
		return wstore__err(WSTORE_EINVAL, "revision must not be empty");
	if (o->revision && !wstore__utf8_valid(o->revision))
		return wstore__err(WSTORE_EINVAL,
				   "revision '%s' is not valid UTF-8",
				   o->revision);
	if (o->chunk_size > (4ull << 30))
		return wstore__err(WSTORE_EINVAL,
				   "chunk size %llu is larger than 4 GiB",
				   (unsigned long long)o->chunk_size);
	if (o->reflink > WSTORE_REFLINK_NEVER)
		return wstore__err(
			WSTORE_EINVAL,
			"import options: reflink %u is not auto (0), "
			"always (1) or never (2)",
			(unsigned)o->reflink);
	return 0;
}

static int add_to_indexes(wstore_store *s, const wstore_manifest *m)
{
	char key[WSTORE__KEY_MAX];
	int rc;

	wstore__key_models_index(key);
	rc = wstore__index_add(s, key, m->checkpoint_id, NULL);
	if (rc == 0) {
		wstore__key_model_index(key, m->model_id);
		rc = wstore__index_add(s, key, m->checkpoint_id, m->model_id);
	}
	return rc;
}

/*
 * With the lock held: a READY id is refused (after making sure it is in
 * the indexes, which a crash right after publishing can leave out); a
 * FAILED or unreadable one is deleted so the import can start clean.
 */
int wstore__import_claim(wstore_store *s, const char *id)
{
	wstore_manifest *old = NULL;
	int rc = wstore_manifest_read(&old, s, id);

	if (rc == WSTORE_ENOTFOUND)
		/* what a killed import's intent record lists */
		return rc = wstore__intent_reclaim(s, id), rc < 0 ? rc : 0;
	if (rc == 0 && strcmp(old->status, "READY") == 0) {
		add_to_indexes(s, old);
		wstore__intent_drop(s, id);
		wstore_manifest_free(old);
		return wstore__err(
			WSTORE_EEXISTS,
			"checkpoint '%s' already exists and is READY; delete it first",
			id);
	}
	wstore_manifest_free(old);
	if (rc < 0 && rc != WSTORE_ECORRUPT)
		return rc;
	rc = wstore__delete_unlocked(s, id);
	if (rc == WSTORE_ENOTFOUND) {
		wstore__clear_err();
		rc = 0;
	}
	return rc;
}

/* On a store that may evict keys, the chunks put a moment ago may be gone
 * already: check each one's size before a READY manifest says they are
 * there. */
static int check_still_there(wstore_store *s, const wstore_manifest *m)
{
	for (size_t i = 0; i < m->nfiles; i++)
		for (uint64_t c = 0; c < m->files[i].nchunks; c++) {
			const char *k = m->files[i].chunks[c];
			uint64_t want = 0, got = 0;
			int rc = wstore__chunk_len(&want, &m->files[i], c);

			if (rc == 0)
				rc = s->b->size(s->b, k, &got);
			if (rc == WSTORE_ENOTFOUND || (rc == 0 && got != want))
				return wstore__err(
					WSTORE_EUNAVAIL,
					"chunk '%s' of '%s' is gone from the store right after it was written (the store evicts keys, or lost them in a failover)",
					k, m->files[i].path);
			if (rc < 0)
				return rc;
		}
	return 0;
}

/*
 * On a write-once store, remove every key the import will write (forced;
 * absent keys are the common case and cost one round trip each), so that
 * no put meets an old value it would silently keep.
 */
static int clear_keys(struct import *im)
{
	const wstore_manifest *m = im->m;

	if (!(im->s->b->flags & WSTORE_BACKEND_WRITE_ONCE))
		return 0;
	for (size_t i = 0; i < m->nfiles; i++)
		for (uint64_t c = 0; !im->done[i] && c < m->files[i].nchunks;
		     c++) {
			int rc = wstore__remove(im->s, m->files[i].chunks[c]);

			if (rc < 0)
				return wstore__err(
					rc, "cannot clear chunk '%s': %s",
					m->files[i].chunks[c],
					wstore_last_error());
		}
	return 0;
}

static int import_locked(struct import *im, const char *source_uri)
{
	const wstore__import_hooks *h = im->hooks;
	int rc = h && h->claim
			 ? h->claim(im)
			 : wstore__import_claim(im->s, im->o->checkpoint_id);

	if (rc < 0)
		return rc;
	rc = build_manifest(im, source_uri);
	if (rc < 0)
		return rc;
	im->attempted =
		calloc(im->scan.n ? im->scan.n : 1, sizeof(*im->attempted));
	im->done = calloc(im->scan.n ? im->scan.n : 1, 1);
	if (!im->attempted || !im->done)
		return -ENOMEM;
	/* before the first chunk: what a killed import leaves is findable */
	rc = h && h->begin ? h->begin(im)
			   : wstore__intent_write(im->s, im->m, im->chunk_size);
	/* and a new generation: readers of an earlier import of the id
	 * notice it before they hand out a byte of this one's */
	if (rc == 0)
		rc = wstore__gen_write(im->s, im->m);
	if (rc < 0)
		return rc;
	/* the files held now, so that none is stored twice (a directory
	 * import has no use for them on a store of chunks: it learns a
	 * file's hash only as it stores it) */
	if (h || wstore__whole_files(im->s))
		rc = wstore__reuse_new(&im->reuse, im->s, im->o->checkpoint_id);
	if (rc == 0)
		rc = clear_keys(im);
	if (rc == 0)
		rc = run_workers(im);
	/* chunks must be durable before the manifest that makes them visible */
	if (rc == 0 && im->s->b->sync)
		rc = im->s->b->sync(im->s->b);
	if (rc == 0 && (im->s->b->flags & WSTORE_BACKEND_MAY_EVICT))
		rc = check_still_there(im->s, im->m);
	/* a lock whose renewal failed long enough for another process to
	 * take it over is no longer ours: publishing could race its import */
	if (rc == 0 && wstore__lock_lost(im->lock))
		rc = wstore__err(WSTORE_EBUSY,
				 "checkpoint '%s': the import's lock was taken "
				 "over while it ran; nothing was published",
				 im->o->checkpoint_id);
	if (rc == 0) {
		wstore__set_str(&im->m->status, "READY");
		wstore__set_str(&im->m->error, NULL);
		im->m->updated_at = (int64_t)time(NULL);
		rc = put_manifest(im->s, im->m);
	}
	/* and once more after: writing the manifest may have evicted some */
	if (rc == 0 && (im->s->b->flags & WSTORE_BACKEND_MAY_EVICT))
		rc = check_still_there(im->s, im->m);
	if (rc < 0) {
		char msg[1024];

		snprintf(msg, sizeof(msg), "%s", wstore_last_error());
		leave_failed(im, rc, msg);
		return rc;
	}
	/* the READY manifest lists every chunk now; a leftover record is
	 * harmless (delete and gc drop it), so a failure here is not one */
	if (wstore__intent_drop(im->s, im->o->checkpoint_id) < 0)
		wstore__clear_err();
	rc = add_to_indexes(im->s, im->m);
	if (rc < 0)
		return wstore__err(
			rc,
			"checkpoint '%s' is READY but %s; run the import again to repair the index",
			im->o->checkpoint_id, wstore_last_error());
	return 0;
}

int wstore_import(wstore_store *s, const wstore_import_options *o)
{
	return wstore_import_from(s, o, NULL);
}

int wstore_import_from(wstore_store *s, const wstore_import_options *given,
		       const wstore_source *src)
{
	wstore_import_options oc;
	const wstore_import_options *o = &oc;
	struct import im = { .s = s, .o = o };
	char *source_uri = NULL;
	char *hub = NULL;
	int rc = wstore_import_check(given);

	if (rc < 0 || (rc = wstore__import_opts(&oc, given)) < 0)
		return rc;
	im.chunk_size =
		o->chunk_size ? o->chunk_size : WSTORE_DEFAULT_CHUNK_SIZE;
	rc = wstore__source_scan(&im.scan, &hub, src, o);
	for (size_t i = 0; rc == 0 && i < im.scan.n; i++)
		if (wstore__path_importable(im.scan.files[i].rel) < 0)
			rc = wstore__err(WSTORE_EINVAL, "source file '%s': %s",
					 im.scan.files[i].abs,
					 wstore_last_error());
	/* a store of chunks has no file to clone into: refuse before any
	 * write rather than fail on the first file */
	if (rc == 0 && o->reflink == WSTORE_REFLINK_ALWAYS &&
	    !wstore__whole_files(s))
		rc = wstore__err(WSTORE_EUNSUPPORTED,
				 "--reflink always: the %s store keeps chunks, "
				 "not files, and cannot clone a source file",
				 s->b->name ? s->b->name : "");
	if (rc == 0)
		rc = check_index_json(&im.scan);
	if (rc == 0)
		rc = check_source_shards(&im.scan);
	if (rc == 0) {
		source_uri = realpath(hub ? hub : o->source, NULL);
		if (!source_uri)
			rc = wstore__errc(-errno, "cannot resolve source '%s'",
					  o->source);
	}
	if (rc == 0)
		rc = wstore__import_run(&im, source_uri);
	free(source_uri);
	free(hub);
	wstore__import_free(&im);
	return rc;
}

int wstore__import_run(struct import *im, const char *source_uri)
{
	const wstore_import_options *o = im->o;
	char lockname[WSTORE__KEY_MAX];
	wstore__held *token = NULL;
	int rc = wstore__make_room(im->s, o->checkpoint_id, im->scan.total,
				   o->version >= 2 ? o->on_evict : NULL,
				   o->version >= 2 ? o->on_evict_ctx : NULL);

	snprintf(lockname, sizeof(lockname), "models/%s", o->checkpoint_id);
	if (rc == 0) {
		rc = wstore__lock(im->s, lockname, &token);
		if (rc == WSTORE_EBUSY)
			wstore__err(
				rc,
				"checkpoint '%s' is busy (another import or a delete is running): %s",
				o->checkpoint_id, wstore_last_error());
	}
	if (rc == 0) {
		im->lock = token;
		rc = import_locked(im, source_uri);
		wstore__unlock(im->s, token);
		im->lock = NULL;
	}
	return rc;
}

void wstore__import_free(struct import *im)
{
	free(im->attempted);
	free(im->done);
	wstore__reuse_free(im->reuse);
	im->reuse = NULL;
	wstore_manifest_free(im->m);
	wstore__scan_free(&im->scan);
	im->attempted = NULL;
	im->done = NULL;
	im->m = NULL;
}
