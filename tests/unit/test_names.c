/*
 * test_names.c - the naming rules of the contract (docs/format.md sections
 * 1-2): checkpoint id and path vectors, key construction, file types, and
 * size strings.  The id vectors are exactly those of the spec.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/helpers.h"
#include "config.h"
#include "digest.h"
#include "error.h"
#include "manifest.h"
#include "names.h"
#include "store.h"
#include "unit.h"

void test_names_ids(void)
{
	static const char *const valid[] = {
		"demo-main", "Qwen3_32B", "model.v2-alpha", "a..b",
		"a",	     "0",	  "A-_.z9",
	};
	static const char *const invalid[] = {
		"",    "a//b", "/a", "a/b/", "a/", ".hidden", "a b", "a/b",
		"a?b", ".",    "..", "-a",   "_a", "a\n",     "é",   "a\xff",
	};
	char id[300];

	for (size_t i = 0; i < sizeof(valid) / sizeof(*valid); i++) {
		CHECK_EQ_INT(wstore_validate_checkpoint_id(valid[i]), 0);
		if (wstore_validate_checkpoint_id(valid[i]))
			fprintf(stderr, "  valid id '%s' refused\n", valid[i]);
	}
	for (size_t i = 0; i < sizeof(invalid) / sizeof(*invalid); i++) {
		CHECK_EQ_INT(wstore_validate_checkpoint_id(invalid[i]),
			     WSTORE_EINVAL);
		CHECK(strstr(wstore_last_error(), "invalid checkpoint id"));
	}
	CHECK_EQ_INT(wstore_validate_checkpoint_id(NULL), WSTORE_EINVAL);

	memset(id, 'a', 255);
	id[255] = '\0';
	CHECK_EQ_INT(wstore_validate_checkpoint_id(id), 0);
	id[255] = 'a';
	id[256] = '\0';
	CHECK_EQ_INT(wstore_validate_checkpoint_id(id), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "longer than 255") != NULL);
}

void test_names_paths(void)
{
	static const char *const valid[] = {
		"config.json",	"sub/dir/x.bin", "a",	 ".hidden",
		"a/.b",		"..a",		 "a..",	 "a/b c/d",
		"ünï/日本.bin", "x/...",	 "a\\b",
	};
	static const char *const invalid[] = {
		"",	 "/", "/etc/x", "../x", "a/../../x", "a/..", "./a",
		"a/./b", ".", "..",	"a//b", "a/",	     "/a",   "a/b/",
	};

	for (size_t i = 0; i < sizeof(valid) / sizeof(*valid); i++) {
		CHECK_EQ_INT(wstore_validate_path(valid[i]), 0);
		if (wstore_validate_path(valid[i]))
			fprintf(stderr, "  valid path '%s' refused\n",
				valid[i]);
	}
	for (size_t i = 0; i < sizeof(invalid) / sizeof(*invalid); i++) {
		CHECK_EQ_INT(wstore_validate_path(invalid[i]), WSTORE_EINVAL);
		CHECK(strstr(wstore_last_error(), "invalid file path") != NULL);
	}
	CHECK_EQ_INT(wstore_validate_path(NULL), WSTORE_EINVAL);
	CHECK_EQ_INT(wstore_validate_path("/etc/x"), WSTORE_EINVAL);
	CHECK_STR(wstore_last_error(), "invalid file path '/etc/x': absolute");
}

void test_names_keys(void)
{
	char key[WSTORE__KEY_MAX], fk[WSTORE__KEY_MAX], hex[65];
	char id[256];

	wstore__key_manifest(key, "demo-main");
	CHECK_STR(key, "weight/models/demo-main/manifest");
	wstore__key_ckpt_prefix(key, "demo-main");
	CHECK_STR(key, "weight/models/demo-main/");
	wstore__key_models_index(key);
	CHECK_STR(key, "weight/index/models");
	wstore__key_model_index(key, "Qwen/Qwen3-235B-A22B");
	CHECK_STR(
		key,
		"weight/index/model/"
		"727d79b621cba232af7f8da7de32124f3d606a378b772f32a7dfde778a12ea04");

	wstore__sha256_hex_str(hex, "");
	CHECK_STR(
		hex,
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	wstore__sha256_hex_str(hex, "config.json");
	wstore__key_file(fk, "demo-main", "config.json");
	CHECK(strncmp(fk, "weight/models/demo-main/files/", 30) == 0);
	CHECK_STR(fk + 30, hex);
	CHECK_EQ_INT(strlen(fk), 30 + 64);

	wstore__key_chunk(key, fk, 0);
	CHECK(strlen(key) > 16 &&
	      strcmp(key + strlen(key) - 16, "/chunks/00000000") == 0);
	CHECK(strncmp(key, fk, strlen(fk)) == 0);
	wstore__key_chunk(key, "k", 12);
	CHECK_STR(key, "k/chunks/00000012");
	wstore__key_chunk(key, "k", 99999999);
	CHECK_STR(key, "k/chunks/99999999");
	wstore__key_chunk(key, "k", 123456789);
	CHECK_STR(key, "k/chunks/123456789");

	/* the longest id still gives complete keys */
	memset(id, 'x', 255);
	id[255] = '\0';
	wstore__key_file(fk, id, "a");
	wstore__key_chunk(key, fk, UINT64_MAX);
	CHECK_EQ_INT(strlen(key), 14 + 255 + 7 + 64 + 8 + 20);

	CHECK_STR(wstore__file_type("model.safetensors"), "WEIGHT");
	CHECK_STR(wstore__file_type("sub/X.SafeTensors"), "WEIGHT");
	CHECK_STR(wstore__file_type("a.bin"), "WEIGHT");
	CHECK_STR(wstore__file_type("a.ckpt"), "WEIGHT");
	CHECK_STR(wstore__file_type("a.gguf"), "WEIGHT");
	CHECK_STR(wstore__file_type("a.pt"), "WEIGHT");
	CHECK_STR(wstore__file_type("a.PTH"), "WEIGHT");
	CHECK_STR(wstore__file_type("config.json"), "METADATA");
	CHECK_STR(wstore__file_type("tokenizer.model"), "METADATA");
	CHECK_STR(wstore__file_type("a.bin.txt"), "METADATA");
	CHECK_STR(wstore__file_type("bin"), "METADATA");
	CHECK_STR(wstore__file_type("a.ptx"), "METADATA");
}

void test_names_sizes(void)
{
	static const struct {
		const char *text;
		uint64_t want;
	} valid[] = {
		{ "64MiB", 64ull << 20 },
		{ "1.5GiB", 3ull << 29 },
		{ "10", 10 },
		{ "1k", 1024 },
		{ "2 TB", 2ull << 40 },
		{ "1P", 1ull << 50 },
		{ "1B", 1 },
		{ "16m", 16ull << 20 },
		{ "0.5K", 512 },
		{ "1KB", 1024 },
		{ "1kib", 1024 },
		{ "18446744073709551615", UINT64_MAX },
		{ "15P", 15ull << 50 },
	};
	static const char *const invalid[] = {
		"0",
		"-1",
		"abc",
		"12XB",
		"",
		"99999999999P",
		"18446744073709551616",
		"0.0001",
		"1 2",
		"1.5.5G",
		"G",
		"1Q",
		"1KK",
		"1BB",
		"16384P",
		" 1",
	};
	uint64_t v;
	char buf[32];

	for (size_t i = 0; i < sizeof(valid) / sizeof(*valid); i++) {
		v = 0;
		CHECK_EQ_INT(wstore_parse_size(&v, valid[i].text), 0);
		CHECK(v == valid[i].want);
		if (v != valid[i].want)
			fprintf(stderr, "  size '%s' -> %llu\n", valid[i].text,
				(unsigned long long)v);
	}
	for (size_t i = 0; i < sizeof(invalid) / sizeof(*invalid); i++) {
		CHECK_EQ_INT(wstore_parse_size(&v, invalid[i]), WSTORE_EINVAL);
		CHECK(strstr(wstore_last_error(), "invalid size") != NULL);
	}
	CHECK_EQ_INT(wstore_parse_size(&v, NULL), WSTORE_EINVAL);

	wstore_format_size(buf, sizeof(buf), 0);
	CHECK_STR(buf, "0 B");
	wstore_format_size(buf, sizeof(buf), 1023);
	CHECK_STR(buf, "1023 B");
	wstore_format_size(buf, sizeof(buf), 3ull << 29);
	CHECK_STR(buf, "1.50 GiB");
	wstore_format_size(buf, sizeof(buf), 64ull << 20);
	CHECK_STR(buf, "64.00 MiB");
	wstore_format_size(buf, 4, 64ull << 20);
	CHECK_EQ_INT(strlen(buf), 3);
}

/* Every unit of the connector's syntax, the largest exact one chosen, and
 * sizes it cannot write, with the nearest that it can. */
void test_names_connector_chunk_size(void)
{
	static const struct {
		uint64_t bytes;
		const char *want;
		int exact;
		uint64_t want_bytes;
	} cases[] = {
		{ 64ull << 20, "64MB", 1, 64ull << 20 },
		{ 1ull << 20, "1MB", 1, 1ull << 20 },
		{ 1024, "1KB", 1, 1024 },
		{ 1024000, "1000KB", 1, 1024000 },
		{ 1536, "2KB", 0, 2048 },
		{ 3ull << 19, "1536KB", 1, 3ull << 19 },
		{ 1ull << 30, "1GB", 1, 1ull << 30 },
		{ 3ull << 29, "1536MB", 1, 3ull << 29 },
		{ 4ull << 30, "4GB", 1, 4ull << 30 },
		{ 5ull << 40, "5120GB", 1, 5ull << 40 },
		{ (1ull << 30) + 1024, "1048577KB", 1, (1ull << 30) + 1024 },
		{ 4097, "4KB", 0, 4096 },
		{ 4095, "4KB", 0, 4096 },
		{ 1535, "1KB", 0, 1024 },
		{ 1000000, "977KB", 0, 1000448 },
		{ (1ull << 20) - 1, "1MB", 0, 1ull << 20 },
		{ (4ull << 30) - 1, "4GB", 0, 4ull << 30 },
		{ 1, "1KB", 0, 1024 },
		{ 0, "1KB", 0, 1024 },
		{ UINT64_MAX, "18014398509481983KB", 0, UINT64_MAX - 1023 },
	};
	char buf[32];
	uint64_t got;

	CHECK_EQ_INT(WSTORE_DEFAULT_CHUNK_SIZE, 67108864);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		int rc = wstore_connector_chunk_size(buf, sizeof(buf), &got,
						     cases[i].bytes);

		CHECK_EQ_INT(rc, cases[i].exact ? 0 : WSTORE_EINVAL);
		CHECK_STR(buf, cases[i].want);
		CHECK(got == cases[i].want_bytes);
		if (!cases[i].exact)
			CHECK(strstr(wstore_last_error(),
				     "cannot be written as a connector") !=
			      NULL);
		/* what the CLI suggests re-importing with parses back */
		CHECK_EQ_INT(wstore_parse_size(&got, buf), 0);
		CHECK(got == cases[i].want_bytes);
	}
	CHECK_EQ_INT(wstore_connector_chunk_size(buf, sizeof(buf), NULL,
						 WSTORE_DEFAULT_CHUNK_SIZE),
		     0);
	CHECK_STR(buf, "64MB");
	CHECK_EQ_INT(wstore_connector_chunk_size(buf, 4, &got, 64ull << 20),
		     WSTORE_ERANGE);
	CHECK_STR(buf, "");
	CHECK_EQ_INT(wstore_connector_chunk_size(buf, 5, NULL, 64ull << 20), 0);
	CHECK_STR(buf, "64MB");
}
