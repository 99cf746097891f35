/*
 * error.c - error codes and the thread-local last-error message.
 *
 * Every failing library call leaves a one-line message here that names what
 * failed (key, file, server); the code itself says what kind of failure it
 * was.  Codes >= WSTORE_ERR_LAST and < 0 that are not wstore's are -errno.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "wstore/sys/backend.h"

static _Thread_local char last_error[1024];

const char *wstore_strerror(int code)
{
	switch (code) {
	case 0: return "success";
	case WSTORE_ENOTFOUND: return "not found";
	case WSTORE_EEXISTS: return "already exists";
	case WSTORE_EINVAL: return "invalid argument";
	case WSTORE_ECORRUPT: return "corrupt data";
	case WSTORE_EUNAVAIL: return "backend unavailable";
	case WSTORE_EBUSY: return "busy";
	case WSTORE_EVERIFY: return "verification failed";
	case WSTORE_ENOTREADY: return "checkpoint is not READY";
	case WSTORE_ECANCELED: return "interrupted";
	case WSTORE_ERANGE: return "value larger than buffer";
	case WSTORE_EUNSUPPORTED: return "not supported by this backend";
	case WSTORE_ECHANGED: return "checkpoint replaced while being read";
	}
	if (code < 0 && code > WSTORE_ERR_BASE)
		return strerror(-code);
	return "unknown error";
}

const char *wstore_last_error(void)
{
	return last_error;
}

void wstore__clear_err(void)
{
	last_error[0] = '\0';
}

void wstore__redact(char *s)
{
	for (char *p = s; (p = strstr(p, "://")); p += 3) {
		char *host = p + 3, *end = host + strcspn(host, "/ '\"\t?#");
		char *at = NULL;

		for (char *q = host; q < end; q++)
			if (*q == '@')
				at = q;
		if (at)
			memmove(host, at + 1, strlen(at + 1) + 1);
	}
}

static int vset(int code, int append, const char *fmt, va_list ap)
{
	char msg[sizeof(last_error) - 64];

	/* format into a copy: fmt's arguments may point into last_error */
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* one line, whatever an id, path or server put in it */
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	/* a URL as typed may carry a password */
	wstore__redact(msg);
	if (append)
		snprintf(last_error, sizeof(last_error), "%s: %s", msg,
			 wstore_strerror(code));
	else
		memcpy(last_error, msg, sizeof(msg));
	return code;
}

int wstore__err(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vset(code, 0, fmt, ap);
	va_end(ap);
	return code;
}

int wstore__first_err_keep(wstore__first_err *fe, int code)
{
	if (!fe->code && code) {
		fe->code = code;
		snprintf(fe->msg, sizeof(fe->msg), "%s", last_error);
	}
	return code;
}

int wstore__first_err_raise(const wstore__first_err *fe)
{
	if (fe->code)
		snprintf(last_error, sizeof(last_error), "%s", fe->msg);
	return fe->code;
}

int wstore__errc(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vset(code, 1, fmt, ap);
	va_end(ap);
	return code;
}

/* Warnings a backend gives while it opens; wstore_open_flags moves them to
 * the store (wstore_warning). */
static _Thread_local char open_warning[1024];

void wstore_backend_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(open_warning, sizeof(open_warning), fmt, ap);
	va_end(ap);
	for (char *p = open_warning; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

char *wstore__take_warning(void)
{
	char *w = open_warning[0] ? strdup(open_warning) : NULL;

	open_warning[0] = '\0';
	return w;
}

int wstore_backend_error(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vset(code, 0, fmt, ap);
	va_end(ap);
	return code;
}

/* Here and not in store.c: backends call it, and store.c calls backends. */
/* Guards every backend's notice and notice_ctx: set from the caller's
 * thread, read from any thread of the store.  A delivery holds it for
 * reading during the call, so that once wstore_set_notice returns no
 * thread calls the previous fn any more (its ctx may then be freed).
 * Writers first: with glibc's default (readers first) a set_notice could
 * wait for as long as other threads keep delivering notices back to back.
 * Safe here because a delivery never takes the lock again (a writer-first
 * lock deadlocks a reader that does, with a writer waiting). */
static pthread_rwlock_t notice_lock =
	PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

static int has_notice_fields(const wstore_backend *b)
{
	/* a backend built before the field has no room for it */
	return b && offsetof(wstore_backend, notice_ctx) + sizeof(void *) <=
			    b->struct_size;
}

void wstore__notice_set(wstore_backend *b, void (*fn)(const char *, void *),
			void *ctx)
{
	if (!has_notice_fields(b))
		return;
	pthread_rwlock_wrlock(&notice_lock);
	b->notice = fn;
	b->notice_ctx = ctx;
	pthread_rwlock_unlock(&notice_lock);
}

void wstore_backend_notice(wstore_backend *b, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!has_notice_fields(b))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_rwlock_rdlock(&notice_lock);
	if (b->notice)
		b->notice(msg, b->notice_ctx);
	pthread_rwlock_unlock(&notice_lock);
}
