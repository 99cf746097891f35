/*
 * tree.c - the tree of entries and its refresh.
 *
 * Each READY checkpoint is an "entry": its manifest, an open
 * wstore_checkpoint and a node array built from the file paths (node 0 is
 * the checkpoint's directory; directories are synthesized from paths).
 * The table of entries (wmount.tab, by entry id, and wmount.live, sorted
 * by checkpoint id) is guarded by wmount.lock.
 *
 * Refresh.  A thread re-reads the index and every manifest each
 * opts.refresh seconds.  A checkpoint that left the index, stopped being
 * READY or whose manifest bytes changed is retired: marked dead (reads on
 * open files fail with EIO from then on), dropped from the table (lookups
 * give ENOENT), its chunks dropped from the cache and its inodes
 * invalidated in the kernel so the page cache cannot keep serving it.  An
 * entry is freed when the last open file on it is released.
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

int64_t find_kid(const struct entry *e, uint32_t dir, const char *name,
		 size_t len)
{
	const struct node *d = &e->nodes[dir];

	for (uint32_t k = 0; k < d->nkids; k++) {
		const struct node *n = &e->nodes[d->kids[k]];

		if (!strncmp(n->name, name, len) && n->name[len] == '\0')
			return d->kids[k];
	}
	return -1;
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
	p->kids[p->nkids++] = e->nnodes;
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
	pthread_mutex_lock(&e->vlock);
	if (t1 > e->validated)
		e->validated = t1;
	pthread_mutex_unlock(&e->vlock);
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
static struct entry *refresh_one(struct wmount *m, const char *id, int *fresh)
{
	struct entry *cur, *e = NULL;
	char *bytes;
	size_t len;
	int rc;

	*fresh = 0;
	/* live changes only in this thread: cur stays valid unlocked */
	pthread_rwlock_rdlock(&m->lock);
	cur = live_find(m, id);
	pthread_rwlock_unlock(&m->lock);
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

/* Compare the store with the tree and swap in what changed.  A failed
 * listing keeps the tree as it is (reads then fail on their own). */
int tree_refresh(struct wmount *m)
{
	char **ids = NULL;
	size_t nids = 0, nnew = 0, nold, ndead = 0;
	struct entry **next, **old, **dead;
	int rc, *fresh;

	if ((rc = wstore_list(&ids, &nids, m->s)) < 0) {
		mlog(m, LOG_ERR, "cannot list the store: %s",
		     wstore_last_error());
		return rc;
	}
	next = calloc(nids + 1, sizeof(*next));
	fresh = calloc(nids + 1, sizeof(*fresh));
	if (!next || !fresh) {
		free(next);
		free(fresh);
		wstore_strings_free(ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nids; i++) {
		if (m->o.checkpoint && strcmp(ids[i], m->o.checkpoint))
			continue;
		if ((next[nnew] = refresh_one(m, ids[i], &fresh[nnew])))
			nnew++;
	}
	wstore_strings_free(ids);
	/* wstore_list is sorted, so next is too */
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
		size_t j;

		for (j = 0; j < nnew && next[j] != old[i]; j++)
			;
		if (j < nnew)
			continue;
		/* files open on a checkpoint whose delete waits for them
		 * read on; it only leaves the listing (the table's reference
		 * stays with tab until the files are closed) */
		if (entry_draining(m, old[i])) {
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
		/* a store we may only read (a read-only mount) is served
		 * without leases: nobody deletes through it */
		if (rc == -EROFS || rc == -EACCES || rc == -EPERM)
			rc = 0;
		took = rc == 0;
		if (rc < 0)
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
