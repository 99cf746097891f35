/*
 * fuzz_serve.c - libFuzzer target for the HTTP server's parsers of request
 * text (src/serve/parse.c): routes, percent-decoding and the Range header.
 *
 * The input, cut at its first NUL, is used as a URL path after
 * "/api/models/" and after "/", and as a Range header against a few sizes.
 * Checked: a parsed route has a non-empty repository with no NUL, and a
 * resolve or raw route has a path; a decoded string is never longer than its
 * input and decodes again to itself when it held no '%'; a satisfiable
 * range lies inside the body (a <= b < size); an escaped string
 * (wescape) holds no control byte, no blank when asked, and only
 * well-formed UTF-8 (checked by escaping it again: nothing changes but
 * its backslashes).  Seeds in
 * tests/fuzz/corpus/serve/.
 */
/* fuzz-sources: src/serve/parse.c */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/serve/parse.h"

static void route(const char *s, int api)
{
	struct wtarget t;
	enum wverb verb;

	if (wparse_target(&t, &verb, s, api) != 0)
		return;
	if (!t.repo || !*t.repo)
		abort();
	if ((verb == WVERB_RESOLVE || verb == WVERB_RAW) && !t.path)
		abort();
	/* outside /api/models/ only file routes: resolve and raw */
	if (!api && verb != WVERB_RESOLVE && verb != WVERB_RAW)
		abort();
	wtarget_free(&t);
}

static void escaped(const char *s)
{
	char *e = wescape(s, 0), *again;
	size_t backslashes = 0;

	if (!e)
		return;
	for (const unsigned char *p = (const unsigned char *)e; *p; p++) {
		if (*p < 0x20 || *p == 0x7f || *p == ' ')
			abort();
		backslashes += *p == '\\';
	}
	/* escaping again changes only the backslashes (\\ -> \x5c) */
	if (!(again = wescape(e, 0)) ||
	    strlen(again) != strlen(e) + 3 * backslashes)
		abort();
	free(again);
	free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t sizes[] = { 0, 1, 1000, UINT64_MAX };
	char *s = malloc(size + 1), *d;
	uint64_t a, b;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	route(s, 1);
	route(s, 0);
	if ((d = wurl_decode(s, strlen(s)))) {
		if (strlen(d) > strlen(s))
			abort();
		if (!strchr(s, '%') && strcmp(d, s) != 0)
			abort();
		free(d);
	}
	escaped(s);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
		int rc = wparse_range(s, sizes[i], &a, &b);

		if (rc == 1 && !(a <= b && b < sizes[i]))
			abort();
		if (rc < -1 || rc > 1)
			abort();
	}
	free(s);
	return 0;
}
