/* scan.h - walking an import source directory (scan.c). */
#ifndef WSTORE_SCAN_H
#define WSTORE_SCAN_H

#include <stdint.h>

typedef struct wstore__scan_file {
	char *rel; /* relative path, '/'-separated */
	char *abs; /* path to open */
	uint64_t size;
} wstore__scan_file;

typedef struct wstore__scan {
	wstore__scan_file *files; /* sorted by rel */
	size_t n;
	uint64_t total;
} wstore__scan;

/* Every regular file under source (symlinks followed), or an error naming
 * the first entry that cannot be imported. */
int wstore__scan_source(wstore__scan *out, const char *source);
void wstore__scan_free(wstore__scan *scan);
const wstore__scan_file *wstore__scan_find(const wstore__scan *scan,
					   const char *rel);

#endif
