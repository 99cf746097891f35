/*
 * durable.c - durable local file writes (see durable.h): temp file in the
 * target's directory, fsync, rename, directory fsync; the temp is removed
 * on every failure path.  The final name is published last.
 *
 * The temp name does not contain the final name, so a final name as long
 * as NAME_MAX still gets a temp name that fits; it is unique per writer
 * (pid and a process-wide counter), so two threads writing the same final
 * name never touch each other's partial file.  The mode is given to
 * openat: no process-wide umask games in a threaded library.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "error.h"

static atomic_uint tmp_seq;

int wstore__durable_open(wstore__durable *d, int dirfd, mode_t mode,
			 const char *what)
{
	d->dirfd = dirfd;
	d->fd = -1;
	d->tmp[0] = '\0';
	for (int tries = 0; tries < 100; tries++) {
		snprintf(d->tmp, sizeof(d->tmp), WSTORE__TMP_TAG "%ld-%u",
			 (long)getpid(), atomic_fetch_add(&tmp_seq, 1));
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
	int rc = 0;

	if (fsync(d->fd) < 0)
		rc = wstore__errc(-errno, "cannot sync '%s'", what);
	if (close(d->fd) < 0 && rc == 0)
		rc = wstore__errc(-errno, "cannot write '%s'", what);
	d->fd = -1;
	if (rc == 0)
		rc = wstore__check_target(d->dirfd, name, what);
	if (rc == 0 && renameat(d->dirfd, d->tmp, d->dirfd, name) < 0)
		rc = wstore__errc(-errno, "cannot rename a temp file to '%s'",
				  what);
	if (rc < 0) {
		wstore__durable_abort(d);
		return rc;
	}
	d->tmp[0] = '\0';
	if (fsync(d->dirfd) < 0)
		return wstore__errc(-errno, "cannot sync the directory of '%s'",
				    what);
	return 0;
}

int wstore__tmp_is_stale(const char *name)
{
	const char *t = name[0] == '.' ? strstr(name, WSTORE__TMP_TAG) : NULL;
	char *end;
	long pid;

	if (!t)
		return 0;
	errno = 0;
	pid = strtol(t + strlen(WSTORE__TMP_TAG), &end, 10);
	if (errno || pid <= 0 || end == t + strlen(WSTORE__TMP_TAG) ||
	    (*end && *end != '-') || pid == (long)getpid())
		return 0;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}
