/*
 * cmd_import.c - wstore model import: import a checkpoint directory.
 */
#include <getopt.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model import --checkpoint-id ID --model-id MODEL\n"
	"                           --source DIR [--revision REV]\n"
	"                           [--chunk-size SIZE] [--replica-num N]\n"
	"                           [--jobs N]\n"
	"\n"
	"Import every regular file under DIR (symlinks followed) as checkpoint\n"
	"ID.  The checkpoint is published READY only when every chunk is\n"
	"stored; on failure or ^C it is left FAILED with its chunks removed.\n"
	"\n"
	"  --checkpoint-id ID   1-255 chars: [A-Za-z0-9] then [A-Za-z0-9._-]\n"
	"  --model-id MODEL     e.g. Qwen/Qwen3-8B\n"
	"  --revision REV       default: main\n"
	"  --source DIR         checkpoint directory\n"
	"  --chunk-size SIZE    default 64MiB, or the config's chunk_size\n"
	"                       (e.g. 16MiB, 1G, 1048576; at most 4GiB)\n"
	"  --replica-num N      copies each chunk needs (config key replica_num;\n"
	"                       default 1): Mooncake replicas, or on Redis the\n"
	"                       master and N-1 replicas acknowledging\n"
	"  --jobs N             worker threads (default: number of cores)\n";

/*
 * SGLang's mooncake:// connector maps offsets with its own file_chunk_size
 * (default "64MB"), not the manifest's: on a Mooncake store, say which
 * setting engines need before a non-default import goes on.
 */
static void warn_connector(const wstore_store *s, const char *id,
			   uint64_t chunk_size)
{
	char v[32];

	if (strcmp(wstore_backend_name(s), "mooncake") != 0 ||
	    chunk_size == WSTORE_DEFAULT_CHUNK_SIZE)
		return;
	if (wstore_connector_chunk_size(v, sizeof(v), NULL, chunk_size) == 0)
		fprintf(stderr,
			"wstore: warning: chunk size %llu bytes is not the "
			"64 MiB SGLang's mooncake:// connector assumes by "
			"default; engines loading '%s' through it need "
			"file_chunk_size \"%s\"\n",
			(unsigned long long)chunk_size, id, v);
	else
		fprintf(stderr,
			"wstore: warning: chunk size %llu bytes cannot be "
			"written as a file_chunk_size of SGLang's mooncake:// "
			"connector (whole KB, MB or GB), so it cannot load "
			"'%s'; import with --chunk-size %s (file_chunk_size "
			"\"%s\") or the default 64MiB instead\n",
			(unsigned long long)chunk_size, id, v, v);
}

static int report(struct cli *c, const wstore_import_options *o,
		  wstore_store *s, double secs)
{
	wstore_manifest *m = NULL;
	uint64_t total;
	char sz[32], rate[32];
	int rc = wstore_manifest_read(&m, s, o->checkpoint_id);

	if (rc < 0)
		return cli_fail(rc);
	total = wstore_manifest_total_size(m);
	if (c->json) {
		cli_print_json(json_pack(
			"{s:s, s:s, s:s, s:I, s:I, s:f, s:f}", "checkpoint_id",
			o->checkpoint_id, "model_id",
			wstore_manifest_model_id(m), "status",
			wstore_manifest_status(m), "files",
			(json_int_t)wstore_manifest_file_count(m), "total_size",
			(json_int_t)total, "seconds", secs, "bytes_per_second",
			secs > 0 ? total / secs : 0.0));
	} else if (!c->quiet) {
		wstore_format_size(sz, sizeof(sz), total);
		wstore_format_size(rate, sizeof(rate),
				   secs > 0 ? (uint64_t)(total / secs) : 0);
		printf("imported '%s' (%s @ %s): %zu files, %s in %.2f s (%s/s)\n",
		       o->checkpoint_id, wstore_manifest_model_id(m),
		       wstore_manifest_revision(m),
		       wstore_manifest_file_count(m), sz, secs, rate);
	}
	wstore_manifest_free(m);
	return EXIT_OK;
}

/* Eviction to make room under the quota: say which checkpoint went. */
static void on_evict(const char *id, uint64_t bytes, int64_t last_read_ms,
		     int removed, int code, const char *message, void *ctx)
{
	char sz[32], t[32] = "never";
	time_t tt = (time_t)(last_read_ms / 1000);
	struct tm tm;

	(void)ctx;
	if (last_read_ms > 0 && gmtime_r(&tt, &tm))
		strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", &tm);
	wstore_format_size(sz, sizeof(sz), bytes);
	if (removed)
		fprintf(stderr,
			"wstore: evicted '%s' (%s, last read %s) to make room\n",
			id, sz, t);
	else if (code)
		fprintf(stderr, "wstore: could not evict '%s': %s\n", id,
			message);
}

int cmd_model_import(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "checkpoint-id", required_argument, NULL, 'i' },
		{ "model-id", required_argument, NULL, 'm' },
		{ "revision", required_argument, NULL, 'r' },
		{ "source", required_argument, NULL, 's' },
		{ "chunk-size", required_argument, NULL, 'c' },
		{ "replica-num", required_argument, NULL, 'n' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	struct cli_progress p = { .c = c, .verb = "importing" };
	wstore_store *s = NULL;
	const char *rn = wstore_config_get(c->cfg, "replica_num");
	const char *cs = wstore_config_get(c->cfg, "chunk_size");
	uint32_t copies;
	int ch, rc;

	if (rn && cli_parse_count(&copies, "replica_num", rn))
		return EXIT_USAGE;
	/* the store's default chunk size (checked when the config loaded) */
	if (cs && *cs && wstore_parse_size(&o.chunk_size, cs) < 0)
		return cli_usage_error("invalid chunk_size '%s': %s", cs,
				       wstore_last_error());
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'i': o.checkpoint_id = optarg; break;
		case 'm': o.model_id = optarg; break;
		case 'r': o.revision = optarg; break;
		case 's': o.source = optarg; break;
		case 'c':
			if (wstore_parse_size(&o.chunk_size, optarg) < 0)
				return cli_usage_error(
					"invalid --chunk-size: %s",
					wstore_last_error());
			if (o.chunk_size > (4ull << 30))
				return cli_usage_error(
					"invalid --chunk-size '%s': at most 4GiB",
					optarg);
			break;
		case 'n':
			if (cli_parse_count(&copies, "--replica-num", optarg))
				return EXIT_USAGE;
			/* replicating backends read it when the store opens */
			if (wstore_config_set(c->cfg, "replica_num", optarg) <
			    0)
				return cli_fail(WSTORE_EINVAL);
			break;
		case 'j':
			if (cli_parse_count(&o.jobs, "--jobs", optarg))
				return EXIT_USAGE;
			break;
		case 'h': cli_print_help(help); return EXIT_OK;
		default: return cli_bad_option(ch, argv, "model import");
		}
	}
	if (optind < argc)
		return cli_usage_error(
			"unexpected argument '%s' for 'model import'",
			argv[optind]);
	if (!o.checkpoint_id || !o.model_id || !o.source)
		return cli_usage_error(
			"model import needs --checkpoint-id, --model-id and --source");
	if (wstore_import_check(&o) < 0)
		return cli_fail(WSTORE_EINVAL);
	if (cli_open_store(c, &s, WSTORE_OPEN_CREATE))
		return EXIT_ERR;
	if (wstore_validate_checkpoint_id(o.checkpoint_id) == 0)
		warn_connector(s, o.checkpoint_id,
			       o.chunk_size ? o.chunk_size
					    : WSTORE_DEFAULT_CHUNK_SIZE);
	o.progress = cli_progress_fn;
	o.on_evict = on_evict;
	o.progress_ctx = &p;
	p.start = cli_now();
	rc = wstore_import(s, &o);
	cli_progress_end(&p);
	if (rc < 0)
		rc = cli_fail(rc);
	else
		rc = report(c, &o, s, cli_now() - p.start);
	cli_close_store(s);
	return rc;
}
