/*
 * hubtrust.c - the trust rules of the Hub client (docs/trust.md):
 *
 * - URLs are built with libcurl's URL API from the endpoint and escaped
 *   segments, never by pasting text: a repository, revision or path from
 *   a caller or an upstream can only ever be a path segment, never a
 *   query, a fragment or another host.
 * - A credential (the token, or user:password in the endpoint's URL)
 *   belongs to the endpoint's origin, scheme + host + port: hubfetch.c
 *   sends it only to a URL for which wstore__same_origin holds.
 * - Every count and size an upstream controls has a limit
 *   (wstore__hub_limits), checked before anything is allocated for it
 *   or stored.
 * - Text from outside printed or recorded is made printable, and URLs
 *   lose their credentials before they are printed or recorded.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "error.h"
#include "hubtrust.h"

#define REPO_PART_MAX 96

void wstore__hub_limits_of(wstore__hub_limits *l, const wstore_hub_options *o)
{
#define OR(v, d) ((v) ? (uint64_t)(v) : (uint64_t)(d))
	l->max_files = OR(o->max_files, WSTORE__HUB_MAX_FILES);
	l->max_file_size = OR(o->max_file_size, WSTORE__HUB_MAX_FILE_SIZE);
	l->max_total_size = OR(o->max_total_size, WSTORE__HUB_MAX_TOTAL_SIZE);
	l->max_json_size = OR(o->max_json_size, WSTORE__HUB_MAX_JSON_SIZE);
	l->max_pages = OR(o->max_pages, WSTORE__HUB_MAX_PAGES);
	l->max_redirects = OR(o->max_redirects, WSTORE__HUB_MAX_REDIRECTS);
	l->min_rate = OR(o->min_rate, WSTORE__HUB_MIN_RATE);
	l->stall_ms = OR(o->stall_timeout_ms, WSTORE__HUB_STALL_MS);
	l->deadline_ms = OR(o->transfer_timeout_ms, WSTORE__HUB_DEADLINE_MS);
#undef OR
}

/* ---- endpoints and origins -----------------------------------------------
 */

static void lower(char *s)
{
	for (; s && *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

/* The part of u (a curl_url_get result) as a malloc'ed string, NULL for
 * none. */
static char *part(CURLU *u, CURLUPart what, unsigned flags)
{
	char *v = NULL, *out;

	if (curl_url_get(u, what, &v, flags) != CURLUE_OK || !v)
		return NULL;
	out = strdup(v);
	curl_free(v);
	return out;
}

static int has_part(CURLU *u, CURLUPart what)
{
	char *v = part(u, what, 0);

	free(v);
	return v != NULL;
}

static int origin_of(CURLU *u, char **scheme, char **host, long *port)
{
	char *p = part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT);

	*scheme = part(u, CURLUPART_SCHEME, 0);
	*host = part(u, CURLUPART_HOST, 0);
	*port = p ? strtol(p, NULL, 10) : 0;
	free(p);
	lower(*scheme);
	lower(*host);
	return *scheme && *host && *port > 0 ? 0 : -1;
}

static int endpoint_fill(wstore__endpoint *e, CURLU *u)
{
	size_t n;

	if (origin_of(u, &e->scheme, &e->host, &e->port) < 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid endpoint: no host in the URL");
	if (strcmp(e->scheme, "http") && strcmp(e->scheme, "https"))
		return wstore__err(WSTORE_EINVAL,
				   "invalid endpoint: an http:// or https:// "
				   "URL");
	e->user = part(u, CURLUPART_USER, CURLU_URLDECODE);
	e->password = part(u, CURLUPART_PASSWORD, CURLU_URLDECODE);
	if (!(e->prefix = part(u, CURLUPART_PATH, 0)))
		return -ENOMEM;
	/* "https://host/" names the same server as "https://host" */
	for (n = strlen(e->prefix); n > 0 && e->prefix[n - 1] == '/'; n--)
		e->prefix[n - 1] = '\0';
	if (curl_url_set(u, CURLUPART_USER, NULL, 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_PASSWORD, NULL, 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_PATH, e->prefix, 0) != CURLUE_OK)
		return -ENOMEM;
	if (!(e->shown = part(u, CURLUPART_URL, 0)))
		return -ENOMEM;
	n = strlen(e->shown);
	if (n > 0 && e->shown[n - 1] == '/')
		e->shown[n - 1] = '\0';
	return 0;
}

int wstore__endpoint_parse(wstore__endpoint *e, const char *url)
{
	CURLU *u = curl_url();
	char *shown = wstore__url_redact(url, "");
	int rc;

	memset(e, 0, sizeof(*e));
	if (!u || !shown) {
		curl_url_cleanup(u);
		free(shown);
		return -ENOMEM;
	}
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    has_part(u, CURLUPART_QUERY) || has_part(u, CURLUPART_FRAGMENT))
		rc = wstore__err(WSTORE_EINVAL,
				 "invalid endpoint '%s': an http:// or "
				 "https:// URL with no query or fragment",
				 shown);
	else if ((rc = endpoint_fill(e, u)) < 0 && rc == WSTORE_EINVAL)
		rc = wstore__err(rc, "%s ('%s')", wstore_last_error(), shown);
	curl_url_cleanup(u);
	free(shown);
	if (rc < 0)
		wstore__endpoint_free(e);
	return rc;
}

void wstore__endpoint_free(wstore__endpoint *e)
{
	free(e->scheme);
	free(e->host);
	free(e->prefix);
	free(e->user);
	free(e->password);
	free(e->shown);
	memset(e, 0, sizeof(*e));
}

int wstore__same_origin(const wstore__endpoint *e, const char *url)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	long port = 0;
	int same = 0;

	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    origin_of(u, &scheme, &host, &port) == 0)
		same = !strcmp(scheme, e->scheme) && !strcmp(host, e->host) &&
		       port == e->port;
	free(scheme);
	free(host);
	curl_url_cleanup(u);
	return same;
}

/* ---- building URLs -------------------------------------------------------
 */

/* Append s escaped (every byte but [A-Za-z0-9._~-]) after a '/'. */
static int add_segment(char **path, size_t *len, const char *s, size_t n)
{
	char *esc = curl_easy_escape(NULL, s, (int)n);
	size_t k = esc ? strlen(esc) : 0;
	char *p = esc ? realloc(*path, *len + k + 2) : NULL;

	if (!p) {
		curl_free(esc);
		return -ENOMEM;
	}
	p[(*len)++] = '/';
	memcpy(p + *len, esc, k + 1);
	*len += k;
	*path = p;
	curl_free(esc);
	return 0;
}

static int build_path(char **out, const wstore__endpoint *e,
		      const char *const *segs, const char *path)
{
	size_t len = strlen(e->prefix);
	char *p = malloc(len + 1);
	int rc = p ? 0 : -ENOMEM;

	if (p)
		memcpy(p, e->prefix, len + 1);
	for (size_t i = 0; rc == 0 && segs && segs[i]; i++)
		rc = add_segment(&p, &len, segs[i], strlen(segs[i]));
	for (const char *s = path; rc == 0 && s && *s;) {
		size_t n = strcspn(s, "/");

		rc = add_segment(&p, &len, s, n);
		s += n + (s[n] == '/');
	}
	if (rc < 0) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

int wstore__hub_url(char **out, const wstore__endpoint *e,
		    const char *const *segs, const char *path,
		    const char *query)
{
	CURLU *u = curl_url();
	char *p = NULL;
	int rc = u ? build_path(&p, e, segs, path) : -ENOMEM;

	*out = NULL;
	if (rc == 0 &&
	    (curl_url_set(u, CURLUPART_SCHEME, e->scheme, 0) != CURLUE_OK ||
	     curl_url_set(u, CURLUPART_HOST, e->host, 0) != CURLUE_OK ||
	     curl_url_set(u, CURLUPART_PATH, p, 0) != CURLUE_OK ||
	     (query &&
	      curl_url_set(u, CURLUPART_QUERY, query, 0) != CURLUE_OK)))
		rc = wstore__err(WSTORE_EINVAL, "cannot build a URL on '%s'",
				 e->shown);
	if (rc == 0) {
		char port[24];
		long dflt = strcmp(e->scheme, "https") ? 80 : 443;

		/* the scheme's own port is left out, as the endpoint did */
		snprintf(port, sizeof(port), "%ld", e->port);
		if (e->port != dflt &&
		    curl_url_set(u, CURLUPART_PORT, port, 0) != CURLUE_OK)
			rc = -ENOMEM;
		if (rc == 0 && !(*out = part(u, CURLUPART_URL, 0)))
			rc = -ENOMEM;
	}
	free(p);
	curl_url_cleanup(u);
	return rc;
}

/* ---- what an answer says --------------------------------------------------
 */

int wstore__link_next(char *out, size_t cap, const char *v, size_t n)
{
	const char *end = v + n, *lt, *gt;

	out[0] = '\0';
	for (const char *p = v; p < end; p = gt + 1) {
		const char *semi, *comma;
		size_t rest, len;

		if (!(lt = memchr(p, '<', (size_t)(end - p))) ||
		    !(gt = memchr(lt, '>', (size_t)(end - lt))))
			return 0;
		semi = gt + 1;
		comma = memchr(semi, ',', (size_t)(end - semi));
		rest = (size_t)((comma ? comma : end) - semi);
		if (!memmem(semi, rest, "rel=\"next\"", 10))
			continue;
		len = (size_t)(gt - lt - 1);
		if (len >= cap || memchr(lt + 1, '\0', len))
			return -1;
		memcpy(out, lt + 1, len);
		out[len] = '\0';
		return 1;
	}
	return 0;
}

/* ---- names and text from outside -----------------------------------------
 */

static int repo_part_ok(const char *s, size_t n)
{
	if (n == 0 || n > REPO_PART_MAX || s[0] == '.' || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!isalnum(c) && c != '.' && c != '_' && c != '-')
			return 0;
		if (c == '.' && i + 1 < n && s[i + 1] == '.')
			return 0;
	}
	return 1;
}

int wstore__hub_repo_ok(const char *repo)
{
	const char *slash = repo ? strchr(repo, '/') : NULL;
	char *shown;
	int rc;

	if (slash && repo_part_ok(repo, (size_t)(slash - repo)) &&
	    repo_part_ok(slash + 1, strlen(slash + 1)))
		return 0;
	shown = wstore__printable(repo ? repo : "");
	rc = wstore__err(WSTORE_EINVAL,
			 "invalid repository '%s': ORG/NAME, each of letters, "
			 "digits, '.', '_' and '-'",
			 shown ? shown : "?");
	free(shown);
	return rc;
}

char *wstore__url_redact(const char *url, const char *mask)
{
	const char *auth = strstr(url, "://"), *end, *at = NULL;
	char *out;
	size_t head, ml = strlen(mask);

	if (!auth)
		return strdup(url);
	auth += 3;
	end = auth + strcspn(auth, "/?#");
	for (const char *p = auth; p < end; p++)
		if (*p == '@')
			at = p;
	if (!at)
		return strdup(url);
	head = (size_t)(auth - url);
	if (!(out = malloc(strlen(url) + ml + 2)))
		return NULL;
	memcpy(out, url, head);
	memcpy(out + head, mask, ml);
	if (ml)
		out[head + ml++] = '@';
	strcpy(out + head + ml, at + 1);
	return out;
}

char *wstore__printable(const char *s)
{
	char *out = strdup(s);

	for (char *p = out; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return out;
}

/* ---- the public API ------------------------------------------------------
 */

int wstore_hub_repo_check(const char *repo)
{
	return wstore__hub_repo_ok(repo);
}

int wstore_url_redact(char **out, const char *url)
{
	*out = url ? wstore__url_redact(url, "***") : NULL;
	return *out ? 0
		    : wstore__err(url ? -ENOMEM : WSTORE_EINVAL,
				  "redact: no URL");
}

int wstore_hub_url(char **out, const char *endpoint, const char *what,
		   const char *repo, const char *revision, const char *path)
{
	wstore__endpoint e;
	const char *rev = revision && *revision ? revision : "main";
	const char *slash = repo ? strchr(repo, '/') : NULL;
	char org[REPO_PART_MAX + 1];
	int rc;

	*out = NULL;
	if (!what || (rc = wstore__hub_repo_ok(repo)) < 0)
		return what ? rc : wstore__err(WSTORE_EINVAL, "hub url: what?");
	memcpy(org, repo, (size_t)(slash - repo));
	org[slash - repo] = '\0';
	if ((rc = wstore__endpoint_parse(
		     &e, endpoint && *endpoint ? endpoint
					       : WSTORE__HUB_DEFAULT)) < 0)
		return rc;
	if (!strcmp(what, "revision") || !strcmp(what, "tree")) {
		const char *segs[] = { "api", "models", org, slash + 1,
				       what,  rev,	NULL };

		rc = wstore__hub_url(out, &e, segs, NULL,
				     *what == 't' ? "recursive=true" : NULL);
	} else if (!strcmp(what, "resolve")) {
		const char *segs[] = { org, slash + 1, "resolve", rev, NULL };

		rc = wstore__hub_url(out, &e, segs, path ? path : "", NULL);
	} else if (!strcmp(what, "info")) {
		const char *segs[] = { "api", "models", org, slash + 1, NULL };

		rc = wstore__hub_url(out, &e, segs, NULL, NULL);
	} else {
		rc = wstore__err(WSTORE_EINVAL, "hub url: unknown part '%s'",
				 what);
	}
	wstore__endpoint_free(&e);
	return rc;
}

/* key's value as a count (1..UINT32_MAX); 0 unset, -1 bad */
static int config_u32(uint32_t *out, const wstore_config *cfg, const char *key)
{
	const char *v = wstore_config_get(cfg, key);
	char *end = NULL;
	unsigned long long n;

	if (!v || !*v)
		return 0;
	n = strtoull(v, &end, 10);
	if (!end || *end || n == 0 || n > UINT32_MAX)
		return wstore__err(WSTORE_EINVAL,
				   "config key '%s' must be a positive "
				   "integer, got '%.40s'",
				   key, v);
	*out = (uint32_t)n;
	return 0;
}

static int config_size(uint64_t *out, const wstore_config *cfg, const char *key)
{
	const char *v = wstore_config_get(cfg, key);
	uint64_t n = 0;

	if (!v || !*v)
		return 0;
	if (wstore_parse_size(&n, v) < 0 || n == 0)
		return wstore__err(WSTORE_EINVAL,
				   "config key '%s' must be a size of 1 byte "
				   "or more, got '%.40s'",
				   key, v);
	*out = n;
	return 0;
}

int wstore_hub_options_from_config(wstore_hub_options *o,
				   const wstore_config *cfg)
{
	uint64_t rate;
	const char *ca;
	int rc = 0;

	if (!o || !cfg)
		return wstore__err(WSTORE_EINVAL, "hub options: no config");
	rate = o->min_rate;
	{
		const struct {
			const char *key;
			uint32_t *v;
		} counts[] = {
			{ "hub_max_files", &o->max_files },
			{ "hub_max_pages", &o->max_pages },
			{ "hub_max_redirects", &o->max_redirects },
			{ "hub_transfer_timeout_ms", &o->transfer_timeout_ms },
		};
		const struct {
			const char *key;
			uint64_t *v;
		} sizes[] = {
			{ "hub_max_file_size", &o->max_file_size },
			{ "hub_max_total_size", &o->max_total_size },
			{ "hub_max_json_size", &o->max_json_size },
			{ "hub_min_rate", &rate },
		};

		for (size_t i = 0; rc == 0 && i < 4; i++)
			rc = config_u32(counts[i].v, cfg, counts[i].key);
		for (size_t i = 0; rc == 0 && i < 4; i++)
			rc = config_size(sizes[i].v, cfg, sizes[i].key);
	}
	if (rc < 0)
		return rc;
	if (rate > UINT32_MAX)
		return wstore__err(WSTORE_EINVAL,
				   "config key 'hub_min_rate' must be at most "
				   "4GiB (per second)");
	o->min_rate = (uint32_t)rate;
	ca = wstore_config_get(cfg, "hub_tls_ca_file");
	if (ca && *ca)
		o->tls_ca_file = ca;
	return 0;
}
