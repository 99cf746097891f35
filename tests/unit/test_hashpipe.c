/*
 * test_hashpipe.c - the hash on a thread of its own (hashpipe.c): bytes
 * put in pieces of every size, across the ring's wrap and larger than
 * the ring, hash to what one inline pass gives; an update that fails is
 * the put's or the finish's error; a pipe freed unfinished leaves no
 * thread behind.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "hashpipe.h"
#include "unit.h"

static int up(void *h, const void *data, size_t n)
{
	wstore__sha256_update(h, data, n);
	return 0;
}

/* fails once it has seen more than *(size_t *)h bytes */
static int up_fail(void *h, const void *data, size_t n)
{
	size_t *left = h;

	(void)data;
	if (n > *left)
		return -EIO;
	*left -= n;
	return 0;
}

void test_hashpipe_same_hash(void)
{
	size_t len = 3 * HASHPIPE_RING + 12345, at = 0, step = 1;
	unsigned char *data = malloc(len);
	wstore__sha256 *a = wstore__sha256_new(), *b = wstore__sha256_new();
	wstore__hashpipe *p;
	char ha[65], hb[65];

	CHECK(data && a && b);
	if (!data || !a || !b)
		return;
	for (size_t i = 0; i < len; i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	wstore__sha256_update(a, data, len);
	wstore__sha256_hex(a, ha);
	CHECK((p = wstore__hashpipe_new(up, b)) != NULL);
	/* pieces of 1 byte to more than the ring, never aligned to it */
	while (p && at < len) {
		size_t n = step < len - at ? step : len - at;

		CHECK_EQ_INT(wstore__hashpipe_put(p, data + at, n), 0);
		at += n;
		step = step * 7 + 3;
		if (step > HASHPIPE_RING + 4096)
			step = step % 9973 + 1;
	}
	CHECK_EQ_INT(p ? wstore__hashpipe_finish(p) : -1, 0);
	wstore__hashpipe_free(p);
	wstore__sha256_hex(b, hb);
	CHECK(!strcmp(ha, hb));
	wstore__sha256_free(a);
	wstore__sha256_free(b);
	free(data);
}

void test_hashpipe_errors(void)
{
	size_t left = 1000, n = HASHPIPE_RING / 2;
	unsigned char *data = calloc(1, n);
	wstore__hashpipe *p;
	int rc = 0;

	CHECK(data != NULL);
	if (!data)
		return;
	/* the update fails on the first piece: a later put or the finish
	 * says so */
	CHECK((p = wstore__hashpipe_new(up_fail, &left)) != NULL);
	for (int i = 0; p && i < 8 && rc == 0; i++)
		rc = wstore__hashpipe_put(p, data, n);
	if (rc == 0 && p)
		rc = wstore__hashpipe_finish(p);
	CHECK_EQ_INT(rc, -EIO);
	wstore__hashpipe_free(p);
	/* freed before finish: the thread is joined, nothing leaks (ASan) */
	left = (size_t)-1;
	CHECK((p = wstore__hashpipe_new(up_fail, &left)) != NULL);
	if (p)
		CHECK_EQ_INT(wstore__hashpipe_put(p, data, n), 0);
	wstore__hashpipe_free(p);
	free(data);
}
