/*
 * cli.h - what the subcommands of the wstore tool share.  The tool uses
 * only the public API (include/wstore/); nothing here reaches into the
 * library's internals.
 */
#ifndef WSTORE_CLI_H
#define WSTORE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include <wstore/wstore.h>

/* The monotonic clock (wclock_mono_s for rates and ETAs); exit statuses
 * (EXIT_*), messages to stderr (wfront_err), usage errors and option
 * values, as the mount daemon and the server have them. */
#include "../common/clock.h"
#include <getopt.h>

#include "../common/frontend.h"

/* Where settings come from, lowest first (config show --origin). */
enum cli_layer { CLI_SYSTEM, CLI_USER, CLI_ENV, CLI_FLAGS, CLI_NLAYERS };

struct cli {
	wstore_config *cfg; /* system file < user file < env < flags */
	wstore_config *layer[CLI_NLAYERS]; /* each alone; NULL: none */
	char *system_path;		   /* the system file's path */
	char *user_path;   /* the user's file (--config, $WSTORE_CONFIG or
			      the default path), even if it does not exist */
	int user_explicit; /* user_path came from --config or $WSTORE_CONFIG */
	int json;
	int quiet;
	int tty;  /* progress lines allowed */
	int term; /* stdout is a terminal: escape control characters */
};

/* One subcommand: argv[0] is its name; getopt-style parsing inside. */
struct cli_cmd {
	const char *group; /* "model", "config", or NULL for top level */
	const char *name;
	int (*run)(struct cli *c, int argc, char **argv);
	const char *summary;
};

int cmd_model_import(struct cli *c, int argc, char **argv);
int cmd_model_import_hub(struct cli *c, int argc, char **argv);
int cmd_model_import_bundle(struct cli *c, int argc, char **argv);
int cmd_model_export(struct cli *c, int argc, char **argv);
int cmd_model_copy(struct cli *c, int argc, char **argv);
int cmd_model_list(struct cli *c, int argc, char **argv);
int cmd_model_inspect(struct cli *c, int argc, char **argv);
int cmd_model_verify(struct cli *c, int argc, char **argv);
int cmd_model_delete(struct cli *c, int argc, char **argv);
int cmd_model_materialize(struct cli *c, int argc, char **argv);
int cmd_model_pull(struct cli *c, int argc, char **argv);
int cmd_config_init(struct cli *c, int argc, char **argv);
int cmd_config_show(struct cli *c, int argc, char **argv);
int cmd_config_get(struct cli *c, int argc, char **argv);
int cmd_config_set(struct cli *c, int argc, char **argv);
int cmd_config_unset(struct cli *c, int argc, char **argv);
int cmd_version(struct cli *c, int argc, char **argv);
/* The version of this build of the command (version.c, made from
 * src/cli/version.c.in at every build). */
const char *cli_build_version(void);
/* The global flag that sets config key, e.g. "--store", or NULL. */
const char *cli_flag_for_key(const char *key);
/* The i-th global option ("--store", "--json", ...), NULL past the last. */
const char *cli_global_option(size_t i);
/* The name of opts (or a global option, "--" included) closest to word
 * ("--sorce": "--source"), or NULL when none is close; valid until the
 * next call. */
const char *cli_closest_option(const char *word, const struct option *opts);
/* wfront_bad_option, with "did you mean '--source'?" when an option of
 * opts or a global one is close to the unknown one; EXIT_USAGE. */
int cli_bad_option(int ch, char **argv, const char *cmd,
		   const struct option *opts);
/* --reflink's value into o->reflink: auto, never and, where always is
 * non-zero, always; 0, or EXIT_USAGE after a one-line error naming what
 * (e.g. "for copy"; "" for import's own). */
int cli_parse_reflink(wstore_import_options *o, const char *arg,
		      const char *what, int always);
int cmd_mount(struct cli *c, int argc, char **argv);
int cmd_umount(struct cli *c, int argc, char **argv);
int cmd_serve(struct cli *c, int argc, char **argv);
int cmd_gc(struct cli *c, int argc, char **argv);
int cmd_admin_unlock(struct cli *c, int argc, char **argv);
int cmd_admin_migrate(struct cli *c, int argc, char **argv);
int cmd_model_pin(struct cli *c, int argc, char **argv);
int cmd_model_unpin(struct cli *c, int argc, char **argv);
int cmd_model_resolve(struct cli *c, int argc, char **argv);
int cmd_df(struct cli *c, int argc, char **argv);

/* Print "wstore: <library's last error>" and map code to an exit status. */
int cli_fail(int code);
/*
 * Run a helper program for command cmd (the mount daemon, the HTTP
 * server): name beside this executable (the build tree), else installed
 * (the install's libexec path).  The resolved configuration goes to it as
 * WSTORE_<KEY> environment variables, never on its command line (a
 * password in argv would show in ps); argv is passed on with argv[0] set
 * to name.  Returns only on failure, after printing why (EXIT_ERR).
 */
int cli_exec_daemon(struct cli *c, const char *cmd, const char *name,
		    const char *installed, char **argv);
/* Open the configured store with WSTORE_OPEN_* flags (readers pass
 * WSTORE_OPEN_READONLY and never create a store; only import creates
 * one); prints the error, or a warning of the backend, itself. */
int cli_open_store(struct cli *c, wstore_store **out, unsigned flags);
/* Close it when the command is done: main() then ends the process with
 * _exit (wstore_free_exiting), after flushing stdout. */
void cli_close_store(wstore_store *s);
/* Flush stdout and end the process with status rc, with _exit when a
 * store was closed by cli_close_store. */
void cli_exit(int rc) __attribute__((noreturn));

/* True if argv holds -h or --help (then print help and exit 0). */
int cli_wants_help(int argc, char **argv);
/* Print usage text (to stdout for --help). */
void cli_print_help(const char *text);

/* Progress line on stderr when c->tty; returns non-zero after SIGINT. */
struct cli_progress {
	struct cli *c;
	const char *verb;
	double start;
	double last;
	/* first callback: rate and ETA are measured from here (not from
	 * start, which includes scanning and locking), and shown only once
	 * a second of transfer has been seen */
	double t0;
	uint64_t d0;
};
int cli_progress_fn(uint64_t done, uint64_t total, const char *path, void *ctx);
void cli_progress_end(struct cli_progress *p);
/* Install the SIGINT/SIGTERM handler that makes cli_progress_fn cancel. */
void cli_catch_signals(void);
int cli_interrupted(void);

/*
 * Arguments naming a checkpoint: a checkpoint id, or a model name
 * ORG/NAME[@REVISION] (a checkpoint id cannot contain '/', a model name
 * does: wstore_parse_name).  cli_check_name checks the form before any
 * store is opened (0, or EXIT_ERR after printing why); cli_resolve turns a
 * model name into the checkpoint id serve and the mount would pick
 * (wstore_resolve: the newest READY checkpoint of the model at that
 * revision, default main) and leaves an id as it is.  *out is valid until
 * the tool exits.  0, or EXIT_ERR after printing why.
 */
int cli_check_name(const char *arg);
int cli_resolve(struct cli *c, const char **out, wstore_store *s,
		const char *arg);
/*
 * How every command that reads one checkpoint starts: cli_check_name of
 * *id, the store opened read-only, *id resolved in place.  0 (close *s
 * with cli_close_store), or EXIT_ERR after printing why, with nothing
 * left open.
 */
int cli_open_named(struct cli *c, wstore_store **s, const char **id);
/* Parse "CMD ID" with only --help: 0 and *out set, -1 after printing help
 * (exit 0), or EXIT_USAGE. */
int cli_one_id(const char **out, int argc, char **argv, const char *cmd,
	       const char *help);

/*
 * Text from the store (ids, model ids, revisions, paths, messages) made
 * safe to print: control characters (C0, DEL and the C1 range
 * U+0080-U+009F, e.g. ESC sequences that would retitle or rewrite the
 * screen, newlines that would fake output lines) become \xNN / \u00NN,
 * on a terminal and piped alike (scripts wanting the bytes read --json).
 * The result is valid until the 8th next call.  NULL stays NULL.
 */
const char *cli_text(const struct cli *c, const char *s);

/*
 * Tables: columns sized to their content, in display columns (a CJK
 * character takes two, a combining mark none: wcwidth of the UTF-8 text).
 * cli_width is the display width of s; cli_cell prints s padded to width
 * (right-aligned when right), then two spaces, or a newline when last.
 */
int cli_width(const char *s);
void cli_cell(const char *s, int width, int right, int last);
/* A table printed at the end, each column as wide as its widest cell;
 * align holds 'l' or 'r' per column (at most 16).  Cells are copied; NULL
 * shows as "-".  Print frees it. */
struct cli_table {
	size_t ncols, nrows;
	const char *align;
	char **cells;
	int oom;
};
void cli_table_init(struct cli_table *t, size_t ncols, const char *align,
		    const char *const *headers);
void cli_table_add(struct cli_table *t, const char *const *cells);
void cli_table_print(struct cli_table *t);
/*
 * The one timestamp format of text output: UTC ISO 8601 to the second,
 * "2026-12-03T15:16:00Z"; "-" for 0 (never).  JSON output gives times as
 * integer Unix seconds in fields named *_at.
 */
void cli_time(char *buf, size_t cap, int64_t unix_seconds);

/* Print a JSON value (jansson json_t *) to stdout and free it. */
void cli_print_json(void *json);

/*
 * What an import prints once done, from checkpoint id read back from s:
 * "imported 'ID' (MODEL @ REV[, hub commit COMMIT])[ from FROM]: N files,
 * SIZE in T s (RATE/s)" (the commit when it is not the revision), or with
 * --json one object (checkpoint_id, model_id, revision, status, files,
 * total_size, seconds, bytes_per_second) plus the members of extra (a
 * json_t object, taken; may be NULL).  commit and from may be NULL.
 * EXIT_OK, or the exit status of a manifest not read.
 */
int cli_import_report(struct cli *c, wstore_store *s, const char *id,
		      double secs, const char *commit, const char *from,
		      void *extra);

#endif
