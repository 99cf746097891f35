/*
 * error.h - the thread's last error (error.c).
 *
 * Owns: the per-thread error code and message behind wstore_last_error().
 * wstore__err and wstore__errc are declared in backends/helpers.h, which
 * the backends share; this header adds what only the core uses.
 */
#ifndef WSTORE_ERROR_H
#define WSTORE_ERROR_H

#include "backends/helpers.h"

void wstore__clear_err(void);

/*
 * The first error of a run that goes on past it or stops several workers
 * (import, pull, verify, gc), or an error kept across cleanup (unlock):
 * its code and the thread's message at the time.  Concurrent callers
 * serialise themselves (the runs hold their mutex).
 */
typedef struct wstore__first_err {
	int code; /* 0 until something is kept */
	char msg[1024];
} wstore__first_err;

/* Keep code (non-zero) and the thread's last error message unless an
 * error is kept already; returns code. */
int wstore__first_err_keep(wstore__first_err *fe, int code);
/* Make the kept error the thread's last error again; returns its code (0
 * when nothing was kept, and then leaves the message alone). */
int wstore__first_err_raise(const wstore__first_err *fe);
/* Drop "user:password@" from every URL in s, in place.  Every message
 * the library keeps goes through it, so no credential reaches a log. */
void wstore__redact(char *s);
/* The warning wstore_backend_warn left on this thread (malloc'ed, or
 * NULL), cleared; wstore_open_flags moves it to the store. */
char *wstore__take_warning(void);

/* Set b's notice callback (wstore_set_notice): safe while other threads
 * of the store deliver notices; returns once none calls the old one. */
void wstore__notice_set(wstore_backend *b, void (*fn)(const char *, void *),
			void *ctx);

#endif
