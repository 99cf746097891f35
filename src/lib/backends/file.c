/*
 * file.c - the embedded store: a directory with one file per key.
 *
 * Layout: key "a/b/c" is the regular file <root>/a/b/c.  Keys are
 * '/'-separated printable ASCII with no empty, "." or ".." segment and no
 * segment starting with '.', so a key can never escape the root and never
 * names one of the backend's own dot files:
 *   <root>/.../.tmp-<base>-<pid>-<rand>   a put in progress (or abandoned)
 *   <root>/.locks/<sha256 hex of key>     flock(2) files for update()
 *
 * Invariants:
 *  - A reader sees either the old or the new value of a key, never a
 *    partial one: values are written to a temp file in the destination
 *    directory, then published with rename(2) (put, upsert) or link(2)
 *    (put_new, which must not clobber), by the core's durable-write
 *    helper (wstore__durable_*, declared in helpers.h).  upsert, put_new
 *    and update fsync the file and its directory before returning; put
 *    leaves that to sync() (syncfs), which import calls once before it
 *    publishes a manifest.  Every failure path removes the temp file.
 *  - Directories exist only while they hold something: remove() rmdir's
 *    empty parents.  A put racing with that rmdir sees ENOENT when it
 *    creates its temp file and recreates the directories; once the temp
 *    file exists its directory cannot be removed (ENOTEMPTY).
 *  - update() serialises writers of one key across threads and processes
 *    with an exclusive flock on the key's lock file; lock files are never
 *    removed, since unlinking a lock file races with its next user.
 *
 * The backend itself holds no mutable state beyond its root path, so every
 * callback is thread safe without a mutex.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

/* Values at least this large start their writeback when put. */
#define WRITEBACK_MIN (1u << 20)

/* Attempts at recreating directories that a concurrent remove deleted. */
#define MKDIR_RETRIES 32

typedef struct file_backend {
	wstore_backend pub;
	char *root; /* absolute, no trailing '/' */
} file_backend;

static file_backend *fb_of(wstore_backend *b)
{
	return (file_backend *)b;
}

/* ---- keys and paths ---------------------------------------------------- */

/* 0 if key is a valid key; the rules are those in the file comment. */
static int key_ok(const char *key)
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

static int check_key(const char *key)
{
	if (key_ok(key))
		return 0;
	return wstore_backend_error(WSTORE_EINVAL, "invalid key '%s'",
				    key ? key : "(null)");
}

/* Missing, a directory, a path through a file or through a symlink
 * (never followed): the key does not exist. */
static int is_missing(int err)
{
	return err == ENOENT || err == ENOTDIR || err == EISDIR || err == ELOOP;
}

static int os_error(file_backend *fb, int err, const char *verb,
		    const char *key)
{
	if (is_missing(err))
		return wstore_backend_error(
			WSTORE_ENOTFOUND, "no key '%s' in '%s'", key, fb->root);
	return wstore__errc(-err, "cannot %s '%s' in '%s'", verb, key,
			    fb->root);
}

/* Why a write of key failed: a symlink on its way is named as such. */
static int write_error(file_backend *fb, int err, const char *key)
{
	if (err == ELOOP)
		return wstore__err(-ELOOP,
				   "cannot write '%s' in '%s': a symlink "
				   "inside the store is on its path (wstore "
				   "never follows one)",
				   key, fb->root);
	return wstore__errc(-err, "cannot write '%s' in '%s'", key, fb->root);
}

/* openat of directory name under fd, never following a symlink; a
 * symlink (or anything but a directory) there fails with ELOOP. */
static int open_subdir(int fd, const char *name)
{
	struct stat st;
	int sub = openat(fd, name,
			 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (sub < 0 && (errno == ENOTDIR || errno == ELOOP) &&
	    fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		errno = ELOOP;
	return sub;
}

/*
 * The directory holding key's last segment, reached from the root one
 * segment at a time with O_NOFOLLOW: a symlink planted inside the store
 * is an error (ELOOP), never a way out of it.  With create, missing
 * directories are made; with create 2 (a durable write) each new one's
 * parent is fsync'ed so the entry survives a crash (plain puts leave that
 * to file_sync, as for their data: syncfs covers the entries too).
 * Returns the fd or -errno; *base is key's last segment.  The root itself
 * is the caller's path: it may be a symlink.
 */
static int open_key_dir(file_backend *fb, const char *key, int create,
			const char **base)
{
	char name[NAME_MAX + 1];
	const char *seg = key, *slash;
	int fd = open(fb->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	while ((slash = strchr(seg, '/'))) {
		size_t n = (size_t)(slash - seg);
		int sub;

		if (n > NAME_MAX) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(name, seg, n);
		name[n] = '\0';
		sub = open_subdir(fd, name);
		if (sub < 0 && errno == ENOENT && create) {
			if (mkdirat(fd, name, 0755) == 0) {
				if (create > 1)
					fsync(fd);
			} else if (errno != EEXIST)
				goto fail;
			sub = open_subdir(fd, name);
		}
		if (sub < 0)
			goto fail;
		close(fd);
		fd = sub;
		seg = slash + 1;
	}
	*base = seg;
	return fd;
fail:
	err = errno;
	close(fd);
	return -err;
}

/* ---- low-level file helpers -------------------------------------------- */

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read up to len bytes at off; *out_n short only at end of file. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off, size_t *out_n)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n =
			pread(fd, p + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*out_n = done;
	return 0;
}

/* ---- put ----------------------------------------------------------------- */

/*
 * Create and open a temp file (durable.c, the store's ".tmp-" form) in
 * the directory of key, opened as d->dirfd, which the caller closes (-1 on
 * failure).  Recreates the parent directories as often as a concurrent
 * remove deletes them.  Returns 0 or an errno value.
 */
static int open_temp(file_backend *fb, const char *key, unsigned flags,
		     wstore__durable *d, const char **base)
{
	int dfd = -1, err = ENOENT;

	for (int i = 0; i < MKDIR_RETRIES; i++) {
		if (dfd >= 0)
			close(dfd);
		/* a durable write fsyncs the directories it makes too */
		if ((dfd = open_key_dir(fb, key,
					flags & WSTORE__DURABLE_NOSYNC ? 1 : 2,
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

/* A value to put: whole in data, or piece by piece from fill. */
struct source {
	const void *data; /* the value, or NULL: fill produces it */
	uint64_t len;
	wstore_fill_fn fill;
	void *ctx;
	int fill_err; /* what fill returned, if it failed */
};

/* Write src's bytes to fd; 0 or an errno value (EIO if fill failed). */
static int write_source(int fd, struct source *src)
{
	uint64_t done = 0;

	if (src->data)
		return write_all(fd, src->data, (size_t)src->len);
	while (done < src->len) {
		const void *p = NULL;
		size_t n = 0;
		int rc = src->fill(src->ctx, &p, &n);

		if (rc == 0 && (n == 0 || n > src->len - done))
			rc = wstore_backend_error(-EIO, "bad piece length");
		if (rc < 0) {
			src->fill_err = rc;
			return EIO;
		}
		if ((rc = write_all(fd, p, n)))
			return rc;
		done += n;
	}
	return 0;
}

/*
 * The put path: a temp file in key's directory, then rename over key
 * (clobber) or link to it (no clobber, EEXIST when it exists); either
 * replaces or refuses a symlink at key, never follows it.  Not durable:
 * the data and the directory entry reach the disk at the next file_sync()
 * (chunks: import syncs once before it publishes the manifest, instead of
 * paying two fsyncs per chunk).  Every failure path removes the temp file.
 * Returns 0 or an errno value.
 */
static int publish_src(file_backend *fb, const char *key, struct source *src,
		       int clobber, int durable)
{
	unsigned flags = WSTORE__DURABLE_KEY_TEMP | WSTORE__DURABLE_ANY_TARGET |
			 (clobber ? 0 : WSTORE__DURABLE_NOREPLACE) |
			 (durable ? 0 : WSTORE__DURABLE_NOSYNC);
	wstore__durable d = { .fd = -1 };
	const char *base;
	uint64_t len = src->len;
	int dfd, err = open_temp(fb, key, flags, &d, &base);

	if (err)
		return err;
	dfd = d.dirfd;
	err = write_source(d.fd, src);
	/* not durable (chunks): start writeback now, so the disk writes
	 * overlap the rest of the import instead of all waiting for the
	 * sync before its manifest is published */
	if (!err && !durable && len >= WRITEBACK_MIN)
		sync_file_range(d.fd, 0, (off_t)len, SYNC_FILE_RANGE_WRITE);
	if (err)
		wstore__durable_abort(&d);
	else
		err = -wstore__durable_commit(&d, base, key);
	close(dfd);
	return err;
}

static int publish(file_backend *fb, const char *key, const void *data,
		   size_t len, int clobber, int durable)
{
	struct source src = { data ? data : "", len, NULL, NULL, 0 };

	return publish_src(fb, key, &src, clobber, durable);
}

static int put_common(wstore_backend *b, const char *key, const void *data,
		      size_t len, int durable)
{
	file_backend *fb = fb_of(b);
	int rc, err;

	if ((rc = check_key(key)))
		return rc;
	err = publish(fb, key, data, len, 1, durable);
	if (err)
		return write_error(fb, err, key);
	return 0;
}

static int file_put_stream(wstore_backend *b, const char *key, uint64_t len,
			   wstore_fill_fn fill, void *ctx)
{
	file_backend *fb = fb_of(b);
	struct source src = { NULL, len, fill, ctx, 0 };
	int rc, err;

	if ((rc = check_key(key)))
		return rc;
	err = publish_src(fb, key, &src, 1, 0);
	if (src.fill_err)
		return src.fill_err;
	if (err)
		return write_error(fb, err, key);
	return 0;
}

/* put: durable at the next sync; upsert (manifests, indexes): at once */
static int file_put(wstore_backend *b, const char *key, const void *data,
		    size_t len)
{
	return put_common(b, key, data, len, 0);
}

static int file_upsert(wstore_backend *b, const char *key, const void *data,
		       size_t len)
{
	return put_common(b, key, data, len, 1);
}

/* Every put so far reaches the disk: one syncfs for the filesystem. */
static int file_sync(wstore_backend *b)
{
	file_backend *fb = fb_of(b);
	int fd = open(fb->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0 || syncfs(fd) < 0)
		rc = wstore__errc(-errno, "cannot sync file store '%s'",
				  fb->root);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Room on the store's file system, as an unprivileged writer sees it. */
static int file_space(wstore_backend *b, uint64_t *out_capacity,
		      uint64_t *out_free)
{
	file_backend *fb = fb_of(b);
	struct statvfs st;

	if (statvfs(fb->root, &st) < 0)
		return wstore__errc(-errno, "cannot statvfs file store '%s'",
				    fb->root);
	*out_capacity = (uint64_t)st.f_blocks * st.f_frsize;
	*out_free = (uint64_t)st.f_bavail * st.f_frsize;
	return 0;
}

static int file_put_new(wstore_backend *b, const char *key, const void *data,
			size_t len)
{
	file_backend *fb = fb_of(b);
	int rc, err;

	if ((rc = check_key(key)))
		return rc;
	err = publish(fb, key, data, len, 0, 1);
	if (err == EEXIST)
		return wstore_backend_error(WSTORE_EEXISTS,
					    "key '%s' already exists in '%s'",
					    key, fb->root);
	if (err)
		return write_error(fb, err, key);
	return 0;
}

/* ---- get ----------------------------------------------------------------- */

/* Open key's file for reading, reached without following any symlink
 * (open_key_dir, then O_NOFOLLOW): returns the fd or -errno. */
static int open_key(file_backend *fb, const char *key)
{
	const char *base;
	int dfd = open_key_dir(fb, key, 0, &base), fd, err;

	if (dfd < 0)
		return dfd;
	fd = openat(dfd, base, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	err = errno;
	close(dfd);
	return fd < 0 ? -err : fd;
}

/* Open key's file for reading; fails with ENOTFOUND unless regular. */
static int open_value(file_backend *fb, const char *key, struct stat *st)
{
	int rc, fd;

	if ((rc = check_key(key)))
		return rc;
	fd = open_key(fb, key);
	if (fd < 0)
		return os_error(fb, -fd, "read", key);
	if (fstat(fd, st) < 0) {
		int err = errno;

		close(fd);
		return os_error(fb, err, "read", key);
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return os_error(fb, ENOENT, "read", key);
	}
	return fd;
}

static int file_get(wstore_backend *b, const char *key, void *buf, size_t cap,
		    size_t *out_len)
{
	file_backend *fb = fb_of(b);
	struct stat st;
	size_t n = 0;
	int fd = open_value(fb, key, &st), err;

	if (fd < 0)
		return fd;
	*out_len = (size_t)st.st_size;
	if ((uint64_t)st.st_size > cap) {
		close(fd);
		return wstore_backend_error(WSTORE_ERANGE,
					    "value of '%s' is %llu bytes, "
					    "buffer %zu",
					    key, (unsigned long long)st.st_size,
					    cap);
	}
	err = pread_all(fd, buf, (size_t)st.st_size, 0, &n);
	close(fd);
	if (err)
		return wstore__errc(-err, "cannot read '%s' in '%s'", key,
				    fb->root);
	/* files are replaced, never rewritten in place: n < size only if
	 * someone outside wstore truncated it; report what is there */
	*out_len = n;
	return 0;
}

static int file_get_range(wstore_backend *b, const char *key, uint64_t off,
			  void *buf, size_t len, size_t *out_n)
{
	file_backend *fb = fb_of(b);
	struct stat st;
	int fd = open_value(fb, key, &st), err;

	if (fd < 0)
		return fd;
	err = pread_all(fd, buf, len, off, out_n);
	close(fd);
	if (err)
		return wstore__errc(-err, "cannot read '%s' in '%s'", key,
				    fb->root);
	return 0;
}

/* The value's file itself, for zero-copy readers.  A symlink planted in
 * the store is not a value (ELOOP reads as a missing key). */
static int file_open_fd(wstore_backend *b, const char *key, int *out_fd)
{
	struct stat st;
	int fd;

	*out_fd = -1;
	fd = open_value(fb_of(b), key, &st);
	if (fd < 0)
		return fd;
	*out_fd = fd;
	return 0;
}

/* Whole value of key, malloc'ed (NULL for an empty value). */
static int read_alloc(file_backend *fb, const char *key, void **out,
		      size_t *out_len)
{
	struct stat st;
	int fd = open_value(fb, key, &st), err;
	char *buf;

	*out = NULL;
	*out_len = 0;
	if (fd < 0)
		return fd;
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		close(fd);
		return wstore__errc(-ENOMEM, "cannot read '%s'", key);
	}
	err = pread_all(fd, buf, (size_t)st.st_size, 0, out_len);
	close(fd);
	if (err) {
		free(buf);
		return wstore__errc(-err, "cannot read '%s' in '%s'", key,
				    fb->root);
	}
	*out = buf;
	return 0;
}

static int file_size(wstore_backend *b, const char *key, uint64_t *out)
{
	file_backend *fb = fb_of(b);
	const char *base;
	struct stat st;
	int rc, dfd, err = 0;

	if ((rc = check_key(key)))
		return rc;
	if ((dfd = open_key_dir(fb, key, 0, &base)) < 0)
		return os_error(fb, -dfd, "stat", key);
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		err = errno;
	else if (!S_ISREG(st.st_mode))
		err = ENOENT;
	close(dfd);
	if (err)
		return os_error(fb, err, "stat", key);
	*out = (uint64_t)st.st_size;
	return 0;
}

/* ---- remove ------------------------------------------------------------ */

/*
 * Unlinks without fsync'ing the directory: a removal lost in a crash only
 * leaves garbage that delete or gc reclaims, and deletes of large
 * checkpoints remove thousands of chunks.
 */
/* rmdir the directories of key left empty, deepest first, up to but not
 * including the root; each reached as open_key_dir does. */
static void remove_empty_dirs(file_backend *fb, const char *key)
{
	char dir[PATH_MAX];
	const char *base;
	char *slash;
	int dfd, rc;

	snprintf(dir, sizeof(dir), "%s", key);
	while ((slash = strrchr(dir, '/'))) {
		*slash = '\0';
		if ((dfd = open_key_dir(fb, dir, 0, &base)) < 0)
			break;
		rc = unlinkat(dfd, base, AT_REMOVEDIR);
		close(dfd);
		if (rc < 0)
			break; /* ENOTEMPTY, EEXIST, ENOENT: someone's there */
	}
}

static int file_remove(wstore_backend *b, const char *key, int force)
{
	file_backend *fb = fb_of(b);
	const char *base;
	int rc, dfd, err = 0;

	(void)force; /* no leases here */
	if ((rc = check_key(key)))
		return rc;
	/* a symlink on the way: nothing of the store's is there */
	if ((dfd = open_key_dir(fb, key, 0, &base)) < 0)
		return os_error(fb, -dfd, "remove", key);
	/* unlinkat never follows: a symlink at key goes, not its target */
	if (unlinkat(dfd, base, 0) < 0)
		err = errno;
	close(dfd);
	if (err)
		return os_error(fb, err, "remove", key);
	remove_empty_dirs(fb, key);
	return 0;
}

/* ---- list -------------------------------------------------------------- */

typedef struct list_ctx {
	const char *prefix;
	size_t plen;
	wstore_list_fn fn;
	void *ctx;
	int err; /* errno of a failed directory read */
	char key[PATH_MAX];
} list_ctx;

/* Could a key under directory key[0..len) ("a/b/") start with prefix? */
static int dir_may_match(const list_ctx *lc, size_t len)
{
	size_t n = len < lc->plen ? len : lc->plen;

	return memcmp(lc->key, lc->prefix, n) == 0;
}

static int walk(list_ctx *lc, int dfd, size_t len);

/* Visit one entry of a directory (dfd) whose key prefix is key[0..len). */
static int visit(list_ctx *lc, int dfd, const struct dirent *e, size_t len)
{
	size_t nlen = strlen(e->d_name);
	unsigned char type = e->d_type;
	struct stat st;
	int sub;

	if (e->d_name[0] == '.' || len + nlen + 2 > sizeof(lc->key))
		return 0;
	memcpy(lc->key + len, e->d_name, nlen + 1);
	if (type == DT_UNKNOWN) {
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return 0;
		type = S_ISREG(st.st_mode)   ? DT_REG
		       : S_ISDIR(st.st_mode) ? DT_DIR
					     : DT_UNKNOWN;
	}
	if (type == DT_REG) {
		if (len + nlen >= lc->plen &&
		    memcmp(lc->key, lc->prefix, lc->plen) == 0)
			return lc->fn(lc->key, lc->ctx);
		return 0;
	}
	if (type != DT_DIR)
		return 0;
	lc->key[len + nlen] = '/';
	lc->key[len + nlen + 1] = '\0';
	if (!dir_may_match(lc, len + nlen + 1))
		return 0;
	sub = openat(dfd, e->d_name,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* a directory removed under us holds nothing */
	if (sub < 0)
		return 0;
	return walk(lc, sub, len + nlen + 1);
}

/* Walk the directory open as dfd (consumed), whose key prefix is
 * key[0..len). */
static int walk(list_ctx *lc, int dfd, size_t len)
{
	DIR *d = fdopendir(dfd);
	int rc = 0;

	if (!d) {
		lc->err = errno;
		close(dfd);
		return -lc->err;
	}
	while (rc == 0) {
		struct dirent *e;

		errno = 0;
		e = readdir(d);
		if (!e) {
			if (errno) {
				lc->err = errno;
				rc = -errno;
			}
			break;
		}
		rc = visit(lc, dirfd(d), e, len);
	}
	closedir(d);
	return rc;
}

/*
 * Open the deepest directory the prefix names ("a/b/" for "a/b/c") and set
 * lc->key to its key prefix, of length *out_len.  Returns the fd,
 * NOTHING_TO_LIST when no key can start with prefix (the directory part is
 * missing or is not a valid key), or a negative code on error.
 */
#define NOTHING_TO_LIST INT_MIN

static int open_start(file_backend *fb, list_ctx *lc, size_t *out_len)
{
	const char *slash = strrchr(lc->prefix, '/');
	size_t dlen = slash ? (size_t)(slash - lc->prefix) + 1 : 0;
	const char *base;
	int dfd, fd, err;

	*out_len = dlen;
	if (dlen >= sizeof(lc->key) - 1)
		return NOTHING_TO_LIST;
	if (dlen) {
		memcpy(lc->key, lc->prefix, dlen - 1);
		lc->key[dlen - 1] = '\0';
		if (!key_ok(lc->key))
			return NOTHING_TO_LIST;
		lc->key[dlen - 1] = '/';
		lc->key[dlen] = '\0';
	}
	if (!dlen) {
		fd = open(fb->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		err = errno;
	} else {
		/* "a/b/" as a key "a/b/x": open_key_dir gives "a/b" */
		lc->key[dlen] = 'x';
		lc->key[dlen + 1] = '\0';
		dfd = open_key_dir(fb, lc->key, 0, &base);
		lc->key[dlen] = '\0';
		fd = dfd;
		err = dfd < 0 ? -dfd : 0;
	}
	if (fd >= 0)
		return fd;
	if (is_missing(err))
		return NOTHING_TO_LIST;
	return wstore__errc(-err, "cannot list '%s' in '%s'", lc->prefix,
			    fb->root);
}

static int file_list(wstore_backend *b, const char *prefix, wstore_list_fn fn,
		     void *ctx)
{
	file_backend *fb = fb_of(b);
	list_ctx *lc = calloc(1, sizeof(*lc));
	size_t dlen;
	int rc, dfd;

	if (!lc)
		return wstore__errc(-ENOMEM, "cannot list '%s'", fb->root);
	lc->prefix = prefix ? prefix : "";
	lc->plen = strlen(lc->prefix);
	lc->fn = fn;
	lc->ctx = ctx;
	dfd = open_start(fb, lc, &dlen);
	rc = dfd == NOTHING_TO_LIST ? 0 : dfd;
	if (dfd >= 0) {
		rc = walk(lc, dfd, dlen);
		if (lc->err)
			rc = wstore__errc(-lc->err, "cannot list '%s' in '%s'",
					  lc->prefix, fb->root);
	}
	free(lc);
	return rc;
}

/* ---- update ------------------------------------------------------------ */

/* Open (creating) and exclusively lock key's lock file; returns fd. */
static int lock_key(file_backend *fb, const char *key)
{
	char hex[65], path[PATH_MAX];
	int rfd, dfd = -1, fd = -1, err;

	wstore__sha256_hex_str(hex, key);
	snprintf(path, sizeof(path), "%s/.locks/%s", fb->root, hex);
	/* no symlink followed: not .locks, not the lock file */
	rfd = open(fb->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd >= 0 && (dfd = open_subdir(rfd, ".locks")) < 0 &&
	    errno == ENOENT) {
		if (mkdirat(rfd, ".locks", 0755) == 0 || errno == EEXIST)
			dfd = open_subdir(rfd, ".locks");
	}
	if (dfd >= 0)
		fd = openat(dfd, hex, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
			    0644);
	err = errno;
	if (rfd >= 0)
		close(rfd);
	if (dfd >= 0)
		close(dfd);
	if (fd < 0)
		return wstore__errc(-err, "cannot open lock of '%s' ('%s')",
				    key, path);
	err = wstore__flock_wait(fd);
	if (err < 0) {
		close(fd);
		return err == WSTORE_EBUSY || err == WSTORE_ECANCELED
			       ? wstore__err(err, "cannot lock '%s' ('%s'): %s",
					     key, path, wstore_last_error())
			       : wstore__errc(err, "cannot lock '%s' ('%s')",
					      key, path);
	}
	return fd;
}

static int file_update(wstore_backend *b, const char *key, wstore_update_fn fn,
		       void *ctx)
{
	file_backend *fb = fb_of(b);
	void *old = NULL, *nv = NULL;
	size_t old_len = 0, nl = 0;
	int rc, lfd;

	if ((rc = check_key(key)))
		return rc;
	lfd = lock_key(fb, key);
	if (lfd < 0)
		return lfd;
	rc = read_alloc(fb, key, &old, &old_len);
	if (rc == WSTORE_ENOTFOUND)
		rc = 0;
	if (rc == 0)
		rc = fn(&nv, &nl, old, old_len, ctx);
	if (rc == 0) {
		int err = publish(fb, key, nv, nl, 1, 1);

		if (err)
			rc = write_error(fb, err, key);
	} else if (rc > 0) {
		rc = 0; /* fn chose to leave the value as it is */
	}
	free(nv);
	free(old);
	close(lfd); /* releases the flock */
	return rc;
}

/* ---- construction ------------------------------------------------------ */

static void file_free(wstore_backend *b)
{
	if (!b)
		return;
	free(fb_of(b)->root);
	free(b);
}

/* mkdir -p of root (absolute or relative), mode 0755. */
static int make_root(const char *root)
{
	char buf[PATH_MAX];
	size_t n = strlen(root);

	if (n == 0 || n >= sizeof(buf))
		return n ? ENAMETOOLONG : ENOENT;
	memcpy(buf, root, n + 1);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			if (mkdir(buf, 0755) < 0 && errno != EEXIST)
				return errno;
			*p = c;
			if (!c)
				return 0;
		}
	}
}

static int open_root(char **out, const char *root, unsigned flags)
{
	struct stat st;
	int err = 0;

	if (!root || !*root)
		return wstore_backend_error(WSTORE_EINVAL,
					    "empty file store path");
	if ((flags & WSTORE_OPEN_CREATE) && !(flags & WSTORE_OPEN_READONLY))
		err = make_root(root);
	if (err == 0 && stat(root, &st) < 0) {
		err = errno;
		/* readers must not create a store: a mistyped path would
		 * otherwise list an empty one */
		if (err == ENOENT)
			return wstore__err(-ENOENT,
					   "file store '%s' does not exist",
					   root);
	}
	if (err == EEXIST || (err == 0 && !S_ISDIR(st.st_mode)))
		return wstore_backend_error(WSTORE_EINVAL,
					    "file store '%s' is not a "
					    "directory",
					    root);
	if (err)
		return wstore__errc(-err, "cannot create file store '%s'",
				    root);
	if (!(flags & WSTORE_OPEN_READONLY) && access(root, W_OK | X_OK) < 0)
		return wstore__errc(-errno, "file store '%s' is not writable",
				    root);
	if ((flags & WSTORE_OPEN_READONLY) && access(root, R_OK | X_OK) < 0)
		return wstore__errc(-errno, "file store '%s' is not readable",
				    root);
	*out = realpath(root, NULL);
	if (!*out)
		return wstore__errc(-errno, "cannot resolve file store '%s'",
				    root);
	return 0;
}

static int file_sweep_temps(wstore_backend *b, int64_t older_than, int dry_run,
			    size_t *out_n,
			    int (*keep)(const char *path, void *ctx),
			    void (*fn)(const char *path, uint64_t bytes,
				       int removed, void *ctx),
			    void *ctx);

int wstore_backend_file_new(wstore_backend **out, const char *root)
{
	return wstore_backend_file_open(out, root, WSTORE_OPEN_CREATE);
}

int wstore_backend_file_open(wstore_backend **out, const char *root,
			     unsigned flags)
{
	file_backend *fb;
	int rc;

	*out = NULL;
	fb = calloc(1, sizeof(*fb));
	if (!fb)
		return wstore__errc(-ENOMEM, "cannot open file store '%s'",
				    root ? root : "");
	rc = open_root(&fb->root, root, flags);
	if (rc) {
		free(fb);
		return rc;
	}
	fb->pub.version = WSTORE_BACKEND_VERSION;
	fb->pub.struct_size = sizeof(fb->pub);
	fb->pub.name = "file";
	fb->pub.flags = 0;
	fb->pub.put = file_put;
	fb->pub.upsert = file_upsert;
	fb->pub.sync = file_sync;
	fb->pub.put_new = file_put_new;
	fb->pub.get = file_get;
	fb->pub.get_range = file_get_range;
	fb->pub.size = file_size;
	fb->pub.remove = file_remove;
	fb->pub.list = file_list;
	fb->pub.update = file_update;
	fb->pub.free = file_free;
	fb->pub.sweep_temps = file_sweep_temps;
	fb->pub.open_fd = file_open_fd;
	fb->pub.put_stream = file_put_stream;
	fb->pub.space = file_space;
	*out = &fb->pub;
	return 0;
}

/* ---- stale temp files (gc) --------------------------------------------- */

/*
 * Temp files are invisible to list() (their names start with '.'), so gc
 * cannot find them through the backend interface; this walks the root for
 * them instead.  A put holds its temp file for the time it takes to write
 * and fsync one value, so one older than older_than seconds belongs to a
 * process that died (or to a clock far off: keep the grace period large).
 */
struct sweep {
	file_backend *fb;
	time_t cutoff;
	int dry_run;
	size_t n;
	int (*keep)(const char *path, void *ctx);
	void (*fn)(const char *path, uint64_t bytes, int removed, void *ctx);
	void *ctx;
	int err;
	char path[PATH_MAX];
};

static int sweep_dir(struct sweep *sw, int dfd, size_t len, int depth);

/* Is the writer of temp file name (".tmp-<base>-<pid>-<tag><n>", made by
 * open_temp through durable.c) a live process?  Then its put may be
 * running, whatever the file's age: the writer renames it when done.  One
 * that cannot be judged (another PID namespace or machine) gets the grace
 * period like a dead one's. */
static int temp_writer_live(const char *name)
{
	return wstore__tmp_writer_state(name, WSTORE__DURABLE_KEY_TEMP) ==
	       WSTORE__TMP_ALIVE;
}

/* One entry of the directory open as dfd, whose path is sw->path[0..len):
 * a real directory is swept (never a symlink: entries are looked at with
 * fstatat AT_SYMLINK_NOFOLLOW and directories opened with O_NOFOLLOW), an
 * old temp file removed with unlinkat.  Returns 1 if something was
 * removed at or below it. */
static int sweep_entry(struct sweep *sw, int dfd, size_t len, const char *name,
		       int depth)
{
	size_t nlen = strlen(name), rootlen = strlen(sw->fb->root);
	struct stat st;
	int removed = 0, sub;

	if (len + nlen + 2 > sizeof(sw->path))
		return 0;
	sw->path[len] = '/';
	memcpy(sw->path + len + 1, name, nlen + 1);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (S_ISDIR(st.st_mode)) {
		/* the flock files of update() live in <root>/.locks */
		if (name[0] == '.' || (sub = open_subdir(dfd, name)) < 0)
			return 0;
		removed = sweep_dir(sw, sub, len + 1 + nlen, depth + 1);
		/* drop a directory left empty, as remove() does */
		if (removed && !sw->dry_run)
			unlinkat(dfd, name, AT_REMOVEDIR);
		return removed;
	}
	if (!S_ISREG(st.st_mode) || strncmp(name, ".tmp-", 5) != 0 ||
	    st.st_mtime > sw->cutoff || temp_writer_live(name) ||
	    (sw->keep && sw->keep(sw->path + rootlen + 1, sw->ctx)))
		return 0;
	sw->n++;
	if (!sw->dry_run) {
		if (unlinkat(dfd, name, 0) == 0)
			removed = 1;
		else if (errno != ENOENT && !sw->err)
			sw->err = wstore__errc(-errno, "cannot remove '%s'",
					       sw->path);
	}
	if (sw->fn)
		sw->fn(sw->path + rootlen + 1, (uint64_t)st.st_size, removed,
		       sw->ctx);
	return removed;
}

/* Sweep the directory open as dfd (consumed), whose path is
 * sw->path[0..len); returns 1 if anything below it was removed. */
static int sweep_dir(struct sweep *sw, int dfd, size_t len, int depth)
{
	DIR *d;
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int removed = 0;

	if (depth > 64 || !(d = fdopendir(dfd))) {
		close(dfd);
		return 0;
	}
	/* read the names first: sweeping may rmdir below this directory */
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap ? cap * 2 : 16) *
							   sizeof(*names));

			if (!nn)
				break;
			names = nn;
			cap = cap ? cap * 2 : 16;
		}
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		removed |= sweep_entry(sw, dirfd(d), len, names[i], depth);
		free(names[i]);
	}
	closedir(d);
	free(names);
	return removed;
}

static int file_sweep_temps(wstore_backend *b, int64_t older_than, int dry_run,
			    size_t *out_n,
			    int (*keep)(const char *path, void *ctx),
			    void (*fn)(const char *path, uint64_t bytes,
				       int removed, void *ctx),
			    void *ctx)
{
	struct sweep *sw;
	int rc, fd;

	if (out_n)
		*out_n = 0;
	sw = calloc(1, sizeof(*sw));
	if (!sw)
		return -ENOMEM;
	sw->fb = fb_of(b);
	sw->cutoff = time(NULL) - (time_t)(older_than > 0 ? older_than : 0);
	sw->dry_run = dry_run;
	sw->keep = keep;
	sw->fn = fn;
	sw->ctx = ctx;
	snprintf(sw->path, sizeof(sw->path), "%s", sw->fb->root);
	fd = open(sw->fb->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		sweep_dir(sw, fd, strlen(sw->path), 0);
	else
		sw->err =
			wstore__errc(-errno, "cannot open '%s'", sw->fb->root);
	rc = sw->err;
	if (out_n)
		*out_n = sw->n;
	free(sw);
	return rc;
}
