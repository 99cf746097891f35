/*
 * parse.c - parsers of untrusted request text for the server: percent-
 * decoding, routes, the Range header (see parse.h).  No libmicrohttpd
 * here: tests/fuzz/fuzz_serve.c links this file alone.
 *
 * Routes are split before decoding: rest = repo-segment{1,2} verb rev
 * [path...], where the verb is found after one repository segment or two
 * (two first, so that "org/name" wins over a one-segment name), and the
 * path keeps its '/'.  A path-less API request names the repository at
 * the default revision.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <wstore/wstore.h>

#include "parse.h"

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

char *wurl_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1), *q = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int hi, lo;

		if (s[i] != '%') {
			*q++ = s[i];
			continue;
		}
		if (i + 2 >= n || (hi = hexval(s[i + 1])) < 0 ||
		    (lo = hexval(s[i + 2])) < 0 || (hi == 0 && lo == 0))
			goto bad;
		*q++ = (char)(hi * 16 + lo);
		i += 2;
	}
	*q = '\0';
	return out;
bad:
	free(out);
	return NULL;
}

/* Split s (after the leading '/') at '/' into at most max segments,
 * pointing into s; the last keeps the rest.  Returns the count. */
static size_t split(const char *s, const char **seg, size_t *len, size_t max)
{
	size_t n = 0;

	while (n < max) {
		const char *e = n + 1 < max ? strchr(s, '/') : NULL;

		seg[n] = s;
		len[n] = e ? (size_t)(e - s) : strlen(s);
		n++;
		if (!e)
			break;
		s = e + 1;
	}
	return n;
}

static int seg_is(const char *s, size_t n, const char *word)
{
	return n == strlen(word) && !strncmp(s, word, n);
}

void wtarget_free(struct wtarget *t)
{
	free(t->repo);
	free(t->rev);
	free(t->path);
}

/* Decode repo segments [0, k), revision k+1 and the rest as the path. */
static int target_from(struct wtarget *t, const char **seg, size_t *len,
		       size_t n, size_t k)
{
	const char *end;

	memset(t, 0, sizeof(*t));
	end = seg[k - 1] + len[k - 1];
	if (!(t->repo = wurl_decode(seg[0], (size_t)(end - seg[0]))))
		return -1;
	if (n > k + 1 && len[k + 1] &&
	    !(t->rev = wurl_decode(seg[k + 1], len[k + 1])))
		return -1;
	if (n > k + 2 && !(t->path = wurl_decode(seg[k + 2], len[k + 2])))
		return -1;
	return 0;
}

/* Where the verb segment of a repo path is: after one repo segment or
 * two; 0 if neither. */
static size_t verb_at(const char **seg, size_t *len, size_t n,
		      const char *const *verbs, size_t min_after)
{
	for (size_t k = 2; k >= 1; k--)
		for (size_t v = 0; verbs[v]; v++)
			if (n > k + min_after - 1 &&
			    seg_is(seg[k], len[k], verbs[v]))
				return k;
	return 0;
}

int wparse_target(struct wtarget *t, enum wverb *verb, const char *rest,
		  int api)
{
	static const char *const api_verbs[] = { "revision", "tree",
						 "paths-info", "refs", NULL };
	static const char *const file_verbs[] = { "resolve", "raw", NULL };
	const char *seg[5];
	size_t len[5], n = split(rest, seg, len, 5), k;

	memset(t, 0, sizeof(*t));
	/* an API call may stop after the revision; a file needs a path */
	k = verb_at(seg, len, n, api ? api_verbs : file_verbs, api ? 1 : 3);
	/* "refs" ends the path ({repo}/refs), and takes no revision */
	if (api && k && seg_is(seg[k], len[k], "refs") && n != k + 1)
		k = 0;
	if (api && k == 0 && n <= 2)
		k = n;
	if (k == 0 || len[0] == 0 || (k == 2 && len[1] == 0))
		return WPARSE_NO_ROUTE;
	if (k < n)
		/* everything after the revision is one path */
		n = split(rest, seg, len, k + 3);
	if (target_from(t, seg, len, n, k) < 0) {
		wtarget_free(t);
		memset(t, 0, sizeof(*t));
		return WPARSE_BAD_ESCAPE;
	}
	if (!api)
		*verb = seg_is(seg[k], len[k], "raw") ? WVERB_RAW
						      : WVERB_RESOLVE;
	else if (k == n || seg_is(seg[k], len[k], "revision"))
		*verb = WVERB_INFO;
	else if (seg_is(seg[k], len[k], "tree"))
		*verb = WVERB_TREE;
	else if (seg_is(seg[k], len[k], "refs"))
		*verb = WVERB_REFS;
	else
		*verb = WVERB_PATHS_INFO;
	return 0;
}

int wparse_range(const char *h, uint64_t size, uint64_t *a, uint64_t *b)
{
	char *end;
	uint64_t x, y;

	if (!h || strncmp(h, "bytes=", 6) != 0 || strchr(h, ',') || !size)
		return 0;
	h += 6;
	while (*h == ' ')
		h++;
	if (*h == '-') {
		/* the last N bytes */
		if (h[1] < '0' || h[1] > '9')
			return 0;
		errno = 0;
		y = strtoull(h + 1, &end, 10);
		if (errno || *end)
			return 0;
		if (y == 0)
			return -1;
		*a = y >= size ? 0 : size - y;
		*b = size - 1;
		return 1;
	}
	if (*h < '0' || *h > '9')
		return 0;
	errno = 0;
	x = strtoull(h, &end, 10);
	if (errno || *end != '-')
		return 0;
	if (end[1] == '\0') {
		y = size - 1;
	} else {
		const char *ys = end + 1;

		if (*ys < '0' || *ys > '9')
			return 0;
		y = strtoull(ys, &end, 10);
		if (errno || *end || y < x)
			return 0;
	}
	if (x >= size)
		return -1;
	*a = x;
	*b = y >= size ? size - 1 : y;
	return 1;
}

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), 0 if
 * there is none (RFC 3629: no overlong forms, no surrogates, at most
 * U+10FFFF).  *cp gets the code point. */
static size_t utf8_seq(const unsigned char *s, size_t n, unsigned *cp)
{
	size_t len, i;
	unsigned c = s[0], min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, c &= 0x1f, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, c &= 0x0f, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, c &= 0x07, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

int wparse_is_commit(const char *rev)
{
	size_t n = strspn(rev, "0123456789abcdef");

	return n == WSTORE_COMMIT_LEN && !rev[n];
}

int wutf8_valid(const char *s)
{
	size_t n = strlen(s), i = 0, len;
	unsigned cp;

	for (; i < n; i += len)
		if (!(len = utf8_seq((const unsigned char *)s + i, n - i, &cp)))
			return 0;
	return 1;
}

char *wescape(const char *s, int keep_space)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(s), i = 0;
	char *out = malloc(4 * n + 1), *q = out;

	if (!out)
		return NULL;
	while (i < n) {
		const unsigned char *u = (const unsigned char *)s + i;
		unsigned cp = 0;
		size_t len = utf8_seq(u, n - i, &cp);
		int ctl = len == 0 || cp < 0x20 || cp == 0x7f ||
			  (cp >= 0x80 && cp < 0xa0) || cp == '\\' ||
			  (cp == ' ' && !keep_space);

		if (!ctl) {
			memcpy(q, u, len);
			q += len;
			i += len;
			continue;
		}
		/* the byte(s) as \xNN: a terminal sees no escape sequence and
		 * a JSON encoder no invalid UTF-8 */
		if (!len)
			len = 1;
		for (size_t k = 0; k < len; k++) {
			*q++ = '\\';
			*q++ = 'x';
			*q++ = hex[u[k] >> 4];
			*q++ = hex[u[k] & 15];
		}
		i += len;
	}
	*q = '\0';
	return out;
}
