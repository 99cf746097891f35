/*
 * util.h - small helpers every core module may use (util.c).
 *
 * Owns: nothing but the helpers themselves; no module state.
 */
#ifndef WSTORE_UTIL_H
#define WSTORE_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Replace a string field (copy); value may be NULL. */
int wstore__set_str(char **field, const char *value);

/* 1 when s is exactly n lowercase hex digits (a digest, a commit id). */
int wstore__is_hex(const char *s, size_t n);

/* pwrite all n bytes of buf at off of fd (short writes and EINTR taken
 * care of): 0, or an error saying that path could not be written into
 * the store. */
int wstore__pwrite_all(int fd, const void *buf, size_t n, uint64_t off,
		       const char *path);

/*
 * pthread_create for the library's own threads (workers, lease renewal):
 * the new thread blocks every signal, so that a signal sent to the
 * process (^C, SIGTERM) runs its handler in a thread of the caller's,
 * never in one of ours.  A program that waits for a signal in one thread
 * (as libfuse's loop does) would otherwise miss it.
 */
int wstore__thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* Whether wstore_interrupt was called: every wait for another process
 * polls it. */
int wstore__interrupted(void);

/* While on (non-zero), every wait of this thread for another process (a
 * lock object, a file lock) gives up at once with WSTORE_EBUSY: for
 * advisory writes that must never hold a reader up.  Returns the previous
 * setting; wstore__nowait() tells the current one. */
int wstore__lock_nowait(int on);
int wstore__nowait(void);

/*
 * How long a wait for a lock held by another process lasts: at most
 * wstore__lock_wait_ms() while one holder keeps it (a holder that long is
 * stuck: stopped, or slowed by a store that does not answer), and never
 * more than three times that in all (a queue of holders, or a file lock
 * whose holder /proc/locks does not name).  $WSTORE_LOCK_WAIT_MS, 10 s unless
 * set (0 to 600000; 0: never wait).  Every such wait also ends within 100 ms of
 * wstore_interrupt.
 */
uint64_t wstore__lock_wait_ms(void);
/* The same for a store whose calls may retry for retry_ms (its backend's
 * retry_ms): unless $WSTORE_LOCK_WAIT_MS is set, at least retry_ms + 5 s,
 * so a holder retrying its write outlasts no waiter. */
uint64_t wstore__lock_wait_for(uint64_t retry_ms);

/*
 * The loop of a renewal thread (locks, leases): with mu held, wait
 * every_ms on cv (made by wclock_cond_init) unless *stop, then call
 * fn(arg) with mu released; returns once another thread set *stop under
 * mu and signalled cv.  A failed fn is simply called again next tick.
 */
void wstore__tick(pthread_mutex_t *mu, pthread_cond_t *cv, const int *stop,
		  uint64_t every_ms, void (*fn)(void *), void *arg);

#endif
