/*
 * cmd_config.c - wstore config init: write the current connection settings
 * (from flags, environment and any existing file) to the config file, so
 * later commands need no server addresses.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore [global options] config init [--force]\n"
	"\n"
	"Write the settings given by flags and environment (--store,\n"
	"--master-server-addr, --metadata-server, --protocol, --rdma-devices,\n"
	"--local-hostname, WSTORE_*) to the config file: --config FILE, else\n"
	"$WSTORE_CONFIG, else ~/.config/wstore/config.json.  An existing file\n"
	"is only replaced with --force.\n";

int cmd_config_init(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	char *def = NULL;
	const char *path;
	int ch, force = 0, rc;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":hf", opts, NULL)) != -1) {
		if (ch == 'f')
			force = 1;
		else if (ch == 'h')
			return cli_print_help(help), EXIT_OK;
		else
			return cli_bad_option(ch, argv, "config init");
	}
	if (optind < argc)
		return cli_usage_error(
			"unexpected argument '%s' for 'config init'",
			argv[optind]);
	path = c->config_path ? c->config_path
			      : (def = wstore_config_default_path());
	if (!path)
		return cli_usage_error(
			"no config path: set HOME or pass --config");
	if (!force && access(path, F_OK) == 0) {
		free(def);
		return cli_usage_error(
			"config file '%s' exists; use --force to replace it",
			path);
	}
	rc = wstore_config_save(c->cfg, path);
	if (rc < 0) {
		free(def);
		return cli_fail(rc);
	}
	if (c->json)
		cli_print_json(json_pack("{s:s}", "config", path));
	else if (!c->quiet)
		printf("wrote '%s'\n", path);
	free(def);
	return EXIT_OK;
}
