/*
 * cmd_list.c - wstore model list: the checkpoints in the index, with the
 * status, size and file count of each from its manifest.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model list [--model MODEL]\n"
	"\n"
	"List published checkpoints (all, or those of one model id).\n";

static json_t *row(wstore_store *s, const char *id)
{
	wstore_manifest *m = NULL;
	int rc = wstore_manifest_read(&m, s, id);
	json_t *j;

	if (rc < 0)
		return json_pack("{s:s, s:s, s:s}", "checkpoint_id", id,
				 "status",
				 rc == WSTORE_ENOTFOUND ? "MISSING" : "CORRUPT",
				 "error", wstore_last_error());
	j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "checkpoint_id",
		      id, "model_id", wstore_manifest_model_id(m), "revision",
		      wstore_manifest_revision(m), "status",
		      wstore_manifest_status(m), "total_size",
		      (json_int_t)wstore_manifest_total_size(m), "files",
		      (json_int_t)wstore_manifest_file_count(m), "updated_at",
		      (json_int_t)wstore_manifest_updated_at(m));
	wstore_manifest_free(m);
	return j;
}

static void print_table(const struct cli *c, json_t *rows)
{
	size_t i;
	json_t *r;

	printf("%-32s %-32s %-10s %-7s %6s %12s  %s\n", "CHECKPOINT", "MODEL",
	       "REVISION", "STATUS", "FILES", "SIZE", "UPDATED");
	json_array_foreach(rows, i, r)
	{
		char sz[32] = "-", when[32] = "-";
		time_t t = (time_t)json_integer_value(
			json_object_get(r, "updated_at"));
		const char *model =
			json_string_value(json_object_get(r, "model_id"));
		const char *rev =
			json_string_value(json_object_get(r, "revision"));

		if (json_object_get(r, "total_size"))
			wstore_format_size(sz, sizeof(sz),
					   json_integer_value(json_object_get(
						   r, "total_size")));
		if (t)
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M",
				 localtime(&t));
		printf("%-32s %-32s %-10s %-7s %6lld %12s  %s\n",
		       cli_text(c, json_string_value(json_object_get(
					   r, "checkpoint_id"))),
		       model ? cli_text(c, model) : "-",
		       rev ? cli_text(c, rev) : "-",
		       cli_text(c, json_string_value(
					   json_object_get(r, "status"))),
		       (long long)json_integer_value(
			       json_object_get(r, "files")),
		       sz, when);
	}
}

int cmd_model_list(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *model = NULL;
	wstore_store *s = NULL;
	char **ids = NULL;
	size_t n = 0;
	json_t *rows;
	int ch, rc;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'm')
			model = optarg;
		else if (ch == 'h')
			return cli_print_help(help), EXIT_OK;
		else
			return cli_bad_option(ch, argv, "model list");
	}
	if (optind < argc)
		return cli_usage_error(
			"unexpected argument '%s' for 'model list'",
			argv[optind]);
	if (cli_open_store(c, &s, WSTORE_OPEN_READONLY))
		return EXIT_ERR;
	rc = model ? wstore_list_model(&ids, &n, s, model)
		   : wstore_list(&ids, &n, s);
	if (rc < 0) {
		cli_close_store(s);
		return cli_fail(rc);
	}
	rows = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(rows, row(s, ids[i]));
	if (c->json)
		cli_print_json(rows);
	else if (n == 0)
		printf("no checkpoints\n"), json_decref(rows);
	else
		print_table(c, rows), json_decref(rows);
	wstore_strings_free(ids);
	cli_close_store(s);
	return EXIT_OK;
}
