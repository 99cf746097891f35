/*
 * hubfetch.h - the HTTP client of import from a Hub (hubfetch.c, over
 * libcurl): GET with retries, a JSON body or a file streamed to a sink
 * and resumed where a cut transfer stopped.
 *
 * Owns: one curl handle per wstore__http (its connections are reused
 * from request to request); one thread uses it at a time.
 */
#ifndef WSTORE_HUBFETCH_H
#define WSTORE_HUBFETCH_H

#include <stddef.h>
#include <stdint.h>

#include <wstore/wstore.h>

#include "hubtrust.h"

typedef struct wstore__http wstore__http;

/* Called with the bytes of a body in order: 0, or a negative code that
 * stops the transfer (returned by wstore__http_fetch). */
typedef int (*wstore__http_sink)(void *ctx, const void *data, size_t n);
/* Non-zero stops retries, waits and a transfer under way (another
 * worker failed, the caller cancels): asked at most every 100 ms, and
 * about once a second while no byte moves.  A transfer also stops once
 * wstore_interrupt was called. */
typedef int (*wstore__http_stop)(void *ctx);

/* A client for endpoint ep with o's token and limits (o and ep must
 * outlive it): the token (or ep's user:password) goes only to URLs on
 * ep's origin. */
int wstore__http_new(wstore__http **out, const wstore_hub_options *o,
		     const wstore__endpoint *ep, wstore__http_stop stop,
		     void *stop_ctx);
void wstore__http_free(wstore__http *h);

/* GET url: the body (malloc'ed, NUL-terminated) and the Link header's
 * rel="next" URL (*next malloc'ed, NULL when none; next may be NULL). */
int wstore__http_get(wstore__http *h, const char *url, char **body, size_t *len,
		     char **next);

/* GET url's bytes from *off to size into sink, *off moving with them;
 * a cut transfer is retried from *off (Range). */
int wstore__http_fetch(wstore__http *h, const char *url, uint64_t size,
		       uint64_t *off, wstore__http_sink sink, void *ctx);

#endif
