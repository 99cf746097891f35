/*
 * fuzz_names.c - libFuzzer target for the name and key validators:
 * wstore_validate_checkpoint_id and wstore_validate_path against
 * independent reference implementations of the contract's rules
 * (docs/format.md, "Names"), the key builders (a key made from a valid
 * id and path is never truncated), and the index parser
 * (wstore__index_parse: every id it returns is valid, sorted).
 *
 * The input is split at its first NUL: the first part is the name tested,
 * the whole input is also fed to the index parser.  Seeds in
 * tests/fuzz/corpus/names/.  Needs src/lib on the include path.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/helpers.h"
#include "config.h"
#include "digest.h"
#include "error.h"
#include "index.h"
#include "manifest.h"
#include "names.h"
#include "store.h"

static int ref_alnum(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z');
}

static int ref_id(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 255 || !ref_alnum((unsigned char)s[0]))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!ref_alnum((unsigned char)s[i]) && s[i] != '.' &&
		    s[i] != '_' && s[i] != '-')
			return 0;
	return 1;
}

/* Strict UTF-8: no overlongs, no surrogates, nothing above U+10FFFF. */
static int ref_utf8(const unsigned char *s)
{
	while (*s) {
		unsigned cp, n;

		if (*s < 0x80) {
			s++;
			continue;
		}
		if ((*s & 0xe0) == 0xc0)
			cp = *s & 0x1f, n = 1;
		else if ((*s & 0xf0) == 0xe0)
			cp = *s & 0x0f, n = 2;
		else if ((*s & 0xf8) == 0xf0)
			cp = *s & 0x07, n = 3;
		else
			return 0;
		for (unsigned i = 1; i <= n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
		    (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		s += n + 1;
	}
	return 1;
}

static int ref_path(const char *s)
{
	const char *seg = s;

	if (!*s || !ref_utf8((const unsigned char *)s))
		return 0;
	for (const char *p = s;; p++) {
		if (*p == '/' || !*p) {
			size_t n = (size_t)(p - seg);

			if (n == 0 || (n == 1 && seg[0] == '.') ||
			    (n == 2 && seg[0] == '.' && seg[1] == '.'))
				return 0;
			if (!*p)
				return 1;
			seg = p + 1;
		}
	}
}

static void check_index(const uint8_t *data, size_t size)
{
	char **ids = NULL;
	size_t n = 0;

	if (wstore__index_parse(&ids, &n, (const char *)data, size) != 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (!ids[i] || !ref_id(ids[i]))
			abort();
		if (i && strcmp(ids[i - 1], ids[i]) > 0)
			abort();
	}
	if (ids[n])
		abort();
	wstore_strings_free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), key[WSTORE__KEY_MAX], ck[WSTORE__KEY_MAX];
	int id_ok, path_ok;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	id_ok = wstore_validate_checkpoint_id(s) == 0;
	path_ok = wstore_validate_path(s) == 0;
	if (id_ok != ref_id(s) || path_ok != ref_path(s))
		abort();
	if (!id_ok && !*wstore_last_error())
		abort();
	if (id_ok) {
		/* the longest key of a checkpoint must fit unabridged */
		wstore__key_file(key, s, "x");
		wstore__key_chunk(ck, key, 99999999);
		if (strlen(ck) >= sizeof(ck) - 1 ||
		    strncmp(ck, "weight/models/", 14) != 0 ||
		    strncmp(ck + 14, s, strlen(s)) != 0)
			abort();
		wstore__key_manifest(key, s);
		if (strlen(key) !=
		    strlen(s) + strlen("weight/models//manifest"))
			abort();
	}
	if (path_ok && id_ok) {
		wstore__key_file(key, s, s);
		if (strlen(key) != 14 + strlen(s) + 7 + 64)
			abort();
	}
	free(s);
	check_index(data, size);
	return 0;
}
