/*
 * probe.c - mooncake-probe: look at raw keys of a real Mooncake Store from
 * the test suites (which cannot list keys there).  Uses the library and
 * cluster the WSTORE_MOONCAKE_LIBRARY, WSTORE_MASTER_SERVER_ADDR and
 * WSTORE_METADATA_SERVER environment variables name.
 *
 *   mooncake-probe exist KEY...   one line per key: 1, 0, or the negative
 *                                 code get_size returns (-703: being
 *                                 written)
 *   mooncake-probe get KEY        the value on stdout
 *   mooncake-probe wait-code CODE MS KEY...
 *                                 poll the keys (every 2 ms) until one
 *                                 answers CODE (e.g. -703); exit 0 then,
 *                                 1 after MS milliseconds.  One process
 *                                 polling fast catches a put that lasts a
 *                                 fraction of a second, which a shell loop
 *                                 starting a probe each time can miss.
 *
 * A test tool, not part of wstore: it calls the C API directly.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct api {
	void *(*create)(void);
	int (*setup)(void *, const char *, const char *, uint64_t, uint64_t,
		     const char *, const char *, const char *);
	int64_t (*get_size)(void *, const char *);
	int64_t (*get_into)(void *, const char *, void *, size_t);
	int (*reg)(void *, void *, size_t);
};

static void *sym(void *dl, const char *name)
{
	void *p = dlsym(dl, name);

	if (!p) {
		fprintf(stderr, "mooncake-probe: no symbol '%s'\n", name);
		_exit(2);
	}
	return p;
}

static int get(struct api *a, void *h, const char *key)
{
	int64_t n = a->get_size(h, key);
	char *buf;

	if (n < 0) {
		fprintf(stderr, "mooncake-probe: '%s': %lld\n", key,
			(long long)n);
		return 1;
	}
	buf = aligned_alloc(4096, ((size_t)n + 4096) / 4096 * 4096);
	if (!buf || a->reg(h, buf, (size_t)n + 1) != 0 ||
	    a->get_into(h, key, buf, (size_t)n + 1) != n) {
		fprintf(stderr, "mooncake-probe: cannot read '%s'\n", key);
		return 1;
	}
	fwrite(buf, 1, (size_t)n, stdout);
	return 0;
}

static int64_t code_of(struct api *a, void *h, const char *key)
{
	int64_t n = a->get_size(h, key);

	return n >= 0 ? 1 : n == -704 ? 0 : n;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int wait_code(struct api *a, void *h, int argc, char **argv)
{
	int64_t want;
	double end;

	if (argc < 5) {
		fprintf(stderr,
			"usage: mooncake-probe wait-code CODE MS KEY...\n");
		return 2;
	}
	want = strtoll(argv[2], NULL, 10);
	end = now_ms() + strtod(argv[3], NULL);
	do {
		for (int i = 4; i < argc; i++)
			if (code_of(a, h, argv[i]) == want)
				return 0;
		usleep(2000);
	} while (now_ms() < end);
	return 1;
}

int main(int argc, char **argv)
{
	const char *lib = getenv("WSTORE_MOONCAKE_LIBRARY");
	const char *master = getenv("WSTORE_MASTER_SERVER_ADDR");
	const char *meta = getenv("WSTORE_METADATA_SERVER");
	struct api a;
	void *dl, *h;
	int *minlevel, rc = 0;

	if (argc < 3 || !lib || !master || !meta) {
		fprintf(stderr, "usage: mooncake-probe exist|get|wait-code ... "
				"(with WSTORE_MOONCAKE_LIBRARY, "
				"WSTORE_MASTER_SERVER_ADDR, "
				"WSTORE_METADATA_SERVER set)\n");
		return 2;
	}
	dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!dl) {
		fprintf(stderr, "mooncake-probe: %s\n", dlerror());
		return 2;
	}
	minlevel = dlsym(dl, "_ZN3fLI17FLAGS_minloglevelE");
	if (minlevel)
		*minlevel = 3;
	*(void **)&a.create = sym(dl, "mooncake_store_create");
	*(void **)&a.setup = sym(dl, "mooncake_store_setup");
	*(void **)&a.get_size = sym(dl, "mooncake_store_get_size");
	*(void **)&a.get_into = sym(dl, "mooncake_store_get_into");
	*(void **)&a.reg = sym(dl, "mooncake_store_register_buffer");
	h = a.create();
	if (!h || a.setup(h, "127.0.0.1", meta, 0, 16u << 20, "tcp", "",
			  master) != 0) {
		fprintf(stderr, "mooncake-probe: setup failed\n");
		return 2;
	}
	if (!strcmp(argv[1], "get")) {
		rc = get(&a, h, argv[2]);
	} else if (!strcmp(argv[1], "wait-code")) {
		rc = wait_code(&a, h, argc, argv);
	} else {
		for (int i = 2; i < argc; i++)
			printf("%lld\n", (long long)code_of(&a, h, argv[i]));
	}
	fflush(stdout);
	/* skip the client's second-long teardown */
	_exit(rc);
}
