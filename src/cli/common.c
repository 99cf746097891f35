/*
 * common.c - helpers shared by the wstore subcommands: mapping library
 * errors to exit statuses, opening the store, progress lines, signal
 * handling (what all three front ends share: src/common/frontend.h).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <locale.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include <jansson.h>

#include "cli.h"

/* atomic, not volatile sig_atomic_t: library worker threads read it
 * through cli_progress_fn while the handler writes it on another thread */
static atomic_int interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
	/* waits for other processes (locks) end too */
	wstore_interrupt();
}

void cli_catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* a second ^C kills as usual, in case cleanup itself hangs */
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* Ids resolved from model names (cli_resolve), freed at exit. */
static char *resolved[64];
static size_t nresolved;

/* a store was closed with wstore_free_exiting: no exit() after it */
static int fast_exit;

void cli_close_store(wstore_store *s)
{
	if (!s)
		return;
	/* only when the backend skipped its teardown: otherwise a normal
	 * exit, so that leak checkers still see everything freed */
	if (wstore_free_exiting(s))
		fast_exit = 1;
}

void cli_exit(int rc)
{
	if (fflush(stdout) != 0 && rc == EXIT_OK) {
		wfront_err("cannot write the output: %s", strerror(errno));
		rc = EXIT_ERR;
	}
	fflush(stderr);
	while (nresolved)
		free(resolved[--nresolved]);
	if (fast_exit)
		_exit(rc);
	exit(rc);
}

int cli_interrupted(void)
{
	return interrupted;
}

int cli_fail(int code)
{
	const char *msg = wstore_last_error();

	wfront_err("%s", *msg ? msg : wstore_strerror(code));
	if (code == WSTORE_EVERIFY)
		return EXIT_VERIFY;
	return EXIT_ERR;
}

static void on_notice(const char *message, void *ctx)
{
	(void)ctx;
	wfront_err("%s", message);
}

/* No store configured and the default one never created (no import
 * yet): readers see an empty store rather than an error.  A store that is
 * named, by any layer, and missing stays an error. */
static int default_store_absent(const struct cli *c)
{
	char *dir;
	int absent;

	if (wstore_config_get(c->cfg, "store"))
		return 0;
	if (!(dir = wstore_config_default_store()))
		return 0;
	absent = access(dir, F_OK) < 0 && errno == ENOENT;
	free(dir);
	return absent;
}

int cli_open_store(struct cli *c, wstore_store **out, unsigned flags)
{
	int rc = (flags & WSTORE_OPEN_READONLY) && default_store_absent(c)
			 ? wstore_open_url(out, "mem://")
			 : wstore_open_flags(out, c->cfg, flags);

	if (rc < 0)
		return cli_fail(rc);
	if (wstore_warning(*out))
		wfront_err("warning: %s", wstore_warning(*out));
	/* even with --quiet: a wait of many seconds needs its reason */
	wstore_set_notice(*out, on_notice, NULL);
	return 0;
}

int cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return 1;
	}
	return 0;
}

void cli_print_help(const char *text)
{
	fputs(text, stdout);
}

int cli_progress_fn(uint64_t done, uint64_t total, const char *path, void *ctx)
{
	struct cli_progress *p = ctx;
	double now = wclock_mono_s(), el;
	char d[32], t[32], r[32];

	(void)path;
	if (interrupted)
		return 1;
	/* asked before the work is known (a Hub import listing its files):
	 * no sizes to show, and the rate counts from the first byte */
	if (total == 0 && done == 0) {
		if (p->c->tty && now - p->last >= 0.2) {
			p->last = now;
			fprintf(stderr, "\r%s: listing files ", p->verb);
		}
		return 0;
	}
	if (p->t0 == 0) {
		p->t0 = now;
		p->d0 = done;
	}
	if (!p->c->tty || (now - p->last < 0.2 && done < total))
		return 0;
	p->last = now;
	el = now - p->t0;
	fflush(stdout);
	wstore_format_size(d, sizeof(d), done);
	wstore_format_size(t, sizeof(t), total);
	if (el < 1.0 || done <= p->d0) {
		/* no rate yet: an ETA from one chunk would be a guess */
		fprintf(stderr, "\r%s %s / %s                          ",
			p->verb, d, t);
		return 0;
	}
	wstore_format_size(r, sizeof(r), (uint64_t)((done - p->d0) / el));
	if (done < total)
		fprintf(stderr, "\r%s %s / %s  %s/s  ETA %.0f s   ", p->verb, d,
			t, r,
			(double)(total - done) * el / (double)(done - p->d0));
	else
		fprintf(stderr, "\r%s %s / %s  %s/s            ", p->verb, d, t,
			r);
	return 0;
}

void cli_progress_end(struct cli_progress *p)
{
	if (p->c->tty && p->last > 0)
		fputs("\r\033[K", stderr);
}

static int is_c1(const unsigned char *p)
{
	return p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;
}

const char *cli_text(const struct cli *c, const char *s)
{
	static char *ring[8];
	static int next;
	const unsigned char *p;
	size_t n = 0;
	char *out, *o;

	(void)c;
	if (!s)
		return s;
	for (p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f || is_c1(p))
			n++;
	if (!n)
		return s;
	out = malloc(strlen(s) + 6 * n + 1);
	if (!out)
		return "?";
	for (o = out, p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			o += sprintf(o, "\\x%02x", *p);
		} else if (is_c1(p)) {
			o += sprintf(o, "\\u%04x", p[1]);
			p++;
		} else {
			*o++ = (char)*p;
		}
	}
	*o = '\0';
	free(ring[next]);
	ring[next] = out;
	next = (next + 1) % 8;
	return out;
}

void cli_print_json(void *json)
{
	json_dumpf(json, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
	fputc('\n', stdout);
	json_decref(json);
}

int cli_check_name(const char *arg)
{
	char *model = NULL, *rev = NULL;
	int rc = wstore_parse_name(&model, &rev, arg);

	free(model);
	free(rev);
	if (rc == 0 && wstore_validate_checkpoint_id(arg) < 0)
		rc = WSTORE_EINVAL;
	return rc < 0 ? cli_fail(rc) : 0;
}

int cli_resolve(struct cli *c, const char **out, wstore_store *s,
		const char *arg)
{
	char *model = NULL, *rev = NULL, *id = NULL;
	int rc = wstore_parse_name(&model, &rev, arg);

	(void)c;
	*out = arg;
	if (rc == 1) {
		rc = wstore_resolve(&id, NULL, s, model, rev);
		if (rc == 0 &&
		    nresolved == sizeof(resolved) / sizeof(*resolved))
			rc = -ENOMEM;
	}
	free(model);
	free(rev);
	if (rc < 0) {
		free(id);
		return cli_fail(rc);
	}
	if (id)
		*out = resolved[nresolved++] = id;
	return 0;
}

int cli_open_named(struct cli *c, wstore_store **s, const char **id)
{
	*s = NULL;
	if (cli_check_name(*id) || cli_open_store(c, s, WSTORE_OPEN_READONLY))
		return EXIT_ERR;
	if (cli_resolve(c, id, *s, *id)) {
		cli_close_store(*s);
		*s = NULL;
		return EXIT_ERR;
	}
	return 0;
}

/* The global options, NULL-terminated. */
static const char *const *globals(void)
{
	static const char *g[32];

	if (!g[0])
		for (size_t i = 0; i + 1 < sizeof(g) / sizeof(*g); i++)
			if (!(g[i] = cli_global_option(i)))
				break;
	return g;
}

const char *cli_closest_option(const char *word, const struct option *opts)
{
	static char best[64];

	return wfront_closest_option(best, sizeof(best), word, opts, globals());
}

int cli_bad_option(int ch, char **argv, const char *cmd,
		   const struct option *opts)
{
	return wfront_bad_option_of(ch, argv, cmd, opts, globals());
}

/* Commands taking one checkpoint id and no options besides --help. */
int cli_one_id(const char **out, int argc, char **argv, const char *cmd,
	       const char *help)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' }, { 0 }
	};
	int ch;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (ch == 'h') {
			cli_print_help(help);
			return -1;
		}
		return cli_bad_option(ch, argv, cmd, opts);
	}
	if (optind + 1 != argc)
		return wfront_usage_error(
			"'%s' needs exactly one checkpoint id", cmd);
	/* refused before any store is opened */
	if (cli_check_name(argv[optind]))
		return EXIT_ERR;
	*out = argv[optind];
	return 0;
}

/* Export every set key of cfg as WSTORE_<KEY>. */
static int export_config(const wstore_config *cfg)
{
	const char *const *keys = wstore_config_keys();
	char var[64];

	for (size_t k = 0; keys[k]; k++) {
		const char *v = wstore_config_get(cfg, keys[k]);
		size_t n = strlen("WSTORE_");

		if (!v)
			continue;
		if (n + strlen(keys[k]) >= sizeof(var))
			return -1;
		memcpy(var, "WSTORE_", n);
		for (const char *p = keys[k]; *p; p++)
			var[n++] =
				(char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
		var[n] = '\0';
		if (setenv(var, v, 1) < 0)
			return -1;
	}
	return 0;
}

/* name beside /proc/self/exe, else the installed one. */
static int find_daemon(char *out, size_t cap, const char *name,
		       const char *installed)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/'))) {
			*slash = '\0';
			if ((size_t)snprintf(out, cap, "%s/%s", self, name) <
				    cap &&
			    access(out, X_OK) == 0)
				return 0;
		}
	}
	if ((size_t)snprintf(out, cap, "%s", installed) < cap &&
	    access(out, X_OK) == 0)
		return 0;
	return -1;
}

int cli_exec_daemon(struct cli *c, const char *cmd, const char *name,
		    const char *installed, char **argv)
{
	char path[PATH_MAX];

	if (find_daemon(path, sizeof(path), name, installed) < 0) {
		wfront_err("%s: cannot find %s (looked beside wstore "
			   "and at %s)",
			   cmd, name, installed);
		return EXIT_ERR;
	}
	if (export_config(c->cfg) < 0) {
		wfront_err("%s: cannot pass the configuration to %s", cmd,
			   name);
		return EXIT_ERR;
	}
	argv[0] = (char *)name;
	execv(path, argv);
	wfront_err("%s: cannot run %s: %s", cmd, path, strerror(errno));
	return EXIT_ERR;
}

int cli_width(const char *s)
{
	/* widths of UTF-8 text whatever the user's locale (ids and names
	 * are UTF-8 by contract); without C.UTF-8, one column a byte */
	static locale_t utf8;
	locale_t old;
	mbstate_t st;
	wchar_t wc;
	int w = 0;

	if (!utf8)
		utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	if (!utf8)
		return (int)strlen(s);
	old = uselocale(utf8);
	memset(&st, 0, sizeof(st));
	while (*s) {
		size_t n = mbrtowc(&wc, s, strlen(s), &st);
		int k;

		if (n == (size_t)-1 || n == (size_t)-2 || n == 0) {
			memset(&st, 0, sizeof(st));
			w++;
			s++;
			continue;
		}
		k = wcwidth(wc);
		w += k < 0 ? 1 : k;
		s += n;
	}
	uselocale(old);
	return w;
}

void cli_cell(const char *s, int width, int right, int last)
{
	int pad = width - cli_width(s);

	if (right)
		printf("%*s%s", pad > 0 ? pad : 0, "", s);
	else if (last)
		fputs(s, stdout);
	else
		printf("%s%*s", s, pad > 0 ? pad : 0, "");
	fputs(last ? "\n" : "  ", stdout);
}

void cli_time(char *buf, size_t cap, int64_t unix_seconds)
{
	time_t t = (time_t)unix_seconds;
	struct tm tm;

	if (unix_seconds <= 0 || !gmtime_r(&t, &tm))
		snprintf(buf, cap, "-");
	else
		strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void cli_table_init(struct cli_table *t, size_t ncols, const char *align,
		    const char *const *headers)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	t->align = align;
	cli_table_add(t, headers);
}

void cli_table_add(struct cli_table *t, const char *const *cells)
{
	char **p;

	if (t->oom)
		return;
	p = realloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(*p));
	if (!p) {
		t->oom = 1;
		return;
	}
	t->cells = p;
	p += t->nrows * t->ncols;
	for (size_t i = 0; i < t->ncols; i++)
		if (!(p[i] = strdup(cells[i] ? cells[i] : "-")))
			t->oom = 1;
	t->nrows++;
}

void cli_table_print(struct cli_table *t)
{
	int w[16] = { 0 };

	for (size_t r = 0; r < t->nrows; r++)
		for (size_t i = 0; i < t->ncols && i < 16; i++) {
			int k = t->cells[r * t->ncols + i]
					? cli_width(t->cells[r * t->ncols + i])
					: 0;
			if (k > w[i])
				w[i] = k;
		}
	for (size_t r = 0; r < t->nrows && !t->oom; r++)
		for (size_t i = 0; i < t->ncols; i++)
			cli_cell(t->cells[r * t->ncols + i], w[i < 16 ? i : 15],
				 t->align[i] == 'r', i + 1 == t->ncols);
	if (t->oom)
		wfront_err("out of memory");
	for (size_t k = 0; k < t->nrows * t->ncols; k++)
		free(t->cells[k]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

int cli_import_report(struct cli *c, wstore_store *s, const char *id,
		      double secs, const char *commit, const char *from,
		      void *extra)
{
	wstore_manifest *m = NULL;
	const char *rev;
	uint64_t total;
	char sz[32], rate[32];
	int rc = wstore_manifest_read(&m, s, id);
	json_t *j;

	if (rc < 0) {
		json_decref(extra);
		return cli_fail(rc);
	}
	total = wstore_manifest_total_size(m);
	rev = wstore_manifest_revision(m);
	if (commit && !strcmp(commit, rev))
		commit = NULL;
	if (c->json) {
		j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:f, s:f}",
			      "checkpoint_id", id, "model_id",
			      wstore_manifest_model_id(m), "revision",
			      wstore_manifest_revision(m), "status",
			      wstore_manifest_status(m), "files",
			      (json_int_t)wstore_manifest_file_count(m),
			      "total_size", (json_int_t)total, "seconds", secs,
			      "bytes_per_second",
			      secs > 0 ? total / secs : 0.0);
		if (j && extra)
			json_object_update(j, extra);
		cli_print_json(j);
	} else if (!c->quiet) {
		wstore_format_size(sz, sizeof(sz), total);
		wstore_format_size(rate, sizeof(rate),
				   secs > 0 ? (uint64_t)(total / secs) : 0);
		printf("imported '%s' (%s @ %s%s%s)%s%s: %zu files, %s in %.2f "
		       "s (%s/s)\n",
		       cli_text(c, id),
		       cli_text(c, wstore_manifest_model_id(m)),
		       cli_text(c, rev), commit ? ", hub commit " : "",
		       commit ? cli_text(c, commit) : "", from ? " from " : "",
		       from ? cli_text(c, from) : "",
		       wstore_manifest_file_count(m), sz, secs, rate);
	}
	json_decref(extra);
	wstore_manifest_free(m);
	return EXIT_OK;
}

int cli_parse_reflink(wstore_import_options *o, const char *arg,
		      const char *what, int always)
{
	if (!strcmp(arg, "auto"))
		o->reflink = WSTORE_REFLINK_AUTO;
	else if (always && !strcmp(arg, "always"))
		o->reflink = WSTORE_REFLINK_ALWAYS;
	else if (!strcmp(arg, "never"))
		o->reflink = WSTORE_REFLINK_NEVER;
	else
		return wfront_usage_error("invalid --reflink '%s'%s%s: %s", arg,
					  *what ? " " : "", what,
					  always ? "auto, always or never"
						 : "auto or never");
	return 0;
}
