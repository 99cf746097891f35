/*
 * wstore/read.h - the data plane of libwstore: read a READY checkpoint
 * without writing it out (checkpoint and file handles, pread-like range
 * reads, safetensors tensors), and pull a whole checkpoint into a directory.
 *
 * Same conventions as wstore.h: int returns (0 or a negative code, with a
 * thread-local message in wstore_last_error()), out parameters first,
 * opaque handles whose _free accepts NULL, options structs with a version.
 *
 * Lifetimes: a wstore_checkpoint must outlive the files opened from it, and
 * a wstore_file the safetensors handles opened on it; the store must outlive
 * the checkpoint.  All handles here may be used from several threads at
 * once (reads keep no shared mutable state except a locked buffer pool).
 */
#ifndef WSTORE_READ_H
#define WSTORE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "wstore.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- checkpoints and files --------------------------------------------- */

typedef struct wstore_checkpoint wstore_checkpoint;
typedef struct wstore_file wstore_file;

/*
 * Open checkpoint id for reading: reads and validates its manifest.
 * WSTORE_ENOTFOUND if there is none, WSTORE_ENOTREADY if it is FAILED (the
 * message carries the manifest's error).  The handle reads the import it
 * opened and no other: once the checkpoint is deleted, or deleted and
 * imported again under the same id, every read of it fails with
 * WSTORE_ECHANGED (docs/format.md, "Generations"); open it again to read
 * the new import.
 */
int wstore_checkpoint_open(wstore_checkpoint **out, wstore_store *store,
			   const char *id);
/*
 * The handle holds a read lease on the checkpoint (wstore/lease.h, what
 * "read") until wstore_checkpoint_free, so a delete waits for it or
 * refuses.  wstore_checkpoint_open_ext chooses what the lease says, or
 * (no_lease) takes none, for callers that lease by themselves (the
 * mount leases a checkpoint while a file of it is open).
 */
typedef struct wstore_checkpoint_options {
	unsigned version;
	const char *what; /* lease holder description; NULL = "read" */
	int no_lease;
	/* (version 2) A lease that cannot be written (a store this process
	 * may only read: -EACCES, -EPERM, -EROFS) fails the open, where it is
	 * otherwise read unleased: for servers, whose readers a delete must
	 * see.  Ignored with no_lease. */
	int require_lease;
} wstore_checkpoint_options;
#define WSTORE_CHECKPOINT_OPTIONS_VERSION 2
#define WSTORE_CHECKPOINT_OPTIONS_INIT                                         \
	{                                                                      \
		WSTORE_CHECKPOINT_OPTIONS_VERSION                              \
	}
int wstore_checkpoint_open_ext(wstore_checkpoint **out, wstore_store *store,
			       const char *id,
			       const wstore_checkpoint_options *opts);
/* The manifest, owned by ck (list files with wstore_manifest_file()). */
const wstore_manifest *wstore_checkpoint_manifest(const wstore_checkpoint *ck);
/*
 * Whether the checkpoint's manifest in the store is still, byte for byte,
 * the one ck was opened with (so still READY, and of the same import):
 * 1 if so; 0 if it changed or is gone (read it with wstore_manifest_read
 * to learn what it is now); a negative code when the store could not
 * tell.  Never parses: one read of the manifest and a compare, or on a
 * store of local files one fstat while the manifest read at open is not
 * replaced.  Thread-safe.  (WSTORE_1)
 */
int wstore_checkpoint_unchanged(wstore_checkpoint *ck);
void wstore_checkpoint_free(wstore_checkpoint *ck);

/* Open one file of ck by relative path; WSTORE_ENOTFOUND if absent. */
int wstore_file_open(wstore_file **out, wstore_checkpoint *ck,
		     const char *path);
uint64_t wstore_file_size(const wstore_file *f);
/* Relative path, owned by the checkpoint. */
const char *wstore_file_path(const wstore_file *f);
/*
 * Read up to len bytes at offset off into buf.  *out_n (may be NULL) gets
 * the bytes read: len, or fewer only at the end of the file (0 at or past
 * it).  Every chunk read is checked against the length the manifest
 * implies (WSTORE_ECORRUPT names the chunk).  Before returning, the read
 * is confirmed to be of the import ck opened: WSTORE_ECHANGED if the
 * checkpoint was deleted or replaced since (buf's contents are then
 * undefined; bytes returned by earlier calls were the opened import's).
 * A file of several chunks
 * whose record has chunk_size 0 (legacy) cannot be mapped:
 * WSTORE_EUNSUPPORTED.  On a store of local files (WSTORE_CAP_LOCAL_FILES)
 * a read of 4 MiB or more (here, or of tensors with
 * wstore_safetensors_read) is split into parts copied at once by the
 * calling thread and up to three helper threads of the checkpoint (one
 * fewer than the cores), started on the first such read and ended by
 * wstore_checkpoint_free; a helper busy with another caller's read is
 * not waited for (the caller copies that part itself).
 */
int wstore_file_pread(wstore_file *f, void *buf, size_t len, uint64_t off,
		      size_t *out_n);
/*
 * Memory for reads of ck's files, for a caller that keeps buffers for
 * many reads (a server's block buffers): at least size bytes, or NULL out
 * of memory.  On a store that moves data without a copy from memory it
 * knows (Mooncake: memory registered with its transfer engine), a
 * wstore_file_pread of whole chunks into such a buffer lands there
 * directly, with no bounce buffer and no copy; elsewhere it is plain
 * memory, 2 MiB aligned with huge pages when size is 2 MiB or more (its
 * first touch costs a page fault per 2 MiB, not per 4 KiB).  Free it
 * with wstore_read_buf_free on the same checkpoint, before
 * wstore_checkpoint_free.  Thread-safe.  (WSTORE_1)
 */
void *wstore_read_buf_alloc(wstore_checkpoint *ck, size_t size);
/* Free a buffer of wstore_read_buf_alloc(ck, ...); NULL is ignored. */
void wstore_read_buf_free(wstore_checkpoint *ck, void *buf);
/*
 * Zero-copy access for stores whose chunks are local files (the embedded
 * file store): for the chunk holding byte off of f, *out_fd gets a
 * read-only O_CLOEXEC file descriptor (owned by the caller, who closes
 * it), *out_fd_off the offset in it of file byte off, and *out_len the
 * bytes it holds from there on.  Where the store keeps the file whole
 * (one data file, docs/format.md "The embedded file store") the fd is
 * that file, *out_fd_off == off and *out_len the rest of the whole file
 * (size - off); where it keeps chunk files, the fd is the chunk's file
 * and *out_len runs to the end of that chunk (a file of one chunk is
 * both).  The file's size is checked (fstat) against what the manifest
 * implies (WSTORE_ECORRUPT names the file and chunk otherwise); like
 * wstore_file_pread nothing beyond the length is verified.  Once the fd
 * is open the checkpoint is confirmed to be still the import opened
 * (WSTORE_ECHANGED otherwise, and no fd): the fd then holds that import's
 * bytes for good, even if the checkpoint is later deleted or replaced
 * (data and chunk files are replaced, never rewritten).  WSTORE_EUNSUPPORTED
 * when the backend cannot hand out files (no open_fd, an untrusted or
 * write-once store) or the record cannot be mapped; WSTORE_EINVAL when off is
 * at or past the end.
 */
int wstore_file_chunk_fd(int *out_fd, uint64_t *out_fd_off, size_t *out_len,
			 wstore_file *f, uint64_t off);
/*
 * Bytes per wstore_file_pread call that a sequential reader of f should
 * use: 1 MiB where the backend reads parts of chunks (files, Redis), else
 * a whole chunk (at most 256 MiB), since a partial read there costs a
 * whole chunk's transfer.
 */
size_t wstore_file_read_size(const wstore_file *f);
void wstore_file_free(wstore_file *f);

/* ---- safetensors ------------------------------------------------------- */

typedef struct wstore_safetensors wstore_safetensors;

typedef struct wstore_tensor_info {
	const char *name;  /* owned by the safetensors handle */
	const char *dtype; /* "BF16", "F32", ... (static) */
	uint32_t ndim;
	const int64_t *shape; /* ndim entries, owned by the handle */
	uint64_t offset;      /* absolute offset of the data in the file */
	uint64_t nbytes;
} wstore_tensor_info;

/*
 * Read and validate f's safetensors header (docs/format.md, "Weight files").
 * A malformed header gives WSTORE_ECORRUPT with a message saying what is
 * wrong.  f must outlive the handle.
 */
int wstore_safetensors_open(wstore_safetensors **out, wstore_file *f);
/* Size of the JSON header (N) and the offset where tensor data starts. */
uint64_t wstore_safetensors_header_size(const wstore_safetensors *ws);
/* Number of tensors; they are indexed in file order (by offset). */
size_t wstore_safetensors_count(const wstore_safetensors *ws);
/* Fill info for tensor i; WSTORE_ERANGE if out of range. */
int wstore_safetensors_tensor_sized(wstore_tensor_info *out, size_t out_size,
				    const wstore_safetensors *ws, size_t i);
WSTORE__SIZED(int wstore_safetensors_tensor(wstore_tensor_info *out,
					    const wstore_safetensors *ws,
					    size_t i),
	      wstore_safetensors_tensor_sized(out, sizeof(*out), ws, i))
/* Index of the tensor with this name, or -1. */
int64_t wstore_safetensors_find(const wstore_safetensors *ws, const char *name);
/* Value of a __metadata__ key, or NULL (owned by the handle). */
const char *wstore_safetensors_metadata(const wstore_safetensors *ws,
					const char *key);
/*
 * Read n tensors, names[i] into bufs[i] (capacity caps[i] bytes, which
 * must be at least the tensor's size: WSTORE_ERANGE otherwise).  Each chunk
 * needed is read once, whole chunks straight into the caller's buffers
 * where possible.  An unknown name gives WSTORE_ENOTFOUND.
 */
int wstore_safetensors_read(wstore_safetensors *ws, const char *const *names,
			    void *const *bufs, const uint64_t *caps, size_t n);
void wstore_safetensors_free(wstore_safetensors *ws);

/* ---- inspect and structure checks ------------------------------------- */

typedef struct wstore_file_summary_info {
	const char *format; /* "safetensors", "gguf", "other" (static) */
	uint64_t tensor_count;
	uint64_t param_count;  /* sum over tensors of the shape product */
	uint64_t kv_count;     /* GGUF metadata pairs (0 otherwise) */
	uint32_t gguf_version; /* GGUF version (0 otherwise) */
	char dtypes[384];      /* sorted, comma-separated: "BF16,F32" */
} wstore_file_summary_info;

/*
 * Summarise a file by its suffix: .safetensors and .gguf headers are read
 * and validated (an invalid one returns its error), anything else is
 * "other" with zero counts.
 */
int wstore_file_summary_sized(wstore_file_summary_info *out, size_t out_size,
			      wstore_file *f);
WSTORE__SIZED(int wstore_file_summary(wstore_file_summary_info *out,
				      wstore_file *f),
	      wstore_file_summary_sized(out, sizeof(*out), f))

/*
 * Check what a byte-level verify cannot: each .safetensors header is valid,
 * each .gguf header parses, and model.safetensors.index.json (when present)
 * names only files that exist and tensors that exist in them.  on_problem
 * (may be NULL) is called once per problem with the file's path, a code and
 * a message.  Returns 0 when no problem was found, WSTORE_EVERIFY when some
 * were (the last error names the first), other codes when reading failed.
 */
int wstore_check_structure(wstore_checkpoint *ck,
			   wstore_verify_file_fn on_problem, void *ctx);

/* ---- pull -------------------------------------------------------------- */

typedef struct wstore_pull_options {
	unsigned version;
	const char *const *include; /* NULL-terminated globs, or NULL */
	const char *const *exclude; /* NULL-terminated globs, or NULL */
	uint32_t jobs;		    /* worker threads; 0 = cores */
	int no_verify;		    /* skip SHA-256 checks */
	int force;		    /* refetch files already present */
	wstore_progress_fn progress;
	void *progress_ctx;
} wstore_pull_options;
#define WSTORE_PULL_OPTIONS_VERSION 1
#define WSTORE_PULL_OPTIONS_INIT                                               \
	{                                                                      \
		WSTORE_PULL_OPTIONS_VERSION                                    \
	}

/*
 * Write every file of READY checkpoint id under dest at its relative path
 * (fnmatch globs, matched against the whole path: a file is pulled if it
 * matches some include pattern, or there are none, and no exclude pattern).
 * Every manifest path is validated before anything is written; directories
 * are created without following symlinks (a symlink where a directory is
 * expected is an error); each file goes to a partial file in its
 * directory, is checked (size, SHA-256 of the whole file unless
 * no_verify), fsynced and renamed into place.  A file already present
 * with the right size (and digest, when verifying) is skipped unless
 * force.  Canceled (WSTORE_ECANCELED: the progress callback returned
 * nonzero, as the CLI's does after ^C), the partial files of the files being
 * fetched stay, and the next pull of the same import into dest resumes them
 * (their kept chunks hashed again, only the rest fetched) unless force or
 * no_verify; on any other failure no partial or temp file is left behind
 * and the error names the file; files already in dest are never
 * removed.  A checkpoint deleted or replaced during the pull is
 * WSTORE_ECHANGED, and no file mixing two imports is ever renamed into
 * place (with no_verify too).
 */
int wstore_pull(wstore_store *store, const char *id, const char *dest,
		const wstore_pull_options *opts);

#ifdef __cplusplus
}
#endif

#endif
