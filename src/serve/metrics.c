/*
 * metrics.c - counters of the server and /metrics in the Prometheus text
 * exposition format (version 0.0.4): requests by status code, body bytes
 * sent (in all and per checkpoint), errors (5xx replies and bodies cut
 * by a failed store read; a client going away is not an error), open
 * connections and requests in flight.
 *
 * Counters are atomics except the per-checkpoint table, a short list
 * under a mutex touched once per finished request.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static const unsigned codes[WSERVE_NCODES] = {
	200, 206, 400, 401, 404, 405, 413, 416, 500, 503, 304, 302,
};

void wmetrics_init(struct wserve_metrics *m)
{
	for (size_t i = 0; i <= WSERVE_NCODES; i++)
		atomic_init(&m->requests[i], 0);
	atomic_init(&m->bytes, 0);
	atomic_init(&m->errors, 0);
	atomic_init(&m->store_reads, 0);
	atomic_init(&m->shared_reads, 0);
	atomic_init(&m->connections, 0);
	atomic_init(&m->inflight, 0);
	pthread_mutex_init(&m->mu, NULL);
	m->per_ckpt = NULL;
}

void wmetrics_free(struct wserve_metrics *m)
{
	while (m->per_ckpt) {
		struct wserve_ckpt_bytes *n = m->per_ckpt->next;

		free(m->per_ckpt);
		m->per_ckpt = n;
	}
	pthread_mutex_destroy(&m->mu);
}

void wmetrics_request(struct wserve_metrics *m, unsigned status, uint64_t bytes,
		      const char *ckpt, int broken)
{
	size_t i;

	for (i = 0; i < WSERVE_NCODES && codes[i] != status; i++)
		;
	atomic_fetch_add(&m->requests[i], 1);
	atomic_fetch_add(&m->bytes, bytes);
	if (status >= 500 || broken)
		atomic_fetch_add(&m->errors, 1);
	if (!ckpt || !bytes)
		return;
	pthread_mutex_lock(&m->mu);
	struct wserve_ckpt_bytes *e = m->per_ckpt;

	while (e && strcmp(e->id, ckpt) != 0)
		e = e->next;
	if (!e && (e = calloc(1, sizeof(*e) + strlen(ckpt) + 1))) {
		strcpy(e->id, ckpt);
		e->next = m->per_ckpt;
		m->per_ckpt = e;
	}
	if (e)
		e->bytes += bytes;
	pthread_mutex_unlock(&m->mu);
}

/* Append to a growing buffer; sets *bad on allocation failure. */
static void put(char **buf, size_t *len, size_t *cap, int *bad, const char *fmt,
		...) __attribute__((format(printf, 5, 6)));

static void put(char **buf, size_t *len, size_t *cap, int *bad, const char *fmt,
		...)
{
	va_list ap;
	int n;

	if (*bad)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			*bad = 1;
			return;
		}
		if ((size_t)n < *cap - *len)
			break;
		char *nb = realloc(*buf, *cap * 2 + (size_t)n);

		if (!nb) {
			*bad = 1;
			return;
		}
		*buf = nb;
		*cap = *cap * 2 + (size_t)n;
	}
	*len += (size_t)n;
}

/* Checkpoint ids are restricted to [A-Za-z0-9._-] by the contract, so
 * they need no escaping in a label value. */
enum MHD_Result wmetrics_reply(struct MHD_Connection *c, struct wreq *r)
{
	struct wserve_metrics *m = &r->sv->m;
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	struct MHD_Response *resp;
	int bad = !buf;

#define P(...) put(&buf, &len, &cap, &bad, __VA_ARGS__)
	P("# HELP wstore_serve_requests_total Requests answered, by status "
	  "code.\n# TYPE wstore_serve_requests_total counter\n");
	for (size_t i = 0; i < WSERVE_NCODES; i++)
		P("wstore_serve_requests_total{code=\"%u\"} %" PRIuFAST64 "\n",
		  codes[i], atomic_load(&m->requests[i]));
	P("wstore_serve_requests_total{code=\"other\"} %" PRIuFAST64 "\n",
	  atomic_load(&m->requests[WSERVE_NCODES]));
	P("# HELP wstore_serve_bytes_total Body bytes sent.\n"
	  "# TYPE wstore_serve_bytes_total counter\n"
	  "wstore_serve_bytes_total %" PRIuFAST64 "\n",
	  atomic_load(&m->bytes));
	P("# HELP wstore_serve_errors_total Server errors and broken "
	  "streams.\n# TYPE wstore_serve_errors_total counter\n"
	  "wstore_serve_errors_total %" PRIuFAST64 "\n",
	  atomic_load(&m->errors));
	P("# HELP wstore_serve_store_reads_total Blocks read from a store "
	  "that does not hand out files, for a response.\n"
	  "# TYPE wstore_serve_store_reads_total counter\n"
	  "wstore_serve_store_reads_total %" PRIuFAST64 "\n",
	  atomic_load(&m->store_reads));
	P("# HELP wstore_serve_shared_reads_total Blocks a response took "
	  "from another one's read of them (single flight).\n"
	  "# TYPE wstore_serve_shared_reads_total counter\n"
	  "wstore_serve_shared_reads_total %" PRIuFAST64 "\n",
	  atomic_load(&m->shared_reads));
	P("# HELP wstore_serve_block_reads_total Blocks read from a store "
	  "that does not hand out files, read ahead or for a response.\n"
	  "# TYPE wstore_serve_block_reads_total counter\n"
	  "wstore_serve_block_reads_total %" PRIu64 "\n",
	  wblocks_reads_total());
	P("# HELP wstore_serve_connections Open client connections.\n"
	  "# TYPE wstore_serve_connections gauge\n"
	  "wstore_serve_connections %d\n",
	  atomic_load(&m->connections));
	P("# HELP wstore_serve_requests_in_flight Requests being answered.\n"
	  "# TYPE wstore_serve_requests_in_flight gauge\n"
	  "wstore_serve_requests_in_flight %d\n",
	  atomic_load(&m->inflight));
	P("# HELP wstore_serve_checkpoint_bytes_total Body bytes sent, by "
	  "checkpoint.\n# TYPE wstore_serve_checkpoint_bytes_total counter\n");
	pthread_mutex_lock(&m->mu);
	for (struct wserve_ckpt_bytes *e = m->per_ckpt; e; e = e->next)
		P("wstore_serve_checkpoint_bytes_total{checkpoint=\"%s\"} "
		  "%" PRIu64 "\n",
		  e->id, e->bytes);
	pthread_mutex_unlock(&m->mu);
	{
		char *mirror = wmirror_metrics_text(r->sv->mirror);

		if (mirror)
			P("%s", mirror);
		free(mirror);
	}
#undef P
	if (bad) {
		free(buf);
		return MHD_NO;
	}
	r->whole_len = len;
	resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type",
				"text/plain; version=0.0.4; charset=utf-8");
	return wreply(c, r, MHD_HTTP_OK, resp);
}
