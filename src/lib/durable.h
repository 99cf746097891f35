/*
 * durable.h - write a local file so that it appears at its final name only
 * complete and on disk: a temp file with a short unique name in the same
 * directory, fsync, rename over the final name, fsync of the directory.
 * Used by the file store, materialize, pull and config.
 *
 * Owns: the temp names (both forms), what a durable write does and in
 * which order.  The write itself (wstore__durable_open_flags,
 * wstore__durable_commit, wstore__durable_abort, the WSTORE__DURABLE_*
 * modes) is declared in backends/helpers.h, which the file store shares;
 * this header adds what only the core uses.
 */
#ifndef WSTORE_DURABLE_H
#define WSTORE_DURABLE_H

#include <sys/types.h>

#include "backends/helpers.h"

/* Temp names are ".wstore-tmp-<pid>-<owner tag>-<n>": short enough to fit
 * in any directory whatever the final name's length, unique per writer (n
 * is a per-process counter, so threads never share one), and naming the
 * writer (owner.h) so that leftovers of a dead process can be found
 * (wstore__tmp_is_stale, wstore__tmp_writer_state in backends/helpers.h). */
#define WSTORE__TMP_TAG ".wstore-tmp-"

/* wstore__durable_open_flags with no flags: a regular target, synced. */
int wstore__durable_open(wstore__durable *d, int dirfd, mode_t mode,
			 const char *what);

/*
 * 0 if name under dirfd is absent, a regular file or a symlink (which a
 * rename replaces without following it); else an error saying that what
 * is a directory, a FIFO, a device or a socket and will not be replaced.
 */
int wstore__check_target(int dirfd, const char *name, const char *what);

/* Open the directory of output, a path of the caller's own (symlinks in
 * it are followed), and point *base at output's last component, which
 * must not be empty; the descriptor, or a negative code with the error
 * set.  The caller closes it. */
int wstore__open_out_dir(const char *output, const char **base);

/* Whether name is a temp file of this module left by a process that is
 * provably gone (wstore__tmp_writer_state says WSTORE__TMP_DEAD; also the
 * older ".<name>.wstore-tmp-<pid>" form, by its pid). */
int wstore__tmp_is_stale(const char *name);

#endif
