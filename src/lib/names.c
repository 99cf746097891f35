/*
 * names.c - the naming rules of the data contract (docs/format.md
 * sections 1-2): checkpoint ids, relative paths, key construction, file
 * types; plus size strings ("64MiB") used by the CLI and config, and the
 * same sizes in the syntax of SGLang's mooncake:// connector ("64MB").
 *
 * Keys are built into caller buffers of WSTORE__KEY_MAX bytes: the longest
 * possible key (255-char id, 64-hex path hash, chunk index) is far below it.
 */
#include <ctype.h>
#include <stdlib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "names.h"

static int is_alnum(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9');
}

int wstore_validate_checkpoint_id(const char *id)
{
	size_t n;

	if (!id || !*id)
		return wstore__err(
			WSTORE_EINVAL,
			"invalid checkpoint id '': must not be empty");
	n = strlen(id);
	if (n > 255)
		return wstore__err(
			WSTORE_EINVAL,
			"invalid checkpoint id '%.40s...': longer than 255 characters",
			id);
	if (!is_alnum((unsigned char)id[0]))
		return wstore__err(
			WSTORE_EINVAL,
			"invalid checkpoint id '%s': must start with a letter or digit",
			id);
	for (size_t i = 1; i < n; i++) {
		unsigned char c = (unsigned char)id[i];

		if (!is_alnum(c) && c != '.' && c != '_' && c != '-')
			return wstore__err(
				WSTORE_EINVAL,
				"invalid checkpoint id '%s': only letters, digits, '.', '_' and '-' are allowed",
				id);
	}
	return 0;
}

/* A control character (C0 or DEL): a name printed with one could fake
 * output lines or move the cursor. */
static int has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* The error naming path with its control characters as '?'. */
static int control_err(const char *path)
{
	char shown[256];
	size_t i;

	for (i = 0; path[i] && i + 1 < sizeof(shown); i++)
		shown[i] = (unsigned char)path[i] < 0x20 || path[i] == 0x7f
				   ? '?'
				   : path[i];
	shown[i] = '\0';
	return wstore__err(WSTORE_EINVAL,
			   "invalid file path '%s': a control character",
			   shown);
}

int wstore_validate_path(const char *path)
{
	const char *seg, *p;

	if (!path || !*path)
		return wstore__err(WSTORE_EINVAL,
				   "invalid file path '': empty");
	if (path[0] == '/')
		return wstore__err(WSTORE_EINVAL,
				   "invalid file path '%s': absolute", path);
	if (!wstore__utf8_valid(path))
		return wstore__err(WSTORE_EINVAL,
				   "invalid file path '%s': not valid UTF-8",
				   path);
	for (seg = path;; seg = p + 1) {
		size_t n;

		p = strchr(seg, '/');
		n = p ? (size_t)(p - seg) : strlen(seg);
		if (n == 0)
			return wstore__err(
				WSTORE_EINVAL,
				"invalid file path '%s': empty segment", path);
		if ((n == 1 && seg[0] == '.') ||
		    (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return wstore__err(
				WSTORE_EINVAL,
				"invalid file path '%s': '.' or '..' segment",
				path);
		if (!p)
			break;
	}
	return 0;
}

int wstore__utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		unsigned c = *p, n, cp;

		if (c < 0x80) {
			p++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, cp = c & 0x07;
		else
			return 0;
		for (unsigned i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (p[i] & 0x3f);
		}
		/* overlong, surrogate or beyond U+10FFFF */
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return 0;
		p += n + 1;
	}
	return 1;
}

void wstore__key_manifest(char *out, const char *ckpt)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/models/%s/manifest", ckpt);
}

void wstore__key_ckpt_prefix(char *out, const char *ckpt)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/models/%s/", ckpt);
}

void wstore__key_intent(char *out, const char *ckpt)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/intents/models/%s", ckpt);
}

void wstore__key_lease_set(char *out, const char *ckpt)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/leases/models/%s", ckpt);
}

void wstore__key_lease_prefix(char *out, const char *ckpt)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/leases/models/%s/", ckpt);
}

void wstore__key_lease(char *out, const char *ckpt, const char *holder)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/leases/models/%s/%s", ckpt,
		 holder);
}

void wstore__key_meta(char *out, const char *ckpt)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/meta/models/%s", ckpt);
}

void wstore__key_generation(char *out, const char *ckpt)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/meta/generations/%s", ckpt);
}

void wstore__key_file(char *out, const char *ckpt, const char *path)
{
	char ph[65];

	wstore__sha256_hex_str(ph, path);
	snprintf(out, WSTORE__KEY_MAX, "weight/models/%s/files/%s", ckpt, ph);
}

void wstore__key_chunk(char *out, const char *file_key, uint64_t i)
{
	snprintf(out, WSTORE__KEY_MAX, "%s/chunks/%08" PRIu64, file_key, i);
}

void wstore__key_models_index(char *out)
{
	snprintf(out, WSTORE__KEY_MAX, "weight/index/models");
}

void wstore__key_model_index(char *out, const char *model_id)
{
	char mh[65];

	wstore__sha256_hex_str(mh, model_id);
	snprintf(out, WSTORE__KEY_MAX, "weight/index/model/%s", mh);
}

/*
 * Manifests and intent records list every chunk key of a checkpoint (about
 * 150 bytes a chunk: 1 GiB is millions of chunks); an index lists ids;
 * leases, pins and locks are records of a few hundred bytes (a lease set
 * holds one per reader).  Anything larger is not a value wstore wrote.
 */
size_t wstore__key_value_max(const char *key, const char **out_kind)
{
	static const struct {
		const char *prefix, *kind;
		size_t max;
	} kinds[] = {
		{ "weight/locks/", "lock", 64u << 10 },
		{ "weight/leases/", "lease record", 16u << 20 },
		{ "weight/meta/", "pin and last-read record", 1u << 20 },
		{ "weight/index/", "index", 256u << 20 },
		{ "weight/intents/", "intent record", 1u << 30 },
	};
	size_t n = strlen(key);

	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
		if (strncmp(key, kinds[i].prefix, strlen(kinds[i].prefix)))
			continue;
		if (out_kind)
			*out_kind = kinds[i].kind;
		return kinds[i].max;
	}
	if (out_kind)
		*out_kind = n > 9 && strcmp(key + n - 9, "/manifest") == 0
				    ? "manifest"
				    : "value";
	return 1u << 30;
}

const char *wstore__file_type(const char *path)
{
	static const char *const weight_suffixes[] = {
		".bin", ".ckpt", ".gguf", ".pt", ".pth", ".safetensors",
	};
	size_t n = strlen(path);

	for (size_t i = 0;
	     i < sizeof(weight_suffixes) / sizeof(*weight_suffixes); i++) {
		size_t k = strlen(weight_suffixes[i]);

		if (n >= k && strcasecmp(path + n - k, weight_suffixes[i]) == 0)
			return "WEIGHT";
	}
	return "METADATA";
}

/* ---- sizes -------------------------------------------------------------- */

static int unit_shift(const char *u, unsigned *out)
{
	static const char letters[] = "BKMGTP";
	char c = (char)toupper((unsigned char)u[0]);
	const char *pos;

	if (!*u) {
		*out = 0;
		return 0;
	}
	pos = strchr(letters, c);
	if (!pos || !c)
		return -1;
	*out = 10u * (unsigned)(pos - letters);
	u++;
	if (c == 'B')
		return *u ? -1 : 0;
	if (!*u || strcasecmp(u, "B") == 0 || strcasecmp(u, "iB") == 0)
		return 0;
	return -1;
}

int wstore_parse_size(uint64_t *out, const char *text)
{
	const char *p = text;
	unsigned __int128 whole = 0, frac = 0, scale = 1, v;
	unsigned shift;
	int digits = 0;

	if (!text)
		return wstore__err(WSTORE_EINVAL, "invalid size '': empty");
	while (isdigit((unsigned char)*p)) {
		whole = whole * 10 + (unsigned)(*p++ - '0');
		if (whole > UINT64_MAX)
			goto overflow;
		digits++;
	}
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p)) {
			if (scale < 1000000000000000000ull) {
				frac = frac * 10 + (unsigned)(*p - '0');
				scale *= 10;
			}
			p++;
			digits++;
		}
	}
	if (!digits)
		return wstore__err(
			WSTORE_EINVAL,
			"invalid size '%s': expected a number with an optional unit (B, K, M, G, T, P)",
			text);
	while (*p == ' ')
		p++;
	if (unit_shift(p, &shift) < 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid size '%s': unknown unit '%s'", text,
				   p);
	v = (whole << shift) + ((frac << shift) / scale);
	if ((whole << shift) >> shift != whole || v > UINT64_MAX)
		goto overflow;
	if (v == 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid size '%s': must be at least 1 byte",
				   text);
	*out = (uint64_t)v;
	return 0;
overflow:
	return wstore__err(WSTORE_EINVAL, "invalid size '%s': too large", text);
}

void wstore_format_size(char *buf, size_t cap, uint64_t bytes)
{
	static const char *const units[] = { "B",   "KiB", "MiB", "GiB",
					     "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	int u = 0;

	if (bytes < 1024) {
		snprintf(buf, cap, "%" PRIu64 " B", bytes);
		return;
	}
	while (v >= 1024 && u < 6) {
		v /= 1024;
		u++;
	}
	snprintf(buf, cap, "%.2f %s", v, units[u]);
}

int wstore_connector_chunk_size(char *out, size_t cap, uint64_t *out_bytes,
				uint64_t chunk_size)
{
	/* nearest whole KiB, ties up, never 0 */
	uint64_t kib = chunk_size / 1024 + (chunk_size % 1024 >= 512);
	const char *unit = "KB";
	uint64_t n;
	int len;

	if (!kib)
		kib = 1;
	if (kib > UINT64_MAX / 1024)
		kib = UINT64_MAX / 1024;
	n = kib;
	if (kib % (1u << 20) == 0) {
		n = kib >> 20;
		unit = "GB";
	} else if (kib % 1024 == 0) {
		n = kib >> 10;
		unit = "MB";
	}
	if (out_bytes)
		*out_bytes = kib * 1024;
	len = snprintf(out, cap, "%" PRIu64 "%s", n, unit);
	if (len < 0 || (size_t)len >= cap) {
		if (cap)
			*out = '\0';
		return wstore__err(WSTORE_ERANGE,
				   "buffer of %zu bytes too small for a "
				   "connector chunk size",
				   cap);
	}
	if (kib * 1024 != chunk_size)
		return wstore__err(WSTORE_EINVAL,
				   "chunk size %" PRIu64
				   " bytes cannot be written as a connector "
				   "file_chunk_size (a whole number of KB, MB "
				   "or GB); nearest: %s",
				   chunk_size, out);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int wstore__paths_fit(const char *const *sorted, size_t n)
{
	char prefix[4096];

	for (size_t i = 0; i < n; i++) {
		const char *p = sorted[i];

		if (i > 0 && !strcmp(p, sorted[i - 1]))
			return wstore__err(WSTORE_EINVAL,
					   "file '%s' is listed twice", p);
		/* each directory above p must not be a file as well */
		for (const char *s = strchr(p, '/'); s;
		     s = strchr(s + 1, '/')) {
			size_t k = (size_t)(s - p);
			const char *key = prefix;

			if (k >= sizeof(prefix))
				break;
			memcpy(prefix, p, k);
			prefix[k] = '\0';
			if (bsearch(&key, sorted, n, sizeof(*sorted), cmp_str))
				return wstore__err(
					WSTORE_EINVAL,
					"'%s' is both a file and the "
					"directory of '%s'",
					prefix, p);
		}
	}
	return 0;
}

int wstore__path_importable(const char *path)
{
	if (path && has_control(path))
		return control_err(path);
	return wstore_validate_path(path);
}
