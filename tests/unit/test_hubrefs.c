/*
 * test_hubrefs.c - the branches and tags a mirror records (hubrefs.c):
 * written and read back per repository, a second write moves a ref and
 * keeps the others, at most 256 refs per repository (the least recently
 * asked goes), names and commits checked, an unreadable record taken for
 * none and rebuilt.
 */
#include <stdio.h>
#include <string.h>

#include "names.h"
#include "store.h"
#include "unit.h"

static const char *const ca = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
static const char *const cb = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";

static void expect_ref(wstore_store *s, const char *repo, const char *ref,
		       const char *want, int64_t want_ms)
{
	char got[WSTORE_COMMIT_LEN + 1];
	int64_t at = -1;
	int rc = wstore_ref_read(got, sizeof(got), &at, s, repo, ref);

	if (!want) {
		CHECK_EQ_INT(rc, WSTORE_ENOTFOUND);
		return;
	}
	CHECK_EQ_INT(rc, 0);
	CHECK_STR(got, want);
	CHECK(at == want_ms);
}

void test_hubrefs(void)
{
	wstore_store *s = NULL;
	char name[32], small[8];

	CHECK_EQ_INT(wstore_open_url(&s, "mem://"), 0);
	expect_ref(s, "org/m", "main", NULL, 0);
	CHECK_EQ_INT(wstore_ref_write(s, "org/m", "main", ca, 1000), 0);
	CHECK_EQ_INT(wstore_ref_write(s, "org/m", "v1", ca, 1001), 0);
	CHECK_EQ_INT(wstore_ref_write(s, "org/other", "main", cb, 5), 0);
	expect_ref(s, "org/m", "main", ca, 1000);
	/* main moves; v1 and the other repository stay */
	CHECK_EQ_INT(wstore_ref_write(s, "org/m", "main", cb, 2000), 0);
	expect_ref(s, "org/m", "main", cb, 2000);
	expect_ref(s, "org/m", "v1", ca, 1001);
	expect_ref(s, "org/other", "main", cb, 5);
	expect_ref(s, "org/m", "v2", NULL, 0);
	{
		char **names = NULL;
		size_t n = 9;

		CHECK_EQ_INT(wstore_ref_list(&names, &n, s, "org/m"), 0);
		CHECK_EQ_INT(n, 2);
		if (n == 2) {
			CHECK_STR(names[0], "main");
			CHECK_STR(names[1], "v1");
		}
		wstore_strings_free(names);
		CHECK_EQ_INT(wstore_ref_list(&names, &n, s, "org/none"), 0);
		CHECK_EQ_INT(n, 0);
		wstore_strings_free(names);
	}
	/* bad input */
	CHECK_EQ_INT(wstore_ref_write(s, "org/m", "main", "ABC", 1),
		     WSTORE_EINVAL);
	CHECK_EQ_INT(wstore_ref_write(s, "org/m", "a\nb", ca, 1),
		     WSTORE_EINVAL);
	CHECK_EQ_INT(wstore_ref_write(s, "", "main", ca, 1), WSTORE_EINVAL);
	CHECK_EQ_INT(
		wstore_ref_read(small, sizeof(small), NULL, s, "org/m", "main"),
		WSTORE_ERANGE);
	/* bounded: 300 refs asked in turn keep the newest 256 */
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		CHECK_EQ_INT(
			wstore_ref_write(s, "org/many", name, ca, 10000 + i),
			0);
	}
	expect_ref(s, "org/many", "t0", NULL, 0);
	expect_ref(s, "org/many", "t43", NULL, 0);
	expect_ref(s, "org/many", "t44", ca, 10044);
	expect_ref(s, "org/many", "t299", ca, 10299);
	/* a damaged record: none, and the next write rebuilds it */
	{
		char key[WSTORE__KEY_MAX], mh[65];

		wstore__sha256_hex_str(mh, "org/m");
		snprintf(key, sizeof(key), "weight/meta/refs/%s", mh);
		CHECK_EQ_INT(wstore__replace(s, key, "{not json", 9), 0);
		expect_ref(s, "org/m", "main", NULL, 0);
		CHECK_EQ_INT(wstore_ref_write(s, "org/m", "main", ca, 3000), 0);
		expect_ref(s, "org/m", "main", ca, 3000);
	}
	wstore_free(s);
}

static int count_bytes(void *ctx, const void *data, size_t n)
{
	(void)data;
	*(size_t *)ctx += n;
	return 0;
}

/* wstore_hub_fetch_file (hubfile.c) without a server: what it refuses
 * before any request, and an empty file checked against its hash (no
 * request either: nothing to fetch). */
void test_hubfile(void)
{
	wstore_hub_options o = WSTORE_HUB_OPTIONS_INIT;
	/* git's blob id of no bytes */
	wstore_hub_file f = { "config.json", 0,
			      "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", "" };
	size_t got = 0;

	o.endpoint = "http://127.0.0.1:9";
	o.repo = "org/m";
	CHECK_EQ_INT(wstore_hub_fetch_file(&o, ca, &f, count_bytes, NULL, &got),
		     0);
	CHECK(got == 0);
	f.oid = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5392";
	CHECK_EQ_INT(wstore_hub_fetch_file(&o, ca, &f, count_bytes, NULL, &got),
		     WSTORE_EVERIFY);
	CHECK(strstr(wstore_last_error(), "config.json") != NULL);
	CHECK_EQ_INT(
		wstore_hub_fetch_file(NULL, ca, &f, count_bytes, NULL, &got),
		WSTORE_EINVAL);
	CHECK_EQ_INT(
		wstore_hub_fetch_file(&o, "abc", &f, count_bytes, NULL, &got),
		WSTORE_EINVAL);
	f.path = "../x";
	CHECK_EQ_INT(wstore_hub_fetch_file(&o, ca, &f, count_bytes, NULL, &got),
		     WSTORE_EINVAL);
	f.path = "config.json";
	f.oid = "not hex";
	CHECK_EQ_INT(wstore_hub_fetch_file(&o, ca, &f, count_bytes, NULL, &got),
		     WSTORE_EINVAL);
	f.oid = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";
	f.size = 2000;
	o.max_file_size = 1000;
	CHECK_EQ_INT(wstore_hub_fetch_file(&o, ca, &f, count_bytes, NULL, &got),
		     WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "hub_max_file_size") != NULL);
	o.repo = "org/../m";
	CHECK_EQ_INT(wstore_hub_fetch_file(&o, ca, &f, count_bytes, NULL, &got),
		     WSTORE_EINVAL);
	o.repo = "org/m";
	o.version = 99;
	CHECK_EQ_INT(wstore_hub_fetch_file(&o, ca, &f, count_bytes, NULL, &got),
		     WSTORE_EINVAL);
}
