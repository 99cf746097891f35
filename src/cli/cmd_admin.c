/*
 * cmd_admin.c - wstore admin unlock: show and remove a lock object left by
 * a process that is gone (another host's locks are never broken
 * automatically); wstore admin migrate: convert the file store to its
 * whole-file layout.  `admin gc` lives in cmd_gc.c.
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
	"  --force    break it even if its owner is alive on this host, or\n"
	"             still renews it from another host or PID namespace\n"
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

/* ---- admin migrate ------------------------------------------------------ */

static const char migrate_help[] =
	"usage: wstore admin migrate [--dry-run] [--verify]\n"
	"\n"
	"Convert the file store in place from one file per chunk to one data\n"
	"file per checkpoint file, checkpoint by checkpoint, each under the\n"
	"lock its imports and deletes take.  Readers keep reading meanwhile,\n"
	"and a kill at any point leaves every checkpoint readable: run it\n"
	"again to finish.  A checkpoint another process holds (an import,\n"
	"delete or gc) is skipped and reported; FAILED checkpoints are left\n"
	"to 'wstore model delete'.  Other stores have no file layout: there\n"
	"is nothing to migrate (exit status 1).\n"
	"\n"
	"options:\n"
	"  --dry-run  report what would be converted, change nothing\n"
	"  --verify   check each new data file's SHA-256 against the manifest\n"
	"             before it replaces the chunk files (reads it once more)\n"
	"\n"
	"Prints one line per checkpoint and a summary; progress on stderr.\n"
	"Exit status: 0 done, 1 some checkpoint left as it was (busy or\n"
	"damaged) or an error.\n";

struct mig_report {
	struct cli *c;
	struct cli_progress *p;
	int dry_run;
	json_t *list;
};

static void on_checkpoint(const char *id, int code, uint64_t files,
			  const char *msg, void *ctx)
{
	struct mig_report *r = ctx;

	if (r->c->json) {
		json_array_append_new(
			r->list,
			json_pack("{s:s, s:I, s:s, s:s}", "checkpoint_id", id,
				  "files", (json_int_t)files, "result",
				  code == 0		     ? "ok"
				  : code == WSTORE_EBUSY     ? "busy"
				  : code == WSTORE_ENOTREADY ? "not ready"
							     : "failed",
				  "message", msg));
		return;
	}
	cli_progress_end(r->p);
	r->p->last = 0;
	if (code)
		wfront_err("skipped '%s': %s", id, msg);
	else if (!r->c->quiet && files)
		printf("%s '%s' (%llu files)\n",
		       r->dry_run ? "would convert" : "converted", id,
		       (unsigned long long)files);
	else if (!r->c->quiet)
		printf("current   '%s'\n", id);
	fflush(stdout);
}

static void migrate_summary(struct cli *c, const wstore_migrate_stats *st,
			    int dry_run, json_t *list)
{
	char b[32];

	if (c->json) {
		cli_print_json(json_pack(
			"{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:O}", "dry_run",
			dry_run, "checkpoints", (json_int_t)st->checkpoints,
			"converted", (json_int_t)st->converted, "files",
			(json_int_t)st->files, "bytes", (json_int_t)st->bytes,
			"current", (json_int_t)st->current, "skipped",
			(json_int_t)st->skipped, "results", list));
		return;
	}
	if (c->quiet)
		return;
	wstore_format_size(b, sizeof(b), st->bytes);
	printf("migrate%s: %llu checkpoints, %llu %s (%llu files, %s), %llu "
	       "already current, %llu skipped\n",
	       dry_run ? " (dry run)" : "", (unsigned long long)st->checkpoints,
	       (unsigned long long)st->converted,
	       dry_run ? "to convert" : "converted",
	       (unsigned long long)st->files, b,
	       (unsigned long long)st->current,
	       (unsigned long long)st->skipped);
}

int cmd_admin_migrate(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, 'n' },
		{ "verify", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	wstore_migrate_options o = WSTORE_MIGRATE_OPTIONS_INIT;
	wstore_migrate_stats st;
	struct cli_progress p = { .c = c, .verb = "migrating" };
	struct mig_report r = { c, &p, 0, NULL };
	wstore_store *s = NULL;
	int ch, rc;

	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'n')
			o.dry_run = 1;
		else if (ch == 'V')
			o.verify = 1;
		else if (ch == 'h')
			return cli_print_help(migrate_help), EXIT_OK;
		else
			return cli_bad_option(ch, argv, "admin migrate", opts);
	}
	if (optind != argc)
		return wfront_usage_error("'admin migrate' takes no arguments");
	if (cli_open_store(c, &s, o.dry_run ? WSTORE_OPEN_READONLY : 0))
		return EXIT_ERR;
	r.dry_run = o.dry_run;
	r.list = json_array();
	o.on_checkpoint = on_checkpoint;
	o.on_checkpoint_ctx = &r;
	o.progress = cli_progress_fn;
	o.progress_ctx = &p;
	p.start = wclock_mono_s();
	rc = wstore_migrate(&st, s, &o);
	cli_progress_end(&p);
	cli_close_store(s);
	if (rc == 0 || rc == WSTORE_EBUSY || st.checkpoints > 0)
		migrate_summary(c, &st, o.dry_run, r.list);
	json_decref(r.list);
	return rc < 0 ? cli_fail(rc) : EXIT_OK;
}
