/*
 * mooncake_raw.c - the raw Mooncake C API's put_from and get_into
 * throughput for big values, as a yardstick for the Mooncake backend
 * (same cluster, same run).  Loads libmooncake_store.so with dlopen, as
 * wstore does, registers one buffer per value, and times the whole
 * process as a wstore command would run it: create + setup, the
 * transfers, remove, destroy.
 *
 *   mooncake_raw LIBRARY MASTER METADATA MIB COUNT [KEYPREFIX [warm]]
 *
 * Prints one line: "raw put_from x GB/s  get_into y GB/s  setup s
 * destroy s".  With "warm", puts COUNT values from one buffer and removes
 * them, and prints nothing: a storage node pages its segment in on first
 * write (a page fault every 4 KiB), so a benchmark fills the whole
 * segment once before it measures.
 * Build: cc -O2 -o mooncake_raw bench/mooncake_raw.c bench/mc_client.c -ldl
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mc_client.h"

#define now_s mcc_now

/* Put count values of len bytes from one buffer, then remove them. */
static int warm_up(struct mc_client *c, const char *kp, size_t len, int count,
		   const struct mcc_rcfg *cfg)
{
	char *v = aligned_alloc(4096, len), key[64];
	int rc = 0;

	if (!v || (memset(v, 7, len), c->reg(c->h, v, len)) != 0) {
		fprintf(stderr, "mooncake_raw: register failed\n");
		return 1;
	}
	for (int i = 0; i < count && rc == 0; i++) {
		snprintf(key, sizeof(key), "%s%d", kp, i);
		rc = c->put_from(c->h, key, v, len, cfg);
	}
	for (int i = 0; i < count; i++) {
		snprintf(key, sizeof(key), "%s%d", kp, i);
		c->rm(c->h, key, 1);
	}
	if (rc != 0)
		fprintf(stderr, "mooncake_raw: warm-up put failed (%d)\n", rc);
	fflush(stdout);
	_exit(rc != 0);
}

int main(int argc, char **argv)
{
	struct mc_client c;
	struct mcc_rcfg cfg = { 1, 0, 1, NULL, 0 };
	const char *kp = argc > 6 ? argv[6] : "raw/";
	int warm = argc > 7 && strcmp(argv[7], "warm") == 0;
	double t0, t1, t2, t3, t4, t5;
	size_t len;
	int count, rc = 0;
	char key[64];
	char *v;

	if (argc < 6 || argc > 8) {
		fprintf(stderr, "usage: mooncake_raw LIBRARY MASTER METADATA "
				"MIB COUNT [KEYPREFIX [warm]]\n");
		return 2;
	}
	len = strtoull(argv[4], NULL, 10) << 20;
	count = atoi(argv[5]);
	t0 = now_s();
	if (mcc_open(&c, "mooncake_raw", argv[1], argv[2], argv[3],
		     "127.0.0.1") != 0)
		return 1;
	if (warm)
		return warm_up(&c, kp, len, count, &cfg);
	/* huge pages, as wstore's registered buffers: 4 KiB pages slow
	 * the first touch and the transfers themselves */
	v = aligned_alloc(2u << 20, len * (size_t)count);
	if (!v)
		return 1;
	madvise(v, len * (size_t)count, MADV_HUGEPAGE);
	memset(v, 7, len * (size_t)count);
	for (int i = 0; i < count; i++)
		if (c.reg(c.h, v + (size_t)i * len, len) != 0) {
			fprintf(stderr, "mooncake_raw: register failed\n");
			return 1;
		}
	t1 = now_s();
	for (int i = 0; i < count && rc == 0; i++) {
		snprintf(key, sizeof(key), "%s%d", kp, i);
		rc = c.put_from(c.h, key, v + (size_t)i * len, len, &cfg);
	}
	t2 = now_s();
	for (int i = 0; i < count && rc == 0; i++) {
		snprintf(key, sizeof(key), "%s%d", kp, i);
		if (c.get_into(c.h, key, v + (size_t)i * len, len) !=
		    (int64_t)len)
			rc = -1;
	}
	t3 = now_s();
	for (int i = 0; i < count; i++) {
		snprintf(key, sizeof(key), "%s%d", kp, i);
		c.rm(c.h, key, 1);
	}
	t4 = now_s();
	c.destroy(c.h);
	t5 = now_s();
	if (rc != 0) {
		fprintf(stderr, "mooncake_raw: transfer failed (%d)\n", rc);
		return 1;
	}
	printf("raw put_from %.2f GB/s  get_into %.2f GB/s  setup %.3f s  "
	       "destroy %.3f s\n",
	       len * (double)count / (t2 - t1) / 1e9,
	       len * (double)count / (t3 - t2) / 1e9, t1 - t0, t5 - t4);
	return 0;
}
