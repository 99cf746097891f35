/*
 * wstore/sys/backend.h - the interface a storage backend implements.
 *
 * A backend is a flat map of ASCII keys to byte strings.  The interface is
 * shaped by the weakest store wstore must work on (docs/format.md, "What a
 * store may do"): put may be write-once, get of a missing key may return an
 * empty value, recently read objects may refuse a non-forced remove, and
 * there may be no way to list keys.  The store front end (src/lib/store.c)
 * re-checks everything a backend returns; a backend need not be trusted.
 *
 * A concrete backend embeds struct wstore_backend as its first member and
 * fills in the callbacks.  Unless a callback says otherwise:
 *  - it returns 0 on success, -errno for OS errors, or a WSTORE_E* code,
 *    and sets the thread's last error (wstore_backend_error) with a message
 *    that names the key and, for network stores, the server;
 *  - WSTORE_ENOTFOUND means the key does not exist;
 *  - it may be called from several threads at once;
 *  - key strings are only borrowed for the duration of the call;
 *  - keys are printable ASCII, '/'-separated segments, none of them
 *    empty, "." or "..", or starting with '.', none longer than 255
 *    bytes, at most 511 bytes in all; no key is a prefix, followed by
 *    '/', of another (the contract's keys never are).  A backend may
 *    refuse other keys with WSTORE_EINVAL.
 */
#ifndef WSTORE_SYS_BACKEND_H
#define WSTORE_SYS_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "../wstore.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Version 2 added struct_size and sweep_temps (version 1 had get_many inserted
 * mid-struct without a bump).  A backend sets version to
 * WSTORE_BACKEND_VERSION and struct_size to sizeof(struct wstore_backend) as it
 * was compiled; wstore_open_backend refuses another version or a size
 * smaller than version 2's.  Callbacks added later go at the end and are
 * read only when struct_size covers them, so adding one needs no version bump.
 */
#define WSTORE_BACKEND_VERSION 2

/* Behaviour flags (wstore_backend.flags). */
/* put on an existing key may succeed yet keep the old value */
#define WSTORE_BACKEND_WRITE_ONCE (1u << 0)
/* get of a missing key may return an empty value instead of ENOTFOUND */
#define WSTORE_BACKEND_EMPTY_MISSING (1u << 1)
/* data read back may be stale or damaged (network/cache stores): the front
 * end verifies what it reads against digests where it can */
#define WSTORE_BACKEND_UNTRUSTED (1u << 2)
/* the store may drop keys on its own (a cache that can evict, or one whose
 * eviction policy cannot be checked): before publishing a READY manifest,
 * import checks that every chunk is still there with its size */
#define WSTORE_BACKEND_MAY_EVICT (1u << 3)

typedef struct wstore_backend wstore_backend;

/*
 * Update function for wstore_backend.update: given the current value (NULL
 * and 0 if the key is absent), produce the new one in *out_value (malloc'ed;
 * the backend frees it) and *out_len.  Return 0 to write it, a positive
 * value to leave the key untouched, or a negative code to abort.  May be
 * called more than once (optimistic retries); must have no side effects.
 */
typedef int (*wstore_update_fn)(void **out_value, size_t *out_len,
				const void *old, size_t old_len, void *ctx);

/* Listing callback: return non-zero to stop (that value is returned). */
typedef int (*wstore_list_fn)(const char *key, void *ctx);
/* The next piece of a streamed value: *out (valid until the next call) and
 * *out_n bytes, 0 < *out_n <= what is left; a negative return aborts. */
typedef int (*wstore_fill_fn)(void *ctx, const void **out, size_t *out_n);

struct wstore_backend {
	unsigned version;   /* WSTORE_BACKEND_VERSION */
	size_t struct_size; /* sizeof(struct wstore_backend) */
	const char *name;   /* "file", "mem", "redis", ... */
	unsigned flags;	    /* WSTORE_BACKEND_* */

	/*
	 * Store len bytes under key.  Durable when it returns 0 (as far as
	 * the store offers durability), or, on a backend with sync, once a
	 * later sync returns 0.  Visible to readers in full or not at all.  On
	 * a WRITE_ONCE store an existing key may keep its old value while 0 is
	 * returned.  len may be 0. Required.
	 */
	int (*put)(wstore_backend *b, const char *key, const void *data,
		   size_t len);

	/*
	 * Replace the value of key whether or not it exists.  Optional: NULL
	 * on write-once stores, where the front end removes then puts.
	 */
	int (*upsert)(wstore_backend *b, const char *key, const void *data,
		      size_t len);

	/*
	 * Create key only if it does not exist: 0 when created,
	 * WSTORE_EEXISTS when it existed (value untouched).  Atomic against
	 * concurrent callers.  Optional (NULL): the front end then emulates
	 * it with put + read back, which is safe on write-once stores only.
	 */
	int (*put_new)(wstore_backend *b, const char *key, const void *data,
		       size_t len);

	/*
	 * Read the whole value of key into buf (capacity cap).  *out_len is
	 * set to the value's size in every successful or ERANGE case.  If the
	 * value is larger than cap: WSTORE_ERANGE (buf contents undefined).
	 * Required.
	 */
	int (*get)(wstore_backend *b, const char *key, void *buf, size_t cap,
		   size_t *out_len);

	/*
	 * Read len bytes at offset off of key's value into buf; *out_n is set
	 * to the bytes read (short only at the end of the value).  Optional:
	 * without it the front end reads whole values.
	 */
	int (*get_range)(wstore_backend *b, const char *key, uint64_t off,
			 void *buf, size_t len, size_t *out_n);

	/* Size of key's value in *out.  Required. */
	int (*size)(wstore_backend *b, const char *key, uint64_t *out);

	/*
	 * Remove key.  force asks to override leases and similar
	 * protections.  Removing a missing key returns WSTORE_ENOTFOUND (the
	 * front end treats that as success where the contract says so).
	 * Required.
	 */
	int (*remove)(wstore_backend *b, const char *key, int force);

	/*
	 * Call fn for every key starting with prefix, in no particular order.
	 * Keys written concurrently may or may not be seen.  Optional: NULL
	 * when the store cannot list (gc is then unavailable).
	 */
	int (*list)(wstore_backend *b, const char *prefix, wstore_list_fn fn,
		    void *ctx);

	/*
	 * Atomic read-modify-write of key (used for the index objects): no
	 * concurrent update, from this or any other process or machine, may
	 * be lost.  Returns 0 both when fn's value was written and when fn
	 * chose to leave the key as it was (fn returned > 0).  Optional:
	 * without it the front end serialises updates with a lock object built
	 * on put_new.
	 */
	int (*update)(wstore_backend *b, const char *key, wstore_update_fn fn,
		      void *ctx);

	/*
	 * Read n whole values at once (keys[i] into bufs[i] of caps[i]
	 * bytes), for stores where one batched request beats n requests
	 * (Mooncake's batch_get_into).  Returns 0 when the batch ran; then
	 * out_rcs[i] and out_lens[i] are what get would have given for key
	 * i (0, WSTORE_ENOTFOUND, WSTORE_ERANGE, ...).  A negative return
	 * means the batch as a whole failed.  Optional.
	 */
	int (*get_many)(wstore_backend *b, size_t n, const char *const *keys,
			void *const *bufs, const size_t *caps, size_t *out_lens,
			int *out_rcs);

	/*
	 * Make every put that returned before this call durable.  Optional:
	 * NULL when put is durable by itself.  Upsert, put_new and update are
	 * always durable when they return.
	 */
	int (*sync)(wstore_backend *b);

	/* Release everything.  Required. */
	void (*free)(wstore_backend *b);

	/*
	 * Open key's value as a local file, for zero-copy readers (splice,
	 * sendfile): *out_fd gets a read-only, O_CLOEXEC file descriptor
	 * whose contents, from offset 0 to its end, are the whole value.
	 * The caller owns the fd and closes it.  The fd keeps reading the
	 * value as it was when opened even if the key is later removed or
	 * replaced; callers that must notice that check for themselves.
	 * WSTORE_ENOTFOUND as for get.  Optional: NULL when values are not
	 * local files (and on wrappers such as the fault backend, whose
	 * faults would be bypassed).  Added after free so that existing
	 * initialisers stay valid; the front end re-checks the length.
	 */
	int (*open_fd)(wstore_backend *b, const char *key, int *out_fd);

	/*
	 * Find what interrupted puts left behind outside the key space (temp
	 * files, for a store of local files) that is older than older_than
	 * seconds, and remove it unless dry_run.  Never touches an item whose
	 * writer is still alive, nor one for which keep (may be NULL) returns
	 * non-zero; fn (may be NULL) is told of each one found, with a name
	 * relative to the store and its size.  *out_n (may be NULL) = items
	 * found.  Used by gc.  Optional: NULL when puts leave nothing behind.
	 */
	int (*sweep_temps)(wstore_backend *b, int64_t older_than, int dry_run,
			   size_t *out_n,
			   int (*keep)(const char *path, void *ctx),
			   void (*fn)(const char *path, uint64_t bytes,
				      int removed, void *ctx),
			   void *ctx);

	/*
	 * As put, for a value of len bytes that fill (see wstore_fill_fn)
	 * hands over piece by piece, so that the caller can produce it
	 * through a small buffer that stays in the CPU cache instead of
	 * holding it whole.  Same visibility and durability as put: nothing
	 * is visible under key unless all len bytes were written.  A
	 * negative return of fill is returned as is, the key left as it was.
	 * Optional: NULL when a value must arrive whole (import then uses
	 * put).
	 */
	int (*put_stream)(wstore_backend *b, const char *key, uint64_t len,
			  wstore_fill_fn fill, void *ctx);

	/*
	 * For wstore_free_exiting: release only what outlives the process
	 * (state held for it on a server), not memory or threads; the
	 * process ends with _exit right after.  Optional: NULL means free
	 * is called.
	 */
	void (*free_exiting)(wstore_backend *b);

	/*
	 * Set by the store front end (wstore_set_notice), never by the
	 * backend: where to report a long wait the user should know about
	 * while it lasts.  Backends call wstore_backend_notice(), which does
	 * nothing while these are NULL.
	 */
	void (*notice)(const char *message, void *ctx);
	void *notice_ctx;

	/*
	 * Buffers the backend moves data from and to without a copy (memory
	 * registered with an RDMA-capable transfer engine): buf_alloc
	 * returns at least size bytes, or NULL (the caller then uses plain
	 * memory); put, get and get_many given such memory may skip their
	 * bounce copy.  buf_free takes any pointer buf_alloc returned, and
	 * frees plain memory (malloc'ed) given to it as well.  Thread-safe.
	 * Optional: both NULL when plain memory is as good.
	 */
	void *(*buf_alloc)(wstore_backend *b, size_t size);
	void (*buf_free)(wstore_backend *b, void *p);

	/*
	 * Replace the value of key, as upsert does, and have the store
	 * itself remove it ttl_ms milliseconds later unless it is put again
	 * first (Redis SET PX).  Used for read leases (docs/format.md,
	 * "Leases"): a reader that dies stops renewing, and its lease goes
	 * without anyone having to clean up.  A later get of an expired key
	 * is WSTORE_ENOTFOUND and list no longer reports it.  ttl_ms > 0.
	 * Optional: NULL on stores without expiry, where the front end
	 * upserts and readers of the record compare the expiry time written
	 * in it.  Added after version 2: used only when struct_size
	 * covers it.
	 */
	int (*put_ttl)(wstore_backend *b, const char *key, const void *data,
		       size_t len, uint64_t ttl_ms);

	/*
	 * How much the store can hold: *out_capacity the bytes it may hold
	 * in all, *out_free the bytes it may still take (file store: statvfs
	 * of its file system; Redis: maxmemory and maxmemory less
	 * used_memory).  Either is UINT64_MAX when the store cannot tell
	 * (Redis without maxmemory).  Used to refuse an import that cannot
	 * fit before its first chunk, and by `wstore df`.  Optional: NULL
	 * when the store cannot tell at all.  Added after version 2.
	 */
	int (*space)(wstore_backend *b, uint64_t *out_capacity,
		     uint64_t *out_free);

	/*
	 * Open key's value as a range of a local file, for zero-copy
	 * readers of stores that keep several values in one file (the file
	 * store keeps a checkpoint file's chunks in one data file): the
	 * value is the bytes [*out_off, *out_off + its length) of *out_fd,
	 * a read-only, O_CLOEXEC descriptor the caller owns and closes.  As
	 * for open_fd, the fd keeps reading those bytes even if the key is
	 * later removed or replaced.  WSTORE_ENOTFOUND as for get.
	 * Optional: NULL where values are not local files (open_fd, when
	 * set, is then the only way, with offset 0).  Added after version
	 * 2: used only when struct_size covers it.
	 */
	int (*open_range)(wstore_backend *b, const char *key, int *out_fd,
			  uint64_t *out_off);

	/*
	 * Whole files: a store that keeps every chunk of a checkpoint file
	 * in one local file (the file store's data file) lets the import
	 * write that file directly.  begin_file creates an unpublished,
	 * empty file for the chunks of the file whose manifest key is
	 * file_key (chunk keys file_key + "/chunks/<i>", chunk_size bytes
	 * each but the last), and gives in *out_fd a descriptor open for
	 * writing onto it (owned by the backend: the caller never closes
	 * it) and in *out_handle what commit_file or abort_file takes.  The
	 * caller puts the file's bytes at their offsets (pwrite, or an
	 * FICLONE ioctl that clones a source file into it), then calls
	 * exactly one of:
	 *  - commit_file: checks that the file holds size bytes and
	 *    publishes it atomically (rename): from then on the chunk keys
	 *    read as their ranges of it, replacing any earlier value of
	 *    them; durable at the next sync, as put.  On failure the file is
	 *    removed as by abort_file.
	 *  - abort_file: removes it; nothing of it is ever visible.
	 * Either frees the handle.  A file of 0 bytes has no chunk keys: the
	 * caller need not write one.  Optional: all three NULL where chunks
	 * are separate values (import then puts each chunk).  Added after
	 * version 2: used only when struct_size covers them.
	 */
	int (*begin_file)(wstore_backend *b, const char *file_key,
			  uint64_t chunk_size, int *out_fd, void **out_handle);
	int (*commit_file)(wstore_backend *b, void *handle, uint64_t size);
	void (*abort_file)(wstore_backend *b, void *handle);

	/*
	 * File store only: give checkpoint file file_key (size bytes in
	 * chunks of chunk_size, stored one file per chunk) its whole-file
	 * layout, crash-safe (src/lib/backends/file_migrate.c says how);
	 * check (may be NULL) may refuse the new file before it is
	 * published.  The caller holds the checkpoint's lock.  0 nothing to
	 * do, 1 converted, 2 an interrupted conversion finished (with
	 * WSTORE_MIGRATE_DRY_RUN: would be), or an error.  Optional.
	 */
	int (*migrate_file)(wstore_backend *b, const char *file_key,
			    uint64_t chunk_size, uint64_t size, unsigned flags,
			    int (*check)(int fd, void *ctx), void *ctx);

	/*
	 * The longest one call may keep retrying a fault of the store
	 * before it fails (Mooncake retries a failed transfer for up to
	 * $WSTORE_MOONCAKE_TRANSFER_WAIT_MS while the master drops a lost
	 * storage node), in milliseconds; 0 when calls do not retry that
	 * long.  A wait for a lock whose holder is alive lasts at least this
	 * long plus 5 s unless $WSTORE_LOCK_WAIT_MS says otherwise, so a
	 * holder retrying its write is not given up on.  A field, not a
	 * callback; read only when struct_size covers it.
	 */
	uint64_t retry_ms;
};

/*
 * Wrap a backend in a store.  On success the store owns b and frees it with
 * the store; on failure the caller keeps b.
 */
int wstore_open_backend(wstore_store **out, wstore_backend *b);

/* The backend of a store (owned by the store), for code that built the
 * backend itself (tests, embedders).  Front ends ask wstore_store_caps()
 * instead. */
wstore_backend *wstore_store_backend(wstore_store *store);

/* Set the calling thread's last error message (printf-style) and return
 * code, for backends: return wstore_backend_error(code, "...", ...); */
int wstore_backend_error(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A warning about the store a backend found while opening (one line, e.g.
 * a setting it could not check); wstore_open_flags hands it to the caller
 * through wstore_warning(). */
void wstore_backend_warn(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
/* Report a long wait through b->notice (printf-style), if one is set. */
void wstore_backend_notice(wstore_backend *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Built-in backends, for tests and embedding. */
/* The embedded store: a directory; created if missing. */
int wstore_backend_file_new(wstore_backend **out, const char *root);
/* The same with WSTORE_OPEN_* flags (wstore.h): without CREATE a missing
 * directory is an error; with READONLY it need not be writable. */
int wstore_backend_file_open(wstore_backend **out, const char *root,
			     unsigned flags);
/* Process-local memory; flags may include WRITE_ONCE / EMPTY_MISSING to
 * act like a weaker store. */
int wstore_backend_mem_new(wstore_backend **out, unsigned flags);

/* The fault-injecting backend of the tests is not part of the API: stores
 * reach it by the URL "fault+<inner URL>" (faults from $WSTORE_FAULTS,
 * see src/lib/backends/helpers.h). */

#ifdef __cplusplus
}
#endif

#endif
