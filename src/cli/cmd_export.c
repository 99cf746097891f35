/*
 * cmd_export.c - wstore model export: write a checkpoint as a bundle, one
 * tar stream (the manifest, then every file) that `wstore model import
 * --bundle` reads on another machine and plain tar unpacks.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char help[] =
	"usage: wstore model export NAME [--output FILE|-]\n"
	"\n"
	"Write READY checkpoint NAME (an id, or ORG/NAME[@REV]) as a bundle:\n"
	"one POSIX tar stream holding its manifest (" WSTORE_BUNDLE_MANIFEST
	")\n"
	"first, then every file in manifest order.  `wstore model import\n"
	"--bundle` imports it, checking every file; `tar -xf` unpacks it into\n"
	"the checkpoint folder.  Every file is checked against the manifest\n"
	"as it is read; the read lease is held meanwhile.\n"
	"\n"
	"  --output FILE   write FILE (a temp file next to it, renamed into\n"
	"                  place once complete); - or none: standard output,\n"
	"                  which must not be a terminal\n";

static int parse(const char **id, const char **out, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int ch;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		if (ch == 'o')
			*out = optarg;
		else if (ch == 'h')
			return cli_print_help(help), -1;
		else
			return cli_bad_option(ch, argv, "model export", opts);
	}
	if (optind + 1 != argc)
		return wfront_usage_error(
			"'model export' needs exactly one checkpoint name");
	*id = argv[optind];
	if (!**out)
		return wfront_usage_error("--output must not be empty");
	if (!strcmp(*out, "-") && isatty(STDOUT_FILENO))
		return wfront_usage_error(
			"refusing to write a bundle to a terminal: give "
			"--output FILE or redirect standard output");
	return 0;
}

int cmd_model_export(struct cli *c, int argc, char **argv)
{
	wstore_export_options o = WSTORE_EXPORT_OPTIONS_INIT;
	struct cli_progress p = { .c = c, .verb = "exporting" };
	const char *id = NULL, *out = "-";
	wstore_store *s = NULL;
	int rc = parse(&id, &out, argc, argv), to_stdout;

	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (cli_open_named(c, &s, &id))
		return EXIT_ERR;
	to_stdout = !strcmp(out, "-");
	/* a reader that went away is an error to report, not a signal */
	if (to_stdout)
		signal(SIGPIPE, SIG_IGN);
	o.progress = cli_progress_fn;
	o.progress_ctx = &p;
	p.start = wclock_mono_s();
	rc = wstore_export(s, id, to_stdout ? STDOUT_FILENO : -1,
			   to_stdout ? NULL : out, &o);
	cli_progress_end(&p);
	cli_close_store(s);
	if (rc < 0)
		return cli_fail(rc);
	if (!c->quiet) {
		/* the bundle may be standard output: the report goes aside */
		fprintf(to_stdout ? stderr : stdout,
			"exported '%s' to %s in %.2f s\n", cli_text(c, id),
			to_stdout ? "standard output" : out,
			wclock_mono_s() - p.start);
	}
	return EXIT_OK;
}
