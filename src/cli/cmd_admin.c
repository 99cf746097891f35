/*
 * cmd_admin.c - wstore admin unlock: show and remove a lock object left by
 * a process that is gone (another host's locks are never broken
 * automatically).  `admin gc` lives in cmd_gc.c.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore admin unlock ID|catalog [--force]\n"
	"\n"
	"Print the owner record of a lock, then remove the lock.  ID names the\n"
	"lock of one checkpoint (held by its import or delete); 'catalog' the\n"
	"lock of the index objects on stores without an atomic update (write\n"
	"'models/catalog' for a checkpoint whose id is 'catalog').\n"
	"Locks of a dead process on this host are taken over automatically;\n"
	"use this for locks held from another host that is gone.\n"
	"\n"
	"options:\n"
	"  --force    break it even if its owner is alive on this host\n"
	"             (that import or delete then runs unprotected)\n"
	"\n"
	"Exit status: 0 removed, 1 not held, refused or failed.\n";

int cmd_admin_unlock(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	char name[512], *rec = NULL;
	const char *arg;
	wstore_store *s = NULL;
	int ch, rc, force = 0, live = 0;

	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":fh", opts, NULL)) != -1) {
		if (ch == 'f')
			force = 1;
		else if (ch == 'h')
			return cli_print_help(help), EXIT_OK;
		else
			return cli_bad_option(ch, argv, "admin unlock", opts);
	}
	if (optind + 1 != argc)
		return wfront_usage_error(
			"'admin unlock' needs one checkpoint id or 'catalog'");
	arg = argv[optind];
	if (!strcmp(arg, "catalog") || !strncmp(arg, "models/", 7))
		snprintf(name, sizeof(name), "%s", arg);
	else if (strchr(arg, '/'))
		/* a lock is on one checkpoint, most often one that is not
		 * READY, which no model name stands for */
		return wfront_usage_error(
			"'admin unlock' takes a checkpoint id, not a model "
			"name ('%s'): the lock is on one checkpoint; 'wstore "
			"model list --all --model %s' lists them",
			arg, arg);
	else if (wstore_validate_checkpoint_id(arg) < 0)
		return wfront_usage_error("invalid checkpoint id '%s'", arg);
	else
		snprintf(name, sizeof(name), "models/%s", arg);
	if (cli_open_store(c, &s, 0))
		return EXIT_ERR;
	rc = wstore_lock_owner(&rec, &live, s, name);
	if (rc == 0) {
		if (!c->json)
			printf("lock '%s' owner: %s%s\n", name, rec,
			       live == 1 ? " (alive on this host)"
			       : live == 0
				       ? " (gone)"
				       : " (cannot tell: another host or PID namespace)");
		rc = wstore_lock_break(s, name, force);
	}
	cli_close_store(s);
	if (rc < 0) {
		free(rec);
		return cli_fail(rc);
	}
	if (c->json)
		cli_print_json(json_pack("{s:s, s:s, s:b}", "lock", name,
					 "owner", rec, "removed", 1));
	else if (!c->quiet)
		printf("removed lock '%s'\n", name);
	free(rec);
	return EXIT_OK;
}
