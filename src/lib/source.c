/*
 * source.c - what an import takes from its source directory, the same for
 * every front end (the rules are spelled out above wstore_source_new in
 * include/wstore/wstore.h): folders of version control and tools skipped,
 * include/exclude patterns as in pull, Hugging Face cache folders
 * recognised (a repo root is imported as one snapshot, a snapshot gives
 * the model id and commit), and a source that does not look like a
 * checkpoint refused unless forced.
 *
 * The walk itself is scan.c's; this module hands it a filter and checks
 * the result.  Read scan.c first.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "source.h"

struct strs {
	char **v;
	size_t n;
};

struct wstore_source {
	char *path, *revision;
	struct strs inc, exc;
	int force;
	/* filled by examine */
	char *dir, *model_id, *commit, *rev;
	struct strs skipped;
	size_t nfiles;
	uint64_t total;
};

static int strs_add(struct strs *s, const char *v)
{
	char **p = realloc(s->v, (s->n + 2) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	s->v = p;
	if (!(p[s->n] = strdup(v)))
		return -ENOMEM;
	p[++s->n] = NULL;
	return 0;
}

static void strs_free(struct strs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

/* ---- the rules ---------------------------------------------------------- */

static const char *const skip_dirs[] = {
	".git", ".hg", ".svn", ".bzr", "__pycache__", ".ipynb_checkpoints", NULL
};

static int tool_folder(const char *rel, int is_dir)
{
	const char *base = strrchr(rel, '/');
	size_t n = strlen(rel), k = strlen(".cache/huggingface");

	base = base ? base + 1 : rel;
	if (!strcmp(base, ".git"))
		return 1; /* a worktree's .git file too */
	if (!is_dir)
		return 0;
	for (size_t i = 0; skip_dirs[i]; i++)
		if (!strcmp(base, skip_dirs[i]))
			return 1;
	return n >= k && !strcmp(rel + n - k, ".cache/huggingface") &&
	       (n == k || rel[n - k - 1] == '/');
}

static int matches_any(const struct strs *globs, const char *path)
{
	for (size_t i = 0; i < globs->n; i++)
		if (fnmatch(globs->v[i], path, 0) == 0)
			return 1;
	return 0;
}

struct filter {
	const wstore_source *src;
	struct strs *skipped; /* may be NULL */
	int oom;
};

static int filter(void *ctx, const char *rel, int is_dir)
{
	struct filter *f = ctx;

	if (tool_folder(rel, is_dir)) {
		if (f->skipped && strs_add(f->skipped, rel) < 0)
			f->oom = 1;
		return 1;
	}
	if (is_dir)
		return 0;
	if (f->src->inc.n && !matches_any(&f->src->inc, rel))
		return 1;
	return matches_any(&f->src->exc, rel);
}

static const char *const weight_ext[] = { ".safetensors", ".gguf",    ".bin",
					  ".pt",	  ".pth",     ".ckpt",
					  ".h5",	  ".msgpack", ".onnx",
					  ".npz",	  NULL };

static int has_ext(const char *rel, const char *ext)
{
	size_t n = strlen(rel), k = strlen(ext);

	return n > k && !strcmp(rel + n - k, ext);
}

static int is_config(const char *rel)
{
	const char *base = strrchr(rel, '/');

	base = base ? base + 1 : rel;
	return !strcmp(base, "config.json") || !strcmp(base, "params.json") ||
	       !strcmp(base, "model_index.json");
}

static int is_weight(const char *rel)
{
	for (size_t k = 0; weight_ext[k]; k++)
		if (has_ext(rel, weight_ext[k]))
			return 1;
	return 0;
}

/*
 * The folder under the source that holds every config and weight file
 * when none is at the top (a source named one level too high, e.g. the
 * folder a checkpoint was unpacked into): the longest leading folder
 * those files share, copied into out (cap bytes), else "".
 */
static void common_folder(const wstore__scan *scan, char *out, size_t cap)
{
	size_t len = 0;
	int first = 1;

	out[0] = '\0';
	for (size_t i = 0; i < scan->n; i++) {
		const char *rel = scan->files[i].rel, *slash;

		if (!is_weight(rel) && !is_config(rel))
			continue;
		if (!(slash = strrchr(rel, '/'))) {
			out[0] = '\0';
			return;
		}
		if (first) {
			len = (size_t)(slash - rel);
			if (len >= cap)
				len = cap - 1;
			memcpy(out, rel, len);
			out[len] = '\0';
			first = 0;
			continue;
		}
		/* cut out back to the folder this path shares with it */
		while (len && (strncmp(out, rel, len) || rel[len] != '/')) {
			char *up = strrchr(out, '/');

			len = up ? (size_t)(up - out) : 0;
			out[len] = '\0';
		}
	}
}

/* A weight file and a config (GGUF weights carry their own), at the top
 * of the source, or an error naming what is missing or where they are. */
static int check_checkpoint(const wstore__scan *scan, const char *dir)
{
	int weights = 0, config = 0;
	char sub[1024];

	for (size_t i = 0; i < scan->n; i++) {
		const char *rel = scan->files[i].rel;

		weights |= is_weight(rel);
		config |= is_config(rel) || has_ext(rel, ".gguf");
	}
	common_folder(scan, sub, sizeof(sub));
	if (weights && config && *sub)
		return wstore__err(
			WSTORE_EINVAL,
			"source '%s' holds its checkpoint in the folder '%s': pass '%s/%s' (--force imports '%s' as it is, '%s/' in every path)",
			dir, sub, dir, sub, dir, sub);
	if (weights && config)
		return 0;
	return wstore__err(
		WSTORE_EINVAL,
		"source '%s' does not look like a checkpoint: %s%s%s; force (--force) imports it anyway",
		dir, config ? "" : "no config.json",
		!config && !weights ? " and " : "",
		weights ? ""
			: "no weight file (*.safetensors, *.gguf, *.bin, *.pt, ...)");
}

/*
 * Weight files that are Git LFS pointers (a `git clone` made without
 * git-lfs, or with GIT_LFS_SKIP_SMUDGE): a few lines of text in place of
 * the weights.  Imported, they would be tiny files under weight names, so
 * they are refused whatever --force says.
 */
#define LFS_MAGIC "version https://git-lfs.github.com/spec/"

static int lfs_pointer(const wstore__scan_file *f)
{
	char head[sizeof(LFS_MAGIC) - 1];
	struct stat st;
	ssize_t n;
	int fd;

	/* a pointer is about 130 bytes; weights are never that small */
	if (f->size > 1024 || f->size < sizeof(head) || !is_weight(f->rel))
		return 0;
	if ((fd = wstore__source_open(f->abs, &st)) < 0) {
		wstore__clear_err();
		return 0; /* the import itself says why it cannot be read */
	}
	n = read(fd, head, sizeof(head));
	close(fd);
	return n == (ssize_t)sizeof(head) &&
	       !memcmp(head, LFS_MAGIC, (size_t)n);
}

static int check_lfs(const wstore__scan *scan, const char *dir)
{
	size_t count = 0, first = 0;

	for (size_t i = 0; i < scan->n; i++)
		if (lfs_pointer(&scan->files[i]) && !count++)
			first = i;
	if (!count)
		return 0;
	return wstore__err(
		WSTORE_EINVAL,
		"source '%s' holds git lfs pointer files in place of weights ('%s'%s): a git clone without git-lfs? run 'git lfs pull' in '%s', or leave them out with --exclude",
		dir, scan->files[first].rel, count > 1 ? " and more" : "", dir);
}

/* ---- Hugging Face cache folders ----------------------------------------- */

static int is_dir_at(const char *dir, const char *name);

/*
 * A Hugging Face hub cache itself (~/.cache/huggingface/hub, holding
 * models--ORG--NAME folders, or ~/.cache/huggingface holding hub/) is
 * many repos, each with blobs and snapshots: never one checkpoint.  An
 * error naming a repo folder to pass instead, else 0.
 */
static int check_hub_cache(const char *path)
{
	char *hub = NULL, first[256] = "";
	const char *dir = path;
	size_t repos = 0;
	struct dirent *e;
	DIR *d;
	int rc = 0;

	for (int pass = 0; pass < 2 && !repos; pass++) {
		if (pass == 1) {
			if (asprintf(&hub, "%s/hub", path) < 0)
				return -ENOMEM;
			dir = hub;
		}
		if (!(d = opendir(dir)))
			continue;
		while ((e = readdir(d)))
			if ((!strncmp(e->d_name, "models--", 8) ||
			     !strncmp(e->d_name, "datasets--", 10)) &&
			    is_dir_at(dir, e->d_name) && ++repos &&
			    !strncmp(e->d_name, "models--", 8) &&
			    (!*first || strcmp(e->d_name, first) < 0))
				snprintf(first, sizeof(first), "%s", e->d_name);
		closedir(d);
	}
	if (repos)
		rc = wstore__err(
			WSTORE_EINVAL,
			"source '%s' is a hugging face hub cache (%zu repo%s), not a checkpoint; pass one model's folder, e.g. '%s/%s' (its snapshot of main), or one of its snapshots/COMMIT folders",
			path, repos, repos == 1 ? "" : "s", dir,
			*first ? first : "models--ORG--NAME");
	free(hub);
	return rc;
}

/* "models--ORG--NAME" -> "ORG/NAME" (malloc'ed), else NULL. */
static char *hub_model_id(const char *repo_dir)
{
	const char *base = strrchr(repo_dir, '/');
	char *id, *sep;

	base = base ? base + 1 : repo_dir;
	if (strncmp(base, "models--", 8) != 0 || !base[8])
		return NULL;
	if (!(id = strdup(base + 8)))
		return NULL;
	if ((sep = strstr(id, "--")) && sep != id && sep[2]) {
		*sep = '/';
		memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
	}
	return id;
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

/* Does refs/<name> of repo hold commit? */
static int ref_names(const char *repo, const char *name, const char *commit)
{
	char *p, line[256] = "";
	FILE *f;

	if (asprintf(&p, "%s/refs/%s", repo, name) < 0)
		return 0;
	f = fopen(p, "re");
	free(p);
	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\r\n \t")] = '\0';
	return !strcmp(line, commit);
}

/* The ref naming commit ("main" first), malloc'ed, or NULL. */
static char *ref_of(const char *repo, const char *commit)
{
	char *p, *out = NULL;
	DIR *d;
	struct dirent *e;

	if (ref_names(repo, "main", commit))
		return strdup("main");
	if (asprintf(&p, "%s/refs", repo) < 0)
		return NULL;
	d = opendir(p);
	free(p);
	while (d && !out && (e = readdir(d)))
		if (e->d_name[0] != '.' && ref_names(repo, e->d_name, commit))
			out = strdup(e->d_name);
	if (d)
		closedir(d);
	return out;
}

/* dir is models--ORG--NAME/snapshots/COMMIT: fill model id, commit and
 * revision of src. */
static int hub_snapshot(wstore_source *src, const char *dir)
{
	char *real = realpath(dir, NULL), *snaps, *repo;
	const char *commit;

	if (!real)
		return 0;
	commit = strrchr(real, '/');
	if (!commit || commit == real) {
		free(real);
		return 0;
	}
	*(char *)commit++ = '\0';
	snaps = strrchr(real, '/');
	if (!snaps || strcmp(snaps, "/snapshots") != 0) {
		free(real);
		return 0;
	}
	*snaps = '\0';
	repo = real;
	if (is_dir_at(repo, "blobs") &&
	    (src->model_id = hub_model_id(repo)) != NULL) {
		src->commit = strdup(commit);
		src->rev = ref_of(repo, commit);
		if (!src->rev)
			src->rev = strdup(commit);
	}
	free(real);
	return src->model_id && (!src->commit || !src->rev) ? -ENOMEM : 0;
}

/* ---- the walk ------------------------------------------------------------ */

static int walk(const wstore_source *src, wstore__scan *out, char **dir,
		struct strs *skipped)
{
	struct filter f = { .src = src, .skipped = skipped };
	char *hub = NULL;
	int rc = wstore__resolve_hub_source(&hub, src->path, src->revision);

	*dir = NULL;
	memset(out, 0, sizeof(*out));
	if (rc == 0 && !hub)
		rc = check_hub_cache(src->path);
	if (rc < 0) {
		free(hub);
		return rc;
	}
	*dir = hub ? hub : strdup(src->path);
	if (!*dir)
		return -ENOMEM;
	rc = wstore__scan_source_filtered(out, *dir, filter, &f);
	if (rc == 0 && f.oom)
		rc = -ENOMEM;
	if (rc == 0)
		rc = check_lfs(out, src->path);
	if (rc == 0 && !src->force)
		rc = check_checkpoint(out, src->path);
	if (rc < 0)
		wstore__scan_free(out);
	return rc;
}

int wstore__source_scan(wstore__scan *out, char **dir, const wstore_source *src,
			const wstore_import_options *o)
{
	int rc;

	if (src)
		return walk(src, out, dir, NULL);
	rc = wstore__resolve_hub_source(dir, o->source, o->revision);
	if (rc == 0)
		rc = wstore__scan_source(out, *dir ? *dir : o->source);
	return rc;
}

/* ---- the public handle ----------------------------------------------------
 */

int wstore_source_new(wstore_source **out, const char *path,
		      const char *revision)
{
	wstore_source *s;

	*out = NULL;
	if (!path || !*path)
		return wstore__err(WSTORE_EINVAL, "no source directory given");
	if (revision && !*revision)
		return wstore__err(WSTORE_EINVAL, "revision must not be empty");
	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	s->path = strdup(path);
	s->revision = revision ? strdup(revision) : NULL;
	if (!s->path || (revision && !s->revision)) {
		wstore_source_free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

static void clear_examined(wstore_source *s)
{
	free(s->dir);
	free(s->model_id);
	free(s->commit);
	free(s->rev);
	s->dir = s->model_id = s->commit = s->rev = NULL;
	strs_free(&s->skipped);
	s->nfiles = 0;
	s->total = 0;
}

void wstore_source_free(wstore_source *s)
{
	if (!s)
		return;
	clear_examined(s);
	strs_free(&s->inc);
	strs_free(&s->exc);
	free(s->path);
	free(s->revision);
	free(s);
}

static int add_pattern(struct strs *to, const char *pattern, const char *what)
{
	if (!pattern || !*pattern)
		return wstore__err(WSTORE_EINVAL,
				   "%s pattern must not be empty", what);
	return strs_add(to, pattern);
}

int wstore_source_include(wstore_source *s, const char *pattern)
{
	return add_pattern(&s->inc, pattern, "include");
}

int wstore_source_exclude(wstore_source *s, const char *pattern)
{
	return add_pattern(&s->exc, pattern, "exclude");
}

void wstore_source_set_force(wstore_source *s, int force)
{
	s->force = force != 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int wstore_source_examine(wstore_source *s)
{
	wstore__scan scan;
	int rc;

	clear_examined(s);
	rc = walk(s, &scan, &s->dir, &s->skipped);
	if (rc == 0) {
		if (s->skipped.n)
			qsort(s->skipped.v, s->skipped.n, sizeof(char *),
			      cmp_str);
		s->nfiles = scan.n;
		s->total = scan.total;
		wstore__scan_free(&scan);
		rc = hub_snapshot(s, s->dir);
	}
	return rc;
}

const char *wstore_source_dir(const wstore_source *s)
{
	return s->dir;
}

const char *wstore_source_model_id(const wstore_source *s)
{
	return s->model_id;
}

const char *wstore_source_commit(const wstore_source *s)
{
	return s->commit;
}

const char *wstore_source_revision(const wstore_source *s)
{
	return s->rev;
}

const char *wstore_source_skipped(const wstore_source *s, size_t i)
{
	return i < s->skipped.n ? s->skipped.v[i] : NULL;
}

size_t wstore_source_file_count(const wstore_source *s)
{
	return s->nfiles;
}

uint64_t wstore_source_total_size(const wstore_source *s)
{
	return s->total;
}
