/*
 * materialize.c - write one file of a checkpoint to the local filesystem,
 * and the chunk-streaming loop that pull and verify share: each chunk is
 * read into a reused buffer, hashed and written; the result is published
 * only when its size and SHA-256 match the manifest (durable.c: temp file,
 * fsync, rename, directory fsync), so a failure never leaves a partial file
 * at the final path.  Only a regular file (or a symlink, replaced, not
 * followed) is ever replaced.
 *
 * On a store that hands out chunk files (open_fd, trusted, not write-once:
 * the embedded file store) a chunk is streamed from its file in PIECE-sized
 * reads through the start of the same buffer instead: the piece stays in
 * the CPU cache between the read, the hash and the write, where a whole
 * 64 MiB chunk goes out to memory and back twice.  Chunk files are
 * replaced, never rewritten, so the open file keeps the bytes it had.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "digest.h"
#include "error.h"
#include "manifest.h"
#include "readv.h"
#include "store.h"
#include "util.h"

uint64_t wstore__max_chunk(const wstore_manifest *m)
{
	uint64_t max = 0;

	for (size_t i = 0; i < m->nfiles; i++) {
		const wstore__file_rec *f = &m->files[i];
		uint64_t c = f->chunk_size && f->chunk_size < f->size
				     ? f->chunk_size
				     : f->size;

		if (c > max)
			max = c;
	}
	return max;
}

static int write_full(int fd, const void *buf, size_t n, const char *what)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = write(fd, (const char *)buf + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return wstore__errc(-errno, "cannot write '%s'", what);
		done += (size_t)w;
	}
	return 0;
}

/* Piece of a chunk file read at a time: fits in a core's L2 cache. */
#define PIECE (512u << 10)

static int chunk_fd_ok(const wstore_store *s)
{
	const wstore_backend *b = s->b;

	return b->open_fd && !(b->flags & (WSTORE_BACKEND_UNTRUSTED |
					   WSTORE_BACKEND_WRITE_ONCE));
}

/*
 * Chunk c (n bytes by the manifest) of f from its chunk file: hashed into
 * h if set, written to fd if >= 0.  The length is checked against n before
 * anything is written, with the errors wstore__read_chunk gives.
 */
static int stream_chunk_fd(wstore_store *s, const wstore__file_rec *f,
			   uint64_t c, uint64_t n, int fd, char *buf,
			   size_t cap, wstore__sha256 *h)
{
	size_t piece = cap < PIECE ? cap : PIECE;
	struct stat st;
	uint64_t off = 0, base = 0, got = 0;
	int cfd = -1, rc = wstore__open_range(s, f->chunks[c], &cfd, &base);

	if (rc == 0 && fstat(cfd, &st) < 0)
		rc = wstore__errc(-errno, "file '%s': cannot stat chunk '%s'",
				  f->path, f->chunks[c]);
	if (rc == 0)
		got = wstore__range_len(f, c, base, (uint64_t)st.st_size);
	if (rc == 0 && got != n)
		rc = wstore__check_chunk(s, f, c, 0, (size_t)got, n);
	else if (rc < 0)
		rc = wstore__check_chunk(s, f, c, rc, 0, n);
	posix_fadvise(cfd, 0, 0, POSIX_FADV_SEQUENTIAL);
	while (rc == 0 && off < n) {
		size_t want = n - off < piece ? (size_t)(n - off) : piece;
		ssize_t r = pread(cfd, buf, want, (off_t)(base + off));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? wstore__errc(-errno,
						  "file '%s': cannot read "
						  "chunk '%s'",
						  f->path, f->chunks[c])
				   : wstore__check_chunk(s, f, c, 0,
							 (size_t)off, n);
			break;
		}
		if (h)
			wstore__sha256_update(h, buf, (size_t)r);
		if (fd >= 0)
			rc = write_full(fd, buf, (size_t)r, f->path);
		off += (uint64_t)r;
	}
	if (cfd >= 0)
		close(cfd);
	return rc;
}

int wstore__fetch_to_fd(wstore_store *s, const wstore__file_rec *f, int fd,
			void *buf, size_t cap, int verify,
			int (*progress)(uint64_t n, void *ctx), void *ctx)
{
	wstore__sha256 *h = verify ? wstore__sha256_new() : NULL;
	int rc;

	if (verify && !h)
		return -ENOMEM;
	rc = wstore__fetch_to_fd_from(s, f, fd, buf, cap, 0, h, progress, ctx);
	wstore__sha256_free(h);
	return rc;
}

int wstore__fetch_to_fd_from(wstore_store *s, const wstore__file_rec *f, int fd,
			     void *buf, size_t cap, uint64_t first,
			     wstore__sha256 *h,
			     int (*progress)(uint64_t n, void *ctx), void *ctx)
{
	int from_fd = chunk_fd_ok(s);
	uint64_t total = 0;
	int rc = 0;

	for (uint64_t c = 0; c < first && c < f->nchunks && rc == 0; c++) {
		uint64_t n;

		if ((rc = wstore__chunk_len(&n, f, c)) == 0)
			total += n;
	}
	for (uint64_t c = first; c < f->nchunks && rc == 0; c++) {
		uint64_t n;

		rc = wstore__chunk_len(&n, f, c);
		if (rc == 0 && from_fd) {
			rc = stream_chunk_fd(s, f, c, n, fd, buf, cap, h);
		} else if (rc == 0) {
			rc = wstore__read_chunk(s, f, c, buf, cap);
			if (rc == 0 && h)
				wstore__sha256_update(h, buf, (size_t)n);
			if (rc == 0 && fd >= 0)
				rc = write_full(fd, buf, (size_t)n, f->path);
		}
		if (rc < 0)
			break;
		/* start writeback now, so the fsync before the rename finds
		 * little left to do: disk writes overlap the next chunk's
		 * fetch and hash instead of following them */
		if (fd >= 0 && rc == 0)
			sync_file_range(fd, (off64_t)total, (off64_t)n,
					SYNC_FILE_RANGE_WRITE);
		total += n;
		if (rc == 0 && progress)
			rc = progress(n, ctx);
	}
	if (rc == 0 && total != f->size)
		rc = wstore__err(
			WSTORE_ECORRUPT,
			"file '%s': chunks hold %llu bytes, manifest says %llu",
			f->path, (unsigned long long)total,
			(unsigned long long)f->size);
	if (rc == 0 && h) {
		char hex[65];

		wstore__sha256_hex(h, hex);
		if (strcmp(hex, f->sha256) != 0)
			rc = wstore__err(
				WSTORE_ECORRUPT,
				"file '%s': sha256 mismatch (expected %s, got %s)",
				f->path, f->sha256, hex);
	}
	return rc;
}

/* Open the directory of output (the caller's own path: symlinks in it are
 * followed) and point *base at output's last component. */
static int open_out_dir(const char *output, const char **base)
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

/* Between chunks: a materialize ends within a chunk of wstore_interrupt
 * (SIGINT, SIGTERM in the CLI), its temp file removed. */
static int stop_on_interrupt(uint64_t n, void *ctx)
{
	(void)n;
	return wstore__interrupted()
		       ? wstore__err(WSTORE_ECANCELED,
				     "interrupted while writing '%s'",
				     (const char *)ctx)
		       : 0;
}

/* Stream f into a temp file next to output and rename it into place.  An
 * existing output that is not a regular file (a device, a FIFO, a
 * directory) is refused before anything is fetched.  The bytes are
 * hashed, so a file whose digest matches is the one opened, whichever
 * import wrote it; a mismatch or a missing chunk is judged by ck's guard
 * (generation.c): WSTORE_ECHANGED when the checkpoint was replaced. */
static int materialize(wstore_checkpoint *ck, wstore_store *s,
		       const wstore__file_rec *f, const char *output)
{
	size_t cap = (size_t)wstore__max_chunk(wstore_checkpoint_manifest(ck));
	wstore__durable d = { .fd = -1 };
	const char *base;
	void *buf = NULL;
	int dfd, rc;

	if ((dfd = open_out_dir(output, &base)) < 0)
		return dfd;
	rc = wstore__check_target(dfd, base, output);
	if (rc == 0 && !(buf = wstore__store_buf_alloc(s, cap)))
		rc = -ENOMEM;
	if (rc == 0)
		rc = wstore__durable_open(&d, dfd, 0666, output);
	if (rc == 0) {
		rc = wstore__fetch_to_fd(s, f, d.fd, buf, cap, 1,
					 stop_on_interrupt, (void *)output);
		if (rc < 0 && rc != WSTORE_ECANCELED)
			rc = wstore__checkpoint_settle(ck, f, rc);
	}
	if (rc == 0)
		rc = wstore__durable_commit(&d, base, output);
	else
		wstore__durable_abort(&d);
	close(dfd);
	wstore__store_buf_free(s, buf);
	return rc;
}

int wstore_materialize_file(wstore_store *s, const char *id, const char *path,
			    const char *output)
{
	wstore_checkpoint_options o = WSTORE_CHECKPOINT_OPTIONS_INIT;
	wstore_checkpoint *ck = NULL;
	const wstore_manifest *m;
	int64_t i;
	int rc;

	if (!output || !*output)
		return wstore__err(WSTORE_EINVAL, "no output file given");
	/* the lease first, then the manifest (lease.h), and the guard */
	o.what = "materialize";
	if ((rc = wstore_checkpoint_open_ext(&ck, s, id, &o)) < 0)
		return rc;
	m = wstore_checkpoint_manifest(ck);
	if ((i = wstore_manifest_find(m, path)) < 0)
		rc = wstore__err(WSTORE_ENOTFOUND,
				 "checkpoint '%s' has no file '%s'", id, path);
	else
		rc = materialize(ck, s, &m->files[i], output);
	wstore_checkpoint_free(ck);
	return rc;
}
