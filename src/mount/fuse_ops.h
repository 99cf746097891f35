/*
 * fuse_ops.h - the read-only FUSE filesystem behind `wstore mount`, as
 * main.c (wstore-mount: the command line and daemonizing) sees it: a tree
 * of READY checkpoints refreshed in the background, a bounded LRU of whole
 * chunks with sequential read-ahead, and the low-level FUSE operations.
 * Uses only the public API (wstore.h, read.h, lease.h).  Its rooms and
 * their private structures: mount.h.
 */
#ifndef WSTORE_MOUNT_FUSE_OPS_H
#define WSTORE_MOUNT_FUSE_OPS_H

#include <stdint.h>

#include <wstore/wstore.h>

struct wmount_opts {
	const char *checkpoint; /* NULL: one directory per READY checkpoint */
	uint64_t cache_size;	/* bytes of whole chunks kept (LRU) */
	double refresh;		/* seconds between manifest re-reads */
	unsigned threads;	/* FUSE worker threads; 1 = single-threaded */
	int direct_io;		/* 1 bypass the kernel page cache, 0 use it,
				   -1 decide (direct on local files where
				   shared mmap works with it) */
	int allow_other;	/* let other users read the mount */
	int foreground;		/* log to stderr, else to syslog */
	int log_fd; /* once mounted, log only to this file (append), or -1 */
};

struct wmount;

/*
 * Build the tree (the first listing of the store; with a checkpoint, fails
 * naming it if it is absent or not READY).  The store must outlive the
 * mount; it is used from several threads.  Prints its own errors.
 */
int wmount_new(struct wmount **out, wstore_store *store,
	       const struct wmount_opts *o);
/*
 * Mount at mountpoint and serve until unmounted or SIGINT/SIGTERM/SIGHUP.
 * The caller blocks those three (wfront_hold_stop_signals) before the
 * store is opened: every thread started from then on (a backend's own,
 * such as Mooncake's client threads) inherits the block, so that they
 * reach only the stopper thread wmount_run starts, which takes them with
 * sigwait.  One that comes earlier waits for it.
 * ready(ctx) is called once the mount is visible (daemon mode hands the
 * terminal back there).  Returns 0 after a clean unmount, else non-zero
 * with the error printed.
 */
int wmount_run(struct wmount *m, const char *mountpoint,
	       void (*ready)(void *ctx), void *ctx);
void wmount_free(struct wmount *m);

/* 1 if a wstore mount sits at path (a canonical path), from
 * /proc/self/mountinfo; 0 if not or unknown. */
int wmount_mounted_at(const char *path);

#endif
