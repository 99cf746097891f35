/*
 * standin.c - a CONTRACT STAND-IN for libmooncake_store.so.  This is not
 * Mooncake and shares no code with it: it exports the mooncake_store_*
 * functions listed in docs/mooncake.md and imitates the behaviour observed
 * on a real Mooncake Store recorded there, so that wstore's Mooncake backend
 * can be tested through the same dlopen path on machines without Mooncake.
 *
 * What it imitates:
 *  - write-once put: put on an existing key returns 0 and keeps the old
 *    bytes (link(2) of a finished temp file, so it holds across processes);
 *  - zero-length put: -600; put (not put_from) of a value larger than the
 *    local_buffer_size given to setup: -600;
 *  - missing key: is_exist 0, get_size / get_into / remove -704;
 *  - is_exist, get_size and get_into grant the key a lease (default 10 s,
 *    $MOONCAKE_STANDIN_LEASE_MS): a non-forced remove in that window
 *    returns -706, a forced one succeeds;
 *  - get_into with a buffer smaller than the value: -600;
 *  - no listing (the API has none).
 * Choices of the stand-in (not observed on Mooncake):
 *  - get_into, batch_get_into, put_from and batch_put_from need the whole
 *    [buf, buf + size) inside one region given to register_buffer, else
 *    they return -600;
 *  - $MOONCAKE_STANDIN_FAIL_SETUP=1 makes setup return -900, as an
 *    unreachable master would; $MOONCAKE_STANDIN_NO_SEGMENT=1 makes puts
 *    return -200, as a pool with no storage node does;
 *  - $MOONCAKE_STANDIN_TRANSFER_FAIL=N makes the first N transfers of each
 *    client (put_from, get_into, each key of the batch calls) return -800,
 *    as a storage node that died does until the master drops it;
 *  - any call before a successful setup returns -1.
 *
 * Storage: a directory shared by every process that sets the same
 * $MOONCAKE_STANDIN_DIR (created if missing); without it, a private
 * temporary directory removed by destroy.  Layout:
 *   DIR/objects/<escaped key>   one file per object, holding its bytes
 *   DIR/tmp/                    values being written
 * A key is escaped byte by byte ([A-Za-z0-9._-] kept, anything else %XX,
 * a leading '.' too) and cut into 200-byte pieces: every piece but the last
 * is a directory named "<piece>@", so long keys fit NAME_MAX and the name
 * still converts back to the key (remove_by_regex walks the tree).  A
 * lease is the object file's mtime set to the lease's expiry; a fresh put
 * leaves mtime in the past, i.e. no lease.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* Built a second time with this defined, to test a library that lacks a
 * symbol the backend needs. */
#ifdef STANDIN_OMIT_GET_INTO
#define GET_INTO_EXPORT static
#else
#define GET_INTO_EXPORT EXPORT
#endif

#define MC_INTERNAL (-1)
#define MC_NO_SEGMENT (-200)
#define MC_INVALID (-600)
#define MC_NOT_FOUND (-704)
#define MC_LEASED (-706)
#define MC_TRANSFER_FAIL (-800)
#define MC_RPC_FAILED (-900)

#define PIECE 200

struct mooncake_replicate_config {
	size_t replica_num;
	int with_soft_pin;
	int with_hard_pin;
	const char **preferred_segments;
	size_t preferred_segments_count;
};

struct region {
	char *base;
	size_t size;
};

struct standin {
	pthread_mutex_t lock; /* guards regions */
	struct region *regions;
	size_t nregions;
	char *dir;
	int own_dir; /* private temp dir: removed by destroy */
	int ready;   /* setup succeeded */
	uint64_t lease_ms;
	uint64_t local_buffer_size;
	unsigned long transfer_fail; /* transfers still to fail (-800) */
};

/* ---- paths ------------------------------------------------------------- */

static int keep_byte(unsigned char c, size_t i)
{
	if (c == '.')
		return i > 0;
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* DIR/objects/<escaped key, cut into pieces>; NULL if too long. */
static char *object_path(const struct standin *s, const char *key)
{
	size_t klen = strlen(key), cap = strlen(s->dir) + 16 + klen * 4;
	char *p, *e;
	size_t piece = 0;

	if (klen == 0 || !(p = malloc(cap)))
		return NULL;
	e = p + sprintf(p, "%s/objects/", s->dir);
	for (size_t i = 0; i < klen; i++) {
		unsigned char c = (unsigned char)key[i];

		if (piece >= PIECE) {
			*e++ = '@';
			*e++ = '/';
			piece = 0;
		}
		if (keep_byte(c, i)) {
			*e++ = (char)c;
			piece++;
		} else {
			e += sprintf(e, "%%%02X", c);
			piece += 3;
		}
	}
	*e = '\0';
	return p;
}

/* mkdir -p of the directories above path (best effort). */
static void make_parents(const char *path)
{
	char *p = strdup(path);

	if (!p)
		return;
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	free(p);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void grant_lease(const struct standin *s, const char *path)
{
	uint64_t until = now_ms() + s->lease_ms;
	struct timespec t[2];

	t[0].tv_sec = 0;
	t[0].tv_nsec = UTIME_OMIT;
	t[1].tv_sec = (time_t)(until / 1000);
	t[1].tv_nsec = (long)(until % 1000) * 1000000;
	utimensat(AT_FDCWD, path, t, 0);
}

static int leased(const struct stat *st)
{
	uint64_t m = (uint64_t)st->st_mtim.tv_sec * 1000 +
		     (uint64_t)st->st_mtim.tv_nsec / 1000000;

	return m > now_ms();
}

/* ---- handle and setup -------------------------------------------------- */

EXPORT void *mooncake_store_create(void)
{
	struct standin *s = calloc(1, sizeof(*s));

	if (s)
		pthread_mutex_init(&s->lock, NULL);
	return s;
}

static void rmtree(const char *dir)
{
	char *cmd;

	if (asprintf(&cmd, "rm -rf '%s'", dir) < 0)
		return;
	if (system(cmd) != 0)
		fprintf(stderr, "standin: cannot remove '%s'\n", dir);
	free(cmd);
}

EXPORT void mooncake_store_destroy(void *h)
{
	struct standin *s = h;

	if (!s)
		return;
	if (s->own_dir && s->dir)
		rmtree(s->dir);
	free(s->dir);
	free(s->regions);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int make_dirs(struct standin *s)
{
	const char *env = getenv("MOONCAKE_STANDIN_DIR");
	char sub[PATH_MAX];

	if (env && *env) {
		s->dir = strdup(env);
		if (!s->dir)
			return MC_INTERNAL;
		mkdir(s->dir, 0755);
	} else {
		const char *tmp = getenv("TMPDIR");

		if (asprintf(&s->dir, "%s/mooncake-standin-XXXXXX",
			     tmp ? tmp : "/tmp") < 0) {
			s->dir = NULL;
			return MC_INTERNAL;
		}
		if (!mkdtemp(s->dir))
			return MC_INTERNAL;
		s->own_dir = 1;
	}
	snprintf(sub, sizeof(sub), "%s/objects", s->dir);
	mkdir(sub, 0755);
	snprintf(sub, sizeof(sub), "%s/tmp", s->dir);
	mkdir(sub, 0755);
	return access(sub, W_OK) == 0 ? 0 : MC_INTERNAL;
}

EXPORT int mooncake_store_setup(void *h, const char *local_hostname,
				const char *metadata_server,
				uint64_t global_segment_size,
				uint64_t local_buffer_size,
				const char *protocol, const char *device_name,
				const char *master_server_addr)
{
	struct standin *s = h;
	const char *fail = getenv("MOONCAKE_STANDIN_FAIL_SETUP");
	const char *lease = getenv("MOONCAKE_STANDIN_LEASE_MS");
	const char *tf = getenv("MOONCAKE_STANDIN_TRANSFER_FAIL");

	(void)global_segment_size;
	if (!s || !local_hostname || !metadata_server || !protocol ||
	    !device_name || !master_server_addr || s->ready)
		return MC_INTERNAL;
	if (fail && strcmp(fail, "1") == 0)
		return MC_RPC_FAILED;
	s->lease_ms = lease && *lease ? strtoull(lease, NULL, 10) : 10000;
	s->local_buffer_size = local_buffer_size;
	s->transfer_fail = tf && *tf ? strtoul(tf, NULL, 10) : 0;
	if (make_dirs(s) != 0)
		return MC_INTERNAL;
	s->ready = 1;
	return 0;
}

EXPORT int mooncake_store_health_check(void *h)
{
	struct standin *s = h;

	return s && s->ready ? 0 : MC_INTERNAL;
}

/* ---- registered buffers ------------------------------------------------ */

EXPORT int mooncake_store_register_buffer(void *h, void *buf, size_t size)
{
	struct standin *s = h;
	struct region *r;

	if (!s || !s->ready || !buf || !size)
		return MC_INVALID;
	pthread_mutex_lock(&s->lock);
	r = realloc(s->regions, (s->nregions + 1) * sizeof(*r));
	if (r) {
		s->regions = r;
		r[s->nregions].base = buf;
		r[s->nregions].size = size;
		s->nregions++;
	}
	pthread_mutex_unlock(&s->lock);
	return r ? 0 : MC_INTERNAL;
}

EXPORT int mooncake_store_unregister_buffer(void *h, void *buf)
{
	struct standin *s = h;
	int rc = MC_INVALID;

	if (!s || !s->ready)
		return MC_INTERNAL;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nregions; i++) {
		if (s->regions[i].base == buf) {
			s->regions[i] = s->regions[--s->nregions];
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int registered(struct standin *s, const void *buf, size_t size)
{
	const char *p = buf;
	int ok = 0;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->nregions && !ok; i++) {
		const struct region *r = &s->regions[i];

		ok = p >= r->base && size <= r->size &&
		     (size_t)(p - r->base) <= r->size - size;
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}

/* Whether this transfer is one of the first $MOONCAKE_STANDIN_TRANSFER_FAIL
 * of the client, which fail. */
static int transfer_fails(struct standin *s)
{
	int fail;

	pthread_mutex_lock(&s->lock);
	fail = s->transfer_fail > 0;
	if (fail)
		s->transfer_fail--;
	pthread_mutex_unlock(&s->lock);
	return fail;
}

/* ---- put --------------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Write-once: the value lands in tmp/, then link() publishes it unless the
 * key exists, in which case the old bytes stay and 0 is returned. */
static int store_value(struct standin *s, const char *key, const void *value,
		       size_t size)
{
	char tmp[PATH_MAX], *path;
	int fd, rc = 0;
	const char *noseg = getenv("MOONCAKE_STANDIN_NO_SEGMENT");

	if (!key || !value || size == 0)
		return MC_INVALID;
	if (noseg && strcmp(noseg, "1") == 0)
		return MC_NO_SEGMENT;
	snprintf(tmp, sizeof(tmp), "%s/tmp/put-XXXXXX", s->dir);
	fd = mkstemp(tmp);
	if (fd < 0)
		return MC_INTERNAL;
	path = object_path(s, key);
	if (!path || write_all(fd, value, size) != 0) {
		rc = MC_INTERNAL;
	} else {
		make_parents(path);
		if (link(tmp, path) != 0 && errno != EEXIST)
			rc = MC_INTERNAL;
	}
	close(fd);
	unlink(tmp);
	free(path);
	return rc;
}

EXPORT int mooncake_store_put(void *h, const char *key, const void *value,
			      size_t size,
			      const struct mooncake_replicate_config *cfg)
{
	struct standin *s = h;

	if (!s || !s->ready)
		return MC_INTERNAL;
	if (!cfg || size > s->local_buffer_size)
		return MC_INVALID;
	return store_value(s, key, value, size);
}

EXPORT int mooncake_store_put_from(void *h, const char *key, void *buf,
				   size_t size,
				   const struct mooncake_replicate_config *cfg)
{
	struct standin *s = h;

	if (!s || !s->ready)
		return MC_INTERNAL;
	if (!cfg || !registered(s, buf, size))
		return MC_INVALID;
	if (transfer_fails(s))
		return MC_TRANSFER_FAIL;
	return store_value(s, key, buf, size);
}

EXPORT int
mooncake_store_batch_put_from(void *h, const char **keys, void **bufs,
			      const size_t *sizes, size_t count,
			      const struct mooncake_replicate_config *cfg,
			      int *results_out)
{
	if (!keys || !bufs || !sizes || !results_out)
		return MC_INVALID;
	for (size_t i = 0; i < count; i++)
		results_out[i] = mooncake_store_put_from(h, keys[i], bufs[i],
							 sizes[i], cfg);
	return 0;
}

/* ---- reads ------------------------------------------------------------- */

EXPORT int mooncake_store_is_exist(void *h, const char *key)
{
	struct standin *s = h;
	char *path;
	int rc;

	if (!s || !s->ready || !key)
		return MC_INTERNAL;
	path = object_path(s, key);
	if (!path)
		return MC_INTERNAL;
	rc = access(path, F_OK) == 0;
	if (rc)
		grant_lease(s, path);
	free(path);
	return rc;
}

EXPORT int mooncake_store_batch_is_exist(void *h, const char **keys,
					 size_t count, int *results_out)
{
	if (!keys || !results_out)
		return MC_INVALID;
	for (size_t i = 0; i < count; i++)
		results_out[i] = mooncake_store_is_exist(h, keys[i]);
	return 0;
}

EXPORT int64_t mooncake_store_get_size(void *h, const char *key)
{
	struct standin *s = h;
	struct stat st;
	char *path;
	int64_t rc;

	if (!s || !s->ready || !key)
		return MC_INTERNAL;
	path = object_path(s, key);
	if (!path)
		return MC_INTERNAL;
	if (stat(path, &st) == 0) {
		rc = (int64_t)st.st_size;
		grant_lease(s, path);
	} else {
		rc = errno == ENOENT || errno == ENOTDIR ? MC_NOT_FOUND
							 : MC_INTERNAL;
	}
	free(path);
	return rc;
}

static int64_t read_value(int fd, char *buf, size_t size)
{
	struct stat st;
	size_t done = 0;

	if (fstat(fd, &st) != 0)
		return MC_INTERNAL;
	if ((uint64_t)st.st_size > size)
		return MC_INVALID;
	while (done < (size_t)st.st_size) {
		ssize_t r = pread(fd, buf + done, (size_t)st.st_size - done,
				  (off_t)done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return MC_INTERNAL;
		done += (size_t)r;
	}
	return (int64_t)done;
}

GET_INTO_EXPORT int64_t mooncake_store_get_into(void *h, const char *key,
						void *buf, size_t size)
{
	struct standin *s = h;
	char *path;
	int64_t rc;
	int fd;

	if (!s || !s->ready || !key)
		return MC_INTERNAL;
	if (!buf || !registered(s, buf, size))
		return MC_INVALID;
	if (transfer_fails(s))
		return MC_TRANSFER_FAIL;
	path = object_path(s, key);
	if (!path)
		return MC_INTERNAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == ENOENT || errno == ENOTDIR ? MC_NOT_FOUND
							 : MC_INTERNAL;
	} else {
		rc = read_value(fd, buf, size);
		close(fd);
		grant_lease(s, path);
	}
	free(path);
	return rc;
}

EXPORT int mooncake_store_batch_get_into(void *h, const char **keys,
					 void **bufs, const size_t *sizes,
					 size_t count, int64_t *results_out)
{
	if (!keys || !bufs || !sizes || !results_out)
		return MC_INVALID;
	for (size_t i = 0; i < count; i++)
		results_out[i] =
			mooncake_store_get_into(h, keys[i], bufs[i], sizes[i]);
	return 0;
}

/* ---- removal ----------------------------------------------------------- */

static int remove_path(const char *path, int force)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return errno == ENOENT || errno == ENOTDIR ? MC_NOT_FOUND
							   : MC_INTERNAL;
	if (!force && leased(&st))
		return MC_LEASED;
	if (unlink(path) != 0)
		return errno == ENOENT ? MC_NOT_FOUND : MC_INTERNAL;
	return 0;
}

EXPORT int mooncake_store_remove(void *h, const char *key, int force)
{
	struct standin *s = h;
	char *path;
	int rc;

	if (!s || !s->ready || !key)
		return MC_INTERNAL;
	path = object_path(s, key);
	if (!path)
		return MC_INTERNAL;
	rc = remove_path(path, force);
	free(path);
	return rc;
}

/* Key of an object file below DIR/objects ("rel"), unescaped in place. */
static void unescape_key(char *rel)
{
	char *w = rel;

	for (char *r = rel; *r; r++) {
		unsigned v;

		if (r[0] == '@' && r[1] == '/') {
			r++;
		} else if (r[0] == '%' && sscanf(r + 1, "%2X", &v) == 1) {
			*w++ = (char)v;
			r += 2;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* Remove every object below dir whose key matches re (all if re is NULL);
 * returns the number removed, or a negative code. */
static int64_t sweep(const char *root, const char *dir, const regex_t *re,
		     int force)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int64_t n = 0;

	if (!d)
		return errno == ENOENT ? 0 : MC_INTERNAL;
	while ((e = readdir(d)) != NULL) {
		char path[PATH_MAX], key[PATH_MAX];
		size_t len = strlen(e->d_name);

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (len && e->d_name[len - 1] == '@') {
			int64_t r = sweep(root, path, re, force);

			n += r > 0 ? r : 0;
			continue;
		}
		snprintf(key, sizeof(key), "%s", path + strlen(root) + 1);
		unescape_key(key);
		if (re && regexec(re, key, 0, NULL, 0) != 0)
			continue;
		if (remove_path(path, force) == 0)
			n++;
	}
	closedir(d);
	return n;
}

EXPORT int64_t mooncake_store_remove_by_regex(void *h, const char *regex,
					      int force)
{
	struct standin *s = h;
	char root[PATH_MAX];
	regex_t re;
	int64_t n;

	if (!s || !s->ready || !regex)
		return MC_INTERNAL;
	if (regcomp(&re, regex, REG_EXTENDED | REG_NOSUB) != 0)
		return MC_INVALID;
	snprintf(root, sizeof(root), "%s/objects", s->dir);
	n = sweep(root, root, &re, force);
	regfree(&re);
	return n;
}

EXPORT int64_t mooncake_store_remove_all(void *h, int force)
{
	struct standin *s = h;
	char root[PATH_MAX];

	if (!s || !s->ready)
		return MC_INTERNAL;
	snprintf(root, sizeof(root), "%s/objects", s->dir);
	return sweep(root, root, NULL, force);
}
