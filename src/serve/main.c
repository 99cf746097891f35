/*
 * main.c - wstore-serve, the HTTP server behind `wstore serve` (which
 * execs it with the same arguments and the resolved configuration in
 * WSTORE_<KEY> environment variables, as `wstore mount` does its daemon):
 * the command line.  The server itself is server.c.  Like the CLI it uses
 * only the public API.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wstore/wstore.h>

#include "../common/frontend.h"
#include "serve.h"

static const char help[] =
	"usage: wstore serve [--listen ADDR:PORT] [--token TOKEN]\n"
	"                    [--max-connections N]\n"
	"                    [--max-connections-per-client N]\n"
	"                    [--header-timeout SECONDS] [--cache-seconds S]\n"
	"                    [--drain SECONDS] [--no-access-log] [--mmap]\n"
	"                    [--tls-cert FILE --tls-key FILE\n"
	"                     [--tls-key-password-file FILE]]\n"
	"                    [--upstream URL [--upstream-allow PATTERN]...\n"
	"                     [--upstream-token-file FILE]\n"
	"                     [--upstream-refresh SECONDS]]\n"
	"\n"
	"Serve the store read-only over HTTP with the Hugging Face Hub's\n"
	"download protocol: point HF_ENDPOINT at it and Hub clients (vLLM,\n"
	"SGLang, transformers, huggingface-cli) load checkpoints from the store.\n"
	"A repository is a model id (the newest READY checkpoint of that model\n"
	"and revision) or a checkpoint id.\n"
	"\n"
	"  --listen ADDR:PORT    address to listen on (default 127.0.0.1:8088;\n"
	"                        config key serve_listen); port 0 picks one\n"
	"  --token TOKEN         require 'Authorization: Bearer TOKEN' (config\n"
	"                        key serve_token, or WSTORE_SERVE_TOKEN)\n"
	"  --max-connections N   concurrent connections (default 256)\n"
	"  --max-connections-per-client N\n"
	"                        concurrent connections from one client\n"
	"                        address (default a quarter of the above)\n"
	"  --header-timeout SECONDS\n"
	"                        close a connection silent this long before\n"
	"                        its request's headers are in (default 10)\n"
	"  --cache-seconds S     reuse a resolved name and its open checkpoint\n"
	"                        for S seconds (default 5; 0: resolve every\n"
	"                        request)\n"
	"  --drain SECONDS       on SIGTERM or SIGHUP, wait this long for\n"
	"                        responses in flight (default 30)\n"
	"  --no-access-log       no line per request on stderr\n"
	"  --mmap                send bodies that span chunk files of the file\n"
	"                        store from mappings of them (about half the\n"
	"                        CPU per byte; the pages being sent count in\n"
	"                        the server's RSS)\n"
	"  --tls-cert FILE       serve HTTPS with this PEM certificate (the\n"
	"                        server's first, then any intermediates;\n"
	"                        config key serve_tls_cert)\n"
	"  --tls-key FILE        and this PEM private key (config key\n"
	"                        serve_tls_key); both are read at start: a\n"
	"                        renewed certificate takes a restart\n"
	"  --tls-key-password-file FILE\n"
	"                        the encrypted key's password: the file's\n"
	"                        first line (config key\n"
	"                        serve_tls_key_password_file)\n"
	"  --upstream URL        a pull-through mirror of this Hub server: a\n"
	"                        commit the store lacks is imported from it\n"
	"                        (once, however many clients ask), then served;\n"
	"                        a branch or tag is served at the commit the\n"
	"                        upstream last named for it\n"
	"  --upstream-allow PATTERN\n"
	"                        only repositories matching (fnmatch; repeat;\n"
	"                        default every one) go upstream\n"
	"  --upstream-token-file FILE\n"
	"                        the token sent to the upstream (first line)\n"
	"  --upstream-refresh SECONDS\n"
	"                        ask the upstream again what a branch or tag\n"
	"                        names once this old (default 60; config key\n"
	"                        serve_upstream_refresh)\n"
	"\n"
	"Endpoints: /api/models/{repo}[/revision/{rev}], /api/models/{repo}/tree/\n"
	"{rev}[/{path}], /api/models/{repo}/refs, /{repo}/resolve/{rev}/{path},\n"
	"/{repo}/raw/{rev}/{path}, /metrics, /healthz.\n";

/* A number from lo to hi for option opt; a usage error if not. */
static int parse_number(double *out, const char *opt, const char *v, double lo,
			double hi)
{
	return wfront_parse_number(out, opt, v, lo, hi, "a number");
}

/* Both of --tls-cert and --tls-key, or neither (an empty value counts
 * as none); a password file only with them. */
static int check_tls(struct wserve_options *o)
{
	if (o->tls_cert && !*o->tls_cert)
		o->tls_cert = NULL;
	if (o->tls_key && !*o->tls_key)
		o->tls_key = NULL;
	if (o->tls_key_password_file && !*o->tls_key_password_file)
		o->tls_key_password_file = NULL;
	if (o->tls_cert && !o->tls_key)
		return wfront_usage_error("--tls-cert needs --tls-key (the "
					  "certificate's private key)");
	if (o->tls_key && !o->tls_cert)
		return wfront_usage_error("--tls-key needs --tls-cert (the "
					  "key's certificate)");
	if (o->tls_key_password_file && !o->tls_key)
		return wfront_usage_error("--tls-key-password-file needs "
					  "--tls-cert and --tls-key");
	return 0;
}

/* The first line of path, malloc'ed into *out. */
static int read_token(char **out, const char *path)
{
	char line[4096];
	FILE *f = fopen(path, "r");

	if (!f)
		return wfront_usage_error("cannot read token file '%s': %s",
					  path, strerror(errno));
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	if (!line[0])
		return wfront_usage_error("token file '%s' is empty", path);
	free(*out);
	return (*out = strdup(line)) ? 0 : EXIT_ERR;
}

/* --upstream-allow patterns and the upstream token, for main's life */
static const char *allow[64];
static size_t nallow;
static char *token;

static int parse_args(struct wserve_options *o, const wstore_config *cfg,
		      int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "token", required_argument, NULL, 't' },
		{ "max-connections", required_argument, NULL, 'm' },
		{ "max-connections-per-client", required_argument, NULL, 'p' },
		{ "header-timeout", required_argument, NULL, 'H' },
		{ "cache-seconds", required_argument, NULL, 'c' },
		{ "drain", required_argument, NULL, 'd' },
		{ "no-access-log", no_argument, NULL, 'n' },
		{ "mmap", no_argument, NULL, 'M' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'K' },
		{ "tls-key-password-file", required_argument, NULL, 'P' },
		{ "upstream", required_argument, NULL, 'U' },
		{ "upstream-allow", required_argument, NULL, 'A' },
		{ "upstream-token-file", required_argument, NULL, 'T' },
		{ "upstream-refresh", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *v;
	double n;
	int ch;

	o->listen = wstore_config_get(cfg, "serve_listen");
	o->token = wstore_config_get(cfg, "serve_token");
	o->tls_cert = wstore_config_get(cfg, "serve_tls_cert");
	o->tls_key = wstore_config_get(cfg, "serve_tls_key");
	o->tls_key_password_file =
		wstore_config_get(cfg, "serve_tls_key_password_file");
	if ((v = wstore_config_get(cfg, "serve_upstream_refresh")) &&
	    parse_number(&o->upstream_refresh, "serve_upstream_refresh", v, 1,
			 86400))
		return EXIT_USAGE;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'l': o->listen = optarg; break;
		case 't': o->token = optarg; break;
		case 'm':
			if (parse_number(&n, "--max-connections", optarg, 1,
					 65536))
				return EXIT_USAGE;
			o->max_connections = (unsigned)n;
			break;
		case 'p':
			if (parse_number(&n, "--max-connections-per-client",
					 optarg, 1, 65536))
				return EXIT_USAGE;
			o->max_per_client = (unsigned)n;
			break;
		case 'H':
			if (parse_number(&n, "--header-timeout", optarg, 1,
					 3600))
				return EXIT_USAGE;
			o->header_timeout = (unsigned)n;
			break;
		case 'c':
			if (parse_number(&o->cache_seconds, "--cache-seconds",
					 optarg, 0, 3600))
				return EXIT_USAGE;
			break;
		case 'd':
			if (parse_number(&o->drain_seconds, "--drain", optarg,
					 0, 86400))
				return EXIT_USAGE;
			break;
		case 'n': o->access_log = 0; break;
		case 'M': o->mmap = 1; break;
		case 'C': o->tls_cert = optarg; break;
		case 'K': o->tls_key = optarg; break;
		case 'P': o->tls_key_password_file = optarg; break;
		case 'U': o->upstream = optarg; break;
		case 'A':
			if (nallow + 1 >= sizeof(allow) / sizeof(*allow))
				return wfront_usage_error(
					"too many --upstream-allow patterns");
			allow[nallow++] = optarg;
			break;
		case 'T':
			if (read_token(&token, optarg))
				return EXIT_USAGE;
			o->upstream_token = token;
			break;
		case 'R':
			if (parse_number(&o->upstream_refresh,
					 "--upstream-refresh", optarg, 1,
					 86400))
				return EXIT_USAGE;
			break;
		case 'h': fputs(help, stdout); return -1;
		default: return wfront_bad_option(ch, argv, "serve", opts);
		}
	}
	if (nallow && !o->upstream)
		return wfront_usage_error("--upstream-allow needs --upstream");
	if (o->upstream && strncmp(o->upstream, "http://", 7) &&
	    strncmp(o->upstream, "https://", 8))
		return wfront_usage_error("invalid --upstream '%s': an http:// "
					  "or https:// URL",
					  o->upstream);
	o->upstream_allow = allow;
	if (optind != argc)
		return wfront_usage_error(
			"'serve' takes no arguments, got '%s'", argv[optind]);
	if (!o->listen || !*o->listen)
		o->listen = "127.0.0.1:8088";
	if (o->token && !*o->token)
		return wfront_usage_error("--token must not be empty");
	return check_tls(o);
}

int main(int argc, char **argv)
{
	struct wserve_options o = { .drain_seconds = 30.0,
				    .access_log = 1,
				    .cache_seconds = 5.0 };
	wstore_config *cfg = NULL;
	wstore_store *s = NULL;
	int rc;

	if (wfront_env_config(&cfg))
		return EXIT_ERR;
	if ((rc = parse_args(&o, cfg, argc, argv))) {
		wstore_config_free(cfg);
		return rc < 0 ? EXIT_OK : rc;
	}
	/* SIGTERM, SIGINT and SIGHUP are taken by wserve_run: blocked
	 * before the store starts threads of its own */
	wfront_hold_stop_signals();
	/* a mirror writes what it fetches */
	if (wstore_open_flags(&s, cfg,
			      o.upstream ? WSTORE_OPEN_CREATE
					 : WSTORE_OPEN_READONLY) < 0) {
		wfront_err("%s", wstore_last_error());
		wstore_config_free(cfg);
		return EXIT_ERR;
	}
	rc = wserve_run(s, &o);
	wstore_free(s);
	free(token);
	wstore_config_free(cfg);
	return rc ? EXIT_ERR : EXIT_OK;
}
