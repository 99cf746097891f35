/*
 * file.c - the embedded store: a directory with one file per key.
 *
 * Layout: key "a/b/c" is the regular file <root>/a/b/c, except chunk
 * keys of a checkpoint file written as one data file (file_whole.c: the
 * chunk key is a byte range of <ph>/data-<cs>).  Keys are
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
 *
 * Files: this one holds the callbacks and the constructor; file_keys.c the
 * key rules and the way from a key to its directory; file_walk.c the two
 * walks over the tree (list, and gc's sweep of stale temp files);
 * file_whole.c the two layouts of chunk keys (chunk files, data files)
 * and the writing of data files; file.h what they share.
 */
#include <errno.h>
#include <pwd.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "file.h"

/* Values at least this large start their writeback when put. */
#define WRITEBACK_MIN (1u << 20)

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
static int fs_pread_all(int fd, void *buf, size_t len, uint64_t off,
			size_t *out_n)
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
	int dfd, err = fs_open_temp(fb, key, flags, &d, &base);

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

	if ((rc = fs_check_key(key)))
		return rc;
	err = publish(fb, key, data, len, 1, durable);
	if (err)
		return fs_write_error(fb, err, key);
	return 0;
}

static int file_put_stream(wstore_backend *b, const char *key, uint64_t len,
			   wstore_fill_fn fill, void *ctx)
{
	file_backend *fb = fb_of(b);
	struct source src = { NULL, len, fill, ctx, 0 };
	int rc, err;

	if ((rc = fs_check_key(key)))
		return rc;
	err = publish_src(fb, key, &src, 1, 0);
	if (src.fill_err)
		return src.fill_err;
	if (err)
		return fs_write_error(fb, err, key);
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

	if ((rc = fs_check_key(key)))
		return rc;
	err = publish(fb, key, data, len, 0, 1);
	if (err == EEXIST)
		return wstore_backend_error(WSTORE_EEXISTS,
					    "key '%s' already exists in '%s'",
					    key, fb->root);
	if (err)
		return fs_write_error(fb, err, key);
	return 0;
}

/* ---- get ----------------------------------------------------------------- */

/* Every read goes through fs_open_value (file_whole.c): a chunk key may be
 * a range of a data file; any other key is its own file. */

static int file_get(wstore_backend *b, const char *key, void *buf, size_t cap,
		    size_t *out_len)
{
	file_backend *fb = fb_of(b);
	fs_value v;
	size_t n = 0;
	int rc = fs_open_value(fb, key, &v), err;

	if (rc < 0)
		return rc;
	*out_len = (size_t)v.len;
	if (v.len > cap) {
		close(v.fd);
		return wstore_backend_error(WSTORE_ERANGE,
					    "value of '%s' is %llu bytes, "
					    "buffer %zu",
					    key, (unsigned long long)v.len,
					    cap);
	}
	err = fs_pread_all(v.fd, buf, (size_t)v.len, v.off, &n);
	close(v.fd);
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
	fs_value v;
	int rc = fs_open_value(fb, key, &v), err = 0;

	if (rc < 0)
		return rc;
	*out_n = 0;
	if (off < v.len) {
		if (len > v.len - off)
			len = (size_t)(v.len - off);
		err = fs_pread_all(v.fd, buf, len, v.off + off, out_n);
	}
	close(v.fd);
	if (err)
		return wstore__errc(-err, "cannot read '%s' in '%s'", key,
				    fb->root);
	return 0;
}

/* The value's file itself, for zero-copy readers: only when the value is
 * the whole file.  A symlink planted in the store is not a value (ELOOP
 * reads as a missing key). */
static int file_open_fd(wstore_backend *b, const char *key, int *out_fd)
{
	fs_value v;
	int rc;

	*out_fd = -1;
	if ((rc = fs_open_value(fb_of(b), key, &v)) < 0)
		return rc;
	if (!v.whole) {
		close(v.fd);
		return wstore_backend_error(
			WSTORE_EUNSUPPORTED,
			"chunk '%s' is a part of its data file in '%s' "
			"(open_range opens it)",
			key, fb_of(b)->root);
	}
	*out_fd = v.fd;
	return 0;
}

/* The file holding the value, and where in it the value starts. */
static int file_open_range(wstore_backend *b, const char *key, int *out_fd,
			   uint64_t *out_off)
{
	fs_value v;
	int rc;

	*out_fd = -1;
	*out_off = 0;
	if ((rc = fs_open_value(fb_of(b), key, &v)) < 0)
		return rc;
	*out_fd = v.fd;
	*out_off = v.off;
	return 0;
}

/* Whole value of key, malloc'ed (NULL for an empty value). */
static int read_alloc(file_backend *fb, const char *key, void **out,
		      size_t *out_len)
{
	fs_value v;
	int rc = fs_open_value(fb, key, &v), err;
	char *buf;

	*out = NULL;
	*out_len = 0;
	if (rc < 0)
		return rc;
	buf = malloc(v.len ? (size_t)v.len : 1);
	if (!buf) {
		close(v.fd);
		return wstore__errc(-ENOMEM, "cannot read '%s'", key);
	}
	err = fs_pread_all(v.fd, buf, (size_t)v.len, v.off, out_len);
	close(v.fd);
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
	size_t dir_len;
	uint64_t idx;
	fs_value v;
	int rc, dfd, err = 0;

	if ((rc = fs_check_key(key)))
		return rc;
	if (fs_chunk_key(key, &dir_len, &idx)) {
		if ((rc = fs_open_value(fb, key, &v)) < 0)
			return rc;
		close(v.fd);
		*out = v.len;
		return 0;
	}
	if ((dfd = fs_open_key_dir(fb, key, 0, &base)) < 0)
		return fs_os_error(fb, -dfd, "stat", key);
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		err = errno;
	else if (!S_ISREG(st.st_mode))
		err = ENOENT;
	close(dfd);
	if (err)
		return fs_os_error(fb, err, "stat", key);
	*out = (uint64_t)st.st_size;
	return 0;
}

/* ---- remove ------------------------------------------------------------ */

static int file_remove(wstore_backend *b, const char *key, int force)
{
	file_backend *fb = fb_of(b);
	const char *base;
	size_t dir_len;
	uint64_t idx;
	int rc, dfd, err = 0;

	(void)force; /* no leases here */
	if ((rc = fs_check_key(key)))
		return rc;
	/* a data file goes with its first chunk removed (file_whole.c) */
	if (fs_chunk_key(key, &dir_len, &idx))
		return fs_remove_chunk(fb, key, dir_len, idx);
	/* a symlink on the way: nothing of the store's is there */
	if ((dfd = fs_open_key_dir(fb, key, 0, &base)) < 0)
		return fs_os_error(fb, -dfd, "remove", key);
	/* unlinkat never follows: a symlink at key goes, not its target */
	if (unlinkat(dfd, base, 0) < 0)
		err = errno;
	close(dfd);
	if (err)
		return fs_os_error(fb, err, "remove", key);
	fs_remove_empty_dirs(fb, key);
	return 0;
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
	if (rfd >= 0 && (dfd = wstore__nofollow_subdir(rfd, ".locks")) < 0 &&
	    errno == ENOENT) {
		if (mkdirat(rfd, ".locks", 0755) == 0 || errno == EEXIST)
			dfd = wstore__nofollow_subdir(rfd, ".locks");
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

	if ((rc = fs_check_key(key)))
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
			rc = fs_write_error(fb, err, key);
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

/*
 * Root writing into a store another user owns (the system store
 * /var/lib/wstore, owned by the services' user wstore) would leave files
 * and directories (locks, leases, chunks) that user cannot write, and the
 * services would fail on them: refused, with the way to do it.
 */
static int foreign_to_root(const char *root, const struct stat *st)
{
	struct passwd pw, *res = NULL;
	char buf[1024], name[64];

	if (geteuid() != 0 || st->st_uid == 0)
		return 0;
	if (getpwuid_r(st->st_uid, &pw, buf, sizeof(buf), &res) == 0 && res)
		snprintf(name, sizeof(name), "%s", res->pw_name);
	else
		snprintf(name, sizeof(name), "%u", (unsigned)st->st_uid);
	return wstore__err(-EPERM,
			   "file store '%s' belongs to user '%s': write to "
			   "it as that user (sudo -u %s wstore ...), not as "
			   "root, or its services cannot use what is written",
			   root, name, name);
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
	if (!(flags & WSTORE_OPEN_READONLY) &&
	    (err = foreign_to_root(root, &st)))
		return err;
	if ((flags & WSTORE_OPEN_READONLY) && access(root, R_OK | X_OK) < 0)
		return wstore__errc(-errno, "file store '%s' is not readable",
				    root);
	*out = realpath(root, NULL);
	if (!*out)
		return wstore__errc(-errno, "cannot resolve file store '%s'",
				    root);
	return 0;
}

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
	fb->pub.list = fs_list;
	fb->pub.update = file_update;
	fb->pub.free = file_free;
	fb->pub.sweep_temps = fs_sweep_temps;
	fb->pub.open_fd = file_open_fd;
	fb->pub.put_stream = file_put_stream;
	fb->pub.space = file_space;
	fb->pub.open_range = file_open_range;
	fb->pub.begin_file = fs_begin_file;
	fb->pub.commit_file = fs_commit_file;
	fb->pub.abort_file = fs_abort_file;
	fb->pub.migrate_file = fs_migrate_file;
	*out = &fb->pub;
	return 0;
}

/* ---- the kind store URLs name (backends/table.c) ------------------------ */

/* "file://PATH", or a path (also the default store). */
static int file_kind_open(wstore_backend **out, const char *url,
			  const char *rest, const wstore_config *cfg,
			  unsigned flags)
{
	(void)url;
	(void)cfg;
	return wstore_backend_file_open(out, rest, flags);
}

const wstore__backend_kind wstore__kind_file = {
	.name = "file",
	.schemes = { "file://*" },
	.usage = "file://",
	.paths = 1,
	.open = file_kind_open,
};
