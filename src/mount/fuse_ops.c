/*
 * fuse_ops.c - the read-only FUSE filesystem behind `wstore mount`, on the
 * low-level libfuse3 API (it lets us pick inode numbers, reply straight
 * from cached chunk memory and tell the kernel to drop what it cached).
 *
 * Tree.  Each READY checkpoint is an "entry": its manifest, an open
 * wstore_checkpoint and a node array built from the file paths (node 0 is
 * the checkpoint's directory; directories are synthesized from paths).
 * Inode numbers are (entry id << 32) | node; entry ids only grow, so an
 * inode never names two things, and FUSE_ROOT_ID (1) is the mount root:
 * the list of entries, or with --checkpoint the one entry's directory.
 * The table of entries is guarded by an rwlock; an entry's nodes never
 * change once published.
 *
 * Refresh.  A thread re-reads the index and every manifest each
 * opts.refresh seconds.  A checkpoint that left the index, stopped being
 * READY or whose manifest bytes changed is retired: marked dead (reads on
 * open files fail with EIO from then on), dropped from the table (lookups
 * give ENOENT), its chunks dropped from the cache and its inodes
 * invalidated in the kernel so the page cache cannot keep serving it.  An
 * entry is freed when the last open file on it is released.
 *
 * Chunk cache.  Whole chunks keyed by (entry, file, chunk), LRU, bounded
 * by opts.cache_size (chunks pinned by reads in flight may exceed it
 * briefly).  A miss reads the chunk with wstore_file_pread (which checks
 * its length) and then re-reads the manifest unless a check started after
 * this fetch already did: a chunk enters the cache only if the checkpoint
 * was still the same one after the bytes were read, so a delete, or a
 * delete and re-import under the same id, cannot put other bytes under an
 * open file.  Concurrent readers of one chunk wait for a single fetch.  A
 * read that moves into the next chunk queues the following chunks for a
 * read-ahead thread.  Replies are written with writev straight from the
 * pinned chunk buffers; freed chunk buffers are reused (first touch of
 * fresh memory costs more than the copy).
 *
 * Zero copy.  On a store whose chunks are local files (the embedded file
 * store: wstore_file_chunk_fd works) a slot holds an open fd of the chunk
 * file instead of its bytes, and replies are fuse_reply_data() from that
 * fd, which libfuse splices (FUSE_CAP_SPLICE_WRITE) from the store's page
 * cache into /dev/fuse: no copy through the daemon.  Everything else is
 * as for bytes: the fd is opened (its length checked) and then the
 * manifest re-checked as after a fetch, the slot is pinned while a reply
 * uses it and dropped once served in full; an fd counts 1/128th of the
 * cache size, so at most about 128 stay open.  An fd keeps reading the
 * chunk it opened even after the checkpoint is deleted: like cached
 * bytes, it is served only while the entry is not dead, and retiring an
 * entry purges its slots.  Reads are capped at ZC_MAX_READ so a spliced
 * reply fits libfuse's pipe.
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include <wstore/wstore.h>
#include <wstore/read.h>
#include <wstore/lease.h>

#include "fuse_ops.h"

#define NODE_BITS 32
#define RA_QUEUE 32 /* read-ahead jobs waiting at most */
#define RA_THREADS 2
#define FREE_BUFS 8	   /* chunk buffers kept for reuse */
#define KERNEL_RA_KB 16384 /* kernel read-ahead window we ask for */
/*
 * Largest read on zero-copy mounts (see zc_read_size): a spliced reply
 * (header and data) must fit in libfuse's pipe with libfuse's slack of a
 * page per piece and two more (up to 6 pieces here); libfuse falls back
 * to copying through a fresh buffer otherwise.  Pipes grow up to
 * /proc/sys/fs/pipe-max-size (1 MiB by default) without CAP_SYS_RESOURCE.
 */
#define ZC_PIPE_SLACK (32u << 10)
#define ZC_PIPE_MAX (16u << 20) /* larger requests measured no faster */
#define FUSE_PAGES_DEFAULT 256u /* the kernel's limit before 6.12's sysctl */
#define PAGE_BYTES page_bytes() /* FUSE counts max_pages in these */

static uint32_t page_bytes(void)
{
	long p = sysconf(_SC_PAGESIZE);

	return p > 0 ? (uint32_t)p : 4096u;
}

/* ---- tree --------------------------------------------------------------- */

struct node {
	char *name;
	uint32_t parent;
	int is_dir;
	int64_t file; /* manifest index, -1 for a directory */
	uint64_t size;
	uint32_t *kids;
	uint32_t nkids, capkids;
	/* passthrough (under wmount.ptlock): the kernel's id of the chunk
	 * file the open files of this node read, and how many use it */
	int32_t backing;
	uint32_t backing_refs;
};

struct entry {
	uint32_t eid;
	char *id;
	wstore_checkpoint *ck;
	char *mbytes; /* serialized manifest, to spot changes */
	size_t mlen;
	int64_t mtime;
	struct node *nodes;
	uint32_t nnodes;
	atomic_int dead;
	atomic_int refs;       /* the table's, open files', read-ahead jobs' */
	pthread_mutex_t vlock; /* guards validated */
	double validated;      /* start of the last good manifest check */
	pthread_mutex_t llock; /* guards nopen and lease */
	uint32_t nopen;	       /* files open on the entry */
	wstore_lease *lease;   /* held while nopen > 0 */
	/* out of the listing, its delete waiting for its open files: still
	 * in tab (getattr and reads on those work), refuses new opens */
	atomic_int draining;
};

/* An open file. */
/*
 * An open file.  The kernel sends RELEASE only after every READ of it has
 * been answered, but a READ's thread may still be on its way out then:
 * each READ holds a reference, the open one is RELEASE's, and the last
 * one frees (which also lets TSan see the order).
 */
struct fh {
	struct entry *e;
	int64_t fidx;
	wstore_file *f;
	uint64_t size, cs;
	atomic_llong last_ci;
	atomic_int refs;
	uint32_t node;	 /* its node in e */
	int passthrough; /* holds a reference on the node's backing id */
};

/* ---- chunk cache -------------------------------------------------------- */

enum { SLOT_LOADING, SLOT_READY };

struct slot {
	uint32_t eid;
	int64_t fidx;
	uint64_t ci;
	struct entry *e; /* not a reference: compared only */
	char *buf;	 /* the chunk's bytes, or NULL when fd is used */
	int fd;		 /* the chunk's file (zero-copy mounts), or -1 */
	size_t len, cap;
	uint64_t cost;	 /* counted against the cache's limit */
	uint64_t served; /* bytes replied from it */
	int state, err, pins, unlinked;
	struct slot *hnext, *prev, *next;
};

struct rajob {
	struct entry *e; /* holds a reference */
	int64_t fidx;
	uint64_t ci;
};

struct cache {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a fetch finished */
	struct slot **hash;
	size_t nhash;
	struct slot lru; /* sentinel: next is newest */
	uint64_t bytes, limit;
	struct {
		char *buf;
		size_t cap;
	} freebufs[FREE_BUFS];
	unsigned nfree;
	uint64_t freebytes; /* in freebufs, counted against limit */
	struct rajob q[RA_QUEUE];
	unsigned qhead, qlen;
	pthread_cond_t qcond;
	int stop;
	pthread_t ra[RA_THREADS];
	unsigned nra;
	int zc; /* slots hold chunk fds, replies are spliced from them */
};

struct wmount {
	wstore_store *s;
	struct wmount_opts o;
	struct fuse_session *se;
	uid_t uid;
	gid_t gid;
	time_t started;
	int daemonized;
	pthread_rwlock_t lock; /* guards tab, live */
	struct entry **tab;    /* by eid; NULL once retired */
	uint32_t ntab, captab;
	struct entry **live; /* sorted by id */
	size_t nlive;
	pthread_mutex_t rlock;
	pthread_cond_t rcond;
	int rstop;
	pthread_t refresher;
	int refreshing;
	/* the stopper thread (see stop_main) */
	pthread_t stopper, looper;
	int stopping, loop_done;
	atomic_int unmounting;	/* set before the session is unmounted */
	int init_seen;		/* the kernel's INIT request was read */
	int mmap_offered;	/* it offers DIRECT_IO_ALLOW_MMAP */
	int patch_init;		/* adjust libfuse's INIT reply (io_writev) */
	int dio;		/* files are opened direct_io (set by INIT) */
	uint32_t max_read;	/* zero-copy mounts: the mount's max_read */
	uint32_t blksize;	/* st_blksize: the read size to suggest */
	int pt_offered;		/* the kernel offers FUSE_PASSTHROUGH */
	atomic_int pt;		/* single-chunk files are passed through */
	pthread_mutex_t ptlock; /* guards the nodes' backing ids */
	struct cache c;
	pthread_mutex_t loglock;
	double lastlog;
	unsigned suppressed;
};

static double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Errors go to stderr in the foreground, to syslog once daemonized; at
 * most one a second so a dead backend cannot flood the log. */
static void mlog(struct wmount *m, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void mlog(struct wmount *m, int prio, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	double t = now_mono();
	unsigned skipped;

	pthread_mutex_lock(&m->loglock);
	if (prio <= LOG_WARNING && m->lastlog > 0 && t - m->lastlog < 1.0) {
		m->suppressed++;
		pthread_mutex_unlock(&m->loglock);
		return;
	}
	if (prio <= LOG_WARNING)
		m->lastlog = t;
	skipped = m->suppressed;
	m->suppressed = 0;
	pthread_mutex_unlock(&m->loglock);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m->daemonized) {
		syslog(prio, "%s%s", msg,
		       skipped ? " (and earlier messages suppressed)" : "");
	} else {
		fprintf(stderr, "wstore mount: %s\n", msg);
		if (skipped)
			fprintf(stderr,
				"wstore mount: (%u messages suppressed)\n",
				skipped);
	}
}

/* ---- entries ------------------------------------------------------------ */

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

static void entry_get(struct entry *e)
{
	atomic_fetch_add(&e->refs, 1);
}

static void entry_put(struct entry *e)
{
	if (e && atomic_fetch_sub(&e->refs, 1) == 1)
		entry_free(e);
}

static int64_t find_kid(const struct entry *e, uint32_t dir, const char *name,
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
	e->validated = now_mono();
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

/* ---- chunk cache -------------------------------------------------------- */

static size_t slot_hash(const struct cache *c, uint32_t eid, int64_t fidx,
			uint64_t ci)
{
	uint64_t h = eid * 0x9E3779B97F4A7C15ull ^
		     (uint64_t)fidx * 0xC2B2AE3D27D4EB4Full ^
		     ci * 0x165667B19E3779F9ull;

	return (size_t)((h ^ (h >> 29)) % c->nhash);
}

static struct slot *slot_find(struct cache *c, uint32_t eid, int64_t fidx,
			      uint64_t ci)
{
	struct slot *s = c->hash[slot_hash(c, eid, fidx, ci)];

	while (s && !(s->eid == eid && s->fidx == fidx && s->ci == ci))
		s = s->hnext;
	return s;
}

static void lru_unlink(struct slot *s)
{
	s->prev->next = s->next;
	s->next->prev = s->prev;
}

static void lru_push(struct cache *c, struct slot *s)
{
	s->next = c->lru.next;
	s->prev = &c->lru;
	c->lru.next->prev = s;
	c->lru.next = s;
}

/*
 * Chunk buffers are mmap'ed with transparent huge pages: first touch of
 * fresh 4 KiB pages runs at 0.2-0.4 GB/s here, of huge pages at 8-11.
 */
static char *buf_alloc(size_t n)
{
	void *p;

	n = n ? n : 1;
	p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (n >= ((size_t)2 << 20))
		madvise(p, n, MADV_HUGEPAGE);
	return p;
}

static void buf_free(char *p, size_t n)
{
	if (p)
		munmap(p, n ? n : 1);
}

/* Take s out of the hash and LRU (caller holds the lock). */
static void slot_unlink(struct cache *c, struct slot *s)
{
	struct slot **pp = &c->hash[slot_hash(c, s->eid, s->fidx, s->ci)];

	while (*pp != s)
		pp = &(*pp)->hnext;
	*pp = s->hnext;
	lru_unlink(s);
	c->bytes -= s->cost;
	s->unlinked = 1;
}

/* Free an unlinked, unpinned slot, keeping its buffer for reuse while
 * the cache's budget allows. */
static void slot_drop(struct cache *c, struct slot *s)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->buf && c->nfree < FREE_BUFS &&
	    c->bytes + c->freebytes + s->cap <= c->limit) {
		c->freebufs[c->nfree].buf = s->buf;
		c->freebufs[c->nfree].cap = s->cap;
		c->freebytes += s->cap;
		c->nfree++;
	} else {
		buf_free(s->buf, s->cap);
	}
	free(s);
}

static void cache_evict(struct cache *c)
{
	struct slot *s = c->lru.prev, *prev;

	while (c->nfree && c->bytes + c->freebytes > c->limit) {
		c->nfree--;
		c->freebytes -= c->freebufs[c->nfree].cap;
		buf_free(c->freebufs[c->nfree].buf, c->freebufs[c->nfree].cap);
	}

	for (; s != &c->lru && c->bytes > c->limit; s = prev) {
		prev = s->prev;
		if (s->pins || s->state == SLOT_LOADING)
			continue;
		slot_unlink(c, s);
		slot_drop(c, s);
	}
}

static char *take_buf(struct cache *c, size_t need, size_t *cap)
{
	for (unsigned i = 0; i < c->nfree; i++) {
		char *b = c->freebufs[i].buf;

		if (c->freebufs[i].cap < need)
			continue;
		*cap = c->freebufs[i].cap;
		c->freebytes -= *cap;
		c->freebufs[i] = c->freebufs[--c->nfree];
		return b;
	}
	if (c->nfree) { /* too small: trade the oldest for a new one */
		buf_free(c->freebufs[0].buf, c->freebufs[0].cap);
		c->freebytes -= c->freebufs[0].cap;
		c->freebufs[0] = c->freebufs[--c->nfree];
	}
	*cap = need;
	return buf_alloc(need);
}

static void cache_unpin(struct cache *c, struct slot *s)
{
	pthread_mutex_lock(&c->lock);
	if (--s->pins == 0 && s->unlinked)
		slot_drop(c, s);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Unpin after replying n bytes from s.  A chunk served in full was read
 * sequentially (the kernel asks for each byte once) and is dropped at
 * once, its buffer reused for the next fetch: re-reads are the kernel
 * page cache's job, and reusing warm buffers instead of touching fresh
 * memory (0.2-0.4 GB/s here) is what keeps a first read fast.  What the
 * LRU keeps is chunks read in part: headers, tensors picked at random.
 */
static void cache_done(struct cache *c, struct slot *s, size_t n)
{
	pthread_mutex_lock(&c->lock);
	s->served += n;
	if (!s->unlinked && s->served >= s->len)
		slot_unlink(c, s);
	if (--s->pins == 0 && s->unlinked)
		slot_drop(c, s);
	pthread_mutex_unlock(&c->lock);
}

/* Drop every unpinned chunk of e (retired). */
static void cache_purge(struct cache *c, struct entry *e)
{
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nhash; i++) {
		struct slot *s = c->hash[i], *next;

		for (; s; s = next) {
			next = s->hnext;
			if (s->e != e || s->state == SLOT_LOADING)
				continue;
			slot_unlink(c, s);
			if (!s->pins)
				slot_drop(c, s);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

/* What an open chunk fd counts against the limit: it holds no memory,
 * but the number of fds kept open is bounded (about 128). */
static uint64_t zc_cost(const struct cache *c)
{
	return c->limit / 128 ? c->limit / 128 : 1;
}

/*
 * After a fetch that started at t0: is e still the checkpoint in the
 * store?  0 if so; -ENOENT if gone or no longer READY, -EIO if it changed.
 */
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
static int entry_check(struct wmount *m, struct entry *e, double t0,
		       int draining)
{
	double t1;
	char *bytes;
	size_t len;
	int rc;

	pthread_mutex_lock(&e->vlock);
	rc = e->validated > t0;
	pthread_mutex_unlock(&e->vlock);
	if (rc)
		return 0;
	t1 = now_mono();
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

static int entry_validate(struct wmount *m, struct entry *e, double t0)
{
	return entry_check(m, e, t0, 1);
}

static int fetch(struct wmount *m, struct slot *s, wstore_file *f, uint64_t cs)
{
	double t0 = now_mono();
	size_t n = 0;
	int rc = wstore_file_pread(f, s->buf, s->len, s->ci * cs, &n);

	if (rc == 0 && n != s->len)
		rc = WSTORE_ECORRUPT;
	if (rc < 0) {
		mlog(m, LOG_ERR, "cannot read '%s' of '%s': %s",
		     wstore_file_path(f), s->e->id,
		     *wstore_last_error() ? wstore_last_error()
					  : wstore_strerror(rc));
		return rc == -ENOMEM ? -ENOMEM : -EIO;
	}
	return entry_validate(m, s->e, t0);
}

/*
 * The same for a zero-copy mount: open the chunk's file (its length is
 * checked against the manifest) and validate as fetch does, so a chunk
 * file of a checkpoint deleted (or replaced) meanwhile is never served.
 */
static int fetch_fd(struct wmount *m, struct slot *s, wstore_file *f,
		    uint64_t cs)
{
	double t0 = now_mono();
	uint64_t foff = 0;
	size_t n = 0;
	int fd = -1;
	int rc = wstore_file_chunk_fd(&fd, &foff, &n, f, s->ci * cs);

	if (rc == 0 && (foff != 0 || n != s->len)) {
		close(fd);
		rc = WSTORE_ECORRUPT;
	}
	if (rc < 0) {
		mlog(m, LOG_ERR, "cannot open '%s' of '%s': %s",
		     wstore_file_path(f), s->e->id,
		     *wstore_last_error() ? wstore_last_error()
					  : wstore_strerror(rc));
		return rc == -ENOMEM ? -ENOMEM : -EIO;
	}
	s->fd = fd;
	return entry_validate(m, s->e, t0);
}

/*
 * Chunk ci (len bytes) of file fidx of e, pinned: release it with
 * cache_unpin.  f reads it on a miss.  Returns NULL with *err set on
 * failure.
 */
static struct slot *cache_get(struct wmount *m, struct entry *e, int64_t fidx,
			      wstore_file *f, uint64_t cs, uint64_t ci,
			      size_t len, int *err)
{
	struct cache *c = &m->c;
	struct slot *s;
	int rc;

	pthread_mutex_lock(&c->lock);
	s = slot_find(c, e->eid, fidx, ci);
	if (s) {
		s->pins++;
		lru_unlink(s);
		lru_push(c, s);
		while (s->state == SLOT_LOADING)
			pthread_cond_wait(&c->cond, &c->lock);
		if ((rc = s->err)) {
			if (--s->pins == 0 && s->unlinked)
				slot_drop(c, s);
			pthread_mutex_unlock(&c->lock);
			*err = rc;
			return NULL;
		}
		pthread_mutex_unlock(&c->lock);
		return s;
	}
	if (!(s = calloc(1, sizeof(*s)))) {
		pthread_mutex_unlock(&c->lock);
		*err = -ENOMEM;
		return NULL;
	}
	s->eid = e->eid;
	s->fidx = fidx;
	s->ci = ci;
	s->e = e;
	s->len = len;
	s->fd = -1;
	s->cost = c->zc ? zc_cost(c) : len;
	s->pins = 1;
	s->state = SLOT_LOADING;
	{
		size_t h = slot_hash(c, s->eid, fidx, ci);

		s->hnext = c->hash[h];
		c->hash[h] = s;
	}
	lru_push(c, s);
	c->bytes += s->cost;
	cache_evict(c);
	if (!c->zc)
		s->buf = take_buf(c, len, &s->cap);
	pthread_mutex_unlock(&c->lock);

	if (c->zc)
		rc = fetch_fd(m, s, f, cs);
	else
		rc = s->buf ? fetch(m, s, f, cs) : -ENOMEM;

	pthread_mutex_lock(&c->lock);
	s->state = SLOT_READY;
	if (rc < 0) {
		s->err = rc;
		slot_unlink(c, s); /* later readers try again */
		if (--s->pins == 0)
			slot_drop(c, s);
		s = NULL;
		*err = rc;
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return s;
}

/* ---- read-ahead --------------------------------------------------------- */

static void ra_queue(struct wmount *m, struct entry *e, int64_t fidx,
		     uint64_t ci)
{
	struct cache *c = &m->c;
	struct rajob *j;

	pthread_mutex_lock(&c->lock);
	if (c->stop || c->qlen == RA_QUEUE || slot_find(c, e->eid, fidx, ci)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	for (unsigned i = 0; i < c->qlen; i++) {
		j = &c->q[(c->qhead + i) % RA_QUEUE];
		if (j->e == e && j->fidx == fidx && j->ci == ci) {
			pthread_mutex_unlock(&c->lock);
			return;
		}
	}
	j = &c->q[(c->qhead + c->qlen++) % RA_QUEUE];
	entry_get(e);
	j->e = e;
	j->fidx = fidx;
	j->ci = ci;
	pthread_cond_signal(&c->qcond);
	pthread_mutex_unlock(&c->lock);
}

static void ra_one(struct wmount *m, struct rajob *j)
{
	const wstore_manifest *man = wstore_checkpoint_manifest(j->e->ck);
	wstore_file_info fi;
	wstore_file *f = NULL;
	struct slot *s;
	uint64_t cs;
	int err;

	if (atomic_load(&j->e->dead) ||
	    wstore_manifest_file(&fi, man, (size_t)j->fidx) < 0 ||
	    wstore_file_open(&f, j->e->ck, fi.path) < 0)
		return;
	cs = fi.chunk_size ? fi.chunk_size : fi.size;
	if (cs && j->ci * cs < fi.size) {
		uint64_t left = fi.size - j->ci * cs;

		s = cache_get(m, j->e, j->fidx, f, cs, j->ci,
			      (size_t)(left < cs ? left : cs), &err);
		if (s)
			cache_unpin(&m->c, s);
	}
	wstore_file_free(f);
}

static void *ra_main(void *arg)
{
	struct wmount *m = arg;
	struct cache *c = &m->c;
	struct rajob j;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->stop && c->qlen == 0)
			pthread_cond_wait(&c->qcond, &c->lock);
		if (c->stop)
			break;
		j = c->q[c->qhead];
		c->qhead = (c->qhead + 1) % RA_QUEUE;
		c->qlen--;
		pthread_mutex_unlock(&c->lock);
		ra_one(m, &j);
		entry_put(j.e);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* How many chunks ahead to read: about 128 MiB, at most an eighth of the
 * cache, between 1 and 8. */
static uint64_t ra_depth(const struct wmount *m, uint64_t cs)
{
	uint64_t d = ((uint64_t)128 << 20) / cs;

	if (d > m->c.limit / 8 / cs)
		d = m->c.limit / 8 / cs;
	return d < 1 ? 1 : d > 8 ? 8 : d;
}

/* Whether chunks can be served from their files (the embedded file store;
 * wstore_file_chunk_fd also refuses untrusted and write-once stores). */
static int zc_capable(wstore_store *store)
{
	return (wstore_store_caps(store) & WSTORE_CAP_LOCAL_FILES) != 0;
}

/* The largest pipe this process may have, of 1 MiB (the kernel's default
 * pipe-max-size) up to ZC_PIPE_MAX; 0 if not even that. */
static uint32_t pipe_cap(void)
{
	uint32_t cap = 0;
	int p[2];

	if (pipe(p) < 0)
		return 0;
	for (uint32_t sz = ZC_PIPE_MAX; sz >= (1u << 20) && !cap; sz >>= 1)
		if (fcntl(p[0], F_SETPIPE_SZ, (int)sz) >= (int)sz)
			cap = sz;
	close(p[0]);
	close(p[1]);
	return cap;
}

/* The kernel's limit on a FUSE request, in bytes. */
static uint32_t fuse_request_cap(void)
{
	unsigned long pages = FUSE_PAGES_DEFAULT;
	FILE *f = fopen("/proc/sys/fs/fuse/max_pages_limit", "r");

	if (f) {
		if (fscanf(f, "%lu", &pages) != 1 || pages < 1)
			pages = FUSE_PAGES_DEFAULT;
		fclose(f);
	}
	if (pages > 65535) /* the INIT reply's field is 16 bits */
		pages = 65535;
	return (uint32_t)(pages * PAGE_BYTES);
}

/*
 * Read sizes on zero-copy mounts.  A direct-io read is served one request
 * at a time, each a round trip through the daemon (about 40 us here), so
 * larger requests go faster (measured, 1 GB through the mount: 4.4-5.1
 * GB/s at 1 MiB, 5.9-6.3 at 8-16 MiB against 8.7 for cat of the store's
 * files).  The size is bounded by the pipe a spliced reply must fit in
 * and by the kernel's request limit, both settings of the machine
 * (fs.pipe-max-size, fs.fuse.max_pages_limit).  st_blksize, the size that
 * cat, cp and Python's buffered files read in, is the largest power of
 * two within that (cat rounds it up to one).
 */
static void zc_read_size(struct wmount *m)
{
	uint32_t pipe = pipe_cap(), req = fuse_request_cap(), r;

	m->blksize = 1u << 20;
	m->max_read = 0;
	if (!m->c.zc)
		return;
	if (pipe < (1u << 20)) { /* no splice will fit: libfuse copies */
		m->max_read = 1u << 20;
		return;
	}
	r = pipe - ZC_PIPE_SLACK;
	if (r > req)
		r = req;
	r -= r % PAGE_BYTES;
	m->max_read = r;
	for (m->blksize = 1u << 20; m->blksize > r; m->blksize >>= 1)
		;
	while (m->blksize <= r / 2)
		m->blksize <<= 1;
}

static int cache_init(struct wmount *m)
{
	struct cache *c = &m->c;

	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_cond_init(&c->qcond, NULL);
	c->lru.next = c->lru.prev = &c->lru;
	c->limit = m->o.cache_size;
	c->zc = zc_capable(m->s);
	c->nhash = 4099;
	c->hash = calloc(c->nhash, sizeof(*c->hash));
	return c->hash ? 0 : -ENOMEM;
}

static void cache_start(struct wmount *m)
{
	for (; m->c.nra < RA_THREADS; m->c.nra++)
		if (pthread_create(&m->c.ra[m->c.nra], NULL, ra_main, m))
			break;
}

static void cache_stop(struct wmount *m)
{
	struct cache *c = &m->c;

	pthread_mutex_lock(&c->lock);
	c->stop = 1;
	pthread_cond_broadcast(&c->qcond);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < c->nra; i++)
		pthread_join(c->ra[i], NULL);
	c->nra = 0;
	for (; c->qlen; c->qlen--, c->qhead = (c->qhead + 1) % RA_QUEUE)
		entry_put(c->q[c->qhead].e);
}

static void cache_free(struct cache *c)
{
	if (!c->hash)
		return;
	for (size_t i = 0; i < c->nhash; i++) {
		struct slot *s = c->hash[i], *next;

		for (; s; s = next) {
			next = s->hnext;
			if (s->fd >= 0)
				close(s->fd);
			buf_free(s->buf, s->cap);
			free(s);
		}
	}
	for (unsigned i = 0; i < c->nfree; i++)
		buf_free(c->freebufs[i].buf, c->freebufs[i].cap);
	free(c->hash);
	pthread_cond_destroy(&c->qcond);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}

/* ---- refresh ------------------------------------------------------------ */

static struct entry *live_find(struct wmount *m, const char *id)
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

static fuse_ino_t ino_of(const struct entry *e, uint32_t node)
{
	return ((fuse_ino_t)e->eid << NODE_BITS) | node;
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

/* One id of the listing: the live entry if unchanged, else a new one
 * (*fresh set), or NULL if it is not READY. */
static struct entry *refresh_one(struct wmount *m, const char *id, int *fresh)
{
	struct entry *cur, *e = NULL;
	char *bytes;
	size_t len;
	int rc;

	*fresh = 0;
	rc = read_manifest_bytes(m, id, &bytes, &len);
	if (rc < 0)
		mlog(m, LOG_ERR, "cannot read the manifest of '%s': %s", id,
		     wstore_last_error());
	if (rc)
		return NULL;
	pthread_rwlock_rdlock(&m->lock);
	cur = live_find(m, id);
	if (cur && cur->mlen == len && !memcmp(cur->mbytes, bytes, len)) {
		pthread_rwlock_unlock(&m->lock);
		free(bytes);
		return cur;
	}
	pthread_rwlock_unlock(&m->lock);
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

/* e has open files (so a lease) and a delete waits for them. */
static int entry_draining(struct wmount *m, struct entry *e)
{
	char *bytes = NULL;
	size_t len;
	int rc;

	if (!entry_leased(e))
		return 0;
	rc = read_manifest_bytes(m, e->id, &bytes, &len);
	free(bytes);
	return rc == 2;
}

/* Compare the store with the tree and swap in what changed.  A failed
 * listing keeps the tree as it is (reads then fail on their own). */
static int refresh(struct wmount *m)
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

static void *refresh_main(void *arg)
{
	struct wmount *m = arg;
	struct timespec ts;
	double secs;

	pthread_mutex_lock(&m->rlock);
	while (!m->rstop) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		secs = m->o.refresh;
		ts.tv_sec += (time_t)secs;
		ts.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (!m->rstop && pthread_cond_timedwait(&m->rcond, &m->rlock,
							   &ts) != ETIMEDOUT)
			;
		if (m->rstop)
			break;
		pthread_mutex_unlock(&m->rlock);
		refresh(m);
		pthread_mutex_lock(&m->rlock);
	}
	pthread_mutex_unlock(&m->rlock);
	return NULL;
}

/* ---- FUSE operations ---------------------------------------------------- */

/* Entry and node of ino (caller holds the rwlock); -1 if unknown.  ino 1
 * with --checkpoint is the checkpoint's directory (node 0). */
static int resolve(struct wmount *m, fuse_ino_t ino, struct entry **e,
		   uint32_t *node)
{
	uint64_t eid = ino >> NODE_BITS;

	if (ino == FUSE_ROOT_ID) {
		*e = m->o.checkpoint && m->nlive ? m->live[0] : NULL;
		*node = 0;
		return 0;
	}
	if (eid >= m->ntab || !m->tab[eid])
		return -1;
	*e = m->tab[eid];
	*node = (uint32_t)(ino & 0xffffffffu);
	return *node < (*e)->nnodes ? 0 : -1;
}

static void fill_stat(struct wmount *m, const struct entry *e, uint32_t node,
		      fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_blksize = (blksize_t)m->blksize;
	if (!e) { /* the root listing of checkpoints */
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2 + (nlink_t)m->nlive;
		st->st_mtime = st->st_ctime = st->st_atime = m->started;
		return;
	}
	st->st_mtime = st->st_ctime = st->st_atime = (time_t)e->mtime;
	if (e->nodes[node].is_dir) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)e->nodes[node].size;
		st->st_blocks = (blkcnt_t)((e->nodes[node].size + 511) / 512);
	}
}

static void op_init(void *ud, struct fuse_conn_info *conn)
{
	struct wmount *m = ud;

	conn->max_readahead = UINT32_MAX; /* clamped to the kernel's */
	/* read-ahead requests in flight (kernel default 12) */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(unsigned)FUSE_CAP_SPLICE_READ;
	/*
	 * Zero-copy mounts splice chunk files' pages into /dev/fuse.  Not
	 * SPLICE_MOVE: the kernel would steal the pages from the store's
	 * own page cache (measured slower too, 4.3-4.9 against 5.2-5.7
	 * GB/s), so the kernel copies them into the mount's page cache.
	 */
	if (m->c.zc)
		conn->max_read = m->max_read; /* as in the mount options */
	if (m->c.zc && (conn->capable & FUSE_CAP_SPLICE_WRITE))
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	/*
	 * Page cache or direct I/O.  On a store of local files direct I/O is
	 * the default where shared mmap still works with it: a first read
	 * then costs one copy (the store's page cache to the reader) instead
	 * of two plus fresh page-cache pages for a second copy of every byte,
	 * and a re-read one copy too (as fast as the mount's own page cache,
	 * measured).  Network stores keep the kernel's page cache: there a
	 * re-read would be another fetch.
	 */
	m->dio = m->o.direct_io > 0 ||
		 (m->o.direct_io < 0 && m->c.zc && m->mmap_offered);
	atomic_store(&m->pt, m->c.zc && m->pt_offered);
	/* libfuse replies to INIT right after this returns (io_writev) */
	m->patch_init = 1;
}

/*
 * The INIT reply, for what libfuse 3.14 does not know.  The session's I/O
 * goes through these hooks: io_read notes whether the kernel's INIT
 * request offers FUSE_DIRECT_IO_ALLOW_MMAP, io_writev edits libfuse's
 * INIT reply.  Everything else passes through untouched.
 * - Shared mmap on direct-io mounts.  The kernel refuses MAP_SHARED mmap
 *   of direct-io files (ENODEV, which breaks safetensors' loader) unless
 *   the INIT reply carries FUSE_DIRECT_IO_ALLOW_MMAP (kernel 6.6, protocol
 *   7.39).
 * - Reads larger than 1 MiB (zc_read_size): libfuse asks for max_write's
 *   pages, the reply needs max_read's.
 * - Passthrough (see pt_open): FUSE_PASSTHROUGH and max_stack_depth in
 *   the INIT reply, FOPEN_PASSTHROUGH and the backing id in the reply to
 *   an OPEN that pt_open passes through (marked in tl_backing by the
 *   thread replying; libfuse writes the reply from that thread).
 */
#define ALLOW_MMAP_FLAGS2 (1u << (36 - 32)) /* FUSE_DIRECT_IO_ALLOW_MMAP */

/*
 * FUSE passthrough (Linux 6.9, protocol 7.40; Debian 12's headers and
 * libfuse 3.14 predate it, so its definitions are spelled here as in the
 * kernel's include/uapi/linux/fuse.h).  A file passed through is read by
 * the kernel straight from a backing file, at the same offsets: the FUSE
 * daemon is not asked again, and the read costs what a read of a local
 * file costs.  The backing file must hold the whole file, so only files
 * of one chunk are passed through (their chunk file is the file).
 */
#define PASSTHROUGH_FLAGS2 (1u << (37 - 32)) /* FUSE_PASSTHROUGH */
#define FOPEN_PASSTHROUGH_FLAG (1u << 7)
/* backing files may sit on one stacked filesystem (overlayfs) */
#define PT_STACK_DEPTH 2
struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define PT_IOC_BACKING_OPEN _IOW(229, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

/* The backing id of the OPEN reply this thread is writing, or -1. */
static __thread int32_t tl_backing = -1;

static ssize_t io_read(int fd, void *buf, size_t len, void *ud)
{
	struct wmount *m = ud;
	ssize_t n = read(fd, buf, len);
	struct fuse_in_header ih;
	struct fuse_init_in in;

	if (m->init_seen || n < (ssize_t)(sizeof(ih) + sizeof(in)))
		return n;
	memcpy(&ih, buf, sizeof(ih));
	if (ih.opcode != FUSE_INIT)
		return n;
	memcpy(&in, (const char *)buf + sizeof(ih), sizeof(in));
	m->init_seen = 1;
	m->mmap_offered =
		(in.flags & FUSE_INIT_EXT) && (in.flags2 & ALLOW_MMAP_FLAGS2);
	m->pt_offered =
		(in.flags & FUSE_INIT_EXT) && (in.flags2 & PASSTHROUGH_FLAGS2);
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *ud)
{
	struct wmount *m = ud;
	struct fuse_out_header oh;
	struct fuse_init_out out;

	if (m->patch_init && count >= 2 && iov[0].iov_len == sizeof(oh) &&
	    iov[1].iov_len == sizeof(out)) {
		m->patch_init = 0;
		memcpy(&oh, iov[0].iov_base, sizeof(oh));
		memcpy(&out, iov[1].iov_base, sizeof(out));
		if (oh.error == 0 && m->dio && m->mmap_offered &&
		    (out.flags & FUSE_INIT_EXT))
			out.flags2 |= ALLOW_MMAP_FLAGS2;
		/* libfuse 3.14 asks for max_write's pages; reads may be
		 * larger (the kernel clamps this to its limit) */
		if (oh.error == 0 && (out.flags & FUSE_MAX_PAGES) &&
		    m->max_read / PAGE_BYTES >= out.max_pages)
			out.max_pages =
				(uint16_t)(m->max_read / PAGE_BYTES + 1);
		if (oh.error == 0 && atomic_load(&m->pt) &&
		    (out.flags & FUSE_INIT_EXT)) {
			out.flags2 |= PASSTHROUGH_FLAGS2;
			out.unused[0] = PT_STACK_DEPTH; /* max_stack_depth */
		}
		memcpy(iov[1].iov_base, &out, sizeof(out));
	}
	/* this thread's fuse_reply_open of a passed-through file */
	if (tl_backing >= 0 && count >= 2 && iov[0].iov_len == sizeof(oh) &&
	    iov[1].iov_len == sizeof(struct fuse_open_out)) {
		struct fuse_open_out oo;

		memcpy(&oo, iov[1].iov_base, sizeof(oo));
		oo.open_flags |= FOPEN_PASSTHROUGH_FLAG;
		memcpy((char *)&oo + offsetof(struct fuse_open_out, padding),
		       &tl_backing, sizeof(tl_backing)); /* backing_id */
		memcpy(iov[1].iov_base, &oo, sizeof(oo));
	}
	return writev(fd, iov, count);
}

static ssize_t io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout,
			      size_t len, unsigned int flags, void *ud)
{
	(void)ud;
	return splice(fdin, offin, fdout, offout, len, flags);
}

static const struct fuse_custom_io init_io = {
	.writev = io_writev,
	.read = io_read,
	.splice_send = io_splice_send,
};

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct wmount *m = fuse_req_userdata(req);
	struct fuse_entry_param ep;
	struct entry *e;
	uint32_t node;
	int64_t k = -1;

	memset(&ep, 0, sizeof(ep));
	pthread_rwlock_rdlock(&m->lock);
	if (parent == FUSE_ROOT_ID && !m->o.checkpoint) {
		e = live_find(m, name);
		k = e ? 0 : -1;
	} else if (resolve(m, parent, &e, &node) == 0 && e &&
		   e->nodes[node].is_dir) {
		k = find_kid(e, node, name, strlen(name));
	}
	if (k < 0) {
		pthread_rwlock_unlock(&m->lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	ep.ino = ino_of(e, (uint32_t)k);
	fill_stat(m, e, (uint32_t)k, ep.ino, &ep.attr);
	pthread_rwlock_unlock(&m->lock);
	ep.attr_timeout = ep.entry_timeout = m->o.refresh;
	fuse_reply_entry(req, &ep);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct wmount *m = fuse_req_userdata(req);
	struct entry *e;
	struct stat st;
	uint32_t node;

	(void)fi;
	pthread_rwlock_rdlock(&m->lock);
	if (resolve(m, ino, &e, &node) < 0) {
		pthread_rwlock_unlock(&m->lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_stat(m, e, node, ino, &st);
	pthread_rwlock_unlock(&m->lock);
	fuse_reply_attr(req, &st, m->o.refresh);
}

struct dirbuf {
	char *p;
	size_t size;
};

static int dirbuf_add(fuse_req_t req, struct dirbuf *b, const char *name,
		      fuse_ino_t ino, int is_dir)
{
	struct stat st;
	size_t old = b->size,
	       n = fuse_add_direntry(req, NULL, 0, name, NULL, 0);
	char *np = realloc(b->p, old + n);

	if (!np)
		return -1;
	b->p = np;
	b->size += n;
	memset(&st, 0, sizeof(st));
	st.st_ino = ino;
	st.st_mode = is_dir ? S_IFDIR : S_IFREG;
	fuse_add_direntry(req, b->p + old, n, name, &st, (off_t)b->size);
	return 0;
}

/* The whole listing is built at opendir and served in slices. */
static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct wmount *m = fuse_req_userdata(req);
	struct dirbuf *b = calloc(1, sizeof(*b));
	struct entry *e;
	uint32_t node;
	int bad = !b;

	pthread_rwlock_rdlock(&m->lock);
	if (!bad && resolve(m, ino, &e, &node) < 0) {
		pthread_rwlock_unlock(&m->lock);
		free(b);
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!bad && e && !e->nodes[node].is_dir) {
		pthread_rwlock_unlock(&m->lock);
		free(b);
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	bad = bad || dirbuf_add(req, b, ".", ino, 1) ||
	      dirbuf_add(req, b, "..", FUSE_ROOT_ID, 1);
	if (!bad && !e) {
		for (size_t i = 0; i < m->nlive && !bad; i++)
			bad = dirbuf_add(req, b, m->live[i]->id,
					 ino_of(m->live[i], 0), 1);
	} else if (!bad) {
		const struct node *d = &e->nodes[node];

		for (uint32_t k = 0; k < d->nkids && !bad; k++) {
			const struct node *n = &e->nodes[d->kids[k]];

			bad = dirbuf_add(req, b, n->name, ino_of(e, d->kids[k]),
					 n->is_dir);
		}
	}
	pthread_rwlock_unlock(&m->lock);
	if (bad) {
		if (b)
			free(b->p);
		free(b);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)b;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dirbuf *b = (struct dirbuf *)(uintptr_t)fi->fh;

	(void)ino;
	if (off < 0 || (size_t)off >= b->size)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, b->p + off,
			       b->size - (size_t)off < size
				       ? b->size - (size_t)off
				       : size);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct dirbuf *b = (struct dirbuf *)(uintptr_t)fi->fh;

	(void)ino;
	free(b->p);
	free(b);
	fuse_reply_err(req, 0);
}

static void lease_close(struct entry *e)
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
static int lease_open(struct wmount *m, struct entry *e)
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
	if (took && (rc = entry_check(m, e, now_mono(), 0)) < 0)
		lease_close(e);
	return rc;
}

/*
 * Pass h through to its chunk file when it is a file of one chunk on a
 * mount that may: every open file of a node must use the same backing id
 * (the kernel refuses a second one, and a non-passthrough open of a node
 * that has one), so the node keeps it while any of its files is open.
 * The chunk file is checked as for a read (its length, then the manifest
 * still the same); if that fails the file is opened normally and its
 * reads fail as any file's would.  1: passed through, *id the backing id;
 * 0: open it normally.
 */
static int pt_open(struct wmount *m, struct fh *h, int32_t *id)
{
	struct node *n = &h->e->nodes[h->node];
	struct pt_backing_map map;
	uint64_t foff = 0;
	size_t len = 0;
	double t0;
	int fd = -1, rc, bid;

	if (!atomic_load(&m->pt) || h->size == 0 || h->size > h->cs)
		return 0;
	pthread_mutex_lock(&m->ptlock);
	if (n->backing_refs) {
		n->backing_refs++;
		*id = n->backing;
		pthread_mutex_unlock(&m->ptlock);
		return 1;
	}
	t0 = now_mono();
	rc = wstore_file_chunk_fd(&fd, &foff, &len, h->f, 0);
	if (rc == 0 && (foff != 0 || len != h->size))
		rc = WSTORE_ECORRUPT;
	if (rc < 0 || entry_validate(m, h->e, t0) < 0) {
		/* gone or damaged (a delete under way): open it as any
		 * file, whose reads then fail as they do */
		rc = 0;
	} else {
		memset(&map, 0, sizeof(map));
		map.fd = fd;
		bid = ioctl(fuse_session_fd(m->se), PT_IOC_BACKING_OPEN, &map);
		if (bid < 0) {
			/* not allowed (it needs CAP_SYS_ADMIN) or not
			 * possible here: serve every file as before */
			mlog(m, LOG_WARNING,
			     "FUSE passthrough refused (%s): files are "
			     "served by the daemon",
			     strerror(errno));
			atomic_store(&m->pt, 0);
			rc = 0;
		} else {
			n->backing = bid;
			n->backing_refs = 1;
			*id = bid;
			rc = 1;
		}
	}
	if (fd >= 0)
		close(fd); /* the kernel holds the file it backs with */
	pthread_mutex_unlock(&m->ptlock);
	return rc;
}

/*
 * After INIT: whether this process may register backing files (it needs
 * CAP_SYS_ADMIN), tried on a file of its own, so that the mount's first
 * line says what it will do.
 */
static void pt_probe(struct wmount *m)
{
	struct pt_backing_map map;
	int fd, bid;

	if (!atomic_load(&m->pt))
		return;
	memset(&map, 0, sizeof(map));
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	map.fd = fd;
	bid = fd < 0 ? -1
		     : ioctl(fuse_session_fd(m->se), PT_IOC_BACKING_OPEN, &map);
	if (bid >= 0) {
		uint32_t b = (uint32_t)bid;

		ioctl(fuse_session_fd(m->se), PT_IOC_BACKING_CLOSE, &b);
	} else {
		atomic_store(&m->pt, 0);
	}
	if (fd >= 0)
		close(fd);
}

/* Drop h's reference on its node's backing id; the last closes it. */
static void pt_close(struct wmount *m, struct fh *h)
{
	struct node *n = &h->e->nodes[h->node];

	pthread_mutex_lock(&m->ptlock);
	if (n->backing_refs && --n->backing_refs == 0) {
		uint32_t bid = (uint32_t)n->backing;

		if (ioctl(fuse_session_fd(m->se), PT_IOC_BACKING_CLOSE, &bid) <
			    0 &&
		    !atomic_load(&m->unmounting))
			mlog(m, LOG_WARNING,
			     "cannot close a passthrough file: %s",
			     strerror(errno));
	}
	pthread_mutex_unlock(&m->ptlock);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct wmount *m = fuse_req_userdata(req);
	const wstore_manifest *man;
	wstore_file_info info;
	struct entry *e;
	struct fh *h;
	uint32_t node;
	int32_t bid = -1;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	pthread_rwlock_rdlock(&m->lock);
	if (resolve(m, ino, &e, &node) < 0 || !e) {
		pthread_rwlock_unlock(&m->lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (e->nodes[node].is_dir) {
		pthread_rwlock_unlock(&m->lock);
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (atomic_load(&e->draining)) {
		pthread_rwlock_unlock(&m->lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	entry_get(e);
	pthread_rwlock_unlock(&m->lock);
	if ((rc = lease_open(m, e)) < 0) {
		entry_put(e);
		fuse_reply_err(req, -rc);
		return;
	}
	man = wstore_checkpoint_manifest(e->ck);
	h = calloc(1, sizeof(*h));
	rc = h ? wstore_manifest_file(&info, man, (size_t)e->nodes[node].file)
	       : -ENOMEM;
	if (rc == 0)
		rc = wstore_file_open(&h->f, e->ck, info.path);
	if (rc < 0) {
		mlog(m, LOG_ERR, "cannot open a file of '%s': %s", e->id,
		     wstore_last_error());
		free(h);
		lease_close(e);
		entry_put(e);
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
		return;
	}
	h->e = e;
	h->fidx = e->nodes[node].file;
	h->size = info.size;
	h->cs = info.chunk_size ? info.chunk_size : info.size;
	if (!h->cs)
		h->cs = 1;
	h->node = node;
	atomic_init(&h->last_ci, -1);
	atomic_init(&h->refs, 1);
	h->passthrough = pt_open(m, h, &bid);
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = m->dio && !h->passthrough;
	fi->keep_cache = !m->dio && !h->passthrough;
	fi->noflush = 1;
	tl_backing = h->passthrough ? bid : -1;
	fuse_reply_open(req, fi);
	tl_backing = -1;
}

static void fh_put(struct wmount *m, struct fh *h)
{
	if (atomic_fetch_sub(&h->refs, 1) != 1)
		return;
	if (h->passthrough)
		pt_close(m, h);
	wstore_file_free(h->f);
	lease_close(h->e);
	entry_put(h->e);
	free(h);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	fh_put(fuse_req_userdata(req), (struct fh *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* Queue read-ahead when a read moves on to the next chunk. */
static void maybe_readahead(struct wmount *m, struct fh *h, uint64_t ci)
{
	long long last = atomic_exchange(&h->last_ci, (long long)ci);
	uint64_t nchunks = (h->size + h->cs - 1) / h->cs, depth;

	if (last == (long long)ci || (last != -1 && (uint64_t)last + 1 != ci))
		return;
	depth = ra_depth(m, h->cs);
	for (uint64_t k = 1; k <= depth && ci + k < nchunks; k++)
		ra_queue(m, h->e, h->fidx, ci + k);
}

#define MAX_PIECES 16

/*
 * A zero-copy reply: the pieces (iov lengths, coff offsets in their
 * chunks) as buffers of the pinned slots' chunk fds, for fuse_reply_data,
 * which splices them when the kernel allows.  -EIO if a chunk file's
 * length changed since it was opened.
 */
static int fd_bufvec(struct fuse_bufvec **out, struct wmount *m,
		     struct slot **s, const struct iovec *iov,
		     const uint64_t *coff, int n)
{
	struct fuse_bufvec *bv;
	struct fuse_buf *b;

	*out = NULL;
	bv = calloc(1, sizeof(*bv) + (size_t)(n > 1 ? n - 1 : 0) * sizeof(*b));
	if (!bv)
		return -ENOMEM;
	bv->count = (size_t)n;
	b = bv->buf;
	for (int i = 0; i < n; i++) {
		struct stat st;

		/* files are replaced, never rewritten: a changed length
		 * means someone else truncated it since it was opened, and
		 * a short splice would reach the reader as zero padding */
		if (fstat(s[i]->fd, &st) < 0 ||
		    (uint64_t)st.st_size != s[i]->len) {
			mlog(m, LOG_ERR,
			     "chunk %" PRIu64 " of a file of '%s' changed "
			     "size in the store while open",
			     s[i]->ci, s[i]->e->id);
			free(bv);
			return -EIO;
		}
		b[i].size = iov[i].iov_len;
		b[i].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		b[i].fd = s[i]->fd;
		b[i].pos = (off_t)coff[i];
	}
	*out = bv;
	return 0;
}

static void read_fh(fuse_req_t req, struct fh *h, size_t size, off_t off)
{
	struct wmount *m = fuse_req_userdata(req);
	struct slot *s[MAX_PIECES];
	struct iovec iov[MAX_PIECES];
	struct fuse_bufvec *bv = NULL;
	uint64_t coff[MAX_PIECES];
	uint64_t pos = (uint64_t)off, end, ci0;
	int n = 0, err = 0;

	if (atomic_load(&h->e->dead)) {
		fuse_reply_err(req, EIO);
		return;
	}
	if (off < 0 || pos >= h->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	end = h->size - pos < size ? h->size : pos + size;
	ci0 = pos / h->cs;
	while (pos < end && n < MAX_PIECES) {
		uint64_t ci = pos / h->cs, cstart = ci * h->cs;
		uint64_t clen =
			h->size - cstart < h->cs ? h->size - cstart : h->cs;
		uint64_t take =
			(end < cstart + clen ? end : cstart + clen) - pos;

		s[n] = cache_get(m, h->e, h->fidx, h->f, h->cs, ci,
				 (size_t)clen, &err);
		if (!s[n])
			break;
		coff[n] = pos - cstart;
		iov[n].iov_base = s[n]->buf ? s[n]->buf + coff[n] : NULL;
		iov[n].iov_len = (size_t)take;
		n++;
		pos += take;
	}
	/* a short read (more than MAX_PIECES tiny chunks) is fine for FUSE */
	if (!err && atomic_load(&h->e->dead))
		err = -EIO;
	if (!err)
		maybe_readahead(m, h, ci0 + (uint64_t)(n ? n - 1 : 0));
	if (!err && m->c.zc)
		err = fd_bufvec(&bv, m, s, iov, coff, n);
	if (err)
		fuse_reply_err(req, err == -ENOENT   ? ENOENT
				    : err == -ENOMEM ? ENOMEM
						     : EIO);
	else if (bv)
		fuse_reply_data(req, bv, 0);
	else
		fuse_reply_iov(req, iov, n);
	free(bv);
	for (int i = 0; i < n; i++)
		cache_done(&m->c, s[i], err ? 0 : iov[i].iov_len);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct wmount *m = fuse_req_userdata(req); /* req ends with its reply */
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;

	(void)ino;
	atomic_fetch_add(&h->refs, 1);
	read_fh(req, h, size, off);
	fh_put(m, h);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct wmount *m = fuse_req_userdata(req);
	struct statvfs sv;
	uint64_t bytes = 0, files = 0;

	(void)ino;
	pthread_rwlock_rdlock(&m->lock);
	for (size_t i = 0; i < m->nlive; i++) {
		const wstore_manifest *man =
			wstore_checkpoint_manifest(m->live[i]->ck);

		bytes += wstore_manifest_total_size(man);
		files += m->live[i]->nnodes;
	}
	pthread_rwlock_unlock(&m->lock);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_blocks = (fsblkcnt_t)((bytes + 4095) / 4096);
	sv.f_files = (fsfilcnt_t)files;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.statfs = op_statfs,
};

/* ---- mount lifecycle ---------------------------------------------------- */

int wmount_new(struct wmount **out, wstore_store *store,
	       const struct wmount_opts *o)
{
	struct wmount *m = calloc(1, sizeof(*m));
	int rc;

	*out = NULL;
	if (!m) {
		fprintf(stderr, "wstore: out of memory\n");
		return -ENOMEM;
	}
	m->s = store;
	m->o = *o;
	m->uid = getuid();
	m->gid = getgid();
	m->started = time(NULL);
	pthread_rwlock_init(&m->lock, NULL);
	pthread_mutex_init(&m->rlock, NULL);
	pthread_mutex_init(&m->loglock, NULL);
	pthread_mutex_init(&m->ptlock, NULL);
	{
		/* refresh_main's deadlines are on the monotonic clock: with
		 * the default (realtime) clock every wait times out at once
		 * and the refresh thread spins, re-reading the store */
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&m->rcond, &ca);
		pthread_condattr_destroy(&ca);
	}
	m->ntab = 1; /* eid 0 would give inode 0..; never used */
	m->captab = 64;
	m->tab = calloc(m->captab, sizeof(*m->tab));
	if (!m->tab || cache_init(m) < 0) {
		fprintf(stderr, "wstore: out of memory\n");
		wmount_free(m);
		return -ENOMEM;
	}
	zc_read_size(m);
	if ((rc = refresh(m)) < 0) {
		wmount_free(m);
		return rc;
	}
	if (o->checkpoint && m->nlive == 0) {
		wstore_checkpoint *ck = NULL;

		/* say why: absent, FAILED, unreadable */
		rc = wstore_checkpoint_open(&ck, store, o->checkpoint);
		wstore_checkpoint_free(ck);
		fprintf(stderr, "wstore: %s\n",
			rc < 0 && *wstore_last_error()
				? wstore_last_error()
				: "checkpoint is not in the store's index");
		wmount_free(m);
		return rc < 0 ? rc : WSTORE_ENOTFOUND;
	}
	*out = m;
	return 0;
}

/* Undo /proc's octal escapes (\040 for a blank) in place. */
static void unescape_octal(char *s)
{
	char *p, *q;

	for (p = q = s; *p; q++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' &&
		    p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
			*q = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 +
				    (p[3] - '0'));
			p += 4;
		} else {
			*q = *p++;
		}
	}
	*q = '\0';
}

/* The device number of the wstore mount at mp (a canonical path), from
 * /proc/self/mountinfo; the last one listed there is the newest (ours).
 * Never stat() the mountpoint: the daemon must not wait on its own mount,
 * whose loop may not be (or no longer be) answering. */
static int mount_dev(const char *mp, unsigned *maj, unsigned *min)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[PATH_MAX * 2 + 512], dir[PATH_MAX], type[64];
	unsigned a, b;
	int found = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");

		if (!sep ||
		    sscanf(line, "%*s %*s %u:%u %*s %4095s", &a, &b, dir) !=
			    3 ||
		    sscanf(sep, " - %63s", type) != 1)
			continue;
		unescape_octal(dir);
		if (!strcmp(dir, mp) && !strcmp(type, "fuse.wstore")) {
			*maj = a;
			*min = b;
			found = 1;
		}
	}
	fclose(f);
	return found ? 0 : -1;
}

/* Widen the kernel's read-ahead on this mount (its default is 128 KiB,
 * which caps FUSE reads through the page cache at that size). */
static void widen_readahead(struct wmount *m, const char *canon)
{
	unsigned maj, min;
	char path[128];
	FILE *f;

	if (!canon || mount_dev(canon, &maj, &min) < 0)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj,
		 min);
	if (!(f = fopen(path, "w")))
		return; /* not root: keep the default */
	if (fprintf(f, "%d\n", KERNEL_RA_KB) < 0 || fclose(f) != 0)
		mlog(m, LOG_WARNING, "cannot set %s", path);
}

static int make_session(struct wmount *m)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char opts[256], mr[32] = "";

	if (m->c.zc)
		snprintf(mr, sizeof(mr), ",max_read=%" PRIu32, m->max_read);
	snprintf(opts, sizeof(opts),
		 "ro,fsname=wstore,subtype=wstore,default_permissions%s%s",
		 m->o.allow_other ? ",allow_other" : "", mr);
	if (fuse_opt_add_arg(&args, "wstore") ||
	    fuse_opt_add_arg(&args, "-o") || fuse_opt_add_arg(&args, opts) ||
	    /* libfuse's trace of every request, for debugging */
	    (getenv("WSTORE_FUSE_DEBUG") && fuse_opt_add_arg(&args, "-d"))) {
		fuse_opt_free_args(&args);
		return -ENOMEM;
	}
	m->se = fuse_session_new(&args, &ops, sizeof(ops), m);
	fuse_opt_free_args(&args);
	return m->se ? 0 : -EINVAL;
}

/*
 * Stopping on SIGINT, SIGTERM, SIGHUP.  libfuse's own handlers only set
 * the session's exit flag, and its loops test that flag and then block
 * (sem_wait, or read on /dev/fuse) until a signal interrupts them: a
 * signal handled between the test and the block is lost, and the daemon
 * never unmounts (seen under load, and often under TSan, which defers
 * signal handlers).  So no handler runs at all: the three signals stay
 * blocked in every thread (wmount_hold_signals runs before any starts,
 * and threads inherit the mask), the stopper thread takes them with sigwait,
 * sets the exit flag, then interrupts the loop's thread with SIGUSR2
 * (a handler that does nothing, without SA_RESTART), again every 20 ms,
 * until the loop has returned.
 */
static void on_wake_signal(int sig)
{
	(void)sig; /* only interrupts a blocking call */
}

static void stop_sigs(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

static void *stop_main(void *arg)
{
	struct wmount *m = arg;
	struct timespec ts;
	sigset_t set;
	int sig;

	stop_sigs(&set);
	sigwait(&set, &sig);
	pthread_mutex_lock(&m->rlock);
	if (!m->loop_done)
		fuse_session_exit(m->se);
	while (!m->loop_done) {
		pthread_kill(m->looper, SIGUSR2);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&m->rcond, &m->rlock, &ts);
	}
	pthread_mutex_unlock(&m->rlock);
	return NULL;
}

void wmount_hold_signals(void)
{
	sigset_t set;

	stop_sigs(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* Block the stop signals here too (threads started later inherit that),
 * set the wake-up handler and start the stopper; -1 if that fails. */
static int stop_setup(struct wmount *m)
{
	struct sigaction sa;

	wmount_hold_signals();
	m->looper = pthread_self();
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_wake_signal;
	if (sigaction(SIGUSR2, &sa, NULL) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	if (pthread_create(&m->stopper, NULL, stop_main, m) != 0)
		return -1;
	m->stopping = 1;
	return 0;
}

/* After the loop: end the stopper.  The stop signals stay blocked until
 * the daemon exits: one that comes now has nothing left to stop. */
static void stop_teardown(struct wmount *m)
{
	pthread_mutex_lock(&m->rlock);
	m->loop_done = 1;
	pthread_cond_broadcast(&m->rcond);
	pthread_mutex_unlock(&m->rlock);
	if (m->stopping) {
		/* taken by its sigwait, if no signal was */
		pthread_kill(m->stopper, SIGTERM);
		pthread_join(m->stopper, NULL);
		m->stopping = 0;
	}
}

/*
 * Answer the kernel's INIT (always its first request) before the mount is
 * reported ready, so that the I/O mode it settles is known then and the
 * first access does not wait for the loop to start.  Interrupted by a stop
 * signal (the stopper sets the exit flag), the loop then returns at once.
 */
static void serve_init(struct wmount *m)
{
	struct fuse_buf fbuf;
	int res;

	memset(&fbuf, 0, sizeof(fbuf));
	while (!fuse_session_exited(m->se)) {
		res = fuse_session_receive_buf(m->se, &fbuf);
		if (res == -EINTR)
			continue;
		if (res > 0)
			fuse_session_process_buf(m->se, &fbuf);
		break;
	}
	free(fbuf.mem);
	pt_probe(m);
}

static int serve(struct wmount *m)
{
	struct fuse_loop_config *lc;
	int rc;

	if (m->o.threads <= 1)
		return fuse_session_loop(m->se);
	if (!(lc = fuse_loop_cfg_create()))
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, 0);
	fuse_loop_cfg_set_max_threads(lc, m->o.threads);
	fuse_loop_cfg_set_idle_threads(lc, m->o.threads);
	rc = fuse_session_loop_mt(m->se, lc);
	fuse_loop_cfg_destroy(lc);
	return rc;
}

int wmount_run(struct wmount *m, const char *mountpoint,
	       void (*ready)(void *ctx), void *ctx)
{
	char canon[PATH_MAX];
	int rc;

	/* before mounting: resolving the path afterwards would ask the mount */
	if (!realpath(mountpoint, canon))
		canon[0] = '\0';
	if (make_session(m) < 0) {
		fprintf(stderr, "wstore: cannot set up the FUSE session\n");
		return 1;
	}
	if (stop_setup(m) < 0) {
		fprintf(stderr, "wstore: cannot install signal handlers: %s\n",
			strerror(errno));
		stop_teardown(m);
		return 1;
	}
	if (fuse_session_mount(m->se, mountpoint) < 0) {
		fprintf(stderr,
			"wstore: cannot mount on '%s' (see the "
			"message above)\n",
			mountpoint);
		stop_teardown(m);
		return 1;
	}
	/* on the mounted fd: fuse_session_custom_io only swaps the I/O */
	if (fuse_session_custom_io(m->se, &init_io, fuse_session_fd(m->se)) < 0)
		mlog(m, LOG_WARNING,
		     "cannot hook the session's I/O: shared mmap of files "
		     "will fail with --direct-io, reads stay at 1 MiB");
	widen_readahead(m, canon[0] ? canon : NULL);
	serve_init(m);
	mlog(m, LOG_INFO, "mounted %zu checkpoint%s on '%s' (%s%s)", m->nlive,
	     m->nlive == 1 ? "" : "s", mountpoint,
	     m->dio ? "direct I/O" : "page cache",
	     !m->c.zc		   ? ""
	     : atomic_load(&m->pt) ? ", chunk files spliced, files of one "
				     "chunk passed through"
				   : ", chunk files spliced");
	if (ready) {
		ready(ctx);
		if (!m->o.foreground) {
			openlog("wstore-mount", LOG_PID, LOG_DAEMON);
			m->daemonized = 1;
		}
	}
	cache_start(m);
	if (pthread_create(&m->refresher, NULL, refresh_main, m) == 0)
		m->refreshing = 1;
	rc = serve(m);
	stop_teardown(m);
	/* Unmount before joining: closing the session's fd aborts whatever
	 * the kernel still has pending on the mount, so no thread can stay
	 * blocked on it once the loop no longer answers. */
	pthread_mutex_lock(&m->rlock);
	m->rstop = 1;
	pthread_cond_broadcast(&m->rcond);
	pthread_mutex_unlock(&m->rlock);
	atomic_store(&m->unmounting, 1);
	fuse_session_unmount(m->se);
	if (m->refreshing)
		pthread_join(m->refresher, NULL);
	m->refreshing = 0;
	cache_stop(m);
	mlog(m, LOG_INFO, "unmounted '%s'", mountpoint);
	return rc < 0 ? 1 : 0;
}

void wmount_free(struct wmount *m)
{
	if (!m)
		return;
	if (m->se)
		fuse_session_destroy(m->se);
	m->se = NULL;
	/* Draining entries first: they are no longer in live[], and a live
	 * entry's last reference may go below, so tab[] must not be read
	 * after that. */
	for (uint32_t i = 0; i < m->ntab; i++)
		if (m->tab[i] && atomic_load(&m->tab[i]->draining))
			entry_put(m->tab[i]);
	for (size_t i = 0; i < m->nlive; i++)
		entry_put(m->live[i]);
	free(m->live);
	free(m->tab);
	cache_free(&m->c);
	pthread_cond_destroy(&m->rcond);
	pthread_mutex_destroy(&m->loglock);
	pthread_mutex_destroy(&m->ptlock);
	pthread_mutex_destroy(&m->rlock);
	pthread_rwlock_destroy(&m->lock);
	if (m->daemonized)
		closelog();
	free(m);
}
