/*
 * cmd_delete.c - wstore model delete: remove a checkpoint.  Deleting an id
 * that does not exist succeeds, so an interrupted delete can be re-run.
 */
#include <stdio.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model delete ID\n"
	"\n"
	"Delete a checkpoint: take it out of the indexes, remove its chunks,\n"
	"then its manifest.  Succeeds if the checkpoint does not exist;\n"
	"re-run it to finish a delete that was interrupted.\n";

int cmd_model_delete(struct cli *c, int argc, char **argv)
{
	wstore_store *s = NULL;
	const char *id;
	int rc = cli_one_id(&id, argc, argv, "model delete", help);

	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (cli_open_store(c, &s))
		return EXIT_ERR;
	rc = wstore_delete(s, id);
	wstore_free(s);
	if (rc < 0)
		return cli_fail(rc);
	if (c->json)
		cli_print_json(json_pack("{s:s, s:b}", "checkpoint_id", id,
					 "deleted", 1));
	else if (!c->quiet)
		printf("deleted '%s'\n", id);
	return EXIT_OK;
}
