/*
 * mount.h - the mount's private structures and the calls between its
 * rooms (not seen by main.c, which uses fuse_ops.h):
 *   tree.c     the tree of entries (one per READY checkpoint), its
 *              refresh from the store, leases of entries with open files
 *   cache.c    the chunk cache (whole chunks, LRU) and read-ahead
 *   kio.c      the kernel I/O hooks: INIT and OPEN reply patching,
 *              passthrough, pipe and request sizing, kernel read-ahead
 *   ops.c      the FUSE operations
 *   session.c  the session: building the mount, signals and the stopper,
 *              the run loop, logging
 *
 * Inode numbers are (entry id << NODE_BITS) | node; entry ids only grow,
 * so an inode never names two things, and FUSE_ROOT_ID (1) is the mount
 * root: the list of entries, or with --checkpoint the one entry's
 * directory.  The table of entries is guarded by wmount.lock (an rwlock);
 * an entry's nodes never change once published.
 */
#ifndef WSTORE_MOUNT_MOUNT_H
#define WSTORE_MOUNT_MOUNT_H

#define FUSE_USE_VERSION 312

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include <wstore/wstore.h>
#include <wstore/read.h>
#include <wstore/lease.h>

#include "fuse_ops.h"

#define NODE_BITS 32
#define RA_QUEUE 32   /* read-ahead jobs waiting at most */
#define RA_THREADS 2  /* read-ahead threads */
#define FREE_BUFS 8   /* chunk buffers kept for reuse */
#define MAX_PIECES 16 /* chunks a reply is written from in place */

/* ---- tree (tree.c) ------------------------------------------------------ */

struct node {
	char *name;
	uint32_t parent;
	int is_dir;
	int64_t file; /* manifest index, -1 for a directory */
	uint64_t size;
	uint32_t *kids;
	uint32_t nkids, capkids;
	/* passthrough (under wmount.ptlock): the kernel's id of the file
	 * the open files of this node read, and how many use it */
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
	/* nodes by (parent, name): open addressing, node + 1 per slot (0
	 * empty), kcap a power of two at least twice nnodes */
	uint32_t *kidx;
	uint32_t kcap;
	atomic_int dead;
	atomic_int refs;       /* the table's, open files', read-ahead jobs' */
	pthread_mutex_t vlock; /* guards validated */
	uint64_t validated;    /* start of the last good manifest check (ms) */
	pthread_mutex_t llock; /* guards nopen and lease */
	uint32_t nopen;	       /* files open on the entry */
	wstore_lease *lease;   /* held while nopen > 0 */
	/* out of the listing, its delete waiting for its open files: still
	 * in tab (getattr and reads on those work), refuses new opens */
	atomic_int draining;
};

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
	int wfd; /* the store's file holding it whole (zero-copy mounts), -1 */
	struct fh *prev, *next; /* in wmount.fhs, under wmount.fhlock */
};

/* ---- chunk cache (cache.c) ---------------------------------------------- */

enum { SLOT_LOADING, SLOT_READY };

struct slot {
	uint32_t eid;
	int64_t fidx;
	uint64_t ci;
	struct entry *e; /* not a reference: compared only */
	char *buf;	 /* the chunk's bytes, or NULL when fd is used */
	int fd;		 /* the chunk's file (zero-copy mounts), or -1 */
	uint64_t fdoff;	 /* where the chunk starts in fd */
	uint64_t fdsize; /* fd's size when opened */
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

/* ---- the mount (session.c) ---------------------------------------------- */

struct wmount {
	wstore_store *s;
	struct wmount_opts o;
	struct fuse_session *se;
	uid_t uid;
	gid_t gid;
	time_t started;
	int daemonized;	       /* logging to syslog */
	int to_file;	       /* logging to o.log_fd only */
	pthread_rwlock_t lock; /* guards tab, live */
	struct entry **tab;    /* by eid; NULL once retired */
	uint32_t ntab, captab;
	struct entry **live; /* sorted by id */
	size_t nlive;
	pthread_mutex_t rlock;
	pthread_cond_t rcond; /* monotonic (clock.h) */
	int rstop;
	pthread_t refresher;
	int refreshing;
	/* the stopper thread (session.c) */
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
	atomic_int pt;		/* whole files are passed through */
	pthread_mutex_t ptlock; /* guards the nodes' backing ids */
	/* open file handles: those the kernel never released (a mount torn
	 * down with files open) are closed by wmount_free */
	pthread_mutex_t fhlock;
	struct fh *fhs;
	struct cache c;
	pthread_mutex_t loglock;
	uint64_t lastlog; /* ms, monotonic */
	unsigned suppressed;
};

static inline fuse_ino_t ino_of(const struct entry *e, uint32_t node)
{
	return ((fuse_ino_t)e->eid << NODE_BITS) | node;
}

/* session.c */
void mlog(struct wmount *m, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* tree.c */
void entry_get(struct entry *e);
void entry_put(struct entry *e);
int64_t find_kid(const struct entry *e, uint32_t dir, const char *name,
		 size_t len);
struct entry *live_find(struct wmount *m, const char *id);
int entry_check(struct wmount *m, struct entry *e, uint64_t t0, int draining);
int entry_validate(struct wmount *m, struct entry *e, uint64_t t0);
int entry_read_failed(struct wmount *m, struct entry *e, const char *what,
		      const char *path, int rc);
int lease_open(struct wmount *m, struct entry *e);
void lease_close(struct entry *e);
int tree_refresh(struct wmount *m);
void *refresh_main(void *arg);

/* cache.c */
int cache_init(struct wmount *m);
void cache_start(struct wmount *m);
void cache_stop(struct wmount *m);
void cache_free(struct cache *c);
struct slot *cache_get(struct wmount *m, struct entry *e, int64_t fidx,
		       wstore_file *f, uint64_t cs, uint64_t ci, size_t len,
		       int *err);
void cache_unpin(struct cache *c, struct slot *s);
void cache_done(struct cache *c, struct slot *s, size_t n);
void cache_purge(struct cache *c, struct entry *e);
void ra_queue(struct wmount *m, struct entry *e, int64_t fidx, uint64_t ci);
uint64_t ra_depth(const struct wmount *m, uint64_t cs);

/* kio.c */
extern const struct fuse_custom_io kio_hooks;
int zc_capable(wstore_store *store);
void zc_read_size(struct wmount *m);
void kio_init(void *ud, struct fuse_conn_info *conn);
int pt_open(struct wmount *m, struct fh *h, int32_t *id);
void pt_probe(struct wmount *m);
void pt_close(struct wmount *m, struct fh *h);
void fh_close_all(struct wmount *m);
void kio_reply_open(fuse_req_t req, const struct fuse_file_info *fi,
		    int32_t backing);
void widen_readahead(struct wmount *m, const char *canon);

/* ops.c */
extern const struct fuse_lowlevel_ops wmount_ops;

#endif
