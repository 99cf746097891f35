/*
 * tree.c - the tree of entries and its refresh.
 *
 * Each READY checkpoint is an "entry": its manifest, an open
 * wstore_checkpoint and a node array built from the file paths (node 0 is
 * the checkpoint's directory; directories are synthesized from paths).
 * The table of entries (wmount.tab, by entry id, and wmount.live, sorted
 * by checkpoint id) is guarded by wmount.lock.
 *
 * Refresh.  A thread re-reads the index and the manifests each
 * opts.refresh seconds (not one that a read's check found unchanged
 * during the same pass), with the table unlocked; only the swap of what
 * changed takes the write lock.  A checkpoint that left the index,
 * stopped being READY or whose manifest bytes changed is retired: marked
 * dead (reads on open files fail with EIO from then on), dropped from the
 * table (lookups give ENOENT), its chunks dropped from the cache and its
 * inodes invalidated in the kernel so the page cache cannot keep serving
 * it.  A listing or a manifest that could not be read retires nothing:
 * the tree stays as it was until the store answers.  An entry is freed
 * when the last open file on it is released.
 *
 * Also here: checking that an entry is still the checkpoint in the store
 * (after a fetch, at open), and the read lease an entry holds while files
 * of it are open.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "../common/clock.h"
#include "mount.h"

static void entry_free(struct entry *e)
{
	if (!e)
		return;
	for (uint32_t i = 0; i < e->nnodes; i++) {
		free(e->nodes[i].name);
		free(e->nodes[i].kids);
	}
	free(e->nodes);
	free(e->kidx);
	wstore_checkpoint_free(e->ck);
	wstore_lease_release(e->lease);
	free(e->mbytes);
	free(e->id);
	pthread_mutex_destroy(&e->vlock);
	pthread_mutex_destroy(&e->llock);
	free(e);
}

void entry_get(struct entry *e)
{
	atomic_fetch_add(&e->refs, 1);
}

void entry_put(struct entry *e)
{
	if (e && atomic_fetch_sub(&e->refs, 1) == 1)
		entry_free(e);
}

/* FNV-1a of the name, mixed with the parent's node number. */
static size_t kid_hash(uint32_t dir, const char *name, size_t len)
{
	uint64_t h = 14695981039346656037ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 1099511628211ull;
	}
	h ^= (uint64_t)dir * 0x9E3779B97F4A7C15ull;
	return (size_t)(h ^ (h >> 29));
}

/* The node named name (len bytes) in directory dir, or -1: one probe of
 * the entry's name index on average (a flat directory of many files is
 * built and looked up in linear time). */
int64_t find_kid(const struct entry *e, uint32_t dir, const char *name,
		 size_t len)
{
	size_t mask = (size_t)e->kcap - 1, i;

	if (!e->kcap)
		return -1;
	for (i = kid_hash(dir, name, len) & mask; e->kidx[i];
	     i = (i + 1) & mask) {
		const struct node *n = &e->nodes[e->kidx[i] - 1];

		if (n->parent == dir && !strncmp(n->name, name, len) &&
		    n->name[len] == '\0')
			return e->kidx[i] - 1;
	}
	return -1;
}

static void kid_insert(struct entry *e, uint32_t node)
{
	const struct node *n = &e->nodes[node];
	size_t mask = (size_t)e->kcap - 1;
	size_t i = kid_hash(n->parent, n->name, strlen(n->name)) & mask;

	while (e->kidx[i])
		i = (i + 1) & mask;
	e->kidx[i] = node + 1;
}

/* Room in the name index for node number nnodes (grown and rebuilt at
 * half full); -1 out of memory. */
static int kid_room(struct entry *e)
{
	uint32_t nc = e->kcap ? e->kcap : 64;
	uint32_t *nk;

	while ((uint64_t)(e->nnodes + 1) * 2 > nc)
		nc *= 2;
	if (nc == e->kcap)
		return 0;
	if (!(nk = calloc(nc, sizeof(*nk))))
		return -1;
	free(e->kidx);
	e->kidx = nk;
	e->kcap = nc;
	for (uint32_t k = 1; k < e->nnodes; k++) /* node 0 has no parent */
		kid_insert(e, k);
	return 0;
}

static int64_t add_node(struct entry *e, uint32_t *cap, uint32_t parent,
			const char *name, size_t len, int64_t file,
			uint64_t size)
{
	struct node *n, *p;

	if (e->nnodes == *cap) {
		uint32_t nc = *cap ? *cap * 2 : 16;
		struct node *nn = realloc(e->nodes, nc * sizeof(*nn));

		if (!nn)
			return -1;
		e->nodes = nn;
		*cap = nc;
	}
	n = &e->nodes[e->nnodes];
	memset(n, 0, sizeof(*n));
	if (!(n->name = strndup(name, len)))
		return -1;
	n->parent = parent;
	n->is_dir = file < 0;
	n->file = file;
	n->size = size;
	if (e->nnodes == 0)
		return e->nnodes++;
	p = &e->nodes[parent];
	if (p->nkids == p->capkids) {
		uint32_t nc = p->capkids ? p->capkids * 2 : 8;
		uint32_t *nk = realloc(p->kids, nc * sizeof(*nk));

		if (!nk) {
			free(n->name);
			return -1;
		}
		p->kids = nk;
		p->capkids = nc;
	}
	if (kid_room(e) < 0) {
		free(n->name);
		return -1;
	}
	p->kids[p->nkids++] = e->nnodes;
	kid_insert(e, e->nnodes);
	return e->nnodes++;
}

/* Nodes of every file path, directories made on the way. */
static int build_nodes(struct entry *e, const wstore_manifest *man)
{
	size_t nf = wstore_manifest_file_count(man);
	uint32_t cap = 0;

	if (add_node(e, &cap, 0, e->id, strlen(e->id), -1, 0) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < nf; i++) {
		wstore_file_info fi;
		const char *p, *slash;
		int64_t dir = 0, k;

		if (wstore_manifest_file(&fi, man, i) < 0)
			return -EINVAL;
		for (p = fi.path; (slash = strchr(p, '/')); p = slash + 1) {
			k = find_kid(e, (uint32_t)dir, p, (size_t)(slash - p));
			if (k < 0)
				k = add_node(e, &cap, (uint32_t)dir, p,
					     (size_t)(slash - p), -1, 0);
			if (k < 0)
				return -ENOMEM;
			if (!e->nodes[k].is_dir)
				return -EINVAL;
			dir = k;
		}
		if (find_kid(e, (uint32_t)dir, p, strlen(p)) >= 0)
			return -EINVAL;
		if (add_node(e, &cap, (uint32_t)dir, p, strlen(p), (int64_t)i,
			     fi.size) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* A new entry for checkpoint id whose manifest serializes to mbytes
 * (taken over on success). */
static int entry_new(struct wmount *m, struct entry **out, const char *id,
		     char *mbytes, size_t mlen)
{
	wstore_checkpoint_options ckopts = WSTORE_CHECKPOINT_OPTIONS_INIT;
	struct entry *e = calloc(1, sizeof(*e));
	int rc;

	*out = NULL;
	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->vlock, NULL);
	pthread_mutex_init(&e->llock, NULL);
	atomic_init(&e->refs, 1);
	atomic_init(&e->dead, 0);
	atomic_init(&e->draining, 0);
	if (!(e->id = strdup(id))) {
		entry_free(e);
		return -ENOMEM;
	}
	/* leased only while a file of it is open (lease_open) */
	ckopts.no_lease = 1;
	if ((rc = wstore_checkpoint_open_ext(&e->ck, m->s, id, &ckopts)) < 0) {
		entry_free(e);
		return rc;
	}
	e->mtime =
		wstore_manifest_updated_at(wstore_checkpoint_manifest(e->ck));
	if ((rc = build_nodes(e, wstore_checkpoint_manifest(e->ck))) < 0) {
		mlog(m, LOG_ERR, "cannot map the files of checkpoint '%s': %s",
		     id,
		     rc == -ENOMEM ? "out of memory"
				   : "a path is both a file and a directory");
		entry_free(e);
		return rc;
	}
	e->mbytes = mbytes;
	e->mlen = mlen;
	e->validated = wclock_mono_ms();
	*out = e;
	return 0;
}

/* Manifest of id serialized, if it is READY; 1 if it is not (or absent). */
static int read_manifest_bytes(struct wmount *m, const char *id, char **out,
			       size_t *out_len)
{
	wstore_manifest *man;
	int rc;

	*out = NULL;
	rc = wstore_manifest_read(&man, m->s, id);
	if (rc == WSTORE_ENOTFOUND)
		return 1;
	if (rc < 0)
		return rc;
	if (strcmp(wstore_manifest_status(man), "READY") != 0) {
		/* a delete waiting for readers: its chunks stay while we
		 * hold a lease (2), else it is gone (1) */
		rc = wstore_manifest_error(man) &&
				     !strcmp(wstore_manifest_error(man),
					     WSTORE_DELETE_WAITING_ERROR)
			     ? 2
			     : 1;
		wstore_manifest_free(man);
		return rc;
	}
	rc = wstore_manifest_serialize(out, out_len, man);
	wstore_manifest_free(man);
	return rc;
}

/* A check of e that found it unchanged started at or after t. */
static int validated_since(struct entry *e, uint64_t t)
{
	int r;

	pthread_mutex_lock(&e->vlock);
	r = e->validated >= t;
	pthread_mutex_unlock(&e->vlock);
	return r;
}

/* A check that started at t found e unchanged. */
static void mark_validated(struct entry *e, uint64_t t)
{
	pthread_mutex_lock(&e->vlock);
	if (t > e->validated)
		e->validated = t;
	pthread_mutex_unlock(&e->vlock);
}

/*
 * A read of file path of e (what: "read", "open") failed with rc from the
 * library: log it and give the negative errno the read answers with.
 * WSTORE_ECHANGED says the checkpoint e opened was deleted or replaced by
 * another import of the same id: e is dead from then on (its reads fail
 * with EIO, never bytes of the other import), and the next refresh makes
 * a new entry for what the store now holds, even if its manifest reads
 * the same.
 */
int entry_read_failed(struct wmount *m, struct entry *e, const char *what,
		      const char *path, int rc)
{
	if (rc == -ENOMEM)
		return -ENOMEM;
	if (rc == WSTORE_ECHANGED) {
		if (!atomic_exchange(&e->dead, 1))
			mlog(m, LOG_WARNING,
			     "checkpoint '%s' was deleted or replaced in the "
			     "store: its open files fail with EIO",
			     e->id);
		return -EIO;
	}
	mlog(m, LOG_ERR, "cannot %s '%s' of '%s': %s", what, path, e->id,
	     *wstore_last_error() ? wstore_last_error() : wstore_strerror(rc));
	return -EIO;
}

/* Files of e are open, so e holds a read lease (lease_open). */
static int entry_leased(struct entry *e)
{
	int n;

	pthread_mutex_lock(&e->llock);
	n = e->nopen > 0;
	pthread_mutex_unlock(&e->llock);
	return n;
}

/*
 * Is e still the checkpoint it was?  A delete that waits for the readers
 * has made the manifest FAILED, but while e holds a lease the chunks stay
 * as they were: files already open go on reading (draining).  A new open
 * passes draining = 0 and needs READY.
 */
int entry_check(struct wmount *m, struct entry *e, uint64_t t0, int draining)
{
	uint64_t t1;
	char *bytes;
	size_t len;
	int rc;

	pthread_mutex_lock(&e->vlock);
	rc = e->validated > t0;
	pthread_mutex_unlock(&e->vlock);
	if (rc)
		return 0;
	t1 = wclock_mono_ms();
	/* the manifest the handle read, still in the store: no parse */
	if (wstore_checkpoint_unchanged(e->ck) == 1) {
		mark_validated(e, t1);
		return 0;
	}
	rc = read_manifest_bytes(m, e->id, &bytes, &len);
	if (rc < 0) {
		mlog(m, LOG_ERR, "cannot re-read the manifest of '%s': %s",
		     e->id, wstore_last_error());
		return -EIO;
	}
	if (rc == 2 && draining && entry_leased(e))
		return 0;
	if (rc >= 1) {
		mlog(m, LOG_WARNING, "checkpoint '%s' is gone or not READY",
		     e->id);
		atomic_store(&e->dead, 1);
		return -ENOENT;
	}
	rc = len != e->mlen || memcmp(bytes, e->mbytes, len) != 0;
	free(bytes);
	if (rc) {
		mlog(m, LOG_WARNING, "checkpoint '%s' changed in the store",
		     e->id);
		atomic_store(&e->dead, 1);
		return -EIO;
	}
	mark_validated(e, t1);
	return 0;
}

/*
 * After a fetch that started at t0 (wclock_mono_ms): is e still the
 * checkpoint in the store?  0 if so; -ENOENT if gone or no longer READY,
 * -EIO if it changed.
 */
int entry_validate(struct wmount *m, struct entry *e, uint64_t t0)
{
	return entry_check(m, e, t0, 1);
}

/* ---- refresh ------------------------------------------------------------ */

struct entry *live_find(struct wmount *m, const char *id)
{
	size_t lo = 0, hi = m->nlive;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(m->live[mid]->id, id);

		if (c == 0)
			return m->live[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int tab_add(struct wmount *m, struct entry *e)
{
	if (m->ntab == m->captab) {
		uint32_t nc = m->captab ? m->captab * 2 : 64;
		struct entry **nt = realloc(m->tab, nc * sizeof(*nt));

		if (!nt)
			return -ENOMEM;
		m->tab = nt;
		m->captab = nc;
	}
	e->eid = m->ntab;
	m->tab[m->ntab++] = e;
	return 0;
}

/* Tell the kernel to forget what it holds of a retired entry (not once
 * the mount is going away: the session's fd is being closed). */
static void kernel_forget(struct wmount *m, struct entry *e)
{
	if (!m->se || atomic_load(&m->unmounting))
		return;
	if (!m->o.checkpoint)
		fuse_lowlevel_notify_inval_entry(m->se, FUSE_ROOT_ID, e->id,
						 strlen(e->id));
	else
		fuse_lowlevel_notify_inval_inode(m->se, FUSE_ROOT_ID, 0, 0);
	for (uint32_t i = 0; i < e->nnodes; i++) {
		const struct node *n = &e->nodes[i];

		if (n->is_dir)
			continue;
		fuse_lowlevel_notify_inval_inode(m->se, ino_of(e, i), 0, 0);
	}
}

/*
 * One id of the listing: the live entry if unchanged, else a new one
 * (*fresh set), or NULL if it is not READY.  A manifest that could not be
 * read is not an absent one: the live entry stays as it is (its reads
 * check the store on their own) and the next refresh tries again.
 */
static struct entry *refresh_one(struct wmount *m, const char *id,
				 uint64_t since, int *fresh)
{
	struct entry *cur, *e = NULL;
	uint64_t t1;
	char *bytes;
	size_t len;
	int rc;

	*fresh = 0;
	/* live changes only in this thread: cur stays valid unlocked */
	pthread_rwlock_rdlock(&m->lock);
	cur = live_find(m, id);
	pthread_rwlock_unlock(&m->lock);
	/* a dead entry is never kept: the library found the import it
	 * opened replaced (WSTORE_ECHANGED), whatever the manifest says */
	if (cur && atomic_load(&cur->dead))
		cur = NULL;
	if (cur && validated_since(cur, since))
		return cur; /* a read found it unchanged during this pass */
	t1 = wclock_mono_ms();
	if (cur && wstore_checkpoint_unchanged(cur->ck) == 1) {
		mark_validated(cur, t1); /* fetches before t1 need no check */
		return cur;
	}
	rc = read_manifest_bytes(m, id, &bytes, &len);
	if (rc < 0) {
		mlog(m, LOG_ERR, "cannot read the manifest of '%s'%s: %s", id,
		     cur ? " (kept as it was, tried again)" : "",
		     wstore_last_error());
		return cur;
	}
	if (rc)
		return NULL;
	if (cur && cur->mlen == len && !memcmp(cur->mbytes, bytes, len)) {
		free(bytes);
		mark_validated(cur, t1); /* fetches before t1 need no check */
		return cur;
	}
	rc = entry_new(m, &e, id, bytes, len);
	if (rc < 0) {
		if (rc != WSTORE_ENOTFOUND && rc != WSTORE_ENOTREADY)
			mlog(m, LOG_ERR, "cannot open checkpoint '%s': %s", id,
			     wstore_last_error());
		free(bytes);
		return NULL;
	}
	*fresh = 1;
	return e;
}

/* Draining entries whose last file was closed go (under m->lock for
 * writing): their delete may now remove the chunks. */
static void retire_drained(struct wmount *m)
{
	for (uint32_t i = 0; i < m->ntab; i++) {
		struct entry *e = m->tab[i];

		if (!e || !atomic_load(&e->draining) || entry_leased(e))
			continue;
		atomic_store(&e->dead, 1);
		m->tab[i] = NULL;
		cache_purge(&m->c, e);
		entry_put(e);
	}
}

/* e has open files (so a lease) and a delete waits for them (or the
 * store could not say). */
static int entry_draining(struct wmount *m, struct entry *e)
{
	char *bytes = NULL;
	size_t len;
	int rc;

	if (!entry_leased(e))
		return 0;
	rc = read_manifest_bytes(m, e->id, &bytes, &len);
	free(bytes);
	/* could not tell: its open files read on, each read checks */
	return rc == 2 || rc < 0;
}

/*
 * Which entries of the listing (old, sorted by id) are not in next (sorted
 * too): 0 stays, 1 retired, 2 draining (it has open files and its delete
 * waits for them).  Store reads here, before the table is locked.
 */
static void leaving(struct wmount *m, struct entry **old, size_t nold,
		    struct entry **next, size_t nnew, unsigned char *out)
{
	size_t j = 0;

	for (size_t i = 0; i < nold; i++) {
		while (j < nnew && strcmp(next[j]->id, old[i]->id) < 0)
			j++;
		if (j < nnew && next[j] == old[i])
			out[i] = 0;
		else
			out[i] = entry_draining(m, old[i]) ? 2 : 1;
	}
}

/* Compare the store with the tree and swap in what changed.  A failed
 * listing keeps the tree as it is (reads then fail on their own). */
int tree_refresh(struct wmount *m)
{
	char **ids = NULL;
	size_t nids = 0, nnew = 0, nold, ndead = 0;
	struct entry **next, **old, **dead;
	uint64_t since = wclock_mono_ms();
	unsigned char *out;
	int rc, *fresh;

	if ((rc = wstore_list(&ids, &nids, m->s)) < 0) {
		mlog(m, LOG_ERR, "cannot list the store: %s",
		     wstore_last_error());
		return rc;
	}
	next = calloc(nids + 1, sizeof(*next));
	fresh = calloc(nids + 1, sizeof(*fresh));
	out = calloc(m->nlive + 1, 1);
	if (!next || !fresh || !out) {
		free(next);
		free(fresh);
		free(out);
		wstore_strings_free(ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nids; i++) {
		if (m->o.checkpoint && strcmp(ids[i], m->o.checkpoint))
			continue;
		if ((next[nnew] = refresh_one(m, ids[i], since, &fresh[nnew])))
			nnew++;
	}
	wstore_strings_free(ids);
	/* wstore_list is sorted, so next is too; live changes only here */
	leaving(m, m->live, m->nlive, next, nnew, out);
	pthread_rwlock_wrlock(&m->lock);
	for (size_t i = 0; i < nnew; i++)
		if (fresh[i] && tab_add(m, next[i]) < 0) {
			entry_put(next[i]);
			memmove(next + i, next + i + 1,
				(nnew - i - 1) * sizeof(*next));
			memmove(fresh + i, fresh + i + 1,
				(nnew - i - 1) * sizeof(*fresh));
			nnew--;
			i--;
		}
	retire_drained(m);
	old = m->live;
	nold = m->nlive;
	m->live = next;
	m->nlive = nnew;
	dead = old; /* reuse old's storage for the retired ones */
	for (size_t i = 0; i < nold; i++) {
		if (out[i] == 0)
			continue;
		/* files open on a checkpoint whose delete waits for them
		 * read on; it only leaves the listing (the table's reference
		 * stays with tab until the files are closed) */
		if (out[i] == 2) {
			atomic_store(&old[i]->draining, 1);
			continue;
		}
		atomic_store(&old[i]->dead, 1);
		m->tab[old[i]->eid] = NULL;
		dead[ndead++] = old[i];
	}
	pthread_rwlock_unlock(&m->lock);
	for (size_t i = 0; i < ndead; i++) {
		mlog(m, LOG_INFO,
		     "checkpoint '%s' left the store or changed: "
		     "no longer served",
		     dead[i]->id);
		cache_purge(&m->c, dead[i]);
		kernel_forget(m, dead[i]);
		entry_put(dead[i]);
	}
	free(old);
	free(fresh);
	free(out);
	return 0;
}

void *refresh_main(void *arg)
{
	struct wmount *m = arg;
	struct timespec dl;

	pthread_mutex_lock(&m->rlock);
	while (!m->rstop) {
		dl = wclock_deadline_in((uint64_t)(m->o.refresh * 1000.0));
		while (!m->rstop && wclock_cond_wait_until(&m->rcond, &m->rlock,
							   &dl) != ETIMEDOUT)
			;
		if (m->rstop)
			break;
		pthread_mutex_unlock(&m->rlock);
		tree_refresh(m);
		pthread_mutex_lock(&m->rlock);
	}
	pthread_mutex_unlock(&m->rlock);
	return NULL;
}

void lease_close(struct entry *e)
{
	wstore_lease *l = NULL;

	pthread_mutex_lock(&e->llock);
	if (--e->nopen == 0) {
		l = e->lease;
		e->lease = NULL;
	}
	pthread_mutex_unlock(&e->llock);
	wstore_lease_release(l);
}

/*
 * A checkpoint is leased while a file of it is open, so that a delete
 * waits for (or refuses) the readers of a mount.  The entry's manifest
 * was read before the lease: check it again once the lease is held.
 */
int lease_open(struct wmount *m, struct entry *e)
{
	int rc = 0, took = 0;

	pthread_mutex_lock(&e->llock);
	if (e->nopen == 0) {
		rc = wstore_lease_take(&e->lease, m->s, e->id, "mount");
		/* a read-only file system (a read-only bind mount of the
		 * store, as on inference nodes) is served without leases:
		 * nothing can be written there, by anyone through it.  A
		 * store we lack the permission to write (another user's
		 * files) is not: a delete by its owner would not see us */
		if (rc == -EROFS)
			rc = 0;
		else if (rc == -EACCES || rc == -EPERM)
			mlog(m, LOG_ERR,
			     "refusing to serve '%s' without a read lease: %s",
			     e->id, wstore_last_error());
		took = rc == 0;
		if (rc < 0 && rc != -EACCES && rc != -EPERM)
			mlog(m, LOG_ERR, "%s", wstore_last_error());
	}
	if (rc == 0)
		e->nopen++;
	pthread_mutex_unlock(&e->llock);
	if (rc < 0)
		return -EIO;
	if (took && (rc = entry_check(m, e, wclock_mono_ms(), 0)) < 0)
		lease_close(e);
	return rc;
}
