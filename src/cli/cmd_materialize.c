/*
 * cmd_materialize.c - wstore model materialize-file: write one file of a
 * checkpoint, checked, atomically (the old output survives a failure).
 */
#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model materialize-file ID --path REL --output FILE\n"
	"\n"
	"Write file REL of checkpoint ID to FILE.  The bytes are checked\n"
	"against the manifest's size and SHA-256 before FILE is replaced; on\n"
	"failure FILE is left as it was.\n";

int cmd_model_materialize(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "path", required_argument, NULL, 'p' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *path = NULL, *output = NULL, *id;
	wstore_store *s = NULL;
	int ch, rc;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'p')
			path = optarg;
		else if (ch == 'o')
			output = optarg;
		else if (ch == 'h')
			return cli_print_help(help), EXIT_OK;
		else
			return cli_bad_option(ch, argv,
					      "model materialize-file", opts);
	}
	if (optind == argc)
		return wfront_usage_error(
			"'model materialize-file' needs a checkpoint id");
	if (optind + 1 < argc)
		return wfront_usage_error(
			"unexpected argument '%s' for 'model materialize-file'",
			argv[optind + 1]);
	if (!path)
		return wfront_usage_error(
			"'model materialize-file' needs --path REL");
	if (!output)
		return wfront_usage_error(
			"'model materialize-file' needs --output FILE");
	id = argv[optind];
	if (cli_open_named(c, &s, &id))
		return EXIT_ERR;
	rc = wstore_materialize_file(s, id, path, output);
	cli_close_store(s);
	if (rc < 0)
		return cli_fail(rc);
	if (c->json)
		cli_print_json(json_pack("{s:s, s:s, s:s}", "checkpoint_id", id,
					 "path", path, "output", output));
	else if (!c->quiet)
		printf("wrote '%s' from '%s' of '%s'\n", output, path, id);
	return EXIT_OK;
}
