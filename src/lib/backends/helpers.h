/*
 * backends/helpers.h - everything a built-in backend may use besides the
 * public headers, and the backend kinds the core opens by URL.  The
 * backends under src/lib/backends/ include this and include/wstore/ only,
 * never a core header: they see no manifest, key layout, index or lock.
 *
 * Owns: the error, digest, durable-write, no-follow directory and
 * config-lookup helpers (defined in the core's error.c, digest.c,
 * durable.c and nofollow.c; config lookup is the public
 * wstore_config_get), and the table of backend kinds (URL schemes and
 * constructors) that store.c walks to open a store by URL.
 */
#ifndef WSTORE_BACKENDS_HELPERS_H
#define WSTORE_BACKENDS_HELPERS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "wstore/wstore.h"
#include "wstore/sys/backend.h"

/* Set the thread's last error and return code. */
int wstore__err(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Same, with ": <strerror(code)>" appended. */
int wstore__errc(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Lower-case hex SHA-256 of a string (65 bytes incl. NUL). */
void wstore__sha256_hex_str(char out[65], const char *s);

/* ---- durable local files (durable.c) ---------------------------------- */

/*
 * A file that appears at its final name only complete: written through fd
 * to a temp file with a short unique name in the final name's directory,
 * then fsynced, published with rename(2) (or linkat(2)) and its directory
 * fsynced.  Every failure path removes the temp file.  Used by the file
 * store, materialize, pull and config.
 */
/* No fsync of the file or the directory: the caller makes the write
 * durable later (the file store: one syncfs before a manifest). */
#define WSTORE__DURABLE_NOSYNC 1u
/* Publish with linkat: -EEXIST, and nothing replaced, if name exists. */
#define WSTORE__DURABLE_NOREPLACE 2u
/* The file store's temp name ".tmp-<name, at most 200 bytes>-<pid>-<16
 * hex>" (docs/format.md) instead of ".wstore-tmp-<pid>-<n>"; both fit in
 * NAME_MAX whatever the final name's length and name the writer's pid. */
#define WSTORE__DURABLE_KEY_TEMP 4u
/* Publish over whatever name is (rename itself refuses a directory)
 * instead of only over a regular file or a symlink. */
#define WSTORE__DURABLE_ANY_TARGET 8u

typedef struct wstore__durable {
	int dirfd; /* the directory (not owned) */
	int fd;	   /* the temp file, open for writing; -1 once closed */
	unsigned flags;
	char tmp[NAME_MAX + 1];
} wstore__durable;

/*
 * Create a temp file for name in dirfd with mode (the umask applies, as
 * for open) and flags (WSTORE__DURABLE_*); what names the final file in
 * messages.  Returns 0 or -errno (-ENOENT: dirfd was removed) and sets
 * the last error; on failure nothing is left.
 */
int wstore__durable_open_flags(wstore__durable *d, int dirfd, const char *name,
			       mode_t mode, unsigned flags, const char *what);
/*
 * Unless NOSYNC, fsync the temp file; close it; unless ANY_TARGET, check
 * that name is absent, a regular file or a symlink (which is replaced,
 * never followed); rename the temp over name (NOREPLACE: link it to name,
 * then unlink it); unless NOSYNC, fsync the directory.  On any failure
 * the temp is removed.  Returns 0 or -errno.
 */
int wstore__durable_commit(wstore__durable *d, const char *name,
			   const char *what);
/* Close and remove the temp file (after a failure); d may be unopened if
 * it was initialised with .fd = -1. */
void wstore__durable_abort(wstore__durable *d);
/*
 * Take an exclusive flock on fd, waiting for another process that holds
 * it (it may be stopped: a holder's flock lasts one read and one write) as
 * long as any lock wait (util.h: $WSTORE_LOCK_WAIT_MS per holder, three
 * times that in all), and never past wstore_interrupt: 0, WSTORE_EBUSY or
 * WSTORE_ECANCELED (last error set), or -errno (util.c).
 */
int wstore__flock_wait(int fd);

/* The pid of the writer that name says made it, if name is a temp name
 * of the form flags selects (WSTORE__DURABLE_KEY_TEMP or not); else 0. */
long wstore__tmp_writer(const char *name, unsigned flags);
/*
 * Whether the writer of temp name (the form flags selects) still runs,
 * judged from the owner tag in the name (durable.c, owner.c):
 * WSTORE__TMP_ALIVE (the tagged process, or, for a tag that cannot be
 * judged here, some live process with that pid), WSTORE__TMP_DEAD
 * (provably gone), or WSTORE__TMP_UNKNOWN (a writer of another machine or
 * PID namespace whose pid names nothing here): unknown counts as alive
 * until the caller's own grace runs out.  Not a temp name
 * of that form: WSTORE__TMP_NOT.
 */
#define WSTORE__TMP_DEAD 0
#define WSTORE__TMP_ALIVE 1
#define WSTORE__TMP_UNKNOWN 2
#define WSTORE__TMP_NOT 3
int wstore__tmp_writer_state(const char *name, unsigned flags);

/* Whether wstore_interrupt was called (util.c): a backend that waits for
 * a server polls it, so that ^C or SIGTERM ends a command within a
 * fraction of a second even while the server does not answer. */
int wstore__interrupted(void);

/* ---- directories reached without a symlink (nofollow.c) -------------- */

/* openat of directory name under fd with O_NOFOLLOW | O_DIRECTORY: the fd,
 * or -1 with errno (ELOOP for a symlink, also where openat says ENOTDIR). */
int wstore__nofollow_subdir(int fd, const char *name);

/* Flags of wstore__nofollow_parent. */
#define WSTORE__NOFOLLOW_CREATE 1u /* mkdirat (0755) missing directories */
#define WSTORE__NOFOLLOW_SYNC 2u   /* and fsync the parent of each made */

/* Where wstore__nofollow_parent failed, for messages. */
typedef struct wstore__nofollow_fail {
	size_t len;   /* path[0..len) is the directory that failed */
	int creating; /* its mkdirat failed (else opening it did) */
} wstore__nofollow_fail;

/*
 * The directory holding the last component of path (relative,
 * '/'-separated), reached from dirfd one component at a time with
 * wstore__nofollow_subdir: a symlink on the way is -ELOOP, never followed,
 * so path cannot lead out of dirfd.  Returns a new fd, or dirfd itself
 * when path has no '/' (close the result only when it differs from
 * dirfd), or -errno (a component over NAME_MAX: -ENAMETOOLONG) with *fail
 * filled in if fail is not NULL; *out_base is the offset of the last
 * component in path.  Sets no last error: the caller words it.
 */
int wstore__nofollow_parent(int dirfd, const char *path, unsigned flags,
			    size_t *out_base, wstore__nofollow_fail *fail);

/* ---- the backends a URL names (table.c; store.c walks the table) ------ */

/*
 * A kind of backend as a store URL names it.  Each backend defines one
 * (wstore__kind_NAME, next to its callbacks) and backends/table.c lists
 * them in wstore__backend_kinds; store.c's wstore_open walks that table,
 * so adding a backend never edits the core.
 */
typedef struct wstore__backend_kind {
	const char *name; /* "Redis", for messages */
	/*
	 * The URLs it takes: a scheme ending in '*' matches every URL that
	 * starts with what precedes the '*' ("redis://" + anything), others
	 * only the URL itself ("mem").  Up to 7, unused ones NULL.
	 */
	const char *schemes[8];
	/* Named in the message about an unknown URL ("redis://, ..."), or
	 * NULL (test-only backends). */
	const char *usage;
	/* Takes a URL that no scheme of any kind matches and that has no
	 * "://": a path (the file store; one kind only). */
	int paths;
	/*
	 * Open: url is the URL whole, rest what follows the matched scheme
	 * (the path itself for paths), cfg the store's configuration (may be
	 * NULL), flags WSTORE_OPEN_*.  0 or a negative code with the last
	 * error set.
	 */
	int (*open)(wstore_backend **out, const char *url, const char *rest,
		    const wstore_config *cfg, unsigned flags);
	/* Instead of open, for a backend around another ("fault+URL"):
	 * store.c opens rest first, then wrap takes it over (on failure the
	 * caller frees inner). */
	int (*wrap)(wstore_backend **out, wstore_backend *inner,
		    const wstore_config *cfg);
	/* Neither open nor wrap: not built into this library; the build
	 * option that adds it ("-Dredis=enabled"). */
	const char *build_option;
} wstore__backend_kind;

/* Every kind, NULL-terminated, in the order URLs are matched. */
extern const wstore__backend_kind *const wstore__backend_kinds[];

extern const wstore__backend_kind wstore__kind_file;
extern const wstore__backend_kind wstore__kind_mem;
extern const wstore__backend_kind wstore__kind_fault;
extern const wstore__backend_kind wstore__kind_redis;
extern const wstore__backend_kind wstore__kind_mooncake;

/* ---- constructors the tests call directly ----------------------------- */

/* redis://[user:password@]host:port[/db], redis+unix:///path[?db=N],
 * redis-cluster://host:port,host:port,...; settings from cfg (may be
 * NULL).  redis/backend.c. */
/*
 * Fault injection around another backend (which it then owns).  Faults are
 * configured with a spec string of comma-separated items:
 *   fail=N        the N-th call (1-based, counting every callback) fails
 *                 with -EIO; fail=N+ fails it and every later call
 *   failop=OP:N   the N-th call of one operation (put, upsert, put_new,
 *                 get, get_range, size, remove, list, update, sync,
 *                 begin_file, commit_file)
 *   short=N       the N-th get returns one byte less than the value
 *   corrupt=N     the N-th get flips one byte
 *   failread=TEXT every read (get, get_range, size, list) of a key or
 *                 prefix that contains TEXT fails with -EIO (a store that
 *                 cannot read one record now; up to 4 such items)
 *   writeonce     put never overwrites an existing key
 *   emptymissing  get of a missing key returns an empty value
 *   files         pass the inner store's data-file writes on (begin_file,
 *                 commit_file, abort_file: failop can name the first
 *                 two); without it an import through the wrapper puts
 *                 chunks, so that put faults reach it
 *   forget=N      the N-th put reports success but stores nothing
 *   crash=N       the process exits immediately (_exit(137)) at the N-th
 *                 call, as if killed
 *   delay=MS      every call first sleeps MS milliseconds (for races and
 *                 interruption tests)
 * The spec may also come from $WSTORE_FAULTS when a store is opened with
 * the URL "fault+<inner URL>".
 */
int wstore__backend_fault_new(wstore_backend **out, wstore_backend *inner,
			      const char *spec);
/* Calls counted so far by a fault backend (for tests). */
uint64_t wstore__backend_fault_calls(wstore_backend *b);

int wstore__backend_redis_open(wstore_backend **out, const char *url,
			       const wstore_config *cfg);
/* The same with WSTORE_OPEN_* flags: READONLY accepts a server that may
 * evict keys (writers are refused one). */
int wstore__backend_redis_open_flags(wstore_backend **out, const char *url,
				     const wstore_config *cfg, unsigned flags);
/* "mooncake": settings from cfg (master_server_addr, ...).  mooncake.c. */
int wstore__backend_mooncake_open(wstore_backend **out,
				  const wstore_config *cfg);

#endif
