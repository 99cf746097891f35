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

/* Exit statuses. */
#define EXIT_OK 0
#define EXIT_ERR 1
#define EXIT_USAGE 2
#define EXIT_VERIFY 3

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
/* The global flag that sets config key, e.g. "--store", or NULL. */
const char *cli_flag_for_key(const char *key);
int cmd_mount(struct cli *c, int argc, char **argv);
int cmd_umount(struct cli *c, int argc, char **argv);
int cmd_serve(struct cli *c, int argc, char **argv);
int cmd_gc(struct cli *c, int argc, char **argv);
int cmd_admin_unlock(struct cli *c, int argc, char **argv);
int cmd_model_pin(struct cli *c, int argc, char **argv);
int cmd_model_unpin(struct cli *c, int argc, char **argv);
int cmd_df(struct cli *c, int argc, char **argv);

/* Print "wstore: <msg>" to stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
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
/* Seconds since an arbitrary start (monotonic). */
double cli_now(void);
/* Install the SIGINT/SIGTERM handler that makes cli_progress_fn cancel. */
void cli_catch_signals(void);
int cli_interrupted(void);

/* Parse a positive count (1..1024) for option opt; usage error if bad. */
int cli_parse_count(uint32_t *out, const char *opt, const char *v);
/* Report a getopt failure (ch is ':' or '?'); returns EXIT_USAGE. */
int cli_bad_option(int ch, char **argv, const char *cmd);
/* Parse "CMD ID" with only --help: 0 and *out set, -1 after printing help
 * (exit 0), or EXIT_USAGE. */
int cli_one_id(const char **out, int argc, char **argv, const char *cmd,
	       const char *help);

/*
 * Text from the store (ids, model ids, revisions, paths, messages) made
 * safe to print: on a terminal (c->term) control characters (C0, DEL and
 * the C1 range U+0080-U+009F, e.g. ESC sequences that would retitle or
 * rewrite the screen) become \xNN / \u00NN; elsewhere s itself.  The
 * result is valid until the 8th next call.  NULL stays NULL.
 */
const char *cli_text(const struct cli *c, const char *s);

/* Print a JSON value (jansson json_t *) to stdout and free it. */
void cli_print_json(void *json);

#endif
