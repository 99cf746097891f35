/*
 * mooncake_exit.c - the Mooncake client's name on the metadata server, and
 * its end when the process exits.
 *
 * A client registers itself on the metadata server under a name,
 * HOST:PORT (keys mooncake/rpc_meta/NAME and mooncake/ram/NAME), and only
 * mooncake_store_destroy takes it off.  A client that exits without
 * destroy leaves the name there for good: the list grows with every
 * command, and a later client that draws the same PORT fails its setup
 * ("Duplicate rpc_meta key").  But destroy takes about a second, most of
 * it joining a thread of Mooncake's that looks at its stop flag once a
 * second, long after the names are gone (they go within milliseconds).
 *
 * So wstore names the client itself: PORT is one this process holds bound
 * (a TCP socket bound to HOST, port 0, never listening: Mooncake uses the
 * number only as a name and listens elsewhere), so no other live process
 * of this host can draw it.  At exit (mc_free_exiting) destroy runs in a
 * thread of its own, and the process waits until the metadata server no
 * longer knows the name (an HTTP GET of each key answering 404), or
 * destroy returns, or MC_EXIT_WAIT_MS, whichever comes first; the rest of
 * the teardown is left to the kernel.  Without an HTTP metadata server
 * (P2PHANDSHAKE, wstore's default) nothing is registered and nothing is
 * done; with another (etcd) the wait is for destroy alone.
 */
#include <curl/curl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/clock.h"
#include "mooncake.h"

/* bound on the wait at exit: destroy takes about 1 s */
#define MC_EXIT_WAIT_MS 3000
/* bound on one look at the metadata server */
#define MC_EXIT_GET_MS 500

/* Whether local already names a port ("HOST:PORT", one colon). */
static int has_port(const char *local)
{
	const char *c = strchr(local, ':');

	return c && !strchr(c + 1, ':') && c[1] &&
	       strspn(c + 1, "0123456789") == strlen(c + 1);
}

/* A socket bound to host, port 0: the fd, its port in *port; -1 if host
 * cannot be bound here. */
static int bind_any_port(const char *host, unsigned *port)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	int fd = -1;

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	if (getaddrinfo(host, "0", &hints, &res) != 0)
		return -1;
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd >= 0 &&
		    (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
		     getsockname(fd, (struct sockaddr *)&sa, &len) != 0)) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0)
		return -1;
	*port = sa.ss_family == AF_INET6
			? ntohs(((struct sockaddr_in6 *)&sa)->sin6_port)
			: ntohs(((struct sockaddr_in *)&sa)->sin_port);
	return fd;
}

void mc_name_drop(struct mc_backend *b)
{
	if (b->name_fd >= 0)
		close(b->name_fd);
	b->name_fd = -1;
	free(b->name);
	b->name = NULL;
}

char *mc_name_client(struct mc_backend *b, const char *local)
{
	unsigned port = 0;
	char *name;
	int fd;

	if (has_port(local)) {
		/* the user's name: known, not held */
		mc_name_drop(b);
		b->name = strdup(local);
		return NULL;
	}
	/* bound before the old one is let go: never the same port twice */
	fd = bind_any_port(local, &port);
	mc_name_drop(b);
	if (fd < 0)
		return NULL;
	name = malloc(strlen(local) + 8);
	if (!name) {
		close(fd);
		return NULL;
	}
	sprintf(name, "%s:%u", local, port);
	b->name_fd = fd;
	b->name = strdup(name);
	return name;
}

/* ---- the end at exit ------------------------------------------------------
 */

struct mc_ending {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	struct mc_backend *b;
};

static void *destroy_thread(void *arg)
{
	struct mc_ending *e = arg;

	e->b->api.destroy(e->b->h);
	pthread_mutex_lock(&e->mu);
	e->done = 1;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * n;
}

/* Whether the metadata server still has key kind/name: 1, 0 (404), or -1
 * when it cannot be asked. */
static int meta_has(CURL *c, const struct mc_backend *b, const char *kind)
{
	char key[512], url[1024];
	char *esc;
	long status = 0;

	snprintf(key, sizeof(key), "mooncake/%s/%s", kind, b->name);
	esc = curl_easy_escape(c, key, 0);
	if (!esc)
		return -1;
	snprintf(url, sizeof(url), "%s?key=%s", b->meta, esc);
	curl_free(esc);
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (curl_easy_perform(c) != CURLE_OK ||
	    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
		return -1;
	return status == 404 ? 0 : 1;
}

/* Whether destroy has returned, waiting up to ms for it. */
static int ended(struct mc_ending *e, uint64_t ms)
{
	struct timespec ts;
	int done;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&e->mu);
	while (!e->done && pthread_cond_timedwait(&e->cv, &e->mu, &ts) == 0)
		;
	done = e->done;
	pthread_mutex_unlock(&e->mu);
	return done;
}

/* Until the names are gone from the metadata server, destroy has
 * returned, or the time is up. */
static void wait_names_gone(struct mc_ending *e, const struct mc_backend *b,
			    uint64_t end)
{
	CURL *c = curl_easy_init();

	if (c) {
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)MC_EXIT_GET_MS);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	}
	while (!ended(e, 10) && wclock_mono_ms() < end) {
		/* destroy takes rpc_meta off first, then ram */
		if (c && meta_has(c, b, "rpc_meta") == 0 &&
		    meta_has(c, b, "ram") == 0)
			break;
	}
	if (c)
		curl_easy_cleanup(c);
}

void mc_free_exiting(wstore_backend *wb)
{
	struct mc_backend *b = (struct mc_backend *)wb;
	static struct mc_ending e = { PTHREAD_MUTEX_INITIALIZER,
				      PTHREAD_COND_INITIALIZER, 0, NULL };
	uint64_t end = wclock_mono_ms() + MC_EXIT_WAIT_MS;
	pthread_attr_t at;
	pthread_t t;
	int http;

	/* registered nowhere (P2PHANDSHAKE): nothing to take off */
	if (!b->h || !b->meta || strcmp(b->meta, "P2PHANDSHAKE") == 0)
		return;
	http = strncmp(b->meta, "http://", 7) == 0 ||
	       strncmp(b->meta, "https://", 8) == 0;
	e.b = b;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, destroy_thread, &e) != 0) {
		pthread_attr_destroy(&at);
		return;
	}
	pthread_attr_destroy(&at);
	if (http && b->name)
		wait_names_gone(&e, b, end);
	else
		ended(&e, MC_EXIT_WAIT_MS);
}
