/*
 * cmd_delete.c - wstore model delete: remove a checkpoint.  An id that
 * does not exist is an error ("not found", exit 1) unless --missing-ok,
 * which scripts use to finish an interrupted delete without caring
 * whether the manifest was already gone.
 */
#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model delete ID [--missing-ok]\n"
	"\n"
	"Delete a checkpoint: take it out of the indexes, remove its chunks,\n"
	"then its manifest.  Re-run it to finish a delete that was\n"
	"interrupted.  An id that does not exist is an error (exit 1).\n"
	"\n"
	"  --missing-ok   an id that does not exist is not an error (exit 0)\n";

int cmd_model_delete(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "missing-ok", no_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	wstore_store *s = NULL;
	const char *id;
	int ch, rc, missing_ok = 0;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'm')
			missing_ok = 1;
		else if (ch == 'h')
			return cli_print_help(help), EXIT_OK;
		else
			return cli_bad_option(ch, argv, "model delete");
	}
	if (optind + 1 != argc)
		return cli_usage_error(
			"'model delete' needs exactly one checkpoint id");
	id = argv[optind];
	if (cli_open_store(c, &s, 0))
		return EXIT_ERR;
	rc = wstore_delete(s, id);
	cli_close_store(s);
	if (rc < 0 && !(rc == WSTORE_ENOTFOUND && missing_ok))
		return cli_fail(rc);
	if (c->json)
		cli_print_json(json_pack("{s:s, s:b}", "checkpoint_id", id,
					 "deleted", rc == 0));
	else if (!c->quiet && rc == 0)
		printf("deleted '%s'\n", id);
	else if (!c->quiet)
		printf("no checkpoint '%s': nothing to delete\n", id);
	return EXIT_OK;
}
