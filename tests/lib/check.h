/*
 * check.h - the one assertion harness of the C test programs (unit,
 * abi-frozen, redis-backend, mooncake-backend, conformance).
 *
 * Each CHECK counts a pass or a failure; a failure prints one line
 *   FAIL <check_current>: <file>:<line>: <expression> (last error: ...)
 * on stderr (unbuffered, so a forked child never repeats it).  A check
 * that cannot run says so with check_skip(): it is printed as
 *   SKIP <check_current>: <reason>
 * and counted apart, never as a pass.  check_summary() prints the line
 * tests/run.sh reads, "<label>: N passed, N failed, N skipped".
 *
 * Exactly one file of each program defines the counters:
 *   CHECK_COUNTERS;
 * and sets check_current to the name of the test it runs.  The counters
 * are updated atomically: checks may run in several threads.
 */
#ifndef WSTORE_TESTS_CHECK_H
#define WSTORE_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <wstore/wstore.h>

extern int check_passed, check_failed, check_skipped;
extern const char *check_current;

#define CHECK_COUNTERS                                                         \
	int check_passed, check_failed, check_skipped;                         \
	const char *check_current = ""

static inline void check_pass(void)
{
	__atomic_add_fetch(&check_passed, 1, __ATOMIC_RELAXED);
}

/* Count a failure and print "FAIL <test>: " and the message. */
__attribute__((format(printf, 1, 2))) static inline void
check_fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	__atomic_add_fetch(&check_failed, 1, __ATOMIC_RELAXED);
	fprintf(stderr, "FAIL %s: %s\n", check_current, msg);
}

/* Count a skip and print "SKIP <test>: " and the reason. */
__attribute__((format(printf, 1, 2))) static inline void
check_skip(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	__atomic_add_fetch(&check_skipped, 1, __ATOMIC_RELAXED);
	fprintf(stderr, "SKIP %s: %s\n", check_current, msg);
}

static inline int check_bool_(int ok, const char *file, int line,
			      const char *expr)
{
	if (ok)
		check_pass();
	else
		check_fail("%s:%d: %s (last error: %s)", file, line, expr,
			   wstore_last_error());
	return ok;
}

static inline int check_eq_int_(long long a, long long b, const char *file,
				int line, const char *ea, const char *eb)
{
	if (a == b) {
		check_pass();
		return 1;
	}
	check_fail("%s:%d: %s == %s (%lld != %lld; last error: %s)", file, line,
		   ea, eb, a, b, wstore_last_error());
	return 0;
}

static inline int check_str_(const char *a, const char *b, const char *file,
			     int line, const char *ea, const char *eb)
{
	if (a && b && strcmp(a, b) == 0) {
		check_pass();
		return 1;
	}
	check_fail("%s:%d: %s == %s ('%s' != '%s')", file, line, ea, eb,
		   a ? a : "(null)", b ? b : "(null)");
	return 0;
}

static inline int check_msg_(const char *text, const char *file, int line)
{
	const char *m = wstore_last_error();

	if (strstr(m, text)) {
		check_pass();
		return 1;
	}
	check_fail("%s:%d: message '%s' lacks '%s'", file, line, m, text);
	return 0;
}

/* cond is true */
#define CHECK(cond) check_bool_(!!(cond), __FILE__, __LINE__, #cond)
/* two integers are equal */
#define CHECK_EQ_INT(a, b)                                                     \
	check_eq_int_((long long)(a), (long long)(b), __FILE__, __LINE__, #a,  \
		      #b)
#define CHECK_EQ(a, b) CHECK_EQ_INT(a, b)
/* two strings are equal (NULL never is) */
#define CHECK_STR(a, b) check_str_((a), (b), __FILE__, __LINE__, #a, #b)
/* the thread's last error message contains text */
#define CHECK_MSG(text) check_msg_((text), __FILE__, __LINE__)

/* Print "<label>: N passed, N failed, N skipped"; the exit status. */
static inline int check_summary(const char *label)
{
	printf("%s: %d passed, %d failed, %d skipped\n", label, check_passed,
	       check_failed, check_skipped);
	return check_failed ? 1 : 0;
}

#endif
