/*
 * fuzz_size.c - libFuzzer target for the size parser (wstore_parse_size)
 * and formatter (wstore_format_size).
 *
 * The input, cut at its first NUL, is parsed.  Checked: a plain decimal
 * number parses to exactly its value (or fails as too large / zero); any
 * value that parses is >= 1; formatting it gives a NUL-terminated string
 * that parses back to within the rounding of its two decimals.  Seeds in
 * tests/fuzz/corpus/size/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wstore/wstore.h"

/* Exact value of an all-digit string; 0 if it is not one or overflows. */
static int plain_decimal(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1; /* overflows */
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), buf[64];
	uint64_t v = 0, back = 0, plain = 0;
	int rc, kind;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	rc = wstore_parse_size(&v, text);
	kind = plain_decimal(text, &plain);
	if (kind == 1 && plain > 0 && (rc != 0 || v != plain))
		abort();
	if (kind == 1 && plain == 0 && rc == 0)
		abort();
	if (kind == -1 && rc == 0)
		abort();
	if (rc == 0) {
		if (v == 0)
			abort();
		memset(buf, 'x', sizeof(buf));
		wstore_format_size(buf, sizeof(buf), v);
		if (!memchr(buf, '\0', sizeof(buf)))
			abort();
		/* format writes EiB from 2^60 on, a unit parse does not take
		 * (and 16.00 EiB would not fit): the round trip stops there */
		if (v >= (1ull << 60))
			goto out;
		if (wstore_parse_size(&back, buf) != 0)
			abort();
		/* two decimals of the unit: relative error below 0.5 % */
		if ((back > v ? back - v : v - back) > v / 200 + 1)
			abort();
	} else if (rc != WSTORE_EINVAL || !*wstore_last_error()) {
		abort();
	}
out:
	free(text);
	return 0;
}
