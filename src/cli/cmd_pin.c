/*
 * cmd_pin.c - wstore model pin / unpin: mark a checkpoint as never to be
 * evicted (quota eviction, `gc --evict-to`), or clear the mark.
 */
#include <getopt.h>
#include <stdio.h>

#include <jansson.h>
#include <wstore/lease.h>

#include "cli.h"

static const char pin_help[] =
	"usage: wstore model pin ID|ORG/NAME[@REV]...\n"
	"\n"
	"Pin READY checkpoints: eviction (the store's quota with\n"
	"\"evict\": \"lru\", or 'wstore gc --evict-to') never removes it.\n"
	"An explicit 'model delete' still does.  Pinning twice is fine.\n";

static const char unpin_help[] =
	"usage: wstore model unpin ID|ORG/NAME[@REV]...\n"
	"\n"
	"Clear the pin of checkpoints, so that eviction may remove it again.\n";

static int pin_one(struct cli *c, wstore_store *s, const char *arg, int pinned,
		   json_t *out)
{
	const char *id;
	int rc;

	if (cli_resolve(c, &id, s, arg))
		return EXIT_ERR;
	if ((rc = wstore_pin(s, id, pinned)) < 0)
		return cli_fail(rc);
	if (c->json)
		json_array_append_new(out,
				      json_pack("{s:s, s:b}", "checkpoint_id",
						id, "pinned", pinned));
	else if (!c->quiet)
		printf("%s '%s'\n", pinned ? "pinned" : "unpinned",
		       cli_text(c, id));
	return EXIT_OK;
}

static int run(struct cli *c, int argc, char **argv, int pinned)
{
	const char *cmd = pinned ? "model pin" : "model unpin";
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' }, { 0 }
	};
	wstore_store *s = NULL;
	json_t *out;
	int ch, rc, status = EXIT_OK;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch != 'h')
			return cli_bad_option(ch, argv, cmd, opts);
		cli_print_help(pinned ? pin_help : unpin_help);
		return EXIT_OK;
	}
	if (optind == argc)
		return wfront_usage_error(
			"'%s' needs a checkpoint id or model name", cmd);
	/* refused before any store is opened */
	for (int i = optind; i < argc; i++)
		if (cli_check_name(argv[i]))
			return EXIT_ERR;
	if (cli_open_store(c, &s, 0))
		return EXIT_ERR;
	out = json_array();
	for (int i = optind; i < argc; i++) {
		rc = pin_one(c, s, argv[i], pinned, out);
		if (rc && status == EXIT_OK)
			status = rc;
	}
	cli_close_store(s);
	/* one id: one object, as before several were accepted */
	if (c->json && argc - optind == 1 && json_array_size(out) == 1)
		cli_print_json(json_incref(json_array_get(out, 0)));
	else if (c->json)
		cli_print_json(json_incref(out));
	json_decref(out);
	return status;
}

int cmd_model_pin(struct cli *c, int argc, char **argv)
{
	return run(c, argc, argv, 1);
}

int cmd_model_unpin(struct cli *c, int argc, char **argv)
{
	return run(c, argc, argv, 0);
}
