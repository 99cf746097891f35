/*
 * main.c - runs every unit test function, or those whose name contains
 * argv[1], and prints the summary line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "unit.h"

CHECK_COUNTERS;

/* clang-format off */
#define UNIT_TESTS(X) \
	X(test_names_ids) \
	X(test_hubtrust_urls) \
	X(test_hubtrust_origin) \
	X(test_hubtrust_names) \
	X(test_hashpipe_same_hash) \
	X(test_hashpipe_errors) \
	X(test_names_paths) \
	X(test_names_keys) \
	X(test_names_sizes) \
	X(test_names_connector_chunk_size) \
	X(test_import_default_chunk_size) \
	X(test_manifest_golden) \
	X(test_manifest_parse_errors) \
	X(test_manifest_roundtrip) \
	X(test_config) \
	X(test_backend_file) \
	X(test_backend_mem) \
	X(test_backend_fault) \
	X(test_whole_layouts) \
	X(test_reuse_chunks) \
	X(test_reuse_file_store) \
	X(test_tar_headers) \
	X(test_store) \
	X(test_durable) \
	X(test_thread_start_blocks_signals) \
	X(test_split_runs_every_part) \
	X(test_split_busy_pool) \
	X(test_split_large_preads) \
	X(test_safetensors_data) \
	X(test_safetensors_mutations) \
	X(test_read_api) \
	X(test_read_concurrent) \
	X(test_read_legacy) \
	X(test_read_damaged) \
	X(test_read_chunk_fd) \
	X(test_check_structure) \
	X(test_gguf) \
	X(test_gguf_summary) \
	X(test_pull_basic) \
	X(test_pull_hostile) \
	X(test_pull_corrupt) \
	X(test_pull_partial_resume) \
	X(test_pull_partial_reimport) \
	X(test_pull_partial_owners) \
	X(test_pull_partial_failure) \
	X(test_pull_resume) \
	X(test_pull_not_ready) \
	X(test_resolve) \
	X(test_hubrefs) \
	X(test_hubfile) \
	X(test_core_index_nomem) \
	X(test_core_reported_sizes) \
	X(test_core_source_fifo) \
	X(test_core_import_lock_lost) \
	X(test_replace_read) \
	X(test_replace_read_by_manifest) \
	X(test_replace_lost) \
	X(test_replace_chunk_fd) \
	X(test_replace_pull) \
	X(test_replace_guard_bind) \
	X(test_replace_check_fails) \
	X(test_replace_file_store) \
	X(test_replace_verify) \
	X(test_replace_threads) \
	X(test_replace_unchanged) \
	X(test_core_nofollow) \
	X(test_core_urls) \
	X(test_catalog_names) \
	X(test_catalog_derive) \
	X(test_catalog_list_all) \
	X(test_source_rules) \
	X(test_source_hub) \
	X(test_owner)
/* clang-format on */

#define DECL(name) void name(void);
UNIT_TESTS(DECL)
#undef DECL

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
#define ENTRY(name) { #name, name },
	UNIT_TESTS(ENTRY)
#undef ENTRY
};

char *unit_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *dir;

	if (asprintf(&dir, "%s/wstore-unit-XXXXXX", base ? base : "/tmp") < 0)
		abort();
	if (!mkdtemp(dir))
		abort();
	return dir;
}

void unit_rmtree(const char *dir)
{
	char *cmd;

	if (!dir || strncmp(dir, "/", 1) != 0 || !strstr(dir, "wstore-unit-"))
		return;
	if (asprintf(&cmd, "rm -rf '%s'", dir) < 0)
		abort();
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", dir);
	free(cmd);
}

char *unit_data_path(const char *rel)
{
	const char *env = getenv("WSTORE_TEST_DATA");
	const char *cands[] = { env, "tests/data", NULL };
	char base[4096], *out;
	struct stat st;

	/* __FILE__ is ".../tests/unit/main.c"; meson builds from build/ */
	snprintf(base, sizeof(base), "%s", __FILE__);
	if (strstr(base, "/unit/"))
		strcpy(strstr(base, "/unit/"), "/data");
	cands[2] = base;
	for (size_t i = 0; i < 3; i++) {
		if (!cands[i] || stat(cands[i], &st) != 0)
			continue;
		if (asprintf(&out, "%s/%s", cands[i], rel) < 0)
			abort();
		return out;
	}
	if (asprintf(&out, "tests/data/%s", rel) < 0)
		abort();
	return out;
}

char *unit_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, r;

	if (!f)
		return NULL;
	do {
		if (n + 4096 > cap) {
			cap = cap * 2 + 4096;
			buf = realloc(buf, cap + 1);
			if (!buf)
				abort();
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

int main(int argc, char **argv)
{
	for (size_t i = 0; i < sizeof(tests) / sizeof(*tests); i++) {
		if (argc > 1 && !strstr(tests[i].name, argv[1]))
			continue;
		check_current = tests[i].name;
		tests[i].fn();
	}
	return check_summary("unit");
}
