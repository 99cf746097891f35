/*
 * cmd_inspect.c - wstore model inspect: a checkpoint's manifest, as a
 * summary with a file table, or with --json the manifest itself.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <wstore/read.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model inspect ID [--tensors]\n"
	"\n"
	"Show a checkpoint's manifest: ids, status, chunk size (with the\n"
	"file_chunk_size SGLang's mooncake:// connector needs), files with\n"
	"sizes, chunk counts and SHA-256, and a tensor summary of each\n"
	"weight file.  With --json, print the manifest exactly as the data\n"
	"contract serialises it (each file record has its chunk_size).\n"
	"\n"
	"A summary reads the file's header.  On a store that cannot read part\n"
	"of a chunk (Mooncake) that costs a whole chunk per file, so there\n"
	"summaries are shown for files whose chunks are at most 4 MiB, and\n"
	"for every file with --tensors.\n";

/* Beyond this, a header read that must fetch a whole chunk is skipped
 * unless --tensors asks for it. */
#define CHEAP_CHUNK (4ull << 20)

/* Tensor summary of one file ("" when it is not a weight format). */
static void summary(char *out, size_t cap, wstore_checkpoint *ck,
		    const char *path)
{
	wstore_file_summary_info si;
	wstore_file *f = NULL;

	out[0] = '\0';
	if (!ck || wstore_file_open(&f, ck, path) < 0)
		return;
	if (wstore_file_summary(&si, f) < 0)
		snprintf(out, cap, "  [unreadable header: %s]",
			 wstore_last_error());
	else if (si.kv_count || si.gguf_version)
		snprintf(
			out, cap,
			"  [gguf v%u: %llu tensors, %llu params, %llu metadata keys]",
			si.gguf_version, (unsigned long long)si.tensor_count,
			(unsigned long long)si.param_count,
			(unsigned long long)si.kv_count);
	else if (si.tensor_count)
		snprintf(out, cap, "  [%s: %llu tensors, %llu params, %s]",
			 si.format, (unsigned long long)si.tensor_count,
			 (unsigned long long)si.param_count, si.dtypes);
	wstore_file_free(f);
}

/*
 * The files' common chunk size, or 0 with *out_mixed set when they differ
 * (another writer may vary it; wstore never does).
 */
static uint64_t common_chunk_size(const wstore_manifest *m, int *out_mixed)
{
	size_t n = wstore_manifest_file_count(m);
	uint64_t first = 0;

	*out_mixed = 0;
	for (size_t i = 0; i < n; i++) {
		wstore_file_info f;

		if (wstore_manifest_file(&f, m, i) < 0)
			continue;
		if (i == 0)
			first = f.chunk_size;
		else if (f.chunk_size != first)
			*out_mixed = 1;
	}
	return *out_mixed ? 0 : first;
}

/* "chunk size:" line: the size, and the connector setting that loads it. */
static void print_chunk_size(const wstore_manifest *m, int *out_mixed)
{
	uint64_t cs = common_chunk_size(m, out_mixed);
	char sz[32], v[32];

	if (*out_mixed) {
		printf("chunk size: differs per file (CHUNK SIZE column); "
		       "no one file_chunk_size of SGLang's mooncake:// "
		       "connector fits every file\n");
		return;
	}
	if (!cs) {
		printf("chunk size: unknown (legacy file records)\n");
		return;
	}
	wstore_format_size(sz, sizeof(sz), cs);
	if (wstore_connector_chunk_size(v, sizeof(v), NULL, cs) == 0)
		printf("chunk size: %s (%llu bytes); SGLang mooncake:// "
		       "file_chunk_size \"%s\"\n",
		       sz, (unsigned long long)cs, v);
	else
		printf("chunk size: %s (%llu bytes); no SGLang mooncake:// "
		       "file_chunk_size matches it\n",
		       sz, (unsigned long long)cs);
}

/* The file table, its columns sized to their content (paths run long,
 * sizes of shards to 11 digits). */
static void print_files(const struct cli *c, const wstore_manifest *m,
			wstore_checkpoint *ck, int tensors, int mixed)
{
	static const char *const head[] = { "TYPE",	  "SIZE",   "CHUNKS",
					    "CHUNK SIZE", "SHA256", "PATH" };
	const char *const *h = head;
	const char *mixed_head[6];
	struct cli_table t;

	if (!mixed) {
		mixed_head[0] = head[0];
		mixed_head[1] = head[1];
		mixed_head[2] = head[2];
		mixed_head[3] = head[4];
		mixed_head[4] = head[5];
		h = mixed_head;
	}
	cli_table_init(&t, mixed ? 6 : 5, mixed ? "lrrrll" : "lrrll", h);
	for (size_t i = 0; i < wstore_manifest_file_count(m); i++) {
		wstore_file_info f;
		char sum[512], size[24], chunks[24], csize[24], sha[17];
		char *path = NULL;
		const char *cell[6];
		size_t k = 0;

		if (wstore_manifest_file(&f, m, i) < 0)
			continue;
		sum[0] = '\0';
		if (tensors || f.chunk_size <= CHEAP_CHUNK)
			summary(sum, sizeof(sum), ck, f.path);
		snprintf(size, sizeof(size), "%llu",
			 (unsigned long long)f.size);
		snprintf(chunks, sizeof(chunks), "%llu",
			 (unsigned long long)f.chunk_count);
		snprintf(csize, sizeof(csize), "%llu",
			 (unsigned long long)f.chunk_size);
		snprintf(sha, sizeof(sha), "%s",
			 *f.sha256 ? cli_text(c, f.sha256) : "-");
		if (asprintf(&path, "%s%s", cli_text(c, f.path),
			     cli_text(c, sum)) < 0)
			path = NULL;
		cell[k++] = f.type;
		cell[k++] = size;
		cell[k++] = chunks;
		if (mixed)
			cell[k++] = csize;
		cell[k++] = sha;
		cell[k++] = path ? path : "?";
		cli_table_add(&t, cell);
		free(path);
	}
	cli_table_print(&t);
}

static void print_manifest(const struct cli *c, const wstore_manifest *m,
			   wstore_checkpoint *ck, int tensors)
{
	char sz[32], commit[WSTORE_COMMIT_LEN + 1];
	char t[32];
	size_t n = wstore_manifest_file_count(m);
	const char *err = wstore_manifest_error(m);
	int mixed;

	wstore_format_size(sz, sizeof(sz), wstore_manifest_total_size(m));
	printf("checkpoint: %s\n",
	       cli_text(c, wstore_manifest_checkpoint_id(m)));
	printf("model:      %s\n", cli_text(c, wstore_manifest_model_id(m)));
	printf("revision:   %s\n", cli_text(c, wstore_manifest_revision(m)));
	if (wstore_manifest_commit(commit, sizeof(commit), m) == 0)
		printf("commit:     %s\n", commit);
	printf("status:     %s\n", cli_text(c, wstore_manifest_status(m)));
	if (err)
		printf("error:      %s\n", cli_text(c, err));
	printf("source:     %s\n", cli_text(c, wstore_manifest_source_uri(m)));
	cli_time(t, sizeof(t), wstore_manifest_updated_at(m));
	printf("updated:    %s\n", t);
	printf("size:       %s in %zu files\n", sz, n);
	print_chunk_size(m, &mixed);
	putchar('\n');
	print_files(c, m, ck, tensors, mixed);
}

int cmd_model_inspect(struct cli *c, int argc, char **argv)
{
	wstore_store *s = NULL;
	wstore_manifest *m = NULL;
	static const struct option opts[] = {
		{ "tensors", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *id;
	int ch, rc, tensors = 0;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 't': tensors = 1; break;
		case 'h': cli_print_help(help); return EXIT_OK;
		default: return cli_bad_option(ch, argv, "model inspect", opts);
		}
	}
	if (optind + 1 != argc)
		return wfront_usage_error(
			"'model inspect' needs exactly one checkpoint id or model name");
	id = argv[optind];
	/* refused before any store is opened */
	if (cli_open_named(c, &s, &id))
		return EXIT_ERR;
	rc = wstore_manifest_read(&m, s, id);
	if (rc < 0) {
		cli_close_store(s);
		return cli_fail(rc);
	}
	if (c->json) {
		char *json = NULL;
		size_t len = 0;

		rc = wstore_manifest_serialize(&json, &len, m);
		if (rc == 0) {
			fwrite(json, 1, len, stdout);
			fputc('\n', stdout);
		}
		free(json);
	} else {
		wstore_checkpoint *ck = NULL;

		/* tensor summaries need a READY checkpoint; FAILED has none */
		if (wstore_checkpoint_open(&ck, s, id) < 0)
			ck = NULL;
		/* where a header read is cheap, always */
		if (wstore_store_caps(s) & WSTORE_CAP_RANGE_READS)
			tensors = 1;
		print_manifest(c, m, ck, tensors);
		wstore_checkpoint_free(ck);
	}
	wstore_manifest_free(m);
	cli_close_store(s);
	return rc < 0 ? cli_fail(rc) : EXIT_OK;
}
