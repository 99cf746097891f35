/*
 * test_util.c - util.c: the library's threads block every signal, so that
 * a signal sent to the process runs its handler in a caller's thread.
 */
#include <pthread.h>
#include <signal.h>

#include "util.h"
#include "unit.h"

static void *mask_of_thread(void *arg)
{
	pthread_sigmask(SIG_SETMASK, NULL, (sigset_t *)arg);
	return NULL;
}

void test_thread_start_blocks_signals(void)
{
	sigset_t before, after, seen;
	pthread_t t;

	sigemptyset(&seen);
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	CHECK_EQ_INT(wstore__thread_start(&t, mask_of_thread, &seen), 0);
	pthread_join(t, NULL);
	CHECK(sigismember(&seen, SIGINT) == 1);
	CHECK(sigismember(&seen, SIGTERM) == 1);
	CHECK(sigismember(&seen, SIGHUP) == 1);
	CHECK(sigismember(&seen, SIGUSR2) == 1);
	/* the caller's own mask is as it was */
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	CHECK(sigismember(&after, SIGTERM) == sigismember(&before, SIGTERM));
	CHECK(sigismember(&after, SIGINT) == sigismember(&before, SIGINT));
}
