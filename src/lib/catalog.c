/*
 * catalog.c - checkpoints by name, for front ends: every checkpoint with a
 * manifest (FAILED ones are in no index), the rule that tells a checkpoint
 * id from a model name on a command line, and a free checkpoint id derived
 * from a model id and revision for imports that were not given one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "error.h"
#include "names.h"
#include "store.h"
#include "util.h"

struct all {
	char **ids;
	size_t n, cap;
};

/* For each "weight/models/{ckpt}/manifest" key: collect ckpt. */
static int on_key(const char *key, void *ctx)
{
	struct all *a = ctx;
	const char *ckpt = key + strlen("weight/models/");
	const char *slash = strchr(ckpt, '/');
	char *id;

	if (strncmp(key, "weight/models/", strlen("weight/models/")) != 0 ||
	    !slash || strcmp(slash, "/manifest") != 0)
		return 0;
	if (a->n + 1 >= a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 16;
		char **p = realloc(a->ids, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		a->ids = p;
		a->cap = cap;
	}
	if (!(id = strndup(ckpt, (size_t)(slash - ckpt))))
		return -ENOMEM;
	a->ids[a->n++] = id;
	a->ids[a->n] = NULL;
	return 0;
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

int wstore_list_all(char ***out, size_t *out_count, wstore_store *s)
{
	struct all a = { 0 };
	int rc;

	*out = NULL;
	*out_count = 0;
	if (!s->b->list)
		return wstore__err(
			WSTORE_EUNSUPPORTED,
			"this store cannot list its keys, so it "
			"cannot list checkpoints that are not READY");
	rc = s->b->list(s->b, "weight/models/", on_key, &a);
	if (rc == 0 && !a.ids && !(a.ids = calloc(1, sizeof(char *))))
		rc = -ENOMEM;
	if (rc < 0) {
		wstore_strings_free(a.ids);
		return rc;
	}
	qsort(a.ids, a.n, sizeof(*a.ids), cmp_str);
	*out = a.ids;
	*out_count = a.n;
	return 0;
}

/* One part of ORG/NAME: not empty, ".", ".." or holding a '/'. */
static int part_ok(const char *p, size_t n)
{
	return n > 0 && !memchr(p, '/', n) && !(n == 1 && p[0] == '.') &&
	       !(n == 2 && p[0] == '.' && p[1] == '.');
}

int wstore_parse_name(char **out_model, char **out_revision, const char *arg)
{
	const char *slash = arg ? strchr(arg, '/') : NULL;
	const char *at, *end;

	*out_model = NULL;
	*out_revision = NULL;
	if (!slash)
		return 0;
	at = strchr(slash, '@');
	end = at ? at : slash + strlen(slash);
	if (!part_ok(arg, (size_t)(slash - arg)) ||
	    !part_ok(slash + 1, (size_t)(end - slash - 1)) || (at && !at[1]) ||
	    !wstore__utf8_valid(arg))
		return wstore__err(WSTORE_EINVAL,
				   "invalid checkpoint id or model name '%s': "
				   "a checkpoint id has no '/', a model name "
				   "is ORG/NAME or ORG/NAME@REVISION",
				   arg);
	*out_model = strndup(arg, (size_t)(end - arg));
	*out_revision = at ? strdup(at + 1) : NULL;
	if (!*out_model || (at && !*out_revision)) {
		free(*out_model);
		free(*out_revision);
		*out_model = *out_revision = NULL;
		return -ENOMEM;
	}
	return 1;
}

/* Append n bytes of s to out (at *len, cap bytes), '/' as "--", other
 * ASCII characters outside the id set as '-', and a run of non-ASCII
 * bytes (one or more characters of another script) as one '-'.  Returns
 * whether s had non-ASCII bytes. */
static int put_clean(char *out, size_t *len, size_t cap, const char *s,
		     size_t n)
{
	int wide = 0;

	for (size_t i = 0; i < n && s[i] && *len + 2 < cap; i++) {
		char c = s[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '.' || c == '_';

		if ((unsigned char)c >= 0x80) {
			if (i == 0 || (unsigned char)s[i - 1] < 0x80)
				out[(*len)++] = '-';
			wide = 1;
			continue;
		}
		if (c == '/')
			out[(*len)++] = '-';
		out[(*len)++] = ok ? c : '-';
	}
	out[*len] = '\0';
	return wide;
}

/* Append '-' and 8 hex digits of the SHA-256 of s: what tells apart model
 * ids whose other characters put_clean could not keep. */
static void put_hash(char *out, size_t *len, size_t cap, const char *s)
{
	unsigned char d[32];

	wstore__sha256_once(d, s, strlen(s));
	if (*len + 10 < cap)
		*len += (size_t)snprintf(out + *len, cap - *len,
					 "-%02x%02x%02x%02x", d[0], d[1], d[2],
					 d[3]);
}

/* 1 if id is taken (a manifest, even unreadable, or a lock of an import
 * or delete running), 0 if free, or an error. */
static int taken(wstore_store *s, const char *id)
{
	wstore_manifest *m = NULL;
	char lock[WSTORE__KEY_MAX], *owner = NULL;
	int live, rc = wstore_manifest_read(&m, s, id);

	wstore_manifest_free(m);
	if (rc != WSTORE_ENOTFOUND)
		return rc == 0 || rc == WSTORE_ECORRUPT ? 1 : rc;
	snprintf(lock, sizeof(lock), "models/%s", id);
	rc = wstore_lock_owner(&owner, &live, s, lock);
	free(owner);
	if (rc == WSTORE_ENOTFOUND)
		return 0;
	return rc == 0 ? 1 : rc;
}

int wstore_checkpoint_id_derive(char **out, wstore_store *s,
				const char *model_id, const char *revision)
{
	return wstore__checkpoint_id_derive_mine(out, s, model_id, revision,
						 NULL, NULL);
}

int wstore__checkpoint_id_derive_mine(
	char **out, wstore_store *s, const char *model_id, const char *revision,
	int (*mine)(void *ctx, wstore_store *s, const char *id), void *ctx)
{
	const char *rev = revision && *revision ? revision : "main";
	char base[232], id[256];
	size_t len = 0;
	int rc;

	*out = NULL;
	if (!model_id || !*model_id)
		return wstore__err(WSTORE_EINVAL, "model id must not be empty");
	if (put_clean(base, &len, 200, model_id, strlen(model_id)))
		put_hash(base, &len, 210, model_id);
	put_clean(base, &len, sizeof(base), "--", 2);
	put_clean(base, &len, sizeof(base), rev,
		  wstore__is_hex(rev, 40) ? 12 : 200);
	/* the first character must be a letter or digit */
	if (!((base[0] >= 'a' && base[0] <= 'z') ||
	      (base[0] >= 'A' && base[0] <= 'Z') ||
	      (base[0] >= '0' && base[0] <= '9')))
		base[0] = 'm';
	for (unsigned k = 1; k < 100000; k++) {
		if (k == 1)
			snprintf(id, sizeof(id), "%s", base);
		else
			snprintf(id, sizeof(id), "%s-%u", base, k);
		if ((rc = taken(s, id)) < 0)
			return rc;
		/* taken, but the caller's own: a mine that cannot tell (a
		 * manifest it could not read) is an error, not another id */
		if (rc == 1 && mine && (rc = mine(ctx, s, id)) >= 0)
			rc = !rc;
		if (rc < 0)
			return rc;
		if (rc == 0) {
			wstore__clear_err();
			return (*out = strdup(id)) ? 0 : -ENOMEM;
		}
	}
	return wstore__err(WSTORE_EEXISTS, "no free checkpoint id like '%s'",
			   base);
}
