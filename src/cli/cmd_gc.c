/*
 * cmd_gc.c - wstore admin gc (also `wstore gc`): remove chunks and temp
 * files that no manifest references, on stores that can list keys.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
	"usage: wstore admin gc [--dry-run] [--grace SECONDS]\n"
	"\n"
	"Find objects no manifest references -- chunks left by crashed\n"
	"imports, and (file store) temp files of interrupted writes -- and\n"
	"remove them.  Each checkpoint is examined while holding its lock,\n"
	"which every import and delete holds while it writes, so a running\n"
	"import is skipped and never loses a chunk; nothing a READY manifest\n"
	"lists is touched.  A checkpoint whose manifest is unreadable is\n"
	"skipped (remove it with 'wstore model delete').\n"
	"Needs a store that can list keys (file, redis); not mooncake.\n"
	"\n"
	"options:\n"
	"  --dry-run          report orphans, remove nothing (takes no lock)\n"
	"  --grace SECONDS    leave temp files younger than this (default 3600)\n"
	"\n"
	"Prints one line per orphan and a summary.\n"
	"Exit status: 0 done, 1 an error (some orphan could not be removed,\n"
	"or the store cannot list keys).\n";

struct report {
	struct cli *c;
	json_t *orphans, *skipped;
};

static void on_orphan(const char *key, uint64_t bytes, int removed, void *ctx)
{
	struct report *r = ctx;

	if (r->c->json) {
		json_array_append_new(r->orphans,
				      json_pack("{s:s, s:I, s:b}", "key", key,
						"bytes", (json_int_t)bytes,
						"removed", removed));
		return;
	}
	if (!r->c->quiet)
		printf("%s %s (%llu bytes)\n", removed ? "removed" : "orphan ",
		       key, (unsigned long long)bytes);
}

static void on_skip(const char *id, int code, const char *msg, void *ctx)
{
	struct report *r = ctx;

	if (r->c->json) {
		json_array_append_new(
			r->skipped,
			json_pack("{s:s, s:s, s:s}", "checkpoint_id", id,
				  "reason",
				  code == WSTORE_EBUSY ? "busy" : "unreadable",
				  "message", msg));
		return;
	}
	fprintf(stderr, "wstore: skipped '%s': %s\n", id, msg);
}

static int parse_grace(int64_t *out, const char *v)
{
	char *end;
	long long n = strtoll(v, &end, 10);

	if (!*v || *end || n < 0 || v[0] == '-' || v[0] == '+' ||
	    n > 100LL * 365 * 86400)
		return cli_usage_error(
			"invalid --grace '%s': expected seconds (0 or more)",
			v);
	*out = n;
	return 0;
}

static void print_summary(struct cli *c, const wstore_gc_stats *st, int dry_run,
			  struct report *r)
{
	char b[32];

	if (c->json) {
		cli_print_json(json_pack(
			"{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:O, s:O}",
			"dry_run", dry_run, "checkpoints",
			(json_int_t)st->checkpoints, "orphans",
			(json_int_t)st->orphans, "orphan_bytes",
			(json_int_t)st->orphan_bytes, "temps",
			(json_int_t)st->temps, "removed",
			(json_int_t)st->removed, "skipped",
			(json_int_t)st->skipped, "objects", r->orphans,
			"skipped_checkpoints", r->skipped));
		return;
	}
	if (c->quiet)
		return;
	wstore_format_size(b, sizeof(b), st->orphan_bytes + st->temp_bytes);
	printf("gc%s: %llu checkpoints, %llu orphans, %llu temp files (%s), "
	       "%llu removed, %llu skipped\n",
	       dry_run ? " (dry run)" : "", (unsigned long long)st->checkpoints,
	       (unsigned long long)st->orphans, (unsigned long long)st->temps,
	       b, (unsigned long long)st->removed,
	       (unsigned long long)st->skipped);
}

int cmd_gc(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, 'n' },
		{ "grace", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	wstore_gc_options o = WSTORE_GC_OPTIONS_INIT;
	wstore_gc_stats st;
	struct report r = { c, json_array(), json_array() };
	wstore_store *s = NULL;
	int ch, rc;

	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'n') {
			o.dry_run = 1;
		} else if (ch == 'g') {
			if (parse_grace(&o.grace_seconds, optarg))
				goto usage;
		} else if (ch == 'h') {
			cli_print_help(help);
			rc = EXIT_OK;
			goto done;
		} else {
			cli_bad_option(ch, argv, "admin gc");
			goto usage;
		}
	}
	if (optind != argc) {
		cli_usage_error("'admin gc' takes no arguments");
		goto usage;
	}
	if (cli_open_store(c, &s, o.dry_run ? WSTORE_OPEN_READONLY : 0)) {
		rc = EXIT_ERR;
		goto done;
	}
	o.on_orphan = on_orphan;
	o.on_orphan_ctx = &r;
	o.on_skip = on_skip;
	o.on_skip_ctx = &r;
	rc = wstore_gc(&st, s, &o);
	cli_close_store(s);
	if (rc < 0 && rc != WSTORE_EUNSUPPORTED && rc != WSTORE_EINVAL)
		print_summary(c, &st, o.dry_run, &r);
	else if (rc == 0)
		print_summary(c, &st, o.dry_run, &r);
	rc = rc < 0 ? cli_fail(rc) : EXIT_OK;
	goto done;
usage:
	rc = EXIT_USAGE;
done:
	json_decref(r.orphans);
	json_decref(r.skipped);
	return rc;
}
