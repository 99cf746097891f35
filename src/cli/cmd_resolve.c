/*
 * cmd_resolve.c - wstore model resolve: which checkpoint a model name
 * ORG/NAME[@REVISION] stands for, and why.  The answer is the library's
 * (wstore_resolve, the rule serve and every command taking a model name
 * use); the candidates are listed beside it so a person can see why the
 * others lost.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model resolve ORG/NAME[@REVISION]\n"
	"\n"
	"Say which checkpoint a model name resolves to, and why.  The rule\n"
	"(that of 'wstore serve', and of every command given a model name\n"
	"instead of a checkpoint id): among the READY checkpoints with that\n"
	"model id whose revision, or commit id, is REVISION (default main),\n"
	"the newest wins: latest updated_at, then created_at, then the\n"
	"greatest checkpoint id.  main, when no checkpoint of the model is\n"
	"recorded at main, names the newest imported from a Hub (recorded at\n"
	"the Hub's 40-digit commit).  A checkpoint id never contains '/'; a\n"
	"model name always does.\n";

/* Why candidate m did or did not win. */
static const char *why(const wstore_manifest *m, const char *chosen,
		       const char *rev)
{
	char sha[WSTORE_COMMIT_LEN + 1];

	if (!strcmp(wstore_manifest_checkpoint_id(m), chosen))
		return strcmp(wstore_manifest_revision(m), rev) &&
				       !strcmp(rev, "main") &&
				       strlen(wstore_manifest_revision(m)) == 40
			       ? "chosen: newest Hub import (no main)"
			       : "chosen: newest match";
	if (strcmp(wstore_manifest_status(m), "READY") != 0)
		return "not READY";
	if (strcmp(wstore_manifest_revision(m), rev) != 0 &&
	    !(wstore_manifest_commit(sha, sizeof(sha), m) == 0 &&
	      !strcmp(sha, rev)))
		return "other revision";
	return "older";
}

static json_t *candidates(wstore_store *s, const char *model, const char *rev,
			  const char *chosen)
{
	json_t *out = json_array();
	char **ids = NULL;
	size_t n = 0;

	if (wstore_list_model(&ids, &n, s, model) < 0)
		return out;
	for (size_t i = 0; i < n; i++) {
		wstore_manifest *m = NULL;

		if (wstore_manifest_read(&m, s, ids[i]) < 0)
			continue;
		if (!strcmp(wstore_manifest_model_id(m), model))
			json_array_append_new(
				out,
				json_pack(
					"{s:s, s:s, s:s, s:I, s:s}",
					"checkpoint_id", ids[i], "revision",
					wstore_manifest_revision(m), "status",
					wstore_manifest_status(m), "updated_at",
					(json_int_t)wstore_manifest_updated_at(
						m),
					"reason", why(m, chosen, rev)));
		wstore_manifest_free(m);
	}
	wstore_strings_free(ids);
	return out;
}

static void print_text(const struct cli *c, const char *model, const char *rev,
		       const char *id, json_t *cands)
{
	static const char *const head[] = { "",	      "CHECKPOINT", "REVISION",
					    "STATUS", "UPDATED",    "WHY" };
	struct cli_table t;
	size_t i;
	json_t *r;

	printf("%s@%s -> %s\n", cli_text(c, model), cli_text(c, rev),
	       cli_text(c, id));
	printf("rule: the newest READY checkpoint of model '%s' at revision "
	       "(or commit id) '%s'\n",
	       cli_text(c, model), cli_text(c, rev));
	cli_table_init(&t, 6, "llllll", head);
	json_array_foreach(cands, i, r)
	{
		char when[32];
		const char *cell[6];
		const char *cid =
			json_string_value(json_object_get(r, "checkpoint_id"));

		cli_time(when, sizeof(when),
			 json_integer_value(json_object_get(r, "updated_at")));
		cell[0] = strcmp(cid, id) ? " " : "*";
		cell[1] = cli_text(c, cid);
		cell[2] = cli_text(
			c, json_string_value(json_object_get(r, "revision")));
		cell[3] = json_string_value(json_object_get(r, "status"));
		cell[4] = when;
		cell[5] = json_string_value(json_object_get(r, "reason"));
		cli_table_add(&t, cell);
	}
	cli_table_print(&t);
}

int cmd_model_resolve(struct cli *c, int argc, char **argv)
{
	wstore_store *s = NULL;
	const char *arg;
	char *model = NULL, *rev = NULL, *id = NULL;
	json_t *cands;
	int rc = cli_one_id(&arg, argc, argv, "model resolve", help);

	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (wstore_parse_name(&model, &rev, arg) == 0)
		return wfront_usage_error(
			"'%s' is a checkpoint id, not a model "
			"name (ORG/NAME[@REVISION] has a '/')",
			arg);
	if (cli_open_store(c, &s, WSTORE_OPEN_READONLY)) {
		free(model);
		free(rev);
		return EXIT_ERR;
	}
	rc = wstore_resolve(&id, NULL, s, model, rev);
	if (rc < 0) {
		rc = cli_fail(rc);
	} else {
		const char *r =
			rev && *rev && strcmp(rev, "HEAD") ? rev : "main";

		cands = candidates(s, model, r, id);
		if (c->json)
			cli_print_json(json_pack("{s:s, s:s, s:s, s:s, s:o}",
						 "name", arg, "model_id", model,
						 "revision", r, "checkpoint_id",
						 id, "candidates", cands));
		else
			print_text(c, model, r, id, cands), json_decref(cands);
		rc = EXIT_OK;
	}
	cli_close_store(s);
	free(id);
	free(model);
	free(rev);
	return rc;
}
