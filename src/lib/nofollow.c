/*
 * nofollow.c - reach a directory below another one without following a
 * symlink: each component is opened with openat(O_NOFOLLOW | O_DIRECTORY)
 * from the fd of the one before, so a symlink planted on the way is an
 * error (ELOOP), never a way out.  Missing directories can be made on the
 * way (mkdirat, and an fsync of their parent for durable writes).
 *
 * The one copy of this walk, for the file store (declared in
 * backends/helpers.h, which the backends may include) and for pull.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/helpers.h"

int wstore__nofollow_subdir(int fd, const char *name)
{
	struct stat st;
	int sub = openat(fd, name,
			 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (sub < 0 && (errno == ENOTDIR || errno == ELOOP) &&
	    fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		errno = ELOOP;
	return sub;
}

/* Open (with create: making it if missing) directory name under fd.
 * Returns the fd or -1 with errno set and *creating set if the mkdirat
 * was what failed. */
static int step(int fd, const char *name, unsigned flags, int *creating)
{
	int sub = wstore__nofollow_subdir(fd, name);

	if (sub >= 0 || errno != ENOENT || !(flags & WSTORE__NOFOLLOW_CREATE))
		return sub;
	if (mkdirat(fd, name, 0755) == 0) {
		if (flags & WSTORE__NOFOLLOW_SYNC)
			fsync(fd);
	} else if (errno != EEXIST) {
		*creating = 1;
		return -1;
	}
	return wstore__nofollow_subdir(fd, name);
}

int wstore__nofollow_parent(int dirfd, const char *path, unsigned flags,
			    size_t *out_base, wstore__nofollow_fail *fail)
{
	char name[NAME_MAX + 1];
	const char *seg = path, *slash;
	int fd = dirfd, creating = 0;

	while ((slash = strchr(seg, '/'))) {
		size_t n = (size_t)(slash - seg);
		int sub = -1, err = ENAMETOOLONG;

		if (n <= NAME_MAX) {
			memcpy(name, seg, n);
			name[n] = '\0';
			sub = step(fd, name, flags, &creating);
			err = errno;
		}
		if (fd != dirfd)
			close(fd);
		if (sub < 0) {
			if (fail) {
				fail->len = (size_t)(slash - path);
				fail->creating = creating;
			}
			return -err;
		}
		fd = sub;
		seg = slash + 1;
	}
	*out_base = (size_t)(seg - path);
	return fd;
}
