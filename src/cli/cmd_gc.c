/*
 * cmd_gc.c - wstore admin gc (also `wstore gc`): remove chunks and temp
 * files that no manifest references, on stores that can list keys.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <wstore/lease.h>

#include "cli.h"

static const char help[] =
	"usage: wstore admin gc [--dry-run] [--grace SECONDS]\n"
	"       wstore admin gc --evict-to SIZE [--dry-run]\n"
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
	"  --evict-to SIZE    instead: delete READY checkpoints that are\n"
	"                     neither pinned nor leased, least recently read\n"
	"                     first, until the checkpoints hold at most SIZE\n"
	"                     (e.g. 20GiB); with --dry-run only list them\n"
	"\n"
	"Prints one line per orphan and a summary.\n"
	"Exit status: 0 done, 1 an error (some orphan could not be removed,\n"
	"or the store cannot list keys; with --evict-to, SIZE could not be\n"
	"reached because of pinned or leased checkpoints).\n";

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
	wfront_err("skipped '%s': %s", id, msg);
}

static int parse_grace(int64_t *out, const char *v)
{
	char *end;
	long long n = strtoll(v, &end, 10);

	if (!*v || *end || n < 0 || v[0] == '-' || v[0] == '+' ||
	    n > 100LL * 365 * 86400)
		return wfront_usage_error(
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

static void on_evict(const char *id, uint64_t bytes, int64_t last_read_ms,
		     int removed, int code, const char *message, void *ctx)
{
	struct report *r = ctx;
	char sz[32], t[32];

	cli_time(t, sizeof(t), last_read_ms / 1000);
	if (r->c->json) {
		json_array_append_new(
			r->orphans,
			json_pack("{s:s, s:I, s:I, s:b, s:s}", "checkpoint_id",
				  id, "bytes", (json_int_t)bytes,
				  "last_read_at",
				  (json_int_t)(last_read_ms / 1000), "evicted",
				  removed, "message", message));
		return;
	}
	wstore_format_size(sz, sizeof(sz), bytes);
	if (code)
		wfront_err("not evicted '%s': %s", id, message);
	else if (!r->c->quiet)
		printf("%s '%s' (%s, last read %s)\n",
		       removed ? "evicted" : "would evict", id, sz, t);
}

static int evict_to(struct cli *c, uint64_t target, int dry_run,
		    struct report *r)
{
	wstore_store *s = NULL;
	uint64_t used = 0;
	char sz[32];
	int rc;

	if (cli_open_store(c, &s, 0))
		return EXIT_ERR;
	rc = wstore_evict(&used, s, target, dry_run, on_evict, r);
	cli_close_store(s);
	if (rc < 0)
		return cli_fail(rc);
	if (c->json) {
		cli_print_json(json_pack("{s:b, s:I, s:I, s:O}", "dry_run",
					 dry_run, "target", (json_int_t)target,
					 "used", (json_int_t)used, "evicted",
					 r->orphans));
	} else if (!c->quiet) {
		wstore_format_size(sz, sizeof(sz), used);
		printf("checkpoints hold %s%s\n", sz,
		       dry_run ? " (dry run: would after eviction)" : "");
	}
	return EXIT_OK;
}

int cmd_gc(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, 'n' },
		{ "grace", required_argument, NULL, 'g' },
		{ "evict-to", required_argument, NULL, 'e' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	wstore_gc_options o = WSTORE_GC_OPTIONS_INIT;
	wstore_gc_stats st;
	struct report r = { c, json_array(), json_array() };
	wstore_store *s = NULL;
	uint64_t target = 0;
	int ch, rc, evict = 0;

	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'n') {
			o.dry_run = 1;
		} else if (ch == 'g') {
			if (parse_grace(&o.grace_seconds, optarg))
				goto usage;
		} else if (ch == 'e') {
			if (!strcmp(optarg, "0"))
				target = 0;
			else if (wstore_parse_size(&target, optarg) < 0) {
				wfront_usage_error(
					"invalid --evict-to '%s': "
					"expected a size such as 20GiB",
					optarg);
				goto usage;
			}
			evict = 1;
		} else if (ch == 'h') {
			cli_print_help(help);
			rc = EXIT_OK;
			goto done;
		} else {
			cli_bad_option(ch, argv, "admin gc", opts);
			goto usage;
		}
	}
	if (optind != argc) {
		wfront_usage_error("'admin gc' takes no arguments");
		goto usage;
	}
	if (evict) {
		rc = evict_to(c, target, o.dry_run, &r);
		goto done;
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
