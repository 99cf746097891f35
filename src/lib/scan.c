/*
 * scan.c - walk an import source directory: every regular file under it,
 * recursively, with symlinks followed (a Hugging Face cache snapshot is a
 * tree of symlinks into ../../blobs/).  Anything that is not a regular file
 * or directory (FIFO, socket, device, dangling link, symlink loop,
 * unreadable file) stops the scan with an error naming it, before anything
 * is written to the store.  Result: files sorted by relative path.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "manifest.h"
#include "scan.h"

struct walk {
	wstore__scan *out;
	size_t cap;
	dev_t dev[64]; /* directories on the current path, for loops */
	ino_t ino[64];
	int depth;
	wstore__scan_filter_fn filter; /* may be NULL */
	void *filter_ctx;
};

int wstore__source_open(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), fl;

	if (fd < 0)
		return wstore__errc(-errno, "cannot read source file '%s'",
				    path);
	if (fstat(fd, st) < 0) {
		int err = errno;

		close(fd);
		return wstore__errc(-err, "cannot stat source file '%s'", path);
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return wstore__err(WSTORE_EINVAL,
				   "source '%s' is not a regular file (FIFO, "
				   "socket or device); was it replaced?",
				   path);
	}
	/* reads of a regular file never block; clear the flag all the same
	 * so the fd behaves as any other */
	if ((fl = fcntl(fd, F_GETFL)) >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

static int add_file(struct walk *w, const char *rel, const char *abs,
		    const struct stat *st)
{
	wstore__scan_file *f;
	struct stat ost;
	int fd;

	/* open now so an unreadable file fails the scan, not the import */
	fd = wstore__source_open(abs, &ost);
	if (fd < 0)
		return fd;
	close(fd);
	if (w->out->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		void *p = realloc(w->out->files, cap * sizeof(*f));

		if (!p)
			return -ENOMEM;
		w->out->files = p;
		w->cap = cap;
	}
	f = &w->out->files[w->out->n];
	f->rel = strdup(rel);
	f->abs = strdup(abs);
	if (!f->rel || !f->abs) {
		free(f->rel);
		free(f->abs);
		return -ENOMEM;
	}
	f->size = (uint64_t)st->st_size;
	w->out->n++;
	w->out->total += f->size;
	return 0;
}

static int walk_dir(struct walk *w, const char *abs, const char *rel);

static int walk_entry(struct walk *w, const char *abs, const char *rel)
{
	struct stat st, lst;

	if (stat(abs, &st) < 0) {
		int e = errno;

		if (w->filter && w->filter(w->filter_ctx, rel, 0))
			return 0;
		if (lstat(abs, &lst) == 0 && S_ISLNK(lst.st_mode))
			return wstore__err(e == ELOOP ? -ELOOP : -ENOENT,
					   "source '%s' is a %s symlink", abs,
					   e == ELOOP ? "looping" : "dangling");
		return wstore__errc(-e, "cannot stat source '%s'", abs);
	}
	if (w->filter && w->filter(w->filter_ctx, rel, S_ISDIR(st.st_mode)))
		return 0;
	if (S_ISREG(st.st_mode))
		return add_file(w, rel, abs, &st);
	if (S_ISDIR(st.st_mode)) {
		for (int i = 0; i < w->depth; i++)
			if (w->dev[i] == st.st_dev && w->ino[i] == st.st_ino)
				return wstore__err(
					-ELOOP, "source '%s' is a symlink loop",
					abs);
		if (w->depth == 64)
			return wstore__err(WSTORE_EINVAL,
					   "source '%s' is nested too deeply",
					   abs);
		w->dev[w->depth] = st.st_dev;
		w->ino[w->depth] = st.st_ino;
		w->depth++;
		int rc = walk_dir(w, abs, rel);
		w->depth--;
		return rc;
	}
	return wstore__err(
		WSTORE_EINVAL,
		"source '%s' is not a regular file or directory (FIFO, socket or device)",
		abs);
}

static int walk_dir(struct walk *w, const char *abs, const char *rel)
{
	DIR *d = opendir(abs);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return wstore__errc(-errno, "cannot read source directory '%s'",
				    abs);
	while (rc == 0 && (errno = 0, de = readdir(d))) {
		char *cabs, *crel;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&cabs, "%s/%s", abs, de->d_name) < 0)
			return closedir(d), -ENOMEM;
		if (asprintf(&crel, "%s%s%s", rel, *rel ? "/" : "",
			     de->d_name) < 0) {
			free(cabs);
			return closedir(d), -ENOMEM;
		}
		rc = walk_entry(w, cabs, crel);
		free(cabs);
		free(crel);
	}
	if (rc == 0 && errno)
		rc = wstore__errc(-errno, "cannot read source directory '%s'",
				  abs);
	closedir(d);
	return rc;
}

static int cmp_rel(const void *a, const void *b)
{
	return strcmp(((const wstore__scan_file *)a)->rel,
		      ((const wstore__scan_file *)b)->rel);
}

int wstore__scan_source(wstore__scan *out, const char *source)
{
	return wstore__scan_source_filtered(out, source, NULL, NULL);
}

int wstore__scan_source_filtered(wstore__scan *out, const char *source,
				 wstore__scan_filter_fn filter, void *ctx)
{
	struct walk w = { .out = out, .filter = filter, .filter_ctx = ctx };
	struct stat st;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!source || !*source)
		return wstore__err(WSTORE_EINVAL, "no source directory given");
	if (stat(source, &st) < 0)
		return wstore__errc(-errno, "cannot open source '%s'", source);
	if (!S_ISDIR(st.st_mode))
		return wstore__err(WSTORE_EINVAL,
				   "source '%s' is not a directory", source);
	w.dev[0] = st.st_dev;
	w.ino[0] = st.st_ino;
	w.depth = 1;
	rc = walk_dir(&w, source, "");
	if (rc == 0 && out->n == 0)
		rc = wstore__err(WSTORE_EINVAL, "source '%s' holds no files",
				 source);
	if (rc < 0) {
		wstore__scan_free(out);
		return rc;
	}
	qsort(out->files, out->n, sizeof(*out->files), cmp_rel);
	return 0;
}

static int is_dir_at(const char *dir, const char *name)
{
	char *p;
	struct stat st;
	int r;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return 0;
	r = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
	free(p);
	return r;
}

/* A revision names a file under refs/ or a directory under snapshots/:
 * no empty, "." or ".." segment, no leading '/'. */
static int revision_ok(const char *rev)
{
	return *rev && wstore_validate_path(rev) == 0;
}

/* The first snapshot's name, for the error message ("" if none). */
static void first_snapshot(char *out, size_t cap, const char *source)
{
	char *p;
	DIR *d;
	struct dirent *e;

	out[0] = '\0';
	if (asprintf(&p, "%s/snapshots", source) < 0)
		return;
	d = opendir(p);
	free(p);
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(out, cap, "%s", e->d_name);
			break;
		}
	if (d)
		closedir(d);
}

int wstore__resolve_hub_source(char **out, const char *source,
			       const char *revision)
{
	const char *rev = revision && *revision ? revision : "main";
	char commit[256] = "", snap[256], *ref = NULL;
	struct stat st;
	FILE *f;
	int fd;

	*out = NULL;
	if (!source || !is_dir_at(source, "blobs") ||
	    !is_dir_at(source, "refs") || !is_dir_at(source, "snapshots"))
		return 0;
	wstore__clear_err();
	/* a ref that is not a regular file names no commit */
	if (revision_ok(rev) &&
	    asprintf(&ref, "%s/refs/%s", source, rev) >= 0 &&
	    (fd = wstore__source_open(ref, &st)) >= 0) {
		if ((f = fdopen(fd, "r"))) {
			if (!fgets(commit, sizeof(commit), f))
				commit[0] = '\0';
			fclose(f);
		} else {
			close(fd);
		}
		commit[strcspn(commit, "\r\n \t")] = '\0';
	}
	free(ref);
	wstore__clear_err();
	if (!commit[0] && revision_ok(rev))
		snprintf(commit, sizeof(commit), "%s", rev);
	if (commit[0] && !strchr(commit, '/') && strcmp(commit, ".") &&
	    strcmp(commit, "..") &&
	    asprintf(out, "%s/snapshots/%s", source, commit) >= 0) {
		if (is_dir_at(*out, "."))
			return 0;
		free(*out);
		*out = NULL;
	}
	first_snapshot(snap, sizeof(snap), source);
	return wstore__err(
		WSTORE_EINVAL,
		"source '%s' is a hugging face hub cache repo (blobs/, refs/, snapshots/) without revision '%s'; pass one snapshot directory, e.g. '%s/snapshots/%s'",
		source, rev, source, *snap ? snap : "<commit>");
}

void wstore__scan_free(wstore__scan *scan)
{
	for (size_t i = 0; i < scan->n; i++) {
		free(scan->files[i].rel);
		free(scan->files[i].abs);
	}
	free(scan->files);
	memset(scan, 0, sizeof(*scan));
}

const wstore__scan_file *wstore__scan_find(const wstore__scan *scan,
					   const char *rel)
{
	wstore__scan_file key = { .rel = (char *)rel };

	return bsearch(&key, scan->files, scan->n, sizeof(key), cmp_rel);
}
