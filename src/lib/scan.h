/* scan.h - walking an import source directory (scan.c). */
#ifndef WSTORE_SCAN_H
#define WSTORE_SCAN_H

#include <stdint.h>
#include <sys/stat.h>

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

/*
 * Open a source file for reading without ever blocking on what it may
 * have become since it was looked at: O_NONBLOCK (a FIFO swapped in
 * would otherwise block the open, while an import holds the checkpoint's
 * lock), then fstat, and anything but a regular file is refused with
 * WSTORE_EINVAL naming path.  Symlinks are followed, as the scan follows
 * them (a hub cache snapshot is a tree of them).  Returns the fd (in
 * blocking mode again) with *st filled in, or a negative code with the
 * last error set.
 */
int wstore__source_open(const char *path, struct stat *st);

/* Every regular file under source (symlinks followed), or an error naming
 * the first entry that cannot be imported. */
int wstore__scan_source(wstore__scan *out, const char *source);
/* The same, leaving out every entry for which filter(ctx, rel, is_dir)
 * returns non-zero (a directory is then not entered); a dangling symlink
 * is offered as a file before it is an error. */
typedef int (*wstore__scan_filter_fn)(void *ctx, const char *rel, int is_dir);
int wstore__scan_source_filtered(wstore__scan *out, const char *source,
				 wstore__scan_filter_fn filter, void *ctx);
void wstore__scan_free(wstore__scan *scan);
/*
 * A Hugging Face hub cache repo root ("models--org--name" holding blobs/,
 * refs/ and snapshots/) is not a checkpoint: importing it would import the
 * blobs, the refs and every snapshot.  *out is the directory to import: a
 * malloc'ed "source/snapshots/<commit>" for a repo root (the commit that
 * refs/<revision> names, or revision itself when it is a snapshot's name),
 * else NULL (import source as it is).  A repo root without that revision
 * is an error saying which directory to pass.
 */
int wstore__resolve_hub_source(char **out, const char *source,
			       const char *revision);
const wstore__scan_file *wstore__scan_find(const wstore__scan *scan,
					   const char *rel);

#endif
