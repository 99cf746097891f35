/*
 * test_hubtrust.c - the Hub client's trust rules (hubtrust.c): URLs built
 * with escaped segments (a name never becomes a query or another host),
 * the origin a credential belongs to, repository names, credentials
 * taken out of URLs, names of files that cannot live side by side.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hubtrust.h"
#include "names.h"
#include "unit.h"

static void check_url(const char *endpoint, const char *what, const char *repo,
		      const char *rev, const char *path, const char *want)
{
	char *url = NULL;

	CHECK_EQ_INT(wstore_hub_url(&url, endpoint, what, repo, rev, path), 0);
	CHECK(url && !strcmp(url, want));
	if (url && strcmp(url, want))
		fprintf(stderr, "  got '%s', want '%s'\n", url, want);
	free(url);
}

void test_hubtrust_urls(void)
{
	char *url = NULL;

	check_url(
		"http://127.0.0.1:8080/", "revision", "org/x", "refs/pr/1",
		NULL,
		"http://127.0.0.1:8080/api/models/org/x/revision/refs%2fpr%2f1");
	check_url("https://h.example/mirror", "tree", "org/x", NULL, NULL,
		  "https://h.example/mirror/api/models/org/x/tree/"
		  "main?recursive=true");
	check_url("http://u:pw@h:81", "resolve", "org/x", "abc",
		  "sub/a b?.txt#1",
		  "http://h:81/org/x/resolve/abc/sub/a%20b%3f.txt%231");
	check_url("http://[::1]:9/", "info", "o.r-g/n_1", NULL, NULL,
		  "http://[::1]:9/api/models/o.r-g/n_1");
	/* a name that would turn into a query is no repository */
	CHECK_EQ_INT(wstore_hub_url(&url, "http://h", "revision",
				    "org/secret?-public", NULL, NULL),
		     WSTORE_EINVAL);
	CHECK(!url);
	CHECK(strstr(wstore_last_error(), "invalid repository"));
	CHECK_EQ_INT(wstore_hub_url(&url, "ftp://h", "info", "o/n", NULL, NULL),
		     WSTORE_EINVAL);
	CHECK_EQ_INT(wstore_hub_url(&url, "http://h/?q=1", "info", "o/n", NULL,
				    NULL),
		     WSTORE_EINVAL);
}

void test_hubtrust_origin(void)
{
	wstore__endpoint e;

	CHECK_EQ_INT(
		wstore__endpoint_parse(&e, "HTTPS://User:p%40ss@Hub.Example/"),
		0);
	CHECK(!strcmp(e.scheme, "https") && !strcmp(e.host, "hub.example"));
	CHECK(e.port == 443 && !strcmp(e.prefix, ""));
	CHECK(e.user && !strcmp(e.user, "User"));
	CHECK(e.password && !strcmp(e.password, "p@ss"));
	CHECK(!strstr(e.shown, "p%40ss") && !strstr(e.shown, "User"));
	CHECK(wstore__same_origin(&e, "https://hub.example:443/api?cursor=2"));
	CHECK(wstore__same_origin(&e, "https://HUB.example/x"));
	CHECK(!wstore__same_origin(&e, "http://hub.example/x"));
	CHECK(!wstore__same_origin(&e, "https://hub.example:8443/x"));
	CHECK(!wstore__same_origin(&e, "https://hub.example.evil/x"));
	CHECK(!wstore__same_origin(&e, "https://evil@other/x"));
	CHECK(!wstore__same_origin(&e, "not a url"));
	wstore__endpoint_free(&e);
}

void test_hubtrust_names(void)
{
	static const char *const good[] = { "org/x", "a.b/c-d_e", "A/B9" };
	static const char *const bad[] = {
		"x",	   "org/",     "/x",	     "org/x/y", "org/.x",
		"-o/x",	   "org/a..b", "o rg/x",     "org/x?y", "org/x#y",
		"org/%3F", "org/x\n",  "org/x@main",
	};
	static const char *const fit[] = { "a", "a-b", "b/c", "b0" };
	static const char *const clash[] = { "a", "a-b", "a/c" };
	static const char *const twice[] = { "a", "a" };
	char *out = NULL;

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		CHECK_EQ_INT(wstore_hub_repo_check(good[i]), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		CHECK_EQ_INT(wstore_hub_repo_check(bad[i]), WSTORE_EINVAL);
	/* never printed raw */
	CHECK(!strchr(wstore_last_error(), '\n'));
	CHECK_EQ_INT(wstore__paths_fit(fit, 4), 0);
	CHECK_EQ_INT(wstore__paths_fit(clash, 3), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "'a' is both a file"));
	CHECK_EQ_INT(wstore__paths_fit(twice, 2), WSTORE_EINVAL);
	/* manifests may hold them (the contract's vectors do); imports not */
	CHECK_EQ_INT(wstore_validate_path("a\nb"), 0);
	CHECK_EQ_INT(wstore__path_importable("a\nb"), WSTORE_EINVAL);
	CHECK(!strchr(wstore_last_error(), '\n'));
	CHECK_EQ_INT(wstore__path_importable("a\x1b[2Jb"), WSTORE_EINVAL);
	CHECK_EQ_INT(wstore__path_importable("a/b c"), 0);
	CHECK_EQ_INT(wstore_url_redact(&out, "redis://:secret@h:6379/0"), 0);
	CHECK(out && !strcmp(out, "redis://***@h:6379/0"));
	free(out);
	CHECK_EQ_INT(wstore_url_redact(&out, "http://h/a@b"), 0);
	CHECK(out && !strcmp(out, "http://h/a@b"));
	free(out);
	out = wstore__url_redact("http://u:p@h:1/x", "");
	CHECK(out && !strcmp(out, "http://h:1/x"));
	free(out);
}
