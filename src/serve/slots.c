/*
 * slots.c - who holds the server's connection slots, and which to give
 * up when they are all taken (docs/trust.md, "The clients").
 *
 * libmicrohttpd refuses a new connection once its limit is reached, so
 * sockets that connect and never send a whole request header (idle
 * keep-alive connections, careless or hostile clients) could keep every
 * new client out until their header timeout, however many addresses they
 * come from.  Here every connection is tracked from its start to its
 * close, marked busy while a request is being served (its headers are
 * in) and idle otherwise.  When a new connection takes the last free
 * slot, and again at every sweep (4 a second) while none is free, the
 * connection idle the longest is shut down if it has been idle for
 * IDLE_MIN_S (shutdown(2) on its socket: its thread sees the end and
 * closes it), so that a slot is free again for the next client as long
 * as any connection is idle; a client that has just connected and not yet
 * sent its request is not taken for an idle one.  When
 * every connection is busy, libmicrohttpd stops accepting and new
 * clients wait in the listen backlog until a request is done.
 *
 * One mutex; the list is walked only when the last slot is taken.
 */
#include <stdlib.h>
#include <sys/socket.h>

#include "../common/clock.h"
#include "http.h"

/* idle this long before it may be shut down for another client */
#define IDLE_MIN_S 0.5

struct wslot {
	struct wslot *prev, *next;
	int fd;
	double since; /* when it became idle (monotonic seconds) */
	int busy;     /* a request is being served */
	int closing;  /* shut down to make room */
};

void wslots_init(struct wslots *s, unsigned max)
{
	pthread_mutex_init(&s->mu, NULL);
	s->head = NULL;
	s->open = s->closing = 0;
	s->max = max;
	atomic_init(&s->evicted, 0);
}

void wslots_destroy(struct wslots *s)
{
	pthread_mutex_destroy(&s->mu);
}

/* With mu held, when no slot is free: shut the connection idle the
 * longest down, if it has been idle for IDLE_MIN_S. */
static void evict_idle(struct wslots *s)
{
	struct wslot *oldest = NULL;

	if (s->open - s->closing < s->max)
		return;
	for (struct wslot *e = s->head; e; e = e->next)
		if (!e->busy && !e->closing &&
		    (!oldest || e->since < oldest->since))
			oldest = e;
	if (!oldest || wclock_mono_s() - oldest->since < IDLE_MIN_S)
		return;
	oldest->closing = 1;
	s->closing++;
	shutdown(oldest->fd, SHUT_RDWR);
	atomic_fetch_add(&s->evicted, 1);
}

void *wslots_add(struct wslots *s, int fd)
{
	struct wslot *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->fd = fd;
	e->since = wclock_mono_s();
	pthread_mutex_lock(&s->mu);
	e->next = s->head;
	if (s->head)
		s->head->prev = e;
	s->head = e;
	s->open++;
	/* the last slot taken: free one for the next client */
	evict_idle(s);
	pthread_mutex_unlock(&s->mu);
	return e;
}

void wslots_remove(struct wslots *s, void *slot)
{
	struct wslot *e = slot;

	if (!e)
		return;
	pthread_mutex_lock(&s->mu);
	if (e->prev)
		e->prev->next = e->next;
	else
		s->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	s->open--;
	if (e->closing)
		s->closing--;
	pthread_mutex_unlock(&s->mu);
	free(e);
}

void wslots_busy(struct wslots *s, void *slot, int busy)
{
	struct wslot *e = slot;

	if (!e)
		return;
	pthread_mutex_lock(&s->mu);
	e->busy = busy;
	if (!busy)
		e->since = wclock_mono_s();
	pthread_mutex_unlock(&s->mu);
}

void wslots_sweep(struct wslots *s)
{
	pthread_mutex_lock(&s->mu);
	evict_idle(s);
	pthread_mutex_unlock(&s->mu);
}
