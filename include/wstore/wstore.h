/*
 * wstore.h - public API of libwstore, a file-level model weight store.
 *
 * A store holds checkpoints: a directory of files (safetensors shards,
 * config, tokenizer...) cut into fixed-size chunks, plus one manifest per
 * checkpoint that lists paths, sizes, SHA-256 digests and chunk keys.  The
 * layout is a contract shared with other tools; see docs/format.md.
 *
 * Conventions (read these once):
 *  - Fallible calls return int: 0 on success, a negative code on failure.
 *    OS errors are kept as -errno; wstore's own codes (WSTORE_E*) lie far
 *    below errno.  wstore_strerror() covers both.  After a failure,
 *    wstore_last_error() returns a one-line message naming the key, file
 *    or server at fault; it is thread-local and valid until the next wstore
 *    call on the same thread.
 *  - Output parameters come first and are named out.
 *  - Handles are opaque; every _free() accepts NULL.
 *  - Option structs carry a version field; initialise them with their
 *    _INIT macro so that fields added later get their defaults (zero is
 *    the default of every field added after the first version).  The
 *    library accepts every version it ever defined, reading only the
 *    fields that version has.
 *  - Structs the library fills (wstore_file_info, wstore_gc_stats, ...)
 *    are passed with their size: each call is a static inline function
 *    here that passes sizeof(*out), as the caller was compiled, to the
 *    exported *_sized function, which fills the fields that fit and
 *    zeroes any tail it does not know.  So a program built against this
 *    header keeps working with a later library whose structs grew
 *    (docs/architecture.md, "Interfaces and ABI").
 *  - Exported symbols carry the version node WSTORE_0 (libwstore.map).
 *  - Strings returned through const char * are owned by the object they
 *    came from and live as long as it does, unless said otherwise.
 *  - A wstore_store may be used from several threads at once.
 */
#ifndef WSTORE_WSTORE_H
#define WSTORE_WSTORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WSTORE_VERSION "0.2.0"

/* The library itself is compiled with WSTORE__BUILDING: there the sized
 * calls' short forms are the library's own internal functions. */
#ifdef WSTORE__BUILDING
#define WSTORE__SIZED(decl, call) decl;
#else
#define WSTORE__SIZED(decl, call)                                              \
	static inline decl                                                     \
	{                                                                      \
		return call;                                                   \
	}
#endif

/* ---- errors ------------------------------------------------------------ */

#define WSTORE_ERR_BASE (-30800)
enum wstore_error {
	WSTORE_ENOTFOUND = WSTORE_ERR_BASE,    /* no such checkpoint/file/key */
	WSTORE_EEXISTS = WSTORE_ERR_BASE - 1,  /* id already taken */
	WSTORE_EINVAL = WSTORE_ERR_BASE - 2,   /* bad argument or input */
	WSTORE_ECORRUPT = WSTORE_ERR_BASE - 3, /* stored data is damaged */
	WSTORE_EUNAVAIL = WSTORE_ERR_BASE - 4, /* backend unreachable */
	WSTORE_EBUSY = WSTORE_ERR_BASE - 5,    /* locked by someone else */
	WSTORE_EVERIFY = WSTORE_ERR_BASE - 6,  /* verification found damage */
	WSTORE_ENOTREADY = WSTORE_ERR_BASE - 7, /* checkpoint is not READY */
	WSTORE_ECANCELED = WSTORE_ERR_BASE - 8, /* interrupted by the caller */
	WSTORE_ERANGE = WSTORE_ERR_BASE - 9,	/* value larger than buffer */
	WSTORE_EUNSUPPORTED = WSTORE_ERR_BASE - 10, /* backend lacks feature */
	/* the checkpoint being read was deleted or replaced by another import
	 * of the same id since it was opened: nothing of the new one is
	 * returned; open it again to read the new one */
	WSTORE_ECHANGED = WSTORE_ERR_BASE - 11,
	WSTORE_ERR_LAST = WSTORE_ERR_BASE - 11
};

/* Static text for a code (never NULL). */
const char *wstore_strerror(int code);
/* One-line message of the last failure on this thread ("" if none). */
const char *wstore_last_error(void);

/* ---- small helpers ----------------------------------------------------- */

/*
 * Parse a size: plain bytes or a number with B, K/KB/KiB, M/MB/MiB,
 * G/GB/GiB, T/TB/TiB, P/PB/PiB (binary multiples, case-insensitive,
 * decimals allowed, e.g. "1.5GiB").  Zero, negatives, overflow and garbage
 * give WSTORE_EINVAL.
 */
int wstore_parse_size(uint64_t *out, const char *text);
/* Format bytes as "1.50 GiB" into buf (always NUL-terminated). */
void wstore_format_size(char *buf, size_t cap, uint64_t bytes);

/*
 * The chunk size wstore_import uses when none is given: 64 MiB.  It is
 * also the default file_chunk_size ("64MB") of SGLang's mooncake://
 * connector, which must equal a checkpoint's chunk size to load it.
 */
#define WSTORE_DEFAULT_CHUNK_SIZE (64ull << 20)

/*
 * The file_chunk_size setting SGLang's mooncake:// connector needs to load
 * a checkpoint imported with chunk_size bytes.  The connector maps file
 * offsets to chunks with its own setting, not with the manifest's
 * chunk_size, and reads the setting as a whole number with a unit KB, MB
 * or GB meaning 1024, 1024^2 and 1024^3 bytes.
 *
 * Writes into out (cap bytes, always NUL-terminated; 24 is enough) the
 * setting with the largest exact unit ("64MB", "1000KB", "4GB") and
 * returns 0.  A chunk_size that cannot be written so (not a multiple of
 * 1 KiB, or 0) returns WSTORE_EINVAL with a message saying so; out then
 * holds the nearest size that can (at least "1KB"), a size to import with
 * instead (wstore_parse_size reads it as the same number of bytes).
 * Either way *out_bytes (may be NULL) gets the bytes out stands for.
 * WSTORE_ERANGE, and out "", if cap is too small.
 */
int wstore_connector_chunk_size(char *out, size_t cap, uint64_t *out_bytes,
				uint64_t chunk_size);

/* Checkpoint id rule of the contract: 0 if valid, else WSTORE_EINVAL. */
int wstore_validate_checkpoint_id(const char *id);
/* Relative path rule of the contract: 0 if valid, else WSTORE_EINVAL. */
int wstore_validate_path(const char *path);

/* ---- configuration ----------------------------------------------------- */

/*
 * A configuration is a set of string keys and values.  Known keys:
 *   store                 URL: file:///dir, a plain path, redis://...,
 *                         redis+unix://..., redis-cluster://..., mooncake,
 *                         rediss://..., rediss-cluster://... (TLS);
 *                         "host:port" (no scheme) is refused
 *   master_server_addr, metadata_server, protocol, rdma_devices,
 *   local_hostname        Mooncake connection settings
 *   replica_num           copies a write needs: Mooncake puts that many
 *                         replicas; Redis needs that many - 1 replicas
 *                         connected to each master and acknowledging
 *                         (WAIT) before import publishes READY
 *   redis_password        kept out of URLs; never printed
 *   redis_tls_ca_file     rediss://, rediss-cluster://: the CAs (PEM) the
 *                         server must chain to (unset: the system store)
 *   redis_tls_cert_file, redis_tls_key_file
 *                         client certificate and key (PEM), both or neither
 *   key_prefix            namespace prepended to every key (redis)
 *   connect_timeout_ms, command_timeout_ms
 *   mooncake_library      file name or path of libmooncake_store.so
 *   mooncake_log          "off" (default) or "stderr": Mooncake's own log
 *   chunk_size            model import's default chunk size ("64MiB")
 *   hub_endpoint          `model import --from-hub` server (default
 *                         https://huggingface.co)
 *   hub_token_file        file holding its token
 *   hub_tls_ca_file       the CAs (PEM) an https Hub must chain to
 *   hub_max_files, hub_max_pages, hub_max_redirects (counts),
 *   hub_max_file_size, hub_max_total_size, hub_max_json_size, hub_min_rate
 *   (sizes; the rate per second), hub_transfer_timeout_ms
 *                         the limits on a Hub (docs/trust.md;
 *                         wstore_hub_options_from_config)
 *   serve_listen          `wstore serve` address (ADDR:PORT)
 *   serve_token           bearer token `wstore serve` requires; never
 *                         printed
 *   serve_tls_cert, serve_tls_key, serve_tls_key_password_file
 *                         `wstore serve` HTTPS: PEM certificate, key and
 *                         the file holding the key's password
 *   quota                 most bytes the checkpoints may hold ("100GiB")
 *   evict                 "lru": make room under the quota by evicting
 *                         least recently read checkpoints; "none"
 * An unknown key is an error naming it.
 */
typedef struct wstore_config wstore_config;

int wstore_config_new(wstore_config **out);
/* Load a JSON object file; values may be strings, integers or null. */
int wstore_config_load(wstore_config **out, const char *path);
/* Set (value != NULL) or clear (value == NULL) a key.  Copies both. */
int wstore_config_set(wstore_config *cfg, const char *key, const char *value);
/* Value of key or NULL; owned by cfg, valid until the key is set again. */
const char *wstore_config_get(const wstore_config *cfg, const char *key);
/* Overlay: every key set in src is set in dst. */
int wstore_config_merge(wstore_config *dst, const wstore_config *src);
/* Overlay environment variables: for each known key, WSTORE_<KEY in upper
 * case> (e.g. WSTORE_STORE, WSTORE_MASTER_SERVER_ADDR) if set. */
int wstore_config_load_env(wstore_config *cfg);
/* Names of all known keys, NULL-terminated (static). */
const char *const *wstore_config_keys(void);
/* Write as a JSON file atomically (temp file, fsync, rename); a new file
 * gets mode 0600, a replaced one keeps its mode. */
int wstore_config_save(const wstore_config *cfg, const char *path);
/* The user's config file: $WSTORE_CONFIG, else
 * $XDG_CONFIG_HOME/wstore/config.json, else ~/.config/wstore/config.json.
 * Returns a malloc'ed string the caller frees (NULL: no home directory). */
char *wstore_config_default_path(void);
/* The system-wide config file: $WSTORE_SYSTEM_CONFIG, else
 * /etc/wstore/config.json.  Malloc'ed; the caller frees it. */
char *wstore_config_system_path(void);
/*
 * The settings every front end starts from, in order, each overriding the
 * one before: the system file (if it exists), the user's file (user_path,
 * which must exist; NULL: wstore_config_default_path(), which must exist
 * only when $WSTORE_CONFIG names it), the WSTORE_* environment.
 */
int wstore_config_load_layered(wstore_config **out, const char *user_path);
/* The embedded file store used when no "store" is set: $WSTORE_HOME, else
 * $XDG_DATA_HOME/wstore, else ~/.local/share/wstore.  Malloc'ed; NULL when
 * there is no home directory. */
char *wstore_config_default_store(void);
void wstore_config_free(wstore_config *cfg);
/* The version of the library's build: the release (WSTORE_VERSION of its
 * headers) and, built from git, "+N.gSHA" (N commits, SHA the commit, and
 * ".dirty" for uncommitted changes), e.g. "0.2.0+812.g1a2b3c4d5e6f".
 * Static storage. */
const char *wstore_version(void);

/* ---- store ------------------------------------------------------------- */

typedef struct wstore_store wstore_store;

/*
 * Open the store that cfg describes (its "store" key; unset means the
 * embedded file store at wstore_config_default_store()).
 * cfg may be NULL.  cfg is not retained.
 */
int wstore_open(wstore_store **out, const wstore_config *cfg);
/* Shorthand: open by URL alone. */
int wstore_open_url(wstore_store **out, const char *url);

/*
 * How wstore_open_flags opens a store.  wstore_open is
 * wstore_open_flags(out, cfg, WSTORE_OPEN_CREATE).
 *  - WSTORE_OPEN_CREATE: a file store directory that does not exist is
 *    created (importers).  Without it, a missing directory is an error
 *    naming it (-ENOENT), so a mistyped path never yields an empty store.
 *  - WSTORE_OPEN_READONLY: the caller only reads (list, inspect, verify,
 *    materialize, pull, mount): a file store need not be writable (a
 *    read-only mount, or a directory of another user), and a Redis server
 *    that may evict keys is accepted, since reads check what is there.
 *    Writes through such a store may fail.  Implies no CREATE.
 */
#define WSTORE_OPEN_CREATE 0x1u
#define WSTORE_OPEN_READONLY 0x2u
int wstore_open_flags(wstore_store **out, const wstore_config *cfg,
		      unsigned flags);
void wstore_free(wstore_store *store);
/* What the backend warned about when the store was opened (one line, for
 * example a Redis server that does not let wstore check its eviction
 * policy), or NULL.  Owned by store. */
const char *wstore_warning(const wstore_store *store);
/*
 * Like wstore_free, for a process that is about to end: client teardown
 * that only frees process memory and threads is skipped (Mooncake's client
 * takes about a second to stop its threads, in its destroy call or at
 * exit).  Returns 1 when teardown was skipped: the caller must then end
 * the process with _exit, after flushing its own output, so that no atexit
 * handler or static destructor runs while the skipped threads are still
 * alive.  Returns 0 when the store was freed as by wstore_free (nothing was
 * skipped, e.g. on the file store; a normal exit is fine).
 */
int wstore_free_exiting(wstore_store *store);
/*
 * Notices: one-line messages about a long wait while it lasts (e.g. "object
 * '...' was left half-written by a writer that died; waiting up to 45 s
 * for Mooncake to discard it").  Not errors; fn may be called from any
 * thread that uses the store, and message is valid only during the call.
 * fn NULL turns notices off (the default).  May be called at any time,
 * also while other threads use the store: once it returns, the previous
 * fn is no longer called (so its ctx may be freed).  fn must not call
 * wstore_set_notice itself.
 */
typedef void (*wstore_notice_fn)(const char *message, void *ctx);
void wstore_set_notice(wstore_store *store, wstore_notice_fn fn, void *ctx);
/*
 * Interrupt every wait of the library for another process (a lock, a
 * busy record): from the next poll, within 100 ms, such waits give up with
 * WSTORE_ECANCELED, in every thread and for every store, and keep doing
 * so for the rest of the process.  Async-signal-safe: meant for a
 * SIGINT/SIGTERM handler (the wstore CLI calls it).  Work that is not
 * waiting (an import's chunks) is stopped through its progress callback.
 */
void wstore_interrupt(void);
/* Backend name ("file", "mem", "redis", ...). */
const char *wstore_backend_name(const wstore_store *store);

/* What a store can do (wstore_store_caps), so that front ends can choose
 * a path without looking at the backend. */
/* keys can be listed (gc works) */
#define WSTORE_CAP_LIST (1u << 0)
/* part of a chunk can be read without fetching the whole chunk */
#define WSTORE_CAP_RANGE_READS (1u << 1)
/* several chunks are fetched in one request */
#define WSTORE_CAP_BATCH_READS (1u << 2)
/* chunks are trusted local files: wstore_file_chunk_fd works (zero-copy) */
#define WSTORE_CAP_LOCAL_FILES (1u << 3)
/* put may keep an old value (write-once store) */
#define WSTORE_CAP_WRITE_ONCE (1u << 4)
/* data read back may be stale or damaged: readers check digests */
#define WSTORE_CAP_UNTRUSTED (1u << 5)
/* WSTORE_CAP_* bits of a store. */
unsigned wstore_store_caps(const wstore_store *store);

/* ---- manifests --------------------------------------------------------- */

typedef struct wstore_manifest wstore_manifest;

typedef struct wstore_file_info {
	const char *path;   /* relative path */
	const char *type;   /* "WEIGHT" or "METADATA" */
	const char *key;    /* file key */
	const char *sha256; /* lower-case hex, "" if unknown */
	uint64_t size;
	uint64_t chunk_size; /* 0 = unknown (legacy) */
	uint64_t chunk_count;
} wstore_file_info;

/* Read and validate the manifest of id.  WSTORE_ENOTFOUND if absent,
 * WSTORE_ECORRUPT if unreadable. */
int wstore_manifest_read(wstore_manifest **out, wstore_store *store,
			 const char *id);
/* Parse manifest JSON bytes (validates schema, names, paths, chunks). */
int wstore_manifest_parse(wstore_manifest **out, const void *json, size_t len);
/* Serialise exactly as the contract wants (sorted keys, compact).  The
 * returned string is malloc'ed; the caller frees it with free(). */
int wstore_manifest_serialize(char **out, size_t *out_len,
			      const wstore_manifest *m);
void wstore_manifest_free(wstore_manifest *m);

const char *wstore_manifest_checkpoint_id(const wstore_manifest *m);
const char *wstore_manifest_model_id(const wstore_manifest *m);
const char *wstore_manifest_revision(const wstore_manifest *m);
const char *wstore_manifest_status(const wstore_manifest *m);
const char *wstore_manifest_source_uri(const wstore_manifest *m);
/* NULL when READY */
const char *wstore_manifest_error(const wstore_manifest *m);
int64_t wstore_manifest_created_at(const wstore_manifest *m);
int64_t wstore_manifest_updated_at(const wstore_manifest *m);
uint64_t wstore_manifest_total_size(const wstore_manifest *m);
size_t wstore_manifest_file_count(const wstore_manifest *m);
/* Fill info for file i (0-based, files sorted by path); pointers in info
 * are owned by m.  WSTORE_ERANGE if i is out of range. */
int wstore_manifest_file_sized(wstore_file_info *out, size_t out_size,
			       const wstore_manifest *m, size_t i);
WSTORE__SIZED(int wstore_manifest_file(wstore_file_info *out,
				       const wstore_manifest *m, size_t i),
	      wstore_manifest_file_sized(out, sizeof(*out), m, i))
/* Chunk key j of file i; NULL if out of range.  Owned by m. */
const char *wstore_manifest_chunk_key(const wstore_manifest *m, size_t i,
				      uint64_t j);
/* Index of the file with this path, or -1. */
int64_t wstore_manifest_find(const wstore_manifest *m, const char *path);

/* ---- repository names, as Hugging Face Hub clients use them (resolve.c) */

/* Length of a commit id in hex digits (that of a git commit id). */
#define WSTORE_COMMIT_LEN 40

/*
 * The commit id of a checkpoint.  Imported from a Hub (its revision is a
 * 40-hex commit id, as wstore_import_hub records): that commit id, so
 * every mirror of one upstream and every --from-hub store report the
 * upstream's.  Otherwise the first 40 hex digits (lower case) of the
 * SHA-256 of its content alone: "wstore commit 1", model id, revision,
 * then each file's path, size (decimal) and SHA-256, in path order, each
 * field followed by a NUL byte (docs/format.md, "Commit ids").  So one
 * folder imported into two stores, or twice, has one id; checkpoint id
 * and times do not count.  out must hold WSTORE_COMMIT_LEN + 1 bytes
 * (WSTORE_ERANGE otherwise).
 */
int wstore_manifest_commit(char *out, size_t cap, const wstore_manifest *m);

/*
 * Resolve a repository name and a revision to a READY checkpoint.
 * repo is a model id (the manifests' model_id) or, when no READY
 * checkpoint carries that model id, a checkpoint id.  revision is a
 * manifest's revision or a checkpoint's commit id; NULL, "" and "HEAD"
 * mean "main".  For a model id, the newest matching checkpoint wins
 * (greatest updated_at, then created_at, then checkpoint id), so a new
 * import under the same model id and revision takes the name over.  A
 * checkpoint id used as repo matches its own revision, its commit id and
 * "main".
 *
 * *out_id is the checkpoint id, malloc'ed (free with wstore_string_free or
 * free).  out_repo_known (may be NULL) gets 1 when some READY checkpoint
 * goes by repo, also when the revision did not match, so that a caller can
 * tell an unknown repository from an unknown revision.  WSTORE_ENOTFOUND
 * when nothing matches; other codes when the store could not be read.
 */
int wstore_resolve(char **out_id, int *out_repo_known, wstore_store *store,
		   const char *repo, const char *revision);

/* ---- progress and cancellation ---------------------------------------- */

/*
 * Called from the calling thread or a worker (serialised by the library)
 * after each chunk.  done/total are bytes.  Return non-zero to cancel: the
 * operation stops with WSTORE_ECANCELED and cleans up as on any failure.
 */
typedef int (*wstore_progress_fn)(uint64_t done, uint64_t total,
				  const char *path, void *ctx);

/* ---- import ------------------------------------------------------------ */

/*
 * Called for each checkpoint an eviction picks, least recently read first
 * (a checkpoint never read counts from its import): removed is 1 once it
 * was deleted, 0 on a dry run or when the delete failed (then code and
 * message say why, e.g. a lease taken meanwhile: it is skipped).  id and
 * message are valid only for the call.  See wstore/lease.h.
 */
typedef void (*wstore_evict_fn)(const char *id, uint64_t bytes,
				int64_t last_read_ms, int removed, int code,
				const char *message, void *ctx);

typedef struct wstore_import_options {
	unsigned version;
	const char *checkpoint_id; /* required */
	const char *model_id;	   /* required */
	const char *revision;	   /* default "main" */
	const char *source;	   /* required: a directory */
	uint64_t chunk_size;	   /* 0: WSTORE_DEFAULT_CHUNK_SIZE */
	/* was replica_num, never read: copies are a store setting (config
	 * key replica_num, read when the store opens); must be 0 */
	uint32_t reserved;
	uint32_t jobs; /* worker threads; 0 = number of cores */
	wstore_progress_fn progress;
	void *progress_ctx;
	/* version 2: told of each checkpoint evicted to make room (the
	 * store's quota with "evict": "lru"); may be NULL */
	wstore_evict_fn on_evict;
	void *on_evict_ctx;
	/* version 3: on a store that keeps each file as one local file (the
	 * embedded file store), whether a source file is cloned into it
	 * (FICLONE: a copy-on-write file system such as XFS with reflink or
	 * btrfs, the source on the store's) after its one read for the hash,
	 * instead of its bytes being written: WSTORE_REFLINK_* */
	uint32_t reflink;
} wstore_import_options;
/* clone where the file systems can, write the bytes where they cannot */
#define WSTORE_REFLINK_AUTO 0
/* clone, or fail naming the file and why it could not be cloned */
#define WSTORE_REFLINK_ALWAYS 1
/* always write the bytes */
#define WSTORE_REFLINK_NEVER 2
#define WSTORE_IMPORT_OPTIONS_VERSION 3
#define WSTORE_IMPORT_OPTIONS_INIT                                             \
	{                                                                      \
		WSTORE_IMPORT_OPTIONS_VERSION                                  \
	}

/*
 * Import a checkpoint directory (docs/format.md, "Lifecycle").  Before
 * anything is written the import must fit: under the store's quota
 * ("quota" in the config; with "evict": "lru" least recently read
 * checkpoints that are neither pinned nor leased are evicted first) and in
 * the backend's free space where it can tell; else WSTORE_EBUSY with the
 * sizes.  On success the READY manifest is published and the id is in both
 * indexes.  On failure or cancellation the chunks written are removed and a
 * FAILED manifest records any that could not be; the return value says why.
 */
int wstore_import(wstore_store *store, const wstore_import_options *opts);
/* The checks wstore_import makes of opts before it touches the source or
 * the store (version, ids, revision, chunk size): 0, or WSTORE_EINVAL with
 * the last error saying what is wrong.  Front ends call it before opening
 * a store, so that bad input never waits for a server. */
int wstore_import_check(const wstore_import_options *opts);

/* ---- list / delete ----------------------------------------------------- */

/* Ids in the global index, sorted.  *out is a NULL-terminated malloc'ed
 * array; free it with wstore_strings_free(). */
int wstore_list(char ***out, size_t *out_count, wstore_store *store);
/* Ids of one model id (per-model index). */
int wstore_list_model(char ***out, size_t *out_count, wstore_store *store,
		      const char *model_id);
void wstore_strings_free(char **strings);
/* Free a string the library returned as malloc'ed (serialize, paths), for
 * callers that cannot reach the C library's free() (e.g. ctypes). */
void wstore_string_free(char *s);

/* Delete a checkpoint (docs/format.md, "Lifecycle").  WSTORE_ENOTFOUND
 * when it has no manifest (a stale global index entry is dropped anyway). */
int wstore_delete(wstore_store *store, const char *id);

/* ---- verify ------------------------------------------------------------ */

/* Called once per file checked: result 0 when good, else a code and a
 * one-line message. */
typedef void (*wstore_verify_file_fn)(const char *path, int result,
				      const char *message, void *ctx);

typedef struct wstore_verify_options {
	unsigned version;
	uint32_t jobs; /* 0 = number of cores */
	wstore_progress_fn progress;
	void *progress_ctx;
	wstore_verify_file_fn on_file;
	void *on_file_ctx;
} wstore_verify_options;
#define WSTORE_VERIFY_OPTIONS_VERSION 1
#define WSTORE_VERIFY_OPTIONS_INIT                                             \
	{                                                                      \
		WSTORE_VERIFY_OPTIONS_VERSION                                  \
	}

/*
 * Re-read every chunk of every file and check sizes and SHA-256.
 * 0 when all good; WSTORE_EVERIFY when some file is damaged (the last error
 * names the first one); WSTORE_ENOTREADY for a FAILED checkpoint; other
 * codes when the check itself could not run.
 */
int wstore_verify(wstore_store *store, const char *id,
		  const wstore_verify_options *opts);

/* ---- materialize ------------------------------------------------------- */

/*
 * Write one file of a READY checkpoint to output: a temp file next to it,
 * checked against the manifest's size and SHA-256, fsynced and renamed into
 * place.  On failure output is left as it was and no temp file remains.
 */
int wstore_materialize_file(wstore_store *store, const char *id,
			    const char *path, const char *output);

/* ---- garbage collection and locks (gc.c) ------------------------------ */

/*
 * Called once per orphan gc finds: key is the store key, or for a stale
 * temp file of the file store its path relative to the store root (it
 * starts with ".tmp-" in its last segment).  removed is 1 when it was
 * removed, 0 on a dry run or when removing failed.  key is valid only for
 * the duration of the call.
 */
typedef void (*wstore_gc_fn)(const char *key, uint64_t bytes, int removed,
			     void *ctx);
/* Called once per checkpoint gc leaves alone: code is WSTORE_EBUSY (an
 * import or delete holds its lock) or WSTORE_ECORRUPT (its manifest is
 * unreadable, so what it references is unknown; `model delete` cleans it);
 * message is a one-line reason, valid only for the call. */
typedef void (*wstore_gc_skip_fn)(const char *id, int code, const char *message,
				  void *ctx);

typedef struct wstore_gc_options {
	unsigned version;
	int dry_run; /* report, remove nothing */
	/* temp files younger than this are left alone (a put may be
	 * writing them); < 0 = the default, 3600 */
	int64_t grace_seconds;
	wstore_gc_fn on_orphan;
	void *on_orphan_ctx;
	wstore_gc_skip_fn on_skip;
	void *on_skip_ctx;
} wstore_gc_options;
#define WSTORE_GC_OPTIONS_VERSION 1
#define WSTORE_GC_OPTIONS_INIT                                                 \
	{                                                                      \
		WSTORE_GC_OPTIONS_VERSION, 0, -1                               \
	}

typedef struct wstore_gc_stats {
	uint64_t checkpoints; /* checkpoint ids examined */
	uint64_t orphans;     /* orphaned objects found (not temp files) */
	uint64_t orphan_bytes;
	uint64_t temps; /* stale temp files found (file store) */
	uint64_t temp_bytes;
	uint64_t removed; /* orphans and temps removed (0 on dry run) */
	uint64_t skipped; /* checkpoints left alone (see on_skip) */
} wstore_gc_stats;

/*
 * Remove what no manifest references, on stores that can list keys
 * (file, redis); elsewhere WSTORE_EUNSUPPORTED.
 *
 * An orphan is a key under "weight/models/{ckpt}/" that is neither the
 * manifest nor a chunk listed in a manifest (READY or FAILED; chunks a
 * FAILED manifest lists are kept for `model delete`).  Each checkpoint is
 * handled while holding its lock, the lock every import and delete holds
 * from before its first write until after its manifest is published or
 * removed: a checkpoint whose lock is held by a live owner is skipped, so
 * the chunks of a running import are never touched, and a READY manifest
 * keeps every chunk it lists.  On the file store, temp files of puts
 * ("<dir>/.tmp-*") older than grace_seconds are removed too, except,
 * whatever the grace, those of a checkpoint whose lock a live owner holds
 * and those whose writer (the pid in the name) is a live process.
 * A dry run takes no lock and removes nothing.
 *
 * out (may be NULL) receives counts, also when an error is returned.
 * Returns 0, or the first error (gc goes on past failed removes).
 */
int wstore_gc_sized(wstore_gc_stats *out, size_t out_size, wstore_store *store,
		    const wstore_gc_options *opts);
WSTORE__SIZED(int wstore_gc(wstore_gc_stats *out, wstore_store *store,
			    const wstore_gc_options *opts),
	      wstore_gc_sized(out, sizeof(*out), store, opts))

/*
 * Locks are store objects "weight/locks/<name>" holding an owner record
 * (JSON: the owner's host, pid, boot id, PID namespace and start time, a
 * token and a lease time its holder renews; docs/format.md, "Locks").
 * Names: "catalog" (index updates on stores without an atomic update) and
 * "models/<checkpoint id>" (imports and deletes of that id).  A lock whose
 * owner process is gone is taken over automatically; one whose owner
 * cannot be judged from here (another machine or PID namespace) once its
 * lease time has run out unrenewed.
 *
 * wstore_lock_owner: *out is the owner record (malloc'ed, caller frees;
 * the raw bytes if unparsable), *out_live 1 if the owner is a live process
 * of this machine and PID namespace, 0 if it is a dead one, -1 if it
 * cannot be told (another machine or PID namespace, a record of an older
 * wstore whose pid is not found, an unreadable record).  WSTORE_ENOTFOUND
 * when the lock is not held.
 */
int wstore_lock_owner(char **out, int *out_live, wstore_store *store,
		      const char *name);
/*
 * Remove lock name.  Without force, a lock whose owner is alive (as
 * wstore_lock_owner says 1) is refused with WSTORE_EBUSY.  WSTORE_ENOTFOUND if
 * not held. Breaking the lock of a running import or delete lets another one
 * run beside it: use only for owners that are gone.
 */
int wstore_lock_break(wstore_store *store, const char *name, int force);

/* ---- import sources (source.c) ---------------------------------------- */

/*
 * What an import takes from a directory, the same for every front end:
 *
 * - Folders of version control and tools are skipped at any depth (.git,
 *   .hg, .svn, .bzr, __pycache__, .ipynb_checkpoints, and
 *   .cache/huggingface of `hf download --local-dir`); a file named .git
 *   (a git worktree link) too.  wstore_source_skipped lists them.
 * - Include and exclude patterns (fnmatch(3), no flags: '*' also matches
 *   '/') select files by relative path, as `model pull` does: with any
 *   include pattern only matching files are taken; then every file
 *   matching an exclude pattern is left out.
 * - A Hugging Face hub cache repo root (models--ORG--NAME holding blobs/,
 *   refs/, snapshots/) is imported as its snapshot of the revision (refs/
 *   names it; default "main"), and a snapshot folder
 *   (models--ORG--NAME/snapshots/COMMIT) as it is, its symlinks followed
 *   into blobs/.  Either gives a model id ("ORG/NAME"), a commit and a
 *   revision (the ref naming the commit, "main" first, else the commit).
 * - The files left must look like a checkpoint: a weight file (.safetensors,
 *   .gguf, .bin, .pt, .pth, .ckpt, .h5, .msgpack, .onnx, .npz) and a config
 *   (config.json, params.json or model_index.json, at any depth; GGUF
 *   weights carry their own), and some of them at the top: a source whose
 *   config and weight files all sit in one folder under it is refused
 *   naming that folder.  Else WSTORE_EINVAL naming what is missing,
 *   unless forced.
 * - Never, forced or not: a hub cache itself (a folder holding
 *   models--* or datasets--* folders, or a hub/ holding them), or weight
 *   files that are Git LFS pointer files (WSTORE_EINVAL naming a repo
 *   folder to pass, or the first pointer file).
 */
typedef struct wstore_source wstore_source;

/* A source for directory path; revision picks the snapshot of a hub cache
 * repo root (NULL: "main").  Both are copied. */
int wstore_source_new(wstore_source **out, const char *path,
		      const char *revision);
void wstore_source_free(wstore_source *src);
/* Add an include or exclude pattern (copied); WSTORE_EINVAL if empty. */
int wstore_source_include(wstore_source *src, const char *pattern);
int wstore_source_exclude(wstore_source *src, const char *pattern);
/* force != 0: import a source that does not look like a checkpoint. */
void wstore_source_set_force(wstore_source *src, int force);
/*
 * Walk the source under its rules and check it, without reading file
 * contents or touching a store: 0, or an error naming the first problem
 * (the same wstore_import_from would give).  Fills the accessors below,
 * whose strings are valid until the next examine or the free.
 */
int wstore_source_examine(wstore_source *src);
/* The directory imported (a hub repo root's snapshot), after examine. */
const char *wstore_source_dir(const wstore_source *src);
/* From a hub cache folder: "ORG/NAME", the snapshot's commit and the ref
 * naming it (else the commit); NULL for other sources. */
const char *wstore_source_model_id(const wstore_source *src);
const char *wstore_source_commit(const wstore_source *src);
const char *wstore_source_revision(const wstore_source *src);
/* The i-th skipped folder ('/'-separated, relative), NULL past the end. */
const char *wstore_source_skipped(const wstore_source *src, size_t i);
/* Files the import would take and their total size, after examine. */
size_t wstore_source_file_count(const wstore_source *src);
uint64_t wstore_source_total_size(const wstore_source *src);

/*
 * wstore_import with the files of src under its rules (opts->source is
 * ignored and may be NULL).  wstore_import(store, opts) takes every file
 * of opts->source, as it always did.
 */
int wstore_import_from(wstore_store *store, const wstore_import_options *opts,
		       const wstore_source *src);

/* ---- import from a Hub (hub.c) ------------------------------------------ */

/*
 * A file of a Hub's listing, as wstore_hub_options' callbacks get it
 * (strings valid during the call) and wstore_hub_fetch_file takes it.
 */
typedef struct wstore_hub_file {
	const char *path;
	uint64_t size;
	/* the git blob SHA-1 (40 hex) of the file, or of its LFS pointer
	 * for an LFS file */
	const char *oid;
	/* an LFS file's SHA-256 (64 hex); "" or NULL for a file kept in
	 * git */
	const char *sha256;
} wstore_hub_file;

/*
 * Where and what wstore_import_hub fetches.  Strings are the caller's,
 * read during the call only.
 */
typedef struct wstore_hub_options {
	unsigned version;
	/* a server speaking the Hugging Face Hub protocol (the Hub, a
	 * mirror, another `wstore serve`); NULL: "https://huggingface.co" */
	const char *endpoint;
	const char *repo;     /* required: ORG/NAME */
	const char *revision; /* branch, tag or commit; NULL: "main" */
	const char *token;    /* bearer token; NULL: none */
	/* NULL-terminated glob lists (fnmatch on the file's path, as
	 * wstore_source_include/exclude); NULL: every file, none left out */
	const char *const *include;
	const char *const *exclude;
	uint32_t connections; /* files fetched at once; 0: 4 */
	uint32_t retries;     /* tries after the first of each request; 0: 5 */
	/* the window of min_rate: a transfer moving fewer than min_rate
	 * bytes a second over this long fails (then is retried); 0: 30 s.
	 * Connecting gives up after 10 s. */
	uint32_t stall_timeout_ms;
	uint32_t reserved; /* must be 0 */
	/* version 2: the limits on what the server may send (docs/trust.md;
	 * the config keys hub_max_files, ... fill them through
	 * wstore_hub_options_from_config); 0: the default in brackets */
	uint32_t max_files;	 /* files a listing may name [100000] */
	uint32_t max_pages;	 /* pages of a listing [1000] */
	uint64_t max_file_size;	 /* bytes of one file [1 TiB] */
	uint64_t max_total_size; /* bytes of all files taken [16 TiB] */
	uint64_t max_json_size;	 /* bytes of one JSON answer [64 MiB] */
	uint32_t max_redirects;	 /* redirects followed per request [5] */
	/* a transfer slower than min_rate bytes/s over stall_timeout_ms
	 * fails (then is retried) [1024] */
	uint32_t min_rate;
	/* one request, its retries included, ends after this long
	 * [6 hours] */
	uint32_t transfer_timeout_ms;
	uint32_t reserved2; /* must be 0 */
	/* PEM file of the CAs an https server must chain to; NULL:
	 * $CURL_CA_BUNDLE, else the system's */
	const char *tls_ca_file;
	/* version 3: a caller that fetches the files itself (a mirror that
	 * streams each to its clients as it arrives).  Both may be NULL;
	 * ctx is passed to both. */
	/* Once the listing is in, before any file is fetched: the commit
	 * and the n files to import, sorted by path (valid during the call
	 * only).  Non-zero stops the import with that code. */
	int (*on_list)(void *ctx, const char *commit, size_t n,
		       const struct wstore_hub_file *files);
	/* For each file to fetch (after a file the store holds with the
	 * same bytes was looked for): 1 to have the library fetch it; 0
	 * with *out_fd open on the file's bytes (size of them, read with
	 * pread from offset 0, closed by the library), which are hashed
	 * and checked against the listing as fetched bytes are (a
	 * mismatch is WSTORE_EVERIFY); a negative code fails the import
	 * with it.  Called from the import's threads, several at once. */
	int (*open_file)(void *ctx, const struct wstore_hub_file *file,
			 int *out_fd);
	void *ctx;
} wstore_hub_options;
#define WSTORE_HUB_OPTIONS_VERSION 3
#define WSTORE_HUB_OPTIONS_INIT                                                \
	{                                                                      \
		WSTORE_HUB_OPTIONS_VERSION                                     \
	}

/*
 * Import hub->repo at hub->revision straight from the server, with no
 * local copy: the server names the commit, lists the files (sizes and
 * hashes), and each file streams into chunks as it arrives, hashed as it
 * streams, and is checked against the server's hash (SHA-256 for an LFS
 * file, the git blob SHA-1 otherwise) before the checkpoint can be READY.
 * Redirects are followed (the Hub sends LFS files to a CDN); the token
 * (and a user:password in the endpoint's URL) goes only to the
 * endpoint's scheme, host and port, a listing's next page must be there,
 * and an https endpoint is never redirected to http (docs/trust.md).
 * What the server sends is bounded by the limits of hub (files, sizes,
 * JSON, pages, redirects, rate, deadline), checked before anything is
 * allocated or stored; 429 (after its Retry-After), 5xx, resets
 * and short bodies are retried with backoff, a cut transfer resuming
 * where it stopped; proxies come from the usual environment variables.
 *
 * opts is read as for wstore_import_from, except: source and revision
 * are ignored (the manifest's revision is the server's commit id, so
 * that NAME@COMMIT resolves; its source_uri is ENDPOINT/REPO), model_id
 * NULL means hub->repo, and checkpoint_id NULL means one derived from the
 * model id and commit (wstore_checkpoint_id_derive), the id of an import
 * of the same commit that was killed being taken again.  An import killed
 * and run again fetches only the files it had not stored and verified.
 * An id already READY with this model and commit is left as it is (0).
 * opts->progress is also asked while no byte arrives (about once a
 * second, with path "" and, before the file list is in, total 0): non-zero
 * cancels within about a second (WSTORE_ECANCELED), also while a transfer
 * waits on a server that sends nothing; wstore_interrupt does the same.
 *
 * *out_id (may be NULL) is the checkpoint id, malloc'ed, also on failure
 * once it is known.  Errors: WSTORE_ENOTFOUND (repository, revision or
 * file not on the server), -EACCES (the server refused the token, or
 * wants one), WSTORE_EUNAVAIL (unreachable, or failing after the
 * retries), WSTORE_EVERIFY (a file's bytes do not match the server's
 * hash: the last error names the file and both hashes), and those of
 * wstore_import.
 */
int wstore_import_hub(char **out_id, wstore_store *store,
		      const wstore_import_options *opts,
		      const wstore_hub_options *hub);

/* Bytes of a body, in order, each once: 0, or non-zero to stop. */
typedef int (*wstore_hub_sink)(void *ctx, const void *data, size_t n);

/*
 * GET file of hub->repo at commit (40 hex) from hub->endpoint, on its
 * own (no store, no checkpoint): its bytes go to sink as they arrive,
 * in order and each once (a cut transfer is resumed where it stopped,
 * as wstore_import_hub does, with hub's token, limits and retries), and
 * once all file->size of them are in they are checked against the
 * listing's hash: file->sha256 when given, else the git blob id
 * file->oid.  0 only when they match; WSTORE_EVERIFY (the last error
 * names the file and both hashes) when they do not, after every byte
 * went to sink: a caller that passed them on must take them back (a
 * mirror cuts its clients' transfers).  cancel (may be NULL) is asked
 * about once a second while the server is silent, non-zero stops
 * (WSTORE_ECANCELED); a sink returning non-zero stops with its code.
 * Memory: libcurl's buffers, whatever the size.  Errors otherwise as
 * wstore_import_hub's.
 */
int wstore_hub_fetch_file(const wstore_hub_options *hub, const char *commit,
			  const wstore_hub_file *file, wstore_hub_sink sink,
			  wstore_progress_fn cancel, void *ctx);

/*
 * The limits and the CA file of cfg's hub_* keys into o (strings owned by
 * cfg, valid while it is; keys unset leave o's fields as they are):
 * hub_max_files, hub_max_pages, hub_max_file_size, hub_max_total_size,
 * hub_max_json_size, hub_max_redirects, hub_min_rate,
 * hub_transfer_timeout_ms, hub_tls_ca_file.
 */
int wstore_hub_options_from_config(wstore_hub_options *o,
				   const wstore_config *cfg);

/*
 * *out (malloc'ed): the URL of what on endpoint (NULL: the Hub's), built
 * with libcurl's URL API, each part escaped as one path segment so that
 * nothing in repo, revision or path can become a query or another host:
 *   "revision"  ENDPOINT/api/models/REPO/revision/REVISION
 *   "tree"      ENDPOINT/api/models/REPO/tree/REVISION?recursive=true
 *   "resolve"   ENDPOINT/REPO/resolve/REVISION/PATH ('/' kept in PATH)
 *   "info"      ENDPOINT/api/models/REPO
 * repo must pass wstore_hub_repo_check.  The URL carries no credentials
 * of the endpoint's.  Errors: WSTORE_EINVAL naming what is wrong.
 */
int wstore_hub_url(char **out, const char *endpoint, const char *what,
		   const char *repo, const char *revision, const char *path);

/* 0 when repo is a repository name a Hub accepts (ORG/NAME, each 1-96
 * of letters, digits, '.', '_', '-', not starting with '.' or '-', no
 * ".."), else WSTORE_EINVAL naming it (control characters shown as
 * '?').  Match allow-lists on a name that passed this. */
int wstore_hub_repo_check(const char *repo);

/* *out (malloc'ed): url with any user:password@ replaced by "***@" (the
 * text as it is when it holds none), for printing a URL. */
int wstore_url_redact(char **out, const char *url);

/* ---- bundles and copies between stores (bundle.c, copy.c) -------------- */

/*
 * A bundle is one checkpoint as one POSIX tar stream (ustar, with a pax
 * header for a name over 100 bytes or a file of 8 GiB or more): first
 * its manifest, under the name WSTORE_BUNDLE_MANIFEST, then every file of
 * the manifest in manifest order (sorted by path), as regular files under
 * their paths, then the end-of-archive marker.  `tar -xf` unpacks it into
 * the checkpoint's folder (plus that one file); docs/format.md, "Bundles".
 */
#define WSTORE_BUNDLE_MANIFEST ".wstore-manifest.json"

typedef struct wstore_export_options {
	unsigned version;
	/* bytes of files written so far (may be NULL); non-zero cancels */
	wstore_progress_fn progress;
	void *progress_ctx;
} wstore_export_options;
#define WSTORE_EXPORT_OPTIONS_VERSION 1
#define WSTORE_EXPORT_OPTIONS_INIT                                             \
	{                                                                      \
		WSTORE_EXPORT_OPTIONS_VERSION                                  \
	}

/*
 * Write READY checkpoint id as a bundle: to output, a file written as a
 * temp file next to it and renamed into place once complete (an existing
 * output that is not a regular file is refused), or, when output is
 * NULL, to fd as it goes (a pipe, stdout; not closed).  Holds the
 * checkpoint's read lease while it reads; memory is one chunk buffer.
 * Every file is checked against the manifest's size and SHA-256 as it is
 * read: WSTORE_ECORRUPT naming the file when the store's copy is damaged
 * (what was written to fd by then is not a valid bundle).  opts may be
 * NULL.  A checkpoint holding a file named WSTORE_BUNDLE_MANIFEST cannot
 * be exported (WSTORE_EINVAL).
 */
int wstore_export(wstore_store *store, const char *id, int fd,
		  const char *output, const wstore_export_options *opts);

/*
 * Import the bundle read from fd (a file, a pipe) as it streams: the
 * checkpoint keeps the bundle's id, model id, revision, source and chunk
 * size, so its commit id is the exporter's.  Every file is checked
 * against the bundle's manifest (size and SHA-256) before the checkpoint
 * is READY.  A bundle that is truncated, damaged or tampered with, out of
 * order, carries a file its manifest does not list or lacks one, or holds
 * anything but regular files (links, devices, directories), or an
 * absolute or ".." name, is refused with WSTORE_EINVAL in one line;
 * nothing outside the store is ever written, and a failure after the
 * first file began leaves a FAILED manifest, as any import does (a later
 * import of a good bundle replaces it).  opts (may be NULL) is read for
 * progress, on_evict and reflink (never: no block shared with a file the
 * store holds); its ids, revision, source and chunk size are ignored.
 * *out_id (may be NULL) is the checkpoint id, malloc'ed, once known.
 * Errors otherwise as wstore_import (WSTORE_EEXISTS for a READY id).
 */
int wstore_import_bundle(char **out_id, wstore_store *store, int fd,
			 const wstore_import_options *opts);

/*
 * Copy READY checkpoint id from store src to store dst, streaming (no
 * local copy): a bundle from src (its read lease held) imported into dst
 * as wstore_import_bundle does, so every file is checked and the
 * checkpoint keeps its id, model id, revision and commit id.  An id that
 * is READY in dst with the same commit id is left as it is (0): a copy
 * run again after it finished, or after it was killed once the manifest
 * was published, does nothing; one killed earlier is taken back and
 * finished.  opts as for wstore_import_bundle.
 */
int wstore_copy(wstore_store *dst, wstore_store *src, const char *id,
		const wstore_import_options *opts);

/* ---- branches and tags of a Hub (hubrefs.c) ---------------------------- */

/*
 * Ask hub->endpoint which commit hub->revision (NULL: "main") of
 * hub->repo names, and nothing else: out gets its 40-hex id (cap >=
 * WSTORE_COMMIT_LEN + 1).  cancel (may be NULL) is asked about once a
 * second while the server is silent; non-zero stops (WSTORE_ECANCELED).
 * Errors as wstore_import_hub's: WSTORE_ENOTFOUND, -EACCES,
 * WSTORE_EUNAVAIL, WSTORE_EINVAL (an answer without a commit id).
 */
int wstore_hub_commit(char *out, size_t cap, const wstore_hub_options *hub,
		      wstore_progress_fn cancel, void *ctx);

/*
 * The commit a branch or tag ref of repository repo named when a server
 * was last asked, kept durably in the store (one record per repository,
 * at most 256 refs, the least recently asked dropped first; see
 * docs/format.md): so a mirror serves the branch at that commit while
 * the server is down, also after a restart.  asked_ms: when the server
 * said so (Unix ms).  Writes are read-modify-write: two writers never
 * lose each other's refs.  WSTORE_EINVAL for a name with control
 * characters or not UTF-8, a ref over 255 bytes, a commit that is not 40
 * lower-case hex digits.
 */
int wstore_ref_write(wstore_store *store, const char *repo, const char *ref,
		     const char *commit, int64_t asked_ms);
/* The commit recorded for ref of repo into out (cap >= WSTORE_COMMIT_LEN
 * + 1) and when it was asked (may be NULL); WSTORE_ENOTFOUND when none
 * is recorded (or the record is unreadable: it is rebuilt by the next
 * write), another code when the store could not be read. */
int wstore_ref_read(char *out, size_t cap, int64_t *out_asked_ms,
		    wstore_store *store, const char *repo, const char *ref);
/* The names of the refs recorded for repo, sorted (none: an empty list);
 * free with wstore_strings_free. */
int wstore_ref_list(char ***out, size_t *out_count, wstore_store *store,
		    const char *repo);

/* ---- names on the command line (catalog.c) ---------------------------- */

/*
 * A checkpoint id for model_id at revision (NULL: "main"), free in store:
 * model_id with '/' as "--", then "--" and the revision (a 40-hex commit
 * cut to 12), every character outside [A-Za-z0-9._-] as '-', a first
 * character that is not a letter or digit as 'm'; "-2", "-3", ...
 * appended while a checkpoint (READY, FAILED or unreadable) or the lock of
 * a running import or delete has that id.  *out is malloc'ed.
 * Two imports deriving at the same moment may pick the same id: the
 * second then fails as any import of a busy or READY id does.
 */
int wstore_checkpoint_id_derive(char **out, wstore_store *store,
				const char *model_id, const char *revision);

/*
 * Every checkpoint with a manifest, READY or FAILED, sorted (wstore_list
 * holds only published ones).  WSTORE_EUNSUPPORTED on a store that cannot
 * list keys (Mooncake).  Free with wstore_strings_free.
 */
int wstore_list_all(char ***out, size_t *out_count, wstore_store *store);

/*
 * The one rule that tells a checkpoint id from a model name: a checkpoint
 * id cannot contain '/', a model name ("ORG/NAME", optionally followed by
 * "@REVISION") always does.  Returns 1 for a model name (then *out_model
 * and *out_revision, malloc'ed, are set; revision NULL when absent), 0 for
 * a checkpoint id (nothing set), WSTORE_EINVAL for a malformed name: not
 * exactly one '/', an org or name that is empty, "." or "..", an empty
 * revision, invalid UTF-8.  Checkpoint ids are not checked here
 * (wstore_validate_checkpoint_id).
 */
int wstore_parse_name(char **out_model, char **out_revision, const char *arg);

/* ---- migrating the file store's layout (migrate.c) --------------------- */

/* Flags of the backend's migrate_file (include/wstore/sys/backend.h). */
#define WSTORE_MIGRATE_DRY_RUN 0x1u

/*
 * Called once per checkpoint: code 0 and files the checkpoint files
 * converted (or that a dry run would convert; 0: already in the
 * whole-file layout), or why it was left as it is: WSTORE_EBUSY (another
 * process holds its lock), WSTORE_ENOTREADY (a FAILED import), or the
 * error its conversion stopped at.  message is one line, valid only for
 * the call.
 */
typedef void (*wstore_migrate_fn)(const char *id, int code, uint64_t files,
				  const char *message, void *ctx);

typedef struct wstore_migrate_options {
	unsigned version;
	int dry_run; /* report, change nothing (no lock taken) */
	int verify;  /* check each new data file's SHA-256 before it is
			published (reads it once more) */
	wstore_migrate_fn on_checkpoint;
	void *on_checkpoint_ctx;
	/* bytes converted so far of all to convert; path is the file */
	wstore_progress_fn progress;
	void *progress_ctx;
} wstore_migrate_options;
#define WSTORE_MIGRATE_OPTIONS_VERSION 1
#define WSTORE_MIGRATE_OPTIONS_INIT                                            \
	{                                                                      \
		WSTORE_MIGRATE_OPTIONS_VERSION                                 \
	}

typedef struct wstore_migrate_stats {
	uint64_t checkpoints; /* checkpoints examined */
	uint64_t converted;   /* checkpoints with files converted */
	uint64_t files;	      /* checkpoint files converted */
	uint64_t bytes;	      /* their bytes */
	uint64_t current;     /* checkpoints already in the new layout */
	uint64_t skipped;     /* left as they were (see on_checkpoint) */
} wstore_migrate_stats;

/*
 * Convert the file store's checkpoints from one file per chunk to one
 * data file per checkpoint file, in place (docs/format.md), each under
 * its checkpoint's lock as import and delete take it; readers keep
 * reading throughout.  Crash-safe: a checkpoint is readable after a kill
 * at any point, and running this again finishes it.  A checkpoint whose
 * lock another process holds, or that is not READY, is skipped and
 * reported.  Other stores have no file layout: WSTORE_EUNSUPPORTED,
 * "nothing to migrate".  out (may be NULL) gets the counts, also on
 * error.  Returns 0; WSTORE_EBUSY when some checkpoint was skipped as
 * busy or failed to convert (the others are done); or the error that
 * stopped it (listing the store).
 */
int wstore_migrate_sized(wstore_migrate_stats *out, size_t out_size,
			 wstore_store *store,
			 const wstore_migrate_options *opts);
WSTORE__SIZED(int wstore_migrate(wstore_migrate_stats *out, wstore_store *store,
				 const wstore_migrate_options *opts),
	      wstore_migrate_sized(out, sizeof(*out), store, opts))

#ifdef __cplusplus
}
#endif

#endif
