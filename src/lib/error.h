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
/* Drop "user:password@" from every URL in s, in place.  Every message
 * the library keeps goes through it, so no credential reaches a log. */
void wstore__redact(char *s);
/* The warning wstore_backend_warn left on this thread (malloc'ed, or
 * NULL), cleared; wstore_open_flags moves it to the store. */
char *wstore__take_warning(void);

#endif
