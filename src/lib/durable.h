/*
 * durable.h - write a local file so that it appears at its final name only
 * complete and on disk: a temp file with a short unique name in the same
 * directory, fsync, rename over the final name, fsync of the directory.
 * Used by materialize and pull; meant for every durable write.
 */
#ifndef WSTORE_DURABLE_H
#define WSTORE_DURABLE_H

#include <sys/types.h>

/* Temp names are ".wstore-tmp-<pid>-<n>": short enough to fit in any
 * directory whatever the final name's length, unique per writer (n is a
 * per-process counter, so threads never share one), and naming the pid so
 * that leftovers of a dead process can be found (wstore__tmp_is_stale). */
#define WSTORE__TMP_TAG ".wstore-tmp-"

typedef struct wstore__durable {
	int dirfd; /* the directory (not owned) */
	int fd;	   /* the temp file, open for writing; -1 once closed */
	char tmp[64];
} wstore__durable;

/*
 * Create a temp file in dirfd with mode (the umask applies, as for open);
 * what names the final file in messages.  On failure nothing is left and
 * the last error says why.
 */
int wstore__durable_open(wstore__durable *d, int dirfd, mode_t mode,
			 const char *what);
/*
 * fsync the temp file, close it, check that name is absent or a regular
 * file (or a symlink, which is replaced, never followed), rename the temp
 * over it and fsync the directory.  On any failure the temp is removed.
 */
int wstore__durable_commit(wstore__durable *d, const char *name,
			   const char *what);
/* Close and remove the temp file (after a failure); d may be unopened. */
void wstore__durable_abort(wstore__durable *d);

/*
 * 0 if name under dirfd is absent, a regular file or a symlink (which a
 * rename replaces without following it); else an error saying that what
 * is a directory, a FIFO, a device or a socket and will not be replaced.
 */
int wstore__check_target(int dirfd, const char *name, const char *what);

/* Whether name is a temp file of this module left by a process that is
 * gone (also the older ".<name>.wstore-tmp-<pid>" form). */
int wstore__tmp_is_stale(const char *name);

#endif
