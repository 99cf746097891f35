/*
 * server.c - the HTTP daemon of `wstore serve`: listening socket, request
 * routing, bearer-token check, access log and a clean shutdown.
 *
 * Why libmicrohttpd: it is a small, long-maintained C library (GNU,
 * packaged in Debian as libmicrohttpd-dev) that does the HTTP/1.1 parsing,
 * keep-alive, HEAD and chunk-free Content-Length responses for us, and it
 * has the two body sources this server needs: a response from a file
 * descriptor at an offset, which it sends with sendfile(2) (zero copy from
 * the embedded store's chunk files), and a callback response that pulls a
 * bounded block at a time (every other backend, and files that span
 * several chunks).  Its thread-per-connection mode lets a callback block
 * on a network backend without stalling other clients.
 *
 * With --tls-cert and --tls-key the daemon speaks HTTPS (libmicrohttpd's
 * GnuTLS, the material checked by tls.c before listening); a file
 * descriptor response is then read and encrypted by the library rather
 * than sent with sendfile(2), and a TLS handshake has the header timeout.
 *
 * Paths are routed undecoded (libmicrohttpd's own unescaping is turned
 * off) so that a revision sent as "refs%2Fpr%2F1" stays one segment; each
 * part is percent-decoded here.  Routes:
 *   /healthz, /metrics
 *   /api/models/{repo}[/revision/{rev}]
 *   /api/models/{repo}/tree/{rev}[/{path}]
 *   /api/models/{repo}/paths-info/{rev}          (POST)
 *   /{repo}/resolve/{rev}/{path}, /{repo}/raw/{rev}/{path}
 * where {repo} is one segment (a checkpoint id or a model id without an
 * organisation) or two ("org/name").
 *
 * Clients that never finish: a client address holds at most
 * max_per_client connections, and a connection silent for header_timeout
 * seconds before its headers are in is closed (on_request raises the
 * timeout to BODY_TIMEOUT once they are, on_completed lowers it again for
 * the next request of a kept-alive connection).  When a connection takes
 * the last of max_connections, the connection idle the longest (no
 * request under way) is closed (slots.c), so idle sockets from any number
 * of addresses never keep a new client out; when every connection has a
 * request under way, new clients wait in the listen backlog.
 *
 * Shutdown: the main thread waits for SIGTERM, SIGINT or SIGHUP (blocked
 * in every thread), then stops accepting (MHD_quiesce_daemon) and closes
 * the listening socket at once, so new connections are refused rather
 * than queued; waits until no request is in flight (bounded by
 * drain_seconds; a request arriving meanwhile on a kept-alive connection
 * gets 503 and "Connection: close") and stops the daemon, which closes
 * idle keep-alive connections.  Imports from the upstream under way
 * (--upstream) are canceled at once rather than drained.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "../common/frontend.h"
#include "../common/notify.h"
#include "http.h"

#define BODY_MAX (1u << 20)
/* Inactivity allowed while a request is served (headers received): a
 * client reading a large body slowly, or a store slow to answer. */
#define BODY_TIMEOUT 300u

void wreq_unref(struct wreq *r)
{
	if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
		return;
	wck_put(r->sv->cache, r->hold);
	free(r->url);
	free(r->ckpt);
	free(r->body);
	free(r);
}

/* ---- replies ------------------------------------------------------------ */

enum MHD_Result wreply(struct MHD_Connection *c, struct wreq *r,
		       unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	r->status = status;
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* A JSON response (taking j), or NULL; r->whole_len is its length. */
static struct MHD_Response *json_response(struct wreq *r, json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	struct MHD_Response *resp;

	json_decref(j);
	if (!text)
		return NULL;
	r->whole_len = strlen(text);
	resp = MHD_create_response_from_buffer(strlen(text), text,
					       MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return NULL;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	return resp;
}

enum MHD_Result wreply_json(struct MHD_Connection *c, struct wreq *r,
			    unsigned status, json_t *j)
{
	return wreply(c, r, status, json_response(r, j));
}

enum MHD_Result wreply_error(struct MHD_Connection *c, struct wreq *r,
			     unsigned status, const char *code, const char *msg)
{
	/* messages quote request text, which may be anything: escaped, it
	 * is valid UTF-8 for JSON and one line for a header */
	char *safe = wescape(msg, 1);
	struct MHD_Response *resp =
		safe ? json_response(r, json_pack("{s:s}", "error", safe))
		     : NULL;

	if (!resp) {
		free(safe);
		return MHD_NO;
	}
	if (code)
		MHD_add_response_header(resp, "X-Error-Code", code);
	if (strlen(safe) > 500)
		strcpy(safe + 497, "...");
	MHD_add_response_header(resp, "X-Error-Message", safe);
	free(safe);
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
		MHD_add_response_header(resp, "Retry-After", "1");
	if (atomic_load(&r->sv->stopping))
		MHD_add_response_header(resp, "Connection", "close");
	return wreply(c, r, status, resp);
}

/* ---- URLs --------------------------------------------------------------- */

char *wquery(struct MHD_Connection *c, const char *name)
{
	const char *v =
		MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);

	if (!v)
		return NULL;
	/* libmicrohttpd has made '+' a blank already (form encoding),
	 * before any %XX is decoded: "%2B" stays a '+' */
	return wurl_decode(v, strlen(v));
}

int wquery_true(struct MHD_Connection *c, const char *name)
{
	char *v = wquery(c, name);
	int t = v && (!strcasecmp(v, "true") || !strcmp(v, "1"));

	free(v);
	return t;
}

/* Keep URLs as received: every part is decoded after splitting. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls;
	(void)c;
	return strlen(s);
}

/* ---- routing ------------------------------------------------------------ */

static enum MHD_Result method_not_allowed(struct MHD_Connection *c,
					  struct wreq *r)
{
	return wreply_error(c, r, MHD_HTTP_METHOD_NOT_ALLOWED, NULL,
			    "method not allowed");
}

static enum MHD_Result route_repo(struct MHD_Connection *c, struct wreq *r,
				  const char *rest, int api, int post)
{
	struct wtarget t;
	enum wverb verb;
	enum MHD_Result ret;
	int rc = wparse_target(&t, &verb, rest, api);

	if (rc == WPARSE_BAD_ESCAPE)
		return wreply_error(c, r, MHD_HTTP_BAD_REQUEST, NULL,
				    "malformed percent-encoding in the URL");
	if (rc < 0)
		return wreply_error(c, r, MHD_HTTP_NOT_FOUND, NULL,
				    "no such endpoint");
	if ((verb == WVERB_PATHS_INFO) != !!post)
		ret = method_not_allowed(c, r);
	else if (verb == WVERB_INFO)
		ret = wapi_info(c, r, &t);
	else if (verb == WVERB_TREE)
		ret = wapi_tree(c, r, &t);
	else if (verb == WVERB_PATHS_INFO)
		ret = wapi_paths_info(c, r, &t);
	else if (verb == WVERB_REFS)
		ret = wapi_refs(c, r, &t);
	else if (!t.path || !*t.path)
		ret = wreply_error(c, r, MHD_HTTP_NOT_FOUND, "EntryNotFound",
				   "no file named");
	else
		ret = wfiles_resolve(c, r, &t, verb == WVERB_RAW);
	wtarget_free(&t);
	return ret;
}

/*
 * Is the Authorization header "Bearer <token>"?  The two are compared as
 * SHA-256 digests with CRYPTO_memcmp, so the time taken depends neither
 * on where they first differ nor on the token's length (a plain compare
 * stops at the first difference, or at once when the lengths differ).
 */
static int authorized(struct MHD_Connection *c, const unsigned char *want)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    "Authorization");
	unsigned char got[SHA256_DIGEST_LENGTH];

	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return 0;
	SHA256((const unsigned char *)h + 7, strlen(h + 7), got);
	return CRYPTO_memcmp(got, want, sizeof(got)) == 0;
}

static enum MHD_Result route(struct MHD_Connection *c, struct wreq *r,
			     const char *url)
{
	int get = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
	int post = !strcmp(r->method, "POST");

	if (atomic_load(&r->sv->stopping))
		/* a request on a kept-alive connection after SIGTERM */
		return wreply_error(c, r, MHD_HTTP_SERVICE_UNAVAILABLE, NULL,
				    "the server is stopping");
	if (!strcmp(url, "/healthz") && get) {
		struct MHD_Response *resp = MHD_create_response_from_buffer(
			3, (void *)"ok\n", MHD_RESPMEM_PERSISTENT);

		return wreply(c, r, MHD_HTTP_OK, resp);
	}
	if (r->sv->o->token && !authorized(c, r->sv->token_sha))
		/* the code the Hub sends with a 401: without one, 0.x
		 * clients report a connection problem */
		return wreply_error(c, r, MHD_HTTP_UNAUTHORIZED, "RepoNotFound",
				    "Invalid credentials in Authorization "
				    "header: missing or wrong bearer token");
	if (!get && !post)
		return wreply_error(c, r, MHD_HTTP_METHOD_NOT_ALLOWED, NULL,
				    "method not allowed");
	if (!strcmp(url, "/metrics") && get)
		return wmetrics_reply(c, r);
	if (!strncmp(url, "/api/models/", 12))
		return route_repo(c, r, url + 12, 1, post);
	if (post)
		return method_not_allowed(c, r);
	if (url[0] == '/' && url[1])
		return route_repo(c, r, url + 1, 0, 0);
	return wreply_error(c, r, MHD_HTTP_NOT_FOUND, NULL, "no such endpoint");
}

/* The connection's slot (slots.c), NULL when it is not tracked. */
static void *slot_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct wserve *sv = cls;
	struct wreq *r = *con_cls;

	(void)version;
	if (!r) {
		if (!(r = calloc(1, sizeof(*r))))
			return MHD_NO;
		atomic_init(&r->refs, 1);
		atomic_init(&r->failed, 0);
		r->sv = sv;
		r->start = wclock_mono_s();
		snprintf(r->method, sizeof(r->method), "%s", method);
		r->url = strdup(url);
		*con_cls = r;
		atomic_fetch_add(&sv->m.inflight, 1);
		wslots_busy(&sv->slots, slot_of(c), 1);
		/* the headers are in: from now on the body's timeout */
		MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
					  BODY_TIMEOUT);
		return MHD_YES;
	}
	if (*upload_size) {
		/* only paths-info has a body; keep at most BODY_MAX */
		if (r->body_len + *upload_size > BODY_MAX) {
			r->body_too_big = 1;
		} else {
			char *nb = realloc(r->body,
					   r->body_len + *upload_size + 1);

			if (!nb)
				return MHD_NO;
			memcpy(nb + r->body_len, upload, *upload_size);
			r->body = nb;
			r->body_len += *upload_size;
			r->body[r->body_len] = '\0';
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->body_too_big)
		return wreply_error(c, r, MHD_HTTP_CONTENT_TOO_LARGE, NULL,
				    "request body too large");
	return route(c, r, url);
}

static void log_request(struct wserve *sv, struct MHD_Connection *c,
			const struct wreq *r, uint64_t bytes, int broken)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char addr[INET6_ADDRSTRLEN] = "-";
	char *url = wescape(r->url ? r->url : "-", 0),
	     *m = wescape(r->method, 0);

	if (ci && ci->client_addr) {
		const struct sockaddr *sa = ci->client_addr;

		if (sa->sa_family == AF_INET)
			inet_ntop(AF_INET,
				  &((const struct sockaddr_in *)sa)->sin_addr,
				  addr, sizeof(addr));
		else if (sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6,
				  &((const struct sockaddr_in6 *)sa)->sin6_addr,
				  addr, sizeof(addr));
	}
	pthread_mutex_lock(&sv->log_mu);
	fprintf(stderr, "%s %s %s %u %llu %.1fms%s%s%s\n", addr, m ? m : "-",
		url ? url : "-", r->status, (unsigned long long)bytes,
		(wclock_mono_s() - r->start) * 1000.0,
		broken ? " (incomplete)" : "", r->mirror ? " mirror=" : "",
		r->mirror ? r->mirror : "");
	pthread_mutex_unlock(&sv->log_mu);
	free(url);
	free(m);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct wserve *sv = cls;
	struct wreq *r = *con_cls;
	uint64_t bytes;
	int broken;

	if (!r)
		return;
	broken = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK;
	bytes = atomic_load(&r->bytes);
	/* a buffer or fd response is sent by the library: all of it, or
	 * an unknown part */
	if (r->whole_len && !broken && strcmp(r->method, "HEAD") != 0)
		bytes += r->whole_len;
	wmetrics_request(&sv->m, r->status, bytes, r->ckpt,
			 atomic_load(&r->failed));
	if (sv->o->access_log)
		log_request(sv, c, r, bytes, broken);
	atomic_fetch_sub(&sv->m.inflight, 1);
	*con_cls = NULL;
	wreq_unref(r);
	wslots_busy(&sv->slots, slot_of(c), 0);
	/* a kept-alive connection waits for the next headers: their
	 * timeout again */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
				  sv->header_timeout);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **sctx,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct wserve *sv = cls;
	const union MHD_ConnectionInfo *ci;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		atomic_fetch_add(&sv->m.connections, 1);
		ci = MHD_get_connection_info(c,
					     MHD_CONNECTION_INFO_CONNECTION_FD);
		*sctx = ci ? wslots_add(&sv->slots, ci->connect_fd) : NULL;
	} else {
		atomic_fetch_sub(&sv->m.connections, 1);
		wslots_remove(&sv->slots, *sctx);
		*sctx = NULL;
	}
}

/* ---- listening ------------------------------------------------------------
 */

/* Parse "ADDR:PORT", "[V6]:PORT" or ":PORT" and bind a listening socket;
 * prints why on failure. */
static int listen_on(const char *spec, char *shown, size_t cap)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	const char *colon = strrchr(spec, ':');
	char host[128], *end;
	long port;
	int fd, one = 1;
	socklen_t sl;

	if (!colon || (size_t)(colon - spec) >= sizeof(host))
		goto bad;
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 0 || port > 65535)
		goto bad;
	if (host[0] == '[') {
		size_t hl = strlen(host);

		if (hl < 3 || host[hl - 1] != ']')
			goto bad;
		host[hl - 1] = '\0';
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
			goto bad;
		sl = sizeof(*s6);
	} else {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		if (!host[0])
			s4->sin_addr.s_addr = htonl(INADDR_ANY);
		else if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			goto bad;
		sl = sizeof(*s4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		wfront_err("cannot listen on '%s': %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (ss.ss_family == AF_INET6)
		snprintf(shown, cap, "[%s]:%u", host + 1,
			 (unsigned)ntohs(s6->sin6_port));
	else
		snprintf(shown, cap, "%s:%u", host[0] ? host : "0.0.0.0",
			 (unsigned)ntohs(s4->sin_port));
	return fd;
bad:
	wfront_err("invalid listen address '%s': expected ADDR:PORT, "
		   "[V6ADDR]:PORT or :PORT",
		   spec);
	return -1;
}

/* libmicrohttpd's own messages (a client that hung up, a bad request
 * line, a connection refused at a limit), marked as the server's.  The
 * same message again within a second is counted, not printed: a flood
 * of refused connections makes one line a second, not one each. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct wserve *sv = cls;
	char msg[sizeof(sv->log_last)];
	double now = wclock_mono_s();
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	pthread_mutex_lock(&sv->log_mu);
	if (!strcmp(msg, sv->log_last) && now < sv->log_at + 1.0) {
		sv->log_repeats++;
	} else {
		if (sv->log_repeats)
			fprintf(stderr,
				"wstore serve: (%lu more of the last)\n",
				sv->log_repeats);
		fprintf(stderr, "wstore serve: %s\n", msg);
		memcpy(sv->log_last, msg, sizeof(msg));
		sv->log_at = now;
		sv->log_repeats = 0;
	}
	pthread_mutex_unlock(&sv->log_mu);
}

static void drain(struct wserve *sv)
{
	double until = wclock_mono_s() + sv->o->drain_seconds;

	while (atomic_load(&sv->m.inflight) > 0 && wclock_mono_s() < until)
		wclock_sleep_ms(20);
}

/* The daemon, listening on fd (which it takes over on success); with
 * TLS when sv->tls holds a certificate and key. */
static struct MHD_Daemon *start_daemon(struct wserve *sv, int fd)
{
	const struct wserve_options *o = sv->o;
	unsigned max = o->max_connections ? o->max_connections : 256u;
	unsigned per = o->max_per_client ? o->max_per_client : (max + 3) / 4;
	struct MHD_OptionItem tls[4] = { { MHD_OPTION_END, 0, NULL } };
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
			 MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
			 MHD_USE_ERROR_LOG;
	int n = 0;

	if (sv->tls.on) {
		flags |= MHD_USE_TLS;
		tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT,
						    0, sv->tls.cert };
		tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0,
						    sv->tls.key };
		if (sv->tls.password)
			tls[n++] = (struct MHD_OptionItem){
				MHD_OPTION_HTTPS_KEY_PASSWORD, 0,
				sv->tls.password
			};
		tls[n] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	}
	/* the logger first: options before it would log through the
	 * library's default logger (it says so at every start) */
	wslots_init(&sv->slots, max);
	return MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, sv,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, sv,
		MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_UNESCAPE_CALLBACK,
		no_unescape, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
		sv, MHD_OPTION_NOTIFY_CONNECTION, on_connection, sv,
		/* the last slot taken frees one (slots.c) */
		MHD_OPTION_CONNECTION_LIMIT, max,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, per,
		/* until its headers are in, a connection has header_timeout
		 * seconds of silence; then BODY_TIMEOUT (on_request) */
		MHD_OPTION_CONNECTION_TIMEOUT, sv->header_timeout,
		MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
}

/* Wait for SIGTERM, SIGINT or SIGHUP (a closed terminal), sweeping the
 * resolution cache every second meanwhile (an idle checkpoint's lease
 * ends about cache_seconds after its last request), and the connection
 * slots every quarter of a second (slots.c: a slot freed when all are
 * taken and one is idle). */
static void wait_for_stop(struct wserve *sv, const sigset_t *sigs)
{
	struct timespec tick = { 0, 250000000 };
	int sig;

	for (unsigned n = 1;; n++) {
		sig = sigtimedwait(sigs, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
			return;
		if (sig < 0 && errno != EAGAIN && errno != EINTR)
			return;
		wslots_sweep(&sv->slots);
		if (n % 4)
			continue;
		wcache_sweep(sv->cache);
		wmirror_sweep(sv->mirror);
	}
}

/* Free what wserve_run set up (the daemon aside). */
static void teardown(struct wserve *sv)
{
	wcache_free(sv->cache);
	wmirror_free(sv->mirror);
	wmetrics_free(&sv->m);
	pthread_mutex_destroy(&sv->log_mu);
	wtls_free(&sv->tls);
}

int wserve_run(wstore_store *store, const struct wserve_options *o)
{
	struct wserve sv = { .store = store, .o = o };
	struct MHD_Daemon *d;
	char shown[192];
	sigset_t sigs;
	int fd;

	wfront_stop_signals(&sigs);
	sigaddset(&sigs, SIGPIPE);
	/* the server's threads inherit the mask; only sigtimedwait sees
	 * these */
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	/* the certificate and key before the socket: a bad one is an
	 * error before anything listens */
	if (wtls_load(&sv.tls, o))
		return 1;
	if ((fd = listen_on(o->listen, shown, sizeof(shown))) < 0) {
		wtls_free(&sv.tls);
		return 1;
	}
	if (o->token)
		SHA256((const unsigned char *)o->token, strlen(o->token),
		       sv.token_sha);
	sv.header_timeout = o->header_timeout ? o->header_timeout : 10u;
	atomic_init(&sv.stopping, 0);
	wmetrics_init(&sv.m);
	pthread_mutex_init(&sv.log_mu, NULL);
	if (!(sv.cache = wcache_new(store, o->cache_seconds)) ||
	    (o->upstream &&
	     !(sv.mirror = wmirror_new(o, store, sv.header_timeout)))) {
		close(fd);
		teardown(&sv);
		return 1;
	}
	wcache_set_mirror(sv.cache, sv.mirror);
	if (!(d = start_daemon(&sv, fd))) {
		wfront_err("cannot start the HTTP%s server on '%s'",
			   sv.tls.on ? "S" : "", shown);
		close(fd);
		teardown(&sv);
		return 1;
	}
	fprintf(stderr, "wstore serve: listening on %s://%s (store: %s)\n",
		sv.tls.on ? "https" : "http", shown,
		wstore_backend_name(store));
	if (o->upstream) {
		char *up = NULL;

		/* never a password of the upstream's URL in the log */
		wstore_url_redact(&up, o->upstream);
		fprintf(stderr, "wstore serve: mirror of %s\n", up ? up : "?");
		free(up);
	}
	wstore_notify("READY=1"); /* a Type=notify unit: listening now */
	wait_for_stop(&sv, &sigs);
	fprintf(stderr, "wstore serve: stopping: finishing %d request(s)\n",
		atomic_load(&sv.m.inflight));
	wstore_notify("STOPPING=1");
	/* stop listening at once: a new connection is refused, not left in
	 * the backlog until the drain ends */
	atomic_store(&sv.stopping, 1);
	/* an import from the upstream would hold the drain for as long as
	 * the upstream takes: canceled, its clients get the error */
	wmirror_stop(sv.mirror);
	fd = MHD_quiesce_daemon(d);
	if (fd >= 0)
		close(fd);
	drain(&sv);
	MHD_stop_daemon(d);
	wslots_destroy(&sv.slots);
	teardown(&sv);
	fprintf(stderr, "wstore serve: stopped\n");
	return 0;
}
