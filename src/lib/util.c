/*
 * util.c - small helpers every core module may use (util.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

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

int wstore__pwrite_all(int fd, const void *buf, size_t n, uint64_t off,
		       const char *path)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return wstore__errc(-errno,
					    "cannot write '%s' into the store",
					    path);
		p += w;
		off += (uint64_t)w;
		n -= (size_t)w;
	}
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

/* $WSTORE_LOCK_WAIT_MS, or -1 when unset or nonsense. */
static long long lock_wait_env(void)
{
	const char *e = getenv("WSTORE_LOCK_WAIT_MS");
	char *end;
	long long v;

	if (!e || !*e)
		return -1;
	errno = 0;
	v = strtoll(e, &end, 10);
	if (errno || *end || v < 0 || v > LOCK_WAIT_MAX_MS)
		return -1;
	return v;
}

uint64_t wstore__lock_wait_ms(void)
{
	long long v = lock_wait_env();

	return v < 0 ? LOCK_WAIT_DEFAULT_MS : (uint64_t)v;
}

uint64_t wstore__lock_wait_for(uint64_t retry_ms)
{
	long long v = lock_wait_env();

	if (v >= 0)
		return (uint64_t)v;
	if (retry_ms > LOCK_WAIT_MAX_MS)
		retry_ms = LOCK_WAIT_MAX_MS;
	return retry_ms + 5000 > LOCK_WAIT_DEFAULT_MS ? retry_ms + 5000
						      : LOCK_WAIT_DEFAULT_MS;
}

/* Who holds the flock on the file open as fd: the pid /proc/locks names
 * for it (the process that took it, in our PID namespace), or 0 when it
 * cannot be told (not listed, no /proc, another namespace). */
static long flock_holder(int fd)
{
	struct stat st;
	char line[256], want[64], kind[16], dev[64];
	long pid = 0, p;
	FILE *f;

	if (fstat(fd, &st) < 0 || !(f = fopen("/proc/locks", "re")))
		return 0;
	snprintf(want, sizeof(want), "%02x:%02x:%llu", major(st.st_dev),
		 minor(st.st_dev), (unsigned long long)st.st_ino);
	/* "N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INO 0 EOF"; a waiter's
	 * line has "->" after the number */
	while (!pid && fgets(line, sizeof(line), f))
		if (!strstr(line, "->") &&
		    sscanf(line, "%*s %15s %*s %*s %ld %63s", kind, &p, dev) ==
			    3 &&
		    !strcmp(kind, "FLOCK") && !strcmp(dev, want) && p > 0)
			pid = p;
	fclose(f);
	return pid;
}

/* For the file store (backends/helpers.h): its update() holds a flock for
 * one read and one write.  Bounded as every lock wait (util.h): per holder
 * when /proc/locks names it, else by the overall cap. */
int wstore__flock_wait(int fd)
{
	uint64_t per = wstore__lock_wait_ms(), t0 = wclock_mono_ms();
	struct timespec cap = wclock_deadline_in(3 * per), one = cap;
	uint64_t nap = 1;
	long holder = -1, h;

	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (wstore__interrupted())
			return wstore__err(WSTORE_ECANCELED,
					   "interrupted while waiting for "
					   "another process");
		if (no_wait)
			return wstore__err(WSTORE_EBUSY,
					   "held by another process");
		/* a new holder (or a first look): its own wait starts */
		if ((h = flock_holder(fd)) != holder) {
			holder = h;
			one = h ? wclock_deadline_in(per) : cap;
		}
		if (wclock_passed(&one) || wclock_passed(&cap))
			return wstore__err(
				WSTORE_EBUSY,
				"held by another process for over "
				"%llu ms",
				(unsigned long long)(wclock_mono_ms() - t0));
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

int wstore__is_hex(const char *s, size_t n)
{
	return s && strspn(s, "0123456789abcdef") == n && !s[n];
}
