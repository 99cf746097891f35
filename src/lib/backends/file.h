/*
 * file.h - what the file store's files share (file.c the callbacks and
 * the constructor, file_keys.c keys and the way to their directories,
 * file_walk.c the walks over the tree, file_whole.c the layouts of chunk
 * keys and the data files).  Private to them: the rest of the
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

/* Create a temp file (durable.c's ".tmp-" form, WSTORE__DURABLE_* flags)
 * for key's last segment in its directory, which is made if missing (as
 * often as a concurrent remove deletes it); d->dirfd is that directory,
 * closed by the caller (-1 on failure).  0 or an errno value. */
int fs_open_temp(file_backend *fb, const char *key, unsigned flags,
		 wstore__durable *d, const char **base);
/* rmdir the directories of key left empty, deepest first, up to but not
 * including the root. */
void fs_remove_empty_dirs(file_backend *fb, const char *key);

/* ---- file_whole.c: one data file per checkpoint file -------------------- */

/* "data-" and a chunk size of up to 20 digits. */
#define FS_DATA_NAME_MAX 32

/* A chunk key "weight/models/<ckpt>/files/<ph>/chunks/<i>": 1 with
 * *dir_len the length of "weight/models/<ckpt>/files/<ph>" and *idx = i;
 * else 0. */
int fs_chunk_key(const char *key, size_t *dir_len, uint64_t *idx);
/* "data-<cs>" into name (FS_DATA_NAME_MAX bytes). */
void fs_data_name(char *name, uint64_t cs);
/* The chunk size a data file's name gives ("data-<cs>", cs > 0, decimal
 * without a leading zero), or 0 for any other name. */
uint64_t fs_data_cs(const char *name);
/*
 * The data file of the <ph> directory open as phfd (not consumed; read
 * through a descriptor of its own): 0 with its name (FS_DATA_NAME_MAX)
 * and chunk size, 1 when there is none, WSTORE_ECORRUPT naming dir (the
 * directory's key, for the message) when there are two, -errno when the
 * directory cannot be read.
 */
int fs_find_data(int phfd, const char *dir, char *name, uint64_t *cs);
/* Chunk i of a data file of chunk size cs and size bytes: its range
 * [*off, *off + *len).  0, or -ENOENT when i * cs >= size. */
int fs_chunk_range(uint64_t cs, uint64_t size, uint64_t i, uint64_t *off,
		   uint64_t *len);

/* A value opened for reading: its bytes are [off, off + len) of fd; whole
 * when that is all of fd (every value but a chunk of a data file holding
 * more than that chunk). */
typedef struct fs_value {
	int fd;
	uint64_t off, len;
	int whole;
} fs_value;

/* Open key's value (both layouts for chunk keys, docs/format.md "The
 * embedded file store"), no symlink followed: 0 with v->fd owned by the
 * caller, or a code with the last error set (WSTORE_ENOTFOUND for a
 * missing key). */
int fs_open_value(file_backend *fb, const char *key, fs_value *v);
/* remove() of a chunk key, either layout: 0, WSTORE_ENOTFOUND, or a
 * code. */
int fs_remove_chunk(file_backend *fb, const char *key, size_t dir_len,
		    uint64_t idx);
/* The write side: the callbacks begin_file, commit_file, abort_file. */
int fs_begin_file(wstore_backend *b, const char *file_key, uint64_t cs,
		  int *out_fd, void **out_handle);
int fs_commit_file(wstore_backend *b, void *handle, uint64_t size);
void fs_abort_file(wstore_backend *b, void *handle);

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
