/*
 * cmd_pull.c - wstore model pull: write a whole READY checkpoint under a
 * directory an engine loads as it would a Hugging Face download.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>
#include <wstore/read.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model pull ID --dest DIR [--include GLOB]...\n"
	"                         [--exclude GLOB]... [--jobs N] [--no-verify]\n"
	"                         [--force]\n"
	"\n"
	"Write every file of checkpoint ID under DIR at its relative path.\n"
	"Files are fetched in parallel, checked against the manifest's size\n"
	"and SHA-256 while written, and renamed into place only when complete\n"
	"and correct.  A file already present with the right size and digest\n"
	"is kept, so an interrupted pull resumes where it stopped.\n"
	"\n"
	"  --dest DIR        target directory (created if missing)\n"
	"  --include GLOB    pull only matching paths (repeatable)\n"
	"  --exclude GLOB    skip matching paths (repeatable)\n"
	"  --jobs N          parallel files (default: number of cores)\n"
	"  --no-verify       skip SHA-256 (sizes and chunk lengths still checked)\n"
	"  --force           refetch files already present\n";

#define MAX_GLOBS 64

static int add_glob(const char **list, int *n, const char *g)
{
	if (*n == MAX_GLOBS)
		return wfront_usage_error(
			"at most %d --include/--exclude patterns", MAX_GLOBS);
	list[(*n)++] = g;
	list[*n] = NULL;
	return 0;
}

int cmd_model_pull(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dest", required_argument, NULL, 'd' },
		{ "include", required_argument, NULL, 'i' },
		{ "exclude", required_argument, NULL, 'x' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "no-verify", no_argument, NULL, 'n' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *inc[MAX_GLOBS + 1] = { 0 }, *exc[MAX_GLOBS + 1] = { 0 };
	wstore_pull_options o = WSTORE_PULL_OPTIONS_INIT;
	struct cli_progress p = { .c = c, .verb = "pulling" };
	const char *dest = NULL, *id;
	wstore_store *s = NULL;
	int ch, rc, ninc = 0, nexc = 0;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'd': dest = optarg; break;
		case 'i':
			if (add_glob(inc, &ninc, optarg))
				return EXIT_USAGE;
			break;
		case 'x':
			if (add_glob(exc, &nexc, optarg))
				return EXIT_USAGE;
			break;
		case 'j':
			if (wfront_parse_count(&o.jobs, "--jobs", optarg))
				return EXIT_USAGE;
			break;
		case 'n': o.no_verify = 1; break;
		case 'f': o.force = 1; break;
		case 'h': cli_print_help(help); return EXIT_OK;
		default: return cli_bad_option(ch, argv, "model pull", opts);
		}
	}
	if (optind == argc)
		return wfront_usage_error("'model pull' needs a checkpoint id");
	if (optind + 1 < argc)
		return wfront_usage_error(
			"unexpected argument '%s' for 'model pull'",
			argv[optind + 1]);
	if (!dest)
		return wfront_usage_error("'model pull' needs --dest DIR");
	id = argv[optind];
	o.include = ninc ? inc : NULL;
	o.exclude = nexc ? exc : NULL;
	if (cli_open_named(c, &s, &id))
		return EXIT_ERR;
	o.progress = cli_progress_fn;
	o.progress_ctx = &p;
	p.start = wclock_mono_s();
	rc = wstore_pull(s, id, dest, &o);
	cli_progress_end(&p);
	cli_close_store(s);
	if (rc < 0)
		return cli_fail(rc);
	if (c->json)
		cli_print_json(json_pack("{s:s, s:s, s:f}", "checkpoint_id", id,
					 "dest", dest, "seconds",
					 wclock_mono_s() - p.start));
	else if (!c->quiet)
		printf("pulled '%s' into '%s' in %.2f s\n", id, dest,
		       wclock_mono_s() - p.start);
	return EXIT_OK;
}
