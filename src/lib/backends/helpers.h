/*
 * backends/helpers.h - everything a built-in backend may use besides the
 * public headers, and the constructors the core calls.  The backends under
 * src/lib/backends/ include this and include/wstore/ only, never a core
 * header: they see no manifest, key layout, index or lock.
 *
 * Owns: the error, digest and config-lookup helpers (defined in the core's
 * error.c and digest.c; config lookup is the public wstore_config_get) and
 * the declarations of the backend constructors selected by URL in store.c.
 */
#ifndef WSTORE_BACKENDS_HELPERS_H
#define WSTORE_BACKENDS_HELPERS_H

#include <stddef.h>
#include <stdint.h>

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

/* ---- constructors (store.c selects them by URL) ----------------------- */

/* redis://[user:password@]host:port[/db], redis+unix:///path[?db=N],
 * redis-cluster://host:port,host:port,...; settings from cfg (may be
 * NULL).  redis/backend.c. */
int wstore__backend_redis_open(wstore_backend **out, const char *url,
			       const wstore_config *cfg);
/* "mooncake": settings from cfg (master_server_addr, ...).  mooncake.c. */
int wstore__backend_mooncake_open(wstore_backend **out,
				  const wstore_config *cfg);

/*
 * Find temp files of puts ("<dir>/.tmp-*", invisible to list()) under a
 * file backend's root whose mtime is more than older_than seconds ago, and
 * unlink them unless dry_run.  Never touched, whatever older_than: a temp
 * file whose writer (the pid in its name) is a live process, and one for
 * which keep (may be NULL) returns non-zero.  fn (may be NULL) is called
 * for each one found with its path relative to the root.  b may be any
 * backend: one that is not the file backend gives WSTORE_EUNSUPPORTED.
 * *out_n = temp files found.  file.c; used by gc.c.
 */
int wstore__file_backend_sweep_temps(
	wstore_backend *b, int64_t older_than, int dry_run, size_t *out_n,
	int (*keep)(const char *path, void *ctx),
	void (*fn)(const char *path, uint64_t bytes, int removed, void *ctx),
	void *ctx);

#endif
