/*
 * delete.c - delete a checkpoint (docs/format.md, "Delete"): read the
 * manifest; take the id out of both indexes; stop it saying READY; once
 * no reader is waited for, remove its generation record (readers that
 * opened it fail from then on: generation.c); remove every chunk listed,
 * then every chunk an import intent record lists (intent.c) and the
 * record; remove the manifest last.  "Not found" is success at every step, so a
 * delete interrupted at any point is finished by running it again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"
#include "../common/clock.h"
#include "delete.h"
#include "error.h"
#include "generation.h"
#include "index.h"
#include "intent.h"
#include "lock.h"
#include "manifest.h"
#include "names.h"
#include "util.h"
#include "store.h"
#include "lease_int.h"
#include "meta.h"
#include "wstore/lease.h"

/* An unreadable manifest names no chunks: on stores that can list, remove
 * every key under the checkpoint's prefix instead. */
static int delete_corrupt(wstore_store *s, const char *id, const char *mkey)
{
	char key[WSTORE__KEY_MAX];
	int rc;

	wstore__key_models_index(key);
	rc = wstore__index_remove(s, key, id, NULL);
	if (rc < 0)
		return rc;
	rc = wstore__sweep_ckpt(s, id);
	return rc < 0 ? rc : wstore__remove(s, mkey);
}

/* Only keys under the checkpoint's own prefix are removed: chunk keys are
 * opaque to readers, and a hand-made manifest naming another checkpoint's
 * chunks must not make a delete destroy them. */
static int delete_chunks(wstore_store *s, const wstore_manifest *m)
{
	char prefix[WSTORE__KEY_MAX];
	size_t plen;

	wstore__key_ckpt_prefix(prefix, m->checkpoint_id);
	plen = strlen(prefix);
	for (size_t i = 0; i < m->nfiles; i++)
		for (uint64_t c = 0; c < m->files[i].nchunks; c++) {
			int rc;

			if (strncmp(m->files[i].chunks[c], prefix, plen) != 0)
				continue;
			rc = wstore__remove(s, m->files[i].chunks[c]);

			if (rc < 0)
				return wstore__err(
					rc, "cannot remove chunk '%s': %s",
					m->files[i].chunks[c],
					wstore_last_error());
		}
	return 0;
}

/*
 * Before any chunk goes, the manifest stops saying READY: a delete killed
 * half-way must not leave a READY manifest whose chunks are partly gone
 * (FAILED is the contract's only other status; re-running delete, or an
 * import of the id, finishes the job).
 */
static int mark_deleting(wstore_store *s, wstore_manifest *m, const char *mkey,
			 const char *why)
{
	char *json = NULL;
	size_t len = 0;
	int rc;

	if (strcmp(m->status, "READY") != 0)
		return 0;
	if (wstore__set_str(&m->status, "FAILED") < 0 ||
	    wstore__set_str(&m->error, why) < 0)
		return -ENOMEM;
	m->updated_at = (int64_t)time(NULL);
	rc = wstore_manifest_serialize(&json, &len, m);
	if (rc == 0)
		rc = wstore__replace(s, mkey, json, len);
	free(json);
	return rc;
}

/*
 * Wait until id has no live read lease; deadline is a monotonic deadline
 * (clock.h; NULL: no limit).  WSTORE_EBUSY naming the holders once it has
 * passed.
 */
static int drain(wstore_store *s, const char *id,
		 const struct timespec *deadline,
		 const wstore_delete_options *o)
{
	char desc[1024];
	size_t n;

	for (;;) {
		int rc = wstore__leases_describe(s, id, &n, desc, sizeof(desc));

		if (rc < 0)
			return rc;
		if (n == 0)
			return 0;
		if (deadline && wclock_passed(deadline))
			return wstore__err(WSTORE_EBUSY,
					   "checkpoint '%s' is being read "
					   "(%zu lease%s): %s",
					   id, n, n == 1 ? "" : "s", desc);
		if (o && o->progress && o->progress(0, 0, "", o->progress_ctx))
			return wstore__err(WSTORE_ECANCELED,
					   "delete of '%s' interrupted while "
					   "waiting for readers: %s",
					   id, desc);
		wclock_sleep_ms(100); /* poll: leases end in other processes */
	}
}

/* Undo steps 2 and 3 after a wait for readers timed out: the manifest
 * as it was, the id back in both indexes. */
static int restore(int code, wstore_store *s, const wstore_manifest *m,
		   const char *mkey, const char *json, size_t len)
{
	char key[WSTORE__KEY_MAX], saved[1024];
	int rc;

	snprintf(saved, sizeof(saved), "%s", wstore_last_error());
	rc = wstore__replace(s, mkey, json, len);
	if (rc == 0 && strcmp(m->status, "READY") == 0) {
		wstore__key_models_index(key);
		rc = wstore__index_add(s, key, m->checkpoint_id, NULL);
		wstore__key_model_index(key, m->model_id);
		if (rc == 0)
			rc = wstore__index_add(s, key, m->checkpoint_id,
					       m->model_id);
	}
	if (rc < 0)
		return wstore__err(rc,
				   "%s (and putting it back failed: %s; "
				   "run the delete again)",
				   saved, wstore_last_error());
	return wstore__err(code, "%s", saved);
}

/* What goes with the checkpoint besides its chunks: pin, last-read time
 * and lease records (a forced delete leaves live readers none). */
static int delete_extras(wstore_store *s, const char *id)
{
	int rc = wstore__gen_remove(s, id);

	if (rc == 0)
		rc = wstore__meta_remove(s, id);

	return rc < 0 ? rc : wstore__leases_purge(s, id);
}

/*
 * The delete itself, under the lock.  o == NULL (import reclaiming a
 * FAILED id) checks no lease.  Otherwise, once the manifest stops saying
 * READY no new reader starts, and every reader that saw READY took its
 * lease before: so a check here sees them all.  With wait_ms the delete
 * waits for them; else, or on timeout, it puts everything back.
 */
static int delete_locked(wstore_store *s, const char *id,
			 const wstore_delete_options *o)
{
	char mkey[WSTORE__KEY_MAX], key[WSTORE__KEY_MAX], *orig = NULL;
	struct timespec deadline = wclock_deadline_in(
		o && o->wait_ms > 0 ? (uint64_t)o->wait_ms : 0);
	wstore_manifest *m = NULL;
	size_t olen = 0;
	int rc;

	wstore__key_manifest(mkey, id);
	rc = wstore_manifest_read(&m, s, id);
	if (rc == WSTORE_ECORRUPT) {
		rc = wstore__intent_reclaim(s, id);
		return rc < 0 ? rc : delete_corrupt(s, id, mkey);
	}
	if (rc == WSTORE_ENOTFOUND) {
		/* no manifest: drop a stale index entry if any, and what a
		 * killed import's intent record lists */
		wstore__key_models_index(key);
		rc = wstore__index_remove(s, key, id, NULL);
		if (rc == 0)
			rc = wstore__intent_reclaim(s, id);
		/* what a delete interrupted after its manifest went */
		if (rc >= 0)
			delete_extras(s, id);
		/* a killed import's chunks were all there was */
		if (rc == 1)
			return 0;
		return rc < 0 ? rc
			      : wstore__err(WSTORE_ENOTFOUND,
					    "checkpoint '%s' not found", id);
	}
	if (rc < 0)
		return rc;
	rc = wstore_manifest_serialize(&orig, &olen, m);
	wstore__key_models_index(key);
	if (rc == 0)
		rc = wstore__index_remove(s, key, id, NULL);
	if (rc == 0) {
		wstore__key_model_index(key, m->model_id);
		rc = wstore__index_remove(s, key, id, m->model_id);
	}
	if (rc == 0) {
		wstore_manifest *copy = NULL;

		/* mark_deleting edits m: keep the original for restore */
		rc = wstore_manifest_parse(&copy, orig, olen);
		if (rc == 0)
			rc = mark_deleting(s, copy, mkey,
					   o && !o->force
						   ? WSTORE_DELETE_WAITING_ERROR
						   : "delete interrupted; run "
						     "it again");
		wstore_manifest_free(copy);
	}
	if (rc == 0 && o && !o->force) {
		rc = drain(s, id, o->wait_ms < 0 ? NULL : &deadline, o);
		if (rc == WSTORE_EBUSY || rc == WSTORE_ECANCELED)
			rc = restore(rc, s, m, mkey, orig, olen);
	}
	/* readers that opened it fail from their next read on, before a
	 * chunk goes (generation.c) */
	if (rc == 0)
		rc = wstore__gen_remove(s, id);
	if (rc == 0)
		rc = delete_chunks(s, m);
	if (rc == 0)
		rc = wstore__intent_reclaim(s, id);
	if (rc >= 0)
		rc = delete_extras(s, id);
	if (rc == 0)
		rc = wstore__remove(s, mkey);
	free(orig);
	wstore_manifest_free(m);
	return rc;
}

static int is_full(int rc)
{
	return rc == -ENOSPC || rc == -EDQUOT;
}

/*
 * The store is full, so even the lock record cannot be written.  Deleting
 * is how space is freed, so free some without writing anything: remove
 * the manifest first (the checkpoint is then gone for every reader, never
 * READY with chunks missing), which makes room for the lock record; then,
 * under the lock as always, remove the chunks the manifest listed (held in
 * memory), and only then, with space again, edit the indexes.  Interrupted
 * after the manifest went, the chunks are orphans that 'admin gc' removes.
 */
static int delete_when_full(wstore_store *s, const char *id,
			    const char *lockname, int full_rc,
			    const wstore_delete_options *o)
{
	char mkey[WSTORE__KEY_MAX], key[WSTORE__KEY_MAX];
	wstore__held *token = NULL;
	char why[512];
	wstore_manifest *m = NULL;
	struct timespec deadline =
		wclock_deadline_in(o->wait_ms > 0 ? (uint64_t)o->wait_ms : 0);
	int rc;

	/* leases are only read here: readers go first, full or not */
	if (!o->force &&
	    (rc = drain(s, id, o->wait_ms < 0 ? NULL : &deadline, o)) < 0)
		return rc;
	rc = wstore_manifest_read(&m, s, id);
	snprintf(why, sizeof(why), "%s", wstore_last_error());
	if (rc == WSTORE_ENOTFOUND)
		return wstore__err(rc, "checkpoint '%s' not found", id);
	if (rc < 0 && rc != WSTORE_ECORRUPT)
		return wstore__err(full_rc, "%s", why);
	wstore__key_manifest(mkey, id);
	rc = wstore__remove(s, mkey);
	if (rc == 0)
		rc = wstore__gen_remove(s, id);
	if (rc == 0)
		rc = wstore__lock(s, lockname, &token);
	if (rc == WSTORE_EBUSY)
		rc = wstore__err(
			rc,
			"checkpoint '%s' is busy (an import or delete is running): %s",
			id, wstore_last_error());
	else if (is_full(rc))
		rc = wstore__err(
			rc,
			"the store is full: checkpoint '%s' is gone (its manifest was removed) but its chunks are not, since even its lock cannot be written (%s); free some space and run 'wstore admin gc'",
			id, wstore_last_error());
	if (rc < 0) {
		wstore_manifest_free(m);
		return rc;
	}
	/* a corrupt manifest named no chunks: sweep the prefix */
	rc = m ? delete_chunks(s, m) : wstore__sweep_ckpt(s, id);
	if (rc == 0) {
		wstore__key_models_index(key);
		rc = wstore__index_remove(s, key, id, NULL);
	}
	if (rc == 0 && m) {
		wstore__key_model_index(key, m->model_id);
		rc = wstore__index_remove(s, key, id, m->model_id);
	}
	if (rc == 0)
		delete_extras(s, id);
	wstore__unlock(s, token);
	wstore_manifest_free(m);
	return rc;
}

int wstore__delete_unlocked(wstore_store *s, const char *id)
{
	return delete_locked(s, id, NULL);
}

int wstore_delete(wstore_store *s, const char *id)
{
	return wstore_delete_ext(s, id, NULL);
}

int wstore_delete_ext(wstore_store *s, const char *id,
		      const wstore_delete_options *src)
{
	wstore_delete_options oc;
	const wstore_delete_options *o = &oc;
	char lockname[WSTORE__KEY_MAX];
	struct timespec now = wclock_deadline_in(0);
	wstore__held *token = NULL;
	int rc = wstore_validate_checkpoint_id(id);

	if (rc < 0 || (rc = wstore__delete_opts(&oc, src)) < 0)
		return rc;
	snprintf(lockname, sizeof(lockname), "models/%s", id);
	rc = wstore__lock(s, lockname, &token);
	if (is_full(rc))
		return delete_when_full(s, id, lockname, rc, o);
	if (rc == WSTORE_EBUSY)
		return wstore__err(
			rc,
			"checkpoint '%s' is busy (an import or delete is running): %s",
			id, wstore_last_error());
	if (rc < 0)
		return rc;
	/* refuse before touching anything when there is no waiting */
	if (!o->force && o->wait_ms == 0)
		rc = drain(s, id, &now, NULL);
	if (rc == 0)
		rc = delete_locked(s, id, o);
	wstore__unlock(s, token);
	return rc;
}
