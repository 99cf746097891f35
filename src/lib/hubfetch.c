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
 * Redirects are followed (the Hub sends LFS files to a CDN); the token
 * goes in as curl's bearer auth, which curl sends to the first host only,
 * never to the host (or port) a redirect leads to.  Proxies: curl's
 * defaults (http_proxy, https_proxy, no_proxy, ...).
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
#include "util.h"

#define CONNECT_TIMEOUT_S 10L
#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS 8000
#define RETRY_AFTER_MAX_S 60
#define JSON_MAX ((size_t)256 << 20)
/* couldn't connect: few tries, an endpoint that is down says so soon */
#define CONNECT_RETRIES 2u
/* during a transfer, the stop callback is asked at most this often */
#define STOP_ASK_MS 100

struct wstore__http {
	CURL *curl;
	const wstore_hub_options *o;
	wstore__http_stop stop;
	void *stop_ctx;
	char errbuf[CURL_ERROR_SIZE];
	/* of the last response (its final hop after redirects) */
	char xcode[64], xmsg[256], next[2048];
	long status;
	int64_t range_start; /* Content-Range start, -1 when none */
	uint64_t last_ask;   /* when on_xfer last asked stop (monotonic ms) */
	int stopped;	     /* on_xfer ended the transfer: a stop */
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
	const char *end = v + n, *lt, *gt;

	for (const char *p = v; p < end; p = gt + 1) {
		if (!(lt = memchr(p, '<', (size_t)(end - p))) ||
		    !(gt = memchr(lt, '>', (size_t)(end - lt))))
			return;
		const char *semi = gt + 1,
			   *comma = memchr(semi, ',', (size_t)(end - semi));
		size_t rest = (size_t)((comma ? comma : end) - semi);

		if (memmem(semi, rest, "rel=\"next\"", 10) &&
		    (size_t)(gt - lt - 1) < sizeof(h->next)) {
			memcpy(h->next, lt + 1, (size_t)(gt - lt - 1));
			h->next[gt - lt - 1] = '\0';
			return;
		}
	}
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

int wstore__http_new(wstore__http **out, const wstore_hub_options *o,
		     wstore__http_stop stop, void *stop_ctx)
{
	wstore__http *h;
	long stall_s = o->stall_timeout_ms
			       ? (long)(o->stall_timeout_ms + 999) / 1000
			       : 30;

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
	h->stop = stop;
	h->stop_ctx = stop_ctx;
	curl_easy_setopt(h->curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h->curl, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h->curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
	/* a stall: under 1 byte/s for stall_s seconds */
	curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_TIME, stall_s);
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
	if (o->token && *o->token) {
		curl_easy_setopt(h->curl, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
		curl_easy_setopt(h->curl, CURLOPT_XOAUTH2_BEARER, o->token);
	}
	*out = h;
	return 0;
}

void wstore__http_free(wstore__http *h)
{
	if (!h)
		return;
	curl_easy_cleanup(h->curl);
	free(h);
}

char *wstore__http_escape(const char *s, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s), k = 0;
	char *out = malloc(3 * n + 1);

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~' || (keep_slash && c == '/')) {
			out[k++] = (char)c;
		} else {
			out[k++] = '%';
			out[k++] = hex[c >> 4];
			out[k++] = hex[c & 15];
		}
	}
	out[k] = '\0';
	return out;
}

/* ---- the retry loop ------------------------------------------------------
 */

enum verdict { DONE, FATAL, RETRY };

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
	*code = wstore__err(WSTORE_EUNAVAIL, "'%s': %s", url,
			    h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc));
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
	uint64_t backoff = BACKOFF_FIRST_MS;

	for (unsigned t = 0;; t++) {
		uint64_t wait = backoff;
		enum verdict v;
		CURLcode cc;
		int rc, code = WSTORE_EUNAVAIL;

		h->errbuf[0] = '\0';
		h->status = 0;
		if ((rc = a->prepare(h, a->ctx)) < 0)
			return rc;
		curl_easy_setopt(h->curl, CURLOPT_URL, url);
		h->stopped = 0;
		cc = curl_easy_perform(h->curl);
		curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &h->status);
		if (*a->sink_rc < 0)
			return *a->sink_rc;
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
	char *p;
	size_t n, cap;
	int rc;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct body *b = ctx;
	size_t n = size * nmemb;

	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64 << 10;
		char *p;

		while (cap < b->n + n + 1)
			cap *= 2;
		if (cap > JSON_MAX) {
			b->rc = wstore__err(WSTORE_EINVAL,
					    "answer larger than %zu bytes",
					    JSON_MAX);
			return 0;
		}
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
	struct body b = { 0 };
	struct attempt a = { body_prepare, body_finish, &b.rc, &b };
	int rc = perform_retrying(h, url, &a);

	if (rc == 0 && !b.p && !(b.p = calloc(1, 1)))
		rc = -ENOMEM;
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
	uint64_t skip; /* bytes of a 200 answer to a ranged GET to drop */
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
	f->skip = 0;
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
	if (f->ignore)
		return all; /* an error answer, drained */
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
