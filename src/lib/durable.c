/*
 * durable.c - durable local file writes (see durable.h): temp file in the
 * target's directory, fsync, rename (or linkat), directory fsync; the temp
 * is removed on every failure path.  The final name is published last.
 *
 * The temp name does not contain the final name (the file store's form
 * holds at most 200 bytes of it), so a final name as long as NAME_MAX
 * still gets a temp name that fits; it is unique per writer (pid, owner
 * tag and a process-wide counter), so two threads writing the same final
 * name never touch each other's partial file, and it names its writer
 * (pid and owner tag, owner.h) so that gc and pull tell a live writer's
 * temp file from a dead one's, also across PID namespaces:
 *
 *   file store   .tmp-<name>-<pid>-<12 hex tag><4 hex counter>
 *   local files  .wstore-tmp-<pid>-<12 hex tag>-<counter>
 *
 * (older versions wrote 16 random hex digits, and ".wstore-tmp-<pid>-<n>";
 * both parse as before, the first judged UNKNOWN, the second by its pid.)
 * The mode is given to openat: no process-wide umask games in a threaded
 * library.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "durable.h"
#include "error.h"
#include "owner.h"

static atomic_uint tmp_seq;

static void tmp_name(wstore__durable *d, const char *name)
{
	char tag[WSTORE__OWNER_TAG_LEN + 1];
	unsigned n = atomic_fetch_add(&tmp_seq, 1);

	wstore__owner_tag(tag);
	if (d->flags & WSTORE__DURABLE_KEY_TEMP)
		/* keep the name below NAME_MAX whatever name's length */
		snprintf(d->tmp, sizeof(d->tmp), ".tmp-%.200s-%ld-%s%04x", name,
			 (long)getpid(), tag, n & 0xffffu);
	else
		snprintf(d->tmp, sizeof(d->tmp), WSTORE__TMP_TAG "%ld-%s-%u",
			 (long)getpid(), tag, n);
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

/* The owner tag of a temp name whose pid is known: the 12 hex digits
 * after "-<pid>-" at the end (file store) or before "-<counter>" (local);
 * NULL when the name has none. */
static const char *tmp_tag(const char *name, unsigned flags, char *out)
{
	const char *p;
	size_t n = strlen(name);

	if (flags & WSTORE__DURABLE_KEY_TEMP) {
		p = name + n - 16;
	} else {
		p = strstr(name, WSTORE__TMP_TAG) + strlen(WSTORE__TMP_TAG);
		p += strspn(p, "0123456789");
		if (*p++ != '-')
			return NULL;
	}
	if (strspn(p, "0123456789abcdef") < WSTORE__OWNER_TAG_LEN)
		return NULL;
	if (!(flags & WSTORE__DURABLE_KEY_TEMP) &&
	    p[WSTORE__OWNER_TAG_LEN] != '-')
		return NULL;
	memcpy(out, p, WSTORE__OWNER_TAG_LEN);
	out[WSTORE__OWNER_TAG_LEN] = '\0';
	return out;
}

int wstore__tmp_writer_state(const char *name, unsigned flags)
{
	char tag[WSTORE__OWNER_TAG_LEN + 1];
	long pid = wstore__tmp_writer(name, flags);

	if (pid <= 0)
		return WSTORE__TMP_NOT;
	if (tmp_tag(name, flags, tag)) {
		switch (wstore__owner_tag_judge(pid, tag)) {
		case WSTORE__OWNER_ALIVE: return WSTORE__TMP_ALIVE;
		case WSTORE__OWNER_DEAD: return WSTORE__TMP_DEAD;
		default:
			/* another namespace, or an older name's random
			 * digits: a live process with that pid here may be
			 * its writer (as older versions judged), so keep it */
			return wstore__pid_gone(pid) ? WSTORE__TMP_UNKNOWN
						     : WSTORE__TMP_ALIVE;
		}
	}
	/* an older local name: its pid, as that version judged it */
	if (!(flags & WSTORE__DURABLE_KEY_TEMP))
		return wstore__pid_gone(pid) ? WSTORE__TMP_DEAD
					     : WSTORE__TMP_ALIVE;
	return WSTORE__TMP_UNKNOWN;
}

int wstore__tmp_is_stale(const char *name)
{
	return wstore__tmp_writer_state(name, 0) == WSTORE__TMP_DEAD;
}

int wstore__open_out_dir(const char *output, const char **base)
{
	const char *slash = strrchr(output, '/');
	char *dir;
	int fd;

	*base = slash ? slash + 1 : output;
	if (!**base)
		return wstore__err(WSTORE_EINVAL,
				   "output '%s' names a directory, not a file",
				   output);
	if (!slash)
		dir = strdup(".");
	else if (slash == output)
		dir = strdup("/");
	else
		dir = strndup(output, (size_t)(slash - output));
	if (!dir)
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		fd = wstore__errc(-errno, "cannot open the directory of '%s'",
				  output);
	free(dir);
	return fd;
}
