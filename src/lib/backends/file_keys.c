/*
 * file_keys.c - the file store's keys and the way from a key to its file:
 * which keys are valid (so that none can leave the root or name one of
 * the store's own dot files), the directory of a key reached without
 * following a symlink, and the wording of the errors on the way.  See
 * file.c for the layout.
 */
#include <errno.h>
#include <fcntl.h>
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
