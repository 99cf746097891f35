/*
 * unit.h - the unit-test program's helpers.  Each test file defines functions
 * registered in main.c's table and asserts with the CHECK macros of
 * tests/lib/check.h; the runner prints "unit: N passed, N failed,
 * N skipped".  The files, stores and checkpoints the tests build their
 * cases from are fixture.h's.
 */
#ifndef WSTORE_UNIT_H
#define WSTORE_UNIT_H

#include <stdio.h>
#include <string.h>

#include "../lib/check.h"

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
