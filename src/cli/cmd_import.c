/*
 * cmd_import.c - wstore model import: import a checkpoint directory.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model import --source DIR [--model-id MODEL]\n"
	"                           [--checkpoint-id ID] [--revision REV]\n"
	"                           [--include GLOB]... [--exclude GLOB]...\n"
	"                           [--force] [--chunk-size SIZE]\n"
	"                           [--replica-num N] [--jobs N]\n"
	"                           [--reflink auto|always|never]\n"
	"\n"
	"Import the files under DIR (symlinks followed) as one checkpoint.  It\n"
	"is published READY only when every chunk is stored; on failure or ^C\n"
	"it is left FAILED with its chunks removed.\n"
	"\n"
	"Folders of version control and tools (.git, .hg, .svn, .bzr,\n"
	"__pycache__, .ipynb_checkpoints, .cache/huggingface) are skipped and\n"
	"named.  DIR must look like a checkpoint (a config.json and a weight\n"
	"file, or a GGUF file) unless --force.  A Hugging Face cache folder\n"
	"(models--ORG--NAME, or one of its snapshots/COMMIT) gives the model\n"
	"id and the revision; the repo root imports the snapshot of --revision.\n"
	"\n"
	"  --source DIR         checkpoint directory\n"
	"  --model-id MODEL     e.g. Qwen/Qwen3-8B (default: from a Hugging\n"
	"                       Face cache folder)\n"
	"  --checkpoint-id ID   1-255 chars: [A-Za-z0-9] then [A-Za-z0-9._-]\n"
	"                       (default: MODEL and REV, '/' as '--', e.g.\n"
	"                       Qwen--Qwen3-8B--main, then -2, -3, ... while\n"
	"                       that id is taken)\n"
	"  --revision REV       default: the cache's ref of the snapshot, or main\n"
	"  --include GLOB       import only files whose path matches (repeatable)\n"
	"  --exclude GLOB       leave out files whose path matches (repeatable)\n"
	"  --force              import even what does not look like a checkpoint\n"
	"  --chunk-size SIZE    default 64MiB, or the config's chunk_size\n"
	"                       (e.g. 16MiB, 1G, 1048576; at most 4GiB)\n"
	"  --replica-num N      copies each chunk needs (config key replica_num;\n"
	"                       default 1): Mooncake replicas, or on Redis the\n"
	"                       master and N-1 replicas acknowledging\n"
	"  --jobs N             worker threads (default: number of cores)\n"
	"  --reflink WHEN       file store on a copy-on-write file system (XFS\n"
	"                       with reflink, btrfs) holding the source too:\n"
	"                       clone each file into the store after reading\n"
	"                       it once for its hash, instead of writing it;\n"
	"                       auto (default) clones where it can, always\n"
	"                       fails where it cannot, never always writes\n"
	"\n"
	"wstore model import --from-hub ORG/NAME[@REV] imports from a Hub\n"
	"server instead (wstore model import --from-hub x/y --help), and\n"
	"wstore model import --bundle FILE|- a bundle of `wstore model export`\n"
	"(wstore model import --bundle - --help).\n";

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
		wfront_err("warning: chunk size %llu bytes is not the "
			   "64 MiB SGLang's mooncake:// connector assumes by "
			   "default; engines loading '%s' through it need "
			   "file_chunk_size \"%s\"",
			   (unsigned long long)chunk_size, id, v);
	else
		wfront_err(
			"warning: chunk size %llu bytes cannot be "
			"written as a file_chunk_size of SGLang's mooncake:// "
			"connector (whole KB, MB or GB), so it cannot load "
			"'%s'; import with --chunk-size %s (file_chunk_size "
			"\"%s\") or the default 64MiB instead",
			(unsigned long long)chunk_size, id, v, v);
}

/* Options of model import besides those of wstore_import_options. */
struct import_args {
	wstore_source *src;
	const char *source;
	int force;
};

static json_t *skipped_json(const wstore_source *src)
{
	json_t *a = json_array();
	const char *p;

	for (size_t i = 0; (p = wstore_source_skipped(src, i)); i++)
		json_array_append_new(a, json_string(p));
	return a;
}

static int report(struct cli *c, const wstore_import_options *o,
		  const struct import_args *a, wstore_store *s, double secs)
{
	const char *commit = wstore_source_commit(a->src);

	return cli_import_report(c, s, o->checkpoint_id, secs, commit, NULL,
				 json_pack("{s:s?, s:o}", "hub_commit", commit,
					   "skipped", skipped_json(a->src)));
}

/* Eviction to make room under the quota: say which checkpoint went. */
static void on_evict(const char *id, uint64_t bytes, int64_t last_read_ms,
		     int removed, int code, const char *message, void *ctx)
{
	char sz[32], t[32];

	(void)ctx;
	cli_time(t, sizeof(t), last_read_ms / 1000);
	wstore_format_size(sz, sizeof(sz), bytes);
	if (removed)
		wfront_err("evicted '%s' (%s, last read %s) to make room", id,
			   sz, t);
	else if (code)
		wfront_err("could not evict '%s': %s", id, message);
}

static int parse(struct cli *c, wstore_import_options *o, struct import_args *a,
		 int argc, char **argv)
{
	static const struct option opts[] = {
		{ "checkpoint-id", required_argument, NULL, 'i' },
		{ "model-id", required_argument, NULL, 'm' },
		{ "revision", required_argument, NULL, 'r' },
		{ "source", required_argument, NULL, 's' },
		{ "chunk-size", required_argument, NULL, 'c' },
		{ "replica-num", required_argument, NULL, 'n' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "reflink", required_argument, NULL, 'R' },
		{ "include", required_argument, NULL, 'I' },
		{ "exclude", required_argument, NULL, 'X' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	/* patterns are added once the source handle exists */
	char **inc = calloc((size_t)argc + 1, sizeof(char *));
	char **exc = calloc((size_t)argc + 1, sizeof(char *));
	size_t ni = 0, nx = 0;
	uint32_t copies;
	int ch, rc = 0;

	if (!inc || !exc)
		rc = cli_fail(-ENOMEM);
	opterr = 0;
	while (!rc && (ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'i': o->checkpoint_id = optarg; break;
		case 'm': o->model_id = optarg; break;
		case 'r': o->revision = optarg; break;
		case 's': a->source = optarg; break;
		case 'I': inc[ni++] = optarg; break;
		case 'X': exc[nx++] = optarg; break;
		case 'f': a->force = 1; break;
		case 'c':
			if (wstore_parse_size(&o->chunk_size, optarg) < 0)
				rc = wfront_usage_error(
					"invalid --chunk-size: %s",
					wstore_last_error());
			else if (o->chunk_size > (4ull << 30))
				rc = wfront_usage_error(
					"invalid --chunk-size '%s': at most 4GiB",
					optarg);
			break;
		case 'n':
			if (wfront_parse_count(&copies, "--replica-num",
					       optarg))
				rc = EXIT_USAGE;
			/* replicating backends read it when the store opens */
			else if (wstore_config_set(c->cfg, "replica_num",
						   optarg) < 0)
				rc = cli_fail(WSTORE_EINVAL);
			break;
		case 'j':
			if (wfront_parse_count(&o->jobs, "--jobs", optarg))
				rc = EXIT_USAGE;
			break;
		case 'R':
			if (cli_parse_reflink(o, optarg, "", 1))
				rc = EXIT_USAGE;
			break;
		case 'h':
			cli_print_help(help);
			rc = -1;
			break;
		default: rc = cli_bad_option(ch, argv, "model import", opts);
		}
	}
	if (!rc && optind < argc)
		rc = wfront_usage_error(
			"unexpected argument '%s' for 'model import'",
			argv[optind]);
	if (!rc && !a->source)
		rc = wfront_usage_error("model import needs --source DIR");
	if (!rc && wstore_source_new(&a->src, a->source, o->revision) < 0)
		rc = cli_fail(WSTORE_EINVAL);
	for (size_t i = 0; !rc && i < ni; i++)
		if (wstore_source_include(a->src, inc[i]) < 0)
			rc = cli_fail(WSTORE_EINVAL);
	for (size_t i = 0; !rc && i < nx; i++)
		if (wstore_source_exclude(a->src, exc[i]) < 0)
			rc = cli_fail(WSTORE_EINVAL);
	if (!rc)
		wstore_source_set_force(a->src, a->force);
	free(inc);
	free(exc);
	return rc;
}

/* Walk the source (before any store is opened: bad input never waits for
 * a server), say what was skipped, and fill in what it names. */
static int examine(struct cli *c, wstore_import_options *o,
		   struct import_args *a)
{
	const char *skipped;
	wstore_import_options check;

	if (wstore_source_examine(a->src) < 0)
		return cli_fail(WSTORE_EINVAL);
	for (size_t i = 0; (skipped = wstore_source_skipped(a->src, i)); i++)
		if (!c->quiet)
			wfront_err("skipped '%s/' (version control or tool "
				   "folder)",
				   cli_text(c, skipped));
	if (!o->model_id)
		o->model_id = wstore_source_model_id(a->src);
	if (!o->model_id)
		return wfront_usage_error(
			"model import needs --model-id ('%s' is not a hugging "
			"face cache folder to take it from)",
			a->source);
	if (!o->revision)
		o->revision = wstore_source_revision(a->src);
	check = *o;
	if (!check.checkpoint_id)
		check.checkpoint_id = "derived";
	if (wstore_import_check(&check) < 0)
		return cli_fail(WSTORE_EINVAL);
	return 0;
}

int cmd_model_import(struct cli *c, int argc, char **argv)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	struct import_args a = { 0 };
	struct cli_progress p = { .c = c, .verb = "importing" };
	wstore_store *s = NULL;
	const char *rn = wstore_config_get(c->cfg, "replica_num");
	const char *cs = wstore_config_get(c->cfg, "chunk_size");
	char *derived = NULL;
	uint32_t copies;
	int rc;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--from-hub") ||
		    !strncmp(argv[i], "--from-hub=", 11))
			return cmd_model_import_hub(c, argc, argv);
		else if (!strcmp(argv[i], "--bundle") ||
			 !strncmp(argv[i], "--bundle=", 9))
			return cmd_model_import_bundle(c, argc, argv);
	if (rn && wfront_parse_count(&copies, "replica_num", rn))
		return EXIT_USAGE;
	/* the store's default chunk size (checked when the config loaded) */
	if (cs && *cs && wstore_parse_size(&o.chunk_size, cs) < 0)
		return wfront_usage_error("invalid chunk_size '%s': %s", cs,
					  wstore_last_error());
	rc = parse(c, &o, &a, argc, argv);
	if (!rc)
		rc = examine(c, &o, &a);
	if (!rc && cli_open_store(c, &s, WSTORE_OPEN_CREATE))
		rc = EXIT_ERR;
	if (!rc && !o.checkpoint_id) {
		if (wstore_checkpoint_id_derive(&derived, s, o.model_id,
						o.revision) < 0)
			rc = cli_fail(WSTORE_EINVAL);
		o.checkpoint_id = derived;
	}
	if (rc) {
		cli_close_store(s);
		wstore_source_free(a.src);
		return rc < 0 ? EXIT_OK : rc;
	}
	if (wstore_validate_checkpoint_id(o.checkpoint_id) == 0)
		warn_connector(s, o.checkpoint_id,
			       o.chunk_size ? o.chunk_size
					    : WSTORE_DEFAULT_CHUNK_SIZE);
	o.progress = cli_progress_fn;
	o.on_evict = on_evict;
	o.progress_ctx = &p;
	p.start = wclock_mono_s();
	rc = wstore_import_from(s, &o, a.src);
	/* another import took the derived id between deriving and locking
	 * it: derive again (the id is taken now) rather than fail */
	for (int tries = 0; derived && tries < 8 &&
			    (rc == WSTORE_EEXISTS || rc == WSTORE_EBUSY);
	     tries++) {
		free(derived);
		rc = wstore_checkpoint_id_derive(&derived, s, o.model_id,
						 o.revision);
		o.checkpoint_id = derived;
		if (rc < 0)
			break;
		rc = wstore_import_from(s, &o, a.src);
	}
	cli_progress_end(&p);
	if (rc < 0)
		rc = cli_fail(rc);
	else
		rc = report(c, &o, &a, s, wclock_mono_s() - p.start);
	cli_close_store(s);
	wstore_source_free(a.src);
	free(derived);
	return rc;
}
