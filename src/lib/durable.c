/*
 * durable.c - durable local file writes (see durable.h): temp file in the
 * target's directory, fsync, rename (or linkat), directory fsync; the temp
 * is removed on every failure path.  The final name is published last.
 *
 * The temp name does not contain the final name (the file store's form
 * holds at most 200 bytes of it), so a final name as long as NAME_MAX
 * still gets a temp name that fits; it is unique per writer (pid and a
 * process-wide counter, or random bits), so two threads writing the same
 * final name never touch each other's partial file, and it names the pid
 * so that gc and pull tell a live writer's temp file from a dead one's.  The
 * mode is given to openat: no process-wide umask games in a threaded library.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "durable.h"
#include "error.h"
#include "owner.h"

static atomic_uint tmp_seq;

/* The 16 hex digits of a file store temp name: random, so that writers
 * with one pid in different pid namespaces rarely meet (O_EXCL settles
 * it when they do). */
static uint64_t rand64(void)
{
	static _Atomic uint64_t counter;
	uint64_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
	return r ^ atomic_fetch_add(&counter, 1);
}

static void tmp_name(wstore__durable *d, const char *name)
{
	if (d->flags & WSTORE__DURABLE_KEY_TEMP)
		/* keep the name below NAME_MAX whatever name's length */
		snprintf(d->tmp, sizeof(d->tmp), ".tmp-%.200s-%ld-%016llx",
			 name, (long)getpid(), (unsigned long long)rand64());
	else
		snprintf(d->tmp, sizeof(d->tmp), WSTORE__TMP_TAG "%ld-%u",
			 (long)getpid(), atomic_fetch_add(&tmp_seq, 1));
}

int wstore__durable_open_flags(wstore__durable *d, int dirfd, const char *name,
			       mode_t mode, unsigned flags, const char *what)
{
	d->dirfd = dirfd;
	d->fd = -1;
	d->flags = flags;
	d->tmp[0] = '\0';
	for (int tries = 0; tries < 100; tries++) {
		tmp_name(d, name);
		d->fd = openat(dirfd, d->tmp,
			       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				       O_CLOEXEC,
			       mode);
		if (d->fd >= 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	d->tmp[0] = '\0';
	return wstore__errc(-errno, "cannot create a temp file next to '%s'",
			    what);
}

int wstore__durable_open(wstore__durable *d, int dirfd, mode_t mode,
			 const char *what)
{
	return wstore__durable_open_flags(d, dirfd, "", mode, 0, what);
}

void wstore__durable_abort(wstore__durable *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	if (d->tmp[0])
		unlinkat(d->dirfd, d->tmp, 0);
	d->tmp[0] = '\0';
}

int wstore__check_target(int dirfd, const char *name, const char *what)
{
	struct stat st;
	const char *kind;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT
			       ? 0
			       : wstore__errc(-errno, "cannot check '%s'",
					      what);
	if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))
		return 0;
	kind = S_ISDIR(st.st_mode)    ? "a directory"
	       : S_ISFIFO(st.st_mode) ? "a FIFO"
	       : S_ISCHR(st.st_mode)  ? "a character device"
	       : S_ISBLK(st.st_mode)  ? "a block device"
	       : S_ISSOCK(st.st_mode) ? "a socket"
				      : "not a regular file";
	return wstore__err(-EEXIST,
			   "'%s' exists and is %s; only a regular file is "
			   "replaced",
			   what, kind);
}

int wstore__durable_commit(wstore__durable *d, const char *name,
			   const char *what)
{
	int sync = !(d->flags & WSTORE__DURABLE_NOSYNC), rc = 0;

	if (sync && fsync(d->fd) < 0)
		rc = wstore__errc(-errno, "cannot sync '%s'", what);
	/* EINTR: the descriptor is closed all the same (Linux) */
	if (close(d->fd) < 0 && errno != EINTR && rc == 0)
		rc = wstore__errc(-errno, "cannot write '%s'", what);
	d->fd = -1;
	if (rc == 0 && !(d->flags & WSTORE__DURABLE_ANY_TARGET))
		rc = wstore__check_target(d->dirfd, name, what);
	if (rc == 0 && (d->flags & WSTORE__DURABLE_NOREPLACE)) {
		/* linkat never replaces; then the temp name goes */
		if (linkat(d->dirfd, d->tmp, d->dirfd, name, 0) < 0)
			rc = errno == EEXIST
				     ? wstore__err(-EEXIST, "'%s' exists", what)
				     : wstore__errc(-errno,
						    "cannot link a temp file "
						    "to '%s'",
						    what);
		else
			unlinkat(d->dirfd, d->tmp, 0);
	} else if (rc == 0 && renameat(d->dirfd, d->tmp, d->dirfd, name) < 0)
		rc = wstore__errc(-errno, "cannot rename a temp file to '%s'",
				  what);
	if (rc < 0) {
		wstore__durable_abort(d);
		return rc;
	}
	d->tmp[0] = '\0';
	/* EINVAL: a filesystem that cannot sync a directory */
	if (sync && fsync(d->dirfd) < 0 && errno != EINVAL)
		return wstore__errc(-errno, "cannot sync the directory of '%s'",
				    what);
	return 0;
}

/* pid in a file store temp name ".tmp-<name>-<pid>-<16 hex>", read from
 * the end since name may hold '-' and digits; 0 if it is not one. */
static long key_tmp_pid(const char *name)
{
	size_t n = strlen(name);
	const char *p;
	long pid = 0, mul = 1;

	if (strncmp(name, ".tmp-", 5) != 0 || n < 5 + 2 + 1 + 1 + 16 ||
	    name[n - 17] != '-')
		return 0;
	for (p = name + n - 18; p > name && *p >= '0' && *p <= '9'; p--) {
		if (mul > 1000000000L)
			return 0;
		pid += (*p - '0') * mul;
		mul *= 10;
	}
	if (*p != '-' || mul == 1 || pid <= 0)
		return 0;
	return pid;
}

/* pid in ".wstore-tmp-<pid>-<n>" (or the older ".<name>.wstore-tmp-<pid>");
 * 0 if name is not one. */
static long local_tmp_pid(const char *name)
{
	const char *t = name[0] == '.' ? strstr(name, WSTORE__TMP_TAG) : NULL;
	char *end;
	long pid;

	if (!t)
		return 0;
	errno = 0;
	pid = strtol(t + strlen(WSTORE__TMP_TAG), &end, 10);
	if (errno || pid <= 0 || end == t + strlen(WSTORE__TMP_TAG) ||
	    (*end && *end != '-'))
		return 0;
	return pid;
}

long wstore__tmp_writer(const char *name, unsigned flags)
{
	return flags & WSTORE__DURABLE_KEY_TEMP ? key_tmp_pid(name)
						: local_tmp_pid(name);
}

int wstore__tmp_is_stale(const char *name)
{
	long pid = local_tmp_pid(name);

	if (pid <= 0 || pid == (long)getpid())
		return 0;
	return wstore__pid_gone(pid);
}
