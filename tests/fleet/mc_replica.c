/*
 * mc_replica.c - what Mooncake itself does when a storage node holding one
 * of two replicas dies: the raw C API (libmooncake_store.so, dlopen, as
 * wstore loads it), no wstore code in the path.
 *
 *   mc_replica LIB MASTER METADATA LOCAL put PREFIX COUNT MIB REPLICAS
 *   mc_replica LIB MASTER METADATA LOCAL get PREFIX COUNT MIB SECONDS
 *
 * put: COUNT objects PREFIX0.. of MIB MiB each (byte i of object k is
 * (k + i) & 0xff), put_from a registered buffer with replica_num REPLICAS.
 * get: every 0.5 s, get_into every object and compare its bytes; prints one
 * line per round ("t=S ok=N failed=N first error=CODE get_into R MiB/s",
 * R the rate of the whole objects read, timing get_into alone) until every
 * object reads back whole, or SECONDS have passed.  put prints the
 * put_from rate the same way.  LOCAL is this client's address (Mooncake's
 * local_hostname), e.g. the fleet node's own.  Exit 0: all read at the
 * first round; 3: all read at a later round; 1: never.
 * Build: cc -O2 -Ibench -o mc_replica tests/fleet/mc_replica.c
 * bench/mc_client.c -ldl
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_client.h" /* bench/ */

#define now_s mcc_now

static void fill(unsigned char *v, size_t len, int k)
{
	for (size_t i = 0; i < len; i++)
		v[i] = (unsigned char)((size_t)k + i);
}

static int put_all(struct mc_client *a, void *h, char **argv, unsigned char *v,
		   size_t len, int count)
{
	struct mcc_rcfg cfg = { strtoul(argv[9], NULL, 10), 0, 1, NULL, 0 };
	char key[256];

	double busy = 0;

	for (int k = 0; k < count; k++) {
		snprintf(key, sizeof(key), "%s%d", argv[6], k);
		fill(v, len, k);
		double t = now_s();
		int rc = a->put_from(h, key, v, len, &cfg);
		busy += now_s() - t;
		if (rc != 0) {
			fprintf(stderr, "mc_replica: put_from '%s': %d\n", key,
				rc);
			return 1;
		}
	}
	printf("put %d x %zu MiB, replica_num %zu, put_from %.1f MiB/s\n",
	       count, len >> 20, cfg.replica_num,
	       (double)count * (double)(len >> 20) / busy);
	return 0;
}

/* one round: how many objects read back whole; the first error code */
static int get_round(struct mc_client *a, void *h, const char *prefix,
		     unsigned char *v, unsigned char *want, size_t len,
		     int count, int64_t *err, double *busy)
{
	char key[256];
	int ok = 0;

	*busy = 0;
	*err = 0;
	for (int k = 0; k < count; k++) {
		snprintf(key, sizeof(key), "%s%d", prefix, k);
		memset(v, 0, len);
		double t = now_s();
		int64_t n = a->get_into(h, key, v, len);
		*busy += now_s() - t;
		fill(want, len, k);
		if (n == (int64_t)len && memcmp(v, want, len) == 0)
			ok++;
		else if (!*err)
			*err = n == (int64_t)len ? -9999 : n;
	}
	return ok;
}

static int get_all(struct mc_client *a, void *h, char **argv, unsigned char *v,
		   size_t len, int count)
{
	unsigned char *want = malloc(len);
	double t0 = now_s(), limit = atof(argv[9]);
	int64_t err;
	double busy;

	if (!want)
		return 1;
	for (int round = 0;; round++) {
		int ok = get_round(a, h, argv[6], v, want, len, count, &err,
				   &busy);
		printf("t=%.1f ok=%d failed=%d first error=%lld get_into %.1f "
		       "MiB/s\n",
		       now_s() - t0, ok, count - ok, (long long)err,
		       (double)ok * (double)(len >> 20) / busy);
		fflush(stdout);
		if (ok == count)
			return round == 0 ? 0 : 3;
		if (now_s() - t0 > limit)
			return 1;
		usleep(500000);
	}
}

int main(int argc, char **argv)
{
	struct mc_client a;
	void *h;
	unsigned char *v;
	size_t len;
	int count, rc;

	if (argc != 10 || (strcmp(argv[5], "put") && strcmp(argv[5], "get"))) {
		fprintf(stderr, "usage: mc_replica LIB MASTER METADATA LOCAL "
				"put|get PREFIX COUNT MIB REPLICAS|SECONDS\n");
		return 2;
	}
	count = atoi(argv[7]);
	len = strtoull(argv[8], NULL, 10) << 20;
	if (mcc_open(&a, "mc_replica", argv[1], argv[2], argv[3], argv[4]) != 0)
		return 1;
	h = a.h;
	v = aligned_alloc(4096, len);
	if (!v || a.reg(h, v, len) != 0) {
		fprintf(stderr, "mc_replica: register failed\n");
		return 1;
	}
	if (strcmp(argv[5], "put") == 0)
		rc = put_all(&a, h, argv, v, len, count);
	else
		rc = get_all(&a, h, argv, v, len, count);
	fflush(stdout);
	_exit(rc); /* destroy takes a second and adds nothing here */
}
