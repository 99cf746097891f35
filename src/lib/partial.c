/*
 * partial.c - resumable partial files of pull (see partial.h).
 *
 * A partial is named for the import and the file it holds (its id) and
 * for the process that wrote it last (pid and owner tag, owner.h), and
 * its writer holds a flock on it while it writes.  A pull takes a partial
 * only when nobody writes it: its owner provably dead (a killed or
 * interrupted CLI), or this very process with the flock free (a pull
 * that a progress callback canceled, in a process that lives on).  To
 * take it, the pull opens it, takes the flock without waiting and renames
 * it to a name of its own: two pulls into one directory never both take
 * one (the second finds the flock held, or the old name gone).
 *
 * What is kept is trusted for nothing but its length: the prefix up to
 * the last whole chunk is hashed again from the disk before the rest is
 * fetched, and the file is renamed into place only when the SHA-256 of
 * the whole file matches the manifest (pull.c).  Correctness over speed:
 * resuming costs one read of the kept bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "durable.h"
#include "error.h"
#include "owner.h"
#include "partial.h"
#include "store.h"

static atomic_uint part_seq;
/* Within one process the owner tag cannot tell a running pull from a
 * finished one, and the flock of a new partial is taken just after it is
 * created: scans and creations of this process take turns, so a scan
 * never finds one of its own partials between the two. */
static pthread_mutex_t turn = PTHREAD_MUTEX_INITIALIZER;

void wstore__partial_ident(char out[WSTORE__PART_ID_LEN + 1], const char *gen,
			   const wstore_manifest *m, const wstore__file_rec *f)
{
	wstore__sha256 *h = wstore__sha256_new();
	char num[96], hex[65];

	if (!h) {
		/* no id matches: nothing is taken, every partial is new */
		memset(out, 'x', WSTORE__PART_ID_LEN);
		out[WSTORE__PART_ID_LEN] = '\0';
		return;
	}
	wstore__sha256_update(h, "wstore-partial-1", 17);
	wstore__sha256_update(h, gen ? gen : "", strlen(gen ? gen : "") + 1);
	snprintf(num, sizeof(num), "%" PRId64 "/%" PRIu64 "/%" PRIu64,
		 m->created_at, f->size, f->chunk_size);
	wstore__sha256_update(h, num, strlen(num) + 1);
	wstore__sha256_update(h, m->checkpoint_id,
			      strlen(m->checkpoint_id) + 1);
	wstore__sha256_update(h, f->path, strlen(f->path) + 1);
	wstore__sha256_update(h, f->sha256, strlen(f->sha256) + 1);
	for (uint64_t c = 0; c < f->nchunks; c++)
		wstore__sha256_update(h, f->chunks[c],
				      strlen(f->chunks[c]) + 1);
	wstore__sha256_hex(h, hex);
	wstore__sha256_free(h);
	memcpy(out, hex, WSTORE__PART_ID_LEN);
	out[WSTORE__PART_ID_LEN] = '\0';
}

/* Parse ".wstore-part-<id>-<pid>-<tag>-<n>": 0 with id, pid and tag set,
 * -1 for any other name. */
static int parse_name(const char *name, char *id, long *pid, char *tag)
{
	static const char dec[] = "0123456789", hex[] = "0123456789abcdef";
	const char *p = name + strlen(WSTORE__PART_TAG);
	size_t n;

	if (strncmp(name, WSTORE__PART_TAG, strlen(WSTORE__PART_TAG)) != 0 ||
	    strspn(p, hex) != WSTORE__PART_ID_LEN ||
	    p[WSTORE__PART_ID_LEN] != '-')
		return -1;
	memcpy(id, p, WSTORE__PART_ID_LEN);
	id[WSTORE__PART_ID_LEN] = '\0';
	p += WSTORE__PART_ID_LEN + 1;
	if (!(n = strspn(p, dec)) || n > 9 || p[n] != '-')
		return -1;
	*pid = strtol(p, NULL, 10);
	p += n + 1;
	if (strspn(p, hex) != WSTORE__OWNER_TAG_LEN ||
	    p[WSTORE__OWNER_TAG_LEN] != '-')
		return -1;
	memcpy(tag, p, WSTORE__OWNER_TAG_LEN);
	tag[WSTORE__OWNER_TAG_LEN] = '\0';
	p += WSTORE__OWNER_TAG_LEN + 1;
	if (!(n = strspn(p, dec)) || p[n])
		return -1;
	return *pid > 0 ? 0 : -1;
}

static void new_name(char *out, size_t cap, const char *id)
{
	char tag[WSTORE__OWNER_TAG_LEN + 1];

	wstore__owner_tag(tag);
	snprintf(out, cap, WSTORE__PART_TAG "%s-%ld-%s-%u", id, (long)getpid(),
		 tag, atomic_fetch_add(&part_seq, 1));
}

/* Open name under dirfd with its flock taken, when no process writes it:
 * its owner is provably dead, or this process with the flock free.  The
 * fd, or -1. */
static int open_free(int dirfd, const char *name, long pid, const char *tag)
{
	char self[WSTORE__OWNER_TAG_LEN + 1];
	int fd;

	wstore__owner_tag(self);
	if (!(pid == (long)getpid() && strcmp(tag, self) == 0) &&
	    wstore__owner_tag_judge(pid, tag) != WSTORE__OWNER_DEAD)
		return -1;
	fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Look at one directory entry: take it (1, p filled), remove it or leave
 * it (0). */
static int consider(wstore__partial *p, const char *name, const char *want,
		    wstore__partial_wanted wanted, void *ctx, int force,
		    int take)
{
	char id[WSTORE__PART_ID_LEN + 1], tag[WSTORE__OWNER_TAG_LEN + 1];
	struct stat st;
	long pid;
	int fd, mine;

	if (parse_name(name, id, &pid, tag) < 0)
		return 0;
	mine = strcmp(id, want) == 0;
	/* another file's of this import: its own pull takes it */
	if (!force && !mine && wanted && wanted(id, ctx))
		return 0;
	if ((fd = open_free(p->dirfd, name, pid, tag)) < 0)
		return 0;
	if (take && !force && mine && p->fd < 0 && fstat(fd, &st) == 0 &&
	    S_ISREG(st.st_mode)) {
		new_name(p->name, sizeof(p->name), want);
		if (renameat(p->dirfd, name, p->dirfd, p->name) == 0) {
			p->fd = fd;
			p->taken = 1;
			return 1;
		}
	}
	/* a second one of this file, or one nobody wants */
	unlinkat(p->dirfd, name, 0);
	close(fd);
	return 0;
}

/* One pass over dirfd's entries (a new open file description: a dup()
 * would share the read offset of dirfd). */
static void scan(wstore__partial *p, int dirfd, const char *id,
		 wstore__partial_wanted wanted, void *ctx, int force, int take)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	p->dirfd = dirfd;
	p->fd = -1;
	p->taken = 0;
	p->name[0] = '\0';
	if (!d && fd >= 0)
		close(fd);
	while (d && (de = readdir(d)))
		consider(p, de->d_name, id, wanted, ctx, force, take);
	if (d)
		closedir(d);
}

void wstore__partial_sweep(int dirfd, const char *id,
			   wstore__partial_wanted wanted, void *ctx)
{
	wstore__partial p;

	pthread_mutex_lock(&turn);
	scan(&p, dirfd, id, wanted, ctx, 0, 0);
	pthread_mutex_unlock(&turn);
}

/* A new empty partial for id, its flock held. */
static int create(wstore__partial *p, int dirfd, const char *id)
{
	for (int tries = 0; tries < 100; tries++) {
		new_name(p->name, sizeof(p->name), id);
		p->fd = openat(dirfd, p->name,
			       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
				       O_CLOEXEC,
			       0644);
		if (p->fd >= 0) {
			/* another process leaves a live writer's file alone,
			 * and this one waits for the turn */
			flock(p->fd, LOCK_EX | LOCK_NB);
			return 0;
		}
		if (errno != EEXIST)
			break;
	}
	p->name[0] = '\0';
	return -errno;
}

int wstore__partial_open(wstore__partial *p, int dirfd, const char *id,
			 wstore__partial_wanted wanted, void *ctx, int force,
			 const char *what)
{
	int rc = 0;

	pthread_mutex_lock(&turn);
	scan(p, dirfd, id, wanted, ctx, force, 1);
	if (p->fd < 0)
		rc = create(p, dirfd, id);
	pthread_mutex_unlock(&turn);
	if (rc < 0)
		return wstore__errc(
			rc, "cannot create a partial file next to '%s'", what);
	return 0;
}

/* Hash bytes [0, n) of fd into h through buf. */
static int rehash(int fd, uint64_t n, wstore__sha256 *h, void *buf, size_t cap,
		  const char *what)
{
	uint64_t off = 0;

	while (off < n) {
		size_t want = n - off < cap ? (size_t)(n - off) : cap;
		ssize_t r = pread(fd, buf, want, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return wstore__errc(r < 0 ? -errno : -EIO,
					    "cannot read the partial file of "
					    "'%s'",
					    what);
		wstore__sha256_update(h, buf, (size_t)r);
		off += (uint64_t)r;
	}
	return 0;
}

int wstore__partial_prefix(wstore__partial *p, const wstore__file_rec *f,
			   wstore__sha256 *h, void *buf, size_t cap,
			   uint64_t *out_first, uint64_t *out_kept)
{
	uint64_t kept = 0, first = 0, n;
	struct stat st;
	int rc;

	*out_first = *out_kept = 0;
	if (fstat(p->fd, &st) < 0)
		return wstore__errc(-errno, "cannot stat the partial of '%s'",
				    f->path);
	for (; first < f->nchunks; first++) {
		if ((rc = wstore__chunk_len(&n, f, first)) < 0)
			return rc;
		if (kept + n > (uint64_t)st.st_size)
			break;
		kept += n;
	}
	if (ftruncate(p->fd, (off_t)kept) < 0)
		return wstore__errc(
			-errno, "cannot truncate the partial of '%s'", f->path);
	if (h && (rc = rehash(p->fd, kept, h, buf, cap, f->path)) < 0)
		return rc;
	if (lseek(p->fd, (off_t)kept, SEEK_SET) < 0)
		return wstore__errc(
			-errno, "cannot seek in the partial of '%s'", f->path);
	*out_first = first;
	*out_kept = kept;
	return 0;
}

int wstore__partial_reset(wstore__partial *p, const char *what)
{
	if (ftruncate(p->fd, 0) < 0 || lseek(p->fd, 0, SEEK_SET) < 0)
		return wstore__errc(-errno, "cannot empty the partial of '%s'",
				    what);
	return 0;
}

int wstore__partial_commit(wstore__partial *p, const char *base,
			   const char *what)
{
	int rc = 0;

	if (fsync(p->fd) < 0)
		rc = wstore__errc(-errno, "cannot sync '%s'", what);
	/* closed (the flock gone) and renamed in one turn: a scan of this
	 * process never finds the file free under its partial name */
	pthread_mutex_lock(&turn);
	if (rc == 0 && close(p->fd) < 0 && errno != EINTR)
		rc = wstore__errc(-errno, "cannot write '%s'", what);
	p->fd = rc == 0 ? -1 : p->fd;
	if (rc == 0)
		rc = wstore__check_target(p->dirfd, base, what);
	if (rc == 0 && renameat(p->dirfd, p->name, p->dirfd, base) < 0)
		rc = wstore__errc(-errno,
				  "cannot rename a partial file to '%s'", what);
	if (rc < 0)
		wstore__partial_drop(p);
	pthread_mutex_unlock(&turn);
	if (rc < 0)
		return rc;
	p->name[0] = '\0';
	/* EINVAL: a filesystem that cannot sync a directory */
	if (fsync(p->dirfd) < 0 && errno != EINVAL)
		return wstore__errc(-errno, "cannot sync the directory of '%s'",
				    what);
	return 0;
}

void wstore__partial_keep(wstore__partial *p)
{
	if (p->fd >= 0) {
		fdatasync(p->fd);
		close(p->fd);
	}
	p->fd = -1;
	p->name[0] = '\0';
}

void wstore__partial_drop(wstore__partial *p)
{
	if (p->name[0])
		unlinkat(p->dirfd, p->name, 0);
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->name[0] = '\0';
}
