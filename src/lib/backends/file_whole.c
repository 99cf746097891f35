/*
 * file_whole.c - the file store's two layouts of a checkpoint file's
 * chunks (docs/format.md, "The embedded file store"):
 *
 *   old:  <root>/weight/models/<ckpt>/files/<ph>/chunks/<i>   one file per
 *         chunk key (still read, never written any more)
 *   new:  <root>/weight/models/<ckpt>/files/<ph>/data-<cs>    one data file
 *         per checkpoint file, its bytes exactly the file's; chunk key
 *         .../chunks/<i> is its range [i*cs, min((i+1)*cs, size))
 *
 * A chunk key is looked up in the <ph> directory: its data-* file if there
 * is one (one readdir; two are corruption), else chunks/<i>.  When both
 * exist (a migration half done) they hold the same bytes and the data file
 * wins.  Every step is openat with O_NOFOLLOW from the directory above, as
 * for every other key (file_keys.c).
 *
 * The write side (begin_file, commit_file, abort_file): a data file is
 * written as a temp file ".tmp-data-<cs>-<pid>-<tag><n>" in its <ph>
 * directory and published by rename(2), so a reader that opened the data
 * file of an import keeps reading that import's bytes after a delete and
 * a new import of the id.  Its writer fdatasyncs it (the fd it wrote
 * through) before the rename: an I/O error of its writeback is reported
 * to that fd, where a later syncfs on a freshly opened one could miss it
 * (another process's sync may have collected it first).  See file.c for
 * the rest.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

/* ---- names -------------------------------------------------------------- */

/* Decimal digits only, 1 to 20 of them, no overflow: the value in *out. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - d) / 10)
			return 0;
		v = v * 10 + d;
	}
	*out = v;
	return 1;
}

int fs_chunk_key(const char *key, size_t *dir_len, uint64_t *idx)
{
	static const char pre[] = "weight/models/";
	const char *seg[8];
	size_t len[8], n = 0;
	const char *p = key + sizeof(pre) - 1, *s = p;

	if (strncmp(key, pre, sizeof(pre) - 1) != 0)
		return 0;
	/* <ckpt>/files/<ph>/chunks/<i>: five segments after the prefix */
	for (;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		if (n == 5)
			return 0;
		seg[n] = s;
		len[n++] = (size_t)(p - s);
		if (*p == '\0')
			break;
		s = p + 1;
	}
	if (n != 5 || len[0] == 0 || len[2] == 0 || len[1] != 5 ||
	    memcmp(seg[1], "files", 5) != 0 || len[3] != 6 ||
	    memcmp(seg[3], "chunks", 6) != 0 || !parse_u64(seg[4], len[4], idx))
		return 0;
	*dir_len = (size_t)(seg[3] - key) - 1;
	return 1;
}

void fs_data_name(char *name, uint64_t cs)
{
	snprintf(name, FS_DATA_NAME_MAX, "data-%" PRIu64, cs);
}

uint64_t fs_data_cs(const char *name)
{
	uint64_t cs = 0;

	if (strncmp(name, "data-", 5) != 0 || name[5] == '0' ||
	    !parse_u64(name + 5, strlen(name + 5), &cs))
		return 0;
	return cs;
}

int fs_chunk_range(uint64_t cs, uint64_t size, uint64_t i, uint64_t *off,
		   uint64_t *len)
{
	if (cs == 0 || i >= (size + cs - 1) / cs)
		return -ENOENT;
	*off = i * cs;
	*len = size - *off < cs ? size - *off : cs;
	return 0;
}

int fs_find_data(int phfd, const char *dir, char *name, uint64_t *cs)
{
	int fd = openat(phfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 1;
	struct dirent *e;
	DIR *d;

	if (fd < 0)
		return -errno;
	if (!(d = fdopendir(fd))) {
		rc = -errno;
		close(fd);
		return rc;
	}
	for (errno = 0; (e = readdir(d)); errno = 0) {
		uint64_t c = fs_data_cs(e->d_name);

		if (!c)
			continue;
		if (rc == 0) {
			rc = wstore_backend_error(
				WSTORE_ECORRUPT,
				"two data files in '%s' ('%s' and '%s')", dir,
				name, e->d_name);
			break;
		}
		/* fs_data_cs took it: at most 25 bytes */
		memcpy(name, e->d_name, strlen(e->d_name) + 1);
		*cs = c;
		rc = 0;
	}
	if (!e && errno)
		rc = -errno;
	closedir(d);
	return rc;
}

/* ---- reading ------------------------------------------------------------ */

/* The <ph> directory of a chunk key (key[0..dir_len)), reached without a
 * symlink: fd or -errno. */
static int open_ph_dir(file_backend *fb, const char *key, size_t dir_len)
{
	char k[PATH_MAX];
	const char *base;

	if (dir_len + sizeof("/chunks") > sizeof(k))
		return -ENAMETOOLONG;
	memcpy(k, key, dir_len);
	memcpy(k + dir_len, "/chunks", sizeof("/chunks"));
	return fs_open_key_dir(fb, k, 0, &base);
}

/* Open name in dfd read-only without following a symlink; a regular file
 * only: fd (its size in *size) or -errno (ENOENT for anything else). */
static int open_regular(int dfd, const char *name, uint64_t *size)
{
	struct stat st;
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), err;

	if (fd < 0)
		return -errno;
	err = fstat(fd, &st) < 0 ? errno : !S_ISREG(st.st_mode) ? ENOENT : 0;
	if (err) {
		close(fd);
		return -err;
	}
	*size = (uint64_t)st.st_size;
	return fd;
}

/* A chunk key's value: the range of the data file, else chunks/<i>. */
/* One look for chunk idx: in the data file, else as a chunk file. */
static int open_chunk_once(int phfd, const char *dir, const char *cname,
			   uint64_t idx, fs_value *v, int *out_fd)
{
	char name[FS_DATA_NAME_MAX];
	uint64_t cs = 0, size = 0;
	int rc = fs_find_data(phfd, dir, name, &cs), fd = -1, sub;

	if (rc == 0) {
		fd = open_regular(phfd, name, &size);
		if (fd >= 0 && fs_chunk_range(cs, size, idx, &v->off, &v->len))
			rc = -ENOENT;
		else if (fd < 0)
			rc = fd;
		v->whole = rc == 0 && v->off == 0 && v->len == size;
	} else if (rc == 1) {
		sub = wstore__nofollow_subdir(phfd, "chunks");
		rc = sub < 0 ? -errno : 0;
		if (sub >= 0) {
			fd = open_regular(sub, cname, &size);
			rc = fd < 0 ? fd : 0;
			close(sub);
		}
		v->off = 0;
		v->len = size;
		v->whole = 1;
	}
	*out_fd = fd;
	return rc;
}

static int open_chunk(file_backend *fb, const char *key, size_t dir_len,
		      uint64_t idx, fs_value *v)
{
	char dir[PATH_MAX];
	int phfd = open_ph_dir(fb, key, dir_len), rc, fd = -1;

	if (phfd < 0)
		return fs_os_error(fb, -phfd, "read", key);
	snprintf(dir, sizeof(dir), "%.*s", (int)dir_len, key);
	rc = open_chunk_once(phfd, dir, key + dir_len + 8, idx, v, &fd);
	/* no data file, and then no chunk file either: a migration
	 * (file_migrate.c) may have published the data file and removed
	 * the chunk files between the two looks; it publishes first, so
	 * a second look finds the chunk in one layout or the other */
	if (rc == -ENOENT && fd < 0)
		rc = open_chunk_once(phfd, dir, key + dir_len + 8, idx, v, &fd);
	close(phfd);
	if (rc < 0 && fd >= 0)
		close(fd);
	if (rc == WSTORE_ECORRUPT)
		return rc;
	if (rc < 0)
		return fs_os_error(fb, -rc, "read", key);
	v->fd = fd;
	return 0;
}

int fs_open_value(file_backend *fb, const char *key, fs_value *v)
{
	const char *base;
	size_t dir_len;
	uint64_t idx, size = 0;
	int rc, dfd, fd;

	v->fd = -1;
	if ((rc = fs_check_key(key)))
		return rc;
	if (fs_chunk_key(key, &dir_len, &idx))
		return open_chunk(fb, key, dir_len, idx, v);
	if ((dfd = fs_open_key_dir(fb, key, 0, &base)) < 0)
		return fs_os_error(fb, -dfd, "read", key);
	fd = open_regular(dfd, base, &size);
	close(dfd);
	if (fd < 0)
		return fs_os_error(fb, -fd, "read", key);
	*v = (fs_value){ fd, 0, size, 1 };
	return 0;
}

/* ---- remove ------------------------------------------------------------- */

/* The data file of the <ph> directory phfd, if it holds chunk idx (or is
 * not a regular file: a symlink goes itself, never its target). */
static int unlink_data(int phfd, const char *dir, uint64_t idx, int *removed)
{
	char name[FS_DATA_NAME_MAX];
	uint64_t cs = 0, off, len;
	struct stat st;
	int rc = fs_find_data(phfd, dir, name, &cs);

	if (rc != 0)
		return rc == 1 ? 0 : rc;
	if (fstatat(phfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISREG(st.st_mode) &&
	    fs_chunk_range(cs, (uint64_t)st.st_size, idx, &off, &len))
		return 0;
	if (unlinkat(phfd, name, 0) == 0)
		*removed = 1;
	else if (errno != ENOENT)
		return -errno;
	return 0;
}

int fs_remove_chunk(file_backend *fb, const char *key, size_t dir_len,
		    uint64_t idx)
{
	char dir[PATH_MAX];
	int phfd = open_ph_dir(fb, key, dir_len), removed = 0, rc, sub;

	if (phfd < 0)
		return fs_os_error(fb, -phfd, "remove", key);
	snprintf(dir, sizeof(dir), "%.*s", (int)dir_len, key);
	/* both layouts: a migration half done has the chunk in each */
	rc = unlink_data(phfd, dir, idx, &removed);
	if (rc == 0 && (sub = wstore__nofollow_subdir(phfd, "chunks")) >= 0) {
		if (unlinkat(sub, key + dir_len + 8, 0) == 0)
			removed = 1;
		else if (!fs_is_missing(errno))
			rc = -errno;
		close(sub);
		unlinkat(phfd, "chunks", AT_REMOVEDIR);
	}
	close(phfd);
	if (rc == WSTORE_ECORRUPT)
		return rc;
	if (rc < 0)
		return fs_os_error(fb, -rc, "remove", key);
	if (!removed)
		return fs_os_error(fb, ENOENT, "remove", key);
	snprintf(dir, sizeof(dir), "%.*s/chunks", (int)dir_len, key);
	fs_remove_empty_dirs(fb, dir);
	return 0;
}

/* ---- writing ------------------------------------------------------------ */

/* A data file being written (begin_file's handle). */
struct whole {
	wstore__durable d; /* the temp file in its <ph> directory */
	char name[FS_DATA_NAME_MAX];
	char key[PATH_MAX]; /* "<file key>/data-<cs>", for messages */
};

int fs_begin_file(wstore_backend *b, const char *file_key, uint64_t cs,
		  int *out_fd, void **out_handle)
{
	file_backend *fb = fb_of(b);
	unsigned flags = WSTORE__DURABLE_KEY_TEMP | WSTORE__DURABLE_ANY_TARGET |
			 WSTORE__DURABLE_NOSYNC;
	struct whole *h;
	const char *base;
	int rc, err;

	*out_fd = -1;
	*out_handle = NULL;
	if ((rc = fs_check_key(file_key)))
		return rc;
	if (cs == 0)
		return wstore_backend_error(WSTORE_EINVAL,
					    "chunk size 0 for '%s'", file_key);
	if (!(h = calloc(1, sizeof(*h))))
		return wstore__errc(-ENOMEM, "cannot write '%s'", file_key);
	fs_data_name(h->name, cs);
	if ((size_t)snprintf(h->key, sizeof(h->key), "%s/%s", file_key,
			     h->name) >= sizeof(h->key)) {
		free(h);
		return wstore_backend_error(WSTORE_EINVAL, "key '%s' too long",
					    file_key);
	}
	h->d.fd = -1;
	err = fs_open_temp(fb, h->key, flags, &h->d, &base);
	if (err) {
		free(h);
		return fs_write_error(fb, err, file_key);
	}
	*out_fd = h->d.fd;
	*out_handle = h;
	return 0;
}

/* Remove every data file of the directory but keep (a killed import's
 * whose chunk keys were reclaimed one by one: only one may stay). */
static void unlink_other_data(int dfd, const char *keep)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *e;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (fs_data_cs(e->d_name) && strcmp(e->d_name, keep) != 0)
			unlinkat(dfd, e->d_name, 0);
	closedir(d);
}

int fs_commit_file(wstore_backend *b, void *handle, uint64_t size)
{
	file_backend *fb = fb_of(b);
	struct whole *h = handle;
	int dfd = h->d.dirfd, rc = 0;
	struct stat st;

	if (fstat(h->d.fd, &st) < 0)
		rc = wstore__errc(-errno, "cannot write '%s' in '%s'", h->key,
				  fb->root);
	else if ((uint64_t)st.st_size != size)
		rc = wstore__err(-EIO,
				 "cannot write '%s' in '%s': it holds %llu "
				 "bytes, expected %llu",
				 h->key, fb->root,
				 (unsigned long long)st.st_size,
				 (unsigned long long)size);
	/* its bytes on the disk, and any error of their writeback ours */
	if (rc == 0 && fdatasync(h->d.fd) < 0)
		rc = wstore__errc(-errno, "cannot write '%s' in '%s'", h->key,
				  fb->root);
	if (rc < 0) {
		wstore__durable_abort(&h->d);
	} else {
		unlink_other_data(dfd, h->name);
		rc = wstore__durable_commit(&h->d, h->name, h->key);
		if (rc < 0)
			rc = fs_write_error(fb, -rc, h->key);
	}
	close(dfd);
	free(h);
	return rc;
}

void fs_abort_file(wstore_backend *b, void *handle)
{
	struct whole *h = handle;

	(void)b;
	if (!h)
		return;
	wstore__durable_abort(&h->d);
	close(h->d.dirfd);
	free(h);
}
