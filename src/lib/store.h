/*
 * store.h - the checked front end over a backend (store.c).
 *
 * Owns: struct wstore_store (a backend and a printable label), opening a
 * store by URL, and every read and write of values the other modules do:
 * whole gets, replaces, removes, chunk reads checked against the manifest
 * and file fetches checked against size and SHA-256.  Also the shared
 * chunk-buffer allocator and the worker-count rule.  The streaming fetch
 * (wstore__max_chunk, wstore__fetch_to_fd) lives in materialize.c.
 */
#ifndef WSTORE_STORE_H
#define WSTORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "wstore/wstore.h"
#include "wstore/read.h"
#include "wstore/sys/backend.h"
#include "digest.h"
#include "manifest.h"

/* Whether backend b has callback field: inside the struct_size it was built
 * with and set.  Needed for callbacks added after version 2 (sweep_temps is the
 * last of version 2; later ones go after it). */
#define WSTORE__HAS(b, field)                                                  \
	(offsetof(wstore_backend, field) + sizeof((b)->field) <=               \
		 (b)->struct_size &&                                           \
	 (b)->field)

struct wstore_store {
	wstore_backend *b;
	char *label;	/* URL without secrets, for messages */
	char *warning;	/* what the backend warned about at open, or NULL */
	uint64_t quota; /* "quota" of the config, 0 = none */
	int evict_lru;	/* "evict": "lru" */
};

/* Get a whole value, allocating (NUL-terminated for convenience).
 * Missing (or empty on EMPTY_MISSING stores) -> WSTORE_ENOTFOUND. */
int wstore__get_alloc(wstore_store *s, const char *key, char **out,
		      size_t *out_len);
/* Replace a mutable object: upsert, or remove(force)+put. */
int wstore__replace(wstore_store *s, const char *key, const void *data,
		    size_t len);
/* Remove; not found counts as success. */
int wstore__remove(wstore_store *s, const char *key);
/* Length chunk c of f must have, from size and chunk_size.  A multi-chunk
 * record without chunk_size gives WSTORE_EUNSUPPORTED. */
int wstore__chunk_len(uint64_t *out, const wstore__file_rec *f, uint64_t c);
/* Read chunk c of f into buf (cap bytes): exactly the length the manifest
 * implies, or WSTORE_ECORRUPT naming the file and chunk (missing, short,
 * long).  Other backend errors pass through with the file named. */
int wstore__read_chunk(wstore_store *s, const wstore__file_rec *f, uint64_t c,
		       void *buf, size_t cap);
/* Judge the result of a get of chunk c of f (rc, got bytes) against the
 * want bytes the manifest implies, as wstore__read_chunk does. */
int wstore__check_chunk(wstore_store *s, const wstore__file_rec *f, uint64_t c,
			int rc, size_t got, uint64_t want);
/* Largest chunk any file of m needs (the buffer size for reading m). */
uint64_t wstore__max_chunk(const wstore_manifest *m);
/* Write file f of a checkpoint to fd from offset 0, checking size and (if
 * verify) SHA-256; buf of cap >= wstore__max_chunk bytes is reused.
 * fd < 0 only reads and checks (verify).
 * progress may be NULL; it is called with the bytes of each chunk. */
int wstore__fetch_to_fd(wstore_store *s, const wstore__file_rec *f, int fd,
			void *buf, size_t cap, int verify,
			int (*progress)(uint64_t n, void *ctx), void *ctx);
/* The same from chunk first on, written at fd's current offset (the
 * bytes of chunks before first already there): h, when set, already
 * holds the SHA-256 state of those bytes (the caller's; it is checked
 * against the whole file's digest and left finished); size is checked
 * over the whole file. */
int wstore__fetch_to_fd_from(wstore_store *s, const wstore__file_rec *f, int fd,
			     void *buf, size_t cap, uint64_t first,
			     wstore__sha256 *h,
			     int (*progress)(uint64_t n, void *ctx), void *ctx);
/* How wstore__fetch_whole put the bytes in place. */
enum {
	WSTORE__WHOLE_NONE,
	WSTORE__WHOLE_CLONED, /* FICLONE: the blocks shared, nothing copied */
	WSTORE__WHOLE_COPIED, /* copy_file_range: copied in the kernel */
};
/*
 * When the store keeps f whole in one file of its own (wstore_file_chunk_fd
 * at offset from hands out the file, byte for byte), put bytes [from,
 * size) of f into fd at the same offsets without passing them through
 * this process: FICLONE when from is 0 (a copy-on-write filesystem, the
 * same one: no data copied, no space used), else (or failing that) and
 * only without h, copy_file_range.  fd must be open for writing and hold
 * nothing past from.  With h (holding the state of the bytes before
 * from) the bytes are read back through rfd (the same file, open for
 * reading), hashed and checked against f's digest.  progress gets size -
 * from once done.  1: done (*how says how, may be NULL); 0: not possible
 * here, nothing written (stream the file instead); < 0: an error.
 */
int wstore__fetch_whole(wstore_store *s, wstore_checkpoint *ck,
			const wstore__file_rec *f, int fd, int rfd,
			uint64_t from, wstore__sha256 *h, void *buf, size_t cap,
			int (*progress)(uint64_t n, void *ctx), void *ctx,
			int *how);

/* Read checkpoint id's manifest and require it READY: WSTORE_ENOTREADY
 * naming its status and recorded error otherwise (wstore_manifest_read
 * is the public read without the requirement). */
int wstore__manifest_read_ready(wstore_manifest **out, wstore_store *store,
				const char *id);

/* What a manifest was read from, for telling later whether it is still
 * the one in the store without parsing it again: its bytes and, on a
 * store of local files (manifests replaced by rename, never rewritten),
 * its file, opened before the bytes were read (or -1). */
typedef struct wstore__mraw {
	char *raw;
	size_t len;
	int fd;
} wstore__mraw;
/* wstore__manifest_read_ready, keeping in *r (the caller's:
 * wstore__mraw_free; untouched on failure) what it read. */
int wstore__manifest_read_ready_raw(wstore_manifest **out, wstore__mraw *r,
				    wstore_store *store, const char *id);
/* Whether id's manifest in the store is still r's: 1 if so (one fstat on a
 * store of local files while r's file is linked, else one get and a byte
 * compare), 0 if it changed or is gone, or a store error. */
int wstore__manifest_same(wstore_store *store, const char *id,
			  const wstore__mraw *r);
void wstore__mraw_free(wstore__mraw *r);
/* Whether the store's objects are local files read through open_fd that
 * are replaced by rename and removed by unlink, never rewritten in place
 * (so an open file with no link left is an object replaced or removed). */
int wstore__local_files(const wstore_store *s);
/* Whether the store keeps each checkpoint file as one local data file that
 * import writes itself (begin_file, commit_file, abort_file; not
 * write-once): the file store. */
int wstore__whole_files(const wstore_store *s);
/* Open key's value as bytes [*out_off, ...) of a local file (open_range;
 * open_fd at offset 0 on a backend without it): 0 with *out_fd the
 * caller's, or the backend's code.  For wstore__local_files stores. */
int wstore__open_range(wstore_store *s, const char *key, int *out_fd,
		       uint64_t *out_off);
/* The length of chunk c of f as wstore__open_range gave it, at base in a
 * file of size bytes: the chunk's own file (base 0: all of it) or its
 * range of the data file of the whole file (base c * chunk_size); the
 * caller compares it with the manifest's. */
uint64_t wstore__range_len(const wstore__file_rec *f, uint64_t c, uint64_t base,
			   uint64_t size);

/* A reusable chunk buffer (huge pages where possible); free() it. */
void *wstore__buf_alloc(size_t cap);
/* A chunk buffer the store's backend moves data from and to without a
 * copy where it can (memory registered with Mooncake's transfer engine),
 * else wstore__buf_alloc; free it with wstore__store_buf_free only. */
void *wstore__store_buf_alloc(wstore_store *s, size_t cap);
void wstore__store_buf_free(wstore_store *s, void *p);

/* Number of worker threads for jobs (0 = cores). */
unsigned wstore__jobs(uint32_t jobs);

/* wstore_checkpoint_id_derive, also taking an id that is taken when
 * mine(ctx, s, id) says it is the caller's own (1; 0 when not, or a
 * negative error, returned as is: catalog.c). */
int wstore__checkpoint_id_derive_mine(
	char **out, wstore_store *s, const char *model_id, const char *revision,
	int (*mine)(void *ctx, wstore_store *s, const char *id), void *ctx);

#endif
