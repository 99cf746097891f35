/*
 * source.h - what an import takes from its source directory (source.c):
 * the folders it skips, --include/--exclude patterns, the check that the
 * source looks like a checkpoint, and Hugging Face cache folders.
 */
#ifndef WSTORE_SOURCE_H
#define WSTORE_SOURCE_H

#include <wstore/wstore.h>

#include "scan.h"

/*
 * The files import takes: with src NULL, every file under opts->source
 * (a hub cache repo root resolved to its snapshot, as before sources had
 * rules); else src's directory under its rules, refused when it does not
 * look like a checkpoint (unless forced).  *dir is the malloc'ed
 * directory actually walked (NULL when it is opts->source itself).
 */
int wstore__source_scan(wstore__scan *out, char **dir, const wstore_source *src,
			const wstore_import_options *opts);

#endif
