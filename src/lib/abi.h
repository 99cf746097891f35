/*
 * abi.h - what lets the ABI grow (abi.c).
 *
 * Owns: the copies of the caller's option structs, laid out as the
 * header the caller was compiled with, into the library's own: every
 * version the library ever defined is copied into the current layout
 * (fields the caller's version lacks are zero, their default).  The
 * structs the library fills go out through sized.c.  See
 * docs/architecture.md, "Interfaces and ABI".
 */
#ifndef WSTORE_ABI_H
#define WSTORE_ABI_H

#include <wstore/lease.h>
#include <wstore/read.h>
#include <wstore/wstore.h>

/* *dst = the caller's *src (NULL: the defaults) in the current layout:
 * 0, or WSTORE_EINVAL naming a version this library does not know. */
int wstore__import_opts(wstore_import_options *dst,
			const wstore_import_options *src);
int wstore__verify_opts(wstore_verify_options *dst,
			const wstore_verify_options *src);
int wstore__gc_opts(wstore_gc_options *dst, const wstore_gc_options *src);
int wstore__pull_opts(wstore_pull_options *dst, const wstore_pull_options *src);
int wstore__checkpoint_opts(wstore_checkpoint_options *dst,
			    const wstore_checkpoint_options *src);
int wstore__delete_opts(wstore_delete_options *dst,
			const wstore_delete_options *src);
int wstore__hub_opts(wstore_hub_options *dst, const wstore_hub_options *src);

#endif
