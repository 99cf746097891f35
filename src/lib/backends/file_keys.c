/*
 * file_keys.c - the file store's keys and the way from a key to its file:
 * which keys are valid (so that none can leave the root or name one of
 * the store's own dot files), the directory of a key reached without
 * following a symlink, and the wording of the errors on the way; temp
 * files beside a key and the removal of directories left empty.  See
 * file.c for the layout.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "file.h"

/* 1 if key is a valid key, else 0; the rules are those at the top of
 * file.c. */
int fs_key_ok(const char *key)
{
	const char *seg = key;

	if (!key || !*key || *key == '/')
		return 0;
	for (const char *p = key;; p++) {
		if (*p == '/' || *p == '\0') {
			size_t n = (size_t)(p - seg);

			if (n == 0 || *seg == '.')
				return 0; /* covers "." and ".." */
			if (*p == '\0')
				return 1;
			seg = p + 1;
		} else if ((unsigned char)*p < 0x20 ||
			   (unsigned char)*p >= 0x7f) {
			return 0;
		}
	}
}

int fs_check_key(const char *key)
{
	if (fs_key_ok(key))
		return 0;
	return wstore_backend_error(WSTORE_EINVAL, "invalid key '%s'",
				    key ? key : "(null)");
}

/* Missing, a directory, a path through a file or through a symlink
 * (never followed): the key does not exist. */
int fs_is_missing(int err)
{
	return err == ENOENT || err == ENOTDIR || err == EISDIR || err == ELOOP;
}

int fs_os_error(file_backend *fb, int err, const char *verb, const char *key)
{
	if (fs_is_missing(err))
		return wstore_backend_error(
			WSTORE_ENOTFOUND, "no key '%s' in '%s'", key, fb->root);
	return wstore__errc(-err, "cannot %s '%s' in '%s'", verb, key,
			    fb->root);
}

/* Why a write of key failed: a symlink on its way is named as such. */
int fs_write_error(file_backend *fb, int err, const char *key)
{
	if (err == ELOOP)
		return wstore__err(-ELOOP,
				   "cannot write '%s' in '%s': a symlink "
				   "inside the store is on its path (wstore "
				   "never follows one)",
				   key, fb->root);
	return wstore__errc(-err, "cannot write '%s' in '%s'", key, fb->root);
}

/*
 * The directory holding key's last segment, reached from the root one
 * segment at a time with O_NOFOLLOW (wstore__nofollow_parent): a symlink
 * planted inside the store is an error (ELOOP), never a way out of it.
 * With create, missing directories are made; with create 2 (a durable
 * write) each new one's parent is fsync'ed so the entry survives a crash
 * (plain puts leave that to file_sync, as for their data: syncfs covers
 * the entries too).  Returns the fd or -errno; *base is key's last
 * segment.  The root itself is the caller's path: it may be a symlink.
 */
int fs_open_key_dir(file_backend *fb, const char *key, int create,
		    const char **base)
{
	unsigned flags = (create ? WSTORE__NOFOLLOW_CREATE : 0) |
			 (create > 1 ? WSTORE__NOFOLLOW_SYNC : 0);
	int root = open(fb->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
	size_t at;

	if (root < 0)
		return -errno;
	fd = wstore__nofollow_parent(root, key, flags, &at, NULL);
	if (fd != root)
		close(root);
	if (fd >= 0)
		*base = key + at;
	return fd;
}

/* Attempts at recreating directories that a concurrent remove deleted. */
#define MKDIR_RETRIES 32

/*
 * Create and open a temp file (durable.c, the store's ".tmp-" form) in
 * the directory of key, opened as d->dirfd, which the caller closes (-1 on
 * failure).  Recreates the parent directories as often as a concurrent
 * remove deletes them.  Returns 0 or an errno value.
 */
int fs_open_temp(file_backend *fb, const char *key, unsigned flags,
		 wstore__durable *d, const char **base)
{
	int dfd = -1, err = ENOENT;

	for (int i = 0; i < MKDIR_RETRIES; i++) {
		if (dfd >= 0)
			close(dfd);
		/* a durable write fsyncs the directories it makes too */
		if ((dfd = fs_open_key_dir(
			     fb, key, flags & WSTORE__DURABLE_NOSYNC ? 1 : 2,
			     base)) < 0) {
			err = -dfd;
			if (err == ENOENT)
				continue;
			break;
		}
		err = -wstore__durable_open_flags(d, dfd, *base, 0644, flags,
						  key);
		if (!err)
			return 0;
		/* ENOENT: a remove took the directory away; walk again */
		if (err != ENOENT)
			break;
	}
	if (dfd >= 0)
		close(dfd);
	d->dirfd = -1;
	return err;
}

/*
 * Unlinks without fsync'ing the directory: a removal lost in a crash only
 * leaves garbage that delete or gc reclaims, and deletes of large
 * checkpoints remove thousands of chunks.
 */
/* rmdir the directories of key left empty, deepest first, up to but not
 * including the root; each reached as fs_open_key_dir does. */
void fs_remove_empty_dirs(file_backend *fb, const char *key)
{
	char dir[PATH_MAX];
	const char *base;
	char *slash;
	int dfd, rc;

	snprintf(dir, sizeof(dir), "%s", key);
	while ((slash = strrchr(dir, '/'))) {
		*slash = '\0';
		if ((dfd = fs_open_key_dir(fb, dir, 0, &base)) < 0)
			break;
		rc = unlinkat(dfd, base, AT_REMOVEDIR);
		close(dfd);
		if (rc < 0)
			break; /* ENOTEMPTY, EEXIST, ENOENT: someone's there */
	}
}
