/*
 * cmd_verify.c - wstore model verify: re-read every chunk and check sizes
 * and SHA-256 of every file.  Exit status 3 when a file is damaged.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include <wstore/read.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model verify ID [--jobs N]\n"
	"\n"
	"Re-read every chunk of a READY checkpoint and check each file's size\n"
	"and SHA-256 against the manifest, then check the structure a byte\n"
	"check cannot see: safetensors and GGUF headers, and that\n"
	"model.safetensors.index.json names only files and tensors that exist.\n"
	"Damaged files are named.\n"
	"Exit status: 0 all good, 3 damage found, 1 the check could not run.\n";

/* One entry per file, however many checks find it damaged: the byte check
 * and the structure check both report a shard whose header chunk is
 * missing, and that is one damaged file. */
struct report {
	struct cli *c;
	json_t *files; /* entries in the order first reported */
	json_t *seen;  /* path -> its entry */
	size_t bad;
	char first[1024]; /* message of the first damaged file */
};

static void on_file(const char *path, int result, const char *msg, void *ctx)
{
	struct report *r = ctx;
	json_t *e = json_object_get(r->seen, path);

	if (e && (!result || !json_is_true(json_object_get(e, "ok"))))
		return; /* already counted */
	if (result && !r->bad++)
		snprintf(r->first, sizeof(r->first), "%s", msg);
	if (e) {
		json_object_set_new(e, "ok", json_false());
		json_object_set_new(e, "error", json_string(msg));
	} else {
		e = json_pack("{s:s, s:b, s:s?}", "path", path, "ok", !result,
			      "error", result ? msg : NULL);
		json_array_append_new(r->files, e);
		json_object_set(r->seen, path, e);
	}
	if (r->c->json)
		return;
	if (r->c->tty)
		fputs("\r\033[K", stderr);
	if (result)
		printf("BAD  %s: %s\n", cli_text(r->c, path),
		       cli_text(r->c, msg));
	else if (!r->c->quiet)
		printf("ok   %s\n", cli_text(r->c, path));
}

/* Headers and index.json: what a byte-level check cannot see. */
static int structure(wstore_store *s, const char *id, struct report *r)
{
	wstore_checkpoint *ck = NULL;
	int rc = wstore_checkpoint_open(&ck, s, id);

	if (rc < 0)
		return rc;
	rc = wstore_check_structure(ck, on_file, r);
	wstore_checkpoint_free(ck);
	return rc;
}

int cmd_model_verify(struct cli *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "jobs", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	wstore_verify_options o = WSTORE_VERIFY_OPTIONS_INIT;
	struct cli_progress p = { .c = c, .verb = "verifying" };
	struct report r = { c, NULL, NULL, 0, "" };
	wstore_store *s = NULL;
	const char *id;
	size_t nfiles;
	int ch, rc;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'j') {
			if (wfront_parse_count(&o.jobs, "--jobs", optarg))
				return EXIT_USAGE;
		} else if (ch == 'h') {
			return cli_print_help(help), EXIT_OK;
		} else {
			return cli_bad_option(ch, argv, "model verify", opts);
		}
	}
	if (optind + 1 != argc)
		return wfront_usage_error(
			"'model verify' needs exactly one checkpoint id");
	id = argv[optind];
	if (cli_open_named(c, &s, &id))
		return EXIT_ERR;
	r.files = json_array();
	r.seen = json_object();
	o.progress = cli_progress_fn;
	o.progress_ctx = &p;
	o.on_file = on_file;
	o.on_file_ctx = &r;
	p.start = wclock_mono_s();
	rc = wstore_verify(s, id, &o);
	cli_progress_end(&p);
	if (rc == 0 || rc == WSTORE_EVERIFY) {
		int src = structure(s, id, &r);

		if (src < 0 && rc == 0)
			rc = src;
	}
	cli_close_store(s);
	if (rc == WSTORE_EVERIFY || (rc == 0 && r.bad))
		rc = WSTORE_EVERIFY;
	if (c->json && (rc == 0 || rc == WSTORE_EVERIFY)) {
		cli_print_json(json_pack("{s:s, s:b, s:I, s:O}",
					 "checkpoint_id", id, "ok", rc == 0,
					 "bad_files", (json_int_t)r.bad,
					 "files", r.files));
	}
	nfiles = json_array_size(r.files);
	json_decref(r.files);
	json_decref(r.seen);
	if (rc == WSTORE_EVERIFY && r.bad) {
		wfront_err(
			"checkpoint '%s': %zu of %zu files damaged; first: %s",
			id, r.bad, nfiles, r.first);
		return EXIT_VERIFY;
	}
	if (rc < 0)
		return cli_fail(rc);
	if (!c->json && !c->quiet)
		printf("verified '%s': all files good (%.2f s)\n", id,
		       wclock_mono_s() - p.start);
	return EXIT_OK;
}
