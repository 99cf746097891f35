/*
 * cmd_copy.c - wstore model copy: copy a checkpoint to another store
 * (file, Redis, Redis Cluster, Mooncake), streaming and verified, with
 * the same ids.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model copy NAME --to STORE_URL [--reflink auto|never]\n"
	"\n"
	"Copy READY checkpoint NAME (an id, or ORG/NAME[@REV]) from the store\n"
	"(--store) to the store STORE_URL, streaming from one to the other\n"
	"with no local copy.  Every file is checked on the way; the checkpoint\n"
	"keeps its id, model id, revision and commit id.  A copy interrupted\n"
	"and run again finishes; one that already finished does nothing.\n"
	"Settings other than the store (passwords, Mooncake's) apply to both.\n"
	"\n"
	"  --to STORE_URL  the destination: a directory, file:///DIR,\n"
	"                  redis://..., redis-cluster://..., mooncake\n"
	"  --reflink WHEN  file store: auto (default) shares the blocks of a\n"
	"                  file the destination already holds; never shares none\n";

static int parse(wstore_import_options *o, const char **id, const char **to,
		 int argc, char **argv)
{
	static const struct option opts[] = {
		{ "to", required_argument, NULL, 't' },
		{ "reflink", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int ch;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 't') {
			*to = optarg;
		} else if (ch == 'R') {
			if (cli_parse_reflink(o, optarg, "for copy", 0))
				return EXIT_USAGE;
		} else if (ch == 'h') {
			return cli_print_help(help), -1;
		} else {
			return cli_bad_option(ch, argv, "model copy", opts);
		}
	}
	if (optind + 1 != argc)
		return wfront_usage_error(
			"'model copy' needs exactly one checkpoint name");
	*id = argv[optind];
	if (!*to || !**to)
		return wfront_usage_error("model copy needs --to STORE_URL");
	return 0;
}

/* The destination: the settings of the source but its store. */
static int open_dest(struct cli *c, wstore_store **out, const char *url)
{
	wstore_config *cfg = NULL;
	int rc = wstore_config_new(&cfg);

	if (rc == 0)
		rc = wstore_config_merge(cfg, c->cfg);
	if (rc == 0)
		rc = wstore_config_set(cfg, "store", url);
	if (rc == 0)
		rc = wstore_open_flags(out, cfg, WSTORE_OPEN_CREATE);
	wstore_config_free(cfg);
	if (rc < 0)
		return cli_fail(rc);
	if (wstore_warning(*out))
		wfront_err("warning: %s", wstore_warning(*out));
	return 0;
}

int cmd_model_copy(struct cli *c, int argc, char **argv)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	struct cli_progress p = { .c = c, .verb = "copying" };
	const char *id = NULL, *to = NULL;
	wstore_store *src = NULL, *dst = NULL;
	int rc = parse(&o, &id, &to, argc, argv);

	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (cli_open_named(c, &src, &id))
		return EXIT_ERR;
	if (open_dest(c, &dst, to)) {
		cli_close_store(src);
		return EXIT_ERR;
	}
	o.progress = cli_progress_fn;
	o.progress_ctx = &p;
	p.start = wclock_mono_s();
	rc = wstore_copy(dst, src, id, &o);
	cli_progress_end(&p);
	cli_close_store(dst);
	cli_close_store(src);
	if (rc < 0)
		return cli_fail(rc);
	if (!c->quiet)
		printf("copied '%s' to %s in %.2f s\n", cli_text(c, id),
		       cli_text(c, to), wclock_mono_s() - p.start);
	return EXIT_OK;
}
