/*
 * file_migrate.c - the file store's migrate_file callback: one checkpoint
 * file moved from the chunk-file layout (<file key>/chunks/<i>, one file
 * per chunk key) to the whole-file layout (<file key>/data-<chunk size>,
 * the file's bytes as they are; docs/format.md).
 *
 * Order, each step safe to be killed after:
 *   1. the data file is built as a temp file beside its final name
 *      (FICLONERANGE from each chunk file where the file system can,
 *      else copy_file_range, else read and write), its length checked,
 *      the caller's check run on it (--verify: its SHA-256), fsynced;
 *   2. it is renamed onto data-<cs> and the directory fsynced;
 *   3. the chunk files, then chunks/, are removed.
 * Readers see the same bytes throughout: a chunk key is served from its
 * chunk file while that exists and from the data file otherwise (both
 * hold the same bytes), and a reader that opened a chunk file keeps it
 * after the unlink.  A re-run that finds the data file and chunk files
 * left removes the chunk files; a temp file left by a killed run is
 * removed when its writer is provably dead (the pid and owner tag in its
 * name), else left to gc.
 *
 * The caller (src/lib/migrate.c) holds the checkpoint's lock, so no
 * import or delete of the checkpoint runs meanwhile.
 *
 * Test only: $WSTORE_TEST_MIGRATE_KILL=temp|rename|chunks makes the
 * process SIGKILL itself after step 1, after step 2, or after the first
 * chunk file of step 3 is removed; with ":stop" appended it SIGSTOPs
 * itself there instead, its lock held (tests/e2e/migrate.sh).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

#define COPY_BUF (1u << 20)

/* How chunk bytes get into the data file: the first that works. */
enum copy_mode { COPY_CLONE, COPY_RANGE, COPY_RW };

/* Test only ($WSTORE_TEST_MIGRATE_KILL, see the top of this file):
 * "<step>" SIGKILLs, "<step>:stop" SIGSTOPs the process at step. */
static void kill_point(const char *step)
{
	static int stopped; /* a stop happens once, the first time */
	const char *k = getenv("WSTORE_TEST_MIGRATE_KILL");
	size_t n = strlen(step);

	if (!k || strncmp(k, step, n))
		return;
	if (!k[n])
		kill(getpid(), SIGKILL);
	else if (!strcmp(k + n, ":stop") && !stopped++)
		kill(getpid(), SIGSTOP);
}

static int is_chunk_name(const char *n)
{
	return n[0] && strspn(n, "0123456789") == strlen(n);
}

/* What the file's directory holds. */
struct dir_state {
	int data;   /* data-<cs> */
	int chunks; /* chunks/ */
};

/* Look at dfd, the directory of file_key: its data file (fs_find_data;
 * one of another chunk size is corruption) and its chunks/; temp files
 * of data-<cs> whose writer is provably dead are removed (unless
 * dry_run). */
static int scan_dir(int dfd, const char *file_key, const char *data,
		    int dry_run, struct dir_state *st)
{
	char tmp_prefix[NAME_MAX + 1], found[FS_DATA_NAME_MAX];
	struct stat cst;
	struct dirent *e;
	uint64_t cs = 0;
	int rc, fd;
	DIR *d;

	memset(st, 0, sizeof(*st));
	rc = fs_find_data(dfd, file_key, found, &cs);
	if (rc < 0)
		return rc == WSTORE_ECORRUPT ? rc
					     : wstore__errc(rc,
							    "cannot read the "
							    "directory of '%s'",
							    file_key);
	if (rc == 0 && strcmp(found, data))
		return wstore__err(WSTORE_ECORRUPT,
				   "cannot migrate '%s': it holds '%s', not "
				   "'%s'",
				   file_key, found, data);
	st->data = rc == 0;
	st->chunks = fstatat(dfd, "chunks", &cst, AT_SYMLINK_NOFOLLOW) == 0 &&
		     S_ISDIR(cst.st_mode);
	if (dry_run)
		return 0;
	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return 0; /* the temps are gc's then */
	}
	snprintf(tmp_prefix, sizeof(tmp_prefix), ".tmp-%s-", data);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, tmp_prefix, strlen(tmp_prefix)) &&
		    wstore__tmp_writer_state(e->d_name,
					     WSTORE__DURABLE_KEY_TEMP) ==
			    WSTORE__TMP_DEAD)
			unlinkat(dfd, e->d_name, 0);
	closedir(d);
	return 0;
}

/* Chunk i of the file opened read-only; ECORRUPT unless it is a regular
 * file of exactly len bytes. */
static int open_chunk(file_backend *fb, int cfd, const char *file_key,
		      uint64_t i, uint64_t len)
{
	char name[32];
	struct stat st;
	int fd;

	snprintf(name, sizeof(name), "%08" PRIu64, i);
	fd = openat(cfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && fs_is_missing(errno))
		return wstore__err(WSTORE_ECORRUPT,
				   "cannot migrate '%s' in '%s': chunk %" PRIu64
				   " is missing",
				   file_key, fb->root, i);
	if (fd < 0)
		return wstore__errc(
			-errno, "cannot open chunk %" PRIu64 " of '%s' in '%s'",
			i, file_key, fb->root);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != len) {
		close(fd);
		return wstore__err(WSTORE_ECORRUPT,
				   "cannot migrate '%s' in '%s': chunk %" PRIu64
				   " is not %" PRIu64 " bytes",
				   file_key, fb->root, i, len);
	}
	return fd;
}

static int copy_rw(int dst, int src, uint64_t from, uint64_t off, uint64_t len)
{
	char *buf = malloc(COPY_BUF);
	int err = 0;

	if (!buf)
		return ENOMEM;
	while (len > 0 && !err) {
		size_t want = len < COPY_BUF ? (size_t)len : COPY_BUF;
		ssize_t n = pread(src, buf, want, (off_t)from), w = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? errno : EIO; /* shrank under us */
			break;
		}
		for (ssize_t done = 0; done < n && !err; done += w) {
			w = pwrite(dst, buf + done, (size_t)(n - done),
				   (off_t)(off + (uint64_t)done));
			if (w < 0)
				err = errno == EINTR ? (w = 0, 0) : errno;
		}
		from += (uint64_t)n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	free(buf);
	return err;
}

/* Errors after which the next way of copying is tried. */
static int try_next(int err)
{
	return err == EOPNOTSUPP || err == ENOTTY || err == EXDEV ||
	       err == EINVAL || err == ENOSYS || err == EPERM || err == ETXTBSY;
}

/* len bytes of src at 0 to dst at off, the cheapest way *mode allows
 * (lowered for the next chunks when a way fails). */
static int copy_chunk(int dst, int src, uint64_t off, uint64_t len,
		      enum copy_mode *mode)
{
	uint64_t done = 0;

	if (*mode == COPY_CLONE) {
		struct file_clone_range r = { .src_fd = src,
					      .src_offset = 0,
					      .src_length = len,
					      .dest_offset = off };

		if (len == 0 || ioctl(dst, FICLONERANGE, &r) == 0)
			return 0;
		if (!try_next(errno))
			return errno;
		*mode = COPY_RANGE;
	}
	while (*mode == COPY_RANGE && done < len) {
		loff_t in = (loff_t)done, out = (loff_t)(off + done);
		ssize_t n = copy_file_range(src, &in, dst, &out,
					    (size_t)(len - done), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && !try_next(errno))
			return errno;
		if (n < 0)
			*mode = COPY_RW;
		else if (n == 0)
			return EIO; /* shrank under us */
		else
			done += (uint64_t)n;
	}
	return done < len ? copy_rw(dst, src, done, off + done, len - done) : 0;
}

/* Every chunk file of the file into the temp file d->fd. */
static int fill_temp(file_backend *fb, int cfd, int tfd, const char *file_key,
		     uint64_t cs, uint64_t size)
{
	enum copy_mode mode = COPY_CLONE;
	uint64_t n = size / cs + (size % cs != 0);

	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = i * cs, len = size - off < cs ? size - off : cs;
		int src, err;

		if (wstore__interrupted())
			return wstore__err(WSTORE_ECANCELED,
					   "migrate interrupted");
		if ((src = open_chunk(fb, cfd, file_key, i, len)) < 0)
			return src;
		err = copy_chunk(tfd, src, off, len, &mode);
		close(src);
		if (err)
			return wstore__errc(-err,
					    "cannot copy chunk %" PRIu64
					    " of '%s' in '%s'",
					    i, file_key, fb->root);
	}
	return 0;
}

/* Build, check and publish data (the name data-<cs>) in dfd from the
 * chunk files in cfd. */
static int build(file_backend *fb, int dfd, int cfd, const char *file_key,
		 const char *data, uint64_t cs, uint64_t size,
		 int (*check)(int fd, void *ctx), void *ctx)
{
	wstore__durable d = { .fd = -1 };
	struct stat st;
	int rc, rfd;

	rc = wstore__durable_open_flags(&d, dfd, data, 0644,
					WSTORE__DURABLE_KEY_TEMP, file_key);
	if (rc < 0)
		return rc;
	rc = fill_temp(fb, cfd, d.fd, file_key, cs, size);
	if (rc == 0 && fstat(d.fd, &st) < 0)
		rc = wstore__errc(-errno,
				  "cannot stat the new data file of "
				  "'%s'",
				  file_key);
	else if (rc == 0 && (uint64_t)st.st_size != size)
		rc = wstore__err(WSTORE_ECORRUPT,
				 "the new data file of '%s' is %" PRIu64
				 " bytes, not %" PRIu64,
				 file_key, (uint64_t)st.st_size, size);
	if (rc == 0 && check) {
		rfd = openat(dfd, d.tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		rc = rfd < 0 ? wstore__errc(-errno, "cannot reopen '%s'", d.tmp)
			     : check(rfd, ctx);
		if (rfd >= 0)
			close(rfd);
	}
	if (rc < 0) {
		wstore__durable_abort(&d);
		return rc;
	}
	if (fsync(d.fd) < 0) {
		rc = wstore__errc(-errno, "cannot sync '%s'", d.tmp);
		wstore__durable_abort(&d);
		return rc;
	}
	kill_point("temp");
	/* fsync (again: cheap), rename onto data-<cs>, fsync the directory */
	return wstore__durable_commit(&d, data, file_key);
}

/* Remove the chunk files in cfd, then chunks/ itself from dfd: the
 * number of chunk files removed. */
static long remove_chunks(int dfd, int cfd)
{
	int fd = dup(cfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	long n = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((e = readdir(d))) {
		if (!is_chunk_name(e->d_name) ||
		    unlinkat(cfd, e->d_name, 0) < 0)
			continue;
		if (n++ == 0)
			kill_point("chunks");
	}
	closedir(d);
	/* ENOTEMPTY: a temp file of a live writer; gc takes it later */
	unlinkat(dfd, "chunks", AT_REMOVEDIR);
	return n;
}

int fs_migrate_file(wstore_backend *b, const char *file_key, uint64_t cs,
		    uint64_t size, unsigned flags,
		    int (*check)(int fd, void *ctx), void *ctx)
{
	file_backend *fb = fb_of(b);
	int dry = !!(flags & WSTORE_MIGRATE_DRY_RUN);
	char data[FS_DATA_NAME_MAX], key[PATH_MAX];
	struct dir_state st;
	struct stat ds;
	const char *base;
	int rc, dfd, cfd = -1;

	if ((rc = fs_check_key(file_key)))
		return rc;
	if (cs == 0)
		return wstore_backend_error(
			WSTORE_EINVAL, "cannot migrate '%s': no chunk size",
			file_key);
	fs_data_name(data, cs);
	snprintf(key, sizeof(key), "%s/%s", file_key, data);
	if ((dfd = fs_open_key_dir(fb, key, 0, &base)) < 0) {
		if (fs_is_missing(-dfd) && size == 0)
			return 0;
		return fs_os_error(fb, -dfd, "migrate", file_key);
	}
	rc = scan_dir(dfd, file_key, data, dry, &st);
	if (rc == 0 && st.data &&
	    (fstatat(dfd, data, &ds, AT_SYMLINK_NOFOLLOW) < 0 ||
	     !S_ISREG(ds.st_mode) || (uint64_t)ds.st_size != size))
		rc = wstore__err(WSTORE_ECORRUPT,
				 "cannot migrate '%s' in '%s': '%s' is not a "
				 "file of %" PRIu64 " bytes",
				 file_key, fb->root, data, size);
	if (rc == 0 && st.chunks &&
	    (cfd = wstore__nofollow_subdir(dfd, "chunks")) < 0)
		rc = wstore__errc(-errno, "cannot open the chunks of '%s'",
				  file_key);
	if (rc < 0 || (!st.chunks && (st.data || size == 0))) {
		/* nothing (left) to do */
	} else if (!st.chunks) {
		rc = wstore__err(WSTORE_ECORRUPT,
				 "cannot migrate '%s' in '%s': it has neither "
				 "chunks nor a data file",
				 file_key, fb->root);
	} else if (st.data) {
		rc = dry ? 2 : remove_chunks(dfd, cfd) > 0 ? 2 : 0;
	} else if (dry) {
		/* the chunk files must all be there to be converted */
		uint64_t n = size / cs + (size % cs != 0);

		for (uint64_t i = 0; i < n && rc == 0; i++) {
			uint64_t len = size - i * cs < cs ? size - i * cs : cs;
			int fd = open_chunk(fb, cfd, file_key, i, len);

			rc = fd < 0 ? fd : (close(fd), 0);
		}
		rc = rc < 0 ? rc : 1;
	} else if ((rc = build(fb, dfd, cfd, file_key, data, cs, size, check,
			       ctx)) == 0) {
		kill_point("rename");
		remove_chunks(dfd, cfd);
		rc = 1;
	}
	if (cfd >= 0)
		close(cfd);
	close(dfd);
	return rc;
}
