/*
 * wstore/lease.h - the lifecycle of checkpoints in a shared store: read
 * leases (who is reading a checkpoint right now), deletes that respect
 * them, pins, usage (`wstore df`) and eviction under a quota.
 *
 * Same conventions as wstore.h.  The keys behind all this are wstore's
 * own, outside the shared contract (docs/format.md, "Leases" and "Pins
 * and last-read times"): other tools of the same design ignore them.
 */
#ifndef WSTORE_LEASE_H
#define WSTORE_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "wstore.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- read leases -------------------------------------------------------- */

/*
 * A read lease says "this process is reading checkpoint id": a small
 * record under "weight/leases/models/{id}/..." naming the holder (host,
 * pid, what it does) and when the lease expires.  It is renewed in the
 * background by a thread of the library every TTL/3 and expires TTL after
 * the last renewal, so a reader that crashes blocks nothing for longer
 * than the TTL: 60 s, or $WSTORE_LEASE_TTL_MS (100 ms to 1 day) when set.
 *
 * wstore_checkpoint_open, pull, verify and materialize take one
 * themselves; take one by hand around any other read (a server takes one
 * per response).  Take the lease first, then read the manifest: a delete
 * that found no lease has already stopped the manifest saying READY.
 *
 * what names the reader in messages ("pull", "serve", ...; at most 64
 * printable characters, NULL for "read").  The store must outlive the
 * lease.  wstore_lease_release (NULL is fine) stops the renewal, waits for
 * the thread and removes the record; it keeps the thread's last error.
 */
typedef struct wstore_lease wstore_lease;

int wstore_lease_take(wstore_lease **out, wstore_store *store, const char *id,
		      const char *what);
void wstore_lease_release(wstore_lease *lease);
/* The lease's TTL in milliseconds. */
uint64_t wstore_lease_ttl_ms(const wstore_lease *lease);

/* One live lease, as wstore_leases_get fills it; strings owned by the
 * wstore_leases it came from. */
typedef struct wstore_lease_info {
	const char *holder; /* "{host}.{pid}.{random}" */
	const char *host;
	int64_t pid;
	const char *what;
	int64_t since_ms;   /* Unix ms when it was taken */
	int64_t expires_ms; /* Unix ms when it expires unless renewed */
} wstore_lease_info;

typedef struct wstore_leases wstore_leases;

/*
 * The live leases of checkpoint id (expired ones are left out, and removed
 * from stores without expiry once they are a TTL past their expiry).
 */
int wstore_leases_read(wstore_leases **out, wstore_store *store,
		       const char *id);
size_t wstore_leases_count(const wstore_leases *ls);
/* WSTORE_ERANGE if i is out of range. */
int wstore_leases_get_sized(wstore_lease_info *out, size_t out_size,
			    const wstore_leases *ls, size_t i);
WSTORE__SIZED(int wstore_leases_get(wstore_lease_info *out,
				    const wstore_leases *ls, size_t i),
	      wstore_leases_get_sized(out, sizeof(*out), ls, i))
void wstore_leases_free(wstore_leases *ls);

/* ---- delete with leases -------------------------------------------------- */

typedef struct wstore_delete_options {
	unsigned version;
	/* delete even while leased (readers then fail cleanly with a
	 * missing chunk) */
	int force;
	/* wait up to this long for the leases to end; 0 = refuse at once
	 * when leased, < 0 = wait without limit */
	int64_t wait_ms;
	/* called about every 100 ms while waiting (done and total are 0);
	 * non-zero stops the wait: the checkpoint is put back as it was
	 * and the delete returns WSTORE_ECANCELED.  May be NULL. */
	wstore_progress_fn progress;
	void *progress_ctx;
} wstore_delete_options;
#define WSTORE_DELETE_OPTIONS_VERSION 1
#define WSTORE_DELETE_OPTIONS_INIT                                             \
	{                                                                      \
		WSTORE_DELETE_OPTIONS_VERSION                                  \
	}

/*
 * The error a delete that waits for readers writes into the FAILED
 * manifest while it waits (docs/format.md, "Delete"): the chunks are all
 * still there and stay until the last lease ends, so a reader that opened
 * the checkpoint before (the mount) may go on reading it.
 */
#define WSTORE_DELETE_WAITING_ERROR                                            \
	"delete waiting for its readers; run it again if it was interrupted"

/*
 * wstore_delete with options.  A leased checkpoint is refused with
 * WSTORE_EBUSY, the message naming the holders and when their leases
 * expire; with wait_ms the checkpoint first leaves the indexes and stops
 * being READY (no new reader starts), then the delete waits for the
 * leases to end; on timeout it is put back as it was and refused.
 * wstore_delete(store, id) is this with the defaults (refuse if leased).
 */
int wstore_delete_ext(wstore_store *store, const char *id,
		      const wstore_delete_options *opts);

/* ---- pins, usage, eviction ---------------------------------------------- */

/* Pin (pinned = 1) or unpin a READY checkpoint: a pinned one is never
 * evicted.  WSTORE_ENOTFOUND if there is no such checkpoint. */
int wstore_pin(wstore_store *store, const char *id, int pinned);

/* One checkpoint of the usage report; strings owned by the report. */
typedef struct wstore_usage_info {
	const char *id;
	const char *model_id;
	const char *status;   /* "READY" or "FAILED" */
	uint64_t size;	      /* total_size of its manifest */
	int pinned;	      /* 1 if pinned */
	uint32_t leases;      /* live read leases */
	int64_t last_read_ms; /* Unix ms of the last recorded read, 0 never */
	int64_t created_at;   /* Unix seconds (the manifest's) */
} wstore_usage_info;

typedef struct wstore_usage wstore_usage;

/*
 * What the store holds: every checkpoint of the global index, sorted by
 * id, with its size, pin, leases and last read; and the store's capacity
 * and free space where the backend can tell.
 */
int wstore_usage_read(wstore_usage **out, wstore_store *store);
size_t wstore_usage_count(const wstore_usage *u);
int wstore_usage_get_sized(wstore_usage_info *out, size_t out_size,
			   const wstore_usage *u, size_t i);
WSTORE__SIZED(int wstore_usage_get(wstore_usage_info *out,
				   const wstore_usage *u, size_t i),
	      wstore_usage_get_sized(out, sizeof(*out), u, i))
/* Sum of the sizes. */
uint64_t wstore_usage_total(const wstore_usage *u);
/* Capacity and free bytes (UINT64_MAX each when unknown); returns 0 when
 * the backend told, WSTORE_EUNSUPPORTED when it cannot. */
int wstore_usage_space(uint64_t *out_capacity, uint64_t *out_free,
		       const wstore_usage *u);
/*
 * Blocks the store's files share (the file store on XFS with reflink or
 * btrfs; docs/format.md, "Identical files are stored once"): *out_shared
 * the bytes of checkpoint files whose blocks another file shares too,
 * counted once per file; *out_saved the bytes held once for several of
 * the store's files.  0 when the store told; WSTORE_EUNSUPPORTED (both 0)
 * when it cannot (a store of chunks).
 */
int wstore_usage_shared(uint64_t *out_shared, uint64_t *out_saved,
			const wstore_usage *u);
void wstore_usage_free(wstore_usage *u);

/* wstore_evict_fn is in wstore.h (import uses it too). */

/*
 * Evict READY checkpoints that are neither pinned nor leased, least
 * recently read first, until the checkpoints hold at most target bytes.
 * *out_used (may be NULL) gets the bytes held after it.  WSTORE_EBUSY
 * when the target cannot be reached (the message gives the sizes and what
 * is pinned or leased); what could be evicted was evicted (nothing on a
 * dry run).
 */
int wstore_evict(uint64_t *out_used, wstore_store *store, uint64_t target,
		 int dry_run, wstore_evict_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
