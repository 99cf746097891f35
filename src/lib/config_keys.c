/*
 * config_keys.c - the known configuration keys, each with its type and
 * range, and the one check every value goes through: at `config set`, at
 * load from a file, from the environment and from a front end's flags.
 *
 * Why a table: a value that is wrong in the file used to surface much
 * later (a server that cannot listen, a store URL nobody takes) without
 * the file or the key; now the first reader names both.  Adding a key is
 * one line in keys[] (name, type, range or choices); the type says how it
 * is checked, and integer keys are written back to the file as JSON
 * integers (config.c).
 *
 * Checks that depend on the machine rather than on the value (does the
 * file exist) are made when a value is written into a file (`config set`,
 * wstore__config_check with WSTORE__CHECK_SET), not at load: a reader of
 * /etc/wstore/config.json that may not read the TLS key named there must
 * still be able to load it.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "error.h"
#include "util.h"

enum ktype {
	KT_TEXT,     /* any single line */
	KT_INT,	     /* decimal integer in [min, max] */
	KT_SIZE,     /* a size ("64MiB") in [min, max] bytes */
	KT_SIZE0,    /* a size, or "" (none) */
	KT_CHOICE,   /* one of choices, '|'-separated */
	KT_STORE,    /* a store URL or path (store.c decides) */
	KT_LISTEN,   /* ADDR:PORT, [V6ADDR]:PORT or :PORT, numeric */
	KT_HOSTPORT, /* HOST:PORT, a name or address and a port 1..65535 */
	KT_URL,	     /* an http:// or https:// URL with a host */
	KT_FILE,     /* a file: absolute in a file, existing when set */
};

struct keydef {
	const char *name;
	enum ktype type;
	long long min, max;  /* KT_INT, KT_SIZE */
	const char *choices; /* KT_CHOICE */
	int secret;	     /* never printed (config show/get) */
};

#define GiB (1024LL * 1024 * 1024)

static const struct keydef keys[] = {
	{ "store", KT_STORE },
	{ "master_server_addr", KT_HOSTPORT },
	{ "metadata_server", KT_TEXT },
	{ "protocol", KT_CHOICE, 0, 0, "tcp|rdma" },
	{ "rdma_devices", KT_TEXT },
	{ "local_hostname", KT_TEXT },
	{ "replica_num", KT_INT, 1, 1024 },
	{ "redis_password", KT_TEXT, 0, 0, NULL, 1 },
	{ "redis_tls_ca_file", KT_FILE },
	{ "redis_tls_cert_file", KT_FILE },
	{ "redis_tls_key_file", KT_FILE },
	{ "key_prefix", KT_TEXT },
	{ "connect_timeout_ms", KT_INT, 1, INT32_MAX },
	{ "command_timeout_ms", KT_INT, 1, INT32_MAX },
	{ "mooncake_library", KT_FILE },
	{ "mooncake_log", KT_TEXT },
	{ "serve_listen", KT_LISTEN },
	{ "serve_token", KT_TEXT, 0, 0, NULL, 1 },
	{ "serve_tls_cert", KT_FILE },
	{ "serve_tls_key", KT_FILE },
	{ "serve_tls_key_password_file", KT_FILE },
	{ "serve_upstream_refresh", KT_INT, 1, INT32_MAX },
	{ "quota", KT_SIZE0, 1, INT64_MAX },
	{ "evict", KT_CHOICE, 0, 0, "lru|none" },
	{ "chunk_size", KT_SIZE, 1, 4 * GiB },
	{ "hub_endpoint", KT_URL },
	{ "hub_token_file", KT_FILE },
	{ "hub_tls_ca_file", KT_FILE },
	/* the Hub client's limits (docs/trust.md) */
	{ "hub_max_files", KT_INT, 1, INT32_MAX },
	{ "hub_max_pages", KT_INT, 1, INT32_MAX },
	{ "hub_max_file_size", KT_SIZE, 1, INT64_MAX },
	{ "hub_max_total_size", KT_SIZE, 1, INT64_MAX },
	{ "hub_max_json_size", KT_SIZE, 1, INT64_MAX },
	{ "hub_max_redirects", KT_INT, 1, INT32_MAX },
	{ "hub_min_rate", KT_SIZE, 1, UINT32_MAX },
	{ "hub_transfer_timeout_ms", KT_INT, 1, INT32_MAX },
};

#define NKEYS (sizeof(keys) / sizeof(*keys))

static const char *key_names[NKEYS + 1];
static pthread_once_t key_names_once = PTHREAD_ONCE_INIT;

static void fill_key_names(void)
{
	for (size_t i = 0; i < NKEYS; i++)
		key_names[i] = keys[i].name;
}

const char *const *wstore_config_keys(void)
{
	pthread_once(&key_names_once, fill_key_names);
	return key_names;
}

size_t wstore__config_nkeys(void)
{
	return NKEYS;
}

int wstore__config_key_index(const char *key)
{
	for (size_t i = 0; key && i < NKEYS; i++)
		if (strcmp(keys[i].name, key) == 0)
			return (int)i;
	return -1;
}

const char *wstore__config_key_name(size_t i)
{
	return i < NKEYS ? keys[i].name : NULL;
}

int wstore__config_key_is_int(size_t i)
{
	return i < NKEYS && keys[i].type == KT_INT;
}

int wstore__config_key_takes_int(const char *key)
{
	int i = wstore__config_key_index(key);

	return i >= 0 && (keys[i].type == KT_INT || keys[i].type == KT_SIZE ||
			  keys[i].type == KT_SIZE0);
}

int wstore__config_key_is_secret(const char *key)
{
	int i = wstore__config_key_index(key);

	return i >= 0 && keys[i].secret;
}

/* "host:6379" or "[::1]:6379": a server address given where a store URL
 * belongs; as a path it would silently become a directory of that name. */
static int looks_like_address(const char *v)
{
	const char *colon = strrchr(v, ':');
	const char *p;

	if (!colon || colon == v || !colon[1] || strchr(v, '/'))
		return 0;
	for (p = colon + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return 0;
	if (v[0] == '[')
		return colon[-1] == ']';
	for (p = v; p < colon; p++)
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' &&
		    *p != '_')
			return 0;
	return 1;
}

/*
 * A store URL of a known scheme, or a path (no "://").  The schemes are
 * named here as text, not taken from the backends' table
 * (backends/table.c): the configuration is read below the backends, which
 * read it; a new scheme is added to both.  "mem" and "fault+" are the
 * tests' (their library alone opens them; the installed one says
 * "unknown store URL" when the store is opened).
 */
static int store_url_ok(const char *v)
{
	static const char *const schemes[] = {
		"file://",	 "redis://",	     "rediss://",
		"redis+unix://", "redis-cluster://", "rediss-cluster://",
		"mooncake://",	 "mem://",	     NULL,
	};

	if (!*v)
		return 0;
	if (strncmp(v, "fault+", 6) == 0)
		return store_url_ok(v + 6);
	if (!strcmp(v, "mem") || !strcmp(v, "mooncake") || !strstr(v, "://"))
		return 1;
	for (size_t i = 0; schemes[i]; i++)
		if (strncmp(v, schemes[i], strlen(schemes[i])) == 0)
			return 1;
	return 0;
}

/* ---- the checks by type: NULL, or what is wrong ------------------------ */

static const char *int_bad(const char *v, const struct keydef *k, char *why,
			   size_t cap)
{
	long long n = 0;

	for (size_t i = 0; v[i]; i++) {
		if (!isdigit((unsigned char)v[i]) || i >= 18)
			goto bad;
		n = n * 10 + (v[i] - '0');
	}
	if (!*v || (v[0] == '0' && v[1]) || n < k->min || n > k->max)
		goto bad;
	return NULL;
bad:
	snprintf(why, cap, "must be a positive integer from %lld to %lld",
		 k->min, k->max);
	return why;
}

static const char *size_bad(const char *v, const struct keydef *k, char *why,
			    size_t cap)
{
	uint64_t n = 0;

	if (k->type == KT_SIZE0 && !*v)
		return NULL;
	if (wstore_parse_size(&n, v) == 0 && n >= (uint64_t)k->min &&
	    n <= (uint64_t)k->max)
		return NULL;
	if (k->max == INT64_MAX) {
		snprintf(why, cap, "must be a size such as 100GiB");
	} else {
		char most[32];

		wstore_format_size(most, sizeof(most), (uint64_t)k->max);
		snprintf(why, cap,
			 "must be a size from %lld byte to %s (e.g. 64MiB)",
			 k->min, most);
	}
	return why;
}

static const char *choice_bad(const char *v, const struct keydef *k, char *why,
			      size_t cap)
{
	size_t n = strlen(v);
	const char *c = k->choices;

	while (n && c) {
		if (strncmp(c, v, n) == 0 && (c[n] == '|' || !c[n]))
			return NULL;
		c = strchr(c, '|');
		c = c ? c + 1 : NULL;
	}
	/* "must be 'a', 'b' or 'c'" */
	size_t off = (size_t)snprintf(why, cap, "must be '");
	for (c = k->choices; *c && off + 8 < cap; c++) {
		if (*c != '|') {
			why[off++] = *c;
			continue;
		}
		off += (size_t)snprintf(why + off, cap - off, "'%s'",
					strchr(c + 1, '|') ? ", " : " or ");
	}
	snprintf(why + off, cap - off, "'");
	return why;
}

/* A port: 1..65535, or 0 too with zero_ok; *end is the text after it. */
static int port_ok(const char *p, int zero_ok)
{
	long n = 0;

	if (!*p)
		return 0;
	for (; *p; p++) {
		if (!isdigit((unsigned char)*p) || n > 65535)
			return 0;
		n = n * 10 + (*p - '0');
	}
	return n <= 65535 && (n > 0 || zero_ok);
}

static const char *listen_bad(const char *v, char *why, size_t cap)
{
	const char *colon = strrchr(v, ':');
	char host[64];
	unsigned char a[16];
	size_t hl;

	snprintf(why, cap,
		 "must be ADDR:PORT, [V6ADDR]:PORT or :PORT "
		 "(a numeric address, a port 0..65535)");
	if (!colon || !port_ok(colon + 1, 1))
		return why;
	hl = (size_t)(colon - v);
	if (hl == 0)
		return NULL;
	if (hl >= sizeof(host))
		return why;
	memcpy(host, v, hl);
	host[hl] = '\0';
	if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
		host[hl - 1] = '\0';
		return inet_pton(AF_INET6, host + 1, a) == 1 ? NULL : why;
	}
	return inet_pton(AF_INET, host, a) == 1 ? NULL : why;
}

static const char *hostport_bad(const char *v, char *why, size_t cap)
{
	const char *colon = strrchr(v, ':');

	snprintf(why, cap, "must be HOST:PORT (a port 1..65535)");
	if (!colon || colon == v || !port_ok(colon + 1, 0))
		return why;
	for (const char *p = v; p < colon; p++)
		if (!isalnum((unsigned char)*p) && !strchr(".-_[]:", *p))
			return why;
	return NULL;
}

static const char *url_bad(const char *v, char *why, size_t cap)
{
	const char *host = NULL;

	if (strncmp(v, "https://", 8) == 0)
		host = v + 8;
	else if (strncmp(v, "http://", 7) == 0)
		host = v + 7;
	if (host && *host && *host != '/' && !strpbrk(v, " \t"))
		return NULL;
	snprintf(why, cap, "must be an http:// or https:// URL with a host");
	return why;
}

/* The file named by a value being set: it must be there. */
static const char *file_bad(const char *v, int setting, int from_file,
			    char *why, size_t cap)
{
	struct stat st;

	if (!*v) {
		snprintf(why, cap, "must name a file");
		return why;
	}
	if (from_file && v[0] != '/') {
		snprintf(why, cap, "must be an absolute path");
		return why;
	}
	if (setting && stat(v, &st) < 0) {
		snprintf(why, cap, "names a file that %s",
			 errno == ENOENT ? "does not exist"
					 : "cannot be reached");
		return why;
	}
	if (setting && S_ISDIR(st.st_mode)) {
		snprintf(why, cap, "names a directory, not a file");
		return why;
	}
	return NULL;
}

static const char *type_bad(const struct keydef *k, const char *v, unsigned how,
			    char *why, size_t cap)
{
	if (strpbrk(v, "\n\r")) {
		snprintf(why, cap, "must be a single line");
		return why;
	}
	switch (k->type) {
	case KT_INT: return int_bad(v, k, why, cap);
	case KT_SIZE:
	case KT_SIZE0: return size_bad(v, k, why, cap);
	case KT_CHOICE: return choice_bad(v, k, why, cap);
	case KT_LISTEN: return listen_bad(v, why, cap);
	case KT_HOSTPORT: return hostport_bad(v, why, cap);
	case KT_URL: return url_bad(v, why, cap);
	case KT_FILE:
		return file_bad(v, how & WSTORE__CHECK_SET,
				how & WSTORE__CHECK_FILE, why, cap);
	case KT_STORE:
	case KT_TEXT: break;
	}
	return NULL;
}

int wstore__config_check(const char *ctx, const char *key, const char *value,
			 unsigned how)
{
	int i = wstore__config_key_index(key);
	const char *bad;
	char why[512];

	if (i < 0)
		return wstore__err(WSTORE_EINVAL, "%sunknown %skey '%.80s'",
				   ctx, *ctx ? "" : "config ", key ? key : "");
	if (!value)
		return 0;
	if (keys[i].type == KT_STORE && looks_like_address(value))
		return wstore__err(
			WSTORE_EINVAL,
			"%s%skey 'store': '%.200s' is a server "
			"address, not a store URL: write "
			"redis://%.200s (or redis-cluster://, "
			"mooncake://; file://%.200s for a directory)",
			ctx, *ctx ? "" : "config ", value, value, value);
	if (keys[i].type == KT_STORE && !store_url_ok(value))
		return wstore__err(
			WSTORE_EINVAL,
			"%s%skey 'store': unknown store URL '%.200s': "
			"expected a directory, file://, redis://, "
			"rediss://, redis+unix://, redis-cluster://, "
			"rediss-cluster:// or mooncake://",
			ctx, *ctx ? "" : "config ", value);
	if (!(bad = type_bad(&keys[i], value, how, why, sizeof(why))))
		return 0;
	if (keys[i].secret)
		return wstore__err(WSTORE_EINVAL, "%s%skey '%s' %s", ctx,
				   *ctx ? "" : "config ", key, bad);
	return wstore__err(WSTORE_EINVAL, "%s%skey '%s' %s, got '%.80s'", ctx,
			   *ctx ? "" : "config ", key, bad, value);
}
