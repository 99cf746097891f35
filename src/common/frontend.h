/*
 * frontend.h - what the three front ends (the wstore tool, the mount
 * daemon, the HTTP server) say the same way: exit statuses, the
 * "wstore: <msg>" line on stderr, usage errors and getopt failures, the
 * numbers their options take, the signals that stop a daemon, the
 * configuration a daemon is handed.
 *
 * Header-only (static inline), like clock.h: each front end takes what it
 * uses and nothing is exported.  The one piece that must be a symbol of
 * each executable, Py_IsInitialized, is embed.c beside this file.
 */
#ifndef WSTORE_COMMON_FRONTEND_H
#define WSTORE_COMMON_FRONTEND_H

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wstore/wstore.h>

/* Exit statuses of every front end (docs/cli/wstore.md, EXIT STATUS). */
#define EXIT_OK 0
#define EXIT_ERR 1
#define EXIT_USAGE 2
#define EXIT_VERIFY 3

/*
 * Print "wstore: <msg>" to stderr, after flushing stdout (so that with
 * 2>&1 | tee a message comes after the lines printed before it, not ahead
 * of them from stdout's buffer).  Every message of a front end to stderr
 * goes through it, bar a daemon's own log lines.
 */
static inline void wfront_verr(const char *fmt, va_list ap)
{
	fflush(stdout);
	fputs("wstore: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

__attribute__((format(printf, 1, 2))) static inline void
wfront_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	wfront_verr(fmt, ap);
	va_end(ap);
}

/* wfront_err, then return EXIT_USAGE. */
__attribute__((format(printf, 1, 2))) static inline int
wfront_usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	wfront_verr(fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

/* Edit distance of a and b (insert, delete, substitute, swap of
 * neighbours); 99 for words of 32 characters and more. */
static inline size_t wfront_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), d[32][32];

	if (la >= 32 || lb >= 32)
		return 99;
	for (size_t i = 0; i <= la; i++)
		for (size_t j = 0; j <= lb; j++) {
			size_t v;

			if (!i || !j) {
				d[i][j] = i + j;
				continue;
			}
			v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[la][lb];
}

/* Keep "--name" in out (cap bytes) if name is closer to word than *best
 * edits, within two edits and half its length. */
static inline void wfront_closer(char *out, size_t cap, size_t *best,
				 const char *word, const char *name)
{
	size_t d = wfront_distance(word, name);

	if (d < *best && d * 2 <= strlen(name) && strcmp(word, name)) {
		*best = d;
		snprintf(out, cap, "--%s", name);
	}
}

/*
 * The long option closest to word ("--sorce=x": "--source"), among the
 * names of opts and more (NULL-terminated "--name" strings; either may be
 * NULL), written to out (cap bytes) with its dashes; NULL when none is
 * within two edits and half its length.
 */
static inline const char *wfront_closest_option(char *out, size_t cap,
						const char *word,
						const struct option *opts,
						const char *const *more)
{
	char w[40];
	size_t best = 3, n;

	if (strncmp(word, "--", 2) != 0 || cap < 3)
		return NULL;
	n = strcspn(word + 2, "=");
	if (n >= sizeof(w))
		return NULL;
	memcpy(w, word + 2, n);
	w[n] = '\0';
	out[0] = '\0';
	for (size_t i = 0; opts && opts[i].name; i++)
		wfront_closer(out, cap, &best, w, opts[i].name);
	for (size_t i = 0; more && more[i]; i++)
		wfront_closer(out, cap, &best, w, more[i] + 2);
	return out[0] ? out : NULL;
}

/* Report a getopt_long failure of command cmd (ch is ':' for a missing
 * value, anything else for an unknown option), with "did you mean" when
 * an option of opts or more (as for wfront_closest_option) is close;
 * returns EXIT_USAGE. */
static inline int wfront_bad_option_of(int ch, char **argv, const char *cmd,
				       const struct option *opts,
				       const char *const *more)
{
	char near[64];

	if (ch == ':')
		return wfront_usage_error("option '%s' needs a value",
					  argv[optind - 1]);
	if (wfront_closest_option(near, sizeof(near), argv[optind - 1], opts,
				  more))
		return wfront_usage_error(
			"unknown option '%s' for '%s'; did you mean '%s'?",
			argv[optind - 1], cmd, near);
	return wfront_usage_error("unknown option '%s' for '%s'",
				  argv[optind - 1], cmd);
}

/* wfront_bad_option_of with options opts only. */
static inline int wfront_bad_option(int ch, char **argv, const char *cmd,
				    const struct option *opts)
{
	return wfront_bad_option_of(ch, argv, cmd, opts, NULL);
}

/* A positive count (1..1024: --jobs, --threads, --replica-num) for option
 * opt; a usage error if v is anything else. */
static inline int wfront_parse_count(uint32_t *out, const char *opt,
				     const char *v)
{
	char *end;
	unsigned long n = strtoul(v, &end, 10);

	if (!*v || *end || n == 0 || n > 1024 || v[0] == '-')
		return wfront_usage_error(
			"invalid %s '%s': expected a number from 1 to 1024",
			opt, v);
	*out = (uint32_t)n;
	return 0;
}

/* A number from lo to hi, fractions allowed, for option opt; what names
 * it in the usage error ("a number", "seconds"). */
static inline int wfront_parse_number(double *out, const char *opt,
				      const char *v, double lo, double hi,
				      const char *what)
{
	char *end;
	double d = strtod(v, &end);

	if (!*v || *end || !(d >= lo && d <= hi))
		return wfront_usage_error("invalid %s '%s': expected %s from "
					  "%g to %g",
					  opt, v, what, lo, hi);
	*out = d;
	return 0;
}

/* The signals that stop a daemon: SIGINT, SIGTERM, SIGHUP. */
static inline void wfront_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

/*
 * Block the stop signals in the calling thread, before any thread starts
 * (threads inherit the mask; the store's own, e.g. Mooncake's client,
 * would otherwise get them with the default action): the daemon then
 * takes them with sigwait or sigtimedwait, in one place.
 */
static inline void wfront_hold_stop_signals(void)
{
	sigset_t set;

	wfront_stop_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/*
 * The configuration of a daemon (wstore-mount, wstore-serve): what
 * `wstore mount|serve` resolved from every layer and handed over as
 * WSTORE_<KEY> environment variables (cli_exec_daemon), never on the
 * command line.  0, or EXIT_ERR after printing why.
 */
static inline int wfront_env_config(wstore_config **out)
{
	*out = NULL;
	if (wstore_config_new(out) < 0 || wstore_config_load_env(*out) < 0) {
		wfront_err("%s", wstore_last_error());
		wstore_config_free(*out);
		*out = NULL;
		return EXIT_ERR;
	}
	return 0;
}

#endif
