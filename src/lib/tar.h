/*
 * tar.h - the POSIX tar of bundles (tar.c): ustar headers, with a pax
 * extended header ('x') for a name longer than 100 bytes or a size of
 * 8 GiB or more, written and read as a stream.
 *
 * Owns: the header layout, its checksum and numbers, and what a reader
 * of a bundle accepts: regular files and the pax headers that describe
 * them, nothing else (the caller refuses every other entry type by the
 * kind tar.c names).  Knows nothing of manifests: bundle.c decides what
 * each entry must be.
 */
#ifndef WSTORE_TAR_H
#define WSTORE_TAR_H

#include <stddef.h>
#include <stdint.h>

#define WSTORE__TAR_BLOCK 512
/* Most bytes of one pax extended header a reader accepts. */
#define WSTORE__TAR_PAX_MAX ((size_t)64 << 10)

/*
 * The header (a pax 'x' entry first when needed) of a regular file name
 * of size bytes and modification time mtime (seconds), mode 0644, owner
 * 0: into out (cap bytes; 3 blocks plus the name's length is enough),
 * *out_len its length, a multiple of WSTORE__TAR_BLOCK.  WSTORE_ERANGE
 * when cap is too small.
 */
int wstore__tar_header(char *out, size_t cap, size_t *out_len, const char *name,
		       uint64_t size, int64_t mtime);
/* Zero bytes after size bytes of data, up to the next block. */
size_t wstore__tar_pad(uint64_t size);

/* A tar stream being read from fd, through a buffer. */
typedef struct wstore__tar_in {
	int fd;
	char *buf;
	size_t pos, len, cap;
	uint64_t offset;  /* bytes of the stream consumed */
	const char *what; /* the stream, for messages ("bundle '-'") */
} wstore__tar_in;

/* One entry's header. */
typedef struct wstore__tar_entry {
	char *name;	  /* malloc'ed: the pax path, else prefix/name */
	uint64_t size;	  /* bytes of data that follow */
	char type;	  /* the typeflag: '0' for a regular file */
	const char *kind; /* "regular file", "symbolic link", ... */
} wstore__tar_entry;

/* 0 or -ENOMEM; what (kept, not copied) names the stream in messages. */
int wstore__tar_in_init(wstore__tar_in *t, int fd, const char *what);
void wstore__tar_in_free(wstore__tar_in *t);
/*
 * The next entry: 1 with *e filled (the caller frees e->name), 0 at the
 * end-of-archive marker (two zero blocks), or WSTORE_EINVAL naming what
 * is wrong: the stream ends early ("is truncated"), a bad checksum, a
 * number that is not octal, a pax header too large or malformed, a
 * global pax header.  The data of the entry before must have been read
 * whole (wstore__tar_read / wstore__tar_skip).
 */
int wstore__tar_next(wstore__tar_in *t, wstore__tar_entry *e);
/* Exactly n bytes of the current entry's data into dst: 0, or an error
 * (truncated, read error). */
int wstore__tar_read(wstore__tar_in *t, void *dst, size_t n);
/* Skip n bytes (an entry's padding): 0 or an error. */
int wstore__tar_skip(wstore__tar_in *t, uint64_t n);
/* After the end-of-archive marker: read what follows (a writer's
 * record padding) up to EOF, at most limit bytes, so that the writer of
 * a pipe is not cut off. */
void wstore__tar_drain(wstore__tar_in *t, uint64_t limit);

#endif
