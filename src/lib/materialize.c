/*
 * materialize.c - write one file of a checkpoint to the local filesystem,
 * and the chunk-streaming loop that pull and verify share: each chunk is
 * read into a reused buffer, hashed and written; the result is published
 * only when its size and SHA-256 match the manifest (durable.c: temp file,
 * fsync, rename, directory fsync), so a failure never leaves a partial file
 * at the final path.  Only a regular file (or a symlink, replaced, not
 * followed) is ever replaced.
 *
 * On a store that hands out its files (WSTORE_CAP_LOCAL_FILES: the
 * embedded file store) a chunk is streamed from its file, through
 * wstore_file_chunk_fd (a chunk file, or the one file of a file kept
 * whole, opened once for all its chunks), in PIECE-sized reads through
 * the start of the same buffer instead: the piece stays in the CPU cache
 * between the read, the hash and the write, where a whole 64 MiB chunk
 * goes out to memory and back twice.  The store's files are replaced,
 * never rewritten, so the open file keeps the bytes it had.
 *
 * A file kept whole need not pass through this process at all when it is
 * written to a file (wstore__fetch_whole): cloned (FICLONE) and read back
 * for its digest, or unverified copied by the kernel (copy_file_range).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
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

/* Piece of a store file read at a time: fits in a core's L2 cache. */
#define PIECE (512u << 10)

/* Whether the store hands out its files (wstore_file_chunk_fd works):
 * the capability says so by the same rule. */
static int chunk_fd_ok(wstore_store *s)
{
	return (wstore_store_caps(s) & WSTORE_CAP_LOCAL_FILES) != 0;
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

/* Compare h, finished, with f's digest. */
static int digest_check(const wstore__file_rec *f, wstore__sha256 *h)
{
	char hex[65];

	wstore__sha256_hex(h, hex);
	if (strcmp(hex, f->sha256) != 0)
		return wstore__err(
			WSTORE_ECORRUPT,
			"file '%s': sha256 mismatch (expected %s, got %s)",
			f->path, f->sha256, hex);
	return 0;
}

/* copy_file_range cannot serve this pair of files (another filesystem
 * before 5.19, a filesystem without it, a kernel without it). */
static int cfr_unsupported(int e)
{
	return e == EXDEV || e == EOPNOTSUPP || e == ENOSYS || e == EINVAL ||
	       e == EBADF || e == ENOTTY;
}

/*
 * [from, size) of the store's whole file src into fd at the same offsets
 * with copy_file_range: the kernel copies (or, on a filesystem that can,
 * shares the blocks) without the bytes passing through this process.
 * 1: done; 0: not possible here and nothing written; < 0: an error.
 */
static int copy_range(const wstore__file_rec *f, int src, int fd, uint64_t from)
{
	loff_t in = (loff_t)from, out = (loff_t)from;

	while ((uint64_t)in < f->size) {
		uint64_t left = f->size - (uint64_t)in;
		ssize_t r = copy_file_range(
			src, &in, fd, &out,
			left > (1u << 30) ? (1u << 30) : (size_t)left, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (uint64_t)in == from && cfr_unsupported(errno))
			return 0;
		if (r < 0)
			return wstore__errc(-errno,
					    "file '%s': cannot copy it from "
					    "the store",
					    f->path);
		if (r == 0)
			return wstore__err(WSTORE_ECORRUPT,
					   "file '%s': the store's file ends "
					   "at byte %lld, expected %" PRIu64,
					   f->path, (long long)in, f->size);
	}
	return 1;
}

int wstore__fetch_whole(wstore_store *s, wstore_checkpoint *ck,
			const wstore__file_rec *f, int fd, int rfd,
			uint64_t from, wstore__sha256 *h, void *buf, size_t cap,
			int (*progress)(uint64_t n, void *ctx), void *ctx,
			int *how)
{
	wstore_file *wf = NULL;
	uint64_t fo = 0, done;
	size_t len = 0, piece = cap < PIECE ? cap : PIECE;
	struct stat st;
	int src = -1, rc;

	if (how)
		*how = WSTORE__WHOLE_NONE;
	if (!f->size || from >= f->size || !chunk_fd_ok(s) || (h && rfd < 0))
		return 0;
	if (wstore_file_open(&wf, ck, f->path) < 0)
		return 0;
	/* asked at from: the bytes before it may be gone (a resumed pull
	 * needs none of them).  Any failure (not kept whole, a damaged or
	 * missing file, the checkpoint replaced) is left to the streaming
	 * path, which names the chunk at fault. */
	rc = wstore_file_chunk_fd(&src, &fo, &len, wf, from);
	wstore_file_free(wf);
	if (rc < 0)
		return 0;
	/* the fd must be the file, byte for byte: FICLONE takes all of it */
	if (fo != from || len != f->size - from || fstat(src, &st) < 0 ||
	    (uint64_t)st.st_size != f->size) {
		close(src);
		return 0;
	}
	rc = 0;
	if (from == 0 && ioctl(fd, FICLONE, src) == 0) {
		rc = 1;
		if (how)
			*how = WSTORE__WHOLE_CLONED;
	}
	/* a kernel copy only unverified: a verified copy must read every
	 * byte anyway, and the streaming path hashes each piece while it is
	 * in the CPU cache between its read and its write (one pass, with
	 * writeback started per chunk), where a kernel copy and then a read
	 * back for the digest make two (measured slower: performance.md) */
	if (rc == 0 && !h && (rc = copy_range(f, src, fd, from)) == 1 && how)
		*how = WSTORE__WHOLE_COPIED;
	close(src);
	if (rc <= 0)
		return rc;
	/*
	 * Verify what fd now holds, read back through rfd, not the store's
	 * file.  For a clone the two are the same blocks, and the store
	 * never rewrites a published file (it replaces it by rename), so
	 * hashing the store's file before or after the clone would give the
	 * same digest; but that leans on the store's promise, and for
	 * copy_file_range (a real copy on most filesystems) it would not
	 * cover the copy at all.  Reading the destination back checks the
	 * bytes a reader of it will get, at the same cost: one read of the
	 * file, as the streaming path does.
	 */
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != f->size)
		return wstore__err(WSTORE_ECORRUPT,
				   "file '%s': %llu bytes written, manifest "
				   "says %llu",
				   f->path, (unsigned long long)st.st_size,
				   (unsigned long long)f->size);
	for (done = from; h && done < f->size;) {
		size_t want = f->size - done < piece ? (size_t)(f->size - done)
						     : piece;
		ssize_t r = pread(rfd, buf, want, (off_t)done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? wstore__errc(-errno,
						    "file '%s': cannot read "
						    "back what was written",
						    f->path)
				     : wstore__err(WSTORE_ECORRUPT,
						   "file '%s': short after "
						   "the copy",
						   f->path);
		wstore__sha256_update(h, buf, (size_t)r);
		done += (uint64_t)r;
	}
	if (h && (rc = digest_check(f, h)) < 0)
		return rc;
	if (progress && (rc = progress(f->size - from, ctx)) < 0)
		return rc;
	return 1;
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
 * directory) is refused before anything is fetched.  A file the store
 * keeps whole is cloned instead when it can be (wstore__fetch_whole),
 * and read back for the digest.  The bytes are
 * hashed, so a file whose digest matches is the one opened, whichever
 * import wrote it; a mismatch or a missing chunk is judged by ck's guard
 * (generation.c): WSTORE_ECHANGED when the checkpoint was replaced. */
static int materialize(wstore_checkpoint *ck, wstore_store *s,
		       const wstore__file_rec *f, const char *output)
{
	size_t cap = (size_t)wstore__max_chunk(wstore_checkpoint_manifest(ck));
	wstore__durable d = { .fd = -1 };
	wstore__sha256 *h = NULL;
	const char *base;
	void *buf = NULL;
	int dfd, rfd = -1, rc;

	if ((dfd = wstore__open_out_dir(output, &base)) < 0)
		return dfd;
	rc = wstore__check_target(dfd, base, output);
	if (rc == 0 && !(buf = wstore__store_buf_alloc(s, cap)))
		rc = -ENOMEM;
	if (rc == 0 && !(h = wstore__sha256_new()))
		rc = -ENOMEM;
	if (rc == 0)
		rc = wstore__durable_open(&d, dfd, 0666, output);
	if (rc == 0) {
		rfd = openat(dfd, d.tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		rc = rfd < 0 ? 0
			     : wstore__fetch_whole(s, ck, f, d.fd, rfd, 0, h,
						   buf, cap, stop_on_interrupt,
						   (void *)output, NULL);
		if (rc == 0)
			rc = wstore__fetch_to_fd_from(s, f, d.fd, buf, cap, 0,
						      h, stop_on_interrupt,
						      (void *)output);
		else if (rc == 1)
			rc = 0;
		if (rc < 0 && rc != WSTORE_ECANCELED)
			rc = wstore__checkpoint_settle(ck, f, rc);
	}
	if (rfd >= 0)
		close(rfd);
	if (rc == 0)
		rc = wstore__durable_commit(&d, base, output);
	else
		wstore__durable_abort(&d);
	close(dfd);
	wstore__sha256_free(h);
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
