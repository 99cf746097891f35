/*
 * unit.h - the tiny unit-test harness.  Each test file defines functions
 * registered in main.c's table; CHECK records a pass or a failure with the
 * expression and line; the runner prints "unit: N passed, N failed".
 */
#ifndef WSTORE_UNIT_H
#define WSTORE_UNIT_H

#include <stdio.h>
#include <string.h>

extern int unit_passed, unit_failed;
extern const char *unit_current;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (cond) {                                                    \
			unit_passed++;                                         \
		} else {                                                       \
			unit_failed++;                                         \
			fprintf(stderr, "FAIL %s: %s:%d: %s\n", unit_current,  \
				__FILE__, __LINE__, #cond);                    \
		}                                                              \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                     \
	do {                                                                   \
		long long _a = (long long)(a), _b = (long long)(b);            \
		if (_a == _b) {                                                \
			unit_passed++;                                         \
		} else {                                                       \
			unit_failed++;                                         \
			fprintf(stderr,                                        \
				"FAIL %s: %s:%d: %s == %s (%lld != %lld)\n",   \
				unit_current, __FILE__, __LINE__, #a, #b, _a,  \
				_b);                                           \
		}                                                              \
	} while (0)

#define CHECK_STR(a, b)                                                        \
	do {                                                                   \
		const char *_a = (a), *_b = (b);                               \
		if (_a && _b && strcmp(_a, _b) == 0) {                         \
			unit_passed++;                                         \
		} else {                                                       \
			unit_failed++;                                         \
			fprintf(stderr,                                        \
				"FAIL %s: %s:%d: %s == %s ('%s' != '%s')\n",   \
				unit_current, __FILE__, __LINE__, #a, #b,      \
				_a ? _a : "(null)", _b ? _b : "(null)");       \
		}                                                              \
	} while (0)

/* Path of rel under the test data directory ($WSTORE_TEST_DATA, else
 * ./tests/data, else found from the source path); caller frees. */
char *unit_data_path(const char *rel);
/* Whole file, NUL-terminated, or NULL; *len (if not NULL) gets its size.
 * Caller frees. */
char *unit_slurp(const char *path, size_t *len);

/* A fresh empty directory under $TMPDIR for one test; caller frees. */
char *unit_tmpdir(void);
/* rm -rf of a directory made by unit_tmpdir. */
void unit_rmtree(const char *dir);

#endif
