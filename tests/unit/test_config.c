/*
 * test_config.c - configuration: set/get rules, loading (tests/data/config:
 * good/X.json load; bad/X.json fail with WSTORE_EINVAL and a message that
 * contains the first line of bad/X.err and names the file), environment
 * overlay, merge, atomic save (keeping a file's mode), the default paths
 * (XDG), the layers (system file < user file < environment) and the
 * values checked on set (a server address as a store, quota, evict).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/helpers.h"
#include "config.h"
#include "digest.h"
#include "error.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "unit.h"

static void test_set_get(void)
{
	static const char *const bad_ints[] = {
		"0",  "-1",	    "abc",	   "01", "1.5", " 1",
		"1 ", "2147483648", "99999999999", "",	 "+1",
	};
	const char *const *keys = wstore_config_keys();
	wstore_config *c = NULL;
	size_t n = 0;

	while (keys[n])
		n++;
	CHECK_EQ_INT(n, 36);
	CHECK_EQ_INT(wstore_config_new(&c), 0);
	/* the Hub client's limits: counts and sizes */
	CHECK_EQ_INT(wstore_config_set(c, "hub_max_files", "10"), 0);
	CHECK_EQ_INT(wstore_config_set(c, "hub_max_files", "0"), WSTORE_EINVAL);
	CHECK_EQ_INT(wstore_config_set(c, "hub_max_file_size", "1GiB"), 0);
	CHECK_EQ_INT(wstore_config_set(c, "hub_max_file_size", "x"),
		     WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "hub_max_file_size"));
	CHECK_EQ_INT(wstore_config_set(c, "hub_min_rate", "5GiB"),
		     WSTORE_EINVAL);
	CHECK_EQ_INT(wstore_config_set(c, "hub_min_rate", "1KiB"), 0);
	{
		wstore_hub_options ho = WSTORE_HUB_OPTIONS_INIT;

		CHECK_EQ_INT(wstore_hub_options_from_config(&ho, c), 0);
		CHECK(ho.max_files == 10 && ho.min_rate == 1024);
		CHECK(ho.max_file_size == (1ull << 30) && ho.max_pages == 0);
	}
	CHECK_EQ_INT(wstore_config_set(c, "hub_max_files", NULL), 0);
	CHECK_EQ_INT(wstore_config_set(c, "hub_max_file_size", NULL), 0);
	CHECK_EQ_INT(wstore_config_set(c, "hub_min_rate", NULL), 0);
	/* chunk_size: a size from 1 byte to 4 GiB */
	CHECK_EQ_INT(wstore_config_set(c, "chunk_size", "4GiB"), 0);
	CHECK_EQ_INT(wstore_config_set(c, "chunk_size", "1"), 0);
	CHECK_EQ_INT(wstore_config_set(c, "chunk_size", "4.5GiB"),
		     WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "chunk_size") != NULL);
	CHECK_EQ_INT(wstore_config_set(c, "chunk_size", "0"), WSTORE_EINVAL);
	CHECK_EQ_INT(wstore_config_set(c, "chunk_size", "big"), WSTORE_EINVAL);
	CHECK_EQ_INT(wstore_config_set(c, "chunk_size", NULL), 0);
	for (size_t i = 0; i < n; i++)
		CHECK(wstore_config_get(c, keys[i]) == NULL);
	CHECK_EQ_INT(wstore_config_set(c, "store", "file:///tmp/x"), 0);
	CHECK_STR(wstore_config_get(c, "store"), "file:///tmp/x");
	CHECK_EQ_INT(wstore_config_set(c, "store", "mooncake"), 0);
	CHECK_STR(wstore_config_get(c, "store"), "mooncake");
	CHECK_EQ_INT(wstore_config_set(c, "store", NULL), 0);
	CHECK(wstore_config_get(c, "store") == NULL);
	CHECK(wstore_config_get(c, "nope") == NULL);
	CHECK(wstore_config_get(c, NULL) == NULL);

	CHECK_EQ_INT(wstore_config_set(c, "stroe", "x"), WSTORE_EINVAL);
	CHECK_STR(wstore_last_error(), "unknown config key 'stroe'");
	CHECK_EQ_INT(wstore_config_set(c, NULL, "x"), WSTORE_EINVAL);

	CHECK_EQ_INT(wstore_config_set(c, "replica_num", "3"), 0);
	CHECK_EQ_INT(wstore_config_set(c, "connect_timeout_ms", "2147483647"),
		     0);
	for (size_t i = 0; i < sizeof(bad_ints) / sizeof(*bad_ints); i++) {
		CHECK_EQ_INT(wstore_config_set(c, "replica_num", bad_ints[i]),
			     WSTORE_EINVAL);
		CHECK(strstr(wstore_last_error(),
			     "key 'replica_num' must be a positive integer"));
	}
	CHECK_STR(wstore_config_get(c, "replica_num"), "3");
	CHECK_EQ_INT(wstore_config_set(c, "replica_num", NULL), 0);
	/* a mirror's refresh: whole seconds, at least 1 */
	CHECK_EQ_INT(wstore_config_set(c, "serve_upstream_refresh", "0"),
		     WSTORE_EINVAL);
	CHECK_EQ_INT(wstore_config_set(c, "serve_upstream_refresh", "60"), 0);
	/* non-integer keys take any string */
	CHECK_EQ_INT(wstore_config_set(c, "rdma_devices", ""), 0);
	CHECK_STR(wstore_config_get(c, "rdma_devices"), "");
	wstore_config_free(c);
	wstore_config_free(NULL);
}

static void test_load_good(void)
{
	char *p = unit_data_path("config/good/full.json");
	wstore_config *c = NULL;

	CHECK_EQ_INT(wstore_config_load(&c, p), 0);
	if (!c) {
		fprintf(stderr, "  %s\n", wstore_last_error());
		free(p);
		return;
	}
	CHECK_STR(wstore_config_get(c, "store"), "redis://127.0.0.1:6379/0");
	CHECK_STR(wstore_config_get(c, "replica_num"), "2");
	CHECK_STR(wstore_config_get(c, "connect_timeout_ms"), "1500");
	CHECK_STR(wstore_config_get(c, "command_timeout_ms"), "30000");
	CHECK_STR(wstore_config_get(c, "redis_password"), "s3crét");
	CHECK_STR(wstore_config_get(c, "rdma_devices"), "");
	CHECK(wstore_config_get(c, "key_prefix") == NULL);
	wstore_config_free(c);
	free(p);

	p = unit_data_path("config/good/empty.json");
	CHECK_EQ_INT(wstore_config_load(&c, p), 0);
	CHECK(c && wstore_config_get(c, "store") == NULL);
	wstore_config_free(c);
	free(p);
}

static void check_bad(const char *dir, const char *name)
{
	char *json, *errf, *want = NULL, *nl;
	wstore_config *c = (wstore_config *)1;
	int rc;

	if (asprintf(&json, "%s/%s.json", dir, name) < 0 ||
	    asprintf(&errf, "%s/%s.err", dir, name) < 0)
		abort();
	want = unit_slurp(errf, NULL);
	CHECK(want != NULL);
	if (want && (nl = strchr(want, '\n')))
		*nl = '\0';
	rc = wstore_config_load(&c, json);
	CHECK_EQ_INT(rc, WSTORE_EINVAL);
	CHECK(c == NULL);
	if (want && !strstr(wstore_last_error(), want))
		check_fail("%s: error '%s' lacks '%s'", name,
			   wstore_last_error(), want);
	else
		check_pass();
	/* the message names the file */
	CHECK(strstr(wstore_last_error(), json) != NULL);
	free(want);
	free(json);
	free(errf);
}

static void test_load_bad(void)
{
	char *dir = unit_data_path("config/bad");
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	wstore_config *c;

	CHECK(d != NULL);
	while (d && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		char name[256];

		if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(len - 5), e->d_name);
		check_bad(dir, name);
		n++;
	}
	if (d)
		closedir(d);
	CHECK(n >= 10);
	free(dir);

	CHECK_EQ_INT(wstore_config_load(&c, "/nonexistent/wstore.json"),
		     -ENOENT);
	CHECK(strstr(wstore_last_error(), "'/nonexistent/wstore.json'"));
	CHECK_EQ_INT(wstore__config_parse(&c, "{\"x\":1}", 7, "<mem>"),
		     WSTORE_EINVAL);
	CHECK_STR(wstore_last_error(), "config '<mem>': unknown key 'x'");
}

static void test_env_merge(void)
{
	wstore_config *a = NULL, *b = NULL;

	wstore_config_new(&a);
	wstore_config_new(&b);
	wstore_config_set(a, "store", "file:///a");
	wstore_config_set(a, "protocol", "tcp");
	wstore_config_set(b, "store", "redis://h:1");
	wstore_config_set(b, "replica_num", "4");
	CHECK_EQ_INT(wstore_config_merge(a, b), 0);
	CHECK_STR(wstore_config_get(a, "store"), "redis://h:1");
	CHECK_STR(wstore_config_get(a, "protocol"), "tcp");
	CHECK_STR(wstore_config_get(a, "replica_num"), "4");

	setenv("WSTORE_MASTER_SERVER_ADDR", "10.0.0.1:50051", 1);
	setenv("WSTORE_PROTOCOL", "", 1);
	setenv("WSTORE_COMMAND_TIMEOUT_MS", "250", 1);
	CHECK_EQ_INT(wstore_config_load_env(a), 0);
	CHECK_STR(wstore_config_get(a, "master_server_addr"), "10.0.0.1:50051");
	CHECK_STR(wstore_config_get(a, "protocol"), "tcp");
	CHECK_STR(wstore_config_get(a, "command_timeout_ms"), "250");
	setenv("WSTORE_REPLICA_NUM", "zero", 1);
	CHECK_EQ_INT(wstore_config_load_env(a), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "'WSTORE_REPLICA_NUM'"));
	CHECK_STR(wstore_config_get(a, "replica_num"), "4");
	unsetenv("WSTORE_REPLICA_NUM");
	unsetenv("WSTORE_MASTER_SERVER_ADDR");
	unsetenv("WSTORE_PROTOCOL");
	unsetenv("WSTORE_COMMAND_TIMEOUT_MS");
	wstore_config_free(a);
	wstore_config_free(b);
}

/* systemd's credentials: a file named after a secret key is its value,
 * below the WSTORE_* variables; nothing else is read from there. */
static void test_credentials(void)
{
	char *dir = unit_tmpdir(), path[4200];
	wstore_config *c = NULL;
	FILE *f;

	CHECK(dir != NULL);
	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/serve_token", dir);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (!f) {
		free(dir);
		return;
	}
	fputs("s3cret\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/store", dir);
	if ((f = fopen(path, "w"))) {
		fputs("/not/from/here\n", f);
		fclose(f);
	}
	setenv("CREDENTIALS_DIRECTORY", dir, 1);
	wstore_config_new(&c);
	CHECK_EQ_INT(wstore_config_load_env(c), 0);
	CHECK_STR(wstore_config_get(c, "serve_token"), "s3cret");
	CHECK(wstore_config_get(c, "store") == NULL);
	setenv("WSTORE_SERVE_TOKEN", "fromenv", 1);
	CHECK_EQ_INT(wstore_config_load_env(c), 0);
	CHECK_STR(wstore_config_get(c, "serve_token"), "fromenv");
	unsetenv("WSTORE_SERVE_TOKEN");
	unsetenv("CREDENTIALS_DIRECTORY");
	wstore_config_free(c);
	unit_rmtree(dir);
	free(dir);
}

static void test_save(void)
{
	static const char want[] = "{\n"
				   "  \"command_timeout_ms\": 250,\n"
				   "  \"redis_password\": \"p\\\"w\",\n"
				   "  \"replica_num\": 3,\n"
				   "  \"store\": \"redis://h:1/ü\"\n"
				   "}\n";
	char *tmp = unit_tmpdir(), *path, *text;
	wstore_config *c = NULL, *r = NULL;
	struct stat st;
	DIR *d;
	struct dirent *e;
	int entries = 0;

	if (asprintf(&path, "%s/a/b/config.json", tmp) < 0)
		abort();
	wstore_config_new(&c);
	wstore_config_set(c, "store", "redis://h:1/ü");
	wstore_config_set(c, "replica_num", "3");
	wstore_config_set(c, "command_timeout_ms", "250");
	wstore_config_set(c, "redis_password", "p\"w");
	CHECK_EQ_INT(wstore_config_save(c, path), 0);
	text = unit_slurp(path, NULL);
	CHECK_STR(text, want);
	free(text);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	*strrchr(path, '/') = '\0';
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0700);
	strcat(path, "/config.json");

	CHECK_EQ_INT(wstore_config_load(&r, path), 0);
	CHECK(r && !strcmp(wstore_config_get(r, "store"), "redis://h:1/ü"));
	CHECK(r && strcmp(wstore_config_get(r, "replica_num"), "3") == 0);
	/* overwrite: still one file, no temp files left */
	wstore_config_set(c, "store", NULL);
	CHECK_EQ_INT(wstore_config_save(c, path), 0);
	*strrchr(path, '/') = '\0';
	d = opendir(path);
	while (d && (e = readdir(d)))
		entries += e->d_name[0] != '.';
	if (d)
		closedir(d);
	CHECK_EQ_INT(entries, 1);
	strcat(path, "/config.json");
	text = unit_slurp(path, NULL);
	CHECK(text && !strstr(text, "store"));
	free(text);

	wstore_config_set(c, "store", "bad\xff");
	CHECK_EQ_INT(wstore_config_save(c, path), WSTORE_EINVAL);
	wstore_config_free(c);
	wstore_config_free(r);
	free(path);
	unit_rmtree(tmp);
	free(tmp);
}

/* Save env var name (strdup'ed or NULL) so it can be put back. */
static char *save_env(const char *name)
{
	const char *v = getenv(name);

	return v ? strdup(v) : NULL;
}

static void restore_env(const char *name, char *old)
{
	if (old)
		setenv(name, old, 1);
	else
		unsetenv(name);
	free(old);
}

static void test_default_path(void)
{
	char *old_cfg = getenv("WSTORE_CONFIG"), *old_home = getenv("HOME");
	char *p;

	old_cfg = old_cfg ? strdup(old_cfg) : NULL;
	old_home = old_home ? strdup(old_home) : NULL;
	char *old_xdg = save_env("XDG_CONFIG_HOME");

	unsetenv("XDG_CONFIG_HOME");
	setenv("WSTORE_CONFIG", "/etc/wstore.json", 1);
	p = wstore_config_default_path();
	CHECK_STR(p, "/etc/wstore.json");
	free(p);
	unsetenv("WSTORE_CONFIG");
	setenv("HOME", "/home/u", 1);
	p = wstore_config_default_path();
	CHECK_STR(p, "/home/u/.config/wstore/config.json");
	free(p);
	if (old_cfg)
		setenv("WSTORE_CONFIG", old_cfg, 1);
	if (old_home)
		setenv("HOME", old_home, 1);
	else
		unsetenv("HOME");
	free(old_cfg);
	free(old_home);
	restore_env("XDG_CONFIG_HOME", old_xdg);
}

/* The XDG rules: an absolute $XDG_CONFIG_HOME / $XDG_DATA_HOME wins over
 * ~/.config and ~/.local/share, a relative one is ignored; $WSTORE_HOME
 * beats $XDG_DATA_HOME; $WSTORE_SYSTEM_CONFIG replaces /etc. */
static void test_xdg_paths(void)
{
	static const char *const vars[] = {
		"WSTORE_CONFIG", "HOME",	"XDG_CONFIG_HOME",
		"XDG_DATA_HOME", "WSTORE_HOME", "WSTORE_SYSTEM_CONFIG"
	};
	char *old[6], *p;

	for (size_t i = 0; i < 6; i++) {
		old[i] = save_env(vars[i]);
		unsetenv(vars[i]);
	}
	setenv("HOME", "/home/u", 1);
	setenv("XDG_CONFIG_HOME", "/xdg/cfg", 1);
	p = wstore_config_default_path();
	CHECK_STR(p, "/xdg/cfg/wstore/config.json");
	free(p);
	setenv("XDG_CONFIG_HOME", "relative/cfg", 1);
	p = wstore_config_default_path();
	CHECK_STR(p, "/home/u/.config/wstore/config.json");
	free(p);

	p = wstore_config_default_store();
	CHECK_STR(p, "/home/u/.local/share/wstore");
	free(p);
	setenv("XDG_DATA_HOME", "/xdg/data", 1);
	p = wstore_config_default_store();
	CHECK_STR(p, "/xdg/data/wstore");
	free(p);
	setenv("XDG_DATA_HOME", "data", 1);
	p = wstore_config_default_store();
	CHECK_STR(p, "/home/u/.local/share/wstore");
	free(p);
	setenv("XDG_DATA_HOME", "/xdg/data", 1);
	setenv("WSTORE_HOME", "/srv/store", 1);
	p = wstore_config_default_store();
	CHECK_STR(p, "/srv/store");
	free(p);

	p = wstore_config_system_path();
	CHECK_STR(p, "/etc/wstore/config.json");
	free(p);
	setenv("WSTORE_SYSTEM_CONFIG", "/tmp/sys.json", 1);
	p = wstore_config_system_path();
	CHECK_STR(p, "/tmp/sys.json");
	free(p);
	for (size_t i = 0; i < 6; i++)
		restore_env(vars[i], old[i]);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		abort();
}

/* system file < user file < environment; a missing system or default
 * user file is no error, a missing named one is. */
static void test_layers(void)
{
	char *tmp = unit_tmpdir(), *sys, *user, *missing;
	char *old_sys = save_env("WSTORE_SYSTEM_CONFIG");
	char *old_cfg = save_env("WSTORE_CONFIG");
	char *old_q = save_env("WSTORE_QUOTA");
	wstore_config *c = NULL;

	if (asprintf(&sys, "%s/sys.json", tmp) < 0 ||
	    asprintf(&user, "%s/user.json", tmp) < 0 ||
	    asprintf(&missing, "%s/none.json", tmp) < 0)
		abort();
	unsetenv("WSTORE_CONFIG");
	unsetenv("WSTORE_QUOTA");
	write_text(sys, "{\"store\": \"/sys\", \"quota\": \"1GiB\", "
			"\"evict\": \"lru\"}");
	write_text(user, "{\"store\": \"/user\", \"quota\": \"2GiB\"}");
	setenv("WSTORE_SYSTEM_CONFIG", sys, 1);
	setenv("WSTORE_QUOTA", "3GiB", 1);
	CHECK_EQ_INT(wstore_config_load_layered(&c, user), 0);
	CHECK_STR(wstore_config_get(c, "store"), "/user");
	CHECK_STR(wstore_config_get(c, "quota"), "3GiB");
	CHECK_STR(wstore_config_get(c, "evict"), "lru");
	wstore_config_free(c);
	c = NULL;

	/* a named user file must exist; the system file need not */
	CHECK_EQ_INT(wstore_config_load_layered(&c, missing), -ENOENT);
	CHECK(c == NULL && strstr(wstore_last_error(), "none.json"));
	setenv("WSTORE_SYSTEM_CONFIG", missing, 1);
	CHECK_EQ_INT(wstore_config_load_layered(&c, user), 0);
	CHECK(c && wstore_config_get(c, "evict") == NULL);
	wstore_config_free(c);
	c = NULL;
	/* a broken system file is an error naming it */
	write_text(sys, "{\"store\": ");
	setenv("WSTORE_SYSTEM_CONFIG", sys, 1);
	CHECK_EQ_INT(wstore_config_load_layered(&c, user), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "sys.json") != NULL);

	restore_env("WSTORE_SYSTEM_CONFIG", old_sys);
	restore_env("WSTORE_CONFIG", old_cfg);
	restore_env("WSTORE_QUOTA", old_q);
	free(sys);
	free(user);
	free(missing);
	unit_rmtree(tmp);
	free(tmp);
}

/* Values checked when set: a server address given as a store, a quota
 * that is not a size, an evict policy that is not one. */
static void test_value_rules(void)
{
	static const char *const addresses[] = {
		"host:6379",
		"10.0.0.1:6379",
		"[::1]:6379",
		"redis-1.lan:7000",
	};
	static const char *const stores[] = {
		"/srv/wstore", "rel/dir", "file://host:6379", "redis://h:1",
		"mooncake",    "a:b",	  "dir/host:6379",    "mooncake://h:1",
	};
	wstore_config *c = NULL;

	wstore_config_new(&c);
	for (size_t i = 0; i < sizeof(addresses) / sizeof(*addresses); i++) {
		CHECK_EQ_INT(wstore_config_set(c, "store", addresses[i]),
			     WSTORE_EINVAL);
		CHECK(strstr(wstore_last_error(), "redis://") != NULL);
		CHECK(wstore_config_get(c, "store") == NULL);
	}
	for (size_t i = 0; i < sizeof(stores) / sizeof(*stores); i++)
		CHECK_EQ_INT(wstore_config_set(c, "store", stores[i]), 0);
	CHECK_EQ_INT(wstore_config_set(c, "quota", "100GiB"), 0);
	CHECK_EQ_INT(wstore_config_set(c, "quota", "lots"), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(),
		     "key 'quota' must be a size such as 100GiB, got 'lots'") !=
	      NULL);
	CHECK_EQ_INT(wstore_config_set(c, "evict", "lru"), 0);
	CHECK_EQ_INT(wstore_config_set(c, "evict", "none"), 0);
	CHECK_EQ_INT(wstore_config_set(c, "evict", "fifo"), WSTORE_EINVAL);
	CHECK_STR(wstore_config_get(c, "evict"), "none");
	wstore_config_free(c);
	/* in a file, the error names the file */
	CHECK_EQ_INT(
		wstore__config_parse(&c, "{\"store\":\"h:1\"}", 15, "f.json"),
		WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "f.json") != NULL);
	/* the release, then the build ("+N.gSHA") when built from git */
	CHECK(strncmp(wstore_version(), WSTORE_VERSION,
		      strlen(WSTORE_VERSION)) == 0);
	CHECK(strchr("+", wstore_version()[strlen(WSTORE_VERSION)]) != NULL);
}

/* Saving over a file keeps its mode; a new file is 0600. */
static void test_save_mode(void)
{
	char *tmp = unit_tmpdir(), *path;
	wstore_config *c = NULL;
	struct stat st;

	if (asprintf(&path, "%s/config.json", tmp) < 0)
		abort();
	wstore_config_new(&c);
	wstore_config_set(c, "quota", "1GiB");
	CHECK_EQ_INT(wstore_config_save(c, path), 0);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	CHECK(chmod(path, 0644) == 0);
	CHECK_EQ_INT(wstore_config_save(c, path), 0);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);
	wstore_config_free(c);
	free(path);
	unit_rmtree(tmp);
	free(tmp);
}

void test_config(void)
{
	test_set_get();
	test_load_good();
	test_load_bad();
	test_env_merge();
	test_credentials();
	test_save();
	test_default_path();
	test_xdg_paths();
	test_layers();
	test_value_rules();
	test_save_mode();
}
