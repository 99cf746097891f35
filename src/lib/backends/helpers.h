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
/* The same with WSTORE_OPEN_* flags: READONLY accepts a server that may
 * evict keys (writers are refused one). */
int wstore__backend_redis_open_flags(wstore_backend **out, const char *url,
				     const wstore_config *cfg, unsigned flags);
/* "mooncake": settings from cfg (master_server_addr, ...).  mooncake.c. */
int wstore__backend_mooncake_open(wstore_backend **out,
				  const wstore_config *cfg);

#endif
