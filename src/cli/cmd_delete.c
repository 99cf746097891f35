/*
 * cmd_delete.c - wstore model delete: remove a checkpoint.  An id that
 * does not exist is an error ("not found", exit 1) unless --missing-ok,
 * which scripts use to finish an interrupted delete without caring
 * whether the manifest was already gone.  A checkpoint being read (it has
 * read leases) is refused, waited for (--wait) or deleted anyway
 * (--force).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <wstore/lease.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model delete ID [--missing-ok] [--wait [SECONDS]] [--force]\n"
	"\n"
	"Delete a checkpoint: take it out of the indexes, remove its chunks,\n"
	"then its manifest.  Re-run it to finish a delete that was\n"
	"interrupted.  An id that does not exist is an error (exit 1).\n"
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
		return cli_usage_error(
			"invalid --wait '%s': expected seconds (0 or more)", v);
	*out = (int64_t)(d * 1000);
	return 0;
}

static int is_number(const char *v)
{
	return (*v >= '0' && *v <= '9') || (*v == '.' && v[1]);
}

static int parse_args(const char **id, wstore_delete_options *o,
		      int *missing_ok, int argc, char **argv)
{
	*id = NULL;
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
			return cli_usage_error(
				"unknown option '%s' for 'model delete'", a);
		} else if (*id) {
			return cli_usage_error(
				"'model delete' takes one checkpoint id");
		} else {
			*id = a;
		}
	}
	if (!*id)
		return cli_usage_error("'model delete' needs a checkpoint id");
	return 0;
}

int cmd_model_delete(struct cli *c, int argc, char **argv)
{
	wstore_delete_options o = WSTORE_DELETE_OPTIONS_INIT;
	wstore_store *s = NULL;
	const char *id;
	int rc, missing_ok = 0;

	if (cli_wants_help(argc, argv)) {
		cli_print_help(help);
		return EXIT_OK;
	}
	if ((rc = parse_args(&id, &o, &missing_ok, argc, argv)))
		return rc;
	if (cli_open_store(c, &s, 0))
		return EXIT_ERR;
	o.progress = on_wait;
	rc = wstore_delete_ext(s, id, &o);
	cli_close_store(s);
	if (rc == WSTORE_EBUSY && !o.force &&
	    strstr(wstore_last_error(), "is being read")) {
		fprintf(stderr, "wstore: %s; %s\n", wstore_last_error(),
			o.wait_ms ? "still read after --wait; try again or "
				    "use --force"
				  : "use --wait [SECONDS] to wait for them, "
				    "or --force");
		return EXIT_ERR;
	}
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
