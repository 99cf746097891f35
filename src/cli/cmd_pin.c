/*
 * cmd_pin.c - wstore model pin / unpin: mark a checkpoint as never to be
 * evicted (quota eviction, `gc --evict-to`), or clear the mark.
 */
#include <stdio.h>

#include <jansson.h>
#include <wstore/lease.h>

#include "cli.h"

static const char pin_help[] =
	"usage: wstore model pin ID\n"
	"\n"
	"Pin a READY checkpoint: eviction (the store's quota with\n"
	"\"evict\": \"lru\", or 'wstore gc --evict-to') never removes it.\n"
	"An explicit 'model delete' still does.  Pinning twice is fine.\n";

static const char unpin_help[] =
	"usage: wstore model unpin ID\n"
	"\n"
	"Clear the pin of a checkpoint, so that eviction may remove it again.\n";

static int run(struct cli *c, int argc, char **argv, int pinned)
{
	const char *cmd = pinned ? "model pin" : "model unpin";
	wstore_store *s = NULL;
	const char *id;
	int rc = cli_one_id(&id, argc, argv, cmd,
			    pinned ? pin_help : unpin_help);

	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (cli_open_store(c, &s, 0))
		return EXIT_ERR;
	rc = wstore_pin(s, id, pinned);
	cli_close_store(s);
	if (rc < 0)
		return cli_fail(rc);
	if (c->json)
		cli_print_json(json_pack("{s:s, s:b}", "checkpoint_id", id,
					 "pinned", pinned));
	else if (!c->quiet)
		printf("%s '%s'\n", pinned ? "pinned" : "unpinned", id);
	return EXIT_OK;
}

int cmd_model_pin(struct cli *c, int argc, char **argv)
{
	return run(c, argc, argv, 1);
}

int cmd_model_unpin(struct cli *c, int argc, char **argv)
{
	return run(c, argc, argv, 0);
}
