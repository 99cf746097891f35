/*
 * redis_raw.c - the raw protocol's SET and GET throughput for big values,
 * as a yardstick for the Redis backend (same server, same run).  A plain
 * hiredis loop: SET through redisCommandArgv, GET through the reply
 * reader, with freed memory kept in the process (mallopt, as the backend
 * does; without it page faults dominate, as measured on the reference machine).
 *
 *   redis_raw HOST PORT PASSWORD|- MIB COUNT [KEYPREFIX]
 *
 * KEYPREFIX (default "raw/") lets a cluster run keep every key on the
 * node given, e.g. "{r}" for the master that owns that hash tag's slot.
 * Prints "raw SET x GB/s  GET y GB/s".  Build: cc -O2 -o redis_raw
 * bench/redis_raw.c -lhiredis
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	redisContext *c;
	redisReply *r;
	size_t len;
	char *v, key[32];
	int count;
	double t0, t1, t2;

	const char *kp = argc > 6 ? argv[6] : "raw/";

	if (argc != 6 && argc != 7) {
		fprintf(stderr,
			"usage: redis_raw HOST PORT PASSWORD|- MIB COUNT [KEYPREFIX]\n");
		return 2;
	}
	mallopt(M_MMAP_MAX, 0);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	mallopt(M_TOP_PAD, 256 << 20);
	len = strtoull(argv[4], NULL, 10) << 20;
	count = atoi(argv[5]);
	c = redisConnect(argv[1], atoi(argv[2]));
	if (!c || c->err) {
		fprintf(stderr, "redis_raw: cannot connect\n");
		return 1;
	}
	if (strcmp(argv[3], "-") != 0)
		freeReplyObject(redisCommand(c, "AUTH %s", argv[3]));
	v = malloc(len);
	memset(v, 7, len);
	t0 = now_s();
	for (int i = 0; i < count; i++) {
		const char *a[] = { "SET", key, v };
		size_t l[] = { 3, 0, len };

		l[1] = (size_t)snprintf(key, sizeof(key), "%s%d", kp, i);
		r = redisCommandArgv(c, 3, a, l);
		if (!r || r->type == REDIS_REPLY_ERROR) {
			fprintf(stderr, "redis_raw: SET failed: %s\n",
				r ? r->str : c->errstr);
			return 1;
		}
		freeReplyObject(r);
	}
	t1 = now_s();
	for (int i = 0; i < count; i++) {
		r = redisCommand(c, "GET %s%d", kp, i);
		if (!r || r->type != REDIS_REPLY_STRING || r->len != len)
			return 1;
		freeReplyObject(r);
	}
	t2 = now_s();
	for (int i = 0; i < count; i++)
		freeReplyObject(redisCommand(c, "DEL %s%d", kp, i));
	printf("raw SET %.2f GB/s  GET %.2f GB/s  (%d x %s MiB)\n",
	       count * (double)len / (t1 - t0) / 1e9,
	       count * (double)len / (t2 - t1) / 1e9, count, argv[4]);
	redisFree(c);
	free(v);
	return 0;
}
