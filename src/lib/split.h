/*
 * split.h - run the parts of one large piece of work on the caller's
 * thread and a few helper threads (split.c).
 *
 * Owns: a small pool of helper threads, started once and kept until
 * wstore__split_free.  Used by the read API to spread one large read of
 * local chunk files (a copy from the page cache, bound by one core's
 * memory bandwidth) over the cores.
 *
 * The caller runs part 0 itself and offers the others to the helpers;
 * parts no helper has taken by the time it is done it takes back and runs
 * itself.  So a call never waits on a busy pool (several callers at once,
 * or a child after fork, where the helpers do not exist) longer than
 * doing all the work alone would take.
 */
#ifndef WSTORE_SPLIT_H
#define WSTORE_SPLIT_H

#include <stddef.h>

typedef struct wstore__split wstore__split;

/* Most parts a call takes (the caller and up to WSTORE__SPLIT_MAX - 1
 * helpers). */
#define WSTORE__SPLIT_MAX 4

/* A pool of helpers threads: one less than the cores, at most
 * WSTORE__SPLIT_MAX - 1; NULL with an error if it cannot be allocated.
 * A pool whose threads could not start works, with fewer helpers. */
wstore__split *wstore__split_new(void);
/* How many parts a call should be split into at most (1: no helpers). */
unsigned wstore__split_width(const wstore__split *sp);
/*
 * Run fn(arg, i) for i in [0, nparts) (nparts <= WSTORE__SPLIT_MAX), the
 * parts at once where helpers are free; returns when all are done.  0, or
 * the error of the lowest-numbered part that failed (its message is the
 * thread's last error again).
 */
int wstore__split_run(wstore__split *sp, int (*fn)(void *arg, size_t i),
		      void *arg, size_t nparts);
/* Stop and join the helpers; no call may be running.  NULL is fine. */
void wstore__split_free(wstore__split *sp);

#endif
