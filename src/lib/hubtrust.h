/*
 * hubtrust.h - the trust rules of the Hub client in one place
 * (hubtrust.c; written down for users in docs/trust.md): what an
 * upstream may control and what bounds it, how URLs are built, which
 * origin a credential belongs to.  Library-internal.
 */
#ifndef WSTORE_HUBTRUST_H
#define WSTORE_HUBTRUST_H

#include <stddef.h>
#include <stdint.h>

#include <wstore/wstore.h>

/* Defaults of the limits (each a wstore_hub_options field and a config
 * key, docs/trust.md). */
/* the server wstore_import_hub asks when none is given */
#define WSTORE__HUB_DEFAULT "https://huggingface.co"
#define WSTORE__HUB_MAX_FILES 100000u
#define WSTORE__HUB_MAX_FILE_SIZE ((uint64_t)1 << 40)  /* 1 TiB */
#define WSTORE__HUB_MAX_TOTAL_SIZE ((uint64_t)1 << 44) /* 16 TiB */
#define WSTORE__HUB_MAX_JSON_SIZE ((uint64_t)64 << 20)
#define WSTORE__HUB_MAX_PAGES 1000u
#define WSTORE__HUB_MAX_REDIRECTS 5u
#define WSTORE__HUB_MIN_RATE 1024u		   /* bytes/s */
#define WSTORE__HUB_STALL_MS 30000u		   /* the rate's window */
#define WSTORE__HUB_DEADLINE_MS (6u * 3600 * 1000) /* one request */
/* an error answer's body kept (and read) at most */
#define WSTORE__HUB_ERROR_BODY_MAX 65536u

/* The limits an import runs with: the caller's, 0 replaced by the
 * default. */
typedef struct wstore__hub_limits {
	uint64_t max_files, max_file_size, max_total_size, max_json_size;
	uint64_t max_pages, max_redirects, min_rate, stall_ms, deadline_ms;
} wstore__hub_limits;

void wstore__hub_limits_of(wstore__hub_limits *l, const wstore_hub_options *o);

/* An endpoint parsed with libcurl's URL API.  Credentials in its URL
 * (user:password@) are taken out: they go to its origin only, and never
 * into a URL that is printed or recorded. */
typedef struct wstore__endpoint {
	char *scheme; /* "http" or "https", lower case */
	char *host;   /* lower case */
	long port;    /* the scheme's default when none is given */
	char *prefix; /* its path without a trailing '/' ("" for none) */
	char *user, *password; /* NULL when the URL had none */
	char *shown;	       /* scheme://host[:port]prefix, no credentials */
} wstore__endpoint;

/* 0, or WSTORE_EINVAL naming what is wrong with url. */
int wstore__endpoint_parse(wstore__endpoint *e, const char *url);
void wstore__endpoint_free(wstore__endpoint *e);

/* 1 when url is on e's origin (scheme, host and port), else 0. */
int wstore__same_origin(const wstore__endpoint *e, const char *url);

/*
 * *out (malloc'ed): e's URL with the path e->prefix, then each of segs
 * (NULL-terminated; each escaped whole, a '/' in it too), then path's
 * '/'-separated segments each escaped (path may be NULL), and query
 * (NULL: none; taken as it is, so never from outside).
 */
int wstore__hub_url(char **out, const wstore__endpoint *e,
		    const char *const *segs, const char *path,
		    const char *query);

/* The rel="next" URL of a Link header's value (v, n bytes, not
 * NUL-terminated) into out (cap bytes): 1, 0 when there is none, -1 when
 * it does not fit (or holds a NUL). */
int wstore__link_next(char *out, size_t cap, const char *v, size_t n);

/* A repository name the Hub would accept, ORG/NAME: 0 or WSTORE_EINVAL
 * naming it. */
int wstore__hub_repo_ok(const char *repo);

/* url with its user:password@ replaced by mask ("" drops it); malloc'ed
 * (NULL: out of memory).  Text that is not a URL is copied. */
char *wstore__url_redact(const char *url, const char *mask);

/* One line of text from outside (a name, a message) made printable:
 * control characters as '?' (malloc'ed, NULL: out of memory). */
char *wstore__printable(const char *s);

#endif
