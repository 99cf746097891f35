/*
 * hubfetch.c - the HTTP client of import from a Hub, over libcurl.
 *
 * Every request goes through one loop (perform_retrying): a try, then by
 * what came back either done, a failure that retrying cannot mend (404,
 * 401/403, a TLS or resolve error, the sink's own error) or another try
 * after a backoff (0.5 s doubling up to 8 s; a 429's Retry-After, at
 * most 60 s): 429, 5xx, a reset, a stall (no byte for stall_timeout_ms),
 * a body cut short.  A file's transfer resumes at the byte it stopped at
 * (Range), its bytes never going to the sink twice.
 *
 * Credentials (the token, or user:password of the endpoint's URL) are
 * set on a request only when its URL is on the endpoint's origin
 * (hubtrust.c); redirects are followed (the Hub sends LFS files to a
 * CDN), at most max_redirects, curl dropping the credentials once one
 * leads to another scheme, host or port, and an https endpoint's
 * requests are never redirected to http.  Every try ends when it moves
 * fewer than min_rate bytes a second over stall_timeout_ms, and the
 * tries of one request end at its deadline (transfer_timeout_ms); an
 * error answer's body is read up to WSTORE__HUB_ERROR_BODY_MAX bytes,
 * a JSON answer's up to max_json_size.  Proxies: curl's defaults
 * (http_proxy, https_proxy, no_proxy, ...); CAs: tls_ca_file, else
 * $CURL_CA_BUNDLE, else $SSL_CERT_FILE, else the system's.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "../common/clock.h"
#include "error.h"
#include "hubfetch.h"
#include "hubtrust.h"
#include "util.h"

#define CONNECT_TIMEOUT_S 10L
#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS 8000
#define RETRY_AFTER_MAX_S 60
/* couldn't connect: few tries, an endpoint that is down says so soon */
#define CONNECT_RETRIES 2u
/* during a transfer, the stop callback is asked at most this often */
#define STOP_ASK_MS 100
/* bytes libcurl receives at a time (CURLOPT_BUFFERSIZE) */
#define RECV_BUFFER (512L << 10)

struct wstore__http {
	CURL *curl;
	const wstore_hub_options *o;
	const wstore__endpoint *ep;
	wstore__hub_limits lim;
	wstore__http_stop stop;
	void *stop_ctx;
	char errbuf[CURL_ERROR_SIZE];
	/* of the last response (its final hop after redirects) */
	char xcode[64], xmsg[256], next[2048];
	long status;
	int64_t range_start; /* Content-Range start, -1 when none */
	uint64_t last_ask;   /* when on_xfer last asked stop (monotonic ms) */
	int stopped;	     /* on_xfer ended the transfer: a stop */
	int link_long;	     /* the Link's next URL did not fit in next */
	int err_cut;	     /* an error answer's body ended at its bound */
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- headers -------------------------------------------------------------
 */

static void copy_value(char *out, size_t cap, const char *v, size_t n)
{
	while (n && (*v == ' ' || *v == '\t'))
		v++, n--;
	while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(out, v, n);
	out[n] = '\0';
}

/* Link: <url>; rel="next" (the Hub's pagination of tree listings) */
static void parse_link(wstore__http *h, const char *v, size_t n)
{
	if (wstore__link_next(h->next, sizeof(h->next), v, n) < 0)
		h->link_long = 1;
}

static int header_is(const char *line, size_t n, const char *name,
		     const char **v, size_t *vn)
{
	size_t k = strlen(name);

	if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
		return 0;
	*v = line + k + 1;
	*vn = n - k - 1;
	return 1;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *ctx)
{
	wstore__http *h = ctx;
	size_t n = size * nitems, vn;
	const char *v;
	char tmp[64];

	if (n >= 5 && !strncmp(line, "HTTP/", 5)) {
		/* a new response (after a redirect): forget the last one's */
		h->xcode[0] = h->xmsg[0] = h->next[0] = '\0';
		h->range_start = -1;
		h->link_long = 0;
	} else if (header_is(line, n, "X-Error-Code", &v, &vn)) {
		copy_value(h->xcode, sizeof(h->xcode), v, vn);
	} else if (header_is(line, n, "X-Error-Message", &v, &vn)) {
		copy_value(h->xmsg, sizeof(h->xmsg), v, vn);
	} else if (header_is(line, n, "Link", &v, &vn)) {
		parse_link(h, v, vn);
	} else if (header_is(line, n, "Content-Range", &v, &vn)) {
		copy_value(tmp, sizeof(tmp), v, vn);
		if (!strncasecmp(tmp, "bytes ", 6))
			h->range_start = strtoll(tmp + 6, NULL, 10);
	}
	return n;
}

/* ---- one client ----------------------------------------------------------
 */

/* Whether to stop: wstore_interrupt was called, or the caller says so. */
static int stop_now(wstore__http *h)
{
	return wstore__interrupted() || (h->stop && h->stop(h->stop_ctx));
}

/*
 * curl calls this during a transfer, also while no byte moves (then about
 * once a second): a stop ends the transfer there, rather than when the
 * upstream answers or the stall timeout runs out.
 */
static int on_xfer(void *ctx, curl_off_t dltotal, curl_off_t dlnow,
		   curl_off_t ultotal, curl_off_t ulnow)
{
	wstore__http *h = ctx;
	uint64_t now = wclock_mono_ms();

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	if (now - h->last_ask < STOP_ASK_MS && !wstore__interrupted())
		return 0;
	h->last_ask = now;
	if (stop_now(h))
		h->stopped = 1;
	return h->stopped;
}

/* The CAs an https server must chain to: the caller's, else the
 * environment's (curl's own variable, then OpenSSL's), else NULL. */
static const char *ca_file(const wstore_hub_options *o)
{
	const char *env;

	if (o->tls_ca_file && *o->tls_ca_file)
		return o->tls_ca_file;
	if ((env = getenv("CURL_CA_BUNDLE")) && *env)
		return env;
	if ((env = getenv("SSL_CERT_FILE")) && *env)
		return env;
	return NULL;
}

static void set_limits(wstore__http *h)
{
	const wstore__hub_limits *l = &h->lim;

	curl_easy_setopt(h->curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h->curl, CURLOPT_MAXREDIRS, (long)l->max_redirects);
	curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	/* an https endpoint is never led to http */
	curl_easy_setopt(h->curl, CURLOPT_REDIR_PROTOCOLS_STR,
			 strcmp(h->ep->scheme, "https") ? "http,https"
							: "https");
	curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
	/* too slow: under min_rate bytes/s over the stall window */
	curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_LIMIT, (long)l->min_rate);
	curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_TIME,
			 (long)((l->stall_ms + 999) / 1000));
	if (ca_file(h->o))
		curl_easy_setopt(h->curl, CURLOPT_CAINFO, ca_file(h->o));
}

int wstore__http_new(wstore__http **out, const wstore_hub_options *o,
		     const wstore__endpoint *ep, wstore__http_stop stop,
		     void *stop_ctx)
{
	wstore__http *h;

	*out = NULL;
	pthread_once(&once, global_init);
	if (global_rc != CURLE_OK)
		return wstore__err(WSTORE_EUNAVAIL, "cannot start libcurl: %s",
				   curl_easy_strerror(global_rc));
	if (!(h = calloc(1, sizeof(*h))) || !(h->curl = curl_easy_init())) {
		free(h);
		return wstore__err(-ENOMEM, "cannot start an HTTP client");
	}
	h->o = o;
	h->ep = ep;
	wstore__hub_limits_of(&h->lim, o);
	h->stop = stop;
	h->stop_ctx = stop_ctx;
	set_limits(h);
	/* a file's bytes in pieces of up to this, not libcurl's 16 KiB:
	 * a 64th of the receive calls, sink calls (hashing, a mirror's
	 * spool writes and wakeups) and polls; the buffer is per handle */
	curl_easy_setopt(h->curl, CURLOPT_BUFFERSIZE, RECV_BUFFER);
	curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, on_xfer);
	curl_easy_setopt(h->curl, CURLOPT_XFERINFODATA, h);
	curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, h);
	curl_easy_setopt(h->curl, CURLOPT_USERAGENT,
			 "wstore/" WSTORE_VERSION " (hub import)");
	/* bytes as stored: no content coding to undo */
	curl_easy_setopt(h->curl, CURLOPT_ACCEPT_ENCODING, NULL);
	*out = h;
	return 0;
}

/* The credentials for url: the endpoint's on its origin, none elsewhere
 * (curl keeps them from a redirect to another origin). */
static void set_auth(wstore__http *h, const char *url)
{
	int ours = wstore__same_origin(h->ep, url);
	const char *tok = h->o->token && *h->o->token ? h->o->token : NULL;

	curl_easy_setopt(h->curl, CURLOPT_XOAUTH2_BEARER, NULL);
	curl_easy_setopt(h->curl, CURLOPT_USERNAME, NULL);
	curl_easy_setopt(h->curl, CURLOPT_PASSWORD, NULL);
	curl_easy_setopt(h->curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
	if (!ours)
		return;
	if (tok) {
		curl_easy_setopt(h->curl, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
		curl_easy_setopt(h->curl, CURLOPT_XOAUTH2_BEARER, tok);
	} else if (h->ep->user) {
		curl_easy_setopt(h->curl, CURLOPT_USERNAME, h->ep->user);
		curl_easy_setopt(h->curl, CURLOPT_PASSWORD,
				 h->ep->password ? h->ep->password : "");
	}
}

void wstore__http_free(wstore__http *h)
{
	if (!h)
		return;
	curl_easy_cleanup(h->curl);
	free(h);
}

/* ---- the retry loop ------------------------------------------------------
 */

enum verdict { DONE, FATAL, RETRY };

/* What to add to curl's error: the http/https mix-ups and the CA
 * setting, as the Redis TLS errors say. */
static const char *hint(const wstore__http *h, CURLcode cc, const char *url)
{
	int https = !strncmp(url, "https:", 6);

	if (cc == CURLE_SSL_CONNECT_ERROR && strstr(h->errbuf, "wrong version"))
		return " (the server does not speak TLS there: an http:// "
		       "endpoint?)";
	if (cc == CURLE_PEER_FAILED_VERIFICATION)
		return " (a private CA? set hub_tls_ca_file or "
		       "CURL_CA_BUNDLE to its PEM file)";
	if (!https &&
	    (cc == CURLE_WEIRD_SERVER_REPLY ||
	     cc == CURLE_UNSUPPORTED_PROTOCOL || cc == CURLE_GOT_NOTHING))
		return " (the server may speak TLS there: an https:// "
		       "endpoint?)";
	if (cc == CURLE_TOO_MANY_REDIRECTS)
		return " (hub_max_redirects)";
	if (cc == CURLE_UNSUPPORTED_PROTOCOL && https)
		return " (an https endpoint is never redirected to http)";
	return "";
}

/* What a finished try means: DONE, FATAL (the last error set) or RETRY
 * (*wait_ms set, the last error saying why). */
static enum verdict judge(wstore__http *h, CURLcode cc, const char *url,
			  unsigned *connect_fails, uint64_t *wait_ms, int *code)
{
	curl_off_t ra = 0;
	char why[512];
	long st = h->status;

	if (cc == CURLE_OK && (st == 200 || st == 206))
		return DONE;
	if (cc == CURLE_OK) {
		snprintf(why, sizeof(why), "HTTP %ld%s%s%s%s", st,
			 h->xcode[0] ? " " : "", h->xcode,
			 h->xmsg[0] ? ": " : "", h->xmsg);
		if (st == 404) {
			*code = wstore__err(WSTORE_ENOTFOUND,
					    "'%s': not found (%s)", url, why);
			return FATAL;
		}
		/* the Hub answers 401 RepoNotFound for a private repository
		 * as for a missing one */
		if (st == 401 || st == 403) {
			*code = wstore__err(
				-EACCES, "'%s': %saccess denied (%s): %s", url,
				strcmp(h->xcode, "RepoNotFound")
					? ""
					: "not found or ",
				why,
				h->o->token && *h->o->token
					? "the server refused the token"
					: "a token is needed (--token-file, "
					  "HF_TOKEN or hub_token_file)");
			return FATAL;
		}
		if (st == 429 || st >= 500) {
			if (st == 429 &&
			    curl_easy_getinfo(h->curl, CURLINFO_RETRY_AFTER,
					      &ra) == CURLE_OK &&
			    ra > 0)
				*wait_ms =
					(uint64_t)(ra < RETRY_AFTER_MAX_S
							   ? ra
							   : RETRY_AFTER_MAX_S) *
					1000;
			wstore__err(WSTORE_EUNAVAIL, "'%s': %s", url, why);
			return RETRY;
		}
		*code = wstore__err(WSTORE_EUNAVAIL, "'%s': unexpected %s", url,
				    why);
		return FATAL;
	}
	*code = wstore__err(WSTORE_EUNAVAIL, "'%s': %s%s", url,
			    h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc),
			    hint(h, cc, url));
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
		return ++*connect_fails > CONNECT_RETRIES ? FATAL : RETRY;
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_GOT_NOTHING:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM: return RETRY;
	default: return FATAL;
	}
}

/* Sleep ms, waking every 100 ms to see whether to stop. */
static int nap(wstore__http *h, uint64_t ms)
{
	while (ms > 0) {
		uint64_t k = ms < 100 ? ms : 100;

		if (stop_now(h))
			return 1;
		wclock_sleep_ms(k);
		ms -= k;
	}
	return stop_now(h);
}

struct attempt {
	int (*prepare)(wstore__http *h, void *ctx); /* before each try */
	/* after a try that came back 200/206: 0 done, 1 retry (cut
	 * short), or a negative code */
	int (*finish)(wstore__http *h, void *ctx);
	int *sink_rc; /* the sink's error, when it stopped the transfer */
	void *ctx;
};

static int perform_retrying(wstore__http *h, const char *url,
			    const struct attempt *a)
{
	unsigned tries = h->o->retries ? h->o->retries : 5, connect_fails = 0;
	uint64_t backoff = BACKOFF_FIRST_MS, start = wclock_mono_ms();

	for (unsigned t = 0;; t++) {
		uint64_t wait = backoff, spent = wclock_mono_ms() - start;
		enum verdict v;
		CURLcode cc;
		int rc, code = WSTORE_EUNAVAIL;

		h->errbuf[0] = '\0';
		h->status = 0;
		if (spent >= h->lim.deadline_ms)
			return wstore__err(
				WSTORE_EUNAVAIL,
				"%s (gave up at the %" PRIu64
				" s deadline, hub_transfer_timeout_ms)",
				wstore_last_error(), h->lim.deadline_ms / 1000);
		if ((rc = a->prepare(h, a->ctx)) < 0)
			return rc;
		curl_easy_setopt(h->curl, CURLOPT_URL, url);
		curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS,
				 (long)(h->lim.deadline_ms - spent));
		set_auth(h, url);
		h->stopped = h->err_cut = 0;
		cc = curl_easy_perform(h->curl);
		curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &h->status);
		if (*a->sink_rc < 0)
			return *a->sink_rc;
		if (cc == CURLE_WRITE_ERROR && h->err_cut)
			cc = CURLE_OK; /* judged by its status */
		if (h->stopped)
			return wstore__err(WSTORE_ECANCELED, "interrupted");
		v = judge(h, cc, url, &connect_fails, &wait, &code);
		if (v == DONE) {
			if ((rc = a->finish(h, a->ctx)) <= 0)
				return rc;
			v = RETRY; /* cut short: the last error says so */
		}
		if (v == FATAL)
			return code;
		if (t >= tries)
			return wstore__err(WSTORE_EUNAVAIL,
					   "%s (gave up after %u tries)",
					   wstore_last_error(), t + 1);
		if (nap(h, wait))
			return wstore__err(WSTORE_ECANCELED, "stopped");
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
						       : backoff * 2;
	}
}

/* ---- a JSON body ---------------------------------------------------------
 */

struct body {
	wstore__http *h;
	const char *url;
	char *p;
	size_t n, cap;
	int rc;
};

/* An error answer's body past its bound: the rest is not read (the
 * answer is judged by its status). */
static int error_body_full(wstore__http *h, uint64_t have, size_t n)
{
	long st = 0;

	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &st);
	if (st / 100 == 2 || have + n <= WSTORE__HUB_ERROR_BODY_MAX)
		return 0;
	h->err_cut = 1;
	return 1;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct body *b = ctx;
	size_t n = size * nmemb;
	uint64_t max = b->h->lim.max_json_size;

	if (error_body_full(b->h, b->n, n))
		return 0;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64 << 10;
		char *p;

		while (cap < b->n + n + 1)
			cap *= 2;
		if (b->n + n > max) {
			b->rc = wstore__err(WSTORE_EINVAL,
					    "'%s': answer larger than %" PRIu64
					    " bytes (hub_max_json_size)",
					    b->url, max);
			return 0;
		}
		if (cap > max + 1)
			cap = (size_t)max + 1;
		if (!(p = realloc(b->p, cap))) {
			b->rc = -ENOMEM;
			return 0;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
	b->p[b->n] = '\0';
	return n;
}

static int body_prepare(wstore__http *h, void *ctx)
{
	struct body *b = ctx;

	b->n = 0;
	curl_easy_setopt(h->curl, CURLOPT_RANGE, NULL);
	curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, b);
	return 0;
}

static int body_finish(wstore__http *h, void *ctx)
{
	(void)h;
	(void)ctx;
	return 0;
}

int wstore__http_get(wstore__http *h, const char *url, char **body, size_t *len,
		     char **next)
{
	struct body b = { .h = h, .url = url };
	struct attempt a = { body_prepare, body_finish, &b.rc, &b };
	int rc = perform_retrying(h, url, &a);

	if (rc == 0 && !b.p && !(b.p = calloc(1, 1)))
		rc = -ENOMEM;
	if (rc == 0 && h->link_long)
		rc = wstore__err(WSTORE_EINVAL,
				 "'%s': its Link header names a next page "
				 "longer than %zu bytes",
				 url, sizeof(h->next) - 1);
	if (rc == 0 && next)
		rc = (*next = h->next[0] ? strdup(h->next) : NULL, 0);
	if (rc < 0) {
		free(b.p);
		return rc;
	}
	*body = b.p;
	*len = b.n;
	return 0;
}

/* ---- a file, resumed -----------------------------------------------------
 */

struct fetch {
	wstore__http *h;
	const char *url;
	uint64_t size, *off;
	uint64_t skip;	  /* bytes of a 200 answer to a ranged GET to drop */
	uint64_t drained; /* bytes of an error answer read */
	int started, ignore, rc;
	wstore__http_sink sink;
	void *ctx;
};

/* The first bytes of a try's body: is it the answer asked for? */
static int start_body(struct fetch *f)
{
	long st = 0;

	f->started = 1;
	f->ignore = 0;
	f->skip = f->drained = 0;
	curl_easy_getinfo(f->h->curl, CURLINFO_RESPONSE_CODE, &st);
	if (st == 200)
		f->skip = *f->off; /* the server ignored the Range */
	else if (st == 206 && f->h->range_start != (int64_t)*f->off)
		return f->rc = wstore__err(
			       WSTORE_EUNAVAIL,
			       "'%s': asked for bytes from %" PRIu64
			       ", the server sent a range from %" PRId64,
			       f->url, *f->off, f->h->range_start);
	else if (st != 206)
		f->ignore = 1; /* an error answer: its body is not the file's */
	return 0;
}

static size_t on_file(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct fetch *f = ctx;
	size_t n = size * nmemb, all = n;

	if (!f->started && start_body(f) != 0)
		return 0;
	if (f->ignore) {
		/* an error answer, drained up to its bound */
		if (error_body_full(f->h, f->drained, n))
			return 0;
		f->drained += n;
		return all;
	}
	if (f->skip) {
		size_t k = f->skip < n ? (size_t)f->skip : n;

		data += k;
		n -= k;
		f->skip -= k;
	}
	if (n > f->size - *f->off) {
		f->rc = wstore__err(
			WSTORE_EVERIFY,
			"'%s': the server sent more than the %" PRIu64
			" bytes it lists",
			f->url, f->size);
		return 0;
	}
	if (n && (f->rc = f->sink(f->ctx, data, n)) < 0)
		return 0;
	*f->off += n;
	return all;
}

static int file_prepare(wstore__http *h, void *ctx)
{
	struct fetch *f = ctx;
	char range[64];

	f->started = 0;
	snprintf(range, sizeof(range), "%" PRIu64 "-", *f->off);
	/* from the start: no Range, as any client asks */
	curl_easy_setopt(h->curl, CURLOPT_RANGE, *f->off ? range : NULL);
	curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_file);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, f);
	return 0;
}

static int file_finish(wstore__http *h, void *ctx)
{
	struct fetch *f = ctx;

	(void)h;
	if (*f->off == f->size)
		return 0;
	wstore__err(WSTORE_EUNAVAIL,
		    "'%s': the transfer ended at byte %" PRIu64 " of %" PRIu64,
		    f->url, *f->off, f->size);
	return 1;
}

int wstore__http_fetch(wstore__http *h, const char *url, uint64_t size,
		       uint64_t *off, wstore__http_sink sink, void *ctx)
{
	struct fetch f = { .h = h,
			   .url = url,
			   .size = size,
			   .off = off,
			   .sink = sink,
			   .ctx = ctx };
	struct attempt a = { file_prepare, file_finish, &f.rc, &f };
	int rc = perform_retrying(h, url, &a);

	curl_easy_setopt(h->curl, CURLOPT_RANGE, NULL);
	return rc;
}
