/*
 * owner.c - owner liveness of locks, leases and temp files: a record names
 * the host and pid that wrote it; the owner is gone when it ran on this
 * host and its pid no longer exists.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "owner.h"

void wstore__owner_host(char *out, size_t cap)
{
	if (!cap)
		return;
	out[0] = '\0';
	gethostname(out, cap - 1);
	out[cap - 1] = '\0';
}

int wstore__pid_gone(long pid)
{
	return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

int wstore__owner_gone(const char *host, long long pid)
{
	char me[256];

	wstore__owner_host(me, sizeof(me));
	return host && pid > 0 && strcmp(host, me) == 0 &&
	       wstore__pid_gone((long)pid);
}
