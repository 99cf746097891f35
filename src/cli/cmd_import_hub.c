/*
 * cmd_import_hub.c - wstore model import --from-hub: import a repository
 * straight from a Hugging Face Hub server (wstore_import_hub).  Only the
 * options, the token and the report are here.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model import --from-hub ORG/NAME[@REVISION]\n"
	"                           [--endpoint URL] [--token-file FILE]\n"
	"                           [--checkpoint-id ID] [--model-id MODEL]\n"
	"                           [--include GLOB]... [--exclude GLOB]...\n"
	"                           [--chunk-size SIZE] [--jobs N]\n"
	"                           [--retries N] [--stall-timeout SECONDS]\n"
	"\n"
	"Import a repository from a server that speaks the Hugging Face Hub\n"
	"protocol (the Hub, a mirror, another `wstore serve`), with no local\n"
	"copy: each file streams into chunks as it arrives and is checked\n"
	"against the server's hash before the checkpoint is published READY.\n"
	"The revision recorded is the server's commit id (NAME@COMMIT\n"
	"resolves).  An import killed and run again fetches only the files it\n"
	"had not stored and verified.\n"
	"\n"
	"  --from-hub ORG/NAME[@REV]  repository and revision (default main)\n"
	"  --endpoint URL       default: $HF_ENDPOINT, the config's\n"
	"                       hub_endpoint, or https://huggingface.co\n"
	"  --token-file FILE    bearer token (default: $HF_TOKEN, or the file\n"
	"                       the config's hub_token_file names)\n"
	"  --checkpoint-id ID   default: MODEL--COMMIT (12 digits)\n"
	"  --model-id MODEL     default: ORG/NAME\n"
	"  --include GLOB       import only files whose path matches\n"
	"  --exclude GLOB       leave out files whose path matches\n"
	"  --chunk-size SIZE    default 64MiB, or the config's chunk_size\n"
	"  --jobs N             files fetched at once (default 4)\n"
	"  --retries N          tries after the first of each request\n"
	"                       (default 5)\n"
	"  --stall-timeout SEC  a transfer under hub_min_rate (1KiB/s) that\n"
	"                       long is cut and retried (default 30)\n";

struct hub_args {
	const char *from, *token_file;
	char *repo, *rev, *token;
	const char **inc, **exc;
	size_t ni, nx;
};

static int parse_opt(struct cli *c, int ch, wstore_import_options *o,
		     wstore_hub_options *h, struct hub_args *a)
{
	uint32_t secs = 0;

	(void)c;
	switch (ch) {
	case 'F': a->from = optarg; return 0;
	case 'e': h->endpoint = optarg; return 0;
	case 't': a->token_file = optarg; return 0;
	case 'i': o->checkpoint_id = optarg; return 0;
	case 'm': o->model_id = optarg; return 0;
	case 'I': a->inc[a->ni++] = optarg; return 0;
	case 'X': a->exc[a->nx++] = optarg; return 0;
	case 'c':
		if (wstore_parse_size(&o->chunk_size, optarg) < 0)
			return wfront_usage_error("invalid --chunk-size: %s",
						  wstore_last_error());
		if (o->chunk_size > (4ull << 30))
			return wfront_usage_error(
				"invalid --chunk-size '%s': at most 4GiB",
				optarg);
		return 0;
	case 'j':
		return wfront_parse_count(&h->connections, "--jobs", optarg)
			       ? EXIT_USAGE
			       : 0;
	case 'r':
		return wfront_parse_count(&h->retries, "--retries", optarg)
			       ? EXIT_USAGE
			       : 0;
	case 's':
		if (wfront_parse_count(&secs, "--stall-timeout", optarg))
			return EXIT_USAGE;
		h->stall_timeout_ms = secs * 1000;
		return 0;
	}
	return -2;
}

static int parse(struct cli *c, wstore_import_options *o, wstore_hub_options *h,
		 struct hub_args *a, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "from-hub", required_argument, NULL, 'F' },
		{ "endpoint", required_argument, NULL, 'e' },
		{ "token-file", required_argument, NULL, 't' },
		{ "checkpoint-id", required_argument, NULL, 'i' },
		{ "model-id", required_argument, NULL, 'm' },
		{ "include", required_argument, NULL, 'I' },
		{ "exclude", required_argument, NULL, 'X' },
		{ "chunk-size", required_argument, NULL, 'c' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "retries", required_argument, NULL, 'r' },
		{ "stall-timeout", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int ch, rc = 0;

	a->inc = calloc((size_t)argc + 1, sizeof(char *));
	a->exc = calloc((size_t)argc + 1, sizeof(char *));
	if (!a->inc || !a->exc)
		return cli_fail(-ENOMEM);
	opterr = 0;
	while (!rc && (ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'h') {
			cli_print_help(help);
			return -1;
		}
		rc = parse_opt(c, ch, o, h, a);
		if (rc == -2)
			rc = cli_bad_option(ch, argv, "model import", opts);
	}
	if (!rc && optind < argc)
		rc = wfront_usage_error(
			"unexpected argument '%s' for 'model import'",
			argv[optind]);
	if (rc)
		return rc;
	if (!a->from || wstore_parse_name(&a->repo, &a->rev, a->from) != 1) {
		return wfront_usage_error(
			"invalid --from-hub '%s': ORG/NAME or ORG/NAME@REVISION",
			a->from ? a->from : "");
	}
	/* as the Hub spells names: never a query or another path */
	if (wstore_hub_repo_check(a->repo) < 0)
		return wfront_usage_error("%s", wstore_last_error());
	h->repo = a->repo;
	h->revision = a->rev;
	h->include = a->inc;
	h->exclude = a->exc;
	return 0;
}

/* The token: --token-file, else $HF_TOKEN, else hub_token_file. */
static int read_token(struct cli *c, struct hub_args *a)
{
	const char *env = getenv("HF_TOKEN");
	const char *file = a->token_file;
	char line[4096];
	FILE *f;

	if (!file && env && *env)
		return (a->token = strdup(env)) ? 0 : cli_fail(-ENOMEM);
	if (!file)
		file = wstore_config_get(c->cfg, "hub_token_file");
	if (!file || !*file)
		return 0;
	if (!(f = fopen(file, "r")))
		return wfront_usage_error("cannot read token file '%s': %s",
					  file, strerror(errno));
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	if (!line[0])
		return wfront_usage_error("token file '%s' is empty", file);
	return (a->token = strdup(line)) ? 0 : cli_fail(-ENOMEM);
}

static int report(struct cli *c, wstore_store *s, const char *id, double secs)
{
	wstore_manifest *m = NULL;
	char *from = NULL;
	int rc = wstore_manifest_read(&m, s, id);

	if (rc < 0)
		return cli_fail(rc);
	if (wstore_manifest_source_uri(m))
		from = strdup(wstore_manifest_source_uri(m));
	wstore_manifest_free(m);
	rc = cli_import_report(c, s, id, secs, NULL, from,
			       json_pack("{s:s?}", "source_uri", from));
	free(from);
	return rc;
}

static int run(struct cli *c, wstore_import_options *o, wstore_hub_options *h)
{
	struct cli_progress p = { .c = c, .verb = "importing" };
	wstore_store *s = NULL;
	char *id = NULL;
	int rc;

	if (cli_open_store(c, &s, WSTORE_OPEN_CREATE))
		return EXIT_ERR;
	o->progress = cli_progress_fn;
	o->progress_ctx = &p;
	p.start = wclock_mono_s();
	rc = wstore_import_hub(&id, s, o, h);
	cli_progress_end(&p);
	if (rc < 0)
		rc = cli_fail(rc);
	else
		rc = report(c, s, id, wclock_mono_s() - p.start);
	free(id);
	cli_close_store(s);
	return rc;
}

int cmd_model_import_hub(struct cli *c, int argc, char **argv)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	wstore_hub_options h = WSTORE_HUB_OPTIONS_INIT;
	struct hub_args a = { 0 };
	const char *cs = wstore_config_get(c->cfg, "chunk_size");
	int rc = 0;

	if (cs && *cs && wstore_parse_size(&o.chunk_size, cs) < 0)
		return wfront_usage_error("invalid chunk_size '%s': %s", cs,
					  wstore_last_error());
	rc = parse(c, &o, &h, &a, argc, argv);
	if (!rc && !h.endpoint)
		h.endpoint = getenv("HF_ENDPOINT");
	if (!rc && (!h.endpoint || !*h.endpoint))
		h.endpoint = wstore_config_get(c->cfg, "hub_endpoint");
	if (!rc)
		rc = read_token(c, &a);
	h.token = a.token;
	/* the limits and the CA file (docs/trust.md) */
	if (!rc && wstore_hub_options_from_config(&h, c->cfg) < 0)
		rc = cli_fail(WSTORE_EINVAL);
	if (!rc)
		rc = run(c, &o, &h);
	free(a.repo);
	free(a.rev);
	free(a.token);
	free(a.inc);
	free(a.exc);
	return rc < 0 ? EXIT_OK : rc;
}
