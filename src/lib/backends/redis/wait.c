/*
 * wait.c - the bounded, interruptible wait on one Redis connection's
 * socket and how a connection is marked broken: below both the plain
 * I/O (conn.c) and TLS (tls.c), which each call them.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto.h"

int64_t rd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rd_backoff(int attempt)
{
	long ms = attempt < 7 ? 5L << attempt : 500;
	struct timespec ts;

	ms += rand() % (ms / 2 + 1); /* jitter: spread retrying clients */
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000;
	nanosleep(&ts, NULL);
}

int rd_conn_err(struct rd_req *req, const struct rd_conn *rc)
{
	snprintf(req->err, sizeof(req->err), "%s", rc->c->errstr);
	return RD_CONN_ERR;
}

/*
 * Wait until the connection's socket is ready for events, at most the
 * connection's timeout, in slices of 100 ms so that wstore_interrupt (^C,
 * SIGTERM) ends the wait at once: a server that stopped answering
 * (SIGSTOP, a partition) would otherwise hold the command for the whole
 * timeout with the signal ignored.  0, or -1 with the connection broken.
 */
int rd_wait_fd(struct rd_conn *rc, short events, const char *what)
{
	int64_t end = rd_now_ms() + (rc->timeout_ms > 0 ? rc->timeout_ms : 0);

	for (;;) {
		struct pollfd p = { .fd = rc->c->fd, .events = events };
		int64_t left = end - rd_now_ms();
		int r;

		if (wstore__interrupted())
			return rd_broken(rc, "interrupted", 0);
		if (rc->timeout_ms > 0 && left <= 0)
			return rd_broken(rc, what, EAGAIN);
		r = poll(&p, 1,
			 rc->timeout_ms > 0 && left < 100 ? (int)left : 100);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return rd_broken(rc, "poll failed", errno);
	}
}

/* Mark a connection broken (rd_node_give then closes it); returns -1. */
int rd_broken(struct rd_conn *rc, const char *what, int err)
{
	rc->c->err = REDIS_ERR_IO;
	if (err == EAGAIN || err == EWOULDBLOCK)
		snprintf(rc->c->errstr, sizeof(rc->c->errstr),
			 "%s: timed out after %g s", what,
			 rc->timeout_ms / 1000.0);
	else if (err)
		snprintf(rc->c->errstr, sizeof(rc->c->errstr), "%s: %s", what,
			 strerror(err));
	else
		snprintf(rc->c->errstr, sizeof(rc->c->errstr), "%s", what);
	return -1;
}
