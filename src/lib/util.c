/*
 * util.c - small helpers every core module may use (util.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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
