/*
 * util.c - small helpers every core module may use (util.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/file.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "error.h"
#include "util.h"

int wstore__set_str(char **field, const char *value)
{
	char *copy = NULL;

	if (value && !(copy = strdup(value)))
		return wstore__errc(-ENOMEM, "cannot copy string");
	free(*field);
	*field = copy;
	return 0;
}

int wstore__thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* lock-free, so that a signal handler may set it */
static atomic_int interrupted;

void wstore_interrupt(void)
{
	atomic_store(&interrupted, 1);
}

int wstore__interrupted(void)
{
	return atomic_load(&interrupted);
}

/* wstore__lock_nowait: this thread's waits for others give up at once */
static _Thread_local int no_wait;

int wstore__lock_nowait(int on)
{
	int was = no_wait;

	no_wait = on;
	return was;
}

int wstore__nowait(void)
{
	return no_wait;
}

#define LOCK_WAIT_DEFAULT_MS 10000
#define LOCK_WAIT_MAX_MS 600000

uint64_t wstore__lock_wait_ms(void)
{
	const char *e = getenv("WSTORE_LOCK_WAIT_MS");
	char *end;
	long long v;

	if (!e || !*e)
		return LOCK_WAIT_DEFAULT_MS;
	errno = 0;
	v = strtoll(e, &end, 10);
	if (errno || *end || v < 0 || v > LOCK_WAIT_MAX_MS)
		return LOCK_WAIT_DEFAULT_MS;
	return (uint64_t)v;
}

/* For the file store (backends/helpers.h): its update() holds a flock for
 * one read and one write.  A flock does not say who holds it: the wait is
 * bounded by the overall cap only. */
int wstore__flock_wait(int fd)
{
	uint64_t cap = 3 * wstore__lock_wait_ms();
	struct timespec deadline = wclock_deadline_in(cap);
	uint64_t nap = 1;

	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (wstore__interrupted())
			return wstore__err(WSTORE_ECANCELED,
					   "interrupted while waiting for "
					   "another process");
		if (no_wait || wclock_passed(&deadline))
			return no_wait ? wstore__err(WSTORE_EBUSY,
						     "held by another process")
				       : wstore__err(WSTORE_EBUSY,
						     "held by another process "
						     "for over %llu ms",
						     (unsigned long long)cap);
		wclock_sleep_ms(nap);
		nap = nap < 32 ? nap * 2 : 50;
	}
	return 0;
}

void wstore__tick(pthread_mutex_t *mu, pthread_cond_t *cv, const int *stop,
		  uint64_t every_ms, void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(mu);
	while (!*stop) {
		struct timespec dl = wclock_deadline_in(every_ms);

		while (!*stop && wclock_cond_wait_until(cv, mu, &dl) == 0)
			;
		if (*stop)
			break;
		pthread_mutex_unlock(mu);
		fn(arg);
		pthread_mutex_lock(mu);
	}
	pthread_mutex_unlock(mu);
}
