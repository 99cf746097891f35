/*
 * cmd_list.c - wstore model list (also: model ls): the checkpoints in the
 * index, with the status, size and file count of each from its manifest;
 * with --all every checkpoint that has a manifest, FAILED ones included.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model list [--model MODEL[@REV]] [--all]\n"
	"       (also: wstore model ls)\n"
	"\n"
	"List published (READY) checkpoints: all, or those of one model id.\n"
	"\n"
	"  --model MODEL   only checkpoints of this model id (ORG/NAME@REV:\n"
	"                  and of that revision)\n"
	"  --all           also checkpoints that are not READY (FAILED\n"
	"                  imports), read from every manifest in the store\n";

static json_t *row(wstore_store *s, const char *id)
{
	wstore_manifest *m = NULL;
	int rc = wstore_manifest_read(&m, s, id);
	json_t *j;

	/* could not read (the store failed) is neither of the others */
	if (rc < 0)
		return json_pack("{s:s, s:s, s:s}", "checkpoint_id", id,
				 "status",
				 rc == WSTORE_ENOTFOUND	 ? "MISSING"
				 : rc == WSTORE_ECORRUPT ? "CORRUPT"
							 : "UNREADABLE",
				 "error", wstore_last_error());
	j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "checkpoint_id",
		      id, "model_id", wstore_manifest_model_id(m), "revision",
		      wstore_manifest_revision(m), "status",
		      wstore_manifest_status(m), "total_size",
		      (json_int_t)wstore_manifest_total_size(m), "files",
		      (json_int_t)wstore_manifest_file_count(m), "updated_at",
		      (json_int_t)wstore_manifest_updated_at(m));
	if (wstore_manifest_error(m))
		json_object_set_new(j, "error",
				    json_string(wstore_manifest_error(m)));
	wstore_manifest_free(m);
	return j;
}

static const char *field(const json_t *r, const char *key)
{
	return json_string_value(json_object_get(r, key));
}

static void print_table(const struct cli *c, json_t *rows)
{
	static const char *const head[] = { "CHECKPOINT", "MODEL", "REVISION",
					    "STATUS",	  "FILES", "SIZE",
					    "UPDATED" };
	struct cli_table t;
	size_t i;
	json_t *r;

	cli_table_init(&t, 7, "llllrrl", head);
	json_array_foreach(rows, i, r)
	{
		char sz[32] = "-", when[32], files[32] = "-";
		const char *cell[7];

		if (json_object_get(r, "total_size"))
			wstore_format_size(sz, sizeof(sz),
					   json_integer_value(json_object_get(
						   r, "total_size")));
		if (json_object_get(r, "files"))
			snprintf(files, sizeof(files), "%lld",
				 (long long)json_integer_value(
					 json_object_get(r, "files")));
		cli_time(when, sizeof(when),
			 json_integer_value(json_object_get(r, "updated_at")));
		cell[0] = cli_text(c, field(r, "checkpoint_id"));
		cell[1] = cli_text(c, field(r, "model_id"));
		cell[2] = cli_text(c, field(r, "revision"));
		cell[3] = cli_text(c, field(r, "status"));
		cell[4] = files;
		cell[5] = sz;
		cell[6] = when;
		cli_table_add(&t, cell);
	}
	cli_table_print(&t);
}

/* The ids to show: the index (of one model), or every manifest. */
static int ids_of(char ***ids, size_t *n, wstore_store *s, const char *model,
		  int all)
{
	if (all)
		return wstore_list_all(ids, n, s);
	return model ? wstore_list_model(ids, n, s, model)
		     : wstore_list(ids, n, s);
}

int cmd_model_list(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "all", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *model = NULL;
	char *mid_only = NULL, *rev = NULL;
	wstore_store *s = NULL;
	char **ids = NULL;
	size_t n = 0;
	json_t *rows;
	int ch, rc, all = 0, bad = 0;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'm')
			model = optarg;
		else if (ch == 'a')
			all = 1;
		else if (ch == 'h')
			return cli_print_help(help), EXIT_OK;
		else
			return cli_bad_option(ch, argv, "model list", opts);
	}
	if (optind < argc)
		return wfront_usage_error(
			"unexpected argument '%s' for 'model list'",
			argv[optind]);
	/* ORG/NAME@REV: the model's checkpoints at that revision */
	if (model && strchr(model, '@')) {
		if (wstore_parse_name(&mid_only, &rev, model) != 1)
			return wfront_usage_error("invalid --model '%s': a "
						  "model name is ORG/NAME or "
						  "ORG/NAME@REVISION",
						  model);
		model = mid_only;
	}
	if (cli_open_store(c, &s, WSTORE_OPEN_READONLY)) {
		free(mid_only);
		free(rev);
		return EXIT_ERR;
	}
	rc = ids_of(&ids, &n, s, model, all);
	if (rc < 0) {
		cli_close_store(s);
		free(mid_only);
		free(rev);
		return cli_fail(rc);
	}
	rows = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *r = row(s, ids[i]);
		const char *mid = field(r, "model_id");
		const char *r_rev = field(r, "revision");
		int unread = !strcmp(field(r, "status"), "UNREADABLE");

		if (unread && !bad++)
			wfront_err("%s", field(r, "error"));
		/* --all reads every manifest: keep those of --model and its
		 * revision (and those that could not be read, which may be) */
		if (!unread &&
		    ((all && model && (!mid || strcmp(mid, model) != 0)) ||
		     (rev && (!r_rev || strcmp(r_rev, rev) != 0))))
			json_decref(r);
		else
			json_array_append_new(rows, r);
	}
	if (c->json)
		cli_print_json(rows);
	else if (json_array_size(rows) == 0)
		printf("no checkpoints\n"), json_decref(rows);
	else
		print_table(c, rows), json_decref(rows);
	wstore_strings_free(ids);
	cli_close_store(s);
	free(mid_only);
	free(rev);
	return bad ? EXIT_ERR : EXIT_OK;
}
