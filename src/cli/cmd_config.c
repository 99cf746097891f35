/*
 * cmd_config.c - wstore config init | show | get | set | unset, and wstore
 * version.
 *
 * The settings come in layers (main.c keeps each apart): the system file,
 * the user's file, the WSTORE_* environment, the global flags.  show and
 * get read the merged result and say which layer each value came from;
 * set and unset edit one file (the user's, or the system's with --system)
 * and nothing else, so that a setting of another layer is never copied
 * into it.  Secrets (redis_password, serve_token) are never printed, nor
 * is a password in a URL (store, hub_endpoint) by 'config show'.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"

static const char init_help[] =
	"usage: wstore [global options] config init [--force]\n"
	"\n"
	"Write the settings of the user's config file, the environment and\n"
	"the flags (--store, --master-server-addr, --metadata-server,\n"
	"--protocol, --rdma-devices, --local-hostname, WSTORE_*) to the user's\n"
	"config file: --config FILE, else $WSTORE_CONFIG, else\n"
	"$XDG_CONFIG_HOME/wstore/config.json (~/.config/wstore/config.json).\n"
	"An existing file is only replaced with --force.\n";

static const char show_help[] =
	"usage: wstore [global options] config show [--origin]\n"
	"\n"
	"Print the effective settings, one KEY=VALUE a line: the system file\n"
	"(/etc/wstore/config.json), then the user's file, the environment\n"
	"(WSTORE_<KEY>) and the flags, each overriding the one before.  With\n"
	"--origin each line starts with where the value came from (file:PATH,\n"
	"env:VAR, flag:--FLAG or default) and a tab.  Secrets show as\n"
	"<hidden>.\n";

static const char get_help[] =
	"usage: wstore [global options] config get KEY\n"
	"\n"
	"Print the effective value of KEY (for 'store', the default store when\n"
	"none is set).  Exit status 1 when KEY is not set.\n";

static const char set_help[] =
	"usage: wstore [global options] config set [--system] KEY VALUE\n"
	"\n"
	"Set KEY in the user's config file (--config FILE, $WSTORE_CONFIG, else\n"
	"$XDG_CONFIG_HOME/wstore/config.json), or with --system in\n"
	"/etc/wstore/config.json.  The value is checked first; the file is\n"
	"replaced atomically, keeping its other keys.\n";

static const char unset_help[] =
	"usage: wstore [global options] config unset [--system] KEY\n"
	"\n"
	"Remove KEY from the user's config file (or, with --system, from\n"
	"/etc/wstore/config.json).  A key that is not set there is no error.\n";

static const char version_help[] =
	"usage: wstore version\n"
	"\n"
	"Print the version of wstore and of the library it runs with.\n";

static int is_secret(const char *key)
{
	return !strcmp(key, "redis_password") || !strcmp(key, "serve_token");
}

/* Parse the options of a config subcommand: --help, and the flag named
 * by long_flag (may be NULL) into *flag.  0, -1 after help, or EXIT_USAGE. */
static int config_opts(int argc, char **argv, const char *cmd, const char *help,
		       const char *long_flag, int *flag)
{
	struct option opts[] = { { "help", no_argument, NULL, 'h' },
				 { long_flag, no_argument, NULL, 'f' },
				 { 0 } };
	int ch;

	if (!long_flag)
		opts[1] = opts[2];
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'h') {
			cli_print_help(help);
			return -1;
		}
		if (ch != 'f')
			return cli_bad_option(ch, argv, cmd, opts);
		*flag = 1;
	}
	return 0;
}

int cmd_config_init(struct cli *c, int argc, char **argv)
{
	wstore_config *out = NULL;
	int force = 0, rc;

	if ((rc = config_opts(argc, argv, "config init", init_help, "force",
			      &force)))
		return rc < 0 ? EXIT_OK : rc;
	if (optind < argc)
		return wfront_usage_error(
			"unexpected argument '%s' for 'config init'",
			argv[optind]);
	if (!c->user_path)
		return wfront_usage_error(
			"no config path: set HOME or pass --config");
	if (!force && access(c->user_path, F_OK) == 0)
		return wfront_usage_error(
			"config file '%s' exists; use --force to replace it",
			c->user_path);
	/* not the system file's settings: they stay where they are */
	if (wstore_config_new(&out) < 0)
		return cli_fail(-ENOMEM);
	for (int i = CLI_USER; i < CLI_NLAYERS; i++)
		if (c->layer[i] && wstore_config_merge(out, c->layer[i]) < 0) {
			wstore_config_free(out);
			return cli_fail(-ENOMEM);
		}
	rc = wstore_config_save(out, c->user_path);
	wstore_config_free(out);
	if (rc < 0)
		return cli_fail(rc);
	if (c->json)
		cli_print_json(json_pack("{s:s}", "config", c->user_path));
	else if (!c->quiet)
		printf("wrote '%s'\n", c->user_path);
	return EXIT_OK;
}

/* "WSTORE_<KEY>" for key. */
static void env_name(char *out, size_t cap, const char *key)
{
	size_t n = (size_t)snprintf(out, cap, "WSTORE_");

	for (; *key && n + 1 < cap; key++)
		out[n++] = (char)toupper((unsigned char)*key);
	out[n] = '\0';
}

/*
 * The effective value of key and where it came from ("file:PATH",
 * "env:VAR", "flag:--FLAG", "default"); *owned is set when *value was
 * allocated.  0, or -1 when key is set nowhere.
 */
static int resolve(const struct cli *c, const char *key, const char **value,
		   char **owned, char *origin, size_t cap)
{
	char var[64];

	*owned = NULL;
	for (int i = CLI_NLAYERS - 1; i >= 0; i--) {
		if (!c->layer[i] ||
		    !(*value = wstore_config_get(c->layer[i], key)))
			continue;
		if (i == CLI_SYSTEM || i == CLI_USER) {
			snprintf(origin, cap, "file:%s",
				 i == CLI_SYSTEM ? c->system_path
						 : c->user_path);
		} else if (i == CLI_ENV) {
			env_name(var, sizeof(var), key);
			snprintf(origin, cap, "env:%s", var);
		} else {
			const char *f = cli_flag_for_key(key);

			snprintf(origin, cap, "flag:%s", f ? f : "?");
		}
		return 0;
	}
	if (strcmp(key, "store") == 0 &&
	    (*owned = wstore_config_default_store())) {
		*value = *owned;
		snprintf(origin, cap, "default");
		return 0;
	}
	return -1;
}

int cmd_config_show(struct cli *c, int argc, char **argv)
{
	const char *const *keys = wstore_config_keys();
	int with_origin = 0, rc;
	json_t *out = json_object();

	if ((rc = config_opts(argc, argv, "config show", show_help, "origin",
			      &with_origin)))
		return json_decref(out), rc < 0 ? EXIT_OK : rc;
	if (optind < argc)
		return json_decref(out),
		       wfront_usage_error(
			       "unexpected argument '%s' for 'config show'",
			       argv[optind]);
	for (size_t k = 0; keys[k]; k++) {
		char origin[4200], *owned, *shown = NULL;
		const char *v;

		if (resolve(c, keys[k], &v, &owned, origin, sizeof(origin)))
			continue;
		/* a URL's user:password (store, hub_endpoint) as "***" */
		if (is_secret(keys[k]))
			v = "<hidden>";
		else if (wstore_url_redact(&shown, v) == 0)
			v = shown;
		if (c->json && with_origin)
			json_object_set_new(out, keys[k],
					    json_pack("{s:s, s:s}", "value", v,
						      "origin", origin));
		else if (c->json)
			json_object_set_new(out, keys[k], json_string(v));
		else if (with_origin)
			printf("%s\t%s=%s\n", cli_text(c, origin), keys[k],
			       cli_text(c, v));
		else
			printf("%s=%s\n", keys[k], cli_text(c, v));
		free(shown);
		free(owned);
	}
	if (c->json)
		cli_print_json(out);
	else
		json_decref(out);
	return EXIT_OK;
}

/* A known key, else a usage error naming it and listing the keys. */
static int known_key(const char *key, const char *cmd)
{
	const char *const *keys = wstore_config_keys();
	char list[4096];
	size_t n = 0;

	for (size_t k = 0; keys[k]; k++)
		if (!strcmp(keys[k], key))
			return 0;
	list[0] = '\0';
	for (size_t k = 0; keys[k] && n < sizeof(list); k++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s %s",
				      k ? "," : "", keys[k]);
	return wfront_usage_error("%s: unknown config key '%s'; the keys:%s",
				  cmd, key, list);
}

int cmd_config_get(struct cli *c, int argc, char **argv)
{
	char origin[4200], *owned = NULL;
	const char *v;
	int rc;

	if ((rc = config_opts(argc, argv, "config get", get_help, NULL, NULL)))
		return rc < 0 ? EXIT_OK : rc;
	if (optind + 1 != argc)
		return wfront_usage_error("'config get' needs exactly one key");
	if ((rc = known_key(argv[optind], "config get")))
		return rc;
	if (resolve(c, argv[optind], &v, &owned, origin, sizeof(origin))) {
		wfront_err("config key '%s' is not set", argv[optind]);
		return EXIT_ERR;
	}
	if (is_secret(argv[optind]))
		v = "<hidden>";
	if (c->json)
		cli_print_json(
			json_pack("{s:s, s:s}", "value", v, "origin", origin));
	else
		printf("%s\n", cli_text(c, v));
	free(owned);
	return EXIT_OK;
}

/* Keys whose value names a file (a relative one is made absolute by set:
 * a config file is read from anywhere). */
static int is_file_key(const char *key)
{
	size_t n = strlen(key);

	return (n > 5 && !strcmp(key + n - 5, "_file")) ||
	       !strcmp(key, "serve_tls_cert") ||
	       !strcmp(key, "serve_tls_key") ||
	       !strcmp(key, "mooncake_library");
}

/* A file key set into a config file must name a file that is there (a
 * flag's may not: its user reports it): EXIT_ERR with the message, or 0. */
static int file_missing(const char *path, const char *key, const char *value)
{
	struct stat st;

	if (stat(value, &st) < 0)
		wfront_err("config '%s': key '%s' names a file that %s, got "
			   "'%s'",
			   path, key,
			   errno == ENOENT ? "does not exist"
					   : "cannot be reached",
			   value);
	else if (S_ISDIR(st.st_mode))
		wfront_err("config '%s': key '%s' names a directory, not a "
			   "file, got '%s'",
			   path, key, value);
	else
		return 0;
	return EXIT_ERR;
}

/* Warn when a file that others can read now holds a secret. */
static void warn_exposed(const char *path, const char *key)
{
	struct stat st;

	if (is_secret(key) && stat(path, &st) == 0 && (st.st_mode & 0044))
		wfront_err("warning: '%s' is readable by other users "
			   "(mode %04o) and holds '%s'",
			   path, (unsigned)(st.st_mode & 07777), key);
}

/* Set (value) or clear (NULL) key in the file at path alone. */
static int edit_file(struct cli *c, const char *path, int system,
		     const char *key, const char *value)
{
	wstore_config *f = NULL;
	int existed = access(path, F_OK) == 0, rc;

	rc = existed ? wstore_config_load(&f, path) : wstore_config_new(&f);
	if (rc < 0)
		return cli_fail(rc);
	if (!value && !wstore_config_get(f, key)) {
		wstore_config_free(f); /* nothing to remove */
		return EXIT_OK;
	}
	if (value && is_file_key(key) &&
	    (rc = file_missing(path, key, value))) {
		wstore_config_free(f);
		return rc;
	}
	if ((rc = wstore_config_set(f, key, value)) < 0) {
		/* "config key 'K' ..." from the library: name the file */
		const char *e = wstore_last_error();

		wstore_config_free(f);
		if (strncmp(e, "config ", 7) == 0)
			e += 7;
		wfront_err("config '%s': %s", path, e);
		return EXIT_ERR;
	}
	rc = wstore_config_save(f, path);
	wstore_config_free(f);
	if (rc < 0)
		return cli_fail(rc);
	/* a new system file is for every user to read (0600 otherwise) */
	if (system && !existed && chmod(path, 0644) < 0)
		wfront_err("warning: cannot chmod '%s': %s", path,
			   strerror(errno));
	if (value)
		warn_exposed(path, key);
	if (c->json)
		cli_print_json(
			json_pack("{s:s, s:s}", "config", path, "key", key));
	return EXIT_OK;
}

/* set (nargs 2) and unset (nargs 1) */
static int config_edit(struct cli *c, int argc, char **argv, const char *cmd,
		       const char *help, int nargs)
{
	int system = 0, rc;
	const char *path;

	if ((rc = config_opts(argc, argv, cmd, help, "system", &system)))
		return rc < 0 ? EXIT_OK : rc;
	if (argc - optind != nargs)
		return wfront_usage_error("'%s' needs %s", cmd,
					  nargs == 2 ? "a key and a value"
						     : "exactly one key");
	if ((rc = known_key(argv[optind], cmd)))
		return rc;
	path = system ? c->system_path : c->user_path;
	if (!path)
		return wfront_usage_error(
			"no config path: set HOME or pass --config");
	if (nargs == 2 && is_file_key(argv[optind]) &&
	    argv[optind + 1][0] != '/' && argv[optind + 1][0]) {
		/* a file named relative to here: the file keeps where */
		char *abs = realpath(argv[optind + 1], NULL);

		if (abs) {
			rc = edit_file(c, path, system, argv[optind], abs);
			free(abs);
			return rc;
		}
	}
	return edit_file(c, path, system, argv[optind],
			 nargs == 2 ? argv[optind + 1] : NULL);
}

int cmd_config_set(struct cli *c, int argc, char **argv)
{
	return config_edit(c, argc, argv, "config set", set_help, 2);
}

int cmd_config_unset(struct cli *c, int argc, char **argv)
{
	return config_edit(c, argc, argv, "config unset", unset_help, 1);
}

int cmd_version(struct cli *c, int argc, char **argv)
{
	const char *lib = wstore_version();
	int rc;

	if (argc > 1 &&
	    (rc = config_opts(argc, argv, "version", version_help, NULL, NULL)))
		return rc < 0 ? EXIT_OK : rc;
	if (argc > 1 && optind < argc)
		return wfront_usage_error(
			"unexpected argument '%s' for 'version'", argv[optind]);
	if (c->json) {
		cli_print_json(json_pack("{s:s, s:s}", "version",
					 cli_build_version(), "library", lib));
		return EXIT_OK;
	}
	printf("wstore %s\n", cli_build_version());
	/* a CLI run against another build of the library says so */
	if (strcmp(lib, cli_build_version()) != 0)
		printf("libwstore %s\n", lib);
	return EXIT_OK;
}
