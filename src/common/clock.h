/*
 * clock.h - the one clock helper of the tree: monotonic deadlines, waits
 * on condition variables that run on the same clock, wall time in ms.
 *
 * Header-only (static inline) so that the library, the CLI, the mount and
 * the server share it without exporting anything.  Every bounded wait in
 * wstore takes its deadline from here: a deadline is an absolute
 * CLOCK_MONOTONIC time, and a condition variable waited on with one must
 * have been made with wclock_cond_init (a monotonic condition variable
 * given a realtime deadline wakes at the wrong time, or never).
 */
#ifndef WSTORE_COMMON_CLOCK_H
#define WSTORE_COMMON_CLOCK_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC (for durations and deadlines). */
static inline uint64_t wclock_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Seconds on CLOCK_MONOTONIC, to the nanosecond (durations of requests,
 * transfer rates). */
static inline double wclock_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Milliseconds since the Unix epoch (for records other hosts read). */
static inline int64_t wclock_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The absolute CLOCK_MONOTONIC time ms milliseconds from now. */
static inline struct timespec wclock_deadline_in(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000u);
	ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/* Milliseconds left until deadline (0 once it has passed). */
static inline uint64_t wclock_left_ms(const struct timespec *deadline)
{
	struct timespec now;
	int64_t left;

	clock_gettime(CLOCK_MONOTONIC, &now);
	left = (int64_t)(deadline->tv_sec - now.tv_sec) * 1000 +
	       (deadline->tv_nsec - now.tv_nsec) / 1000000;
	return left > 0 ? (uint64_t)left : 0;
}

static inline int wclock_passed(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > deadline->tv_sec ||
	       (now.tv_sec == deadline->tv_sec &&
		now.tv_nsec >= deadline->tv_nsec);
}

/* pthread_cond_init on CLOCK_MONOTONIC; 0 or an errno value. */
static inline int wclock_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t ca;
	int rc;

	if ((rc = pthread_condattr_init(&ca)) != 0)
		return rc;
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
	return rc;
}

/*
 * Wait on c (made by wclock_cond_init) until signalled or the monotonic
 * deadline: 0 when signalled (or spuriously woken), ETIMEDOUT when the
 * deadline passed.  Callers loop on their own predicate.
 */
static inline int wclock_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m,
					 const struct timespec *deadline)
{
	return pthread_cond_timedwait(c, m, deadline);
}

/* Sleep ms milliseconds on CLOCK_MONOTONIC (restarted after signals). */
static inline void wclock_sleep_ms(uint64_t ms)
{
	struct timespec dl = wclock_deadline_in(ms);

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL) ==
	       EINTR)
		;
}

#endif
