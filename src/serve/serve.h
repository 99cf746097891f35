/*
 * serve.h - `wstore serve`: a read-only HTTP server that speaks the
 * download side of the Hugging Face Hub protocol from a wstore store, so
 * that any Hub client (huggingface_hub, transformers, vLLM, SGLang, the JS
 * client) loads checkpoints with HF_ENDPOINT pointed at it.
 *
 * The folder builds wstore-serve, which `wstore serve` execs: main.c (the
 * command line), server.c (daemon, routing, auth, access log, limits,
 * shutdown), cache.c (resolved names, one handle per open checkpoint),
 * gitoid.c (the Hub's object ids), api.c (the JSON endpoints), files.c
 * (file downloads), metrics.c (/metrics), tls.c (HTTPS certificate and
 * key), http.h (what they share).  It uses only the public API of
 * include/wstore/.  docs/serve.md describes the protocol as served.
 */
#ifndef WSTORE_SERVE_H
#define WSTORE_SERVE_H

#include <stdint.h>

#include <wstore/wstore.h>

struct wserve_options {
	const char *listen;	  /* "ADDR:PORT", "[V6]:PORT" or ":PORT" */
	const char *token;	  /* bearer token required, or NULL */
	unsigned max_connections; /* 0 = 256 */
	unsigned max_per_client;  /* per client address; 0 = a quarter of
				   * max_connections */
	unsigned header_timeout;  /* seconds of silence allowed before a
				   * request's headers are in; 0 = 10 */
	double cache_seconds;	  /* how long a resolved name is reused */
	double drain_seconds;	  /* wait for in-flight responses on exit */
	int access_log;		  /* one stderr line per request */
	int mmap;		  /* send multi-chunk bodies from mapped chunk
				   * files (see files.c) */
	const char *tls_cert;	  /* HTTPS: PEM certificate chain file, */
	const char *tls_key;	  /* and its PEM key file (both or none) */
	const char *tls_key_password_file; /* the key's password, or NULL */
	/* pull-through mirror (mirror.c): the upstream Hub server, its
	 * token, and the repositories it may be asked for (NULL-terminated
	 * fnmatch patterns; NULL or empty: every one) */
	const char *upstream;
	const char *upstream_token;
	const char *const *upstream_allow;
	/* seconds after which a branch or tag is asked of the upstream
	 * again; 0 = 60 */
	double upstream_refresh;
};

/*
 * Listen and serve store until SIGTERM, SIGINT or SIGHUP, then stop
 * listening, let in-flight responses finish (at most drain_seconds) and
 * return 0.
 * Returns non-zero after printing why it could not start.  Signals are
 * blocked in the calling thread (the server waits for them itself).
 */
int wserve_run(wstore_store *store, const struct wserve_options *o);

#endif
