/*
 * mc_client.c - the raw Mooncake client set-up the benchmarks share (see
 * mc_client.h).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

#include "mc_client.h"

double mcc_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int find(struct mc_client *c, const char *prog, void *slot,
		const char *name)
{
	void *p = dlsym(c->dl, name);

	if (!p) {
		fprintf(stderr, "%s: no symbol '%s'\n", prog, name);
		return 1;
	}
	/* POSIX: function and object pointers have the same size */
	*(void **)slot = p;
	return 0;
}

int mcc_open(struct mc_client *c, const char *prog, const char *lib,
	     const char *master, const char *meta, const char *local)
{
	c->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!c->dl) {
		fprintf(stderr, "%s: %s\n", prog, dlerror());
		return 1;
	}
	if (find(c, prog, &c->create, "mooncake_store_create") ||
	    find(c, prog, &c->destroy, "mooncake_store_destroy") ||
	    find(c, prog, &c->setup, "mooncake_store_setup") ||
	    find(c, prog, &c->put_from, "mooncake_store_put_from") ||
	    find(c, prog, &c->get_into, "mooncake_store_get_into") ||
	    find(c, prog, &c->reg, "mooncake_store_register_buffer") ||
	    find(c, prog, &c->rm, "mooncake_store_remove"))
		return 1;
	c->h = c->create();
	if (!c->h || c->setup(c->h, local, meta, 0, 128u << 20, "tcp", "",
			      master) != 0) {
		fprintf(stderr, "%s: setup failed (master '%s')\n", prog,
			master);
		return 1;
	}
	return 0;
}

void mcc_close(struct mc_client *c)
{
	if (c->h)
		c->destroy(c->h);
	c->h = NULL;
}
