/*
 * sized.c - the exported calls that fill a struct the caller sized
 * (wstore_*_sized; the headers' short forms pass sizeof(*out)): the
 * library fills its own, current struct and copies out what fits in the
 * caller's, zeroing a tail it does not know.  See abi.c for the options
 * coming in, and docs/architecture.md, "Interfaces and ABI".
 */
#include <stddef.h>
#include <string.h>

#include <wstore/lease.h>
#include <wstore/read.h>
#include <wstore/wstore.h>

#include "error.h"

/* bytes of a struct up to and including field */
#define UPTO(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* ---- sized structs out ----------------------------------------------------
 */

/* The caller's out_size against the first layout (min bytes). */
static int size_ok(size_t out_size, size_t min, const char *what)
{
	if (out_size >= min)
		return 0;
	return wstore__err(WSTORE_EINVAL,
			   "%s of %zu bytes is smaller than its first layout "
			   "(%zu bytes)",
			   what, out_size, min);
}

/* What of full (size bytes) fits in out (out_size bytes); a tail this
 * library does not know is zeroed. */
static void copy_out(void *out, size_t out_size, const void *full, size_t size)
{
	memcpy(out, full, out_size < size ? out_size : size);
	if (out_size > size)
		memset((char *)out + size, 0, out_size - size);
}

#define SIZED_OUT(out, out_size, type, first_last, call)                       \
	do {                                                                   \
		type full_;                                                    \
		int rc_ = size_ok(out_size, UPTO(type, first_last), #type);    \
		if (rc_ < 0)                                                   \
			return rc_;                                            \
		memset(&full_, 0, sizeof(full_));                              \
		rc_ = call;                                                    \
		if (rc_ == 0)                                                  \
			copy_out(out, out_size, &full_, sizeof(full_));        \
		return rc_;                                                    \
	} while (0)

int wstore_manifest_file_sized(wstore_file_info *out, size_t out_size,
			       const wstore_manifest *m, size_t i)
{
	SIZED_OUT(out, out_size, wstore_file_info, chunk_count,
		  wstore_manifest_file(&full_, m, i));
}

int wstore_safetensors_tensor_sized(wstore_tensor_info *out, size_t out_size,
				    const wstore_safetensors *ws, size_t i)
{
	SIZED_OUT(out, out_size, wstore_tensor_info, nbytes,
		  wstore_safetensors_tensor(&full_, ws, i));
}

int wstore_file_summary_sized(wstore_file_summary_info *out, size_t out_size,
			      wstore_file *f)
{
	SIZED_OUT(out, out_size, wstore_file_summary_info, dtypes,
		  wstore_file_summary(&full_, f));
}

int wstore_leases_get_sized(wstore_lease_info *out, size_t out_size,
			    const wstore_leases *ls, size_t i)
{
	SIZED_OUT(out, out_size, wstore_lease_info, expires_ms,
		  wstore_leases_get(&full_, ls, i));
}

int wstore_usage_get_sized(wstore_usage_info *out, size_t out_size,
			   const wstore_usage *u, size_t i)
{
	SIZED_OUT(out, out_size, wstore_usage_info, created_at,
		  wstore_usage_get(&full_, u, i));
}

/* out may be NULL, and gets the counts also when gc fails */
int wstore_gc_sized(wstore_gc_stats *out, size_t out_size, wstore_store *store,
		    const wstore_gc_options *opts)
{
	wstore_gc_stats full;
	int rc;

	if (out && (rc = size_ok(out_size, UPTO(wstore_gc_stats, skipped),
				 "wstore_gc_stats")) < 0)
		return rc;
	memset(&full, 0, sizeof(full));
	rc = wstore_gc(&full, store, opts);
	if (out)
		copy_out(out, out_size, &full, sizeof(full));
	return rc;
}
