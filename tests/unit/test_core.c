/*
 * test_core.c - the core's defences against failures it cannot prevent:
 * a failed allocation while an index is parsed or edited (strdup is
 * replaced here so the k-th copy can be made to fail).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "store.h"
#include "unit.h"

/* strdup fails when this reaches 0 (counted down by each call); < 0:
 * never.  Defined here, it replaces libc's for the whole unit binary,
 * which links the library statically. */
static int strdup_fail_in = -1;

char *strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p;

	if (strdup_fail_in == 0) {
		errno = ENOMEM;
		return NULL;
	}
	if (strdup_fail_in > 0)
		strdup_fail_in--;
	p = malloc(n);
	if (p)
		memcpy(p, s, n);
	return p;
}

/* Every copy of a parsed index failing in turn: ENOMEM and nothing out,
 * never a list with a hole in it. */
static void index_parse_nomem(void)
{
	static const char json[] = "[\"c-3\",\"a-1\",\"b-2\"]";
	int ok = 0;

	for (int k = 0; k < 8 && !ok; k++) {
		char **ids = (char **)1;
		size_t n = 99;
		int rc;

		strdup_fail_in = k;
		rc = wstore__index_parse(&ids, &n, json, strlen(json));
		strdup_fail_in = -1;
		if (rc == 0) {
			ok = 1;
			CHECK_EQ_INT(k, 3);
			CHECK_EQ_INT(n, 3);
			CHECK_STR(ids[0], "a-1");
			CHECK_STR(ids[2], "c-3");
			CHECK(ids[3] == NULL);
			wstore_strings_free(ids);
		} else {
			CHECK_EQ_INT(rc, -ENOMEM);
			CHECK(ids == NULL);
			CHECK_EQ_INT(n, 0);
		}
	}
	CHECK(ok);
}

/* Adding to an index while copies fail: an error or a complete index. */
static void index_add_nomem(void)
{
	wstore_backend *b = NULL;
	wstore_store *s = NULL;
	int done = 0;

	CHECK(wstore_backend_mem_new(&b, 0) == 0);
	if (!b || wstore_open_backend(&s, b) < 0)
		return;
	CHECK(wstore__index_add(s, "weight/index/models", "a-1", NULL) == 0);
	CHECK(wstore__index_add(s, "weight/index/models", "c-3", NULL) == 0);
	for (int k = 0; k < 16 && !done; k++) {
		int rc;

		strdup_fail_in = k;
		rc = wstore__index_add(s, "weight/index/models", "b-2", NULL);
		strdup_fail_in = -1;
		if (rc == 0)
			done = 1;
		else
			CHECK_EQ_INT(rc, -ENOMEM);
	}
	CHECK(done);
	{
		char *v = NULL;

		CHECK(wstore__get_alloc(s, "weight/index/models", &v, NULL) ==
		      0);
		CHECK_STR(v, "[\"a-1\",\"b-2\",\"c-3\"]");
		free(v);
	}
	wstore_free(s);
}

void test_core_index_nomem(void)
{
	index_parse_nomem();
	index_add_nomem();
}
