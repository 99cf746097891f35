/*
 * cmd_delete.c - wstore model delete: remove a checkpoint.  An id that
 * does not exist is an error ("not found", exit 1) unless --missing-ok,
 * which scripts use to finish an interrupted delete without caring
 * whether the manifest was already gone.  A checkpoint being read (it has
 * read leases) is refused, waited for (--wait) or deleted anyway
 * (--force).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <wstore/lease.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model delete ID|ORG/NAME[@REV]... [--missing-ok]\n"
	"                           [--wait [SECONDS]] [--force]\n"
	"       (also: wstore model rm)\n"
	"\n"
	"Delete checkpoints: take each out of the indexes, remove its chunks,\n"
	"then its manifest.  Re-run it to finish a delete that was\n"
	"interrupted.  An id that does not exist is an error (exit 1).  A\n"
	"model name (it has a '/'; a checkpoint id never does) deletes the\n"
	"checkpoint it resolves to ('wstore model resolve' shows which).\n"
	"Every id is tried; the exit status is that of the first failure.\n"
	"\n"
	"A checkpoint that is being read (pull, verify, materialize-file, a\n"
	"mount with one of its files open, an open read handle) holds read\n"
	"leases: the delete refuses, naming the readers and when their\n"
	"leases expire.\n"
	"\n"
	"options:\n"
	"  --missing-ok       an id that does not exist is not an error\n"
	"  --wait [SECONDS]   wait for the readers to finish (no limit without\n"
	"                     SECONDS); meanwhile no new reader can open it.\n"
	"                     On timeout or ^C it is left as it was.\n"
	"  --force            delete even while it is read (readers fail)\n";

static int on_wait(uint64_t done, uint64_t total, const char *path, void *ctx)
{
	(void)done;
	(void)total;
	(void)path;
	(void)ctx;
	return cli_interrupted();
}

/* "SECONDS" of --wait: a non-negative number, fractions allowed. */
static int parse_wait(int64_t *out, const char *v)
{
	char *end;
	double d = strtod(v, &end);

	if (!*v || *end || d < 0 || d > 1e9 || v[0] == '-')
		return wfront_usage_error(
			"invalid --wait '%s': expected seconds (0 or more)", v);
	*out = (int64_t)(d * 1000);
	return 0;
}

static int is_number(const char *v)
{
	return (*v >= '0' && *v <= '9') || (*v == '.' && v[1]);
}

static int parse_args(const char ***ids, size_t *n, wstore_delete_options *o,
		      int *missing_ok, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "missing-ok", no_argument, NULL, 0 },
		{ "force", no_argument, NULL, 0 },
		{ "wait", optional_argument, NULL, 0 },
		{ "help", no_argument, NULL, 0 },
		{ 0 }
	};

	*n = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--missing-ok")) {
			*missing_ok = 1;
		} else if (!strcmp(a, "--force")) {
			o->force = 1;
		} else if (!strcmp(a, "--wait")) {
			o->wait_ms = -1;
			if (i + 1 < argc && is_number(argv[i + 1]) &&
			    parse_wait(&o->wait_ms, argv[++i]))
				return EXIT_USAGE;
		} else if (!strncmp(a, "--wait=", 7)) {
			if (parse_wait(&o->wait_ms, a + 7))
				return EXIT_USAGE;
		} else if (a[0] == '-' && a[1]) {
			const char *near = cli_closest_option(a, opts);

			if (near)
				return wfront_usage_error(
					"unknown option '%s' for 'model "
					"delete'; did you mean '%s'?",
					a, near);
			return wfront_usage_error(
				"unknown option '%s' for 'model delete'", a);
		} else {
			/* refused before any store is opened */
			if (cli_check_name(a))
				return EXIT_ERR;
			(*ids)[(*n)++] = a;
		}
	}
	if (!*n)
		return wfront_usage_error(
			"'model delete' needs a checkpoint id or model name");
	return 0;
}

/* Delete one; the exit status, after saying what happened. */
static int delete_one(struct cli *c, wstore_store *s, const char *arg,
		      wstore_delete_options *o, int missing_ok, json_t *out)
{
	const char *id;
	int rc;

	if (cli_resolve(c, &id, s, arg))
		return EXIT_ERR;
	rc = wstore_delete_ext(s, id, o);
	if (rc == WSTORE_EBUSY && !o->force &&
	    strstr(wstore_last_error(), "is being read")) {
		wfront_err("%s; %s", wstore_last_error(),
			   o->wait_ms
				   ? "still read after --wait; try again or "
				     "use --force"
				   : "use --wait [SECONDS] to wait for them, "
				     "or --force");
		return EXIT_ERR;
	}
	if (rc < 0 && !(rc == WSTORE_ENOTFOUND && missing_ok))
		return cli_fail(rc);
	if (c->json)
		json_array_append_new(out,
				      json_pack("{s:s, s:b}", "checkpoint_id",
						id, "deleted", rc == 0));
	else if (!c->quiet && rc == 0 && strcmp(id, arg) != 0)
		printf("deleted '%s' (%s)\n", cli_text(c, id),
		       cli_text(c, arg));
	else if (!c->quiet && rc == 0)
		printf("deleted '%s'\n", cli_text(c, id));
	else if (!c->quiet)
		printf("no checkpoint '%s': nothing to delete\n",
		       cli_text(c, id));
	return EXIT_OK;
}

int cmd_model_delete(struct cli *c, int argc, char **argv)
{
	wstore_delete_options o = WSTORE_DELETE_OPTIONS_INIT;
	wstore_store *s = NULL;
	const char **ids = calloc((size_t)argc + 1, sizeof(*ids));
	json_t *out = json_array();
	size_t n = 0;
	int rc, status = EXIT_OK, missing_ok = 0;

	if (cli_wants_help(argc, argv)) {
		cli_print_help(help);
		status = EXIT_OK;
	} else if (!ids || !out) {
		status = cli_fail(-ENOMEM);
	} else if ((rc = parse_args(&ids, &n, &o, &missing_ok, argc, argv))) {
		status = rc;
	} else if (cli_open_store(c, &s, 0)) {
		status = EXIT_ERR;
	} else {
		o.progress = on_wait;
		/* every id is tried; the status is that of the first failure */
		for (size_t i = 0; i < n && !cli_interrupted(); i++) {
			rc = delete_one(c, s, ids[i], &o, missing_ok, out);
			if (rc && status == EXIT_OK)
				status = rc;
		}
		cli_close_store(s);
		/* one id: one object, as before several were accepted */
		if (c->json && json_array_size(out) == 1 && n == 1)
			cli_print_json(json_incref(json_array_get(out, 0)));
		else if (c->json)
			cli_print_json(json_incref(out));
	}
	json_decref(out);
	free(ids);
	return status;
}
