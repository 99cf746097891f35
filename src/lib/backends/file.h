/*
 * file.h - what the file store's files share (file.c the callbacks and
 * the constructor, file_keys.c keys and the way to their directories,
 * file_walk.c the walks over the tree).  Private to them: the rest of the
 * library sees the file store only through struct wstore_backend.
 */
#ifndef WSTORE_BACKENDS_FILE_H
#define WSTORE_BACKENDS_FILE_H

#include <stdint.h>

#include "helpers.h"

typedef struct file_backend {
	wstore_backend pub;
	char *root; /* absolute, no trailing '/' */
} file_backend;

static inline file_backend *fb_of(wstore_backend *b)
{
	return (file_backend *)b;
}

/* ---- file_keys.c -------------------------------------------------------- */

/* 1 if key is a valid key (the rules are those at the top of file.c). */
int fs_key_ok(const char *key);
/* 0, or WSTORE_EINVAL naming key. */
int fs_check_key(const char *key);
/* Missing, a directory, a path through a file or through a symlink
 * (never followed): errno values that mean the key does not exist. */
int fs_is_missing(int err);
/* WSTORE_ENOTFOUND for a missing key (fs_is_missing), else -err; both
 * with a message saying what could not be done (verb) to key. */
int fs_os_error(file_backend *fb, int err, const char *verb, const char *key);
/* Why a write of key failed (errno err): a symlink on its way is named. */
int fs_write_error(file_backend *fb, int err, const char *key);
/* The directory holding key's last segment, reached without following a
 * symlink; create 1 makes missing ones, 2 also fsyncs their parents.  The
 * fd or -errno; *base is key's last segment. */
int fs_open_key_dir(file_backend *fb, const char *key, int create,
		    const char **base);

/* ---- file_walk.c -------------------------------------------------------- */

/* The list callback: every key starting with prefix. */
int fs_list(wstore_backend *b, const char *prefix, wstore_list_fn fn,
	    void *ctx);
/* The sweep_temps callback: temp files of dead writers older than
 * older_than seconds. */
int fs_sweep_temps(wstore_backend *b, int64_t older_than, int dry_run,
		   size_t *out_n, int (*keep)(const char *path, void *ctx),
		   void (*fn)(const char *path, uint64_t bytes, int removed,
			      void *ctx),
		   void *ctx);

/* ---- file_migrate.c ----------------------------------------------------- */

/* The migrate_file callback (include/wstore/sys/backend.h). */
int fs_migrate_file(wstore_backend *b, const char *file_key, uint64_t cs,
		    uint64_t size, unsigned flags,
		    int (*check)(int fd, void *ctx), void *ctx);

#endif
