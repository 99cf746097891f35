/*
 * file_walk.c - the two walks over the file store's tree: list (every key
 * under a prefix, skipping dot files and never entering a symlink) and
 * sweep_temps (gc's removal of temp files that dead writers left).  Both
 * reach each directory with O_NOFOLLOW from the one above it.  See file.c
 * for the layout.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"

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

/* Is key[0..len) ("weight/models/<ckpt>/files/<ph>/") a <ph> directory,
 * the one whose chunk keys a data file may hold? */
static int is_ph_dir(const char *key, size_t len)
{
	char k[PATH_MAX];
	size_t dir_len;
	uint64_t idx;

	if (len + sizeof("chunks/0") > sizeof(k))
		return 0;
	memcpy(k, key, len);
	memcpy(k + len, "chunks/0", sizeof("chunks/0"));
	return fs_chunk_key(k, &dir_len, &idx) && dir_len + 1 == len;
}

/* The chunk keys the data file name (chunk size cs) in directory dfd
 * holds (file_whole.c): key[0..len) + "chunks/<i>". */
static int list_data(list_ctx *lc, int dfd, const char *name, uint64_t cs,
		     size_t len)
{
	struct stat st;
	uint64_t n;

	if (len + sizeof("chunks/") + 20 > sizeof(lc->key) ||
	    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	n = ((uint64_t)st.st_size + cs - 1) / cs;
	for (uint64_t i = 0; i < n; i++) {
		int rc;

		snprintf(lc->key + len, sizeof(lc->key) - len,
			 "chunks/%08" PRIu64, i);
		if (strncmp(lc->key, lc->prefix, lc->plen) != 0)
			continue;
		if ((rc = lc->fn(lc->key, lc->ctx)) != 0)
			return rc;
	}
	return 0;
}

/* Visit one entry of a directory (dfd) whose key prefix is key[0..len);
 * ph: it is a <ph> directory, data: one with a data file, whose keys hide
 * those of chunks/ (a migration half done has both, the same bytes). */
static int visit(list_ctx *lc, int dfd, const struct dirent *e, size_t len,
		 int ph, int data)
{
	size_t nlen = strlen(e->d_name);
	unsigned char type = e->d_type;
	struct stat st;
	uint64_t cs;
	int sub;

	if (e->d_name[0] == '.' || len + nlen + 2 > sizeof(lc->key))
		return 0;
	if (ph && (cs = fs_data_cs(e->d_name)))
		return list_data(lc, dfd, e->d_name, cs, len);
	if (ph && data && !strcmp(e->d_name, "chunks"))
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
	char name[FS_DATA_NAME_MAX];
	uint64_t cs;
	int ph = is_ph_dir(lc->key, len), data = 0, rc = 0;
	DIR *d;

	if (ph) {
		rc = fs_find_data(dfd, lc->key, name, &cs);
		data = rc == 0 || rc == WSTORE_ECORRUPT;
		rc = 0;
	}
	if (!(d = fdopendir(dfd))) {
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
		rc = visit(lc, dirfd(d), e, len, ph, data);
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
	/* ".../<ph>/chunks/...": the keys may be those of a data file in
	 * <ph>, so the walk starts there */
	if (dlen && dlen + 2 < sizeof(lc->key)) {
		size_t dir_len;
		uint64_t idx;

		memcpy(lc->key, lc->prefix, dlen);
		memcpy(lc->key + dlen, "0", 2);
		if (fs_chunk_key(lc->key, &dir_len, &idx))
			*out_len = dlen = dir_len + 1;
	}
	if (dlen) {
		memcpy(lc->key, lc->prefix, dlen - 1);
		lc->key[dlen - 1] = '\0';
		if (!fs_key_ok(lc->key))
			return NOTHING_TO_LIST;
		lc->key[dlen - 1] = '/';
		lc->key[dlen] = '\0';
	}
	if (!dlen) {
		fd = open(fb->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		err = errno;
	} else {
		/* "a/b/" as a key "a/b/x": fs_open_key_dir gives "a/b" */
		lc->key[dlen] = 'x';
		lc->key[dlen + 1] = '\0';
		dfd = fs_open_key_dir(fb, lc->key, 0, &base);
		lc->key[dlen] = '\0';
		fd = dfd;
		err = dfd < 0 ? -dfd : 0;
	}
	if (fd >= 0)
		return fd;
	if (fs_is_missing(err))
		return NOTHING_TO_LIST;
	return wstore__errc(-err, "cannot list '%s' in '%s'", lc->prefix,
			    fb->root);
}

int fs_list(wstore_backend *b, const char *prefix, wstore_list_fn fn, void *ctx)
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
		if (name[0] == '.' ||
		    (sub = wstore__nofollow_subdir(dfd, name)) < 0)
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

int fs_sweep_temps(wstore_backend *b, int64_t older_than, int dry_run,
		   size_t *out_n, int (*keep)(const char *path, void *ctx),
		   void (*fn)(const char *path, uint64_t bytes, int removed,
			      void *ctx),
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
