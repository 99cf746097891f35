/*
 * main.c - the wstore command-line tool: global options (accepted anywhere
 * on the line), configuration (flags beat environment beat the user's file
 * beat the system file beat defaults; each layer is kept apart for
 * `config show --origin`) and the command table.  Each subcommand lives in
 * cmd_*.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const struct cli_cmd commands[] = {
	{ "model", "import", cmd_model_import,
	  "import a checkpoint directory" },
	{ "model", "list", cmd_model_list, "list checkpoints" },
	{ "model", "ls", cmd_model_list, "same as 'model list'" },
	{ "model", "resolve", cmd_model_resolve,
	  "which checkpoint a model name resolves to, and why" },
	{ "model", "inspect", cmd_model_inspect,
	  "show a checkpoint's manifest" },
	{ "model", "verify", cmd_model_verify, "re-read and check every file" },
	{ "model", "delete", cmd_model_delete, "delete checkpoints" },
	{ "model", "rm", cmd_model_delete, "same as 'model delete'" },
	{ "model", "materialize-file", cmd_model_materialize,
	  "write one file of a checkpoint" },
	{ "model", "pull", cmd_model_pull,
	  "write a whole checkpoint to a directory" },
	{ "model", "export", cmd_model_export,
	  "write a checkpoint as one tar stream (a bundle)" },
	{ "model", "copy", cmd_model_copy,
	  "copy a checkpoint to another store" },
	{ "model", "pin", cmd_model_pin, "never evict checkpoints" },
	{ "model", "unpin", cmd_model_unpin, "allow evicting it again" },
	{ NULL, "df", cmd_df, "space used, by checkpoint" },
	{ "config", "init", cmd_config_init, "write the configuration file" },
	{ "config", "show", cmd_config_show, "the settings and their origin" },
	{ "config", "get", cmd_config_get, "print one setting" },
	{ "config", "set", cmd_config_set, "set a key in a config file" },
	{ "config", "unset", cmd_config_unset,
	  "remove a key from a config file" },
	{ NULL, "version", cmd_version, "print the version" },
	{ NULL, "mount", cmd_mount, "mount the store read-only (FUSE)" },
	{ NULL, "umount", cmd_umount, "unmount a wstore mount" },
	{ NULL, "serve", cmd_serve,
	  "serve the store over HTTP (Hugging Face protocol)" },
	{ "admin", "gc", cmd_gc, "remove orphaned chunks and temp files" },
	{ NULL, "gc", cmd_gc, "same as 'admin gc'" },
	{ "admin", "unlock", cmd_admin_unlock, "remove a stale lock" },
	{ "admin", "migrate", cmd_admin_migrate,
	  "convert the file store to one data file per file" },
};

/* Global options that take a value, and the config key each sets. */
static const struct {
	const char *flag;
	const char *key;
} value_flags[] = {
	{ "--store", "store" },
	{ "--master-server-addr", "master_server_addr" },
	{ "--metadata-server", "metadata_server" },
	{ "--protocol", "protocol" },
	{ "--rdma-devices", "rdma_devices" },
	{ "--local-hostname", "local_hostname" },
	{ "--redis-tls-ca-file", "redis_tls_ca_file" },
	{ "--redis-tls-cert-file", "redis_tls_cert_file" },
	{ "--redis-tls-key-file", "redis_tls_key_file" },
	{ "--config", NULL },
};

static const char main_help[] =
	"usage: wstore [global options] <command> [options]\n"
	"\n"
	"commands:\n"
	"  model import --source DIR [--model-id MODEL] [--checkpoint-id ID]\n"
	"               [--revision REV] [--include GLOB]... [--exclude GLOB]...\n"
	"               [--force] [--chunk-size SIZE] [--replica-num N]\n"
	"               [--jobs N] [--reflink auto|always|never]\n"
	"  model list [--model MODEL] [--all]           (also: model ls)\n"
	"  model resolve ORG/NAME[@REV]\n"
	"  model inspect ID\n"
	"  model verify ID [--jobs N]\n"
	"  model delete ID... [--missing-ok] [--wait [SECONDS]] [--force]\n"
	"                                               (also: model rm)\n"
	"  model materialize-file ID --path REL --output FILE\n"
	"  model pull ID --dest DIR [--include GLOB]... [--exclude GLOB]...\n"
	"             [--jobs N] [--no-verify] [--force]\n"
	"  model pin ID... | model unpin ID...\n"
	"  df\n"
	"  config init [--force]\n"
	"  config show [--origin] | config get KEY\n"
	"  config set [--system] KEY VALUE | config unset [--system] KEY\n"
	"  mount MOUNTPOINT [--checkpoint ID] [--cache-size SIZE] [--foreground]\n"
	"                   [--log-file PATH]\n"
	"  umount MOUNTPOINT\n"
	"  serve [--listen ADDR:PORT] [--token TOKEN] [--max-connections N]\n"
	"  admin gc [--dry-run] [--grace SECONDS] [--evict-to SIZE]\n"
	"                                           (also: wstore gc)\n"
	"  admin unlock ID|catalog [--force]\n"
	"  admin migrate [--dry-run] [--verify]\n"
	"  version\n"
	"\n"
	"global options (anywhere on the line):\n"
	"  --store URL            file:///dir or a path (default: $WSTORE_HOME,\n"
	"                         else $XDG_DATA_HOME/wstore, else\n"
	"                         ~/.local/share/wstore), redis://...,\n"
	"                         redis+unix://..., redis-cluster://..., mooncake;\n"
	"                         rediss://..., rediss-cluster://... over TLS\n"
	"  --config FILE          the user's config file (default: $WSTORE_CONFIG,\n"
	"                         else $XDG_CONFIG_HOME/wstore/config.json, else\n"
	"                         ~/.config/wstore/config.json), read after\n"
	"                         /etc/wstore/config.json\n"
	"  --json                 machine-readable output\n"
	"  --quiet                no progress lines\n"
	"  -v, --verbose          let the store's client library log to stderr\n"
	"                         (Mooncake's glog output, off by default)\n"
	"  --redis-tls-ca-file FILE\n"
	"                         CA to verify a rediss:// server (default:\n"
	"                         the system CA store)\n"
	"  --redis-tls-cert-file FILE, --redis-tls-key-file FILE\n"
	"                         client certificate and key (mutual TLS)\n"
	"  --master-server-addr, --metadata-server, --protocol, --rdma-devices,\n"
	"  --local-hostname       Mooncake connection settings\n"
	"  -h, --help             help (also after any command; or wstore help\n"
	"                         GROUP [COMMAND])\n"
	"  --version              print the version\n"
	"\n"
	"Wherever a command takes a checkpoint ID it also takes a model name\n"
	"ORG/NAME[@REV]: a checkpoint id never contains '/', a model name\n"
	"always does.  A name stands for the newest READY checkpoint of that\n"
	"model at REV (default main), as 'wstore model resolve' shows.\n"
	"\n"
	"exit status: 0 ok, 1 error, 2 usage, 3 verification failed\n";

/* Pull global options out of argv (compacting it); flags go into flags. */
static int take_globals(struct cli *c, wstore_config *flags,
			const char **config_path, int *argc, char **argv)
{
	int out = 1;

	for (int i = 1; i < *argc; i++) {
		const char *a = argv[i], *val = NULL;
		size_t k, nf = sizeof(value_flags) / sizeof(*value_flags);

		if (!strcmp(a, "--")) {
			while (i < *argc)
				argv[out++] = argv[i++];
			break;
		}
		if (!strcmp(a, "--json")) {
			c->json = 1;
			continue;
		}
		if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
			c->quiet = 1;
			continue;
		}
		if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
			/* the only chatty component so far is Mooncake */
			if (wstore_config_set(flags, "mooncake_log", "stderr") <
			    0)
				return cli_fail(WSTORE_EINVAL);
			continue;
		}
		for (k = 0; k < nf; k++) {
			size_t n = strlen(value_flags[k].flag);

			if (!strncmp(a, value_flags[k].flag, n) &&
			    a[n] == '=') {
				val = a + n + 1;
				break;
			}
			if (!strcmp(a, value_flags[k].flag)) {
				if (i + 1 >= *argc)
					return wfront_usage_error(
						"option '%s' needs a value", a);
				val = argv[++i];
				break;
			}
		}
		if (k == nf) {
			argv[out++] = argv[i];
			continue;
		}
		if (!value_flags[k].key)
			*config_path = val;
		else if (wstore_config_set(flags, value_flags[k].key, val) < 0)
			return cli_fail(WSTORE_EINVAL);
	}
	*argc = out;
	argv[out] = NULL;
	return 0;
}

const char *cli_flag_for_key(const char *key)
{
	if (!strcmp(key, "mooncake_log"))
		return "--verbose";
	for (size_t k = 0; k < sizeof(value_flags) / sizeof(*value_flags); k++)
		if (value_flags[k].key && !strcmp(value_flags[k].key, key))
			return value_flags[k].flag;
	return NULL;
}

const char *cli_global_option(size_t i)
{
	static const char *const flags[] = { "--json", "--quiet", "--verbose",
					     "--help", "--version" };
	size_t nv = sizeof(value_flags) / sizeof(*value_flags);

	if (i < nv)
		return value_flags[i].flag;
	i -= nv;
	return i < sizeof(flags) / sizeof(*flags) ? flags[i] : NULL;
}

/* Load the file at path as *out when it exists (or must: required). */
static int load_layer(wstore_config **out, const char *path, int required)
{
	int rc;

	*out = NULL;
	if (!path || (!required && access(path, F_OK) < 0 && errno == ENOENT))
		return 0;
	rc = wstore_config_load(out, path);
	return rc < 0 ? cli_fail(rc) : 0;
}

/*
 * The layers, lowest first: system file < user file < env < flags.
 * editing: a `config init/set/unset`, which may name a user file that does
 * not exist yet.
 */
static int load_config(struct cli *c, wstore_config *flags,
		       const char *explicit_path, int editing)
{
	const char *env_path = getenv("WSTORE_CONFIG");
	int rc;

	if (explicit_path || (env_path && *env_path)) {
		c->user_path = strdup(explicit_path ? explicit_path : env_path);
		c->user_explicit = 1;
	} else {
		c->user_path = wstore_config_default_path();
	}
	c->system_path = wstore_config_system_path();
	if (!c->system_path ||
	    (!c->user_path && (explicit_path || (env_path && *env_path))))
		return cli_fail(-ENOMEM);
	if ((rc = load_layer(&c->layer[CLI_SYSTEM], c->system_path, 0)) ||
	    (rc = load_layer(&c->layer[CLI_USER], c->user_path,
			     c->user_explicit && !editing)))
		return rc;
	if (wstore_config_new(&c->layer[CLI_ENV]) < 0 ||
	    wstore_config_new(&c->cfg) < 0)
		return cli_fail(-ENOMEM);
	if (wstore_config_load_env(c->layer[CLI_ENV]) < 0)
		return cli_fail(WSTORE_EINVAL);
	c->layer[CLI_FLAGS] = flags;
	for (int i = 0; i < CLI_NLAYERS; i++)
		if (c->layer[i] && wstore_config_merge(c->cfg, c->layer[i]) < 0)
			return cli_fail(-ENOMEM);
	return 0;
}

static void free_config(struct cli *c)
{
	wstore_config_free(c->cfg);
	for (int i = 0; i < CLI_NLAYERS; i++)
		wstore_config_free(c->layer[i]);
	free(c->system_path);
	free(c->user_path);
}

static int is_group(const char *name)
{
	return !strcmp(name, "model") || !strcmp(name, "config") ||
	       !strcmp(name, "admin");
}

/* The commands of one group, from the table. */
static void group_help(const char *group)
{
	size_t n = sizeof(commands) / sizeof(*commands);

	printf("usage: wstore %s <command> [options]\n\ncommands:\n", group);
	for (size_t i = 0; i < n; i++)
		if (commands[i].group && !strcmp(commands[i].group, group))
			printf("  %-18s %s\n", commands[i].name,
			       commands[i].summary);
	printf("\n'wstore %s <command> --help' for its options; 'wstore "
	       "--help' for global options\n",
	       group);
}

/* The closest command of group (NULL: top level and the group names) to
 * word, or NULL when none is close. */
static const char *closest(const char *group, const char *word)
{
	static const char *const groups[] = { "model", "config", "admin" };
	size_t n = sizeof(commands) / sizeof(*commands), best = 3;
	const char *out = NULL;

	for (size_t i = 0; i < n + 3; i++) {
		const char *name;
		size_t k;

		if (i >= n)
			name = group ? NULL : groups[i - n];
		else if (!group == !commands[i].group &&
			 (!group || !strcmp(group, commands[i].group)))
			name = commands[i].name;
		else
			name = NULL;
		if (!name || (k = wfront_distance(word, name)) >= best ||
		    k * 2 > strlen(name))
			continue;
		best = k;
		out = name;
	}
	return out;
}

static int unknown(const char *group, const char *word)
{
	const char *near;

	/* a mistyped global option is left where a command should be */
	if (!group && word[0] == '-') {
		near = cli_closest_option(word, NULL);
		if (near)
			return wfront_usage_error(
				"unknown option '%s'; did you mean '%s'?", word,
				near);
		return wfront_usage_error(
			"unknown option '%s'; see 'wstore --help'", word);
	}
	near = closest(group, word);

	if (near)
		return wfront_usage_error(
			"unknown command '%s%s%s'; did you mean '%s%s%s'?",
			group ? group : "", group ? " " : "", word,
			group ? group : "", group ? " " : "", near);
	return wfront_usage_error(
		"unknown command '%s%s%s'; see 'wstore %s%s--help'",
		group ? group : "", group ? " " : "", word, group ? group : "",
		group ? " " : "");
}

static int dispatch(struct cli *c, int argc, char **argv);

/* "help GROUP [COMMAND]" and "help COMMAND", as git's: the help of what
 * follows, as its --help shows it. */
static int help_of(struct cli *c, int argc, char **argv)
{
	char *args[5] = { argv[0] };
	int n = 1;

	for (int i = 2; i < argc && n < 3; i++)
		args[n++] = argv[i];
	if (argc > 4)
		return wfront_usage_error("'help' takes a command, e.g. "
					  "'wstore help model import'");
	args[n++] = "--help";
	args[n] = NULL;
	return dispatch(c, n, args);
}

static int dispatch(struct cli *c, int argc, char **argv)
{
	size_t n = sizeof(commands) / sizeof(*commands);

	if (argc > 2 && !strcmp(argv[1], "help"))
		return help_of(c, argc, argv);
	if (argc < 2 || !strcmp(argv[1], "help")) {
		cli_print_help(main_help);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	for (size_t i = 0; i < n; i++) {
		/* a NULL group is a top-level command named by argv[1] */
		if (!commands[i].group && !strcmp(argv[1], commands[i].name))
			return commands[i].run(c, argc - 1, argv + 1);
		if (!commands[i].group || strcmp(argv[1], commands[i].group))
			continue;
		if (argc < 3)
			break;
		if (!strcmp(argv[2], commands[i].name))
			return commands[i].run(c, argc - 2, argv + 2);
	}
	if (!is_group(argv[1]))
		return unknown(NULL, argv[1]);
	if (argc > 2 && (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help") ||
			 !strcmp(argv[2], "help"))) {
		group_help(argv[1]);
		return EXIT_OK;
	}
	if (argc < 3) {
		group_help(argv[1]);
		return EXIT_USAGE;
	}
	return unknown(argv[1], argv[2]);
}

static int is_config_edit(int argc, char **argv)
{
	return argc > 2 && !strcmp(argv[1], "config") &&
	       (!strcmp(argv[2], "init") || !strcmp(argv[2], "set") ||
		!strcmp(argv[2], "unset"));
}

int main(int argc, char **argv)
{
	struct cli c = { 0 };
	wstore_config *flags = NULL;
	const char *config_path = NULL;
	int rc;

	if (argc == 2 && !strcmp(argv[1], "--version"))
		return cmd_version(&c, 1, argv + 1);
	if (argc >= 2 &&
	    (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		cli_print_help(main_help);
		return EXIT_OK;
	}
	if (wstore_config_new(&flags) < 0)
		return cli_fail(-ENOMEM);
	rc = take_globals(&c, flags, &config_path, &argc, argv);
	if (rc) {
		wstore_config_free(flags);
		return rc;
	}
	/* the flags become c's layer from here on (freed by free_config) */
	rc = load_config(&c, flags, config_path, is_config_edit(argc, argv));
	if (rc) {
		if (!c.layer[CLI_FLAGS])
			wstore_config_free(flags);
		free_config(&c);
		return rc;
	}
	c.term = isatty(STDOUT_FILENO);
	c.tty = !c.quiet && !c.json && isatty(STDOUT_FILENO) &&
		isatty(STDERR_FILENO);
	cli_catch_signals();
	rc = dispatch(&c, argc, argv);
	free_config(&c);
	cli_exit(rc);
}
