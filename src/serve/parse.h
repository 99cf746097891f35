/*
 * parse.h - the server's parsers of untrusted request text, kept free of
 * libmicrohttpd so that tests/fuzz/fuzz_serve.c can drive them alone:
 * percent-decoding, routes to (repository, revision, path), and the Range
 * header.  Internal to src/serve/.
 */
#ifndef WSTORE_SERVE_PARSE_H
#define WSTORE_SERVE_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* A request's repository, revision and path, percent-decoded (malloc'ed;
 * rev and path NULL when absent). */
struct wtarget {
	char *repo;
	char *rev;
	char *path;
};

enum wverb {
	WVERB_INFO,	  /* /api/models/{repo}[/revision/{rev}] */
	WVERB_TREE,	  /* /api/models/{repo}/tree/{rev}[/{path}] */
	WVERB_PATHS_INFO, /* /api/models/{repo}/paths-info/{rev} */
	WVERB_RESOLVE,	  /* /{repo}/resolve/{rev}/{path} */
	WVERB_RAW,	  /* /{repo}/raw/{rev}/{path} */
	WVERB_REFS,	  /* /api/models/{repo}/refs */
};

#define WPARSE_NO_ROUTE (-1)   /* not an endpoint: 404 */
#define WPARSE_BAD_ESCAPE (-2) /* malformed percent-encoding: 400 */

/*
 * Parse rest, the URL path after "/api/models/" (api != 0) or after the
 * leading "/" (api == 0), as received (not decoded).  {repo} is one
 * segment or two ("org/name"); every part is decoded after splitting, so
 * an encoded '/' stays inside its part.  0 with *t and *verb set (free t
 * with wtarget_free), or a WPARSE_ code with nothing to free.
 */
int wparse_target(struct wtarget *t, enum wverb *verb, const char *rest,
		  int api);
void wtarget_free(struct wtarget *t);

/* Percent-decode s[0..n) into a new string; NULL if malformed, if it
 * would hold a NUL byte, or out of memory. */
char *wurl_decode(const char *s, size_t n);

/*
 * The Range header h (may be NULL) against a body of size bytes: 0 = none
 * or one to ignore (several ranges, another unit, malformed, a zero size:
 * RFC 9110 lets a server answer 200 then), 1 = bytes [*a, *b] inclusive,
 * clipped to the size, -1 = unsatisfiable (416).
 */
int wparse_range(const char *h, uint64_t size, uint64_t *a, uint64_t *b);

/* 1 when rev is a Hub commit id (40 lower-case hex digits): a mirror's
 * import, not a ref. */
int wparse_is_commit(const char *rev);

/* 1 when s is well-formed UTF-8 (no overlong forms, no surrogates). */
int wutf8_valid(const char *s);

/*
 * s made safe for a log line or a JSON string (malloc'ed, NULL when out
 * of memory): well-formed UTF-8 is kept, except control characters (C0,
 * DEL, C1) and '\\', which become \xNN per byte, as does every byte that
 * is not part of well-formed UTF-8; blanks too unless keep_space.
 */
char *wescape(const char *s, int keep_space);

#endif
