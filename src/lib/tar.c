/*
 * tar.c - the POSIX tar of bundles (tar.h): ustar headers written and
 * read as a stream, with a pax extended header for what ustar cannot
 * hold (a name over 100 bytes, a size of 8 GiB or more).
 *
 * A ustar header is one 512-byte block: name[100] mode[8] uid[8] gid[8]
 * size[12] mtime[12] chksum[8] typeflag[1] linkname[100] magic[6]
 * version[2] uname[32] gname[32] devmajor[8] devminor[8] prefix[155].
 * Numbers are octal, NUL- or space-terminated; the checksum is the sum
 * of the header's bytes with chksum counted as eight spaces.  A pax 'x'
 * entry's data is records "<len> <key>=<value>\n" that apply to the
 * entry after it.  Data is padded to a block; the archive ends with two
 * zero blocks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "tar.h"
#include "util.h"

#define B WSTORE__TAR_BLOCK
#define USTAR_SIZE_MAX 077777777777ull /* 11 octal digits */
#define BUF_CAP ((size_t)1 << 20)

/* Field offsets and lengths of a ustar header. */
enum {
	O_NAME = 0,
	O_MODE = 100,
	O_UID = 108,
	O_GID = 116,
	O_SIZE = 124,
	O_MTIME = 136,
	O_CHKSUM = 148,
	O_TYPE = 156,
	O_MAGIC = 257,
	O_VERSION = 263,
	O_PREFIX = 345,
};

/* ---- writing ------------------------------------------------------------ */

/* len - 1 octal digits (v must fit), then NUL. */
static void octal(char *field, size_t len, uint64_t v)
{
	field[len - 1] = '\0';
	for (size_t i = len - 1; i-- > 0; v >>= 3)
		field[i] = (char)('0' + (v & 7));
}

static void checksum(char *h)
{
	unsigned sum = 0;

	memset(h + O_CHKSUM, ' ', 8);
	for (size_t i = 0; i < B; i++)
		sum += (unsigned char)h[i];
	snprintf(h + O_CHKSUM, 8, "%06o", sum);
	h[O_CHKSUM + 7] = ' ';
}

/* One ustar block: name (at most 100 bytes), size, type. */
static void ustar(char *h, const char *name, uint64_t size, int64_t mtime,
		  char type)
{
	memset(h, 0, B);
	memcpy(h + O_NAME, name, strnlen(name, 100));
	octal(h + O_MODE, 8, 0644);
	octal(h + O_UID, 8, 0);
	octal(h + O_GID, 8, 0);
	octal(h + O_SIZE, 12, size);
	octal(h + O_MTIME, 12, mtime > 0 ? (uint64_t)mtime : 0);
	h[O_TYPE] = type;
	memcpy(h + O_MAGIC, "ustar", 6);
	memcpy(h + O_VERSION, "00", 2);
	checksum(h);
}

/* Append the pax record "<len> key=value\n" to out at *n (cap bytes). */
static int pax_record(char *out, size_t cap, size_t *n, const char *key,
		      const char *value)
{
	size_t body = strlen(key) + strlen(value) + 3, len = body, digits;

	/* the length counts its own digits */
	for (;;) {
		char tmp[24];

		digits = (size_t)snprintf(tmp, sizeof(tmp), "%zu", len);
		if (body + digits == len)
			break;
		len = body + digits;
	}
	if (*n + len >= cap)
		return WSTORE_ERANGE;
	snprintf(out + *n, cap - *n, "%zu %s=%s\n", len, key, value);
	*n += len;
	return 0;
}

int wstore__tar_header(char *out, size_t cap, size_t *out_len, const char *name,
		       uint64_t size, int64_t mtime)
{
	int need_pax = strlen(name) > 100 || size > USTAR_SIZE_MAX;
	char pax[4096 + 64], num[24];
	size_t n = 0, padded;
	int rc = 0;

	*out_len = 0;
	if (!need_pax) {
		if (cap < B)
			return WSTORE_ERANGE;
		ustar(out, name, size, mtime, '0');
		*out_len = B;
		return 0;
	}
	rc = pax_record(pax, sizeof(pax), &n, "path", name);
	snprintf(num, sizeof(num), "%" PRIu64, size);
	if (rc == 0 && size > USTAR_SIZE_MAX)
		rc = pax_record(pax, sizeof(pax), &n, "size", num);
	padded = n + wstore__tar_pad(n);
	if (rc < 0 || cap < 2 * B + padded)
		return WSTORE_ERANGE;
	ustar(out, ".wstore-pax", n, mtime, 'x');
	memset(out + B, 0, padded);
	memcpy(out + B, pax, n);
	ustar(out + B + padded, name, size > USTAR_SIZE_MAX ? 0 : size, mtime,
	      '0');
	*out_len = 2 * B + padded;
	return 0;
}

size_t wstore__tar_pad(uint64_t size)
{
	return (size_t)((B - size % B) % B);
}

/* ---- reading ------------------------------------------------------------ */

int wstore__tar_in_init(wstore__tar_in *t, int fd, const char *what)
{
	memset(t, 0, sizeof(*t));
	t->fd = fd;
	t->what = what;
	t->cap = BUF_CAP;
	t->buf = malloc(t->cap);
	return t->buf ? 0 : -ENOMEM;
}

void wstore__tar_in_free(wstore__tar_in *t)
{
	free(t->buf);
	t->buf = NULL;
}

/* Refill the buffer: bytes now in it, 0 at EOF, or an error. */
static ssize_t fill(wstore__tar_in *t)
{
	for (;;) {
		ssize_t r = read(t->fd, t->buf, t->cap);

		/* a stream that stalls must not outlast ^C */
		if (r < 0 && errno == EINTR && wstore__interrupted())
			return wstore__err(WSTORE_ECANCELED, "%s: interrupted",
					   t->what);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return wstore__errc(-errno, "cannot read %s", t->what);
		t->pos = 0;
		t->len = (size_t)r;
		return r;
	}
}

int wstore__tar_read(wstore__tar_in *t, void *dst, size_t n)
{
	char *d = dst;

	while (n > 0) {
		size_t k;

		if (t->pos == t->len) {
			ssize_t r;

			/* a large read skips the buffer */
			if (n >= t->cap) {
				r = read(t->fd, d, n);
				if (r < 0 && errno == EINTR &&
				    wstore__interrupted())
					return wstore__err(WSTORE_ECANCELED,
							   "%s: interrupted",
							   t->what);
				if (r < 0 && errno == EINTR)
					continue;
				if (r < 0)
					return wstore__errc(-errno,
							    "cannot read %s",
							    t->what);
				if (r == 0)
					return wstore__err(WSTORE_EINVAL,
							   "%s is truncated",
							   t->what);
				d += r;
				n -= (size_t)r;
				t->offset += (uint64_t)r;
				continue;
			}
			r = fill(t);
			if (r < 0)
				return (int)r;
			if (r == 0)
				return wstore__err(WSTORE_EINVAL,
						   "%s is truncated", t->what);
		}
		k = t->len - t->pos < n ? t->len - t->pos : n;
		memcpy(d, t->buf + t->pos, k);
		t->pos += k;
		t->offset += k;
		d += k;
		n -= k;
	}
	return 0;
}

int wstore__tar_skip(wstore__tar_in *t, uint64_t n)
{
	char tmp[B];

	while (n > 0) {
		size_t k = n < B ? (size_t)n : B;
		int rc = wstore__tar_read(t, tmp, k);

		if (rc < 0)
			return rc;
		n -= k;
	}
	return 0;
}

void wstore__tar_drain(wstore__tar_in *t, uint64_t limit)
{
	uint64_t seen = t->len - t->pos;

	t->pos = t->len;
	while (seen < limit && fill(t) > 0)
		seen += t->len;
	t->pos = t->len;
}

/* An octal field: 0 with *out, or -1 (not octal, or too large). */
static int parse_octal(const char *f, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	while (i < len && f[i] == ' ')
		i++;
	if (i == len || f[i] < '0' || f[i] > '7')
		return -1;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = v * 8 + (uint64_t)(f[i] - '0');
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -1;
	*out = v;
	return 0;
}

static int checksum_ok(const unsigned char *h)
{
	unsigned sum = 0;
	int ssum = 0;
	uint64_t want = 0;

	for (size_t i = 0; i < B; i++) {
		unsigned char c =
			i >= O_CHKSUM && i < O_CHKSUM + 8 ? ' ' : h[i];

		sum += c;
		ssum += (signed char)c;
	}
	return parse_octal((const char *)h + O_CHKSUM, 8, &want) == 0 &&
	       (want == sum || want == (uint64_t)(unsigned)ssum);
}

static const char *kind_of(char type)
{
	switch (type) {
	case '0':
	case '\0': return "regular file";
	case '1': return "hard link";
	case '2': return "symbolic link";
	case '3': return "character device";
	case '4': return "block device";
	case '5': return "directory";
	case '6': return "FIFO";
	case '7': return "contiguous file";
	case 'L':
	case 'K': return "GNU long-name entry";
	default: return "entry of an unknown type";
	}
}

/* Apply the pax records of data (n bytes) to *path and *size. */
static int parse_pax(wstore__tar_in *t, const char *data, size_t n, char **path,
		     uint64_t *size, int *has_size)
{
	size_t off = 0;

	while (off < n) {
		char *end = NULL, *eq, *rec;
		unsigned long long len = strtoull(data + off, &end, 10);
		size_t klen;

		if (!end || *end != ' ' || len == 0 || len > n - off ||
		    data[off + len - 1] != '\n')
			return wstore__err(WSTORE_EINVAL,
					   "%s: malformed pax header at byte "
					   "%" PRIu64,
					   t->what, t->offset);
		rec = end + 1;
		eq = memchr(rec, '=', (size_t)(data + off + len - 1 - rec));
		if (!eq)
			return wstore__err(WSTORE_EINVAL,
					   "%s: malformed pax record", t->what);
		klen = (size_t)(eq - rec);
		if (klen == 4 && !memcmp(rec, "path", 4)) {
			free(*path);
			*path = strndup(eq + 1, (size_t)(data + off + len - 1 -
							 eq - 1));
			if (!*path)
				return -ENOMEM;
		} else if (klen == 4 && !memcmp(rec, "size", 4)) {
			char *e2;
			unsigned long long v = strtoull(eq + 1, &e2, 10);

			if (e2 != data + off + len - 1 || eq[1] < '0' ||
			    eq[1] > '9')
				return wstore__err(WSTORE_EINVAL,
						   "%s: pax size is not a "
						   "number",
						   t->what);
			*size = v;
			*has_size = 1;
		}
		off += (size_t)len;
	}
	return 0;
}

/* Read one header block into h: 1, 0 for a zero block, or an error. */
static int read_block(wstore__tar_in *t, unsigned char *h)
{
	int rc = wstore__tar_read(t, h, B);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < B; i++)
		if (h[i])
			return 1;
	return 0;
}

/* A pax 'x' entry of n bytes: its records into *path, *size. */
static int read_pax(wstore__tar_in *t, uint64_t n, char **path, uint64_t *size,
		    int *has_size)
{
	char *data;
	int rc;

	if (n > WSTORE__TAR_PAX_MAX)
		return wstore__err(WSTORE_EINVAL,
				   "%s: a pax header of %" PRIu64
				   " bytes (at most %zu)",
				   t->what, n, WSTORE__TAR_PAX_MAX);
	if (!(data = malloc(n + 1)))
		return -ENOMEM;
	rc = wstore__tar_read(t, data, (size_t)n);
	if (rc == 0)
		rc = wstore__tar_skip(t, wstore__tar_pad(n));
	if (rc == 0)
		rc = parse_pax(t, data, (size_t)n, path, size, has_size);
	free(data);
	return rc;
}

/* The name of ustar header h: prefix/name, malloc'ed. */
static char *ustar_name(const unsigned char *h)
{
	size_t nl = strnlen((const char *)h + O_NAME, 100),
	       pl = strnlen((const char *)h + O_PREFIX, 155);
	char *s = malloc(nl + pl + 2);

	if (!s)
		return NULL;
	if (pl)
		memcpy(s, h + O_PREFIX, pl), s[pl] = '/';
	memcpy(s + (pl ? pl + 1 : 0), h + O_NAME, nl);
	s[nl + (pl ? pl + 1 : 0)] = '\0';
	return s;
}

int wstore__tar_next(wstore__tar_in *t, wstore__tar_entry *e)
{
	unsigned char h[B];
	char *path = NULL;
	uint64_t size = 0, psize = 0;
	int rc, has_size = 0;

	memset(e, 0, sizeof(*e));
	for (int pax = 0;; pax++) {
		uint64_t at = t->offset;

		rc = read_block(t, h);
		if (rc == 0) {
			/* the first zero block: the second must follow */
			rc = path ? wstore__err(WSTORE_EINVAL,
						"%s: a pax header with no "
						"entry after it",
						t->what)
				  : read_block(t, h);
			free(path);
			if (rc == 0)
				return 0;
			return rc < 0 ? rc
				      : wstore__err(WSTORE_EINVAL,
						    "%s: data after a zero "
						    "block at byte %" PRIu64,
						    t->what, at);
		}
		if (rc < 0)
			break;
		if (!checksum_ok(h) || memcmp(h + O_MAGIC, "ustar", 5) != 0) {
			rc = wstore__err(WSTORE_EINVAL,
					 "%s: no valid tar header at byte "
					 "%" PRIu64 " (damaged, or not a "
					 "bundle)",
					 t->what, at);
			break;
		}
		if (parse_octal((const char *)h + O_SIZE, 12, &size) < 0) {
			rc = wstore__err(WSTORE_EINVAL,
					 "%s: the size of the entry at byte "
					 "%" PRIu64 " is not an octal number",
					 t->what, at);
			break;
		}
		if (h[O_TYPE] == 'x' && pax == 0) {
			rc = read_pax(t, size, &path, &psize, &has_size);
			if (rc < 0)
				break;
			continue;
		}
		if (h[O_TYPE] == 'x' || h[O_TYPE] == 'g') {
			rc = wstore__err(
				WSTORE_EINVAL,
				"%s: %s pax header at byte %" PRIu64
				" (not written by wstore)",
				t->what,
				h[O_TYPE] == 'g' ? "a global" : "a second", at);
			break;
		}
		e->type = h[O_TYPE] ? (char)h[O_TYPE] : '0';
		e->kind = kind_of(e->type);
		e->size = has_size ? psize : size;
		e->name = path ? path : ustar_name(h);
		return e->name ? 1 : -ENOMEM;
	}
	free(path);
	return rc;
}
