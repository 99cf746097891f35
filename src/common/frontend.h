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

/* Report a getopt_long failure of command cmd (ch is ':' for a missing
 * value, anything else for an unknown option); returns EXIT_USAGE. */
static inline int wfront_bad_option(int ch, char **argv, const char *cmd)
{
	if (ch == ':')
		return wfront_usage_error("option '%s' needs a value",
					  argv[optind - 1]);
	return wfront_usage_error("unknown option '%s' for '%s'",
				  argv[optind - 1], cmd);
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
