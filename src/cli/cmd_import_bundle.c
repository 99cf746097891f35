/*
 * cmd_import_bundle.c - wstore model import --bundle: import a bundle
 * that `wstore model export` wrote, from a file or standard input.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model import --bundle FILE|- [--reflink auto|never]\n"
	"\n"
	"Import the bundle FILE (- : standard input) that `wstore model\n"
	"export` wrote, as it streams.  The checkpoint keeps the bundle's id,\n"
	"model id, revision and commit id.  Every file is checked against the\n"
	"bundle's manifest (size and SHA-256) before it is READY; a bundle\n"
	"that is truncated, damaged, out of order, holds a file its manifest\n"
	"does not list (or lacks one), or holds links, devices, absolute or\n"
	"'..' names is refused in one line, and nothing is left READY.\n"
	"\n"
	"  --bundle FILE   the bundle, or - for standard input\n"
	"  --reflink WHEN  file store: auto (default) shares the blocks of a\n"
	"                  file the store already holds; never shares none\n";

static int parse(wstore_import_options *o, const char **file, int argc,
		 char **argv)
{
	static const struct option opts[] = {
		{ "bundle", required_argument, NULL, 'b' },
		{ "reflink", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int ch;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'b') {
			*file = optarg;
		} else if (ch == 'R') {
			if (cli_parse_reflink(o, optarg, "for --bundle", 0))
				return EXIT_USAGE;
		} else if (ch == 'h') {
			return cli_print_help(help), -1;
		} else {
			return cli_bad_option(ch, argv, "model import --bundle",
					      opts);
		}
	}
	if (optind < argc)
		return wfront_usage_error(
			"unexpected argument '%s' for 'model import --bundle'",
			argv[optind]);
	if (!*file || !**file)
		return wfront_usage_error("--bundle needs a file, or -");
	if (!strcmp(*file, "-") && isatty(STDIN_FILENO))
		return wfront_usage_error(
			"refusing to read a bundle from a terminal: give "
			"--bundle FILE or redirect standard input");
	return 0;
}

static int report(struct cli *c, wstore_store *s, const char *id, double secs)
{
	wstore_manifest *m = NULL;
	char sz[32], commit[WSTORE_COMMIT_LEN + 1] = "";
	int rc = wstore_manifest_read(&m, s, id);

	if (rc < 0)
		return cli_fail(rc);
	wstore_manifest_commit(commit, sizeof(commit), m);
	if (c->json) {
		cli_print_json(json_pack(
			"{s:s, s:s, s:s, s:s, s:I, s:I, s:f}", "checkpoint_id",
			id, "model_id", wstore_manifest_model_id(m), "revision",
			wstore_manifest_revision(m), "commit", commit, "files",
			(json_int_t)wstore_manifest_file_count(m), "total_size",
			(json_int_t)wstore_manifest_total_size(m), "seconds",
			secs));
	} else if (!c->quiet) {
		wstore_format_size(sz, sizeof(sz),
				   wstore_manifest_total_size(m));
		printf("imported '%s' (%s @ %s, commit %s) from the bundle: "
		       "%zu files, %s in %.2f s\n",
		       cli_text(c, id),
		       cli_text(c, wstore_manifest_model_id(m)),
		       cli_text(c, wstore_manifest_revision(m)), commit,
		       wstore_manifest_file_count(m), sz, secs);
	}
	wstore_manifest_free(m);
	return EXIT_OK;
}

int cmd_model_import_bundle(struct cli *c, int argc, char **argv)
{
	wstore_import_options o = WSTORE_IMPORT_OPTIONS_INIT;
	struct cli_progress p = { .c = c, .verb = "importing" };
	const char *file = NULL;
	wstore_store *s = NULL;
	char *id = NULL;
	int rc = parse(&o, &file, argc, argv), fd = STDIN_FILENO;

	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (strcmp(file, "-") != 0 &&
	    (fd = open(file, O_RDONLY | O_CLOEXEC)) < 0) {
		wfront_err("cannot open bundle '%s': %s", file,
			   strerror(errno));
		return EXIT_ERR;
	}
	if (cli_open_store(c, &s, WSTORE_OPEN_CREATE)) {
		if (fd != STDIN_FILENO)
			close(fd);
		return EXIT_ERR;
	}
	o.progress = cli_progress_fn;
	o.progress_ctx = &p;
	p.start = wclock_mono_s();
	rc = wstore_import_bundle(&id, s, fd, &o);
	cli_progress_end(&p);
	if (fd != STDIN_FILENO)
		close(fd);
	rc = rc < 0 ? cli_fail(rc)
		    : report(c, s, id, wclock_mono_s() - p.start);
	cli_close_store(s);
	free(id);
	return rc;
}
