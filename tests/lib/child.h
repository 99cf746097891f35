/*
 * child.h - wait for a forked test child with a bound, so that a child
 * stuck in a hang fails its test instead of hanging the suite.
 */
#ifndef WSTORE_TESTS_CHILD_H
#define WSTORE_TESTS_CHILD_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

/* waitpid(pid, status, 0), but a child still running after secs seconds
 * is SIGKILLed and reaped, and -1 returned (*status says killed). */
static inline pid_t wait_child(pid_t pid, int *status, int secs)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	int st = 0;
	pid_t r;

	for (long n = (long)secs * 100; n >= 0; n--) {
		r = waitpid(pid, &st, WNOHANG);
		if (r == pid || (r < 0 && errno != EINTR)) {
			if (status)
				*status = st;
			return r;
		}
		nanosleep(&tick, NULL);
	}
	fprintf(stderr, "child %d still running after %d s: killed\n", (int)pid,
		secs);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	if (status)
		*status = st;
	return -1;
}

#endif
