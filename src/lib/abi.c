/*
 * abi.c - option structs of every version in (abi.h); the sized structs
 * out are sized.c's.
 *
 * Each struct's first layout is that of the version node WSTORE_0; a
 * field added later goes at the end, its option struct's version is
 * bumped (with a line in the table below), and zero means its default.
 */
#include <stddef.h>
#include <string.h>

#include "abi.h"
#include "error.h"

/* bytes of a struct up to and including field */
#define UPTO(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* ---- option structs in ----------------------------------------------------
 */

/* sizes[v - 1] is the size of version v's struct (n versions) */
static int opts_in(void *dst, size_t dst_size, const void *src,
		   const void *defaults, const size_t *sizes, unsigned n,
		   const char *what)
{
	unsigned v;

	memset(dst, 0, dst_size);
	if (!src) {
		memcpy(dst, defaults, dst_size);
		return 0;
	}
	memcpy(&v, src, sizeof(v));
	if (v < 1 || v > n)
		return wstore__err(
			WSTORE_EINVAL,
			"%s of version %u: this library knows versions 1 to %u",
			what, v, n);
	memcpy(dst, src, sizes[v - 1]);
	return 0;
}

#define OPTS_IN(dst, src, type, what, ...)                                     \
	do {                                                                   \
		static const size_t sizes_[] = { __VA_ARGS__ };                \
		static const type defaults_ = type##_INIT_;                    \
		return opts_in(dst, sizeof(type), src, &defaults_, sizes_,     \
			       sizeof(sizes_) / sizeof(*sizes_), what);        \
	} while (0)

#define wstore_import_options_INIT_ WSTORE_IMPORT_OPTIONS_INIT
#define wstore_verify_options_INIT_ WSTORE_VERIFY_OPTIONS_INIT
#define wstore_gc_options_INIT_ WSTORE_GC_OPTIONS_INIT
#define wstore_pull_options_INIT_ WSTORE_PULL_OPTIONS_INIT
#define wstore_checkpoint_options_INIT_ WSTORE_CHECKPOINT_OPTIONS_INIT
#define wstore_delete_options_INIT_ WSTORE_DELETE_OPTIONS_INIT
#define wstore_hub_options_INIT_ WSTORE_HUB_OPTIONS_INIT

int wstore__import_opts(wstore_import_options *dst,
			const wstore_import_options *src)
{
	/* version 2 added on_evict and on_evict_ctx, 3 reflink */
	OPTS_IN(dst, src, wstore_import_options, "import options",
		UPTO(wstore_import_options, progress_ctx),
		UPTO(wstore_import_options, on_evict_ctx),
		UPTO(wstore_import_options, reflink));
}

int wstore__verify_opts(wstore_verify_options *dst,
			const wstore_verify_options *src)
{
	OPTS_IN(dst, src, wstore_verify_options, "verify options",
		UPTO(wstore_verify_options, on_file_ctx));
}

int wstore__gc_opts(wstore_gc_options *dst, const wstore_gc_options *src)
{
	OPTS_IN(dst, src, wstore_gc_options, "gc options",
		UPTO(wstore_gc_options, on_skip_ctx));
}

int wstore__pull_opts(wstore_pull_options *dst, const wstore_pull_options *src)
{
	OPTS_IN(dst, src, wstore_pull_options, "pull options",
		UPTO(wstore_pull_options, progress_ctx));
}

int wstore__checkpoint_opts(wstore_checkpoint_options *dst,
			    const wstore_checkpoint_options *src)
{
	OPTS_IN(dst, src, wstore_checkpoint_options, "checkpoint options",
		UPTO(wstore_checkpoint_options, no_lease),
		UPTO(wstore_checkpoint_options, require_lease));
}

int wstore__delete_opts(wstore_delete_options *dst,
			const wstore_delete_options *src)
{
	OPTS_IN(dst, src, wstore_delete_options, "delete options",
		UPTO(wstore_delete_options, progress_ctx));
}

int wstore__hub_opts(wstore_hub_options *dst, const wstore_hub_options *src)
{
	/* version 2 added the limits and tls_ca_file, 3 on_list,
	 * open_file and ctx */
	OPTS_IN(dst, src, wstore_hub_options, "hub options",
		UPTO(wstore_hub_options, reserved),
		UPTO(wstore_hub_options, tls_ca_file),
		UPTO(wstore_hub_options, ctx));
}
