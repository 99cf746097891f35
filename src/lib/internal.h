/*
 * internal.h - declarations shared by the library's modules.  Not
 * installed; front ends (CLI, Python, FUSE, bench) must not include it.
 */
#ifndef WSTORE_INTERNAL_H
#define WSTORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wstore/wstore.h"
#include "wstore/sys/backend.h"

/* ---- error.c ----------------------------------------------------------- */

/* Set the thread's last error and return code. */
int wstore__err(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Same, with ": <strerror(code)>" appended. */
int wstore__errc(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void wstore__clear_err(void);

/* ---- names.c: ids, paths, keys ----------------------------------------- */

#define WSTORE__KEY_MAX 512

/* Lower-case hex SHA-256 of a string (65 bytes incl. NUL). */
void wstore__sha256_hex_str(char out[65], const char *s);

/* Keys of the contract, written into out (WSTORE__KEY_MAX bytes). */
void wstore__key_manifest(char *out, const char *ckpt);
void wstore__key_file(char *out, const char *ckpt, const char *path);
void wstore__key_chunk(char *out, const char *file_key, uint64_t i);
void wstore__key_models_index(char *out);
void wstore__key_model_index(char *out, const char *model_id);
/* Prefix of every key of a checkpoint ("weight/models/{ckpt}/"). */
void wstore__key_ckpt_prefix(char *out, const char *ckpt);

/* 1 if s is well-formed UTF-8 (no overlongs, surrogates). */
int wstore__utf8_valid(const char *s);

/* "WEIGHT" or "METADATA" by suffix. */
const char *wstore__file_type(const char *path);

/* ---- digest.c ---------------------------------------------------------- */

typedef struct wstore__sha256 wstore__sha256;
wstore__sha256 *wstore__sha256_new(void);
void wstore__sha256_reset(wstore__sha256 *h);
void wstore__sha256_update(wstore__sha256 *h, const void *data, size_t len);
/* Finish and write lower-case hex (65 bytes incl. NUL); h can be reset. */
void wstore__sha256_hex(wstore__sha256 *h, char out[65]);
void wstore__sha256_free(wstore__sha256 *h);
/* One-shot raw digest. */
void wstore__sha256_once(unsigned char out[32], const void *data, size_t len);

/* ---- manifest.c -------------------------------------------------------- */

typedef struct wstore__file {
	char *path;
	char *type;
	char *key;
	char *sha256;
	uint64_t size;
	uint64_t chunk_size;
	char **chunks; /* nchunks keys */
	uint64_t nchunks;
} wstore__file;

struct wstore_manifest {
	char *checkpoint_id;
	char *model_id;
	char *revision;
	char *status; /* "READY" or "FAILED" */
	char *source_uri;
	char *error; /* NULL when READY */
	int64_t created_at;
	int64_t updated_at;
	uint64_t total_size;
	wstore__file *files; /* sorted by path */
	size_t nfiles;
};

/* Empty manifest with all strings set to "" (status "FAILED"). */
wstore_manifest *wstore__manifest_new(void);
/* Append a file record; takes a copy of path; returns it or NULL. */
wstore__file *wstore__manifest_add_file(wstore_manifest *m, const char *path);
/* Append a chunk key to a file record (copied). */
int wstore__file_add_chunk(wstore__file *f, const char *key);
/* Sort files by path (bytewise) and recompute total_size. */
void wstore__manifest_sort(wstore_manifest *m);
/* Replace a string field (copy); value may be NULL. */
int wstore__set_str(char **field, const char *value);

/* ---- store.c: the checked front end over a backend --------------------- */

struct wstore_store {
	wstore_backend *b;
	char *label; /* URL without secrets, for messages */
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
int wstore__chunk_len(uint64_t *out, const wstore__file *f, uint64_t c);
/* Read chunk c of f into buf (cap bytes): exactly the length the manifest
 * implies, or WSTORE_ECORRUPT naming the file and chunk (missing, short,
 * long).  Other backend errors pass through with the file named. */
int wstore__read_chunk(wstore_store *s, const wstore__file *f, uint64_t c,
		       void *buf, size_t cap);
/* Judge the result of a get of chunk c of f (rc, got bytes) against the
 * want bytes the manifest implies, as wstore__read_chunk does. */
int wstore__check_chunk(wstore_store *s, const wstore__file *f, uint64_t c,
			int rc, size_t got, uint64_t want);
/* Largest chunk any file of m needs (the buffer size for reading m). */
uint64_t wstore__max_chunk(const wstore_manifest *m);
/* Write file f of a checkpoint to fd from offset 0, checking size and (if
 * verify) SHA-256; buf of cap >= wstore__max_chunk bytes is reused.
 * fd < 0 only reads and checks (verify).
 * progress may be NULL; it is called with the bytes of each chunk. */
int wstore__fetch_to_fd(wstore_store *s, const wstore__file *f, int fd,
			void *buf, size_t cap, int verify,
			int (*progress)(uint64_t n, void *ctx), void *ctx);

/* Add or remove id in an index object without losing concurrent updates.
 * model_id: the model of a per-model index, NULL for the global one (used
 * to rebuild a corrupt index from the manifests). */
int wstore__index_add(wstore_store *s, const char *key, const char *id,
		      const char *model_id);
int wstore__index_remove(wstore_store *s, const char *key, const char *id,
			 const char *model_id);
/* Parse an index value (JSON array of strings).  Empty -> empty list. */
int wstore__index_parse(char ***out, size_t *out_n, const char *json,
			size_t len);

/* Exclusive per-checkpoint lock (import/delete): put_new of an owner record
 * under "weight/locks/{ckpt}".  A lock whose owner process is gone (same
 * host, pid dead) is broken. */
int wstore__lock(wstore_store *s, const char *name, char **out_token);
void wstore__unlock(wstore_store *s, const char *name, char *token);

/* Backend constructors selected by URL in store.c.  Each parses its own
 * URL form and reads the settings it needs from cfg (may be NULL). */
/* redis://[user:password@]host:port[/db], redis+unix:///path[?db=N],
 * redis-cluster://host:port,host:port,... */
int wstore__backend_redis_open(wstore_backend **out, const char *url,
			       const wstore_config *cfg);
/* "mooncake": settings from cfg (master_server_addr, ...). */
int wstore__backend_mooncake_open(wstore_backend **out,
				  const wstore_config *cfg);

/* delete.c: delete a checkpoint whose lock the caller holds. */
int wstore__delete_unlocked(wstore_store *s, const char *id);

/* import.c calls this to check every .safetensors shard of a source before
 * anything is written (a READY checkpoint must always load). */
struct wstore__scan;
int wstore__check_source_shards(const struct wstore__scan *scan);

/* A reusable chunk buffer (huge pages where possible); free() it. */
void *wstore__buf_alloc(size_t cap);

/* Number of worker threads for jobs (0 = cores). */
unsigned wstore__jobs(uint32_t jobs);

/* ---- config.c (internal; used by tests/fuzz/fuzz_config.c) ----------- */

/* Parse config JSON from memory; name is used in messages in place of the
 * file path.  Same rules as wstore_config_load. */
int wstore__config_parse(wstore_config **out, const char *json, size_t len,
			 const char *name);

/* ---- backend_file.c: stale temp files, for gc.c ------------------------ */

/*
 * Find temp files of puts ("<dir>/.tmp-*", invisible to list()) under a
 * file backend's root whose mtime is more than older_than seconds ago, and
 * unlink them unless dry_run.  Never touched, whatever older_than: a temp
 * file whose writer (the pid in its name) is a live process, and one for
 * which keep (may be NULL) returns non-zero.  fn (may be NULL) is called
 * for each one found with its path relative to the root.  b may be any backend:
 * one that is not the file backend gives WSTORE_EUNSUPPORTED.  *out_n = temp
 * files found.
 */
int wstore__file_backend_sweep_temps(
	wstore_backend *b, int64_t older_than, int dry_run, size_t *out_n,
	int (*keep)(const char *path, void *ctx),
	void (*fn)(const char *path, uint64_t bytes, int removed, void *ctx),
	void *ctx);

#endif
